"""A whole Panda from real torques: held-out torque prediction of identified models (issue 31).

Data: the Panda of Gaz et al. 2019 on a 5-harmonic Fourier excitation, two recordings in the
shared data (``panda-gaz2019/first_half_period`` and ``repeat``, 1 kHz joint positions, velocities
and torque-sensor readings), read, filtered (10 Hz zero-phase, 0.25 s trimmed) and scored as
``config/problems/panda_whole_arm.yaml`` says; every model is scored on every filtered sample
(:func:`dynid.validation.torque_residuals`).

Splits: train on ``first_half_period`` and score on ``repeat`` (``rmse_heldout``, per joint
``rmse_heldout_j1`` … ``_j7``; the same motion, where a flexible fit is at its best); train on each
bag and score on the other (``rmse_lobo``, the residuals of both directions pooled); fit both bags
and score them (``rmse_train``).

Rows (``case`` ``panda_real/<method>``):

- ``nominal``: the example-robot-data URDF (its inertials are Gaz et al.'s, plus the hand, which
  these recordings did not carry, and 0.003 N·m·s/rad damping); no fit.
- ``gaz2019``: Gaz et al.'s published physically consistent parameters (REFERENCE-FACTS: links
  1–7, no hand) with their sigmoid friction; no fit.
- ``regressor_lsq``: the classical unconstrained regressor least squares, 70 inertial parameters
  plus viscous, Coulomb and offset per joint (:mod:`dynid.objective.linear`).
- ``consistent_lsq``: dynid's convex physically consistent fit of the problem file.
- ``lm``: dynid's Levenberg–Marquardt joint state and parameter estimation on the same problem,
  warm-started from ``consistent_lsq`` (from the nominal values it had not converged after 20
  iterations, 89 s, 0.73 N·m held out).
- ``csvgd``: dynid's CSVGD on the same problem (16 particles, 300 iterations, learning rate
  0.01), its particles drawn from ``consistent_lsq``'s Laplace posterior; the MAP particle is
  scored. From the prior's draws it had not converged after 800 iterations (5.6 N·m held out).
- ``figaroh``, ``figaroh_physical``: FIGAROH (``figaroh`` 1.0.2, in an environment of its own,
  ``build/figaroh-venv``, that ``scripts/setup --figaroh`` creates; without it these rows are
  skipped with a line saying so) on the same filtered samples and split
  (:mod:`dynid_bench.figaroh_runner`): its default identification (base parameters by double QR,
  ordinary least squares; viscous and static friction ``sign(v)`` and an offset per joint) and
  its physically consistent effort fit (a pseudo-inertia LMI per link, a light pull toward the
  URDF's values).

Columns: ``consistent`` (1 when every link's pseudo-inertia is positive definite), ``wall_s``
(the fit on ``first_half_period``; ``wall_s_both`` for both bags), and for ``consistent_lsq`` the
held-out RMSE over the RMS predicted σ (``heldout_over_sigma``).

Filter sweep (``--cutoffs``, e.g. ``--cutoffs 2,3,5,10,20``; none by default): for each cut-off
the problem is rebuilt with that ``likelihood.cutoff_hz`` (everything else as the problem file
says) and ``nominal``, ``gaz2019``, ``regressor_lsq`` and ``consistent_lsq`` are trained on
``first_half_period`` and scored on ``repeat`` (``panda_real_cutoff/<method>/fc=<Hz>``,
``rmse_heldout``; ``panda_real_cutoff/gap/fc=<Hz>``, ``rmse_heldout_gap``: consistent_lsq's minus
regressor_lsq's). The scored torques are filtered at the same cut-off, so these RMSEs compare only
with each other at equal cut-off; the shipped 10 Hz comes from the excitation's bandwidth, not
from this sweep.

Synthetic twin (``panda_twin/<method>``): a Panda without hand simulated with Gaz et al.'s
parameters and sigmoid friction as truth, on the real excitation: the 5-harmonic Fourier series
of Gaz et al. (ω_f = 0.15π) fitted by least squares to ``first_half_period``'s recorded joint
positions, sampled at 1 kHz over the bag's duration, with analytic velocities and accelerations.
Torque noise is low-passed to the real residuals' spectrum and scaled to the consistent fit's
per-joint held-out residual on the real data; ``base_rel_err``: median relative error of the
well-excited inertial base parameters (their σ below 5 % of their value), ``coverage_95``: the
share of all inertial base parameters whose truth lies in the reported 95 % interval. The
fitted friction (viscous, Coulomb, offset) is not the truth's sigmoid, so the twin measures the
estimator under the model error the real data have too. ``--twin-seeds`` realisations (noise
drawn anew for each) are pooled: one realisation's figures move with tiny changes of its inputs
(which base parameters pass the 5 % test changes), so a single twin is not a measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pinocchio as pin
import torch

from dynid.data.preprocess import lowpass
from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.registry import resolve_estimator
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import RobotModel, robot_urdf
from dynid.objective.linear import LinearLayout, linear_torque_model, pseudo_inertia
from dynid.objective.torque import TorqueSamples
from dynid.posterior import Posterior
from dynid.problem import Problem
from dynid.problem_file import ProblemFile, read_problem_file
from dynid.records import Record
from dynid.resources import repo_root, shared_data_dir
from dynid.sim.mujoco.panda_payload import GAZ2019_PHI1
from dynid.sim.panda_payload import fit_fourier_coefficients, fourier_trajectory
from dynid.validation import torque_residuals, validate
from dynid_bench.fitting import run_fit

__all__ = [
    "CUTOFF_METHODS",
    "FIGAROH_METHODS",
    "FIGAROH_PYTHON",
    "GAZ_FRICTION",
    "GAZ_LINKS",
    "METHODS",
    "PROBLEM_FILE",
    "add_arguments",
    "parse_cutoffs",
    "run",
    "runnable_methods",
]

PROBLEM_FILE = repo_root() / "config" / "problems" / "panda_whole_arm.yaml"
BAGS = ("first_half_period", "repeat")
METHODS = ("nominal", "gaz2019", "regressor_lsq", "figaroh", "figaroh_physical",
           "consistent_lsq", "lm", "csvgd")  # fmt: skip
# the rows of the filter sweep (--cutoffs)
CUTOFF_METHODS = ("nominal", "gaz2019", "regressor_lsq", "consistent_lsq")
FIGAROH_METHODS = ("figaroh", "figaroh_physical")
#: The interpreter of FIGAROH's own environment (``scripts/setup --figaroh``).
FIGAROH_PYTHON = repo_root() / "build" / "figaroh-venv" / "bin" / "python"
JOINTS = tuple(f"panda_joint{j}" for j in range(1, 8))

# Gaz et al. 2019, Tables VIII-IX (REFERENCE-FACTS.md): mass (kg), centre of mass (m, link frame;
# c1_z has no effect and is taken as 0), inertia about it (xx, xy, xz, yy, yz, zz; kg·m²)
GAZ_LINKS = {
    "panda_link1": (4.970684, (3.875e-3, 2.081e-3, 0.0),
                    (7.0337e-1, -1.39e-4, 6.772e-3, 7.0661e-1, 1.9169e-2, 9.117e-3)),
    "panda_link2": (0.646926, (-3.141e-3, -2.872e-2, 3.495e-3),
                    (7.962e-3, -3.925e-3, 1.0254e-2, 2.811e-2, 7.04e-4, 2.5995e-2)),
    "panda_link3": (3.228604, (2.7518e-2, 3.9252e-2, -6.6502e-2),
                    (3.7242e-2, -4.761e-3, -1.1396e-2, 3.6155e-2, -1.2805e-2, 1.083e-2)),
    "panda_link4": (3.587895, (-5.317e-2, 1.04419e-1, 2.7454e-2),
                    (2.5853e-2, 7.796e-3, -1.332e-3, 1.9552e-2, 8.641e-3, 2.8323e-2)),
    "panda_link5": (1.225946, (-1.1953e-2, 4.1065e-2, -3.8437e-2),
                    (3.5549e-2, -2.117e-3, -4.037e-3, 2.9474e-2, 2.29e-4, 8.627e-3)),
    "panda_link6": (1.666555, (6.0149e-2, -1.4117e-2, -1.0517e-2),
                    (1.964e-3, 1.09e-4, -1.158e-3, 4.354e-3, 3.41e-4, 5.433e-3)),
    "panda_link7": (0.735522, (1.0517e-2, -4.252e-3, 6.1597e-2),
                    (1.2516e-2, -4.28e-4, -1.196e-3, 1.0027e-2, -7.41e-4, 4.815e-3)),
}  # fmt: skip
# their Table I: φ1 (N·m), φ2 (s/rad), φ3 (rad/s) per joint
GAZ_FRICTION = (
    GAZ2019_PHI1,
    (5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336),
    (0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047, 0.0035526),
)
# their validation (10 other trajectories, not public): RMSE per joint with p̂ (N·m)
GAZ_VALIDATION_RMSE = (0.64, 1.01, 0.77, 0.65, 0.42, 0.20, 0.16)
# the figures on repeat (N·m) and the fast estimator's time budget (s)
TARGET_HELDOUT = 0.117
TARGET_WALL = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument(
        "--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}"
    )
    parser.add_argument("--no-twin", action="store_true", help="skip the synthetic twin")
    parser.add_argument("--seed", type=int, default=0, help="twin and CSVGD seed")
    parser.add_argument(
        "--twin-seeds",
        type=_positive_int,
        default=20,
        help="twin realisations (noise draws), seeds --seed and up",
    )
    parser.add_argument(
        "--cutoffs",
        type=parse_cutoffs,
        default=(),
        help="comma list of low-pass cut-offs (Hz) for the filter sweep: held-out RMSE of "
        f"{', '.join(CUTOFF_METHODS)} at each, the scored torques filtered alike "
        "(default: no sweep)",
    )


def _positive_int(text: str) -> int:
    """``text`` as an integer ≥ 1.

    Raises:
        argparse.ArgumentTypeError: it is not one.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {value}")
    return value


