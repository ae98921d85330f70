"""Joint state and parameter estimation by Levenberg–Marquardt (Marklund, Servin, Larson; lm paper).

What the unknowns are follows the problem's likelihood:

- ``likelihood.kind: shooting`` — the paper's state-space problem, below: states and parameters.
- ``likelihood.kind: inverse_dynamics`` — the parameters alone, on the problem's own effort
  residuals (:class:`TorqueResiduals`: the objective's filtered, differentiated recording at the
  samples its likelihood scores). The recorded motion already fixes the states, so estimating
  them again would only replace the problem's likelihood with another one: states on a coarse
  grid (semi-implicit Euler at ``stride · dt``), tied to the encoders by ``obs_std`` — loose
  enough for the states to take up what the payload should explain. A payload's inertial
  parameters enter the efforts linearly, so Levenberg–Marquardt reaches the least-squares
  optimum in a few iterations. The covariance is a sandwich (:func:`_sandwich_covariance`,
  :mod:`dynid.objective.sandwich`) that allows for the residuals' correlation over joints and
  samples, as long as the residuals themselves stay correlated, never narrower than the
  ``likelihood.torque_std`` the problem states.

All states ``x_0 … x_{n−1}`` (``x_k = (q_k, v_k)``) of every trajectory and the free parameters
χ are unknowns of one nonlinear least-squares problem (eqs. 3.4, 3.16)::

    min  Σ_k ‖Δp_k‖²_{Ω⁻¹} + Σ_k ‖Δy_k‖²_{R⁻¹} + Σ_k ‖Δτ_k‖²_{Σ_τ⁻¹} + ‖x_0 − x̄_0‖²_{P_0⁻¹}
    χ ∈ B, x

- **Impulse residuals** (eqs. 3.10–3.13). Between samples ``k`` and ``k + 1`` the time stepper is
  semi-implicit Euler (dynid's, :func:`dynid.model.integrate.step`): ``v_{k+1} = v_k + h q̈_k``,
  ``q_{k+1} = q_k + h v_{k+1}``. The impulse needed to go from ``v_k`` to ``v_{k+1}`` is
  ``h`` times the inverse-dynamics equation error at ``a_k = (v_{k+1} − v_k) / h`` (measured
  minus predicted: the applied efforts of the problem's control model and the attachments'
  forces against RNEA plus friction); the configuration impulse is
  ``M(q_k) (q_{k+1} − q_k − h v_{k+1}) / h`` (eq. 3.13 with the joint-space mass matrix; both:
  :meth:`dynid.objective.Objective.impulse_residuals`),
  whitened by ``Ω = (h σ_τ)² / w`` with the problem's ``likelihood.torque_std`` σ_τ and the
  *state error weight* ``w`` (Sec. 4.4).
- **Observation residuals** ``y_k − h(x_k; χ)`` of the problem's observed channels
  (:meth:`~dynid.objective.Objective.observation_errors`), whitened by its ``likelihood.obs_std``
  (``R``).
- **Measured efforts** as observations of the applied efforts
  (:meth:`~dynid.objective.Objective.effort_errors`), where a trajectory records them and the
  control model does not take them as its input (``control: pd`` or ``current``), whitened by
  σ_τ.
- **Initial state** (eq. 3.3): a weak Gaussian prior ``P_0 = initial_state_std²`` about the
  initialisation of ``x_0``.

What changes with the coordinates: the paper works in maximal coordinates with regularised joints
(Spook), so its unknown states include the constraint deviations the data cannot see, its
rotations live on a manifold (eqs. 3.19–3.20) and its constraint forces come from an MLCP. dynid's
model is in generalised coordinates (Pinocchio): joints are exact, the state is ``(q, v)`` of the
movable joints, every update is a plain vector addition, there are no compliance parameters, and
the initial-state residual of eqs. 3.14–3.15 (the distance to the constraint manifold, zero here)
becomes the weak prior above. Dry friction is dynid's smooth Coulomb + Stribeck law (eq. 4.1 with
``tanh(v / ε)`` in place of the complementarity conditions of App. D.1), so the residuals are
differentiable at zero velocity; ``scripts/bench lm`` measures what the smoothing changes against
data made with a much sharper law.

**Solver** (Sec. 3.4, App. B–C): the Jacobian is sparse, block-diagonal in the observation rows and
block-bidiagonal in the impulse rows (eq. 3.21). Its blocks come from forward-mode automatic
differentiation batched over all samples — one Jacobian–vector product per state or parameter
coordinate, each giving that column of every sample's block at once (App. B); the products of
all coordinates run as one batched call on copies of the inputs, one copy per coordinate — and
are assembled into a ``scipy.sparse`` matrix. Each iteration solves the damped normal equations
``(JᵀJ + α diag(JᵀJ)) δ = −Jᵀr`` with SuperLU; the box bounds (in the normalised coordinates
``u = (χ − lower) / (upper − lower)`` of the parameter spec) are kept by an active set — a
parameter at a bound whose step points out of the box is held and the system solved again
(the paper solves this box-constrained step as an MLCP) — and the step is clipped into the box.
The damping adapts so that every accepted step lowers the cost (Nielsen's rule); iterations stop
on a relative cost decrease below ``ftol``, a step below ``xtol`` or ``max_iterations``.

**Uncertainty** (Sec. 3.7, eqs. 3.22–3.28): the residual groups' noise scales are re-estimated
from the converged residuals (unbiased sample variances), the rows re-weighted, and the states
projected out (variable projection, the Schur complement of the state block), giving the
linearised parameter covariance. Its singular value decomposition in normalised coordinates names
the parameters the data did not excite: a direction whose linearised standard deviation exceeds
``identifiability_threshold`` of the parameters' ranges is unexcited, and every parameter that
loads mostly on such directions is reported (``Posterior.meta["unidentified"]``) instead of being
given a confident value.

**Initialisation** (Sec. 4.4): positions low-passed by the zero-phase Butterworth filter at
``cutoff_hz``, thinned to every ``stride``-th sample (the estimation step ``h = stride · dt``; by
default at most :data:`DEFAULT_STEP_S`),
velocities by backward differences ``(q_k − q_{k−1}) / h`` (eq. 4.3); the parameters start at
their nominal values (or a warm start's MAP).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

from dynid.data.preprocess import differentiate, lowpass
from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.objective.sandwich import long_run_covariance, sample_scores
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from collections.abc import Callable

    from dynid.problem import Problem, TrajectoryTensors

__all__ = ["DEFAULT_STEP_S", "JVP_BATCH", "LM", "Identifiability", "LMProblem", "TorqueResiduals"]

DEFAULT_STEP_S = 0.01
"""The longest estimation step (s) of the default ``stride``: at most 100 states per second of
recording (a 20 s recording at 1 kHz: 2000 states per trajectory instead of 20 000)."""

JVP_BATCH = 1 << 15
"""The most residual rows (copies × samples) of one batched Jacobian–vector product."""


@dataclass(frozen=True)
class _Segment:
    """One trajectory on the estimation grid.

    Attributes:
        y: ``[n, k]`` observed channels; u: ``[n, nu]`` control inputs; effort: ``[n, nv]``
        measured efforts or ``None``; x0: ``[n, 2 nv]`` initial states.
    """

    y: torch.Tensor
    u: torch.Tensor
    effort: torch.Tensor | None
    x0: torch.Tensor


@dataclass(frozen=True)
class Identifiability:
    """What the data determine, from the linearised covariance in normalised coordinates.

    Attributes:
        singular_values: ``[M]`` singular values of the projected information matrix
            (normalised units), largest first.
        direction_std: ``[M]`` linearised standard deviation along each singular direction, as a
            fraction of the parameters' ranges.
        unidentified: names of the parameters that load mostly on unexcited directions.
        threshold: the ``direction_std`` above which a direction counts as unexcited.
    """

    singular_values: np.ndarray
    direction_std: np.ndarray
    unidentified: list[str]
    threshold: float

    def as_meta(self) -> dict[str, Any]:
        """YAML-ready summary for ``Posterior.meta["identifiability"]``."""
        return {
            "singular_values": [float(s) for s in self.singular_values],
            "direction_std": [float(s) for s in self.direction_std],
            "threshold": self.threshold,
            "unidentified": list(self.unidentified),
        }


class _Unknowns:
    """The unknowns ``ξ = [states (n_states), u (free)]`` of an LM solve and their coordinates.

    The parameters are the spec's normalised ``u = spec.to_unit(θ) ∈ [0, 1]ᴹ`` (SI ``θ =
    spec.from_unit(u)``), held at ``fixed_u`` when they are not unknowns.

    Attributes:
        problem: the problem.
        M: number of parameters; free: ``M``, or 0 when they are held.
        range: ``[M]`` ``∂θ/∂u`` (upper − lower, SI units).
        offsets: ``[K + 1]`` start of each trajectory's states in ``ξ`` (``[0]``: no states).
        n_states, dim: number of state unknowns, of all unknowns.
        h: seconds between the samples of the residuals.
        samples: number of time samples behind the residuals.
        groups: the names of the residual groups (:meth:`group_rows` indexes them).
    """

    groups: tuple[str, ...]
    h: float
    samples: int

    def __init__(
        self, problem: Problem, fixed_theta: torch.Tensor | None, sizes: list[int]
    ) -> None:
        self.problem = problem
        self.M = problem.spec.dim
        like = torch.zeros(0, dtype=problem.dtype, device=problem.device)
        self.range = (problem.spec.upper - problem.spec.lower).to(like)
        self.fixed_u: torch.Tensor | None = None
        if fixed_theta is not None:
            self.fixed_u = self.normalised(fixed_theta)
        self.free = self.M if self.fixed_u is None else 0
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.n_states = int(self.offsets[-1])
        self.dim = self.n_states + self.free

    def theta(self, u: torch.Tensor) -> torch.Tensor:
        """SI parameters ``[M]`` of normalised ``u [M]``."""
        return self.problem.spec.from_unit(u)

    def normalised(self, theta: torch.Tensor) -> torch.Tensor:
        """Normalised ``u [M]`` of SI ``theta [M]``, clipped into the box."""
        like = torch.zeros(0, dtype=self.problem.dtype, device=self.problem.device)
        return self.problem.spec.to_unit(theta.to(like)).clamp(0.0, 1.0)

    def initial_states(self) -> list[torch.Tensor]:
        """The initialised states of every trajectory, flat (none without state unknowns)."""
        return []

    def initial(self, theta: torch.Tensor) -> torch.Tensor:
        """``ξ [D]`` from the initialised states and SI parameters ``theta [M]`` (the states
        alone when the parameters are held)."""
        u = self.normalised(theta) if self.free else self.range[:0]
        return torch.cat([*self.initial_states(), u])

    def split(self, xi: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``ξ`` → (states ``[n_j, 2 nv]`` per trajectory, ``u [M]``)."""
        nv2 = 2 * self.problem.robot.nv
        states = [
            xi[a:b].reshape(-1, nv2)
            for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)
        ]
        return states, xi[self.n_states :] if self.fixed_u is None else self.fixed_u


