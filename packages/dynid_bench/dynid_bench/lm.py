"""Joint state and parameter estimation (LM) against least squares, on synthetic pendulum and
Furuta data and the simulated Panda payload (lm paper, Sec. 4.2–4.8).

Methods, all in the same run and from the same starting values:

- ``lm``: Levenberg–Marquardt joint state and parameter estimation (:mod:`dynid.estimators.lm`);
- ``sim_error_lsq``: the ``lsq`` baseline on the single-shooting observation errors (simulation
  error, the classical alternative the paper sets LM against);
- ``regressor_lsq``: equation error — the ``lsq`` baseline on the inverse-dynamics effort errors
  of the filtered, differentiated encoders (pendulum, Furuta), and for the payload the classical
  regressor least squares (:func:`dynid.estimators.baselines.regressor_ls.fit_payload`);
- ``csvgd``: the payload's problem file as configured.

Scenarios:

- ``pendulum`` (Sec. 4.2, 4.5; Tables 2–3): the Furuta's pendulum with the arm locked (one
  hinge), released from rest a little below upright (five release angles, one noise seed each)
  until the oscillations die out; viscous, Coulomb and Stribeck friction. Generated at 10 kHz
  with a Coulomb smoothing ε = 1e-4 rad/s, a hundred times sharper than the fits' 1e-2, and
  recorded at 100 Hz through a 4096-pulse encoder with Gaussian noise. Three friction models
  are fitted to every series (viscous: inertia and damping; dry: + Coulomb; Stribeck: + Δ and
  ξ; simulation error, the costliest fit, on the first two series only). ``cost``: the
  method's own mean squared residual per sample on its series;
  ``cv_cost``: the paper's cross-validation — LM *state estimation* (parameters held,
  ``fixed_parameters``) on each of the other four series, mean squared residual per sample,
  averaged — the same yardstick for every method. Both in rad² (the whitened residuals times
  the encoder noise variance). ``smoothing_shift_<p>``: LM's estimate on series 0 minus its
  estimate on the same series generated with the fits' own smoothing, relative to the truth.
- ``furuta`` (Sec. 4.6–4.8, Table 4): :mod:`dynid.sim.furuta` (release, swing-up, pulse; 3 s at
  100 Hz, 4096-pulse encoders, 1e-3 rad noise). Twelve parameters: motor gain, five inertias
  (arm x, y, z; pendulum x, y), viscous and Coulomb friction of both hinges, stand tilt as two
  gravity angles (the paper's quaternion). The simulated arm also has a Stribeck term that no
  fit models. Each experiment is fitted on its own (simulation error, the costliest, on the
  swing-up only: the paper's timing case); ``cv_cost`` on the other two. Sensitivity
  (Figs. 6–7): the release recorded at 400 Hz, four parameters (arm z and pendulum x inertia,
  both dampings; the rest held at the truth), LM at estimation steps ``stride`` × 2.5 ms and
  at state error weights ``w``.
- ``panda_payload``: ``config/problems/panda_payload.yaml`` on 20 s at 1 kHz of
  :mod:`dynid.sim.panda_payload` (bag written and read back); LM on the problem's effort
  residuals (the parameters alone: an inverse-dynamics problem has no state unknowns).
- ``noise``: the pendulum's series 1 (released 0.1 rad below upright) and dry model with
  Gaussian encoder noise of growing σ (4096-pulse quantisation throughout).

Settings were fixed before any run and never chosen by the truth scored here: LM with its
defaults (``state_error_weight`` 1, ``cutoff_hz`` 20 for the initial states) and an impulse
scale ``torque_std`` = 1e-3 N·m; ``obs_std`` the encoder's known noise (σ² + step²/12);
equation error at a 10 Hz cut-off; starting values the pendulum's nominal guesses and the
centre of the Furuta's box. One fixed seed (``--seed``, default 0) makes every series.
``wall_over_duration``: fit wall time over the seconds of data it fits (one core).
``--quick`` shrinks every scenario (shorter series, two pendulum series, fewer sweeps, no
simulation error on the Furuta) for a smoke run of about a minute.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.registry import resolve_estimator
from dynid.model.dynamics import DEFAULT_COULOMB_SMOOTHING, TorchDynamics
from dynid.model.integrate import CurrentControl, TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import RobotModel, load_robot
from dynid.posterior import Posterior
from dynid.problem import LikelihoodSettings, Problem
from dynid.records import Record
from dynid.report import History
from dynid.sim import furuta
from dynid.sim.common import quantize
from dynid_bench.fitting import Clock, run_fit

__all__ = ["PENDULUM_TRUTH", "SCENARIOS", "add_arguments", "pendulum_series", "run"]

SCENARIOS = ("pendulum", "furuta", "panda_payload", "noise")
TICKS = 4096
TORQUE_STD = 1e-3  # N·m: LM's impulse scale and the equation error's effort scale
LM_SETTINGS: dict[str, Any] = {"state_error_weight": 1.0, "cutoff_hz": 20.0, "max_iterations": 50}
# scipy's own default tolerances; at most 50 residual evaluations (each a rollout and Jacobian)
LSQ_SETTINGS: dict[str, Any] = {"ftol": 1e-8, "xtol": 1e-8, "gtol": 1e-8, "max_iterations": 50}
SIM_ERROR_SERIES = 2  # simulation error (the costliest fit) on the first two pendulum series
EQUATION_ERROR = {"cutoff_hz": 10.0, "trim_s": 0.1}

# ---------------------------------------------------------------------------------- pendulum
PENDULUM_TRUTH: dict[str, float] = {
    "pendulum/ixx": 6.0e-4,  # kg·m² about the centre of mass (URDF); 2.04e-3 about the hinge
    "pendulum_joint/damping": 5.0e-4,
    "pendulum_joint/coulomb": 1.5e-3,
    "pendulum_joint/stribeck_delta": 1.0e-3,
    "pendulum_joint/stribeck_rate": 2.0,
}
#: (lower, upper, starting value) of each pendulum parameter.
PENDULUM_BOUNDS: dict[str, tuple[float, float, float]] = {
    "pendulum/ixx": (1.0e-4, 2.0e-3, 8.0e-4),
    "pendulum_joint/damping": (0.0, 5.0e-3, 1.0e-3),
    "pendulum_joint/coulomb": (0.0, 1.0e-2, 1.0e-3),
    "pendulum_joint/stribeck_delta": (0.0, 1.0e-2, 1.0e-3),
    "pendulum_joint/stribeck_rate": (0.1, 20.0, 5.0),
}
FRICTION_MODELS: dict[str, tuple[str, ...]] = {
    "viscous": ("pendulum/ixx", "pendulum_joint/damping"),
    "dry": ("pendulum/ixx", "pendulum_joint/damping", "pendulum_joint/coulomb"),
    "stribeck": tuple(PENDULUM_TRUTH),
}
RELEASE_OFFSETS = (0.05, 0.1, 0.15, 0.2, 0.3)  # rad below upright, one series each
PENDULUM_NOISE = 5.0e-4  # rad, Gaussian, before quantisation
SHARP_SMOOTHING = 1.0e-4  # rad/s, the data's Coulomb smoothing
# the paper's Table 3 (real pendulum; mean squared error per time step) and Table 2 (dry model)
PAPER_PENDULUM = {
    "viscous": (1.92e-6, 1.92e-6),
    "dry": (1.47e-6, 1.48e-6),
    "stribeck": (1.18e-6, 1.20e-6),
}
PAPER_DRY_SERIES = {
    "cost": (2.06e-6, 1.03e-6, 2.04e-6, 9.82e-7, 1.25e-6),
    "cv": (1.47e-6, 1.49e-6, 1.50e-6, 1.47e-6, 1.47e-6),
}

# ---------------------------------------------------------------------------------- Furuta
FURUTA_BOUNDS: dict[str, tuple[float, float]] = {
    "arm_joint/motor_gain": (0.02, 0.1),
    "arm/ixx": (1.0e-4, 5.0e-3),
    "arm/iyy": (1.0e-4, 5.0e-3),
    "arm/izz": (1.0e-3, 5.0e-3),
    "pendulum/ixx": (2.0e-4, 1.2e-3),
    "pendulum/iyy": (2.0e-4, 1.2e-3),
    "arm_joint/damping": (0.0, 5.0e-3),
    "arm_joint/coulomb": (0.0, 2.0e-3),
    "pendulum_joint/damping": (0.0, 4.0e-4),
    "pendulum_joint/coulomb": (0.0, 5.0e-4),
    "gravity/tilt_x": (-0.05, 0.05),
    "gravity/tilt_y": (-0.05, 0.05),
}
FURUTA_SENSITIVITY = ("arm/izz", "pendulum/ixx", "arm_joint/damping", "pendulum_joint/damping")
# Table 4 (real Furuta): (cost, CV) per scenario; Sec. 4.8: six iterations for the swing-up
PAPER_FURUTA = {
    "release": (3.22e-5, 2.46e-5),
    "pulse": (2.28e-6, 2.36e-4),
    "swing_up": (3.01e-5, 2.34e-5),
}
PAPER_ITERATIONS = 6.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument("--seed", type=int, default=0, help="the one fixed seed of all data")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)}"
    )


@dataclass
class _Fit:
    """One method's fit: its posterior (``None`` when it failed), wall time (s), the failure and
    the loss after every iteration."""

    post: Posterior | None
    wall: float
    note: str = ""
    history: History | None = None

    @property
    def theta(self) -> np.ndarray | None:
        return None if self.post is None else self.post.map()


def _fit(name: str, problem: Problem, settings: dict[str, Any], start: Posterior) -> _Fit:
    """Resolve estimator ``name`` with ``settings`` and fit ``problem`` from ``start`` on one
    core; a method that cannot run (a diverging rollout) comes back without a posterior."""
    resolved = resolve_estimator(name, None, settings)
    clock = Clock()
    try:
        result = run_fit(resolved, problem, hooks=clock, warm_start=start, threads=1)
    except (ValueError, RuntimeError) as exc:  # EstimatorError, a singular solve
        return _Fit(None, clock.fit_wall, " ".join(str(exc).split())[:120])
    return _Fit(result.posterior, clock.fit_wall, history=result.history)


def _point(names: Sequence[str], theta: Sequence[float]) -> Posterior:
    return Posterior(
        particles=np.asarray(theta, dtype=float)[None], names=list(names), units=[""] * len(names)
    )


def _encoder_std(noise: float, ticks: int = TICKS) -> float:
    """Standard deviation of a quantised encoder with Gaussian noise (rad)."""
    step = 2.0 * math.pi / ticks
    return math.sqrt(noise**2 + step**2 / 12.0)


def _cost_of(fit: _Fit, scale2: float) -> float:
    """The method's mean squared residual per sample in data units (whitened × scale²)."""
    if fit.post is None:
        return math.nan
    return float(fit.post.meta["mean_squared_residual"]) * scale2