def parse_cutoffs(text: str) -> tuple[float, ...]:
    """``--cutoffs``: a comma list of finite frequencies > 0 Hz (empty items ignored, ``""``: none).

    Raises:
        argparse.ArgumentTypeError: an item is not a number, or not finite and > 0.
    """
    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        values = tuple(float(item) for item in items)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of numbers (Hz): {text!r}") from None
    bad = [item for item, value in zip(items, values, strict=True)
           if not (math.isfinite(value) and value > 0.0)]  # fmt: skip
    if bad:
        raise argparse.ArgumentTypeError(
            f"cut-offs must be finite and > 0 Hz, got {', '.join(bad)}"
        )
    return values


# ------------------------------------------------------------------------------ models
@dataclass
class _Model:
    """A fitted (or published) model: its residuals on held-out trajectories."""

    residuals: Callable[[Sequence[Trajectory]], np.ndarray]
    consistent: bool
    wall_s: float
    posterior: Posterior | None = None
    problem: Problem | None = None


def _gaz_problem(problem: Problem) -> tuple[Problem, np.ndarray]:
    """``problem`` on the Panda without hand carrying Gaz et al.'s inertials, with their sigmoid
    friction (and no other) as the parameters, and the parameter values."""
    robot = RobotModel.from_urdf(_gaz_urdf(), name="panda_gaz2019",
                                 locked_joints={"panda_finger_joint1": 0.0,
                                                "panda_finger_joint2": 0.0})  # fmt: skip
    params, values = [], []
    for j, joint in enumerate(JOINTS):
        for field, value in (("sigmoid_scale", GAZ_FRICTION[0][j]),
                             ("sigmoid_rate", GAZ_FRICTION[1][j]),
                             ("sigmoid_shift", GAZ_FRICTION[2][j]), ("damping", 0.0)):  # fmt: skip
            params.append(Parameter(f"{joint}/{field}", value - 1.0, value + 1.0))
            values.append(value)
    return dataclasses.replace(problem, robot=robot, spec=ParameterSpec(params)), np.array(values)


