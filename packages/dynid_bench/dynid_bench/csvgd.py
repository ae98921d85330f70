"""CSVGD reproductions: synthetic and real (IBM) double pendulum, Panda + box, time per iteration.

Tables follow the csvgd paper: App. Table 2 for the real pendulum (KL(real‖sim), KL(sim‖real) and
MMD per method, single (``ss``) vs multiple (``ms``) shooting), Fig. 4 for the synthetic pendulum
(trajectory- and parameter-space KL, MMD, log-likelihood), and the per-iteration wall time of one
batched CSVGD step for 16 … 1024 particles.

The synthetic table adds two fit-free reference rows for scale: link lengths drawn from the
Gaussian that generated the data (what recovering the generating distribution scores), and the
training swings' own link lengths (the points eq. 9's posterior concentrates on as its peaks
sharpen, so what an exact sampler of that posterior scores).

Panda + box (Sec. V-C, Tab. IV, fig. 15; phase II): a simulated recording (``dynid.sim.panda_box``)
of the arm shaking the box with two 0.5 kg weights; the four weight coordinates are identified
with multiple shooting. Per method: the per-step log-likelihood of the recorded box observations
under the particle mixture (single-shooting rollouts, the paper's log p_obs row), whether the
posterior's support contains the true weight positions up to swapping the two weights (some
particle within ``--support-radius`` of the truth or of its swap), and the error of the posterior
mean's weight centroid (the box's COM shift).

``ibm_check``: whether any parameter set within the IBM problem's limits explains the reference
run's joint accelerations (:mod:`dynid_bench.equation_error`): the best equation-error fit
within the limits, the best with a free gravity scale, and that fit rescaled to the true gravity,
with the parameters it puts beyond the limits in its record's notes.

Metrics on held-out trajectories: every particle is rolled out (single shooting) from the start
of every test trajectory; the simulated set (particles × test runs) is compared with the set of
recorded test runs as flattened ``[T + 1, k]`` observation trajectories, each observation
dimension divided by its standard deviation over the recorded test set (the state normalisation
of App. I-C, so that rad/s do not outweigh rad): kNN KL with k = l = 3 and Gaussian-kernel MMD²
(biased V-statistic, bandwidth = median pairwise distance of the pooled sets; ``dynid.metrics``).
The log-likelihood is per step, of each recorded run under the particle mixture with the
problem's ``obs_std``, in the observation units.

Budget: the paper runs every method for 2000 iterations on a GPU. Here every method gets the
same CPU time (``--budget-s`` seconds of this process, one torch thread; the load of other jobs
does not shorten it) and stops earlier at ``--iterations``. Every fit runs through the fit driver
with the budget as its hook (:class:`dynid_bench.fitting.Budget`; the metric evaluations of the
curves are not charged to it); the time per iteration is the mean of the second and third steps
of a three-iteration fit. Per iteration the methods differ in
cost: CSVGD, SVGD and SGLD take one batched gradient of all particles (SGLD runs one chain per
particle, batched), emcee and CEM one batched likelihood without gradient, NUTS up to
``2^depth`` gradients of a single chain; each record states the iterations reached. One CSVGD
iteration (forward and backward through 10 windows) costs about what one emcee sweep (two
single-shooting forward rollouts of half the walkers) costs, so both reach similar iteration
counts; the backward pass through the dynamics is about two thirds of a CSVGD iteration.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from dynid.atomic import atomic_open, atomic_write_text
from dynid.data.ibm_pendulum import load_ibm_pendulum
from dynid.demo import DEMO_PROBLEM, demo_centroid_error
from dynid.estimators.base import Estimator
from dynid.estimators.csvgd import CSVGD
from dynid.estimators.mdmm import DefectForm
from dynid.estimators.registry import EstimatorDefaults, ResolvedEstimator, resolve_estimator
from dynid.metrics import knn_kl_divergence, mmd, trajectory_log_likelihood
from dynid.posterior import Posterior
from dynid.problem import Problem
from dynid.problem_file import load_problem
from dynid.records import Record
from dynid.resources import repo_root
from dynid.sim.double_pendulum import (
    LENGTH_CORRELATION,
    LENGTH_MEAN,
    LENGTH_STD,
    draw_lengths,
    length_covariance,
)
from dynid_bench.equation_error import equation_error, fit_equation_error, rescale_lengths
from dynid_bench.fitting import Budget, Clock, Probe, run_fit

# App. Table 2 (KL(real‖sim), KL(sim‖real), MMD) and Table I; None where the paper has N/A.
PAPER_IBM: dict[tuple[str, str], tuple[float | None, float | None, float | None]] = {
    ("ss", "emcee"): (8542.2466, 4060.6312, 1.1365),
    ("ms", "emcee"): (8950.4574, None, None),
    ("ss", "cem"): (8911.1798, 8549.5927, 0.9687),
    ("ms", "cem"): (8860.5115, None, 0.5682),
    ("ss", "sgld"): (8788.0962, 7876.0310, 2.1220),
    ("ms", "sgld"): (5863.2728, 2187.2825, 0.0759),
    ("ss", "nuts"): (9196.7461, 6432.2131, 0.5371),
    ("ms", "nuts"): (8785.5326, 4935.8983, 1.1642),
    ("ss", "svgd"): (8803.5683, 10283.6659, 0.7177),
    ("ms", "csvgd"): (5204.5336, 2773.1751, 0.0366),
}
METHODS = ("csvgd", "svgd", "cem", "emcee", "nuts", "sgld")
#: Tab. IV, log p_obs of the real Panda recording (CSVGD and Emcee; the others −17.3 … −18.0).
PAPER_PANDA_LL = {"csvgd": -15.17, "emcee": -16.12}
PANDA_WEIGHTS = ("box/weight1_x", "box/weight1_y", "box/weight2_x", "box/weight2_y")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sizes and selections of the reproduction."""
    parser.add_argument(
        "--scenarios",
        default="ibm,synthetic,timing",
        help="comma list of ibm, ibm_check, synthetic, timing, panda_box",
    )
    parser.add_argument("--methods", default=",".join(METHODS), help="comma list of methods")
    parser.add_argument(
        "--shootings", default="ss,ms", help="IBM likelihood variants: ss (single), ms (multiple)"
    )
    parser.add_argument("--particles", type=int, default=32, help="particles / walkers / samples")
    parser.add_argument(
        "--iterations", type=int, default=2000, help="iteration cap per method (paper: 2000)"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=50.0,
        help="CPU seconds per method (fit only; 0: no limit, iterations only)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="time steps per trajectory (default: IBM and timing 400 = 1 s, synthetic 300 = 3 s)",
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=None,
        help="shooting windows (default: the problem file's, IBM 10 × 0.1 s, synthetic 5 × 0.6 s)",
    )
    parser.add_argument(
        "--test-runs", default="1,2,3,4,5,6,7,8,9,10", help="held-out IBM runs (paper: 10)"
    )
    parser.add_argument(
        "--synthetic-test", type=int, default=50, help="synthetic test trajectories (paper: 50)"
    )
    parser.add_argument(
        "--curve-points", type=int, default=6, help="synthetic: metric evaluations per method"
    )
    parser.add_argument(
        "--nuts-warmup", type=int, default=50, help="NUTS adaptation transitions (at most)"
    )
    parser.add_argument("--timing-n", default="16,64,256,1024", help="particle counts timed")
    parser.add_argument(
        "--panda-methods", default="csvgd,emcee,cem", help="methods of the panda_box scenario"
    )
    parser.add_argument(
        "--panda-particles", type=int, default=50, help="panda_box particles (paper: 50)"
    )
    parser.add_argument(
        "--panda-iterations", type=int, default=120, help="panda_box iterations (paper: 500)"
    )
    parser.add_argument(
        "--panda-emcee-iterations",
        type=int,
        default=50,
        help="panda_box emcee sweeps (single shooting, one full rollout per sweep)",
    )
    parser.add_argument(
        "--panda-windows", type=int, default=25, help="panda_box shooting windows (panda_box.yaml)"
    )
    parser.add_argument(
        "--support-radius",
        type=float,
        default=0.02,
        help="m; the truth is in the support when a particle lies this close (4-D distance)",
    )
    parser.add_argument(
        "--paper",
        action="store_true",
        help="paper sizes: 100 particles, 2000 iterations without a time budget, 400 (IBM) / "
        "300 steps; panda_box: 50 particles, 500 iterations",
    )
    parser.add_argument(
        "--multiplier-lr",
        type=float,
        default=None,
        help="CSVGD's MDMM multiplier ascent step η (defects and limits; default: the problem "
        "file's estimator settings, else CSVGD's)",
    )
    parser.add_argument(
        "--defect-form",
        choices=[form.value for form in DefectForm],
        default=None,
        help="CSVGD's defect constraints (dynid.estimators.mdmm; default: the problem file's "
        "estimator settings, else CSVGD's)",
    )
    parser.add_argument(
        "--defect-std",
        type=float,
        default=None,
        help="CSVGD's σ_def in normalised state units (default: the problem file's estimator "
        "settings, else its likelihood.defect_std)",
    )
    parser.add_argument(
        "--learning-rate-decay",
        type=float,
        default=None,
        help="CSVGD's step-size factor per iteration (default: the problem file's estimator "
        "settings, else 1, a constant step)",
    )
    parser.add_argument(
        "--bandwidth",
        type=_bandwidth_arg,
        default=None,
        help="CSVGD's fixed RBF bandwidth h in normalised parameter units², or 'median' for the "
        "median heuristic (default: the problem file's estimator settings, else the median "
        "heuristic)",
    )
    parser.add_argument(
        "--check-samples", type=int, default=2000, help="ibm_check: samples of the reference run"
    )
    parser.add_argument(
        "--check-starts", type=int, default=16, help="ibm_check: Sobol starts of the fits"
    )
    parser.add_argument(
        "--check-iterations", type=int, default=600, help="ibm_check: Adam steps of the fits"
    )
    parser.add_argument(
        "--limits",
        default="",
        help="IBM parameter ranges replacing the problem file's, NAME=LOWER:UPPER in SI, comma "
        "separated (e.g. link2/iyy=0.0002:1.0)",
    )
    parser.add_argument("--seed", type=int, default=0)  # fmt: skip


