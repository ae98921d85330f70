"""Batched likelihoods in the estimators' normalised coordinates, and the log-density of samplers.

Every sampling or particle estimator works on an augmented vector ``z [N, D]`` in normalised
coordinates (csvgd App. I-C)::

    z = [u (M), s (K · (W − 1) · 2 nv)]

``u ∈ [0, 1]ᴹ`` are the free parameters mapped affinely from their limits, ``s`` the shooting
variables of a multiple-shooting likelihood (empty for single shooting and for the
inverse-dynamics likelihood, where ``z = u``). :class:`Likelihood` holds what every kind shares:
the coordinates, the aggregation over trajectories (csvgd eqs. 9, 10) and the prior. Its
subclasses (:class:`~dynid.objective.shooting.ShootingLikelihood`,
:class:`~dynid.objective.torque.InverseDynamicsLikelihood`) implement :meth:`Likelihood.evaluate`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from dynid.errors import EstimatorError

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = [
    "Evaluation",
    "Likelihood",
    "PosteriorTarget",
    "Target",
    "defect_log_density",
]

LOG_2PI = math.log(2.0 * math.pi)


class Target(Protocol):
    """A batched, differentiable log-density over ``z [N, D]`` inside box bounds.

    Attributes:
        dim: ``D``.
        lower, upper: ``[D]`` bounds of the support (``±inf`` where unbounded).
    """

    dim: int
    lower: torch.Tensor
    upper: torch.Tensor

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        """``[N]`` unnormalised log density (``−inf`` outside the bounds, ``nan`` if unstable)."""
        ...


@dataclass
class Evaluation:
    """What one batched evaluation of all particles gives.

    Attributes:
        theta: ``[N, M]`` the (clamped) parameters evaluated, SI units.
        log_likelihood: ``[N]`` log-likelihood over the data set (eq. 9 or 10).
        per_trajectory: ``[N, K]`` log-likelihood of each trajectory (eq. 2/3/6).
        defects: ``[N, K, W − 1, 2 nv]`` normalised shooting defects (``W − 1 = 0`` without
            multiple shooting).
    """

    theta: torch.Tensor
    log_likelihood: torch.Tensor
    per_trajectory: torch.Tensor
    defects: torch.Tensor


class Likelihood(ABC):
    """A problem's likelihood over ``z [N, D]``: coordinates, aggregation and prior.

    Subclasses set ``M, K, W, nv`` (``W = 1`` without shooting variables), ``state_scale``
    (``[2 nv]``, the units of the shooting variables and defects) and ``shooting`` (a label for
    posterior metadata) and call :meth:`_set_bounds`.

    Attributes:
        problem: the problem scored.
        dim: ``D = M + K (W − 1) 2 nv``.
        lower, upper: ``[D]`` bounds: ``[0, 1]`` on the parameters, unbounded shooting variables.
    """

    problem: Problem
    shooting: str
    M: int
    K: int
    W: int
    nv: int
    state_scale: torch.Tensor

    def _set_bounds(self) -> None:
        problem = self.problem
        self.n_shoot = self.K * (self.W - 1) * 2 * self.nv
        self.dim = self.M + self.n_shoot
        ones = torch.ones(self.dim, dtype=problem.dtype, device=problem.device)
        self.lower = torch.cat([ones[: self.M] * 0.0, ones[self.M :] * -math.inf])
        self.upper = torch.cat([ones[: self.M], ones[self.M :] * math.inf])

    # ------------------------------------------------------------------ coordinates
    @property
    def names(self) -> list[str]:
        """Names of the ``D`` entries of ``z``: parameters, then ``shoot/<k>/<w>/<joint>/q|v``."""
        joints = self.problem.robot.joint_names
        shoot = [
            f"shoot/{k}/{w}/{j}/{kind}"
            for k in range(self.K)
            for w in range(1, self.W)
            for kind in ("q", "v")
            for j in joints
        ]
        return [*self.problem.spec.names, *shoot]

    def initial_shooting(self) -> torch.Tensor:
        """``[K (W − 1) 2 nv]`` normalised shooting variables at the recorded window starts."""
        return torch.zeros(0, dtype=self.problem.dtype, device=self.problem.device)

    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z [N, D]`` → ``(u [N, M], s [N, K, W − 1, 2 nv])`` (s in normalised units)."""
        if z.dim() != 2 or z.shape[1] != self.dim:
            raise EstimatorError(f"expected z of shape [N, {self.dim}], got {tuple(z.shape)}")
        u = z[:, : self.M]
        s = z[:, self.M :].reshape(z.shape[0], self.K, self.W - 1, 2 * self.nv)
        return u, s

    def theta(self, z: torch.Tensor) -> torch.Tensor:
        """``[N, M]`` SI parameters of ``z``, clamped to the limits (what is evaluated)."""
        u, _ = self.split(z)
        return self.problem.spec.from_unit(u.clamp(0.0, 1.0))

    def augment(self, theta: torch.Tensor) -> torch.Tensor:
        """``z [N, D]`` for SI parameters ``theta [N, M]`` and the recorded shooting states."""
        u = self.problem.spec.to_unit(theta.to(self.lower))
        s = self.initial_shooting().expand(theta.shape[0], -1)
        return torch.cat([u, s], dim=1)

    # ------------------------------------------------------------------ evaluation
    @abstractmethod
    def evaluate(self, z: torch.Tensor, aggregate: str | None = None) -> Evaluation:
        """Score every particle of ``z [N, D]`` in one batched call.

        Args:
            z: ``[N, D]`` finite augmented particles (parameters outside [0, 1] are clamped
                before evaluation; the MDMM limit constraint pulls them back).
            aggregate: ``"sum"`` (eq. 9) or ``"product"`` (eq. 10); default from the problem.
        """

    def aggregation(self, aggregate: str | None = None) -> str:
        """``"sum"`` (eq. 9) or ``"product"`` (eq. 10); ``None``: the problem's setting."""
        how = self.problem.likelihood.aggregate if aggregate is None else aggregate
        if how not in ("sum", "product"):
            raise EstimatorError(f"aggregate must be 'sum' or 'product', got {how!r}")
        return how

    def combine(self, per_trajectory: torch.Tensor, aggregate: str | None = None) -> torch.Tensor:
        """``[N]`` data-set log-likelihood from per-trajectory terms ``[N, K]``: the mixture
        ``log (1/K) Σ_k p_k`` (eq. 9) or the product ``Σ_k log p_k`` (eq. 10)."""
        if self.aggregation(aggregate) == "sum":
            return torch.logsumexp(per_trajectory, dim=-1) - math.log(self.K)
        return per_trajectory.sum(-1)

    def responsibilities(
        self, per_trajectory: torch.Tensor, aggregate: str | None = None
    ) -> torch.Tensor:
        """``[N, K]`` weight of each trajectory in the gradient of the data-set log-likelihood:
        ``softmax_k log p_k`` for the mixture (eq. 9), all ones for the product (eq. 10)."""
        if self.aggregation(aggregate) == "sum":
            return torch.softmax(per_trajectory, dim=-1)
        return torch.ones_like(per_trajectory)

    def log_prior(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` log prior of SI parameters ``theta`` (``−inf`` outside the limits)."""
        return self.problem.spec.log_prior(theta)


def gaussian_log_density(whitened: torch.Tensor, log_std_sum: torch.Tensor) -> torch.Tensor:
    """``Σ log N(r | 0, σ²)`` over the last dimension of errors whitened by ``σ``.

    Args:
        whitened: ``[..., R]`` errors divided by their standard deviations.
        log_std_sum: ``Σ log σ`` over the ``R`` entries (scalar tensor).

    Returns:
        ``[...]`` log densities.
    """
    R = whitened.shape[-1]
    return -0.5 * (whitened * whitened).sum(-1) - log_std_sum - 0.5 * R * LOG_2PI


class PosteriorTarget:
    """The likelihood as one log-density for samplers: defects as Gaussian terms (eq. 5).

    Each trajectory's multiple-shooting likelihood carries its own defect terms (eq. 6), and the
    trajectories combine as in eq. 4 / 9 (or eq. 10)::

        log p(z) = log (1/K) Σ_k [p_k(D_k | θ, s_k) Π_t N(defect_kt | 0, σ_def²)] + log p(θ)

    with ``σ_def`` in normalised state units (csvgd App. II-C: σ²_def ≈ 1e-2), ``−inf`` when a
    parameter leaves [0, 1]. (Defect terms outside the mixture would tie every particle to all
    ``K`` trajectories' shooting variables, whichever trajectory it explains.) Without shooting
    variables it is the likelihood times the prior.

    Args:
        likelihood: the likelihood.
        defect_std: ``σ_def``; default ``problem.likelihood.defect_std``.
    """

    def __init__(self, likelihood: Likelihood, defect_std: float | None = None) -> None:
        self.likelihood = likelihood
        self.defect_std = float(
            likelihood.problem.likelihood.defect_std if defect_std is None else defect_std
        )
        if not self.defect_std > 0:
            raise EstimatorError(f"defect_std must be > 0, got {defect_std!r}")
        self.dim = likelihood.dim
        self.lower = likelihood.lower
        self.upper = likelihood.upper

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        """``[N]`` log density of ``z [N, D]``."""
        lik = self.likelihood
        ev = lik.evaluate(z)
        log_def = defect_log_density(ev.defects, self.defect_std)
        inside = ((z >= self.lower) & (z <= self.upper)).all(-1)
        lp = lik.combine(ev.per_trajectory + log_def) + lik.log_prior(ev.theta)
        return torch.where(inside, lp, torch.full_like(lp, -math.inf))


def defect_log_density(defects: torch.Tensor, defect_std: float) -> torch.Tensor:
    """``[N, K]`` defect log-density of each trajectory, ``Σ_t log N(defect_t | 0, σ_def² I)``
    (eqs. 5–6), from normalised defects ``[N, K, W − 1, 2 nv]`` and ``σ_def`` in normalised
    state units (zero without defects)."""
    d = defects.flatten(2) / defect_std
    return -0.5 * (d * d).sum(-1) - d.shape[-1] * (math.log(defect_std) + 0.5 * LOG_2PI)
