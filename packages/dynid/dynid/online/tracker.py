"""Live payload tracking: the inertial parameters of a payload from a joint-state stream.

:class:`PayloadTracker` takes joint-state samples one at a time or in blocks (positions ``q``,
optionally velocities ``q̇``, measured efforts ``τ``; robot joint order, SI units) and, on every
:meth:`PayloadTracker.update`, returns the payload estimate for all samples so far.

1. **Filtering.** Causal 2nd-order Butterworth state-variable filter (:mod:`dynid.online.filters`):
   ``q_f, q̇_f, q̈_f`` from ``q`` (or ``q_f`` from ``q``, ``q̇_f, q̈_f`` from a measured ``q̇``) and
   ``τ_f`` through the same low-pass, so all carry the same delay. The filter starts at rest at
   the first sample and after a gap in the stream; the first ``12`` group delays after a start
   are not used: a filter started at rest while the arm moves has a transient decaying as
   ``e^{-t/τ_g}`` in group delays ``τ_g``; after 12 of them, ``6e-6`` of the velocity it missed.
2. **Regressor.** ``y = τ_f − Y(q_f, q̇_f, q̈_f) π_arm − τ_fric(q̇_f) = Y_b T π_p + τ₀ + e``: the
   arm's nominal torques (the problem's robot without the payload; Pinocchio's joint-torque
   regressor ``Y``) and its friction (the problem file's model) are subtracted; ``Y_b T`` are the
   columns of the body carrying the payload, mapped to the payload's ten linear parameters
   ``π_p`` in the flange (the payload's link) frame (:func:`dynid.online.inertial.frame_to_joint`);
   ``τ₀`` are the joint torque offsets the problem file frees (``<joint>/torque_offset``), as
   nuisance parameters.
3. **Update.** Bayesian least squares in information form with exponential forgetting
   (:class:`dynid.online.information.InformationLS`). The memory ``T = 0.1 / change_rate`` is the
   window within which a payload change has a 10 % chance at the expected change rate
   (``λ = e^{−Δt/T}`` per sample); abrupt changes are left to the detector. The noise variance
   per joint is the window's residual variance at the estimate; the data information is divided
   by the residuals' integrated autocorrelation time ``κ`` (:class:`CorrelationTime`, measured
   per joint on the whitened residuals, at least that of white noise through the low-pass), so
   ``σ`` stays honest for 1 kHz samples of a low-passed signal.
4. **Prior.** The payload's nominal mass, centre of mass and inertia from the problem file's
   payload attachment, with the prior σ of its free parameters (``payload/mass``, ...);
   inertia entries the file does not free get ``inertia_prior_std``. The prior is propagated to
   ``π_p`` through the Jacobian at the nominal values.
5. **Published estimate.** ``π_p`` projected onto physically consistent bodies (pseudo-inertia
   ⪰ 0, :func:`dynid.online.inertial.project_consistent`), converted to mass, centre of mass and
   inertia about it (flange frame); σ from the information (before the projection) through the
   Jacobian. A parameter whose σ is above ``unexcited_ratio`` × its prior σ is reported as
   unexcited: the motion has not determined it and its value is essentially the prior's.
6. **Change detection.** Each residual ``y − Y θ̂`` (``θ̂`` the last estimate) is averaged over
   blocks of ``detect_block_s`` and standardised by its predictive σ, ``√(σ_c² v + s_c²)``:
   the noise of a block mean (``v = max(v_M, κ_c/M)``, the long-run variance of the means the
   CUSUM sums, so residuals correlated beyond one block do not inflate its false-alarm rate)
   plus the estimate's own uncertainty ``s_c = Σ_u √(Ȳ_cu P_u Ȳ_cuᵀ)`` summed over the updates
   ``u`` the block spans (each with its estimate and covariance ``P_u``; the sum of σ's bounds a
   sum of correlated errors), so an unconverged estimate raises no alarm; a two-sided CUSUM per
   joint (:class:`Cusum`) with the threshold for ``false_alarms_per_hour`` over all ``2 n``
   one-sided tests (union bound, Siegmund's ARL approximation) flags a change. Then the
   payload's information is re-initialised to its prior (the torque offsets keep their
   posterior as their new prior: they belong to the sensors, not the payload) and a
   :class:`ChangeEvent` reports the change time (the CUSUM's last zero), the estimate published
   before it, and ``settle_s`` later the estimate after it. The detector is re-armed only then:
   it tests for a change against a settled estimate, so the transient of the re-initialised
   estimate (and of a filter restart within it) raises no second alarm; a second change within
   ``settle_s`` of an alarm is caught once the detector is re-armed.

Deviations from the textbook pieces, on purpose: the detector accounts for the correlation
between consecutive blocks only through the long-run variance, and ignores the correlation
between joints; the projection is Frobenius-nearest in the pseudo-inertia, not in the
posterior metric.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import torch
from numpy.typing import NDArray

from dynid.errors import DynidError
from dynid.model.attachments import AttachedRobot, Payload
from dynid.model.dynamics import DEFAULT_COULOMB_SMOOTHING, friction_torque
from dynid.model.params import ParameterSpec, nominal_parameters
from dynid.model.robot import RobotModel
from dynid.online.filters import StateVariableFilter
from dynid.online.inertial import (
    BODY_FIELDS,
    frame_to_joint,
    linear_from_physical,
    physical_from_linear,
    project_consistent,
)
from dynid.online.information import InformationLS
from dynid.online.residuals import CorrelationTime, Cusum, cusum_threshold
from dynid.problem_file import ProblemFile

__all__ = [
    "ChangeEvent",
    "PayloadEstimate",
    "PayloadTracker",
    "SampleError",
    "TrackerError",
    "TrackerSettings",
    "TrackerUpdate",
]

Array = NDArray[np.float64]

#: Group delays of the filter discarded after it (re)starts at rest.
WARMUP_DELAYS = 12.0
#: A gap in the time stamps longer than this many sample periods restarts the filters.
GAP_PERIODS = 5.0
#: Every this many samples' products enter the residuals' autocorrelation.
CORRELATION_STRIDE = 5
#: Seconds of published estimates kept to report the one before a change.
HISTORY_S = 5.0


class TrackerError(DynidError, ValueError):
    """The tracker cannot be built for this problem or with these settings."""


class SampleError(DynidError, ValueError):
    """A joint-state sample is malformed (length, non-finite value, time going back)."""


@dataclass(frozen=True)
class TrackerSettings:
    """Settings of :class:`PayloadTracker` (module docstring).

    Attributes:
        cutoff_hz: cut-off of the causal low-pass (Hz); ``None``: the problem file's
            ``likelihood.cutoff_hz``.
        change_rate: expected payload changes per second; sets the memory ``0.1 / change_rate``.
        false_alarms_per_hour: the detector's designed false-alarm rate on steady motion.
        cusum_drift: CUSUM reference ``k`` (σ of a block mean): shifts above ``2k`` are caught
            fastest.
        detect_block_s: duration of the detector's blocks (s).
        settle_s: time after a detected change at which the "after" estimate is reported and the
            detector is re-armed (s).
        unexcited_ratio: σ / prior σ above which a parameter is reported unexcited.
        inertia_prior_std: prior σ (kg·m²) of inertia entries the problem file does not free.
        noise_weight_s: seconds of data the problem file's ``torque_std`` is worth as the noise
            prior.
        correlation_s: longest lag of the residuals' autocorrelation (s).
        correlation_memory_s: memory of the autocorrelation's running sums (s).
    """

    cutoff_hz: float | None = None
    change_rate: float = 0.01
    false_alarms_per_hour: float = 0.01
    cusum_drift: float = 1.0
    detect_block_s: float = 0.1
    settle_s: float = 2.0
    unexcited_ratio: float = 0.5
    inertia_prior_std: float = 0.01
    noise_weight_s: float = 1.0
    correlation_s: float = 0.25
    correlation_memory_s: float = 5.0

    def __post_init__(self) -> None:
        positive = ("change_rate", "false_alarms_per_hour", "cusum_drift", "detect_block_s",
                    "settle_s", "unexcited_ratio", "inertia_prior_std", "noise_weight_s",
                    "correlation_s", "correlation_memory_s")  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise TrackerError(f"tracker setting {name!r} must be a number > 0, got {value!r}")
        if self.cutoff_hz is not None and not (
            math.isfinite(self.cutoff_hz) and self.cutoff_hz > 0
        ):
            raise TrackerError(f"tracker setting 'cutoff_hz' must be > 0 Hz, got {self.cutoff_hz}")

    @property
    def memory_s(self) -> float:
        """The time constant of the forgetting (s)."""
        return 0.1 / self.change_rate


@dataclass(frozen=True)
class PayloadEstimate:
    """The payload (and torque offsets) at one time.

    Attributes:
        time: time of the last sample used (s, the stream's clock).
        names: ``<payload>/mass|com_x|com_y|com_z|ixx|ixy|iyy|ixz|iyz|izz`` (flange frame; the
            inertia about the centre of mass, flange axes), then ``<joint>/torque_offset``.
        values: ``[P]`` physically consistent values (kg, m, kg·m², N·m).
        covariance: ``[P, P]`` their covariance.
        prior_std: ``[P]`` the prior's σ of each.
        unexcited: the names the motion has not determined (σ > ratio × prior σ).
        projected: the consistency projection moved the estimate.
        samples: samples since the last (re)start of the estimate.
        kappa: ``[n]`` the residuals' integrated autocorrelation time per joint (samples).
        excitation: information gained over the prior, ``½ log det(Λ P₀)`` (nats).
        noise_std: ``[n]`` the residual σ per joint (N·m).
    """

    time: float
    names: tuple[str, ...]
    values: Array
    covariance: Array
    prior_std: Array
    unexcited: tuple[str, ...]
    projected: bool
    samples: int
    kappa: Array
    excitation: float
    noise_std: Array

    @property
    def std(self) -> Array:
        """``[P]`` standard deviations."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def mass(self) -> float:
        """Payload mass (kg)."""
        return float(self.values[0])

    @property
    def com(self) -> Array:
        """``[3]`` centre of mass in the flange frame (m)."""
        return np.array(self.values[1:4])

    @property
    def inertia(self) -> Array:
        """``[3, 3]`` inertia about the centre of mass, flange axes (kg·m²)."""
        xx, xy, yy, xz, yz, zz = self.values[4:10]
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])

    def value(self, name: str) -> float:
        """The value of parameter ``name``."""
        return float(self.values[self.names.index(name)])