class TorqueResiduals(_Unknowns):
    """The whitened effort residuals of an inverse-dynamics problem over the parameters alone.

    The residuals and their Jacobian are the problem's objective
    (:meth:`dynid.objective.Objective.residuals`, :meth:`~dynid.objective.Objective.jacobian`):
    measured minus predicted efforts of the filtered, differentiated recording at the samples
    the likelihood scores (``likelihood.cutoff_hz``, ``stride``, ``trim_s``), over
    ``likelihood.torque_std``. There are no state unknowns: ``ξ = u``.

    Args:
        problem: a problem with ``likelihood.kind: inverse_dynamics``.
        fixed_theta: ``[M]`` SI parameters to hold (clipped into the box); ``None``: the
            parameters are unknowns.

    Attributes:
        h: seconds between scored samples (``likelihood.stride · dt``).
        samples: number of scored samples (rows per joint).
    """

    groups = ("effort",)

    def __init__(self, problem: Problem, *, fixed_theta: torch.Tensor | None = None) -> None:
        super().__init__(problem, fixed_theta, [])
        self.objective = problem.objective
        self.h = problem.dt * int(problem.likelihood.stride)
        self.samples = int(self.objective.residual_std().numel()) // problem.robot.nv

    def residuals(self, xi: torch.Tensor) -> torch.Tensor:
        """``[R]`` whitened effort residuals at ``ξ``."""
        _, u = self.split(xi)
        return self.objective.residuals(self.theta(u)[None])[0]

    def linearise(self, xi: torch.Tensor) -> tuple[np.ndarray, sp.csr_matrix]:
        """``(r [R], J [R, D])`` at ``ξ``: whitened residuals and their Jacobian in ``u``."""
        _, u = self.split(xi.detach())
        theta = self.theta(u)[None]
        with torch.no_grad():
            r = self.objective.residuals(theta)[0].cpu().numpy()
        if not self.free:
            return r, sp.csr_matrix((r.size, 0))
        J = self.objective.jacobian(theta)[0] * self.range
        return r, sp.csr_matrix(J.detach().cpu().numpy())

    def group_rows(self) -> np.ndarray:
        """``[R]`` group index of every residual row: all 0 (``effort``)."""
        return np.zeros(self.samples * self.problem.robot.nv, dtype=int)


