"""Payload identification on the simulated Panda: classical regressor least squares and CSVGD.

The recording is ``dynid.sim.panda_payload`` (1.2 kg on the flange, 10 s of a 5-harmonic Fourier
excitation at 1 kHz, 1e-4 rad encoder and 0.05 N·m torque-sensor noise), written as a bag and
read back with dynid's bag reader, as a user's recording would be. Cases (``case`` names):

- ``panda_payload/regressor_ls``: the classical method (FIGAROH, FloBaRoID; Gaz et al. 2019 for
  the whole arm): zero-phase filtered and differentiated encoders, the nominal arm's torques
  subtracted, the ten inertial parameters of the flange body by linear least squares
  (:mod:`dynid.estimators.baselines.regressor_ls`).
- ``panda_payload/csvgd``: CSVGD on ``config/problems/panda_payload.yaml`` (mass and centre of
  mass free, torque likelihood ``kind: inverse_dynamics``), built by ``load_problem`` on the same
  bag and configured through the estimator registry.

Metrics: ``mass_rel_err`` = |m̂ − m| / m, ``com_err_m`` = ‖ĉ − c‖ (m, flange frame), ``wall_s``
of the fit alone; for CSVGD the posterior mean and ``in_95`` = 1 when every free parameter's
truth lies within mean ± 1.96 σ of its marginal (σ from the particle spread), else 0.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dynid.data import BagLayout, read_bag
from dynid.estimators.baselines.regressor_ls import fit_payload
from dynid.model.robot import load_robot
from dynid.problem_file import load_problem
from dynid.records import Record
from dynid.resources import repo_root
from dynid.sim import panda_payload, read_truth
from dynid_bench.fitting import run_fit

__all__ = ["PROBLEM_FILE", "add_arguments", "run"]

METHODS = ("regressor_ls", "csvgd")
PROBLEM_FILE = repo_root() / "config" / "problems" / "panda_payload.yaml"
COM = ("payload/com_x", "payload/com_y", "payload/com_z")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--seed", type=int, default=0, help="scenario and estimator seed")
    parser.add_argument(
        "--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}"
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="recorded seconds (default 10, quick 4)"
    )
    parser.add_argument(
        "--particles", type=int, default=None, help="CSVGD particles (default: the problem file's)"
    )
    parser.add_argument(
        "--iterations", type=int, default=None, help="CSVGD iterations (default: problem file's)"
    )


def _truth(truth: dict[str, Any]) -> tuple[float, np.ndarray]:
    params = truth["parameters"]
    return float(params["payload/mass"]), np.array([params[name] for name in COM])


def _error_records(
    case: str, mass: float, com: np.ndarray, truth: dict[str, Any], wall: float, notes: str
) -> list[Record]:
    true_mass, true_com = _truth(truth)
    spec = [
        ("mass_kg", mass, "kg", "lower"),
        ("mass_rel_err", abs(mass - true_mass) / true_mass, "", "lower"),
        ("com_err_m", float(np.linalg.norm(com - true_com)), "m", "lower"),
        ("wall_s", wall, "s", "lower"),
    ]
    return [Record(case, metric, float(value), unit, better=better, notes=notes)
            for metric, value, unit, better in spec]  # fmt: skip


def _regressor(bag: Path, truth: dict[str, Any], seed: int) -> list[Record]:
    dataset, _ = read_bag(bag, BagLayout.from_mapping(truth["layout"]))
    robot = load_robot("panda")
    start = time.perf_counter()
    fit = fit_payload(robot, dataset[0], panda_payload.PAYLOAD_LINK)
    wall = time.perf_counter() - start
    notes = (
        f"simulated seed {seed}, {dataset[0].t[-1]:.3g} s at 1 kHz; 10 Hz zero-phase Butterworth, "
        f"central differences, 0.25 s trimmed; regressor condition number "
        f"{fit.condition_number:.3g}; inertia not scored"
    )
    records = _error_records("panda_payload/regressor_ls", fit.mass, fit.com, truth, wall, notes)
    records.append(
        Record("panda_payload/regressor_ls", "residual_rmse_nm", fit.rmse, "N*m", notes=notes)
    )
    return records


def _csvgd(args: argparse.Namespace, bag: Path, truth: dict[str, Any]) -> list[Record]:
    from dynid.estimators.registry import resolve_estimator

    problem, pf = load_problem(PROBLEM_FILE, bag=bag, device=args.device)
    overrides = {"num_particles": args.particles, "max_iterations": args.iterations,
                 "seed": args.seed}  # fmt: skip
    resolved = resolve_estimator(
        "csvgd", pf.estimator, {k: v for k, v in overrides.items() if v is not None}
    )
    result = run_fit(resolved, problem, threads=1)
    post, wall = result.posterior, result.wall_s
    mean = post.as_dict()
    std = dict(zip(post.names, post.std().tolist(), strict=True))
    params = truth["parameters"]
    inside = [abs(params[n] - mean[n]) <= 1.96 * std[n] for n in post.names]
    settings = resolved.settings
    notes = (
        f"N={settings.get('num_particles')}, {post.iteration} it, torque likelihood "
        f"(cut-off {problem.likelihood.cutoff_hz} Hz, stride {problem.likelihood.stride}); "
        f"truth within mean ± 1.96 σ for {sum(inside)}/{len(inside)} of {post.names}"
    )
    com = np.array([mean[n] for n in COM])
    records = _error_records("panda_payload/csvgd", mean["payload/mass"], com, truth, wall, notes)
    records += [
        Record("panda_payload/csvgd", "in_95", float(all(inside)), "", better="higher",
               notes=notes),
        Record("panda_payload/csvgd", "iterations", float(post.iteration), "", better="higher",
               notes=notes),
    ]  # fmt: skip
    return records


def run(args: argparse.Namespace) -> list[Record]:
    """Simulate the recording into a bag, then fit it with each method of ``--methods``."""
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise ValueError(f"--methods: unknown {unknown}; choose from {list(METHODS)}")
    quick = getattr(args, "quick", False)
    duration = args.duration if args.duration is not None else (4.0 if quick else 10.0)
    if quick:
        args.particles = args.particles if args.particles is not None else 8
        args.iterations = args.iterations if args.iterations is not None else 20
    records: list[Record] = []
    with tempfile.TemporaryDirectory(prefix="dynid-payload-") as tmp:
        bag = Path(tmp) / "panda_payload.mcap"
        panda_payload.simulate(args.seed, bag, duration=duration)
        truth = read_truth(bag)
        if "regressor_ls" in methods:
            records += _regressor(bag, truth, args.seed)
        if "csvgd" in methods:
            records += _csvgd(args, bag, truth)
    return records