@dataclass(frozen=True)
class ChangeEvent:
    """A detected payload change.

    Attributes:
        change_time: estimated time of the change (s): the CUSUM's last zero before the alarm.
        detect_time: time of the sample that raised the alarm (s).
        joint: the joint whose residual raised it.
        statistic: the CUSUM sum at the alarm (threshold units: σ of a block mean).
        before: the last estimate published before ``change_time``.
        after: the estimate ``settle_s`` after the alarm (``None`` until then).
    """

    change_time: float
    detect_time: float
    joint: str
    statistic: float
    before: PayloadEstimate
    after: PayloadEstimate | None = None


@dataclass(frozen=True)
class TrackerUpdate:
    """What one :meth:`PayloadTracker.update` produced: the estimate, changes detected in the
    samples it processed (``after`` still ``None``) and earlier changes completed with their
    ``after`` estimate."""

    estimate: PayloadEstimate
    detected: tuple[ChangeEvent, ...] = ()
    completed: tuple[ChangeEvent, ...] = ()


@dataclass
class _Pending:
    """Samples pushed and not yet processed."""

    t: list[Array] = field(default_factory=list)
    q: list[Array] = field(default_factory=list)
    dq: list[Array | None] = field(default_factory=list)
    tau: list[Array] = field(default_factory=list)
    restart: list[Array] = field(default_factory=list)

    def clear(self) -> None:
        for x in (self.t, self.q, self.dq, self.tau, self.restart):
            x.clear()


