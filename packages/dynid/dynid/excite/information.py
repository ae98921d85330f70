"""Fisher information of a problem's free parameters along a motion, and the Cramér–Rao σ.

The model is the problem's own torque likelihood (:mod:`dynid.objective.torque`): at every
scored sample the measured efforts are ``τ_pred(q, q̇, q̈; θ) + ε`` with ``ε ~ N(0,
diag(torque_std²))``, so the Fisher information of θ at the nominal values θ₀ is

    F = Σ_s J_sᵀ Σ⁻¹ J_s,    J_s = ∂ r(θ; q_s, q̇_s, q̈_s) / ∂θ |θ₀    ([nv, M]),

with ``r`` the equation error :func:`~dynid.objective.torque.inverse_dynamics_residuals`. The
torques are linear in the parameter fields that carry the inertia, armature, damping, Coulomb,
Stribeck-rise, offset and sigmoid-scale terms (RNEA is ``Y(q, q̇, q̈) π + armature · q̈``, the
friction a sum of these fields times functions of q̇), so where the free parameters move only
those fields, column ``m`` of ``J`` is the model's own torque with those fields set to their
tangent ``∂p/∂θ_m`` at θ₀ (computed once) and every other field at its nominal value: one batched
inverse-dynamics pass with ``M`` such parameter sets, differentiable in ``(q, q̇, q̈)`` by
reverse mode, so the gradient of any criterion of ``F`` with respect to a trajectory's
coefficients is analytic. The identity is checked against forward-mode differentiation through
the model on the reference motion; a problem whose free parameters move anything else (joint
placements, gravity, a Stribeck or sigmoid rate, contact forces) takes forward mode throughout.

Coordinates: when the data can only fix combinations of the free parameters (a whole arm), the
information is that of the *base parameters* (:class:`~dynid.model.base_parameters.BaseParameters`,
found on a reference motion). If the problem's torques are linear in standard parameters
(:class:`~dynid.objective.linear.LinearLayout`: log-Cholesky bodies and linear joint terms), the
base parameters are combinations of the standard parameters ``x`` (``<link>/m``, ``<link>/mx``,
``<link>/XX``…, friction and offsets) and are named by them; otherwise of the free parameters
themselves. With full column rank the coordinates are the free parameters. Each coordinate
``β_k`` has ``J_β = J_θ G`` with a constant ``G [M, r]`` (module code).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch.autograd import forward_ad

from dynid.errors import EstimatorError
from dynid.model.base_parameters import BaseParameters
from dynid.model.params import DynamicParameters
from dynid.objective.linear import LinearLayout
from dynid.objective.torque import TorqueSamples, inverse_dynamics_residuals
from dynid.problem import Problem

__all__ = ["Criteria", "InformationModel", "criteria"]

Array = NDArray[np.float64]

_CHUNK = 512  # samples per pass when no gradient is needed
_PROBE_SAMPLES = 16  # reference samples the linear route is checked on
_LINEAR_TOLERANCE = 1e-9  # relative to the largest entry of J
_LINEAR_FIELDS = ("inertia", "armature", "damping", "coulomb", "stribeck_delta", "torque_offset",
                  "sigmoid_scale")  # fmt: skip


@dataclass(frozen=True)
class Criteria:
    """Scalar criteria of an information matrix ``F [r, r]``.

    Attributes:
        log_det: ``log det F`` (D-optimality; higher is better).
        condition_number: ``λ_max / λ_min`` of ``F`` (``cond(J)²``; lower is better).
        regressor_condition_number: ``cond(J) = √(λ_max / λ_min)`` of the whitened regressor.
        min_eigenvalue: ``λ_min`` (E-optimality; higher is better).
    """

    log_det: float
    condition_number: float
    regressor_condition_number: float
    min_eigenvalue: float

    def as_dict(self) -> dict[str, float]:
        """Plain floats by name."""
        return {
            "log_det": self.log_det,
            "condition_number": self.condition_number,
            "regressor_condition_number": self.regressor_condition_number,
            "min_eigenvalue": self.min_eigenvalue,
        }


def criteria(F: Array) -> Criteria:
    """:class:`Criteria` of a symmetric positive semi-definite ``F``."""
    lam = np.linalg.eigvalsh(np.asarray(F, dtype=float))
    lo, hi = float(lam[0]), float(lam[-1])
    cond = hi / lo if lo > 0 else float("inf")
    log_det = float(np.sum(np.log(lam))) if lo > 0 else float("-inf")
    return Criteria(log_det, cond, float(np.sqrt(cond)), lo)


class InformationModel:
    """Fisher information of ``problem``'s free parameters (module notes).

    Args:
        problem: a problem with the ``inverse_dynamics`` likelihood (its ``torque_std``).
        q, v, a: ``[S, nv]`` a reference motion rich enough to find which combinations any
            motion can identify (rad, rad/s, rad/s²).

    Attributes:
        names: ``r`` coordinate names: the free parameters, or the base parameters written as
            their combinations of standard (or free) parameters.
        units: their units (of the leading member).
        base: the base parameters, or ``None`` when the coordinates are the free parameters.

    Raises:
        EstimatorError: not an inverse-dynamics problem, or no parameter is excited.
    """

    def __init__(self, problem: Problem, q: Array, v: Array, a: Array) -> None:
        if problem.likelihood.kind != "inverse_dynamics":
            raise EstimatorError(
                f"problem {problem.name!r}: excitation design needs likelihood.kind "
                f"inverse_dynamics (the torque model), not {problem.likelihood.kind!r}"
            )
        self.problem = problem
        nv = problem.robot.nv
        stds = np.atleast_1d(np.asarray(problem.likelihood.torque_std, dtype=float))
        self.torque_std = np.broadcast_to(stds, (nv,)).copy()
        self._whiten = problem.tensor(1.0 / self.torque_std)
        self.theta0 = problem.spec.nominal_theta(problem.robot).to(torch.float64)
        M = self.theta0.numel()
        reference = [problem.tensor(np.asarray(x)) for x in (q, v, a)]
        self._linear = self._linear_parameters()
        if self._linear is not None:
            probe = [x[:_PROBE_SAMPLES] for x in reference]
            exact, _ = self._jacobian_forward(*probe)
            linear, _ = self._jacobian_theta(*probe)
            scale = max(float(exact.abs().max()), 1e-300)
            if float((exact - linear).abs().max()) > _LINEAR_TOLERANCE * scale:
                self._linear = None
        J, _ = self._jacobian_theta(*reference)
        J = J.detach().cpu().numpy()
        try:
            layout = LinearLayout.of(problem)
        except EstimatorError:
            layout = None
        if layout is not None and len(layout.names) == M:
            to_theta = np.linalg.inv(layout.jacobian(self.theta0.numpy()))  # ∂θ/∂x [M, P]
            names, units = list(layout.names), list(layout.units)
        else:
            to_theta = np.eye(M)
            names, units = list(problem.spec.names), list(problem.spec.units)
        base = BaseParameters.of(J @ to_theta, names)
        if base.rank == 0:
            raise EstimatorError(f"problem {problem.name!r}: no free parameter moves the torques")
        full = base.rank == M and not base.unexcited and np.allclose(to_theta, np.eye(M))
        self.base = None if full else base
        self.G = problem.tensor(to_theta[:, list(base.base)])
        self.names = names if full else [base.expression(k) for k in range(base.rank)]
        self.units = units if full else [units[i] for i in base.base]

    @property
    def dim(self) -> int:
        """Number of coordinates r."""
        return int(self.G.shape[1])

    def _linear_parameters(self) -> DynamicParameters | None:
        """``M + 1`` parameter sets: θ₀'s, then per free parameter θ₀'s with the linear fields
        set to their tangent ``∂p/∂θ_m`` (module notes); ``None`` when the free parameters move
        another field or the robot has attachment forces."""
        problem = self.problem
        if getattr(problem.robot, "generalized_forces", ()):
            return None
        M = self.theta0.numel()
        theta0 = problem.tensor(self.theta0.numpy())
        with torch.no_grad(), forward_ad.dual_level():
            dual = forward_ad.make_dual(theta0.expand(M, M).clone(), torch.eye(M).to(theta0))
            p = problem.parameters(dual)
            primal = p.map(lambda x: forward_ad.unpack_dual(x).primal[:1].clone())
            tangents = {
                f.name: forward_ad.unpack_dual(getattr(p, f.name)).tangent
                for f in dataclasses.fields(p)
                if f.name != "extra"
            }
            moved = [name for name, t in tangents.items() if t is not None and bool(t.any())]
            moved += [
                k for k, x in p.extra.items() if forward_ad.unpack_dual(x).tangent is not None
            ]
        if any(name not in _LINEAR_FIELDS for name in moved):
            return None
        out = primal.expand(M + 1)
        values = {}
        for name in _LINEAR_FIELDS:
            base, tangent = getattr(primal, name), tangents[name]
            rows = torch.zeros_like(base.expand(M, *base.shape[1:])) if tangent is None else tangent
            values[name] = torch.cat([base, rows])
        return dataclasses.replace(out, **values)

    def _jacobian_theta(
        self,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        direction: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``([S nv, M] whitened ∂r/∂θ at θ₀ (rows sample-major), [S, nv] the torques
        τ_pred(θ₀))``, both differentiable in q, v, a (module notes); the dry friction along
        ``direction [S, nv]`` when given (recorded samples, :class:`TorqueSamples`)."""
        if self._linear is None:
            return self._jacobian_forward(q, v, a, direction)
        M = self.theta0.numel()
        theta = self.problem.tensor(self.theta0.numpy()).expand(M + 1, M)
        r = inverse_dynamics_residuals(
            self.problem,
            theta,
            q,
            v,
            a,
            torch.zeros_like(q),
            direction=direction,
            params=self._linear,
        )  # [M + 1, S, nv]: −τ(θ₀), then ∂r/∂θ_m
        J = (r[1:] * self._whiten).permute(1, 2, 0).reshape(-1, M)
        return J, -r[0]

    def _jacobian_forward(
        self,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        direction: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`_jacobian_theta` by forward-mode differentiation through the model."""
        M = self.theta0.numel()
        theta0 = self.problem.tensor(self.theta0.numpy())
        eye = torch.eye(M, dtype=theta0.dtype, device=theta0.device)
        zero = torch.zeros_like(q)
        with forward_ad.dual_level():
            theta = forward_ad.make_dual(theta0.expand(M, M).clone(), eye)
            r = inverse_dynamics_residuals(self.problem, theta, q, v, a, zero, direction=direction)
            primal, tangent = forward_ad.unpack_dual(r)  # [M, S, nv] each
        J = (tangent * self._whiten).permute(1, 2, 0).reshape(-1, M)
        return J, -primal[0]

    def regressor(
        self,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        direction: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``([S nv, r] whitened Jacobian of the coordinates, [S, nv] nominal torques N·m)`` at
        the states ``[S, nv]``, differentiable in them; the dry friction along ``direction``
        ``[S, nv]`` when given (recorded samples), ``tanh(v/ε)`` otherwise."""
        J, tau = self._jacobian_theta(q, v, a, direction)
        return J @ self.G, tau

    def fisher(
        self,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        direction: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``F [r, r]`` of the states ``[S, nv]`` (``direction`` as :meth:`regressor`);
        differentiable when they require grad, evaluated in chunks of samples otherwise."""
        if q.requires_grad or v.requires_grad or a.requires_grad:
            J, _ = self.regressor(q, v, a, direction)
            return J.T @ J
        F = torch.zeros(self.dim, self.dim, dtype=q.dtype, device=q.device)
        with torch.no_grad():
            for s in range(0, q.shape[0], _CHUNK):
                rows = slice(s, s + _CHUNK)
                d = None if direction is None else direction[rows]
                J, _ = self.regressor(q[rows], v[rows], a[rows], d)
                F += J.T @ J
        return F

    def fisher_of_recordings(self, problem: Problem) -> Array:
        """``F`` of the scored samples of every trajectory of ``problem`` (the same model on
        recorded data: filtered, differentiated, trimmed and thinned as its likelihood says)."""
        F = np.zeros((self.dim, self.dim))
        for traj in problem.dataset:
            s = TorqueSamples.of(problem, traj)
            F += self.fisher(s.q, s.v, s.a, s.direction).cpu().numpy()
        return F

    def cramer_rao(self, F: Array) -> tuple[Array, Array]:
        """``(covariance [r, r], σ [r])``: ``F⁻¹`` and its root diagonal (units of the
        coordinates); ``inf`` where ``F`` is singular."""
        F = np.asarray(F, dtype=float)
        try:
            cov = np.linalg.inv(F)
        except np.linalg.LinAlgError:
            return np.full_like(F, np.inf), np.full(F.shape[0], np.inf)
        return cov, np.sqrt(np.clip(np.diag(cov), 0.0, None))