def _cv_cost(
    make: Callable[[list[Trajectory]], Problem],
    held_out: Sequence[Trajectory],
    theta: np.ndarray | None,
    names: Sequence[str],
    scale2: float,
) -> float:
    """The paper's cross-validation: mean over ``held_out`` of LM state estimation's mean
    squared residual per sample with the parameters held at ``theta`` (Sec. 4.5)."""
    if theta is None or not held_out:
        return math.nan
    scores = []
    for traj in held_out:
        fit = _fit(
            "lm", make([traj]), {**LM_SETTINGS, "fixed_parameters": True}, _point(names, theta)
        )
        scores.append(_cost_of(fit, scale2))
    return float(np.mean(scores))


def _iterations_to(history: History | None, rtol: float = 1e-6) -> float:
    """The first iteration after which the loss (LM's cost) stays within ``rtol`` of its final
    value; ``nan`` without iterations."""
    if history is None or not history.loss:
        return math.nan
    final = history.loss[-1]
    for iteration, loss in zip(history.iterations, history.loss, strict=True):
        if loss <= final * (1.0 + rtol) + 1e-300:
            return float(iteration)
    return float(history.iterations[-1])


# ========================================================================= pendulum
def _pendulum_robot() -> RobotModel:
    """The Furuta's pendulum on a locked arm: one hinge about the arm's axis."""
    return load_robot("furuta", locked_joints={"arm_joint": 0.0})


