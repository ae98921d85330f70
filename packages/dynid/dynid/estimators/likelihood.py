"""Trajectory likelihoods of the csvgd paper over a ``Problem``: single and multiple shooting.

Every estimator works on an augmented vector ``z [N, D]`` in normalised coordinates (csvgd
App. I-C)::

    z = [u (M), s (K · (W − 1) · 2 nv)]

``u ∈ [0, 1]ᴹ`` are the free parameters mapped affinely from their limits, ``s`` the shooting
variables (start states of windows 1 … W − 1 of each of the K trajectories, eq. 6), each state
dimension divided by its standard deviation over the data. With single shooting ``W = 1`` and
``z = u``. All particles × trajectories × windows are simulated in one batched call of
:func:`dynid.model.integrate.shoot_windows`.

Terms (eqs. 2, 5, 6, 9, 10):

- observations: ``log N(x_t^real | x_t^sim, diag σ_obs²)`` for every simulated step of every
  window (the window start states are decision variables, not predictions, and are not scored);
- per trajectory: the sum over its windows; over trajectories: ``log (1/K) Σ_k p_k`` (eq. 9, a
  mixture of equally weighted Gaussians) or ``Σ_k log p_k`` (eq. 10); the gradient of the
  mixture weighs trajectory ``k`` by its responsibility ``softmax_k log p_k``;
- defects: the gap between the end of window ``w`` and the start of window ``w + 1``, in
  normalised state units, returned separately so that CSVGD treats them as MDMM constraints and
  the MCMC baselines as the Gaussian likelihood term of eq. 5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from dynid.estimators.base import EstimatorError
from dynid.model.integrate import rollout, shoot_windows

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = [
    "Evaluation",
    "ShootingLikelihood",
    "ShootingTarget",
    "Target",
    "defect_log_density",
    "simulate_observations",
]

_LOG_2PI = math.log(2.0 * math.pi)


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
    """What one batched simulation of all particles gives.

    Attributes:
        theta: ``[N, M]`` the (clamped) parameters simulated, SI units.
        log_likelihood: ``[N]`` observation log-likelihood over the data set (eq. 9 or 10).
        per_trajectory: ``[N, K]`` observation log-likelihood of each trajectory (eq. 2/3/6).
        defects: ``[N, K, W − 1, 2 nv]`` normalised shooting defects (empty when ``W = 1``).
    """

    theta: torch.Tensor
    log_likelihood: torch.Tensor
    per_trajectory: torch.Tensor
    defects: torch.Tensor


class ShootingLikelihood:
    """Single- or multiple-shooting likelihood of a problem's data set (csvgd Sec. IV-B/C).

    Args:
        problem: the problem; all its trajectories must have the same number of samples.
        shooting: ``"single"`` or ``"multiple"``; default ``problem.likelihood.shooting``.
        windows: shooting windows per trajectory; default ``problem.likelihood.windows``
            (ignored for single shooting). The last ``T mod W`` steps are not scored.

    Attributes:
        M, K, W, h, nv: parameters, trajectories, windows, steps per window, dofs.
        dim: ``D = M + K (W − 1) 2 nv``.
        state_scale: ``[2 nv]`` standard deviations of ``q`` and ``v`` over the data (rad, rad/s
            or m, m/s) dividing the shooting variables and defects.
    """

    def __init__(
        self, problem: Problem, *, shooting: str | None = None, windows: int | None = None
    ) -> None:
        self.problem = problem
        settings = problem.likelihood
        mode = settings.shooting if shooting is None else shooting
        if mode not in ("single", "multiple"):
            raise EstimatorError(f"shooting must be 'single' or 'multiple', got {mode!r}")
        self.shooting = mode
        lengths = {traj.num_samples for traj in problem.dataset}
        if len(lengths) != 1:
            raise EstimatorError(
                f"problem {problem.name!r}: shooting likelihoods need trajectories of equal "
                f"length, got sample counts {sorted(lengths)}; slice them first"
            )
        T = lengths.pop() - 1
        W = 1 if mode == "single" else int(settings.windows if windows is None else windows)
        if W < 1 or T // W < 1:
            raise EstimatorError(
                f"problem {problem.name!r}: {T} steps cannot be cut into {W} shooting windows"
            )
        self.M, self.K, self.W, self.h = problem.spec.dim, len(problem.dataset), W, T // W
        self.nv = problem.robot.nv
        steps = self.W * self.h
        qs, vs, ys, us = [], [], [], []
        for traj in problem.dataset:
            q, v = problem.states(traj)
            qs.append(q[: steps + 1])
            vs.append(v[: steps + 1])
            ys.append(problem.targets(traj)[1 : steps + 1])
            us.append(problem.controls(traj)[:steps])
        self.q_data = torch.stack(qs)  # [K, steps + 1, nv]
        self.v_data = torch.stack(vs)
        k_obs = ys[0].shape[-1]
        self.y_data = torch.stack(ys).reshape(self.K, self.W, self.h, k_obs)
        nu = us[0].shape[-1]
        self.u_data = torch.stack(us).reshape(1, self.K * self.W, self.h, nu)
        states = torch.cat([self.q_data, self.v_data], dim=-1).reshape(-1, 2 * self.nv)
        self.state_scale = states.std(0).clamp_min(1e-6)
        self.obs_std = problem.obs_std
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
        starts = torch.arange(1, self.W, device=self.q_data.device) * self.h
        s = torch.cat([self.q_data[:, starts], self.v_data[:, starts]], dim=-1)
        return (s / self.state_scale).reshape(-1)

    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``z [N, D]`` → ``(u [N, M], s [N, K, W − 1, 2 nv])`` (s in normalised units)."""
        if z.dim() != 2 or z.shape[1] != self.dim:
            raise EstimatorError(f"expected z of shape [N, {self.dim}], got {tuple(z.shape)}")
        u = z[:, : self.M]
        s = z[:, self.M :].reshape(z.shape[0], self.K, self.W - 1, 2 * self.nv)
        return u, s

    def theta(self, z: torch.Tensor) -> torch.Tensor:
        """``[N, M]`` SI parameters of ``z``, clamped to the limits (what is simulated)."""
        u, _ = self.split(z)
        return self.problem.spec.from_unit(u.clamp(0.0, 1.0))

    def augment(self, theta: torch.Tensor) -> torch.Tensor:
        """``z [N, D]`` for SI parameters ``theta [N, M]`` and the recorded shooting states."""
        u = self.problem.spec.to_unit(theta.to(self.lower))
        s = self.initial_shooting().expand(theta.shape[0], -1)
        return torch.cat([u, s], dim=1)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, z: torch.Tensor, aggregate: str | None = None) -> Evaluation:
        """Simulate every particle's windows in one batched call and score them.

        Args:
            z: ``[N, D]`` finite augmented particles (parameters outside [0, 1] are clamped
                before simulation; the MDMM limit constraint pulls them back).
            aggregate: ``"sum"`` (eq. 9) or ``"product"`` (eq. 10); default from the problem.
        """
        problem, N, nv = self.problem, z.shape[0], self.nv
        how = self.aggregation(aggregate)
        theta = self.theta(z)
        _, s = self.split(z)
        p = problem.parameters(theta)
        s0 = torch.cat([self.q_data[:, 0], self.v_data[:, 0]], dim=-1)  # [K, 2nv]
        starts = torch.cat(
            [s0[None, :, None].expand(N, self.K, 1, 2 * nv), s * self.state_scale], dim=2
        ).reshape(N, self.K * self.W, 2 * nv)
        q, v, defects = shoot_windows(
            problem.dynamics,
            p,
            starts[..., :nv],
            starts[..., nv:],
            self.u_data,
            problem.dt,
            problem.control,
            problem.substeps,
        )
        y = problem.observe(problem.dynamics, p, q[:, :, 1:], v[:, :, 1:])
        y = y.reshape(N, self.K, self.W, self.h, -1)
        r = (y - self.y_data) / self.obs_std
        const = self.W * self.h * (torch.log(self.obs_std).sum() + 0.5 * r.shape[-1] * _LOG_2PI)
        per_traj = -0.5 * (r * r).sum((-1, -2, -3)) - const  # [N, K]
        total = self.combine(per_traj, how)
        keep = [i for i in range(self.K * self.W - 1) if (i + 1) % self.W != 0]
        d = defects[:, keep].reshape(N, self.K, self.W - 1, 2 * nv) / self.state_scale
        return Evaluation(theta=theta, log_likelihood=total, per_trajectory=per_traj, defects=d)

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


