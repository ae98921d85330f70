"""Shared adapter: a sampler over a :class:`~dynid.objective.Target` run on a Problem.

The baselines of the csvgd paper (Sec. V) see the same shooting likelihood as CSVGD. With
multiple shooting the shooting variables join the sampled vector and the defects enter as
Gaussian terms with ``σ_def`` (App. II-C, σ²_def ≈ 1e-2). Ensemble methods start from a
scrambled Sobol set over the limits, single-chain MCMC from the centre of the limits (App. I-A);
shooting variables start at the recorded states.
"""

from __future__ import annotations

import math
import time
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.estimators.svgd import sobol_particles
from dynid.objective import Likelihood, PosteriorTarget, Target
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["SamplerEstimator", "TargetSampler", "safe_log_prob"]


def safe_log_prob(target: Target, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log p [N] with NaN → −inf, mask [N] of the NaN rows)`` without building a graph."""
    with torch.no_grad():
        lp = target.log_prob(z)
    bad = torch.isnan(lp)
    return torch.where(bad, torch.full_like(lp, -math.inf), lp), bad


class TargetSampler(Protocol):
    """What a baseline sampler offers the adapter."""

    nan_evaluations: int

    def step(self) -> None:
        """One iteration (one ensemble move, one chain transition, one CEM generation)."""
        ...

    def samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z [S, D], log p [S])``: the current particle set or the latest chain samples."""
        ...


class SamplerEstimator(Estimator):
    """Base of the baseline estimators.

    Args:
        num_particles: ensemble size, population size, or number of final chain samples kept
            (the paper's "last 100 samples").
        shooting: ``"single"`` | ``"multiple"``; default from the problem.
        windows: shooting windows; default from the problem.
        defect_std: ``σ_def`` (normalised state units); default from the problem.
        max_iterations, seed: see :class:`Estimator`.
    """

    ensemble: bool = True
    """Start from a Sobol set (``True``) or a single chain at the centre of the limits."""

    def __init__(
        self,
        *,
        num_particles: int = 64,
        shooting: str | None = None,
        windows: int | None = None,
        defect_std: float | None = None,
        max_iterations: int = 1000,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        if num_particles < 2:
            raise EstimatorError(f"num_particles must be ≥ 2, got {num_particles}")
        self.num_particles = int(num_particles)
        self.shooting = shooting
        self.windows = windows
        self.defect_std = defect_std
        self._problem: Problem | None = None

    @abstractmethod
    def make_sampler(self, target: Target, z0: torch.Tensor) -> TargetSampler:
        """The sampler, started at ``z0`` (``[N, D]`` for ensembles, ``[1, D]`` for a chain)."""

    def initial_points(self, likelihood: Likelihood, problem: Problem) -> torch.Tensor:
        """Sobol ensemble over the limits, or the centre of the limits for a single chain."""
        M = likelihood.M
        zeros = torch.zeros(M, dtype=torch.float64)
        if self.ensemble:
            n = self.ensemble_size(likelihood.dim)
            u = sobol_particles(zeros, torch.ones_like(zeros), n, self.seed)
        else:
            u = torch.full((1, M), 0.5, dtype=torch.float64)
        theta = problem.spec.from_unit(u).to(dtype=problem.dtype, device=problem.device)
        return likelihood.augment(theta)

    def ensemble_size(self, dim: int) -> int:
        """Ensemble size for a target of dimension ``dim`` (``num_particles`` by default)."""
        return self.num_particles

    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Build the target and the sampler (``warm_start`` is not used by the baselines)."""
        self._problem = problem
        self.likelihood = problem.objective.likelihood(shooting=self.shooting, windows=self.windows)
        self.target = PosteriorTarget(self.likelihood, self.defect_std)
        self.sampler = self.make_sampler(self.target, self.initial_points(self.likelihood, problem))
        self.iteration = 0
        self._start = time.perf_counter()

    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` sampler iterations."""
        if self._problem is None:
            raise EstimatorError(f"{type(self).__name__}.step called before init()")
        for _ in range(int(iterations)):
            self.sampler.step()
            self.iteration += 1
        _, lp = self.sampler.samples()
        finite = lp[torch.isfinite(lp)]
        return StepInfo(
            iteration=self.iteration,
            loss=float(-finite.mean()) if finite.numel() else math.nan,
            wall_s=time.perf_counter() - self._start,
            metrics={"nan_evaluations": float(self.sampler.nan_evaluations)},
        )

    def posterior(self) -> Posterior:
        """The sampler's current samples as SI parameters (shooting variables dropped)."""
        problem = self._problem
        if problem is None:
            raise EstimatorError(f"{type(self).__name__}.posterior called before init()")
        z, lp = self.sampler.samples()
        theta = self.likelihood.theta(z).detach().cpu().numpy()
        meta: dict[str, Any] = {
            "nan_evaluations": int(self.sampler.nan_evaluations),
            "shooting": self.likelihood.shooting,
            "windows": self.likelihood.W,
        }
        return Posterior(
            particles=theta,
            names=list(problem.spec.names),
            units=list(problem.spec.units),
            log_density=np.nan_to_num(lp.detach().cpu().numpy(), nan=-np.inf),
            estimator=self.kind,
            iteration=self.iteration,
            meta=meta,
        )