def pendulum_series(
    release_offset: float,
    seed: int,
    *,
    duration: float = 12.0,
    rate: float = 100.0,
    substeps: int = 100,
    noise: float = PENDULUM_NOISE,
    ticks: int = TICKS,
    smoothing: float = SHARP_SMOOTHING,
    truth: dict[str, float] | None = None,
) -> tuple[Trajectory, np.ndarray]:
    """A pendulum released from rest ``release_offset`` rad below upright.

    The hinge inertia and the gravity torque come from dynid's dynamics of the locked-arm
    robot at the true parameters; friction is dynid's law (viscous + (Coulomb + Stribeck)
    tanh(v/ε), lm eq. 4.1) with ``smoothing`` ε; semi-implicit Euler at ``rate · substeps`` Hz.
    Recorded: positions at ``rate`` Hz with Gaussian ``noise`` then ``ticks``-per-revolution
    quantisation; zero efforts (the hinge is passive).

    Returns:
        The recorded trajectory and the true positions ``[T + 1]``.
    """
    truth = dict(PENDULUM_TRUTH if truth is None else truth)
    robot = _pendulum_robot()
    names = list(truth)
    spec = ParameterSpec([Parameter(n, -1.0e3, 1.0e3) for n in names])
    p = spec.apply(robot, torch.tensor([[truth[n] for n in names]], dtype=torch.float64))
    dyn = TorchDynamics(robot)
    zero = torch.zeros(1, 1, dtype=torch.float64)
    with torch.no_grad():
        inertia = float(dyn.mass_matrix(p, zero)[0, 0, 0])
        g_cos = float(dyn.rnea(p, zero, zero, zero)[0, 0])
        g_sin = float(dyn.rnea(p, zero + math.pi / 2.0, zero, zero)[0, 0])
    d, mu = truth["pendulum_joint/damping"], truth["pendulum_joint/coulomb"]
    delta = truth.get("pendulum_joint/stribeck_delta", 0.0)
    xi = truth.get("pendulum_joint/stribeck_rate", 0.0)
    h = 1.0 / (rate * substeps)
    n = round(duration * rate)
    q, v = math.pi - release_offset, 0.0
    qs = [q]
    for _ in range(n):
        for _ in range(substeps):
            friction = d * v + (mu + delta * math.exp(-((xi * v) ** 2))) * math.tanh(v / smoothing)
            v += h * (-(g_cos * math.cos(q) + g_sin * math.sin(q)) - friction) / inertia
            q += h * v
        qs.append(q)
    true_q = np.array(qs)
    rng = np.random.default_rng(seed)
    measured = quantize(true_q + noise * rng.standard_normal(true_q.shape), ticks)
    t = np.arange(n + 1) / rate
    traj = Trajectory(
        t=t,
        q=measured[:, None],
        joint_names=list(robot.joint_names),
        effort=np.zeros((n + 1, 1)),
        meta={"source": f"pendulum release {release_offset:g} rad, seed {seed}"},
    )
    return traj, true_q


def _pendulum_problem(
    trajs: Sequence[Trajectory],
    names: Sequence[str],
    *,
    kind: str = "shooting",
    obs_std: float | None = None,
) -> Problem:
    robot = _pendulum_robot()
    obs = JointObservation(robot)
    spec = ParameterSpec(
        [Parameter(n, *PENDULUM_BOUNDS[n][:2], nominal=PENDULUM_BOUNDS[n][2]) for n in names]
    )
    extra = EQUATION_ERROR if kind == "inverse_dynamics" else {}
    settings = LikelihoodSettings(
        kind=kind,  # type: ignore[arg-type]
        obs_std=_encoder_std(PENDULUM_NOISE) if obs_std is None else obs_std,
        shooting="single",
        torque_std=TORQUE_STD,
        **extra,
    )
    return Problem(
        robot=robot,
        spec=spec,
        dataset=Dataset(list(trajs)),
        dt=float(trajs[0].t[1]),
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=settings,
        name="pendulum",
    )