class PayloadTracker:
    """The streaming payload estimator of the module docstring.

    Args:
        robot: the robot with the payload attached (its nominal payload is the prior mean).
        payload: the payload attachment of ``robot``.
        spec: the problem's free parameters: the payload's fields (their prior σ) and
            ``<joint>/torque_offset`` entries (estimated as nuisance); nothing else.
        dt: sample period of the stream (s).
        torque_std: ``[nv]`` prior guess of the torque residual σ per joint (N·m).
        cutoff_hz: the low-pass cut-off (Hz), used when ``settings.cutoff_hz`` is ``None``.
        settings: the tracker's settings.

    Raises:
        TrackerError: a free parameter the tracker does not estimate, or a bad setting.
    """

    def __init__(
        self,
        robot: AttachedRobot,
        payload: Payload,
        spec: ParameterSpec,
        dt: float,
        torque_std: Sequence[float] | float,
        cutoff_hz: float,
        settings: TrackerSettings | None = None,
    ) -> None:
        self.settings = settings = settings or TrackerSettings()
        self.robot, self.payload, self.dt = robot, payload, float(dt)
        n = robot.nv
        cutoff = settings.cutoff_hz if settings.cutoff_hz is not None else float(cutoff_hz)
        try:
            self._svf = StateVariableFilter(self.dt, cutoff)
        except ValueError as exc:
            raise TrackerError(f"tracker filter: {exc}") from None
        offsets = _offset_joints(robot, payload, spec)
        self.names = tuple(f"{payload.name}/{f}" for f in BODY_FIELDS) + tuple(
            f"{robot.joint_names[j]}/torque_offset" for j in offsets
        )
        self._offsets = np.array(offsets, dtype=np.int64)
        phi0, phi_std = _payload_prior(payload, spec, settings.inertia_prior_std)
        off_mean, off_std = _offset_prior(robot, spec, offsets)
        self._prior_std = np.concatenate((phi_std, off_std))
        pi0 = linear_from_physical(phi0)
        d_phi = physical_from_linear(pi0)[1]
        d_pi = np.linalg.inv(d_phi)
        self._payload_prior = (pi0, d_pi @ np.diag(phi_std**2) @ d_pi.T)
        std0 = np.broadcast_to(np.asarray(torque_std, dtype=np.float64), (n,)).copy()
        lam = math.exp(-self.dt / settings.memory_s)
        self._ls = InformationLS(
            np.concatenate((pi0, off_mean)),
            _block_diag(self._payload_prior[1], np.diag(off_std**2)),
            std0,
            settings.noise_weight_s / self.dt,
            lam,
        )
        # the arm without the payload, and the payload's columns of the regressor
        self._T = frame_to_joint(payload.rotation, payload.translation)
        arm = robot.nominal_inertia().copy()
        arm[payload.row] -= self._T @ linear_from_physical(
            np.concatenate(([payload.mass], payload.com, _six(payload.inertia)))
        )
        self._pi_arm = arm.reshape(-1)
        self._cols = slice(10 * payload.row, 10 * payload.row + 10)
        self._model = robot.model
        self._data = robot.model.createData()
        self._friction_params = nominal_parameters(robot)
        # residual statistics and the detector
        lags = max(1, round(settings.correlation_s / self.dt))
        self._corr = CorrelationTime(
            lags, math.exp(-self.dt / settings.correlation_memory_s),
            self._svf.white_noise_rho(lags), stride=CORRELATION_STRIDE,
        )  # fmt: skip
        self._block = max(1, round(settings.detect_block_s / self.dt))
        arl = 2 * n * 3600.0 / (settings.false_alarms_per_hour * settings.detect_block_s)
        self.threshold = cusum_threshold(settings.cusum_drift, arl)
        self._cusum = Cusum(n, settings.cusum_drift, self.threshold)
        self._reset_block()
        self._pending = _Pending()
        self._filters: tuple | None = None
        self._warmup = math.ceil(WARMUP_DELAYS * self._svf.group_delay() / self.dt)
        self._since_start = 0
        self._resume_at = -math.inf
        self._armed_at = -math.inf
        self._last_t: float | None = None
        self._last_sample: tuple[float, Array, Array, Array | None] | None = None
        self._samples = 0
        self._history: deque[PayloadEstimate] = deque()
        self._waiting: list[ChangeEvent] = []
        self._cov = self._ls.covariance()
        self.events: list[ChangeEvent] = []
        self.estimate = self._estimate(0.0)

    @classmethod
    def from_problem(
        cls, problem: ProblemFile, dt: float, settings: TrackerSettings | None = None
    ) -> PayloadTracker:
        """The tracker of a problem file with one payload attachment (its robot, free
        parameters, ``likelihood.torque_std`` and ``likelihood.cutoff_hz``).

        Raises:
            TrackerError: the problem has no payload attachment or frees other parameters.
        """
        robot = problem.robot
        payloads = [a for a in getattr(robot, "attachments", ()) if isinstance(a, Payload)]
        if not isinstance(robot, AttachedRobot) or len(payloads) != 1:
            raise TrackerError(
                f"problem {problem.origin}: the tracker needs exactly one attachment of type "
                f"'payload', found {len(payloads)}"
            )
        likelihood = problem.config.likelihood
        return cls(robot, payloads[0], problem.spec, dt, likelihood.torque_std,
                   likelihood.cutoff_hz, settings)  # fmt: skip

    @property
    def joint_names(self) -> list[str]:
        """The joints a sample gives, in order."""
        return list(self.robot.joint_names)

    # ---------------------------------------------------------------------------------------
    # input

    def push(self, t: float, q: Array, tau: Array, dq: Array | None = None) -> None:
        """Queue one sample at time ``t`` (s): ``q [n]`` (rad or m), ``tau [n]`` (N·m or N),
        optionally ``dq [n]``; processed by the next :meth:`update`.

        Raises:
            SampleError: a wrong length, a non-finite value, or ``t`` not after the last sample
                (naming the field); the sample is not queued.
        """
        self.push_block(
            np.array([t], dtype=np.float64), np.asarray(q, dtype=np.float64)[None],
            np.asarray(tau, dtype=np.float64)[None],
            None if dq is None else np.asarray(dq, dtype=np.float64)[None],
        )  # fmt: skip

    def push_block(self, t: Array, q: Array, tau: Array, dq: Array | None = None) -> None:
        """Queue samples ``t [B]`` (s, increasing), ``q, tau (, dq) [B, n]``; all or none.

        Samples missing from the stream (a gap of 1.5 to :data:`GAP_PERIODS` sample periods, a
        lost message) are filled by linear interpolation so that the filters see a regular
        stream; a longer gap restarts them.

        Raises:
            SampleError: as :meth:`push`, for the first bad sample.
        """
        t, q, tau, dq = self._checked(t, q, tau, dq)
        if self._last_sample is None:  # the first sample starts the grid
            self._last_sample = (t[0], q[0], tau[0], None if dq is None else dq[0])
            head = (t[:1], q[:1], tau[:1], None if dq is None else dq[:1])
            rest = _fill_gaps(self._last_sample, t[1:], q[1:], tau[1:],
                              None if dq is None else dq[1:], self.dt)  # fmt: skip
            t, q, tau = (np.concatenate((a, b)) for a, b in zip(head[:3], rest[:3], strict=True))
            dq = None if dq is None or rest[3] is None else np.concatenate((head[3], rest[3]))
        else:
            t, q, tau, dq = _fill_gaps(self._last_sample, t, q, tau, dq, self.dt)
        gaps = np.diff(np.concatenate(([-np.inf if self._last_t is None else self._last_t], t)))
        restart = gaps > GAP_PERIODS * self.dt
        self._last_t = float(t[-1])
        self._last_sample = (t[-1], q[-1], tau[-1], None if dq is None else dq[-1])
        p = self._pending
        p.t.append(t)
        p.q.append(q)
        p.tau.append(tau)
        p.dq.append(dq)
        p.restart.append(restart)

    def _checked(
        self, t: Array, q: Array, tau: Array, dq: Array | None
    ) -> tuple[Array, Array, Array, Array | None]:
        n = self.robot.nv
        t = np.asarray(t, dtype=np.float64).reshape(-1)
        arrays = {"position": q, "effort": tau} | ({} if dq is None else {"velocity": dq})
        out = {}
        for name, x in arrays.items():
            x = np.asarray(x, dtype=np.float64)
            if x.ndim != 2 or x.shape != (t.size, n):
                got = x.shape[-1] if x.ndim else x.size
                raise SampleError(f"joint state {name}: expected {n} values per sample, got {got}")
            bad = ~np.isfinite(x).all(axis=1)
            if bad.any():
                raise SampleError(
                    f"joint state {name}: non-finite value at t = {float(t[np.argmax(bad)])!r} s"
                )
            out[name] = x
        previous = -np.inf if self._last_t is None else self._last_t
        steps = np.diff(np.concatenate(([previous], t)))
        if not (np.isfinite(t).all() and (steps > 0).all()):
            k = int(np.argmax(~(steps > 0) | ~np.isfinite(t)))
            raise SampleError(
                f"joint state time {float(t[k])!r} s is not after the last ({float(previous)!r} s)"
            )
        return t, out["position"], out["effort"], out.get("velocity")

    # ---------------------------------------------------------------------------------------
    # processing

    def update(self) -> TrackerUpdate:
        """Process the queued samples and return the estimate and the change events."""
        p = self._pending
        detected: list[ChangeEvent] = []
        if p.t:
            with_dq = all(x is not None for x in p.dq)
            t, Y, y = self._prepare(
                np.concatenate(p.t), np.concatenate(p.q), np.concatenate(p.tau),
                np.concatenate(p.dq) if with_dq else None, np.concatenate(p.restart),
            )  # fmt: skip
            p.clear()
            detected = self._consume(t, Y, y)
        return self._publish(detected, self._last_t if self._last_t is not None else 0.0)

    def track(
        self, t: Array, q: Array, tau: Array, dq: Array | None = None, *, period: float
    ) -> list[TrackerUpdate]:
        """The updates of a recording: the samples pushed and an update every ``period`` (s)
        of stream time (the last at the end), the same as pushing them and calling
        :meth:`update` at those times, with the filtering and the regressor done in one pass.

        Raises:
            SampleError: as :meth:`push_block`.
        """
        self.push_block(t, q, tau, dq)
        p = self._pending
        t_all, restart = np.concatenate(p.t), np.concatenate(p.restart)
        dq_all = np.concatenate(p.dq) if all(x is not None for x in p.dq) else None
        kept, Y, y = self._prepare(t_all, np.concatenate(p.q), np.concatenate(p.tau), dq_all,
                                   restart)  # fmt: skip
        p.clear()
        periods = int(np.floor((t_all[-1] - t_all[0]) / period + 1e-9))
        grid = t_all[0] + period * np.arange(1, periods + 1)
        times = np.unique(t_all[np.searchsorted(t_all, grid + 1e-9 * period, "right") - 1])
        if times.size == 0 or times[-1] < t_all[-1]:
            times = np.r_[times, t_all[-1]]
        ends = np.searchsorted(kept, times, "right")
        out = []
        for a, b, time in zip(np.r_[0, ends[:-1]], ends, times, strict=True):
            out.append(self._publish(self._consume(kept[a:b], Y[a:b], y[a:b]), float(time)))
        return out

    def regression(
        self, t: Array, q: Array, tau: Array, dq: Array | None = None
    ) -> tuple[Array, Array, Array]:
        """The samples as the tracker's equation: times ``[S]`` (the warm-up dropped), regressor
        rows ``[S, n, P]`` and observations ``[S, n]`` (module docstring, 1.-2.), for a tracker
        that has not been fed yet; another estimator can be run on the same rows.

        Raises:
            SampleError: as :meth:`push_block`.
        """
        self.push_block(t, q, tau, dq)
        p = self._pending
        out = self._prepare(np.concatenate(p.t), np.concatenate(p.q), np.concatenate(p.tau),
                            None if p.dq[0] is None else np.concatenate(p.dq),
                            np.concatenate(p.restart))  # fmt: skip
        p.clear()
        return out

    def _prepare(
        self, t: Array, q: Array, tau: Array, dq: Array | None, restart: Array
    ) -> tuple[Array, Array, Array]:
        """Filter the samples (restarting where ``restart``), drop the warm-up, and return the
        times ``[S]``, regressor rows ``[S, n, P]`` and observations ``[S, n]`` (module
        docstring, 1.-2.)."""
        bounds = np.unique(np.r_[0, np.flatnonzero(restart), len(t)])
        keep_t, keep = [], []
        for a, b in itertools.pairwise(bounds):
            if restart[a]:
                self._restart_filters()
            part = slice(a, b)
            qf, vf, af, tf = self._filtered(q[part], tau[part], None if dq is None else dq[part])
            skip = max(0, self._warmup - self._since_start)
            self._since_start += b - a
            keep_t.append(t[part][skip:])
            keep.append((qf[skip:], vf[skip:], af[skip:], tf[skip:]))
        times = np.concatenate(keep_t)
        qf, vf, af, tf = (np.concatenate([k[i] for k in keep]) for i in range(4))
        Y, y = self._rows(qf, vf, af, tf)
        return times, Y, y

    def _restart_filters(self) -> None:
        svf = self._svf
        self._filters = (svf.low(), svf.derivative(1), svf.derivative(2), svf.low(), svf.low(),
                         svf.derivative(1))  # fmt: skip
        self._since_start = 0

    def _filtered(self, q: Array, tau: Array, dq: Array | None) -> tuple[Array, ...]:
        assert self._filters is not None
        q_low, q_d1, q_d2, tau_low, v_low, v_d1 = self._filters
        qf, tf = q_low(q), tau_low(tau)
        if dq is None:
            return qf, q_d1(q), q_d2(q), tf
        return qf, v_low(dq), v_d1(dq), tf

    def _rows(self, qf: Array, vf: Array, af: Array, tf: Array) -> tuple[Array, Array]:
        """Regressor rows ``[B, n, P]`` and observations ``[B, n]`` (module docstring, 2.)."""
        b, n = qf.shape
        full = np.empty((b, n, 10 * n))
        for i in range(b):
            full[i] = pin.computeJointTorqueRegressor(self._model, self._data, qf[i], vf[i], af[i])
        with torch.no_grad():
            fric = friction_torque(self._friction_params, torch.from_numpy(vf)[None],
                                   DEFAULT_COULOMB_SMOOTHING)[0].numpy()  # fmt: skip
        y = tf - full @ self._pi_arm - fric
        Y = np.zeros((b, n, len(self.names)))
        Y[:, :, :10] = full[:, :, self._cols] @ self._T
        for k, j in enumerate(self._offsets):
            Y[:, j, 10 + k] = 1.0
        return Y, y

    def _consume(self, t: Array, Y: Array, y: Array) -> list[ChangeEvent]:
        """Feed prepared samples to the estimate and the detector, one detector block at a time;
        after a change, the samples within the filter's settling time of it are dropped."""
        events = []
        start = 0
        while start < len(t):
            start += int(np.searchsorted(t[start:], self._resume_at, "left"))
            if start >= len(t):
                break
            stop = min(len(t), start + self._block - self._block_count)
            event = self._block_step(t[start:stop], Y[start:stop], y[start:stop])
            if event is not None:
                events.append(event)
            start = stop
        return events

    def _block_step(self, t: Array, Y: Array, y: Array) -> ChangeEvent | None:
        """Samples within one detector block: residuals, statistics, the test at its end."""
        r = y - Y @ self._ls.mean
        self._corr.add(r / np.sqrt(self._ls.noise_var))
        self._ls.add(Y, y)
        self._samples += len(t)
        self._block_r += r.sum(axis=0)
        chunk_Y = Y.sum(axis=0)
        self._block_sd += np.sqrt(((chunk_Y @ self._cov) * chunk_Y).sum(axis=1))
        self._block_count += len(t)
        if self._block_count < self._block:
            return None
        m = self._block_count
        # the CUSUM sums these means: their long-run variance κ/M governs its growth when the
        # residuals stay correlated beyond one block
        long_run = np.maximum(self._corr.mean_variance(m), np.asarray(self._corr.kappa()) / m)
        var = self._ls.noise_var * long_run + (self._block_sd / m) ** 2
        mean_r = self._block_r / m
        self._reset_block()
        if t[-1] < self._armed_at:
            return None
        alarm = self._cusum.add(mean_r / np.sqrt(var), float(t[-1]))
        return None if alarm is None else self._change(float(t[-1]), *alarm)

    def _publish(self, detected: list[ChangeEvent], time: float) -> TrackerUpdate:
        """Solve, record the estimate at ``time`` (s) and complete the events whose settling
        time passed."""
        self._ls.solve(self._corr.kappa())
        self._cov = self._ls.covariance()
        self.estimate = self._estimate(time)
        self._history.append(self.estimate)
        while self._history and self._history[0].time < time - HISTORY_S:
            self._history.popleft()
        completed = []
        for event in list(self._waiting):
            if time >= event.detect_time + self.settings.settle_s:
                done = ChangeEvent(event.change_time, event.detect_time, event.joint,
                                   event.statistic, event.before, self.estimate)  # fmt: skip
                self._waiting.remove(event)
                self.events.append(done)
                completed.append(done)
        return TrackerUpdate(self.estimate, tuple(detected), tuple(completed))

    def _reset_block(self) -> None:
        self._block_r = np.zeros(self.robot.nv)
        self._block_sd = np.zeros(self.robot.nv)
        self._block_count = 0

    def _change(self, time: float, joint: int, onset: float, statistic: float) -> ChangeEvent:
        """Re-initialise the payload's information (keep the offsets' posterior)."""
        before = self.estimate
        for estimate in self._history:
            if estimate.time <= onset:
                before = estimate
        self._ls.solve(self._corr.kappa())
        mean, cov = self._ls.mean, self._ls.covariance()
        pi0, p0 = self._payload_prior
        self._ls.set_prior(np.concatenate((pi0, mean[10:])), _block_diag(p0, cov[10:, 10:]))
        self._cov = self._ls.covariance()
        self._cusum.reset(time)
        self._resume_at = time + self._warmup * self.dt
        self._armed_at = time + self.settings.settle_s
        self._reset_block()
        self._samples = 0
        event = ChangeEvent(onset, time, self.robot.joint_names[joint], statistic, before)
        self._waiting.append(event)
        return event

    # ---------------------------------------------------------------------------------------
    # output

    def _estimate(self, time: float) -> PayloadEstimate:
        mean, cov = self._ls.mean, self._cov
        pi, projected = project_consistent(mean[:10])
        phi, jac = physical_from_linear(pi)
        covariance = cov.copy()
        covariance[:10] = jac @ covariance[:10]
        covariance[:, :10] = covariance[:, :10] @ jac.T
        values = np.concatenate((phi, mean[10:]))
        std = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
        unexcited = tuple(
            name for name, s, s0 in zip(self.names, std, self._prior_std, strict=True)
            if s > self.settings.unexcited_ratio * s0
        )  # fmt: skip
        gain = 0.5 * np.linalg.slogdet(self._ls.information @ self._ls.prior_cov)[1]
        return PayloadEstimate(
            time=time,
            names=self.names,
            values=values,
            covariance=covariance,
            prior_std=self._prior_std.copy(),
            unexcited=unexcited,
            projected=projected,
            samples=self._samples,
            kappa=np.broadcast_to(self._corr.kappa(), (self.robot.nv,)).copy(),
            excitation=float(gain),
            noise_std=np.sqrt(self._ls.noise_var),
        )


