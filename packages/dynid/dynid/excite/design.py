"""Excitation design: the Fourier motion that maximises the information of a problem's free
parameters within the robot's limits (``dynid excite``).

The design variables are the Fourier coefficients of every joint (:mod:`dynid.excite.fourier`;
the start, duration, harmonics and base frequency are fixed). The criterion is a function of the
Fisher information ``F`` of the problem's own torque model along the motion
(:mod:`dynid.excite.information`), plus the information of recordings already made
(``prior``): D-optimality ``log det F`` (default), the condition number ``λ_max/λ_min`` or the
E-criterion ``λ_min``. ``F`` is evaluated on an even grid of ``samples`` times inside the scored
span and scaled to the number of samples the likelihood will score (every ``stride``-th sample
of a recording at ``rate``, ``trim_s`` cut at both ends); the final motion's ``F`` is evaluated
on exactly those samples.

Constraints, on an even grid of ``constraint_samples`` times during optimisation, as quadratic
penalties on the normalised violations (kept 2 % inside each limit, 1 % of the range inside each
position limit) whose weight grows ×10 each
round (a penalty continuation; Nocedal and Wright §17.1) of L-BFGS-B on the coefficients, with
analytic gradients through torch: positions (URDF range less a margin), velocities (URDF),
accelerations and jerks (:class:`~dynid.excite.limits.JointLimits`), torques (the problem's
model at its nominal parameters, payload guess included, against the URDF efforts times
``excitation.effort_fraction``), an
end-effector box, and self- and environment collision (:mod:`dynid.excite.collision`): after
each round the pairs closer than ``min_distance + 0.03 m`` at the grid times join an active set,
whose distance gradients (from coal's witness points and the joint Jacobians) enter the next
rounds. Several starts from
seeded random coefficients; the best feasible one wins.

The winner is then checked at every sample of the written trajectory (``rate``): every limit,
the workspace box, and collisions of every checked pair with the clearance ``min_distance``.
Where anything is violated, all coefficients are scaled down together (which scales velocities,
accelerations and jerks by the same factor and draws the positions toward the start) until
nothing is; a motion that must be scaled below 5 % is refused as infeasible. A violating
trajectory is never returned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.optimize
import torch
from numpy.typing import NDArray

from dynid.data.trajectory import Dataset, Trajectory
from dynid.excite.collision import CollisionModel, Environment
from dynid.excite.errors import ExcitationError
from dynid.excite.fourier import FourierMotion
from dynid.excite.information import Criteria, InformationModel, criteria
from dynid.excite.limits import JointLimits
from dynid.excite.noise import SensorNoise, propagated_covariance
from dynid.model.errors import ModelError
from dynid.model.robot import robot_urdf
from dynid.objective.torque import inverse_dynamics_residuals
from dynid.problem import Problem
from dynid.problem_file import ProblemFile

__all__ = ["CRITERIA", "DesignSettings", "Excitation", "ExcitationPlanner", "design_excitation"]

Array = NDArray[np.float64]

CRITERIA = ("d", "cond", "e")
"""``--criterion`` values: D-optimality, condition number, E-optimality."""

_INSIDE = 0.98  # penalties keep every limit this fraction inside
_ACTIVE_EXTRA = 0.03  # m: pairs closer than min_distance + this join the collision active set
_MIN_SCALE = 0.05
_DISTANCE_RATE = 25.0  # Hz of the minimum-distance trace


@dataclass(frozen=True)
class DesignSettings:
    """Settings of :func:`design_excitation` (SI units).

    Attributes:
        duration: s of the motion.
        harmonics: Fourier harmonics per joint.
        base_frequency: Hz of the first harmonic; ``None``: ``1 / duration``.
        rate: Hz of the written trajectory and of the recording it will give.
        start: start (and end) configuration, one value per joint or ``{joint: value}`` for
            some joints (the others at the middle of their range); ``None``: the middle of every
            joint's range.
        criterion: ``"d"``, ``"cond"`` or ``"e"`` (:data:`CRITERIA`).
        seed: seed of the random starts.
        starts: number of starts.
        iterations: L-BFGS-B iterations per start, over all penalty rounds.
        speed_scale: velocity, acceleration and jerk limits are multiplied by it.
        ramp: s of each smooth ramp; ``None``: ``min(0.1 duration, 2 s)``.
        samples: information grid during optimisation.
        constraint_samples: constraint grid during optimisation.
        priors: problem files' recordings whose information is added (built problems).
        sensor_noise: the recording's sensor noise the predicted σ propagate
            (:mod:`dynid.excite.noise`); ``None``: the problem file's ``excitation.sensor_noise``,
            and without one the Cramér–Rao σ under ``likelihood.torque_std``.
        noise_draws: noise realisations of that propagation.
    """

    duration: float = 20.0
    harmonics: int = 5
    base_frequency: float | None = None
    rate: float = 1000.0
    start: Sequence[float] | Mapping[str, float] | None = None
    criterion: str = "d"
    seed: int = 0
    starts: int = 3
    iterations: int = 90
    speed_scale: float = 1.0
    ramp: float | None = None
    samples: int = 80
    constraint_samples: int = 400
    priors: tuple[Problem, ...] = field(default_factory=tuple)
    sensor_noise: SensorNoise | None = None
    noise_draws: int = 100


@dataclass
class Excitation:
    """A planned excitation, checked at every sample.

    Attributes:
        motion: the trajectory's shape (start, duration, harmonics, frequency, ramp).
        coefficients: ``[2 H nj]`` (:meth:`FourierMotion.split`: ``a`` then ``b``, rad/s).
        joint_names: the robot's joints.
        t, q, v, a, jerk, tau: ``[T]`` s and ``[T, nv]`` rad, rad/s, rad/s², rad/s³ and the
            nominal model's torques N·m, at ``rate``.
        distance_t, distance, distance_pair: the smallest distance between checked geometries
            (m) over time (s) and the pair it is between.
        workspace: ``[T, 3]`` world position of the workspace frame (m), or ``None``.
        limits: the limits checked.
        min_distance: the clearance checked (m).
        information: ``F`` with the prior; ``information_motion``: of this motion alone.
        criteria, criteria_motion: their criteria.
        names, units: the coordinates of ``F`` (:class:`InformationModel`).
        sigma: ``[r]`` predicted standard deviations (with the prior) and ``covariance`` their
            covariance: ``F⁻¹`` (Cramér–Rao under ``likelihood.torque_std``), or with
            ``sensor_noise`` the sensors' noise propagated through the likelihood's
            preprocessing (:mod:`dynid.excite.noise`).
        sensor_noise: the sensor noise propagated, or ``None``.
        scored_samples: how many samples the problem's likelihood scores along the motion.
        criterion, seed, scale: the criterion optimised, the seed, and the factor the best
            start's coefficients were scaled by to pass the dense check.
        planning_s: wall time of the design (s).
        starts: per start ``{"seed", "criterion", "penalty", "feasible"}``.
        problem_name, robot_name: for the outputs.
        parameter_units: per coordinate, the unit of its leading member.
    """

    motion: FourierMotion
    coefficients: Array
    joint_names: list[str]
    t: Array
    q: Array
    v: Array
    a: Array
    jerk: Array
    tau: Array
    distance_t: Array
    distance: Array
    distance_pair: list[str]
    workspace: Array | None
    limits: JointLimits
    min_distance: float
    information: Array
    information_motion: Array
    criteria: Criteria
    criteria_motion: Criteria
    names: list[str]
    units: list[str]
    sigma: Array
    covariance: Array
    sensor_noise: SensorNoise | None
    scored_samples: int
    criterion: str
    seed: int
    scale: float
    planning_s: float
    starts: list[dict[str, float]]
    problem_name: str
    robot_name: str


def _urdf_of(pf: ProblemFile) -> Path:
    """The URDF file the problem's robot comes from."""
    if pf.config.robot.urdf is not None:
        return pf.config.robot.urdf
    try:
        return robot_urdf(str(pf.config.robot.name))
    except ModelError as exc:
        raise ExcitationError(f"{pf.origin}: robot: {exc}") from None