def _three_fits(
    trajs: Sequence[Trajectory], names: Sequence[str], obs_std: float, with_sim: bool = True
) -> dict[str, _Fit]:
    """LM, simulation error and equation error on ``trajs`` from the nominal guesses."""
    start = _point(names, [PENDULUM_BOUNDS[n][2] for n in names])
    shooting = _pendulum_problem(trajs, names, obs_std=obs_std)
    fits = {"lm": _fit("lm", shooting, LM_SETTINGS, start)}
    if with_sim:
        fits["sim_error_lsq"] = _fit("lsq", shooting, LSQ_SETTINGS, start)
    torque = _pendulum_problem(trajs, names, kind="inverse_dynamics", obs_std=obs_std)
    fits["regressor_lsq"] = _fit("lsq", torque, LSQ_SETTINGS, start)
    return fits


def _rel_errors(names: Sequence[str], theta: np.ndarray | None, truth: dict[str, float]):
    if theta is None:
        return dict.fromkeys(names, math.nan)
    return {n: float(v / truth[n] - 1.0) for n, v in zip(names, theta, strict=True)}


def _pendulum(args: argparse.Namespace, quick: bool) -> tuple[list[Record], list[str]]:
    offsets = RELEASE_OFFSETS[:2] if quick else RELEASE_OFFSETS
    duration = 3.0 if quick else 12.0
    series = [
        pendulum_series(o, args.seed + i, duration=duration)[0] for i, o in enumerate(offsets)
    ]
    obs_std = _encoder_std(PENDULUM_NOISE)
    scale2 = obs_std**2
    records: list[Record] = []
    table3: dict[str, dict[str, tuple[float, float]]] = {}
    table2: list[str] = []
    for friction, names in FRICTION_MODELS.items():
        per_method: dict[str, list[tuple[_Fit, float, float]]] = {}
        for i, traj in enumerate(series):
            with_sim = i < SIM_ERROR_SERIES if not quick else (i == 0 and friction == "dry")
            fits = _three_fits([traj], names, obs_std, with_sim=with_sim)
            others = [s for j, s in enumerate(series) if j != i]
            for method, fit in fits.items():

                def make(tr: list[Trajectory], names=names) -> Problem:
                    return _pendulum_problem(tr, names, obs_std=obs_std)

                unit2 = TORQUE_STD**2 if method == "regressor_lsq" else scale2
                cv = _cv_cost(make, others, fit.theta, names, scale2)
                per_method.setdefault(method, []).append((fit, _cost_of(fit, unit2), cv))
        for method, rows in per_method.items():
            case = f"pendulum/{friction}/{method}"
            fits = [r[0] for r in rows]
            notes = (
                f"{len(rows)} series of {duration:g} s at 100 Hz (releases "
                f"{', '.join(f'{o:g}' for o in offsets[: len(rows)])} rad below upright); "
                "means over the series; cost and cv_cost in rad² per sample"
                + (" (cost: N²·m² of effort error)" if method == "regressor_lsq" else "")
                + _failures(fits)
            )
            paper = PAPER_PENDULUM[friction] if method == "lm" else (None, None)
            records += [
                Record(
                    case,
                    "cost",
                    _nanmean([r[1] for r in rows]),
                    "N^2*m^2" if method == "regressor_lsq" else "rad^2",
                    paper=paper[0],
                    notes=notes,
                ),
                Record(
                    case,
                    "cv_cost",
                    _nanmean([r[2] for r in rows]),
                    "rad^2",
                    paper=paper[1],
                    notes=notes,
                ),
                Record(
                    case,
                    "iterations",
                    _nanmean([_meta(f, "iterations") for f in fits]),
                    "",
                    notes=notes,
                ),
                Record(case, "wall_s", _nanmean([f.wall for f in fits]), "s", notes=notes),
                Record(
                    case,
                    "wall_over_duration",
                    _nanmean([f.wall for f in fits]) / duration,
                    "",
                    notes=notes,
                ),
            ]
            errs = [_rel_errors(names, f.theta, PENDULUM_TRUTH) for f in fits]
            for n in names:
                records.append(
                    Record(
                        case,
                        f"rel_err_{n}",
                        _nanmean([abs(e[n]) for e in errs]),
                        "",
                        notes=notes + "; mean |estimate / truth − 1|",
                    )
                )
            table3.setdefault(friction, {})[method] = (
                _nanmean([r[1] for r in rows]),
                _nanmean([r[2] for r in rows]),
            )
            if friction == "dry" and method == "lm":
                table2 = _table2(rows, names, offsets)
    records += _smoothing_shift(args, duration, obs_std)
    return records, [*_table3(table3), "", *table2]


def _smoothing_shift(args: argparse.Namespace, duration: float, obs_std: float) -> list[Record]:
    """LM on series 0 made with the sharp and with the fits' own Coulomb smoothing."""
    records = []
    smooth = DEFAULT_COULOMB_SMOOTHING
    sharp_traj = pendulum_series(RELEASE_OFFSETS[0], args.seed, duration=duration)[0]
    matched_traj = pendulum_series(
        RELEASE_OFFSETS[0], args.seed, duration=duration, smoothing=smooth
    )[0]
    for friction in ("dry", "stribeck"):
        names = FRICTION_MODELS[friction]
        start = _point(names, [PENDULUM_BOUNDS[n][2] for n in names])
        sharp = _fit("lm", _pendulum_problem([sharp_traj], names), LM_SETTINGS, start)
        matched = _fit("lm", _pendulum_problem([matched_traj], names), LM_SETTINGS, start)
        notes = (
            f"series 0: data made with ε = {SHARP_SMOOTHING:g} rad/s minus data made with "
            f"the fits' ε = {smooth:g} rad/s (same noise), LM estimates over the truth"
        )
        for k, n in enumerate(names):
            shift = math.nan
            if sharp.theta is not None and matched.theta is not None:
                shift = float((sharp.theta[k] - matched.theta[k]) / PENDULUM_TRUTH[n])
            records.append(
                Record(f"pendulum/{friction}/lm", f"smoothing_shift_{n}", shift, "", notes=notes)
            )
    return records