def _fill_gaps(
    last: tuple[float, Array, Array, Array | None],
    t: Array,
    q: Array,
    tau: Array,
    dq: Array | None,
    dt: float,
) -> tuple[Array, Array, Array, Array | None]:
    """The samples with those missing in gaps of 1.5 to :data:`GAP_PERIODS` periods after
    ``last`` (or between them) put back, linearly interpolated on the ``dt`` grid."""
    times = np.r_[last[0], t]
    steps = np.diff(times)
    gaps = np.flatnonzero((steps > 1.5 * dt) & (steps <= GAP_PERIODS * dt))
    if gaps.size == 0:
        return t, q, tau, dq
    grid = [t]
    for g in gaps:
        missing = round(steps[g] / dt) - 1
        grid.append(times[g] + dt * np.arange(1, missing + 1))
    new_t = np.sort(np.concatenate(grid))

    def fill(x: Array, x0: Array) -> Array:
        known = np.vstack((x0[None], x))
        return np.stack([np.interp(new_t, times, known[:, j]) for j in range(x.shape[1])], 1)

    return (new_t, fill(q, last[1]), fill(tau, last[2]),
            None if dq is None or last[3] is None else fill(dq, last[3]))  # fmt: skip


def _six(matrix: Array) -> Array:
    return np.array([matrix[0, 0], matrix[0, 1], matrix[1, 1], matrix[0, 2], matrix[1, 2],
                     matrix[2, 2]])  # fmt: skip