def _gaz_urdf() -> str:
    """The example-robot-data Panda with Gaz et al.'s link inertials and the hand and fingers
    massless (1e-9 kg: the URDF checker wants a mass), as URDF XML."""
    xml = robot_urdf("panda").read_text(encoding="utf-8")

    def inertial(mass: float, com: Sequence[float], inertia: Sequence[float]) -> str:
        xx, xy, xz, yy, yz, zz = inertia
        return (f'<inertial><origin rpy="0 0 0" xyz="{com[0]} {com[1]} {com[2]}"/>'
                f'<mass value="{mass}"/><inertia ixx="{xx}" ixy="{xy}" ixz="{xz}" iyy="{yy}" '
                f'iyz="{yz}" izz="{zz}"/></inertial>')  # fmt: skip

    massless = (1e-9, (0.0, 0.0, 0.0), (1e-12, 0.0, 0.0, 1e-12, 0.0, 1e-12))
    hand = dict.fromkeys(("panda_hand", "panda_leftfinger", "panda_rightfinger"), massless)
    for link, (mass, com, inertia) in {**GAZ_LINKS, **hand}.items():
        block = inertial(mass, com, inertia)
        pattern = rf'(<link name="{link}">.*?)<inertial>.*?</inertial>'
        xml, count = re.subn(pattern, lambda m, b=block: m.group(1) + b, xml, count=1,
                             flags=re.S)  # fmt: skip
        if count != 1:
            raise RuntimeError(f"the Panda URDF has no inertial for {link}")
    return xml