def _table2(
    rows: list[tuple[_Fit, float, float]], names: Sequence[str], offsets: Sequence[float]
) -> list[str]:
    """The paper's Table 2: the dry model per series, LM, value(std in the last digits)."""
    head = "| | " + " | ".join(f"{k} ({o:g} rad)" for k, o in enumerate(offsets)) + " | mean |"
    lines = [
        "#### pendulum, dry model, LM per series (paper Table 2 format; truth in brackets)",
        "",
        head,
        "|---" * (len(offsets) + 2) + "|",
    ]
    costs = [r[1] for r in rows]
    cvs = [r[2] for r in rows]
    lines.append(
        "| cost (rad²) | " + " | ".join(f"{c:.3g}" for c in costs) + f" | {_nanmean(costs):.3g} |"
    )
    lines.append(
        "| CV (rad²) | " + " | ".join(f"{c:.3g}" for c in cvs) + f" | {_nanmean(cvs):.3g} |"
    )
    for k, n in enumerate(names):
        cells = []
        for fit, _, _ in rows:
            if fit.post is None:
                cells.append("failed")
                continue
            cells.append(_with_std(fit.post.map()[k], fit.post.std()[k]))
        lines.append(f"| {n} [{PENDULUM_TRUTH[n]:g}] | " + " | ".join(cells) + " | |")
    n = len(offsets)
    for key, label, combined in (("cost", "cost", 1.47e-6), ("cv", "CV", 1.48e-6)):
        cells = " | ".join(f"{c:.3g}" for c in PAPER_DRY_SERIES[key][:n])
        lines.append(f"| paper {label} (real data) | {cells} | {combined:.3g} |")
    return lines


