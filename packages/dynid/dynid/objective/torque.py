"""The inverse-dynamics (torque) likelihood: measured joint efforts against ``ID(q, q̇, q̈; θ)``.

The equation-error form of classical identification (FIGAROH, FloBaRoID; lm paper eq. 3.10 in
generalised coordinates): for every scored sample the model must explain the applied joint
efforts from the recorded motion,

    τ_applied(q, q̇, u) + τ_ext(θ, q, q̇) = RNEA(θ, q, q̇, q̈) + τ_friction(θ, q̇),

where ``τ_applied`` is the problem's control model evaluated on the recorded inputs (measured
efforts for ``control: torque``, the PD law on the recorded targets for ``pd``, ...) and
``τ_ext`` the attachments' own generalised forces. Positions, velocities, inputs and efforts are
low-passed without phase lag (``likelihood.cutoff_hz``, :func:`dynid.data.preprocess.lowpass`),
velocities come from the encoders where recorded and from central differences of the filtered
positions otherwise, accelerations from central differences of the velocities; efforts and
inputs are delayed by ``likelihood.effort_delay`` (a torque held over a control period acts half a
period after its stamp). The dry friction acts along the direction of the unfiltered velocities,
low-passed like the efforts (:func:`~dynid.data.preprocess.filtered_motion`), not along
``tanh(v/ε)`` of the filtered ones. ``trim_s`` is cut at both ends and every ``stride``-th sample
is scored. Residuals are Gaussian with the per-joint standard deviation ``likelihood.torque_std``
(N·m or N).

There are no shooting variables: ``z = u``, and no defects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from dynid.data.errors import DataError
from dynid.data.preprocess import filtered_motion
from dynid.errors import EstimatorError
from dynid.model.integrate import PDControl, PrescribedMotion
from dynid.model.regressor import joint_torque_regressor
from dynid.objective.likelihood import Evaluation, Likelihood, gaussian_log_density

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.model.params import DynamicParameters
    from dynid.problem import Problem

__all__ = [
    "JACOBIAN_COPIES",
    "REGRESSOR_ENTRIES",
    "InertiaRegressor",
    "InverseDynamicsLikelihood",
    "TorqueSamples",
    "inverse_dynamics_likelihood",
    "inverse_dynamics_residuals",
]

JACOBIAN_COPIES = 1 << 14
"""The most (particle, sample) copies of the parameters in one reverse pass of
:meth:`InverseDynamicsLikelihood.jacobian`."""

REGRESSOR_ENTRIES = 1 << 24
"""The most entries (128 MiB in float64) of a likelihood's :class:`InertiaRegressor`s; longer
data are scored through the problem's inverse dynamics."""


@dataclass(frozen=True)
class TorqueSamples:
    """The scored samples of one trajectory, in the robot's joint order.

    Attributes:
        q, v, a: ``[S, nv]`` filtered positions (rad or m), velocities, accelerations.
        u: ``[S, nu]`` filtered control inputs (the problem's ``control_names``).
        direction: ``[S, nv]`` the dry-friction direction filtered like the efforts
            (:class:`dynid.data.preprocess.FilteredMotion`), in place of ``tanh(v/ε)``.
    """

    q: torch.Tensor
    v: torch.Tensor
    a: torch.Tensor
    u: torch.Tensor
    direction: torch.Tensor

    @classmethod
    def of(cls, problem: Problem, traj: Trajectory) -> TorqueSamples:
        """Filter, differentiate, trim and thin ``traj`` as ``problem.likelihood`` says
        (:func:`dynid.data.preprocess.filtered_motion`).

        Raises:
            EstimatorError: the trajectory is too short for the trim, the cut-off is not below
                its Nyquist frequency, or an ``effort_delay`` under PD control (its torque is
                computed from states and targets, which the delay does not move).
        """
        settings = problem.likelihood
        if settings.effort_delay and isinstance(problem.control, PDControl):
            raise EstimatorError(
                f"problem {problem.name!r}: likelihood.effort_delay applies to recorded efforts "
                "and torque or current inputs; control.type pd needs 0"
            )
        try:
            smooth, a, direction = filtered_motion(
                traj,
                settings.cutoff_hz,
                trim_s=settings.trim_s,
                stride=int(settings.stride),
                effort_delay=settings.effort_delay,
                coulomb_smoothing=problem.dynamics.coulomb_smoothing,
            )
        except DataError as exc:
            where = f"trajectory {traj.meta.get('source', 'unnamed')}"
            raise EstimatorError(
                f"{where}: likelihood (cutoff_hz, trim_s, stride, effort_delay): {exc}"
            ) from None
        cols = [traj.joint_names.index(j) for j in problem.robot.joint_names]
        q, v = problem.states(smooth)
        return cls(
            q=q,
            v=v,
            a=problem.tensor(a[:, cols]),
            u=problem.controls(smooth),
            direction=problem.tensor(direction[:, cols]),
        )