def _consistent(x_inertial: np.ndarray) -> bool:
    blocks = np.asarray(x_inertial).reshape(-1, 10)
    return bool(all(np.linalg.eigvalsh(pseudo_inertia(b))[0] > 0.0 for b in blocks))


def _theta_model(problem: Problem, post: Posterior, wall: float) -> _Model:
    theta = post.map()
    layout = LinearLayout.of(problem)
    x = layout.x_of_theta(theta)
    return _Model(
        residuals=lambda trajs: torque_residuals(problem, theta, trajs),
        consistent=_consistent(x[: layout.num_inertial]),
        wall_s=wall,
        posterior=post,
        problem=problem,
    )


def _laplace_particles(post: Posterior, problem: Problem, n: int, seed: int) -> Posterior:
    """``n`` particles drawn from the Gaussian of ``post``'s MAP and covariance, in the box."""
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(post.map(), post.cov(), size=n, method="eigh")
    lower, upper = problem.spec.lower.numpy(), problem.spec.upper.numpy()
    return Posterior(particles=np.clip(draws, lower, upper), names=post.names, units=post.units)


def _fit(method: str, problem: Problem, args: argparse.Namespace) -> _Model:
    quick = bool(getattr(args, "quick", False))
    if method == "nominal":
        theta = problem.spec.nominal_theta(problem.robot).numpy()
        return _Model(lambda trajs: torque_residuals(problem, theta, trajs), True, 0.0)
    if method == "gaz2019":
        gaz, values = _gaz_problem(problem)
        return _Model(lambda trajs: torque_residuals(gaz, values, trajs), True, 0.0)
    if method == "regressor_lsq":
        start = time.perf_counter()
        model = linear_torque_model(problem)
        x, *_ = np.linalg.lstsq(model.A, model.y, rcond=None)
        wall = time.perf_counter() - start
        every = problem.with_likelihood(stride=1)

        def residuals(trajs: Sequence[Trajectory]) -> np.ndarray:
            return linear_torque_model(every, trajs).residuals(x)

        return _Model(residuals, _consistent(x[: model.layout.num_inertial]), wall)
    if method in FIGAROH_METHODS:
        return _figaroh(method, problem)
    warm = run_fit(resolve_estimator("consistent_lsq"), problem)
    if method == "consistent_lsq":
        return _theta_model(problem, warm.posterior, warm.wall_s)
    if method == "lm":
        settings = {"stride": 10, "max_iterations": 3 if quick else 10}
        result = run_fit(resolve_estimator("lm", None, settings), problem,
                         warm_start=warm.posterior)  # fmt: skip
        return _theta_model(problem, result.posterior, result.wall_s)
    if method == "csvgd":
        n = 8 if quick else 16
        settings = {"num_particles": n, "max_iterations": 20 if quick else 300,
                    "learning_rate": 0.01, "seed": args.seed}  # fmt: skip
        particles = _laplace_particles(warm.posterior, problem, n, args.seed)
        result = run_fit(resolve_estimator("csvgd", None, settings), problem,
                         warm_start=particles)  # fmt: skip
        return _theta_model(problem, result.posterior, result.wall_s)
    raise ValueError(f"unknown method {method!r}; methods: {METHODS}")


def runnable_methods(methods: Sequence[str]) -> list[str]:
    """``methods`` without the FIGAROH rows when :data:`FIGAROH_PYTHON` does not exist; their
    omission is printed in one line naming the setup command that installs FIGAROH."""
    skipped = [m for m in methods if m in FIGAROH_METHODS]
    if not skipped or FIGAROH_PYTHON.exists():
        return list(methods)
    print(f"panda_real: skipping {', '.join(skipped)}: FIGAROH is not installed "
          f"({FIGAROH_PYTHON} missing); scripts/setup --figaroh installs it")  # fmt: skip
    return [m for m in methods if m not in FIGAROH_METHODS]