def _bandwidth_arg(text: str) -> float | str:
    """``--bandwidth``: a positive float, or ``"median"`` (the median heuristic even where the
    problem file fixes a bandwidth)."""
    if text == "median":
        return text
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a bandwidth > 0 or 'median', got {text!r}")
    return value


def _config(name: str, windows: int | None = None, limits: str = "") -> dict[str, Any]:
    """The problem file ``config/problems/<name>.yaml``, with ``windows`` shooting windows
    when given and the parameter ranges of ``limits`` (``"name=lower:upper,..."``, SI)."""
    path = repo_root() / "config" / "problems" / f"{name}.yaml"
    cfg = yaml.safe_load(Path(path).read_text())
    if windows is not None:
        cfg["likelihood"]["windows"] = int(windows)
    entries = {entry["name"]: entry for entry in cfg["parameters"]}
    for item in [part.strip() for part in limits.split(",") if part.strip()]:
        key, _, bounds = item.partition("=")
        lower, _, upper = bounds.partition(":")
        if key not in entries or not lower or not upper:
            raise ValueError(
                f"--limits {item!r}: expected NAME=LOWER:UPPER with NAME among "
                f"{sorted(entries)} of {path.name}"
            )
        entries[key]["lower"], entries[key]["upper"] = float(lower), float(upper)
    return cfg