class ExcitationPlanner:
    """Everything fixed while one excitation is designed: the problem on a placeholder motion,
    its information model, the limits, the collision model and the time grids.

    Args:
        pf: the problem file (its robot, free parameters, likelihood, ``robot.limits`` and
            ``excitation`` sections).
        settings: the design settings.

    Raises:
        ExcitationError: a bad setting, a start outside the limits or in collision, an unknown
            joint, a problem without the torque likelihood (one line each).
    """

    def __init__(self, pf: ProblemFile, settings: DesignSettings) -> None:
        s = settings
        if s.criterion not in CRITERIA:
            raise ExcitationError(
                f"--criterion must be one of {'|'.join(CRITERIA)}, got {s.criterion!r}"
            )
        for name, value in (("--duration", s.duration), ("--rate", s.rate)):
            if not (math.isfinite(value) and value > 0):
                raise ExcitationError(f"{name} must be > 0, got {value:g}")
        if s.harmonics < 1 or s.starts < 1:
            raise ExcitationError("--harmonics and the number of starts must be ≥ 1")
        self.pf, self.settings = pf, s
        robot = pf.robot
        self.robot = robot
        section = pf.config.excitation
        self.section = section
        self.limits = JointLimits.of(
            robot,
            pf.config.robot.limits,
            margin=section.position_margin,
            scale=s.speed_scale,
            effort_fraction=section.effort_fraction,
        )
        self.start = self._start(s.start)
        self.limits.check_start(self.start)
        ramp = min(0.1 * s.duration, 2.0) if s.ramp is None else float(s.ramp)
        if not 0 < 2 * ramp <= s.duration:
            raise ExcitationError(f"ramp {ramp:g} s does not fit twice into {s.duration:g} s")
        frequency = 1.0 / s.duration if s.base_frequency is None else float(s.base_frequency)
        if not (math.isfinite(frequency) and frequency > 0):
            raise ExcitationError(f"--base-frequency must be > 0 Hz, got {frequency:g}")
        self.motion = FourierMotion(
            self.start, float(s.duration), int(s.harmonics), frequency, ramp
        )
        self.collision = CollisionModel(
            robot, _urdf_of(pf), Environment(section.table_z, section.boxes)
        )
        hit = self.collision.first_collision(self.start[None], section.min_distance)
        if hit is not None:
            raise ExcitationError(
                f"--start: {hit[1]} and {hit[2]} are closer than {section.min_distance:g} m"
            )
        if section.workspace_frame is not None:
            try:
                robot.frame(section.workspace_frame)
            except ModelError as exc:
                raise ExcitationError(f"excitation.workspace.frame: {exc}") from None
        noise = s.sensor_noise
        if noise is None and section.sensor_noise is not None:
            noise = SensorNoise(**section.sensor_noise)
        self.sensor_noise = noise
        self.rng = np.random.default_rng(s.seed)
        reference = self.random_coefficients(self.rng)
        self.problem = self._problem(reference)
        like = self.problem.likelihood
        self.theta0 = self.problem.tensor(self.problem.spec.nominal_theta(robot).numpy()).unsqueeze(
            0
        )
        self._check_static_torque()
        dt = int(like.stride) / float(s.rate)
        self.t_scored = np.arange(like.trim_s, s.duration - like.trim_s + 1e-12, dt)
        if self.t_scored.size < 2:
            raise ExcitationError(
                f"--duration {s.duration:g} s leaves no scored samples after likelihood.trim_s "
                f"{like.trim_s:g} s"
            )
        self.t_info = np.linspace(self.t_scored[0], self.t_scored[-1], int(s.samples))
        self.t_cons = np.linspace(0.0, s.duration, int(s.constraint_samples))
        q, v, a, _ = self._evaluate(torch.as_tensor(reference), self.t_scored)
        self.info = InformationModel(self.problem, q.numpy(), v.numpy(), a.numpy())
        self.prior = np.zeros((self.info.dim, self.info.dim))
        for prior in s.priors:
            self.prior += self.info.fisher_of_recordings(prior)

    # ------------------------------------------------------------------------------ set-up
    def _start(self, start: Sequence[float] | Mapping[str, float] | None) -> Array:
        lim, names = self.limits, self.limits.names
        middle = 0.5 * (lim.lower + lim.upper)
        if start is None:
            return middle
        if isinstance(start, Mapping):
            out = middle.copy()
            for name, value in start.items():
                if name not in names:
                    raise ExcitationError(f"--start: unknown joint {name!r}; joints: {list(names)}")
                out[names.index(name)] = float(value)
            return out
        values = np.asarray([float(x) for x in start])
        if values.size != len(names):
            raise ExcitationError(
                f"--start: {values.size} values for {len(names)} joints {list(names)}"
            )
        return values

    def _problem(self, coefficients: Array) -> Problem:
        """The problem built on a placeholder recording of the motion (its data are never
        scored; the design evaluates the torque model on its own states)."""
        t, q, v, _, _ = self.motion.sample(coefficients, 100.0)
        traj = Trajectory(t=t, q=q, dq=v, effort=np.zeros_like(q),
                          joint_names=list(self.robot.joint_names))  # fmt: skip
        problem = self.pf.build(Dataset([traj]), device="cpu")
        if problem.likelihood.kind != "inverse_dynamics":
            raise ExcitationError(
                f"{self.pf.origin}: excitation design needs likelihood.kind inverse_dynamics "
                f"(the torque model whose information it maximises), not "
                f"{problem.likelihood.kind!r}"
            )
        return problem

    def _check_static_torque(self) -> None:
        zero = torch.zeros(1, self.robot.nv, dtype=torch.float64)
        q = torch.as_tensor(self.start[None], dtype=torch.float64)
        tau = self.torque(q, zero, zero).numpy()[0]
        for j, name in enumerate(self.limits.names):
            if abs(tau[j]) > _INSIDE * self.limits.effort[j]:
                raise ExcitationError(
                    f"--start: joint {name} needs {abs(tau[j]):.4g} N·m at rest, beyond its "
                    f"effort limit {self.limits.effort[j]:.4g} N·m"
                )

    # ------------------------------------------------------------------------------ model
    def _evaluate(self, c: torch.Tensor, t: Array) -> tuple[torch.Tensor, ...]:
        return self.motion.evaluate(c.to(torch.float64), torch.as_tensor(t, dtype=torch.float64))

    def torque(self, q: torch.Tensor, v: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """``[S, nv]`` the nominal model's joint torques (N·m), differentiable."""
        zero = torch.zeros_like(q)
        return -inverse_dynamics_residuals(self.problem, self.theta0, q, v, a, zero)[0]

    def workspace_position(self, q: torch.Tensor) -> torch.Tensor:
        """``[S, 3]`` world position of the workspace frame (m)."""
        p = self.problem.parameters(self.theta0)
        frame = str(self.section.workspace_frame)
        _, pos = self.problem.dynamics.frame_placement(p, q.unsqueeze(0), [frame])
        return pos[0, :, 0, :]

    def random_coefficients(self, rng: np.random.Generator, fraction: float = 0.9) -> Array:
        """Random coefficients scaled per joint so that its motion uses at most ``fraction`` of
        its position range (about the start), velocity, acceleration and jerk limits."""
        m = self.motion
        c = rng.standard_normal((2, m.num_joints, m.harmonics))
        t = np.linspace(0.0, m.duration, 400)
        with torch.no_grad():
            q, v, a, j = self._evaluate(torch.as_tensor(c.reshape(-1)), t)
        lim = self.limits
        dq = q.numpy() - self.start
        room_up, room_down = lim.upper - self.start, self.start - lim.lower
        ratio = np.maximum(
            np.max(dq, axis=0) / np.maximum(room_up, 1e-9),
            np.max(-dq, axis=0) / np.maximum(room_down, 1e-9),
        )
        for x, limit in ((v, lim.velocity), (a, lim.acceleration), (j, lim.jerk)):
            ratio = np.maximum(ratio, np.abs(x.numpy()).max(axis=0) / limit)
        return (c * (fraction / np.maximum(ratio, 1e-12))[None, :, None]).reshape(-1)

    # ------------------------------------------------------------------------------ objective
    def information(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``F`` of the motion on the optimisation grid, scaled to the scored samples, plus the
        prior, and the nominal torques ``[S, nv]`` on that grid (differentiable in ``c``)."""
        q, v, a, _ = self._evaluate(c, self.t_info)
        J, tau = self.info.regressor(q, v, a)
        F = (J.T @ J) * (self.t_scored.size / self.t_info.size)
        return F + torch.as_tensor(self.prior), tau

    def criterion_value(self, F: torch.Tensor) -> torch.Tensor:
        """The minimised form of the criterion: ``−log det F``, ``log(λ_max/λ_min)`` or
        ``−log λ_min``."""
        lam = torch.linalg.eigvalsh(
            F + 1e-12 * torch.trace(F) / F.shape[0] * torch.eye(F.shape[0], dtype=F.dtype)
        )
        lam = lam.clamp_min(1e-300)
        if self.settings.criterion == "d":
            return -torch.log(lam).sum()
        if self.settings.criterion == "cond":
            return torch.log(lam[-1]) - torch.log(lam[0])
        return -torch.log(lam[0])

    def penalty(
        self, c: torch.Tensor, tau: torch.Tensor, active: Sequence[tuple[float, int]] = ()
    ) -> torch.Tensor:
        """Sum of squared normalised violations (0 when feasible with the 2 % inside margin):
        kinematic limits and the workspace on the constraint grid, the torques ``tau`` of the
        information grid (:meth:`information`), the active collision pairs ``(time, pair)``."""
        lim = self.limits
        q, v, a, j = self._evaluate(c, self.t_cons)
        relu = torch.relu
        span = torch.as_tensor(lim.upper - lim.lower)
        inside = (1.0 - _INSIDE) / 2 * span
        lower, upper = torch.as_tensor(lim.lower) + inside, torch.as_tensor(lim.upper) - inside
        total = (relu(q - upper) / span).square().sum() + (relu(lower - q) / span).square().sum()
        for x, limit in ((v, lim.velocity), (a, lim.acceleration), (j, lim.jerk)):
            total = total + relu(x.abs() / (_INSIDE * torch.as_tensor(limit)) - 1).square().sum()
        effort = _INSIDE * torch.as_tensor(lim.effort)
        total = total + relu(tau.abs() / effort - 1).square().sum()
        if self.section.workspace_frame is not None:
            pos = self.workspace_position(q)
            lo = torch.as_tensor(self.section.workspace_lower, dtype=pos.dtype)
            hi = torch.as_tensor(self.section.workspace_upper, dtype=pos.dtype)
            total = total + (relu(pos - hi).square().sum() + relu(lo - pos).square().sum()) / 0.01
        if active:
            times = np.array([t for t, _ in active])
            qa, *_ = self._evaluate(c, times)
            clearance = self.section.min_distance + 0.5 * _ACTIVE_EXTRA
            for k, (_, pair) in enumerate(active):
                qk = qa[k].detach().numpy()
                d = self.collision.pair_distance(qk, pair)
                short = max(clearance - d, 0.0) / clearance
                if short > 0:
                    grad = self.collision.pair_gradient(qk, pair)
                    dq = qa[k] - qa[k].detach()
                    total = (
                        total
                        + short**2
                        - 2 * short / clearance * (torch.as_tensor(grad) * dq).sum()
                    )
        return total

    def close_pairs(self, c: Array) -> list[tuple[float, int]]:
        """``(time, pair)`` of the constraint grid closer than ``min_distance + 3 cm``."""
        with torch.no_grad():
            q, *_ = self._evaluate(torch.as_tensor(c), self.t_cons[::4])
        close = self.collision.close_pairs(q.numpy(), self.section.min_distance + _ACTIVE_EXTRA)
        return [(float(self.t_cons[::4][s]), k) for s, k in close]

    # ------------------------------------------------------------------------------ search
    def optimise(self, c0: Array) -> tuple[Array, float, float]:
        """L-BFGS-B with the penalty continuation from ``c0``: ``(coefficients, criterion,
        penalty)``."""
        c = np.asarray(c0, dtype=float)
        active: list[tuple[float, int]] = []
        rounds = 3
        for r in range(rounds):
            mu = 10.0 ** (1 + r)
            active = sorted(set(active) | set(self.close_pairs(c)))

            def fun(x: Array, mu: float = mu, active: list = active) -> tuple[float, Array]:
                ct = torch.as_tensor(x, dtype=torch.float64).requires_grad_(True)
                F, tau = self.information(ct)
                value = self.criterion_value(F) + mu * self.penalty(ct, tau, active)
                (grad,) = torch.autograd.grad(value, ct)
                return float(value.detach()), grad.numpy()

            res = scipy.optimize.minimize(
                fun, c, jac=True, method="L-BFGS-B",
                options={"maxiter": max(self.settings.iterations // rounds, 1)},
            )  # fmt: skip
            c = res.x
        with torch.no_grad():
            ct = torch.as_tensor(c)
            F, tau = self.information(ct)
            crit = float(self.criterion_value(F))
            pen = float(self.penalty(ct, tau, active))
        return c, crit, pen

    # ------------------------------------------------------------------------------ checks
    def violation(self, c: Array, *, collisions: bool = True) -> str | None:
        """The first violation of the motion ``c`` at every sample of ``rate`` (one line naming
        the joint or pair, the limit and the time), or ``None``."""
        t, q, v, a, j = self.motion.sample(c, self.settings.rate)
        lim = self.limits
        for j_idx, name in enumerate(lim.names):
            acc = lim.acceleration[j_idx]
            for label, x, lo, hi, unit in (
                ("position", q[:, j_idx], lim.lower[j_idx], lim.upper[j_idx], "rad"),
                ("velocity", v[:, j_idx], -lim.velocity[j_idx], lim.velocity[j_idx], "rad/s"),
                ("acceleration", a[:, j_idx], -acc, acc, "rad/s²"),
                ("jerk", j[:, j_idx], -lim.jerk[j_idx], lim.jerk[j_idx], "rad/s³"),
            ):
                bad = np.flatnonzero((x < lo) | (x > hi))
                if bad.size:
                    s = bad[0]
                    return (f"joint {name}: {label} {x[s]:.4g} {unit} at t = {t[s]:.3f} s outside "
                            f"[{lo:.4g}, {hi:.4g}]")  # fmt: skip
        tau = self._dense_torque(q, v, a)
        over = np.argwhere(np.abs(tau) > lim.effort)
        if over.size:
            s, j_idx = over[0]
            return (f"joint {lim.names[j_idx]}: torque {tau[s, j_idx]:.4g} N·m at t = {t[s]:.3f} s "
                    f"beyond the effort limit {lim.effort[j_idx]:.4g} N·m")  # fmt: skip
        if self.section.workspace_frame is not None:
            pos = self._dense_workspace(q)
            lo, hi = np.array(self.section.workspace_lower), np.array(self.section.workspace_upper)
            out = np.argwhere((pos < lo) | (pos > hi))
            if out.size:
                s, k = out[0]
                frame = self.section.workspace_frame
                return (f"frame {frame}: {'xyz'[k]} = {pos[s, k]:.4g} m at t = {t[s]:.3f} s "
                        f"outside the workspace [{lo[k]:.4g}, {hi[k]:.4g}]")  # fmt: skip
        if collisions:
            hit = self.collision.first_collision(q, self.section.min_distance)
            if hit is not None:
                s, a_name, b_name = hit
                return (f"collision: {a_name} and {b_name} closer than "
                        f"{self.section.min_distance:g} m at t = {t[s]:.3f} s")  # fmt: skip
        return None

    def _dense_torque(self, q: Array, v: Array, a: Array) -> Array:
        with torch.no_grad():
            parts = [
                self.torque(*(torch.as_tensor(x[s : s + 4096]) for x in (q, v, a))).numpy()
                for s in range(0, q.shape[0], 4096)
            ]
        return np.concatenate(parts)

    def _dense_workspace(self, q: Array) -> Array:
        with torch.no_grad():
            return self.workspace_position(torch.as_tensor(q)).numpy()

    def feasible(self, c: Array) -> tuple[Array, float]:
        """``(coefficients, scale)``: ``c`` scaled down until :meth:`violation` finds nothing.

        Raises:
            ExcitationError: still violated at 5 % of its amplitude (names the violation).
        """
        scale, last = 1.0, None
        while scale >= _MIN_SCALE:
            cheap = self.violation(scale * c, collisions=False)
            last = cheap or self.violation(scale * c)
            if last is None:
                return scale * c, scale
            scale *= 0.9 if cheap is None else 0.95
        raise ExcitationError(
            f"limits too tight for any motion: {last} even at {_MIN_SCALE:.0%} amplitude"
        )

    def finish(
        self, c: Array, scale: float, started: float, starts: list[dict[str, float]]
    ) -> Excitation:
        """The :class:`Excitation` of the feasible coefficients ``c``."""
        s = self.settings
        t, q, v, a, j = self.motion.sample(c, s.rate)
        tau = self._dense_torque(q, v, a)
        step = max(round(s.rate / _DISTANCE_RATE), 1)
        distance, pairs = self.collision.min_distance(q[::step])
        with torch.no_grad():
            qs, vs, as_, _ = self._evaluate(torch.as_tensor(c), self.t_scored)
            F_motion = self.info.fisher(qs, vs, as_).numpy()
        F = F_motion + self.prior
        cov, sigma = self.info.cramer_rao(F)
        noise = self.sensor_noise
        if noise is not None and np.all(np.isfinite(sigma)):
            cov = propagated_covariance(self.pf, self.info, (t, q, v, tau), self.prior, noise,
                                        draws=s.noise_draws, seed=s.seed)  # fmt: skip
            sigma = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        return Excitation(
            motion=self.motion,
            coefficients=np.asarray(c, dtype=float),
            joint_names=list(self.robot.joint_names),
            t=t, q=q, v=v, a=a, jerk=j, tau=tau,
            distance_t=t[::step], distance=distance, distance_pair=pairs,
            workspace=None if self.section.workspace_frame is None else self._dense_workspace(q),
            limits=self.limits,
            min_distance=self.section.min_distance,
            information=F,
            information_motion=F_motion,
            criteria=criteria(F),
            criteria_motion=criteria(F_motion),
            names=list(self.info.names),
            units=list(self.info.units),
            sigma=sigma,
            covariance=cov,
            sensor_noise=noise,
            scored_samples=int(self.t_scored.size),
            criterion=s.criterion,
            seed=s.seed,
            scale=scale,
            planning_s=time.perf_counter() - started,
            starts=starts,
            problem_name=self.pf.name,
            robot_name=self.robot.name,
        )  # fmt: skip


def design_excitation(
    pf: ProblemFile,
    settings: DesignSettings,
    progress: Callable[[str], None] | None = None,
) -> Excitation:
    """Plan the excitation of ``pf``'s free parameters (module notes).

    Args:
        pf: the problem file read (:func:`dynid.problem_file.read_problem_file`).
        settings: the design settings.
        progress: called with one line per start.

    Raises:
        ExcitationError: an infeasible request (one line naming the joint and the limit).
    """
    started = time.perf_counter()
    planner = ExcitationPlanner(pf, settings)
    best: tuple[float, Array] | None = None
    starts = []
    for k in range(settings.starts):
        c0 = planner.random_coefficients(planner.rng)
        c, crit, pen = planner.optimise(c0)
        starts.append({"start": k, "criterion": crit, "penalty": pen})
        if progress is not None:
            progress(f"start {k + 1}/{settings.starts}: criterion {crit:.4g}, penalty {pen:.3g}")
        key = crit + 10.0 * pen
        if best is None or key < best[0]:
            best = (key, c)
    assert best is not None
    c, scale = planner.feasible(best[1])
    return planner.finish(c, scale, started, starts)