def _figaroh(method: str, problem: Problem) -> _Model:
    """A FIGAROH row (module notes): fitted on ``problem``'s samples, scored on every filtered
    sample of the trajectories its residuals are asked for."""
    every = problem.with_likelihood(stride=1)
    estimator = "ols" if method == "figaroh" else "physical"

    def samples(prefix: str, prob: Problem, trajs: Sequence[Trajectory]) -> dict[str, np.ndarray]:
        parts = [TorqueSamples.of(prob, t) for t in trajs]
        return {f"{prefix}_{k}": torch.cat([getattr(p, f) for p in parts]).numpy().astype(float)
                for k, f in (("q", "q"), ("v", "v"), ("a", "a"), ("tau", "u"))}  # fmt: skip

    def run(trajs: Sequence[Trajectory]) -> tuple[np.ndarray, float, np.ndarray]:
        with tempfile.TemporaryDirectory() as tmp:
            path_in, path_out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
            score = samples("score0", every, trajs)
            np.savez(path_in, model=np.array(problem.robot.model.saveToString()),
                     score_count=np.array(1), **samples("train", problem, problem.dataset),
                     **score)  # fmt: skip
            runner = Path(__file__).with_name("figaroh_runner.py")
            subprocess.run([str(FIGAROH_PYTHON), "-W", "ignore", str(runner), str(path_in),
                            str(path_out)], check=True)  # fmt: skip
            out = np.load(path_out)
            residuals = score["score0_tau"] - out[f"{estimator}_pred0"]
            return residuals, float(out[f"{estimator}_wall_s"]), out[f"{estimator}_min_eig"]

    _, wall, min_eig = run(list(problem.dataset))
    consistent = bool(np.all(min_eig > -1e-9)) if estimator == "physical" else False
    return _Model(lambda trajs: run(trajs)[0], consistent, wall)


# ------------------------------------------------------------------------------ real data
def _rms(residuals: np.ndarray, axis: int | None = None) -> np.ndarray:
    return np.sqrt(np.mean(residuals**2, axis=axis))


def _bags(pf: ProblemFile) -> tuple[Dataset, Dataset]:
    """``first_half_period`` and ``repeat`` read and preprocessed as ``pf``'s data section says
    (the likelihood's filter comes later, when samples are scored)."""
    root = shared_data_dir() / "panda-gaz2019"
    data = {name: pf.load_dataset(root / name, holdout=False) for name in BAGS}
    return data["first_half_period"], data["repeat"]


def _heldout(method: str, pf: ProblemFile, train: Dataset, test: Dataset,
             args: argparse.Namespace) -> tuple[_Model, np.ndarray]:  # fmt: skip
    """``method`` fitted on ``train`` with ``pf``'s problem, and its torque residuals on every
    filtered sample of ``test`` (samples × joints)."""
    model = _fit(method, pf.build(train), args)
    return model, model.residuals(list(test))