def inverse_dynamics_residuals(
    problem: Problem,
    theta: torch.Tensor,
    q: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    tau: torch.Tensor,
    *,
    direction: torch.Tensor | None = None,
    params: DynamicParameters | None = None,
    rigid_body: torch.Tensor | None = None,
) -> torch.Tensor:
    """Measured minus predicted generalised forces, the equation error of inverse dynamics.

    ``tau − (RNEA(θ, q, v, a) + τ_friction(θ, v) − τ_ext(θ, q, v))`` with ``τ_ext`` the
    generalised forces of the robot's attachments (penalty contact).

    Args:
        problem: gives the robot, the parameter mapping and the dynamics backend.
        theta: ``[N, M]`` SI parameters.
        q, v, a: ``[S, nv]`` or ``[N, S, nv]`` positions (rad or m), velocities, accelerations.
        tau: ``[S, nv]`` or ``[N, S, nv]`` applied generalised forces (N·m or N).
        direction: ``[S, nv]`` or ``[N, S, nv]`` the dry friction's direction in place of
            ``tanh(v/ε)`` (:class:`TorqueSamples`), or ``None``.
        params: ``problem.parameters(theta)`` when already mapped.
        rigid_body: ``[N, S, nv]`` RNEA(θ, q, v, a) when already evaluated
            (:class:`InertiaRegressor`); default the problem's dynamics.

    Returns:
        ``[N, S, nv]`` residuals (N·m or N).
    """
    N = theta.shape[0]
    q, v, a, tau = (x.expand(N, *x.shape[-2:]) if x.dim() == 2 else x for x in (q, v, a, tau))
    p = problem.parameters(theta) if params is None else params
    dyn = problem.dynamics
    if rigid_body is None:
        rigid_body = dyn.rnea(p, q, v, a)
    if direction is not None and direction.dim() == 2:
        direction = direction.expand(N, *direction.shape)
    predicted = rigid_body + dyn.friction_torque(p, v, direction)
    for force in getattr(problem.robot, "generalized_forces", ()):
        predicted = predicted - force(p, q, v)
    return tau - predicted