class ShootingTarget:
    """The likelihood as one log-density for samplers: defects as Gaussian terms (eq. 5).

    Each trajectory's multiple-shooting likelihood carries its own defect terms (eq. 6), and the
    trajectories combine as in eq. 4 / 9 (or eq. 10)::

        log p(z) = log (1/K) Σ_k [p_k(D_k | θ, s_k) Π_t N(defect_kt | 0, σ_def²)] + log p(θ)

    with ``σ_def`` in normalised state units (csvgd App. II-C: σ²_def ≈ 1e-2), ``−inf`` when a
    parameter leaves [0, 1]. (Defect terms outside the mixture would tie every particle to all
    ``K`` trajectories' shooting variables, whichever trajectory it explains.)

    Args:
        likelihood: the shooting likelihood.
        defect_std: ``σ_def``; default ``problem.likelihood.defect_std``.
    """

    def __init__(self, likelihood: ShootingLikelihood, defect_std: float | None = None) -> None:
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
    state units."""
    d = defects.flatten(2) / defect_std
    return -0.5 * (d * d).sum(-1) - d.shape[-1] * (math.log(defect_std) + 0.5 * _LOG_2PI)


def simulate_observations(problem: Problem, theta: torch.Tensor) -> torch.Tensor:
    """Single-shooting rollouts of every particle on every trajectory of ``problem``.

    Args:
        problem: its trajectories give the initial states, controls and length ``T + 1``
            (all equal).
        theta: ``[N, M]`` SI parameters.

    Returns:
        ``[N, K, T + 1, k]`` simulated observations (index 0 observes the recorded start state).
    """
    lengths = {traj.num_samples for traj in problem.dataset}
    if len(lengths) != 1:
        raise EstimatorError(f"trajectories must have equal length, got {sorted(lengths)}")
    starts = [problem.initial_state(traj) for traj in problem.dataset]
    q0 = torch.stack([s[0] for s in starts]).unsqueeze(0)  # [1, K, nv]
    v0 = torch.stack([s[1] for s in starts]).unsqueeze(0)
    T = lengths.pop() - 1
    u = torch.stack([problem.controls(traj)[:T] for traj in problem.dataset]).unsqueeze(0)
    p = problem.parameters(theta.to(dtype=problem.dtype, device=problem.device))
    N = theta.shape[0]
    q, v = rollout(
        problem.dynamics,
        p,
        q0.expand(N, -1, -1),
        v0.expand(N, -1, -1),
        u,
        problem.dt,
        problem.control,
        problem.substeps,
    )
    return problem.observe(problem.dynamics, p, q, v)