def _real(args: argparse.Namespace, methods: Sequence[str], pf: ProblemFile, train: Dataset,
          test: Dataset) -> tuple[list[Record], np.ndarray]:  # fmt: skip
    records: list[Record] = []
    noise = np.full(7, 0.1)
    for method in methods:
        case = f"panda_real/{method}"
        main, r_test = _heldout(method, pf, train, test, args)
        back = _fit(method, pf.build(test), args)
        r_back = back.residuals(list(train))
        both = _fit(method, pf.build(Dataset([*train, *test])), args)
        r_both = both.residuals([*train, *test])
        per_joint = _rms(r_test, axis=0)
        target = TARGET_HELDOUT if method in ("consistent_lsq", "lm", "csvgd") else None
        notes = "train first_half_period, score repeat; N·m, every filtered sample"
        records.append(Record(case, "rmse_heldout", float(_rms(r_test)), "N*m", target=target,
                              notes=notes))  # fmt: skip
        for j, value in enumerate(per_joint):
            paper = GAZ_VALIDATION_RMSE[j] if method == "gaz2019" else None
            records.append(Record(case, f"rmse_heldout_j{j + 1}", float(value), "N*m",
                                  paper=paper))  # fmt: skip
        records += [
            Record(case, "rmse_lobo", float(_rms(np.concatenate([r_test, r_back]))), "N*m",
                   notes="train on one bag, score the other, both ways pooled"),
            Record(case, "rmse_train", float(_rms(r_both)), "N*m",
                   notes="fit both bags, score them"),
            Record(case, "consistent", float(main.consistent and both.consistent), "",
                   better="higher"),
            Record(case, "wall_s", main.wall_s, "s",
                   notes="fit on first_half_period, 2 cores"
                         + ("; after the consistent_lsq warm start" if method in ("lm", "csvgd")
                            else "")),
            Record(case, "wall_s_both", both.wall_s, "s",
                   target=TARGET_WALL if method == "consistent_lsq" else None,
                   notes="fit on both bags"),
        ]  # fmt: skip
        if method == "consistent_lsq" and main.posterior is not None and main.problem is not None:
            report = validate(main.problem, main.posterior, list(test))
            score = report.scores["identified"]
            if score.sigma_ratio is not None:
                sigma = score.rmse / score.sigma_ratio
                records.append(Record(case, "heldout_over_sigma",
                                      float(score.overall / _rms(sigma)), "",
                                      notes="held-out RMSE / RMS predicted σ (noise ⊕ "
                                            "parameters); 1 is honest"))  # fmt: skip
            noise = per_joint
    return records, noise


def _with_cutoff(pf: ProblemFile, cutoff_hz: float) -> ProblemFile:
    """``pf`` with ``likelihood.cutoff_hz`` replaced (its robot, parameters and data as they
    are)."""
    likelihood = dataclasses.replace(pf.config.likelihood, cutoff_hz=cutoff_hz)
    return dataclasses.replace(pf, config=dataclasses.replace(pf.config, likelihood=likelihood))


def _cutoff_sweep(args: argparse.Namespace, cutoffs: Sequence[float], pf: ProblemFile,
                  train: Dataset, test: Dataset) -> list[Record]:  # fmt: skip
    """The filter sweep (module notes): held-out RMSE of :data:`CUTOFF_METHODS` at each cut-off,
    and consistent_lsq's excess over regressor_lsq."""
    notes = ("train first_half_period, score repeat; q, q̇ and the scored τ low-passed at fc: "
             "compare RMSEs only at equal fc")  # fmt: skip
    records: list[Record] = []
    for cutoff in cutoffs:
        at = _with_cutoff(pf, cutoff)
        rmse = {m: float(_rms(_heldout(m, at, train, test, args)[1])) for m in CUTOFF_METHODS}
        records += [Record(f"panda_real_cutoff/{m}/fc={cutoff:g}", "rmse_heldout", value, "N*m",
                           notes=notes) for m, value in rmse.items()]  # fmt: skip
        records.append(Record(f"panda_real_cutoff/gap/fc={cutoff:g}", "rmse_heldout_gap",
                              rmse["consistent_lsq"] - rmse["regressor_lsq"], "N*m",
                              notes="consistent_lsq − regressor_lsq at the same fc: what "
                                    "rigid-body consistency costs held out"))  # fmt: skip
    return records


# ------------------------------------------------------------------------------ twin
def _twin_recording(truth: Problem, values: np.ndarray, noise: np.ndarray,
                    series: tuple[np.ndarray, ...], duration: float,
                    rng: np.random.Generator) -> Trajectory:  # fmt: skip
    t = np.arange(round(duration * 1000.0) + 1) / 1000.0
    q, v, a = fourier_trajectory(t, *series)
    model, data = truth.robot.model, truth.robot.model.createData()
    rnea = np.stack([pin.rnea(model, data, q[i], v[i], a[i]) for i in range(t.size)])
    p = truth.parameters(truth.tensor(values[None]))
    friction = truth.dynamics.friction_torque(p, truth.tensor(v[None]))[0].numpy()
    colored = lowpass(rng.normal(size=rnea.shape), 1e-3, 10.0)
    colored *= noise / colored.std(axis=0)
    return Trajectory(t=t, q=q, joint_names=list(JOINTS), dq=v, effort=rnea + friction + colored)