class LMProblem(_Unknowns):
    """The residuals and sparse Jacobian of joint state and parameter estimation on a problem.

    Unknowns ``ξ = [x of trajectory 0 (n_0 · 2 nv), …, u (M)]``: the states in the robot's joint
    order, then the normalised parameters ``u ∈ [0, 1]ᴹ`` — or the states alone when the
    parameters are held at ``fixed_theta`` (state estimation, the cross-validation of Sec. 4.5).

    Args:
        problem: the problem (its control model must give joint efforts, not prescribed motion).
        state_error_weight: ``w`` of the impulse weighting ``Ω = (h σ_τ)² / w`` (Sec. 4.4).
        stride: estimation step ``h = stride · problem.dt``.
        cutoff_hz: low-pass of the initialisation (``None``: none).
        initial_state_std: ``P_0^{1/2}`` of the initial-state prior (state units).
        fixed_theta: ``[M]`` SI parameters to hold (clipped into the box); ``None``: the
            parameters are unknowns.

    Raises:
        EstimatorError: too few samples on the grid. Prescribed motion is refused by the first
            evaluation of the residuals (:meth:`dynid.objective.Objective.impulse_residuals`).
    """

    groups = ("impulse", "observation", "effort", "initial")

    def __init__(
        self,
        problem: Problem,
        *,
        state_error_weight: float = 1.0,
        stride: int = 1,
        cutoff_hz: float | None = None,
        initial_state_std: float = 0.1,
        fixed_theta: torch.Tensor | None = None,
    ) -> None:
        self.problem = problem
        self.objective = problem.objective
        self.nv = problem.robot.nv
        self.h = problem.dt * int(stride)
        stds = np.atleast_1d(np.asarray(problem.likelihood.torque_std, dtype=float))
        self.torque_std = torch.as_tensor(
            np.broadcast_to(stds, (self.nv,)).copy(), dtype=problem.dtype, device=problem.device
        )
        self.impulse_scale = math.sqrt(state_error_weight) / (self.h * self.torque_std)
        self.obs_std = problem.obs_std
        self.initial_state_std = float(initial_state_std)
        self.effort_observed = list(problem.control_names) != ["effort"]
        self.segments = [
            self._segment(data, int(stride), cutoff_hz) for data in self.objective.data
        ]
        super().__init__(problem, fixed_theta, [seg.x0.numel() for seg in self.segments])
        self.samples = sum(seg.x0.shape[0] for seg in self.segments)

    def _segment(self, data: TrajectoryTensors, stride: int, cutoff_hz: float | None) -> _Segment:
        problem = self.problem
        keep = slice(0, data.num_samples, stride)
        if len(range(data.num_samples)[keep]) < 3:
            raise EstimatorError(
                f"trajectory {data.source}: LM needs at least 3 samples on its grid (stride)"
            )
        q = data.q.cpu().numpy()
        if cutoff_hz is not None:
            q = lowpass(q, problem.dt, cutoff_hz)
        q = q[keep]
        t = np.arange(data.num_samples)[keep] * problem.dt
        v = differentiate(q, t, "backward")
        effort = None
        if self.effort_observed and data.effort is not None:
            effort = data.effort[keep]
        x0 = torch.as_tensor(np.concatenate([q, v], axis=1)).to(data.q)
        return _Segment(y=data.targets[keep], u=data.controls[keep], effort=effort, x0=x0)

    def initial_states(self) -> list[torch.Tensor]:
        """The states of every trajectory as initialised from its filtered positions, flat."""
        return [seg.x0.reshape(-1) for seg in self.segments]

    # ------------------------------------------------------------------ residual blocks
    def _step(
        self, theta: torch.Tensor, xa: torch.Tensor, xb: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """``[K, B, 2 nv]`` whitened impulse residuals between ``xa [K, B, 2nv]`` and ``xb`` for
        ``K`` copies of the parameters ``theta [K, M]`` (inputs ``u [B, nu]``)."""
        impulses = self.objective.impulse_residuals(theta, xa, xb, u[None], self.h)
        return impulses * self.impulse_scale.repeat(2)

    def _observation(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[K, n, k]`` whitened observation residuals of states ``x [K, n, 2 nv]``."""
        return self.objective.observation_errors(theta, x, y) / self.obs_std

    def _effort(
        self, theta: torch.Tensor, x: torch.Tensor, u: torch.Tensor, effort: torch.Tensor
    ) -> torch.Tensor:
        """``[K, n, nv]`` whitened measured minus applied efforts."""
        return self.objective.effort_errors(theta, x, u[None], effort) / self.torque_std

    def residuals(self, xi: torch.Tensor) -> torch.Tensor:
        """``[R]`` whitened residuals at ``ξ`` (impulses, observations, efforts, initial state per
        trajectory)."""
        return torch.cat([r.reshape(-1) for r, _ in self._blocks(xi, jacobian=False)])

    def group_sizes(self) -> dict[str, int]:
        """Rows of each residual group (``impulse``, ``observation``, ``effort``, ``initial``)."""
        sizes = {"impulse": 0, "observation": 0, "effort": 0, "initial": 0}
        k = len(self.problem.obs_names)
        for seg in self.segments:
            n = seg.x0.shape[0]
            sizes["impulse"] += (n - 1) * 2 * self.nv
            sizes["observation"] += n * k
            sizes["effort"] += 0 if seg.effort is None else (n - 1) * self.nv
            sizes["initial"] += 2 * self.nv
        return sizes

    def group_rows(self) -> np.ndarray:
        """``[R]`` group index of every residual row (into :attr:`groups`: 0 impulse, 1
        observation, 2 effort, 3 initial), in the order of :meth:`residuals`."""
        k = len(self.problem.obs_names)
        parts = []
        for seg in self.segments:
            n = seg.x0.shape[0]
            parts += [np.zeros((n - 1) * 2 * self.nv, int), np.ones(n * k, int)]
            if seg.effort is not None:
                parts.append(np.full((n - 1) * self.nv, 2))
            parts.append(np.full(2 * self.nv, 3))
        return np.concatenate(parts)

    def _blocks(
        self, xi: torch.Tensor, *, jacobian: bool
    ) -> list[tuple[torch.Tensor, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]]:
        """Residual blocks in order, each with its Jacobian entries ``(rows, cols, values)``
        relative to the block (empty without ``jacobian``)."""
        states, u = self.split(xi)
        theta = self.theta(u)
        out = []
        for j, (seg, x) in enumerate(zip(self.segments, states, strict=True)):
            off = int(self.offsets[j])
            d = x.shape[1]
            xa, xb, uk = x[:-1], x[1:], seg.u[:-1]

            def step(th: torch.Tensor, a: torch.Tensor, b: torch.Tensor, uk=uk) -> torch.Tensor:
                return self._step(th, a, b, uk)

            out.append(self._block(step, (theta, xa, xb), [off, off + d], jacobian))

            def obs(th: torch.Tensor, xs: torch.Tensor, y=seg.y) -> torch.Tensor:
                return self._observation(th, xs, y)

            out.append(self._block(obs, (theta, x), [off], jacobian))
            if seg.effort is not None:

                def eff(
                    th: torch.Tensor, a: torch.Tensor, uk=uk, e=seg.effort[:-1]
                ) -> torch.Tensor:
                    return self._effort(th, a, uk, e)

                out.append(self._block(eff, (theta, xa), [off], jacobian))
            r0 = (x[0] - seg.x0[0]) / self.initial_state_std
            entries = []
            if jacobian:
                idx = np.arange(d)
                entries = [(idx, off + idx, np.full(d, 1.0 / self.initial_state_std))]
            out.append((r0, entries))
        return out

    def _block(
        self,
        f: Callable[..., torch.Tensor],
        primals: tuple[torch.Tensor, ...],
        state_offsets: list[int],
        jacobian: bool,
    ) -> tuple[torch.Tensor, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Evaluate ``f(theta, *states)`` (rows ``[B, c]``, row ``b`` depending on sample ``b`` of
        each state input only) and, with ``jacobian``, its sparse Jacobian entries.

        ``f`` takes ``K`` copies: ``theta [K, M]`` and states ``[K, B, d]`` give ``[K, B, c]``.
        The Jacobian needs one Jacobian–vector product per column of each state input (all
        samples at once) and per parameter (App. B); they are taken together, copy ``k`` of the
        inputs carrying the tangent of column ``k``, in passes of at most ``JVP_BATCH`` rows.
        """
        theta, states = primals[0], primals[1:]
        value = f(theta[None], *(x[None] for x in states))[0]
        if not jacobian:
            return value, []
        B, c = value.shape
        rows = np.arange(B * c).reshape(B, c).reshape(-1)
        columns: list[tuple[int, int]] = [  # (input, column): input 0 the parameters
            (1 + s, col) for s, x in enumerate(states) for col in range(x.shape[1])
        ]
        columns += [(0, m) for m in range(self.free)]
        per_pass = max(1, JVP_BATCH // max(B, 1))
        entries = []
        for first in range(0, len(columns), per_pass):
            chunk = columns[first : first + per_pass]
            K = len(chunk)
            copies = [theta.expand(K, -1).clone(), *(x.expand(K, -1, -1).clone() for x in states)]
            tangents = [torch.zeros_like(p) for p in copies]
            for k, (i, col) in enumerate(chunk):
                if i == 0:
                    tangents[0][k, col] = self.range[col]  # d theta / d u_m
                else:
                    tangents[i][k, :, col] = 1.0
            _, dr = torch.func.jvp(f, tuple(copies), tuple(tangents))
            values = dr.detach().cpu().numpy().reshape(K, -1)
            for k, (i, col) in enumerate(chunk):
                if i == 0:
                    cols = np.full(B * c, self.n_states + col)
                else:
                    d = states[i - 1].shape[1]
                    cols = np.repeat(state_offsets[i - 1] + np.arange(B) * d + col, c)
                entries.append((rows, cols, values[k]))
        return value, entries

    def linearise(self, xi: torch.Tensor) -> tuple[np.ndarray, sp.csr_matrix]:
        """``(r [R], J [R, D])`` at ``ξ``: whitened residuals and their sparse Jacobian."""
        rs, rows, cols, vals = [], [], [], []
        start = 0
        for r, entries in self._blocks(xi.detach(), jacobian=True):
            flat = r.detach().reshape(-1).cpu().numpy()
            for rr, cc, vv in entries:
                keep = vv != 0.0
                rows.append(rr[keep] + start)
                cols.append(cc[keep])
                vals.append(vv[keep])
            rs.append(flat)
            start += flat.size
        J = sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(start, self.dim),
        )
        return np.concatenate(rs), J


class LM(Estimator):
    """Levenberg–Marquardt joint state and parameter estimation (see the module notes).

    Args:
        state_error_weight: ``w``: impulse residuals weighted by ``w / (h σ_τ)²`` (Sec. 4.4);
            larger trusts the model more than the observations.
        stride: estimation step ``h = stride · dt`` of the problem's grid (downsampling, 4.4);
            ``None``: the largest stride whose step is at most :data:`DEFAULT_STEP_S`. Shooting
            problems only, as ``cutoff_hz``, ``state_error_weight`` and ``initial_state_std``:
            an inverse-dynamics problem has no state unknowns and scores the samples its
            likelihood chooses.
        cutoff_hz: zero-phase low-pass of the initial states (Hz); ``None`` takes the problem's
            ``likelihood.cutoff_hz``, ``0`` none.
        initial_state_std: standard deviation of the initial-state prior (rad, rad/s or m, m/s).
        damping: initial Levenberg–Marquardt damping ``α`` (relative to ``diag(JᵀJ)``).
        ftol: stop when an accepted step lowers the cost by less than this fraction.
        xtol: stop when the step is below this fraction of ``‖ξ‖``.
        identifiability_threshold: a direction whose linearised standard deviation exceeds this
            fraction of the parameters' ranges is reported as not excited by the data.
        fixed_parameters: state estimation only: the parameters stay at the warm start's MAP
            (or their nominal values) and only the states are estimated — the cross-validation
            of Sec. 4.5, which scores a model by the cost of state estimation on data it was not
            fitted to. The posterior's covariance is then zero.
        max_iterations, seed: see :class:`Estimator` (the method is deterministic).
    """

    kind = "lm"
    defaults_file = resources.files("dynid.estimators") / "defaults/lm.yaml"

    def __init__(
        self,
        *,
        state_error_weight: float = 1.0,
        stride: int | None = None,
        cutoff_hz: float | None = None,
        initial_state_std: float = 0.1,
        damping: float = 1e-3,
        ftol: float = 1e-10,
        xtol: float = 1e-10,
        identifiability_threshold: float = 0.1,
        fixed_parameters: bool = False,
        max_iterations: int = 50,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        checks = {
            "state_error_weight": state_error_weight > 0,
            "stride": stride is None or (int(stride) == stride and stride >= 1),
            "initial_state_std": initial_state_std > 0,
            "damping": damping > 0,
            "ftol": ftol >= 0,
            "xtol": xtol >= 0,
            "identifiability_threshold": identifiability_threshold > 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad or (cutoff_hz is not None and cutoff_hz < 0):
            raise EstimatorError(f"lm settings out of range: {bad or ['cutoff_hz']}")
        self.state_error_weight = float(state_error_weight)
        self.stride = None if stride is None else int(stride)
        self.cutoff_hz = cutoff_hz
        self.initial_state_std = float(initial_state_std)
        self.damping = float(damping)
        self.ftol, self.xtol = float(ftol), float(xtol)
        self.identifiability_threshold = float(identifiability_threshold)
        self.fixed_parameters = bool(fixed_parameters)
        self._lm: LMProblem | TorqueResiduals | None = None

    # ------------------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Initialise the states from the filtered data (shooting problems) and the parameters
        from the nominal values (or ``warm_start``'s MAP), where they stay with
        ``fixed_parameters``."""
        spec = problem.spec
        if warm_start is not None:
            theta0 = torch.as_tensor(warm_start.subset(spec.names).map())
        else:
            theta0 = spec.nominal_theta(problem.robot)
        theta0 = spec.clamp(theta0.reshape(1, -1))[0]
        fixed = theta0 if self.fixed_parameters else None
        if problem.objective.kind == "inverse_dynamics":
            self._lm = TorqueResiduals(problem, fixed_theta=fixed)
        else:
            cutoff = problem.likelihood.cutoff_hz if self.cutoff_hz is None else self.cutoff_hz
            nyquist = 0.5 / problem.dt
            self._lm = LMProblem(
                problem,
                state_error_weight=self.state_error_weight,
                stride=self.stride or max(1, math.floor(DEFAULT_STEP_S / problem.dt + 1e-9)),
                cutoff_hz=cutoff if 0 < cutoff < nyquist else None,
                initial_state_std=self.initial_state_std,
                fixed_theta=fixed,
            )
        self._xi = self._lm.initial(theta0)
        self._alpha = self.damping
        self._iteration = 0
        self._converged = self._lm.dim == 0  # nothing to estimate
        self._start = time.perf_counter()
        with torch.no_grad():
            r = self._lm.residuals(self._xi).cpu().numpy()
        self._cost = 0.5 * float(r @ r)
        self.history: list[dict[str, float]] = [{"cost": self._cost, "wall_s": 0.0}]

    def _require(self) -> LMProblem | TorqueResiduals:
        if self._lm is None:
            raise EstimatorError("LM.step/posterior called before init(problem)")
        return self._lm

    # ------------------------------------------------------------------------------ iteration
    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` Levenberg–Marquardt iterations (fewer when converged)."""
        lm = self._require()
        for _ in range(int(iterations)):
            if self._converged:
                break
            self._iterate(lm)
        return StepInfo(
            iteration=self._iteration,
            loss=self._cost,
            wall_s=time.perf_counter() - self._start,
            converged=self._converged,
            metrics={"damping": self._alpha},
        )

    def _iterate(self, lm: LMProblem | TorqueResiduals) -> None:
        r, J = lm.linearise(self._xi)
        g = J.T @ r
        H = (J.T @ J).tocsc()
        diag = H.diagonal() + 1e-12
        xi = self._xi.detach().cpu().numpy()
        u = xi[lm.n_states :]
        for _ in range(30):  # raise the damping until a step lowers the cost
            delta = _bounded_step(H, g, diag, self._alpha, u, lm.n_states)
            trial = xi + delta
            trial[lm.n_states :] = np.clip(trial[lm.n_states :], 0.0, 1.0)
            with torch.no_grad():
                r_new = lm.residuals(torch.as_tensor(trial).to(self._xi)).cpu().numpy()
            cost = 0.5 * float(r_new @ r_new)
            step = trial - xi
            predicted = -(g @ step) - 0.5 * float(step @ (H @ step))
            if np.isfinite(cost) and cost < self._cost:
                rho = (self._cost - cost) / max(predicted, 1e-300)
                self._alpha *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                decrease = (self._cost - cost) / max(self._cost, 1e-300)
                small = np.linalg.norm(step) <= self.xtol * (np.linalg.norm(xi) + self.xtol)
                self._xi = torch.as_tensor(trial).to(self._xi)
                self._cost = cost
                self._converged = bool(decrease < self.ftol or small)
                break
            self._alpha *= 4.0
        else:
            self._converged = True  # no damping finds a lower cost: a (local) minimum
        self._iteration += 1
        self.history.append(
            {
                "cost": self._cost,
                "wall_s": time.perf_counter() - self._start,
                "damping": self._alpha,
            }
        )

    # ------------------------------------------------------------------------------ results
    def covariance(self) -> tuple[np.ndarray, Identifiability, dict[str, float]]:
        """Linearised parameter covariance (SI, ``[M, M]``) at the current estimate, the
        identifiability analysis, and each residual group's estimated noise scale (whitened
        units).

        Joint state and parameter estimation (eqs. 3.22–3.28): every group's rows re-weighted by
        its unbiased noise estimate, the states projected out. Effort residuals alone
        (inverse-dynamics problems): the sandwich :func:`_sandwich_covariance`, never narrower
        than the noise ``likelihood.torque_std`` states.
        """
        lm = self._require()
        r, J = lm.linearise(self._xi)
        groups = lm.group_rows()
        R, D = r.size, lm.dim
        dof = max(R - D, 1)
        scales = {}
        weights = np.ones(R)
        for index, name in enumerate(lm.groups):
            rows = groups == index
            if rows.any() and name != "initial":
                variance = float(r[rows] @ r[rows]) / rows.sum() * R / dof  # unbiased (3.22–3.23)
                scales[name] = math.sqrt(variance)
                weights[rows] = 1.0 / math.sqrt(max(variance, 1e-300))
        names = lm.problem.spec.names
        if not lm.free:  # parameters held: nothing to project onto
            empty = Identifiability(np.zeros(0), np.zeros(0), [], self.identifiability_threshold)
            return np.zeros((lm.M, lm.M)), empty, scales
        if lm.n_states == 0:
            # noise max(stated, estimated): residuals below torque_std do not narrow the interval
            inflation = max(1.0, scales["effort"] ** 2)
            info = (J.T @ J).toarray() / inflation
            U, s, seen, ident = _identify(info, names, self.identifiability_threshold)
            cov_u = _sandwich_covariance(
                U, s * inflation, seen, J.toarray(), r, lm.problem.robot.nv
            )
            cov_u *= max(1.0, 1.0 / scales["effort"] ** 2)
        else:
            info = _projected_information((sp.diags(weights) @ J).tocsc(), lm.n_states)
            U, s, seen, ident = _identify(info, names, self.identifiability_threshold)
            # a direction the data do not see at all keeps the whole normalised range
            cov_u = (U * np.where(seen, 1.0 / np.where(seen, s, 1.0), 1.0)) @ U.T
        scale = lm.range.cpu().numpy()
        return cov_u * np.outer(scale, scale), ident, scales

    def states(self) -> list[np.ndarray]:
        """The estimated states ``[n_j, 2 nv]`` (q then v) of every trajectory."""
        lm = self._require()
        states, _ = lm.split(self._xi)
        return [s.detach().cpu().numpy() for s in states]

    def posterior(self) -> Posterior:
        """The estimate as one particle with its linearised covariance; the parameters the data
        did not excite are named in ``meta["unidentified"]``."""
        lm = self._require()
        problem = lm.problem
        _, u = lm.split(self._xi)
        theta = lm.theta(u).detach().cpu().numpy()
        cov, ident, scales = self.covariance()
        return Posterior(
            particles=theta[None],
            names=list(problem.spec.names),
            units=list(problem.spec.units),
            log_likelihood=np.array([-self._cost]),
            covariance=cov,
            estimator=self.kind,
            iteration=self._iteration,
            meta={
                "problem": problem.name,
                "cost": self._cost,
                "mean_squared_residual": 2.0 * self._cost / lm.samples,
                "residuals": problem.objective.kind,
                "iterations": self._iteration,
                "converged": self._converged,
                "step_s": lm.h,
                "state_error_weight": self.state_error_weight,
                "fixed_parameters": self.fixed_parameters,
                "noise_scale": scales,
                "unidentified": list(ident.unidentified),
                "identifiability": ident.as_meta(),
                "wall_s": time.perf_counter() - self._start,
            },
        )


def _factor_spd(A: sp.csc_matrix) -> spla.SuperLU:
    """SuperLU factor of a symmetric positive (semi-)definite matrix.

    Symmetric ordering and no row pivoting keep the block-banded normal equations of LM banded
    (SuperLU's default partial pivoting exchanges rows and fills the band). A matrix with a zero
    diagonal pivot falls back to partial pivoting.

    Raises:
        RuntimeError: the matrix is exactly singular.
    """
    try:
        return spla.splu(
            A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True}
        )
    except RuntimeError:
        return spla.splu(A)


def _solve_spd(A: sp.csc_matrix, b: np.ndarray) -> np.ndarray:
    """``A⁻¹ b`` for symmetric positive definite ``A`` (:func:`_factor_spd`); a result that is
    not finite is solved again with partial pivoting."""
    x = _factor_spd(A).solve(b)
    if not np.isfinite(x).all():
        x = spla.spsolve(A, b)
    return x


def _bounded_step(
    H: sp.csc_matrix, g: np.ndarray, diag: np.ndarray, alpha: float, u: np.ndarray, n_states: int
) -> np.ndarray:
    """The damped Gauss–Newton step with normalised parameters ``u`` kept in ``[0, 1]``.

    Active set: a parameter at a bound whose step points out of the box is held at zero step and
    the system solved again over the others (App. C states this as an MLCP).
    """
    D = H.shape[0]
    free = np.ones(D, dtype=bool)
    A = (H + sp.diags(alpha * diag)).tocsc()
    delta = np.zeros(D)
    for _ in range(u.size + 1):
        idx = np.flatnonzero(free)
        sub = A[idx][:, idx]
        delta = np.zeros(D)
        delta[idx] = _solve_spd(sub, -g[idx])
        du = delta[n_states:]
        out = ((u <= 0.0) & (du < 0.0)) | ((u >= 1.0) & (du > 0.0))
        out &= free[n_states:]
        if not out.any():
            break
        free[n_states:][out] = False
    return delta


def _projected_information(J: sp.csc_matrix, n_states: int) -> np.ndarray:
    """The parameters' information ``JpᵀJp − JpᵀJx (JxᵀJx)⁻¹ JxᵀJp`` with the states projected
    out (eqs. 3.27–3.28), in normalised coordinates."""
    Jx, Jp = J[:, :n_states], J[:, n_states:].toarray()
    Hxx = (Jx.T @ Jx).tocsc()
    Hxp = Jx.T @ Jp
    # Jacobi scaling: the state block spans many orders of magnitude (impulse weights ∝ 1/h)
    d = 1.0 / np.sqrt(np.maximum(Hxx.diagonal(), 1e-300))
    scaled = (sp.diags(d) @ Hxx @ sp.diags(d)).tocsc()
    try:
        factor = _factor_spd(scaled)
    except RuntimeError:  # states the residuals do not determine: a tiny ridge
        factor = _factor_spd((scaled + sp.identity(n_states) * 1e-12).tocsc())
    S = Jp.T @ Jp - Hxp.T @ (d[:, None] * factor.solve(d[:, None] * Hxp))
    return 0.5 * (S + S.T)


def _identify(
    info: np.ndarray, names: list[str], threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Identifiability]:
    """Singular directions of the information ``info [M, M]`` (normalised coordinates).

    Returns:
        ``(U [M, M], s [M], seen [M], identifiability)``: the directions (columns) and their
        singular values, largest first, and which ones the data see at all (above ``1e-14`` of
        the largest).
    """
    U, s, _ = np.linalg.svd(0.5 * (info + info.T), hermitian=True)
    floor = s[0] * 1e-14 if s.size and s[0] > 0 else 1e-300
    seen = s > floor
    direction_std = np.where(seen, 1.0 / np.sqrt(np.maximum(s, floor)), np.inf)
    unexcited = direction_std > threshold
    load = (U[:, unexcited] ** 2).sum(axis=1)
    unidentified = [name for name, w in zip(names, load, strict=True) if w > 0.5]
    return U, s, seen, Identifiability(s, direction_std, unidentified, threshold)


def _sandwich_covariance(
    U: np.ndarray, s: np.ndarray, seen: np.ndarray, J: np.ndarray, r: np.ndarray, rows: int
) -> np.ndarray:
    """Heteroscedasticity and autocorrelation consistent covariance of least squares on
    residuals that come in time samples of ``rows`` rows each: ``H⁻¹ Ŝ H⁻¹ · R / (R − M)`` with
    ``H = JᵀJ`` and ``Ŝ`` the long-run covariance of the per-sample scores, its lags chosen from
    the scores' own correlation (:mod:`dynid.objective.sandwich`). Directions the data do not see
    keep the whole normalised range.

    Args:
        U, s, seen: the singular directions of ``JᵀJ`` (:func:`_identify`, same scale as ``J``).
        J: ``[R, M]`` whitened Jacobian in normalised coordinates; r: ``[R]`` whitened residuals.
        rows: residual rows per time sample (joints).
    """
    R, M = J.shape
    S = long_run_covariance(sample_scores(J, r, rows))
    Us = U[:, seen] / s[seen]
    H_inv = Us @ U[:, seen].T
    unseen = U[:, ~seen] @ U[:, ~seen].T
    return H_inv @ S @ H_inv * R / max(R - M, 1) + unseen