def _table3(table: dict[str, dict[str, tuple[float, float]]]) -> list[str]:
    """The paper's Table 3: cost and CV per friction model, every method beside LM."""
    methods = sorted({m for row in table.values() for m in row}, key=_method_order)
    lines = [
        "#### pendulum: mean cost and CV per friction model (paper Table 3 format)",
        "",
        "| | " + " | ".join(table) + " |",
        "|---" * (len(table) + 1) + "|",
    ]
    for method in methods:
        for k, label in ((0, "cost"), (1, "CV")):
            cells = [f"{table[f].get(method, (math.nan, math.nan))[k]:.3g}" for f in table]
            lines.append(f"| {method} {label} | " + " | ".join(cells) + " |")
    for k, label in ((0, "cost"), (1, "CV")):
        cells = [f"{PAPER_PENDULUM[f][k]:.3g}" for f in table]
        lines.append(f"| paper LM {label} (real data) | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("cost and CV in rad² per sample; regressor_lsq's cost is its effort error (N²·m²)")
    return lines


# ========================================================================= Furuta
def _furuta_truth() -> dict[str, float]:
    robot = load_robot("furuta")
    spec = ParameterSpec([Parameter(n, *FURUTA_BOUNDS[n]) for n in FURUTA_BOUNDS])
    nominal = dict(zip(spec.names, spec.nominal_theta(robot).tolist(), strict=True))
    return {**nominal, **{n: v for n, v in furuta.TRUE_PARAMETERS.items() if n in nominal}}


def _furuta_problem(
    trajs: Sequence[Trajectory],
    names: Sequence[str],
    *,
    kind: str = "shooting",
    held: dict[str, float] | None = None,
) -> Problem:
    """The Furuta with ``names`` free; the parameters in ``held`` fixed at their values."""
    robot = load_robot("furuta")
    obs = JointObservation(robot)
    params = [Parameter(n, *FURUTA_BOUNDS[n]) for n in names]
    for n, v in (held or {}).items():  # a box of width 1e-12 around the held value
        params.append(Parameter(n, v, v + 1e-12 * max(abs(v), 1.0), nominal=v))
    extra = EQUATION_ERROR if kind == "inverse_dynamics" else {}
    dt = float(trajs[0].t[1] - trajs[0].t[0])
    settings = LikelihoodSettings(
        kind=kind,
        obs_std=_encoder_std(1e-3),
        shooting="single",  # type: ignore[arg-type]
        torque_std=TORQUE_STD,
        **extra,
    )
    return Problem(
        robot=robot,
        spec=ParameterSpec(params),
        dataset=Dataset(list(trajs)),
        dt=dt,
        control=CurrentControl(None, actuated=[0]),
        control_names=list(trajs[0].command_names),
        observe=obs,
        obs_names=obs.names,
        likelihood=settings,
        name="furuta",
    )


def _centre(names: Sequence[str], held: dict[str, float] | None = None) -> Posterior:
    theta = [0.5 * (FURUTA_BOUNDS[n][0] + FURUTA_BOUNDS[n][1]) for n in names]
    held = held or {}
    return _point([*names, *held], [*theta, *held.values()])


def _furuta(args: argparse.Namespace, quick: bool) -> tuple[list[Record], list[str]]:
    duration = 1.5 if quick else 3.0
    dataset, _ = furuta.simulate(args.seed, duration=duration)
    truth = _furuta_truth()
    names = list(FURUTA_BOUNDS)
    scale2 = _encoder_std(1e-3) ** 2
    by_exp = {tr.meta["experiment"]: tr for tr in dataset}
    records: list[Record] = []
    table: dict[str, dict[str, _Fit]] = {}
    cvs: dict[str, dict[str, float]] = {}
    for experiment, traj in by_exp.items():
        start = _centre(names)
        shooting = _furuta_problem([traj], names)
        fits = {"lm": _fit("lm", shooting, LM_SETTINGS, start)}
        if not quick and experiment == "swing_up":  # the costliest fit: the paper's timing case
            fits["sim_error_lsq"] = _fit("lsq", shooting, LSQ_SETTINGS, start)
        torque = _furuta_problem([traj], names, kind="inverse_dynamics")
        fits["regressor_lsq"] = _fit("lsq", torque, LSQ_SETTINGS, start)
        others = [tr for e, tr in by_exp.items() if e != experiment]
        table[experiment] = fits
        for method, fit in fits.items():
            case = (
                f"furuta/{method}"
                if experiment == "swing_up"
                else (f"furuta/{experiment}/{method}")
            )
            cv = _cv_cost(lambda tr: _furuta_problem(tr, names), others, fit.theta, names, scale2)
            cvs.setdefault(experiment, {})[method] = cv
            unit2 = TORQUE_STD**2 if method == "regressor_lsq" else scale2
            notes = (
                f"{experiment}, {duration:g} s at 100 Hz, 12 parameters from the centre of "
                "the box; cv_cost: LM state estimation on the other two experiments"
                + _failures([fit])
            )
            paper = PAPER_FURUTA[experiment] if method == "lm" else (None, None)
            records += [
                Record(
                    case,
                    "cost",
                    _cost_of(fit, unit2),
                    "N^2*m^2" if method == "regressor_lsq" else "rad^2",
                    paper=paper[0],
                    notes=notes,
                ),
                Record(case, "cv_cost", cv, "rad^2", paper=paper[1], notes=notes),
                Record(
                    case,
                    "iterations",
                    _meta(fit, "iterations"),
                    "",
                    paper=PAPER_ITERATIONS if method == "lm" and experiment == "swing_up" else None,
                    notes=notes + "; paper: six iterations for the swing-up",
                ),
                Record(case, "wall_s", fit.wall, "s", notes=notes),
                Record(
                    case,
                    "wall_over_duration",
                    fit.wall / duration,
                    "",
                    target=1.0,
                    notes=notes + "; below 1: faster than real time on one core",
                ),
            ]
            if method == "lm":
                records.append(
                    Record(
                        case,
                        "iterations_to_final_cost",
                        _iterations_to(fit.history),
                        "",
                        notes=notes + "; first iteration within 1e-6 of the final cost",
                    )
                )
            errs = _rel_errors(names, fit.theta, truth)
            unidentified = [] if fit.post is None else fit.post.meta.get("unidentified", [])
            for n in names:
                records.append(
                    Record(
                        case,
                        f"rel_err_{n}",
                        errs[n],
                        "",
                        notes=notes + ("; reported unidentified" if n in unidentified else ""),
                    )
                )
    lines = _table4(table, cvs, names, truth, scale2)
    sens_records, sens_lines = _furuta_sensitivity(args, quick)
    return records + sens_records, [*lines, "", *sens_lines]


def _table4(
    table: dict[str, dict[str, _Fit]],
    cvs: dict[str, dict[str, float]],
    names: Sequence[str],
    truth: dict[str, float],
    scale2: float,
) -> list[str]:
    """The paper's Table 4: per experiment, cost, CV and the parameters with their std."""
    exps = list(table)
    lines = [
        "#### Furuta: LM per experiment (paper Table 4 format; truth in brackets)",
        "",
        "| | " + " | ".join(exps) + " |",
        "|---" * (len(exps) + 1) + "|",
    ]
    lm = {e: table[e]["lm"] for e in exps}
    lines.append(
        "| cost (rad²) | " + " | ".join(f"{_cost_of(lm[e], scale2):.3g}" for e in exps) + " |"
    )
    lines.append("| CV (rad²) | " + " | ".join(f"{cvs[e]['lm']:.3g}" for e in exps) + " |")
    for k, n in enumerate(names):
        cells = []
        for e in exps:
            post = lm[e].post
            if post is None:
                cells.append("failed")
                continue
            mark = " (unidentified)" if n in post.meta.get("unidentified", []) else ""
            cells.append(_with_std(post.map()[k], post.std()[k]) + mark)
        lines.append(f"| {n} [{truth[n]:g}] | " + " | ".join(cells) + " |")
    lines.append(
        "| iterations | " + " | ".join(f"{_meta(lm[e], 'iterations'):g}" for e in exps) + " |"
    )
    lines.append(
        "| paper cost / CV (real data) | "
        + " | ".join(f"{PAPER_FURUTA[e][0]:.3g} / {PAPER_FURUTA[e][1]:.3g}" for e in exps)
        + " |"
    )
    lines += [
        "",
        "| method | " + " | ".join(f"{e} CV" for e in exps) + " |",
        "|---" * (len(exps) + 1) + "|",
    ]
    for method in sorted({m for e in exps for m in cvs[e]}, key=_method_order):
        lines.append(
            f"| {method} | "
            + " | ".join(f"{cvs[e].get(method, math.nan):.3g}" for e in exps)
            + " |"
        )
    return lines


def _furuta_sensitivity(args: argparse.Namespace, quick: bool) -> tuple[list[Record], list[str]]:
    """Figs. 6–7: LM's four estimates on the release against the step and the weight."""
    rate = 400.0
    dataset, _ = furuta.simulate(
        args.seed, experiments=("release",), duration=1.0 if quick else 3.0, rate=rate
    )
    truth = _furuta_truth()
    names = list(FURUTA_SENSITIVITY)
    held = {n: truth[n] for n in FURUTA_BOUNDS if n not in names}
    problem = _furuta_problem(list(dataset), names, held=held)
    start = _centre(names, held)
    strides = (1, 8) if quick else (1, 2, 4, 8, 16)
    weights = (100.0,) if quick else (1e-2, 1.0, 1e2, 1e4, 1e6)
    runs = [(f"stride={s}", {"stride": s}) for s in strides]
    runs += [(f"w={w:g}", {"stride": 1, "state_error_weight": w}) for w in weights]
    records = []
    lines = [
        "#### Furuta release, four parameters: sensitivity to the step and the weight "
        "(paper Figs. 6–7); relative errors",
        "",
        "| setting | h (ms) | w | " + " | ".join(names) + " | iterations | cost (rad²) |",
        "|---" * (len(names) + 5) + "|",
    ]
    for label, overrides in runs:
        settings = {**LM_SETTINGS, **overrides}
        fit = _fit("lm", problem, settings, start)
        errs = _rel_errors(names, None if fit.theta is None else fit.theta[: len(names)], truth)
        case = f"furuta/sensitivity/{label}"
        step_ms = 1e3 * settings["stride"] / rate
        notes = (
            f"release at {rate:g} Hz, estimation step {step_ms:g} ms, w = "
            f"{settings['state_error_weight']:g}; other parameters held at the truth"
            + _failures([fit])
        )
        scale2 = _encoder_std(1e-3) ** 2
        records += [Record(case, f"rel_err_{n}", errs[n], "", notes=notes) for n in names]
        records += [
            Record(case, "iterations", _meta(fit, "iterations"), "", notes=notes),
            Record(case, "cost", _cost_of(fit, scale2), "rad^2", notes=notes),
        ]
        lines.append(
            f"| {label} | {step_ms:g} | {settings['state_error_weight']:g} | "
            + " | ".join(f"{errs[n]:+.3f}" for n in names)
            + f" | {_meta(fit, 'iterations'):g} | {_cost_of(fit, scale2):.3g} |"
        )
    return records, lines


# ========================================================================= Panda payload
def _panda(args: argparse.Namespace, quick: bool) -> tuple[list[Record], list[str]]:
    from dynid.estimators.baselines.regressor_ls import fit_payload
    from dynid.problem_file import load_problem
    from dynid.sim import panda_payload, read_truth
    from dynid_bench.payload import COM, PROBLEM_FILE

    duration = 4.0 if quick else 20.0
    records: list[Record] = []
    lines = [
        "#### Panda payload (20 s at 1 kHz; targets: mass 1 %, COM 5 mm, LM under 5 s)",
        "",
        "| method | mass (kg) | σ mass | COM error (mm) | σ COM (mm) | wall (s) |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="dynid-lm-") as tmp:
        bag = Path(tmp) / "panda_payload.mcap"
        panda_payload.simulate(args.seed, bag, duration=duration)
        truth = read_truth(bag)["parameters"]
        problem, pf = load_problem(PROBLEM_FILE, bag=bag, device=args.device)
        true_mass = float(truth["payload/mass"])
        true_com = np.array([truth[n] for n in COM])

        def add(
            method: str,
            mass: float,
            com: np.ndarray,
            mass_std: float,
            com_std: float,
            wall: float,
            iterations: float,
            notes: str,
            lm: bool = False,
        ) -> None:
            case = f"panda_payload/{method}"
            com_err = float(np.linalg.norm(com - true_com))
            records.extend(
                [
                    Record(case, "mass_kg", mass, "kg", notes=notes),
                    Record(
                        case,
                        "mass_rel_err",
                        abs(mass - true_mass) / true_mass,
                        "",
                        target=0.01 if lm else None,
                        notes=notes,
                    ),
                    Record(
                        case, "com_err_m", com_err, "m", target=0.005 if lm else None, notes=notes
                    ),
                    Record(case, "mass_std_kg", mass_std, "kg", notes=notes),
                    Record(
                        case,
                        "com_std_m",
                        com_std,
                        "m",
                        notes=notes + "; √trace of the COM covariance",
                    ),
                    Record(case, "wall_s", wall, "s", target=5.0 if lm else None, notes=notes),
                    Record(case, "wall_over_duration", wall / duration, "", notes=notes),
                    Record(case, "iterations", iterations, "", notes=notes),
                ]
            )
            lines.append(
                f"| {method} | {mass:.4f} | {mass_std:.2g} | {1e3 * com_err:.2f} | "
                f"{1e3 * com_std:.2g} | {wall:.2f} |"
            )

        def from_post(fit: _Fit) -> tuple[float, np.ndarray, float, float]:
            post = fit.post
            assert post is not None
            value = post.as_dict(post.map() if post.num_particles == 1 else post.mean())
            idx = [post.names.index(n) for n in COM]
            cov = post.cov()
            return (
                value["payload/mass"],
                np.array([value[n] for n in COM]),
                float(post.std()[post.names.index("payload/mass")]),
                float(np.sqrt(np.trace(cov[np.ix_(idx, idx)]))),
            )

        fit = _fit(
            "lm",
            problem,
            {},
            _point(problem.spec.names, problem.spec.nominal_theta(problem.robot).tolist()),
        )
        notes = (
            "the parameters alone on the problem's effort residuals (likelihood stride "
            f"{problem.likelihood.stride}, cutoff {problem.likelihood.cutoff_hz:g} Hz); from the "
            "problem file's nominal payload" + _failures([fit])
        )
        if fit.post is not None:
            add("lm", *from_post(fit), fit.wall, _meta(fit, "iterations"), notes, lm=True)

        robot = load_robot("panda")
        begin = time.perf_counter()
        body = fit_payload(robot, problem.dataset[0], panda_payload.PAYLOAD_LINK)
        wall = time.perf_counter() - begin
        mass_std, com_std = _body_std(body)
        add(
            "regressor_lsq",
            body.mass,
            np.asarray(body.com),
            mass_std,
            com_std,
            wall,
            1.0,
            "classical regressor least squares (fit_payload): 10 Hz zero-phase filter, central "
            "differences, 0.25 s trimmed; σ from σ̂²(YᵀY)⁻¹, COM by first-order propagation",
        )

        csvgd = resolve_estimator(
            "csvgd",
            pf.estimator,
            {"seed": args.seed} | ({"num_particles": 8, "max_iterations": 20} if quick else {}),
        )
        result = run_fit(csvgd, problem, threads=1)
        post, wall = result.posterior, result.wall_s
        settings = csvgd.settings
        add(
            "csvgd",
            *from_post(_Fit(post, wall)),
            wall,
            float(post.iteration),
            f"problem file settings: N = {settings.get('num_particles')}, "
            f"{post.iteration} iterations; posterior mean, σ from the particle spread",
        )
    return records, lines


def _body_std(body: Any) -> tuple[float, float]:
    """Mass and √trace(COM covariance) of a regressor fit (first-order, joint frame: the trace
    is the same in every frame)."""
    cov = np.asarray(body.pi_covariance)
    m = float(body.pi[0])
    h = np.asarray(body.pi[1:4], dtype=float)
    J = np.zeros((3, 10))
    J[:, 0] = -h / m**2
    J[:, 1:4] = np.eye(3) / m
    return math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(np.trace(J @ cov @ J.T), 0.0))


# ========================================================================= noise sweep
def _noise(args: argparse.Namespace, quick: bool) -> tuple[list[Record], list[str]]:
    """The dry pendulum on series 1 (0.1 rad) with growing encoder noise: where methods break."""
    levels = (1e-4, 3e-3) if quick else (1e-4, 1e-3, 3e-3, 1e-2)
    duration = 3.0 if quick else 12.0
    names = FRICTION_MODELS["dry"]
    records: list[Record] = []
    lines = [
        "#### noise sweep: dry pendulum, series 1 (0.1 rad), |relative error| of "
        + ", ".join(names),
        "",
        "| σ (rad) | method | " + " | ".join(names) + " | wall (s) |",
        "|---" * (len(names) + 3) + "|",
    ]
    for sigma in levels:
        traj, _ = pendulum_series(RELEASE_OFFSETS[1], args.seed, duration=duration, noise=sigma)
        obs_std = _encoder_std(sigma)
        fits = _three_fits([traj], names, obs_std, with_sim=not quick)
        for method, fit in fits.items():
            case = f"noise/sigma={sigma:g}/{method}"
            errs = _rel_errors(names, fit.theta, PENDULUM_TRUTH)
            notes = (
                f"Gaussian σ = {sigma:g} rad then 4096 pulses/rev; obs_std = "
                f"{obs_std:.3g} rad (the known sensor model)" + _failures([fit])
            )
            records += [Record(case, f"rel_err_{n}", errs[n], "", notes=notes) for n in names]
            records.append(Record(case, "wall_s", fit.wall, "s", notes=notes))
            lines.append(
                f"| {sigma:g} | {method} | "
                + " | ".join(f"{abs(errs[n]):.3g}" for n in names)
                + f" | {fit.wall:.2f} |"
            )
    return records, lines


# ========================================================================= helpers
def _meta(fit: _Fit, key: str) -> float:
    if fit.post is None:
        return math.nan
    return float(fit.post.meta.get(key, math.nan))


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _failures(fits: Sequence[_Fit]) -> str:
    failed = [f.note for f in fits if f.post is None]
    return f"; {len(failed)} failed ({failed[0]})" if failed else ""


def _with_std(value: float, std: float) -> str:
    """``value(std)`` with the standard deviation in the last printed digits (paper style)."""
    if not (math.isfinite(std) and std > 0):
        return f"{value:.4g}"
    decimals = max(0, -math.floor(math.log10(std)))
    if std * 10**decimals >= 9.5 and decimals > 0:
        decimals -= 1
    if abs(value) < std:
        return f"{value:.{decimals}f}({std:.1g})"
    digits = round(std * 10**decimals)
    return f"{value:.{decimals}f}({digits})"


def _method_order(method: str) -> int:
    order = ("lm", "sim_error_lsq", "regressor_lsq", "csvgd")
    return order.index(method) if method in order else len(order)


def run(args: argparse.Namespace) -> list[Record]:
    """Run the chosen scenarios, print the paper-format tables and return the records."""
    scenarios = [s for s in getattr(args, "scenarios", ",".join(SCENARIOS)).split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"--scenarios: unknown {unknown}; choose from {list(SCENARIOS)}")
    quick = bool(getattr(args, "quick", False))
    args.seed = getattr(args, "seed", 0)
    args.device = getattr(args, "device", "cpu")
    runners = {"pendulum": _pendulum, "furuta": _furuta, "panda_payload": _panda, "noise": _noise}
    records: list[Record] = []
    for name in scenarios:
        begin = time.perf_counter()
        recs, lines = runners[name](args, quick)
        print("\n".join([*lines, "", f"({name}: {time.perf_counter() - begin:.0f} s)", ""]))
        records += recs
    return records
