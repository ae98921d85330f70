"""Proprioceptive identification (Chen et al.): object parameters from joint encoders alone.

The object (a payload held by a fixed joint, a sphere shaken in a container, a soft block squeezed
by the gripper) is part of the simulated robot–object system; its parameters θ are found by
minimising the mean squared error between simulated and measured *joint positions* (eq. 5) — the
object itself is never tracked. Gradients come from differentiating the simulation (the
problem's objective, :mod:`dynid.objective`: the shared torch model, semi-implicit Euler, eq. 2).
On a problem with the inverse-dynamics likelihood the same optimisers minimise the mean squared
effort error instead.

- ``optimizer="adam"``: Adam with a cosine-annealed learning rate (App. VI-B, lr 0.01), run from
  several initial guesses at once (multi-start, Sec. V-D: five guesses spanning two orders of
  magnitude), projected onto the parameter bounds after every step;
- ``optimizer="cma"``: the gradient-free baseline of Sec. V-E, CMA-ES (the ``cma`` package) on the
  same loss, one population member per start, so both spend the same number of simulations per
  iteration.

Optimisation runs in the normalised coordinates ``u = (θ − lower) / (upper − lower)`` of the
parameter spec (csvgd App. I-C), so the learning rate is a fraction of each parameter's range.

The returned :class:`~dynid.posterior.Posterior` holds one particle per start (the best point each
start reached), log-likelihoods under the problem's Gaussian encoder noise, and a Gauss–Newton
(Laplace) covariance at the best fit: ``Σ = (Jᵀ S⁻¹ J)⁻¹`` with ``J = ∂q_sim/∂θ``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["Optimizer", "ProprioFit", "ProprioLoss", "initial_guesses"]


class Optimizer(StrEnum):
    """How θ is searched."""

    ADAM = "adam"
    CMA = "cma"


class ProprioLoss:
    """Eq. 5: mean squared error of simulated against measured joint positions.

    The mean runs over the simulated samples, observed channels and trajectories, per particle;
    the residuals are the problem objective's (:meth:`dynid.objective.Objective.residuals`,
    through the problem's simulator: rigid, single-joint or soft block).

    Args:
        problem: whose ``obs_names`` are joint positions (``"<joint>/position"``), or whose
            likelihood scores joint efforts (``likelihood.kind: inverse_dynamics``; the loss is
            then the mean squared effort error).

    Raises:
        EstimatorError: a shooting problem observes something other than joint positions.
    """

    def __init__(self, problem: Problem) -> None:
        not_joints = [n for n in problem.obs_names if not n.endswith("/position")]
        if problem.likelihood.kind == "shooting" and not_joints:
            raise EstimatorError(
                f"proprio fits joint positions only (eq. 5); problem {problem.name!r} also "
                f"observes {not_joints}"
            )
        self.problem = problem
        self.objective = problem.objective
        self.std = self.objective.residual_std()

    def residuals(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N, R]`` measured minus simulated positions (rad or m; efforts in N·m or N)."""
        return self.objective.residuals(theta) * self.std

    def __call__(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` mean squared error per particle (rad² or m²); NaN becomes +inf."""
        r = self.residuals(theta)
        mse = (r * r).mean(-1)
        return torch.where(torch.isfinite(mse), mse, torch.full_like(mse, math.inf))

    def log_likelihood(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` Gaussian log-likelihood of the residuals (product over trajectories)."""
        z = self.objective.residuals(theta)
        log_norm = torch.log(self.std * math.sqrt(2.0 * math.pi)).sum()
        return -0.5 * (z * z).sum(-1) - log_norm


def initial_guesses(
    problem: Problem, count: int, span: float, center: torch.Tensor | None = None
) -> torch.Tensor:
    """``[count, M]`` starting points spanning ``span`` (ratio) geometrically about ``center``.

    Parameter ``j`` takes ``center_j · span^s`` for ``s`` evenly spaced in ``[−½, ½]`` (Sec. V-D:
    five guesses over two orders of magnitude for ``span = 100``). A parameter whose centre is not
    positive is spread evenly over the middle 80 % of its bounds instead. Everything is clipped to
    the bounds. ``center`` defaults to the nominal values of the spec.
    """
    spec = problem.spec
    c = spec.nominal_theta(problem.robot) if center is None else center.to(torch.float64)
    s = torch.linspace(-0.5, 0.5, count, dtype=torch.float64) if count > 1 else torch.zeros(1)
    geometric = c.unsqueeze(0) * span ** s.unsqueeze(1)
    linear = spec.from_unit((0.1 + 0.8 * (s.unsqueeze(1) + 0.5)).expand(-1, spec.dim))
    guesses = torch.where(c.unsqueeze(0) > 0.0, geometric, linear)
    return spec.clamp(guesses)


@dataclass
class _Track:
    """Per-start best points and the run's history."""

    theta: torch.Tensor
    loss: torch.Tensor
    history: list[dict[str, float]] = field(default_factory=list)
    past: list[torch.Tensor] = field(default_factory=list)
    evaluations: int = 0


class ProprioFit(Estimator):
    """The proprioceptive fit of Chen et al. (Adam multi-start) or its CMA-ES baseline.

    Args:
        optimizer: ``"adam"`` (paper method) or ``"cma"`` (Sec. V-E baseline).
        lr: Adam learning rate in normalised coordinates (App. VI-B: 0.01).
        starts: number of initial guesses (Adam) / CMA-ES population size.
        span: ratio spanned by the initial guesses (100 = two orders of magnitude).
        initial: explicit initial guesses ``[starts, M]`` (SI); overrides ``span``.
        sigma0: CMA-ES initial step size in normalised coordinates.
        rtol: stop when the best loss improved by less than this fraction over ``patience``
            iterations.
        patience: iterations of the stopping test.
        max_iterations: iteration budget (cosine annealing runs over it).
        seed: seed of CMA-ES's sampler (Adam is deterministic).
    """

    kind = "proprio"
    defaults_file = resources.files("dynid.estimators") / "defaults/proprio.yaml"

    def __init__(
        self,
        *,
        optimizer: str = "adam",
        lr: float = 0.01,
        starts: int = 5,
        span: float = 100.0,
        initial: Sequence[Sequence[float]] | None = None,
        sigma0: float = 0.2,
        rtol: float = 1e-6,
        patience: int = 10,
        max_iterations: int = 100,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        try:
            self.optimizer = Optimizer(optimizer)
        except ValueError:
            raise EstimatorError(
                f"proprio optimizer must be one of {[o.value for o in Optimizer]}, "
                f"got {optimizer!r}"
            ) from None
        if not (lr > 0.0 and starts >= 1 and span >= 1.0 and sigma0 > 0.0 and patience >= 1):
            raise EstimatorError(
                f"proprio settings out of range: lr={lr} (> 0), starts={starts} (≥ 1), "
                f"span={span} (≥ 1), sigma0={sigma0} (> 0), patience={patience} (≥ 1)"
            )
        self.lr = lr
        self.starts = starts
        self.span = span
        self.initial = None if initial is None else np.asarray(initial, dtype=np.float64)
        self.sigma0 = sigma0
        self.rtol = rtol
        self.patience = patience
        self._problem: Problem | None = None

    # ------------------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Build the loss and the starting points (explicit, warm start's MAP, or nominal)."""
        self._problem = problem
        self._loss = ProprioLoss(problem)
        spec = problem.spec
        if self.initial is not None:
            theta0 = torch.as_tensor(self.initial, dtype=torch.float64).reshape(-1, spec.dim)
        else:
            center = None
            if warm_start is not None:
                center = torch.as_tensor(warm_start.subset(spec.names).map())
            theta0 = initial_guesses(problem, self.starts, self.span, center)
        theta0 = spec.clamp(theta0)
        self._iteration = 0
        self._theta0 = theta0
        if self.optimizer is Optimizer.ADAM:
            start = problem.objective.as_theta(theta0)
            self._u = spec.to_unit(start).detach().requires_grad_(True)
            self._adam = torch.optim.Adam([self._u], lr=self.lr)
            self._schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
                self._adam, T_max=self.max_iterations
            )
        else:
            self._start_cma(theta0)
        self._start_time = time.perf_counter()
        with torch.no_grad():
            loss0 = self._loss(theta0)
        self._track = _Track(
            theta=theta0.clone(), loss=loss0.detach().cpu(), evaluations=int(theta0.shape[0])
        )
        self._record(loss0)

    def _start_cma(self, theta0: torch.Tensor) -> None:
        import cma

        spec = self._problem.spec  # type: ignore[union-attr]
        u0 = spec.to_unit(theta0).mean(0).numpy()
        # cma needs at least two dimensions; a 1-D problem gets an inert second coordinate.
        self._pad = spec.dim == 1
        x0 = np.append(u0, 0.5) if self._pad else u0
        self._es = cma.CMAEvolutionStrategy(
            x0.tolist(),
            self.sigma0,
            {
                "bounds": [0.0, 1.0],
                "popsize": self.starts,
                "seed": self.seed + 1,
                "verbose": -9,
                "maxiter": self.max_iterations,
            },
        )

    # ------------------------------------------------------------------------------ running
    def _record(self, loss: torch.Tensor) -> None:
        self._track.past.append(self._track.loss.clone())
        best = float(torch.min(self._track.loss))
        self._track.history.append(
            {
                "iteration": float(self._iteration),
                "best_loss": best,
                "mean_loss": float(loss.detach().mean()),
                "wall_s": time.perf_counter() - self._start_time,
                "evaluations": float(self._track.evaluations),
            }
        )

    def _update_best(self, theta: torch.Tensor, loss: torch.Tensor) -> None:
        """Keep, per start, the lowest-loss point seen (Adam) / the best members (CMA-ES)."""
        theta = theta.detach().cpu()
        loss = loss.detach().cpu()
        if self.optimizer is Optimizer.ADAM:
            better = loss < self._track.loss
            self._track.theta = torch.where(better[:, None], theta, self._track.theta)
            self._track.loss = torch.where(better, loss, self._track.loss)
            return
        pool_theta = torch.cat([self._track.theta, theta])
        pool_loss = torch.cat([self._track.loss, loss])
        order = torch.argsort(pool_loss)[: self.starts]
        self._track.theta, self._track.loss = pool_theta[order], pool_loss[order]

    def _adam_iteration(self) -> torch.Tensor:
        problem = self._problem
        assert problem is not None
        self._adam.zero_grad()
        theta = problem.spec.from_unit(self._u)
        loss = self._loss(theta)
        finite = torch.isfinite(loss)
        loss.where(finite, torch.zeros_like(loss)).sum().backward()
        with torch.no_grad():
            self._u.grad = torch.nan_to_num(self._u.grad, nan=0.0, posinf=0.0, neginf=0.0)
        self._adam.step()
        self._schedule.step()
        with torch.no_grad():
            self._u.clamp_(0.0, 1.0)
        self._update_best(theta, loss)
        return loss

    def _cma_iteration(self) -> torch.Tensor:
        problem = self._problem
        assert problem is not None
        x = np.asarray(self._es.ask(), dtype=np.float64)
        u = torch.as_tensor(x[:, :1] if self._pad else x)
        theta = problem.spec.from_unit(u)
        with torch.no_grad():
            loss = self._loss(theta)
        self._es.tell(list(x), loss.cpu().numpy().tolist())
        self._update_best(theta, loss)
        return loss

    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` optimiser iterations (one batched simulation of all starts each)."""
        if self._problem is None:
            raise EstimatorError("ProprioFit.step called before init(problem)")
        converged = False
        for _ in range(iterations):
            if self._iteration >= self.max_iterations:
                converged = True
                break
            loss = (
                self._adam_iteration()
                if self.optimizer is Optimizer.ADAM
                else (self._cma_iteration())
            )
            self._iteration += 1
            self._track.evaluations += int(loss.shape[0])
            self._record(loss)
            converged = self._stalled()
            if converged:
                break
        last = self._track.history[-1]
        return StepInfo(
            iteration=self._iteration,
            loss=last["best_loss"],
            wall_s=last["wall_s"],
            converged=converged,
            metrics={"mean_loss": last["mean_loss"], "evaluations": last["evaluations"]},
        )

    def _stalled(self) -> bool:
        """No start improved its best loss by more than ``rtol`` over ``patience`` iterations."""
        past = self._track.past
        if len(past) <= self.patience:
            return False
        before, now = past[-1 - self.patience], past[-1]
        gain = torch.where(torch.isfinite(before), before - now, torch.zeros_like(now))
        return bool((gain <= self.rtol * before.abs().clamp_min(1e-300)).all())

    # ------------------------------------------------------------------------------ result
    @property
    def history(self) -> list[dict[str, float]]:
        """Per iteration: best and mean loss, wall time since ``init`` (s), simulations run."""
        return list(self._track.history)

    def covariance(self, theta: torch.Tensor) -> np.ndarray:
        """Gauss–Newton (Laplace) covariance ``(Jᵀ J)⁻¹`` ``[M, M]`` (SI) at ``theta [M]``, with
        ``J`` the Jacobian of the objective's whitened residuals."""
        problem = self._problem
        assert problem is not None
        J = problem.objective.jacobian(theta[None])[0]
        info = (J.T @ J).detach().cpu().numpy()
        return np.linalg.pinv(info, hermitian=True)

    def posterior(self) -> Posterior:
        """One particle per start (its best point), weighted by likelihood, with Laplace cov."""
        problem = self._problem
        if problem is None:
            raise EstimatorError("ProprioFit.posterior called before init(problem)")
        theta = self._track.theta
        spec = problem.spec
        with torch.no_grad():
            th = problem.objective.as_theta(theta)
            loglik = self._loss.log_likelihood(th)
            logdens = loglik + spec.log_prior(th)
        loglik_np = loglik.cpu().numpy()
        finite = np.isfinite(loglik_np)
        log_w = np.where(finite, loglik_np, -np.inf)
        best = int(np.argmin(self._track.loss.numpy()))
        cov = self.covariance(theta[best])
        spread = theta[torch.from_numpy(finite)].std(0) if finite.sum() > 1 else None
        return Posterior(
            particles=theta.numpy(),
            names=list(spec.names),
            units=[p.unit for p in spec.parameters],
            log_weights=log_w,
            log_likelihood=np.where(finite, loglik_np, -np.inf),
            log_density=np.where(finite, logdens.cpu().numpy(), -np.inf),
            covariance=cov,
            estimator=f"proprio/{self.optimizer.value}",
            iteration=self._iteration,
            meta={
                "problem": problem.name,
                "optimizer": self.optimizer.value,
                "best_loss": float(self._track.loss[best]),
                "start_loss": [float(x) for x in self._track.loss],
                "initial_guesses": self._theta0.tolist(),
                "start_spread": None if spread is None else spread.tolist(),
                "evaluations": self._track.evaluations,
                "wall_s": time.perf_counter() - self._start_time,
            },
        )