CSVGD_SETTINGS = ("multiplier_lr", "defect_form", "defect_std", "learning_rate_decay", "bandwidth")


def _estimator(
    method: str,
    shooting: str,
    args: argparse.Namespace,
    cfg: dict[str, Any],
    learning_rate: float = 0.05,
) -> ResolvedEstimator:
    """The method with the benchmark's sizes (settings documented in the record notes), through
    :func:`dynid.estimators.registry.resolve_estimator`: the method's defaults, the problem file
    ``cfg``'s estimator settings when it names this method, then the benchmark's own.

    ``learning_rate`` is the Adam step of CSVGD and SVGD on the normalised parameters (CSVGD's
    shooting variables take its default 0.4 × that step). CSVGD's constraint settings, step
    decay and kernel bandwidth (``CSVGD_SETTINGS``) come from the command line, else from the
    problem file, else CSVGD's defaults."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")
    overrides: dict[str, Any] = {
        "num_particles": args.particles,
        "max_iterations": args.iterations,
        "seed": args.seed,
        "shooting": shooting,
    }
    if method in ("csvgd", "svgd"):
        overrides["learning_rate"] = learning_rate
    if method == "csvgd":
        overrides["shooting"] = "multiple"
        chosen = {key: getattr(args, key) for key in CSVGD_SETTINGS}
        overrides.update({key: value for key, value in chosen.items() if value is not None})
        if chosen["bandwidth"] == "median":  # CSVGD's own default: the median heuristic
            overrides["bandwidth"] = None
    if method == "nuts":
        overrides["warmup_steps"] = max(1, min(args.iterations // 2, args.nuts_warmup))
        overrides["max_tree_depth"] = 3
    if method == "sgld":
        # one chain per particle: the chains share one batched simulation, so they cost what
        # a single chain costs (the paper runs one chain)
        overrides.update(step_size=1e-5, step_offset=10.0, chains=args.particles)
    section = cfg.get("estimator") or {}
    problem = EstimatorDefaults(section.get("name", "csvgd"), dict(section.get("settings") or {}))
    return resolve_estimator(method, problem, overrides)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """kNN KL (k = l = 3), ``nan`` when a set is too small for it (the paper's N/A)."""
    if p.shape[0] <= 3 or q.shape[0] < 3:
        return math.nan
    return knn_kl_divergence(p, q)


def normalise_observations(real: np.ndarray, sim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Divide every observation dimension of ``real [R, T, k]`` and ``sim [S, T, k]`` by its
    standard deviation over ``real`` (all runs and steps; App. I-C), so that the metrics weigh
    e.g. rad and rad/s alike; a constant dimension keeps its units."""
    scale = real.reshape(-1, real.shape[-1]).std(0)
    scale = np.where(scale > 0, scale, 1.0)
    return real / scale, sim / scale


def _trajectory_metrics(test: Problem, post: Posterior) -> dict[str, float]:
    """mmd, kl_real_sim, kl_sim_real (normalised observations), log_likelihood of ``post``, its
    unstable particles and ``clamped_entries`` (particle × parameter entries beyond a limit,
    simulated and reported at the limit: ``Posterior.meta["clamped_particles"]`` summed)."""
    alive = np.isfinite(post.log_weights)
    theta = torch.as_tensor(post.particles[alive])
    with torch.no_grad():
        sim = test.objective.simulate(theta).cpu().numpy()  # [N, K, T+1, k]
    real = np.stack([test.targets(traj).cpu().numpy() for traj in test.dataset])  # [K, T+1, k]
    ok = np.isfinite(sim).all(axis=(1, 2, 3))
    sim = sim[ok]
    clamped = post.meta.get("clamped_particles", {})
    out = {"unstable_particles": float((~ok).sum() + (~alive).sum()),
           "clamped_entries": float(sum(clamped.values()))}  # fmt: skip
    if sim.shape[0] < 1:
        return {**out, "mmd": math.nan, "kl_real_sim": math.nan, "kl_sim_real": math.nan,
                "log_likelihood": math.nan}  # fmt: skip
    sigma = test.obs_std.cpu().numpy()
    ll = np.mean([trajectory_log_likelihood(real[k : k + 1], sim[:, k], sigma)
                  for k in range(real.shape[0])])  # fmt: skip
    real_n, sim_n = normalise_observations(real, sim.reshape(-1, *sim.shape[2:]))
    return {**out, "mmd": mmd(real_n, sim_n), "kl_real_sim": _kl(real_n, sim_n),
            "kl_sim_real": _kl(sim_n, real_n),
            "log_likelihood": float(ll)}  # fmt: skip


def _csvgd_notes(est: Estimator) -> str:
    """CSVGD's constraint settings, step decay and fixed kernel bandwidth as the record notes
    state them ("" for other methods)."""
    if not (isinstance(est, CSVGD) and est.constrained):  # SVGD: no constraints to state
        return ""
    sigma = "the problem's" if est.defect_std is None else f"{est.defect_std:g}"
    decay, h = est.learning_rate_decay, est.bandwidth
    return (f", CSVGD multiplier step {est.mdmm.multiplier_lr:g}, "
            f"defects {est.defect_form.value}, σ_def {sigma}"
            f"{f', step × {decay:g} per iteration' if decay != 1.0 else ''}"
            f"{f', kernel bandwidth h = {h:g}' if h is not None else ''}")  # fmt: skip


def _records(case: str, values: dict[str, float], paper: tuple | None, notes: str) -> list[Record]:
    p = paper or (None, None, None)
    spec = [("kl_real_sim", "nats", p[0], "lower"), ("kl_sim_real", "nats", p[1], "lower"),
            ("mmd", "", p[2], "lower"), ("log_likelihood", "nats/step", None, "higher"),
            ("wall_s", "s", None, "lower"), ("cpu_s", "s", None, "lower"),
            ("iterations", "", None, "higher"),
            ("unstable_particles", "", None, "lower"),
            ("clamped_entries", "", None, "lower")]  # fmt: skip
    return [
        Record(case=case, metric=m, value=float(values[m]), unit=u, paper=pv, better=b, notes=notes)
        for m, u, pv, b in spec
        if m in values
    ]


PosteriorProbe = Callable[[Posterior], dict[str, float]]


def _on_last_guesses(probe: PosteriorProbe, n: int) -> Probe:
    """``probe`` of the last ``n`` parameter guesses of an estimator's current posterior."""
    return lambda est: probe(last_guesses(est.posterior(), n))


def _fit(
    resolved: ResolvedEstimator,
    problem: Problem,
    args: argparse.Namespace,
    probe: PosteriorProbe | None = None,
) -> tuple[Posterior, Budget]:
    """Fit under the CPU budget (``args.budget_s``, none when 0; ``args.iterations`` at most);
    with a ``probe`` the budget also holds the metric curve: ``args.curve_points`` evaluations
    along the run and the final posterior's. The posterior, and every curve point, holds the
    last ``args.particles`` parameter guesses (:func:`last_guesses`)."""
    if probe is None:
        budget = Budget(args.budget_s)
    else:
        budget = Budget(args.budget_s, _on_last_guesses(probe, args.particles),
                        args.curve_points, args.iterations)  # fmt: skip
    result = run_fit(resolved, problem, hooks=budget)
    budget.final_checkpoint(resolved.estimator)
    return last_guesses(result.posterior, args.particles), budget


def last_guesses(post: Posterior, n: int) -> Posterior:
    """The last ``n`` of ``post``'s parameter guesses (all of them when it has no more).

    Every method is scored on as many samples as the others, the paper's "last 100 parameter
    guesses" of each: the k-NN KL estimates depend on the sample size (more simulated samples
    lower KL(real‖sim) and raise KL(sim‖real)). Only emcee holds more: its stretch move needs
    twice as many walkers as dimensions (94 with the IBM pendulum's 47 multiple-shooting
    variables). Its walkers are exchangeable, so the last ``n`` are as good as any ``n``.
    ``meta["scored"]`` says how many were kept of how many.
    """
    total = post.num_particles
    if total <= n:
        return post
    rows = slice(total - n, total)

    def tail(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else values[rows]

    return dataclasses.replace(
        post,
        particles=post.particles[rows],
        log_weights=tail(post.log_weights),
        log_likelihood=tail(post.log_likelihood),
        log_density=tail(post.log_density),
        meta={**post.meta, "scored": f"last {n} of {total}"},
    )


def _ibm(args: argparse.Namespace, methods: list[str]) -> list[Record]:
    steps = args.steps or 400
    cfg = _config("ibm_double_pendulum", args.windows, args.limits)
    cfg["data"]["max_samples"] = steps + 1
    problem = load_problem(cfg)[0]
    windows = problem.likelihood.windows
    runs = [int(r) for r in args.test_runs.split(",") if r]
    test = problem.with_dataset([load_ibm_pendulum(r, max_samples=steps + 1) for r in runs])
    records = []
    for shooting in [s for s in args.shootings.split(",") if s]:
        for method in methods:
            if (shooting, method) not in PAPER_IBM:
                continue
            mode = "single" if shooting == "ss" else "multiple"
            resolved = _estimator(method, mode, args, cfg)
            post, run = _fit(resolved, problem, args)
            values = {**_trajectory_metrics(test, post), "wall_s": run.fit_wall,
                      "cpu_s": run.fit_cpu, "iterations": float(post.iteration)}  # fmt: skip
            scored = f"scored on the {post.meta['scored']}, " if "scored" in post.meta else ""
            notes = (f"N={args.particles}, {post.iteration} it in {args.budget_s:g} CPU s"
                     f"{_csvgd_notes(resolved.estimator)}, T={steps} steps @400 Hz, "
                     f"W={windows if mode == 'multiple' else 1}, "
                     f"{scored}"
                     f"test runs {runs}{'; limits ' + args.limits if args.limits else ''}; "
                     "paper: N=100, 2000 it, 10 test runs")  # fmt: skip
            records += _records(f"ibm_double_pendulum/{shooting}/{method}", values,
                                PAPER_IBM[(shooting, method)], notes)  # fmt: skip
    return records


def _ibm_check(args: argparse.Namespace) -> list[Record]:
    """Equation-error check of the two-link model on the reference run (``equation_error``):
    the best fit within the limits, the best with a free gravity scale, and that fit rescaled
    to the true gravity, with the entries it puts beyond the limits."""
    samples = args.check_samples
    cfg = _config("ibm_double_pendulum", None, args.limits)
    cfg["data"]["max_samples"] = samples
    problem = load_problem(cfg)[0]
    swings = list(problem.dataset)
    sizes = {"starts": args.check_starts, "iterations": args.check_iterations, "seed": args.seed}
    within = fit_equation_error(problem, swings, **sizes)
    free = fit_equation_error(problem, swings, free_gravity=True, **sizes)
    rescaled = rescale_lengths(problem, free.theta, 1.0 / free.gravity_scale)
    rms, mse = equation_error(problem, swings, rescaled)
    spec = problem.spec
    outside = [f"{name}={value:.4g} (limits {lo:g}…{hi:g})"
               for name, value, lo, hi in zip(spec.names, rescaled, spec.lower.tolist(),
                                               spec.upper.tolist(), strict=True)
               if not lo <= value <= hi]  # fmt: skip
    accel = np.round(within.accel_rms, 1).tolist()
    base = (f"run {cfg['data']['runs'][0]}, {samples} samples @400 Hz, 40 Hz zero-phase "
            f"low-pass, {args.check_starts} Sobol starts × {args.check_iterations} Adam steps; "
            f"recorded RMS acceleration {accel} rad/s²")  # fmt: skip
    rows = [
        ("within_limits", within.residual_rms, within.normalised_mse, 1.0,
         f"{base}; at a limit: {within.at_limit}"),
        ("free_gravity", free.residual_rms, free.normalised_mse, free.gravity_scale,
         f"{base}; at a limit: {free.at_limit}"),
        ("rescaled_true_gravity", rms, mse, 1.0,
         f"the free-gravity fit with lengths × 1/s, inertias and damping × 1/s²: "
         f"{dict(zip(spec.names, np.round(rescaled, 5).tolist(), strict=True))}; beyond the "
         f"limits: {outside or 'none'}"),
    ]  # fmt: skip
    records = []
    for variant, residual, nmse, gravity, notes in rows:
        case = f"ibm_double_pendulum/equation_error/{variant}"
        records += [Record(case=case, metric=f"residual_rms_joint{j + 1}", value=float(r),
                           unit="rad/s^2", notes=notes)
                    for j, r in enumerate(residual)]  # fmt: skip
        records += [Record(case=case, metric="normalised_mse", value=nmse, notes=notes),
                    Record(case=case, metric="gravity_scale", value=gravity,
                           notes=notes)]  # fmt: skip
    return records


def _synthetic(args: argparse.Namespace, methods: list[str]) -> list[Record]:
    steps = args.steps or 300
    cfg = _config("double_pendulum", args.windows)
    cfg["data"]["settings"].update(steps=steps, seed=args.seed)
    problem = load_problem(cfg)[0]
    test_cfg = copy.deepcopy(cfg)
    test_cfg["data"]["settings"].update(trajectories=args.synthetic_test, seed=args.seed + 1)
    test = load_problem(test_cfg)[0]
    truth = np.array([[t.meta["truth"][n] for n in problem.spec.names] for t in test.dataset])

    def probe(post: Posterior) -> dict[str, float]:
        alive = post.particles[np.isfinite(post.log_weights)]
        return {**_trajectory_metrics(test, post),
                "param_kl_real_sim": _kl(truth, alive), "param_kl_sim_real": _kl(alive, truth),
                "param_mmd": mmd(truth, alive)}  # fmt: skip

    records, curves = [], {}
    for method in methods:
        mode = "multiple" if method == "csvgd" else "single"
        resolved = _estimator(method, mode, args, cfg)
        post, run = _fit(resolved, problem, args, probe)
        curves[method] = run.curve
        final = run.curve[-1]
        values = {**final, "wall_s": run.fit_wall, "cpu_s": run.fit_cpu,
                  "iterations": float(post.iteration)}  # fmt: skip
        notes = (
            f"N={args.particles}, {post.iteration} it in {args.budget_s:g} CPU s"
            f"{_csvgd_notes(resolved.estimator)}, T={steps} steps, "
            f"{len(test.dataset)} test swings; "
            "paper: N=100, 2000 it, T=300, 50 test"
        )
        case = f"synthetic_double_pendulum/{method}"
        records += _records(case, values, None, notes)
        records += _param_records(case, final, "parameter space vs the test draws")
    for name, particles in _reference_sets(problem, cfg["data"]["settings"], args).items():
        values = probe(Posterior(particles, problem.spec.names, problem.spec.units))
        case = f"synthetic_double_pendulum/reference_{name}"
        notes = f"{particles.shape[0]} particle set, no fit: {_REFERENCE_NOTES[name]}"
        records += _records(case, values, None, notes)
        records += _param_records(case, values, notes)
    out = Path(getattr(args, "out_dir", "build/bench"))
    write_curves(out / "csvgd_synthetic_curves.json", curves)
    return records


def _param_records(case: str, values: dict[str, float], notes: str) -> list[Record]:
    """The parameter-space KL (both ways, nats) and MMD records of one synthetic row."""
    return [Record(case=case, metric=m, value=float(values[m]),
                   unit="nats" if "kl" in m else "", better="lower", notes=notes)
            for m in ("param_kl_real_sim", "param_kl_sim_real", "param_mmd")]  # fmt: skip


_REFERENCE_NOTES = {
    "truth_draws": "draws from the link-length Gaussian that generated the data (a method that "
    "recovered the generating distribution would score so)",
    "training_lengths": "the training swings' own link lengths, repeated (the points eq. 9's "
    "posterior concentrates on; an exact sampler of it scores so, KL(sim‖real) undefined)",
}


def _reference_sets(
    problem: Problem, settings: dict[str, Any], args: argparse.Namespace
) -> dict[str, np.ndarray]:
    """The two fit-free ``[N, 2]`` link-length sets of ``_REFERENCE_NOTES`` (m), ``N`` =
    ``args.particles``, that put the methods' synthetic figures in scale."""
    train = np.array([[t.meta["truth"][n] for n in problem.spec.names] for t in problem.dataset])
    cov = length_covariance(tuple(settings.get("std", LENGTH_STD)),
                            float(settings.get("correlation", LENGTH_CORRELATION)))  # fmt: skip
    rng = np.random.default_rng(args.seed + 2)  # seeds S and S + 1 drew training and test swings
    draws = draw_lengths(rng, args.particles, tuple(settings.get("mean", LENGTH_MEAN)), cov)
    return {"truth_draws": draws, "training_lengths": np.resize(train, (args.particles, 2))}


def write_curves(path: Path, curves: dict[str, list[dict[str, float]]]) -> Path:
    """Write the metric-vs-iteration/wall-time curves (``{method: [point, ...]}``) as JSON,
    atomically; a matplotlib figure of them goes beside it as ``.png``."""
    atomic_write_text(path, json.dumps(curves, indent=1, allow_nan=True) + "\n")
    plot_curves(path.with_suffix(".png"), curves)
    return path


def plot_curves(path: Path, curves: dict[str, list[dict[str, float]]]) -> None:
    """Fig. 4-style panels: each metric against fit CPU time, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ("param_kl_real_sim", "param_kl_sim_real", "param_mmd", "kl_real_sim",
               "kl_sim_real", "mmd", "log_likelihood")  # fmt: skip
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.0))
    for ax, metric in zip(axes, metrics, strict=True):
        for method, points in curves.items():
            ax.plot([p["cpu_s"] for p in points], [p[metric] for p in points], "o-", label=method)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("fit CPU time (s)", fontsize=8)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=80)
    plt.close(fig)


def _support_distance(post: Posterior, truth: dict[str, float]) -> float:
    """Distance (m, over the four weight coordinates) from the true weight positions, or from
    their swap, to the nearest live particle."""
    cols = [post.names.index(n) for n in PANDA_WEIGHTS]
    alive = post.particles[np.isfinite(post.log_weights)][:, cols]
    true = np.array([truth[n] for n in PANDA_WEIGHTS])
    swapped = true[[2, 3, 0, 1]]
    dist = np.minimum(np.linalg.norm(alive - true, axis=1), np.linalg.norm(alive - swapped, axis=1))
    return float(dist.min()) if dist.size else math.nan


def _panda_box(args: argparse.Namespace) -> list[Record]:
    cfg = copy.deepcopy(DEMO_PROBLEM)
    cfg["name"] = "panda_box_benchmark"
    # the paper's motion (joints 6 and 7 by +0.1 / −0.1 rad, velocity scaling 0.1: the
    # simulator's defaults), not the demo's stronger excitation; obs_std 1 cm as in panda_box.yaml
    cfg["data"]["settings"] = {"seed": args.seed}
    cfg["likelihood"]["windows"] = args.panda_windows
    cfg["likelihood"]["obs_std"] = 0.01
    problem = load_problem(cfg)[0]
    truth = problem.truth or {}
    if set(PANDA_WEIGHTS) - set(truth):
        raise ValueError(f"panda_box: the simulated recording lacks true values of {PANDA_WEIGHTS}")
    sized = argparse.Namespace(**{**vars(args), "particles": args.panda_particles,
                                  "iterations": args.panda_iterations,
                                  "budget_s": 0.0})  # fmt: skip
    steps = problem.dataset[0].num_samples - 1
    obs_dim = len(problem.obs_names)
    records = []
    for method in [m for m in args.panda_methods.split(",") if m]:
        # emcee over the multiple-shooting variables would need twice as many walkers as
        # dimensions (4 weights + the passive joints' states at every window start); it samples
        # the 4 weights by single shooting
        emcee = method == "emcee"
        sized.iterations = args.panda_emcee_iterations if emcee else args.panda_iterations
        resolved = _estimator(method, "single" if emcee else "multiple", sized, cfg,
                              learning_rate=0.1)  # fmt: skip
        post, run = _fit(resolved, problem, sized)
        wall = run.fit_wall
        metrics = _trajectory_metrics(problem, post)
        near = _support_distance(post, truth)
        case = f"panda_box/{method}"
        notes = (
            f"N={sized.particles}, {sized.iterations} it{_csvgd_notes(resolved.estimator)}, "
            f"W={1 if emcee else args.panda_windows} windows, "
            f"T={steps} steps @100 Hz, simulated (seed {args.seed}); paper: N=50, 500 it, real "
            "Vicon data, log p_obs of its own 4-point observation and noise model (units and "
            f"normalisation may differ from ours: per step, {obs_dim}-D box observation, "
            f"obs_std {cfg['likelihood']['obs_std']} m)"
        )
        spec = [
            ("log_likelihood", metrics["log_likelihood"], "nats/step",
             PAPER_PANDA_LL.get(method), "higher"),
            ("truth_in_support", float(near <= args.support_radius), "", None, "higher"),
            ("nearest_particle_m", near, "m", None, "lower"),
            ("centroid_err_m", demo_centroid_error(post, truth), "m", None, "lower"),
            ("wall_s", wall, "s", None, "lower"),
            ("cpu_s", run.fit_cpu, "s", None, "lower"),
            ("iterations", float(post.iteration), "", None, "higher"),
            ("unstable_particles", metrics["unstable_particles"], "", None, "lower"),
            ("clamped_entries", metrics["clamped_entries"], "", None, "lower"),
        ]  # fmt: skip
        records += [
            Record(case=case, metric=m, value=float(v), unit=u, paper=pv, better=b, notes=notes)
            for m, v, u, pv, b in spec
        ]
    return records


def _timing(args: argparse.Namespace) -> list[Record]:
    steps = args.steps or 400
    cfg = _config("ibm_double_pendulum", args.windows)
    cfg["data"]["max_samples"] = steps + 1
    cfg["simulation"]["device"] = args.device
    problem, _ = load_problem(cfg)
    windows = problem.likelihood.windows
    records = []
    for n in [int(x) for x in args.timing_n.split(",") if x]:
        sized = {"num_particles": n, "seed": args.seed, "shooting": "multiple", "windows": windows,
                 "max_iterations": 3}  # fmt: skip
        clock = Clock()
        run_fit(resolve_estimator("csvgd", None, sized), problem, hooks=clock)
        per_it = float(np.mean(clock.step_wall[1:]))  # the first step warms up
        records.append(Record(
            case=f"ibm_double_pendulum/N={n}/csvgd/{args.device}", metric="iteration_s",
            value=per_it, unit="s", better="lower",
            notes=f"one batched step of N × {windows} windows × "
                  f"{steps // windows} steps (forward + autograd), "
                  f"{torch.get_num_threads()} torch threads"))  # fmt: skip
    return records


def run(args: argparse.Namespace) -> list[Record]:
    """Run the selected scenarios and return their records."""
    if getattr(args, "quick", False):
        args.particles, args.iterations, args.steps, args.budget_s = 8, 3, 40, 0.0
        args.curve_points = 2
        args.test_runs, args.synthetic_test, args.timing_n = "1,2,3,4", 6, "16,64"
        args.panda_particles, args.panda_iterations, args.panda_windows = 8, 2, 25
        args.panda_emcee_iterations = 1
        args.check_samples, args.check_starts, args.check_iterations = 200, 2, 3
    if getattr(args, "paper", False):
        args.particles, args.iterations, args.steps, args.budget_s = 100, 2000, None, 0.0
        args.test_runs, args.synthetic_test = ",".join(str(i) for i in range(1, 11)), 50
        args.panda_particles, args.panda_iterations = 50, 500
        args.panda_emcee_iterations = 500
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted((set(methods) | set(args.panda_methods.split(","))) - set(METHODS) - {""})
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {METHODS}")
    scenarios = [s for s in args.scenarios.split(",") if s]
    records: list[Record] = []
    if "ibm" in scenarios:
        records += _ibm(args, methods)
    if "ibm_check" in scenarios:
        records += _ibm_check(args)
    if "synthetic" in scenarios:
        records += _synthetic(args, methods)
    if "panda_box" in scenarios:
        records += _panda_box(args)
    if "timing" in scenarios:
        records += _timing(args)
    return records