def _block_diag(a: Array, b: Array) -> Array:
    out = np.zeros((a.shape[0] + b.shape[0], a.shape[1] + b.shape[1]))
    out[: a.shape[0], : a.shape[1]] = a
    out[a.shape[0] :, a.shape[1] :] = b
    return out


def _offset_joints(robot: RobotModel, payload: Payload, spec: ParameterSpec) -> list[int]:
    """Indices of the joints whose ``torque_offset`` ``spec`` frees; any other free parameter
    that is not one of the payload's is an error."""
    joints, other = [], []
    for p in spec.parameters:
        if p.prefix == payload.name and p.field in BODY_FIELDS:
            continue
        if p.field == "torque_offset" and p.prefix in robot.joint_names:
            joints.append(robot.joint_names.index(p.prefix))
        else:
            other.append(p.name)
    if other:
        raise TrackerError(
            f"the tracker estimates payload {payload.name!r}'s inertial parameters and joint "
            f"torque offsets; the problem also frees {other}"
        )
    return sorted(joints)


def _payload_prior(
    payload: Payload, spec: ParameterSpec, inertia_std: float
) -> tuple[Array, Array]:
    """Physical prior mean ``φ₀ [10]`` and σ ``[10]``: the attachment's nominal values, the
    spec's prior σ (and Gaussian mean) of the fields it frees, ``inertia_std`` for the others."""
    mean = np.concatenate(([payload.mass], payload.com, _six(payload.inertia)))
    std = np.full(10, inertia_std)
    freed = {p.field: p for p in spec.parameters if p.prefix == payload.name}
    for k, name in enumerate(BODY_FIELDS):
        p = freed.get(name)
        if p is None:
            if k < 4:
                raise TrackerError(
                    f"the tracker needs {payload.name}/{name} among the problem's free "
                    "parameters (its prior)"
                )
            continue
        std[k] = p.prior_std
        if p.prior == "gaussian" and p.mean is not None:
            mean[k] = p.mean
    return mean, std


def _offset_prior(
    robot: RobotModel, spec: ParameterSpec, joints: Sequence[int]
) -> tuple[Array, Array]:
    """Prior mean and σ of the freed torque offsets (N·m)."""
    mean, std = [], []
    for j in joints:
        p = spec.parameters[spec.index(f"{robot.joint_names[j]}/torque_offset")]
        mean.append(p.mean if p.prior == "gaussian" and p.mean is not None else 0.0)
        std.append(p.prior_std)
    return np.array(mean, dtype=np.float64), np.array(std, dtype=np.float64)