@dataclass(frozen=True)
class InertiaRegressor:
    """RNEA at one trajectory's scored samples as a linear map of the bodies' dynamic parameters,
    ``RNEA(θ, q, v, a) = Y π(θ) + armature(θ) · a`` (:mod:`dynid.model.regressor`).

    ``Y`` depends on the samples, the joint placements and gravity only, so where the free
    parameters leave those at the robot's own, it is computed once and every evaluation is a
    matrix product instead of a recursion over the tree.

    Attributes:
        Y: ``[S, nv, 10 nv]`` ``pinocchio.computeJointTorqueRegressor`` at each sample.
        a: ``[S, nv]`` the samples' accelerations (the armature term).
    """

    Y: torch.Tensor
    a: torch.Tensor

    def __call__(self, p: DynamicParameters, rows: torch.Tensor | None = None) -> torch.Tensor:
        """RNEA ``[N, S, nv]`` of the ``N`` particles ``p`` at every sample, or ``[B, 1, nv]``
        of particle ``b`` at sample ``rows[b]`` (``rows [B]``, ``p.n == B``)."""
        pi = p.inertia.flatten(1)  # [N, 10 nv]
        if rows is None:
            S, nv, K = self.Y.shape
            tau = (pi @ self.Y.reshape(S * nv, K).T).reshape(-1, S, nv)
            return tau + p.armature[:, None, :] * self.a
        tau = (self.Y[rows] @ pi.unsqueeze(-1)).squeeze(-1) + p.armature * self.a[rows]
        return tau.unsqueeze(1)

    @classmethod
    def of(cls, problem: Problem, samples: list[TorqueSamples]) -> list[InertiaRegressor] | None:
        """One regressor per trajectory's samples, or ``None`` where the identity does not hold
        for the problem (its free parameters move joints or gravity, or the problem is not in
        float64) or the regressors would exceed :data:`REGRESSOR_ENTRIES` entries.

        The identity is checked at the spec's lower and upper bounds against the problem's own
        inverse dynamics, to a relative ``1e-9``.
        """
        nv = problem.robot.nv
        entries = sum(s.q.shape[0] for s in samples) * nv * 10 * nv
        if problem.dtype != torch.float64 or entries > REGRESSOR_ENTRIES:
            return None
        spec = problem.spec
        probes = torch.stack([spec.lower, spec.upper]).to(
            dtype=problem.dtype, device=problem.device
        )
        if not bool(torch.isfinite(probes).all()):
            return None
        p = problem.parameters(probes)
        out = []
        for s in samples:
            q, v, a = (x.detach().cpu().numpy() for x in (s.q, s.v, s.a))
            regressor = cls(problem.tensor(joint_torque_regressor(problem.robot, q, v, a)), s.a)
            with torch.no_grad():
                exact = problem.dynamics.rnea(p, *(x.expand(2, -1, -1) for x in (s.q, s.v, s.a)))
                linear = regressor(p)
            scale = max(float(exact.abs().max()), 1.0)
            if float((exact - linear).abs().max()) > 1e-9 * scale:
                return None
            out.append(regressor)
        return out