def _twin_realisation(
    pf: ProblemFile, truth: Problem, values: np.ndarray, seed: int, noise: np.ndarray,
    series: tuple[np.ndarray, ...], duration: float,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One twin (module notes) of ``truth`` with parameter ``values`` on the Fourier excitation
    ``series = (q0, a, b)`` for ``duration`` s, its noise drawn with ``seed``,
    fitted with ``pf``'s problem: the relative errors of its well-excited inertial base
    parameters (σ below 5 % of the true value) and, for every inertial base parameter, whether
    its 95 % interval covers the truth."""
    rng = np.random.default_rng(seed)
    train = _twin_recording(truth, values, noise, series, duration, rng)
    problem = pf.build(pf.preprocess(Dataset([train])))
    resolved = resolve_estimator("consistent_lsq")
    post = run_fit(resolved, problem).posterior
    est = resolved.estimator
    layout = est.model.layout
    base = est.base_parameters
    x_true = np.zeros(len(layout.names))
    x_true[: layout.num_inertial] = truth.robot.nominal_inertia().reshape(-1)
    inertial = np.array([all(i < layout.num_inertial for i in base.members(k))
                         for k in range(base.rank)])  # fmt: skip
    beta_true = base.values(x_true)[inertial]
    rows = [r for r, keep in zip(post.meta["identifiability"]["base_parameters"], inertial,
                                 strict=True) if keep]  # fmt: skip
    beta = np.array([r["value"] for r in rows])
    std = np.array([r["std"] for r in rows])
    well = std < 0.05 * np.abs(beta_true)
    rel = np.abs(beta - beta_true)[well] / np.abs(beta_true[well])
    return rel, np.abs(beta - beta_true) <= 1.96 * std


def _twin(args: argparse.Namespace, noise: np.ndarray, motion: Trajectory) -> list[Record]:
    """The twin's records on ``motion``'s excitation over ``args.twin_seeds`` realisations
    (seeds ``args.seed``, ``args.seed + 1``, …; one with ``--quick``), errors and coverage pooled
    over them."""
    count = 1 if args.quick else getattr(args, "twin_seeds", 1)
    pf = read_problem_file(PROBLEM_FILE)
    truth, values = _gaz_problem(pf.build(pf.preprocess(Dataset([_still_recording()]))))
    t = np.asarray(motion.t, dtype=np.float64) - float(motion.t[0])
    series = fit_fourier_coefficients(t, motion.q)
    runs = [_twin_realisation(pf, truth, values, args.seed + k, noise, series, float(t[-1]))
            for k in range(count)]  # fmt: skip
    rel = np.concatenate([r for r, _ in runs])
    covered = np.concatenate([c for _, c in runs])
    medians = [float(np.median(r)) for r, _ in runs]
    case = "panda_twin/consistent_lsq"
    return [
        Record(case, "base_rel_err", float(np.median(rel)), "", target=0.01,
               notes=f"median over {rel.size} well-excited inertial base parameters (σ < 5 %) of "
                     f"{count} twin(s), max {float(rel.max()):.3g}; per twin "
                     f"{min(medians):.3g}–{max(medians):.3g}"),
        Record(case, "coverage_95", float(covered.mean()), "", target=0.95, better="higher",
               notes=f"{int(covered.sum())} of {covered.size} inertial base parameters of "
                     f"{count} twin(s)"),
    ]  # fmt: skip


def _still_recording() -> Trajectory:
    """A short still recording: only to build the problem whose robot the twin replaces."""
    t = np.arange(1001) / 1000.0
    q = np.tile([0.0, 0.0, 0.0, -1.8, 0.0, 1.8, 0.0], (t.size, 1))
    return Trajectory(t=t, q=q, joint_names=list(JOINTS), dq=np.zeros_like(q),
                      effort=np.zeros_like(q))  # fmt: skip


def run(args: argparse.Namespace) -> list[Record]:
    """Every row on the real recordings, the filter sweep (``args.cutoffs``, none when absent),
    then the synthetic twin (see the module notes)."""
    methods = [m.strip() for m in str(args.methods).split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"panda_real: unknown methods {unknown}; methods: {', '.join(METHODS)}")
    pf = read_problem_file(PROBLEM_FILE)
    train, test = _bags(pf)
    records, noise = _real(args, runnable_methods(methods), pf, train, test)
    records += _cutoff_sweep(args, getattr(args, "cutoffs", ()), pf, train, test)
    if not getattr(args, "no_twin", False):
        records += _twin(args, noise, train[0])
    return records