class InverseDynamicsLikelihood(Likelihood):
    """The torque likelihood of a problem's data set, batched over particles.

    Args:
        problem: a problem whose control model maps the recorded inputs to joint efforts (not
            prescribed motion).

    Attributes:
        samples: the scored samples of each trajectory.
        torque_std: ``[nv]`` effort noise standard deviations (N·m or N).

    Raises:
        EstimatorError: prescribed-motion control, a ``torque_std`` of the wrong size, or data
            too short for the filter and trim.
    """

    shooting = "none"

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        if isinstance(problem.control, PrescribedMotion):
            raise EstimatorError(
                f"problem {problem.name!r}: the inverse-dynamics likelihood needs joint efforts; "
                "prescribed motion gives none (control.type: torque, current or pd)"
            )
        self.M, self.K, self.W, self.nv = (
            problem.spec.dim,
            len(problem.dataset),
            1,
            problem.robot.nv,
        )
        stds = np.atleast_1d(np.asarray(problem.likelihood.torque_std, dtype=float))
        if stds.size not in (1, self.nv):
            raise EstimatorError(
                f"likelihood.torque_std has {stds.size} values for {self.nv} joints "
                f"{problem.robot.joint_names}"
            )
        self.torque_std = problem.tensor(np.broadcast_to(stds, (self.nv,)).copy())
        self.samples = [TorqueSamples.of(problem, traj) for traj in problem.dataset]
        v = torch.cat([s.v for s in self.samples])
        self.state_scale = torch.cat([torch.cat([s.q for s in self.samples]).std(0), v.std(0)])
        self.state_scale = self.state_scale.clamp_min(1e-6)
        self.regressors = InertiaRegressor.of(problem, self.samples)
        self._set_bounds()

    def errors(self, theta: torch.Tensor) -> list[torch.Tensor]:
        """Per trajectory ``[N, S_k, nv]`` measured minus predicted efforts (N·m or N)."""
        N = theta.shape[0]
        p = self.problem.parameters(theta)
        out = []
        for k, s in enumerate(self.samples):
            q, v, a, u, d = (x.expand(N, -1, -1) for x in (s.q, s.v, s.a, s.u, s.direction))
            rigid = None if self.regressors is None else self.regressors[k](p)
            out.append(self._errors(theta, p, q, v, a, u, d, rigid))
        return out

    def _errors(
        self,
        theta: torch.Tensor,
        p: DynamicParameters,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        u: torch.Tensor,
        direction: torch.Tensor,
        rigid_body: torch.Tensor | None,
    ) -> torch.Tensor:
        """``[N, B, nv]`` measured minus predicted efforts of particles ``theta [N, M]``
        (parameters ``p``) at states, accelerations, inputs and dry-friction directions
        ``[N, B, ·]``."""
        problem = self.problem
        tau = problem.control(p, q, v, u)
        return inverse_dynamics_residuals(
            problem, theta, q, v, a, tau, direction=direction, params=p, rigid_body=rigid_body
        )

    def jacobian(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N, R, M]`` Jacobian of the whitened residuals ``errors / torque_std`` (entries
        ordered trajectory, sample, joint, as :meth:`dynid.objective.Objective.residuals`) in
        ``theta [N, M]`` (per SI unit of each parameter).

        Reverse mode. A scored sample's residual depends on the parameters and on that sample
        alone, so every (particle, sample) pair gets its own copy of the particle's parameters —
        a batch of one-sample particles, at most :data:`JACOBIAN_COPIES` per pass — and one
        backward pass per joint gives that joint's row of every sample at once: ``nv`` passes
        whatever the number of parameters. (Forward mode would need no copies, but torch's
        forward-mode rules for an operation between a dual and a plain tensor run through
        Python reference implementations, far slower than these passes.)
        """
        N, M = theta.shape
        theta = theta.detach()
        blocks = []
        for k, s in enumerate(self.samples):
            S = s.q.shape[0]
            J = theta.new_zeros(N * S, self.nv, M)
            for first in range(0, N * S, JACOBIAN_COPIES):
                pairs = torch.arange(first, min(first + JACOBIAN_COPIES, N * S), device=J.device)
                rows = pairs % S
                copies = theta[pairs // S].requires_grad_(True)
                q, v, a, u, d = (x[rows].unsqueeze(1) for x in (s.q, s.v, s.a, s.u, s.direction))
                with torch.enable_grad():
                    p = self.problem.parameters(copies)
                    rigid = None if self.regressors is None else self.regressors[k](p, rows)
                    r = self._errors(copies, p, q, v, a, u, d, rigid)[:, 0] / self.torque_std
                if not r.requires_grad:  # no parameter reaches the efforts
                    continue
                for j in range(self.nv):
                    (grad,) = torch.autograd.grad(
                        r[:, j].sum(), copies, retain_graph=j + 1 < self.nv, allow_unused=True
                    )
                    if grad is not None:
                        J[pairs, j] = grad
            blocks.append(J.reshape(N, S * self.nv, M))
        return torch.cat(blocks, dim=1)

    def evaluate(self, z: torch.Tensor, aggregate: str | None = None) -> Evaluation:
        """Score every particle's torque residuals (see :meth:`Likelihood.evaluate`)."""
        theta = self.theta(z)
        log_std = torch.log(self.torque_std)
        per_traj = torch.stack(
            [
                gaussian_log_density((e / self.torque_std).flatten(1), log_std.sum() * e.shape[1])
                for e in self.errors(theta)
            ],
            dim=-1,
        )
        defects = per_traj.new_zeros(z.shape[0], self.K, 0, 2 * self.nv)
        return Evaluation(
            theta=theta,
            log_likelihood=self.combine(per_traj, aggregate),
            per_trajectory=per_traj,
            defects=defects,
        )


def inverse_dynamics_likelihood(
    problem: Problem, *, shooting: str | None = None, windows: int | None = None
) -> InverseDynamicsLikelihood:
    """The likelihood ``inverse_dynamics`` (group ``dynid.likelihoods``): the problem's
    :class:`InverseDynamicsLikelihood`, built once per objective (filtering the data is not free).

    Args:
        problem: the problem scored.
        shooting, windows: a shooting override; ``"single"`` is accepted (there are no shooting
            variables), ``windows`` is ignored.

    Raises:
        EstimatorError: ``shooting="multiple"``, or the data do not fit the likelihood.
    """
    if shooting == "multiple":
        raise EstimatorError(
            f"problem {problem.name!r} scores efforts (likelihood.kind: inverse_dynamics); "
            "shooting: multiple applies to shooting likelihoods"
        )
    return problem.objective.torque_likelihood
