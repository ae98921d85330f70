"""STEADY's E step: a batched bootstrap particle filter and ancestral trace-back (steady paper,
Sec. III-C.2; Doucet & Johansen 2009).

Particles are one ``[N, D]`` tensor per step (structure of arrays), propagated by the
kinodynamic model in one batched call. Weights are kept as normalised log-weights; when the
effective sample size falls below ``resample_threshold · N`` the particles are resampled
systematically (one uniform draw), otherwise the weights carry over. Observations may be
tempered (``Q_y^w``, Sec. III-C.3) and may be missing (NaN). The marginal log-likelihood
``log p(y_{0:T})`` is accumulated from the weight normalisers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from dynid.errors import EstimatorError
from dynid.estimators.steady.observation import ObservationModel
from dynid.model.kinodynamics import Kinodynamics

__all__ = ["FilterResult", "particle_filter", "systematic_resample", "trace_trajectories"]


@dataclass
class FilterResult:
    """The particles of one filter pass.

    Attributes:
        particles: ``[T + 1, N, D]`` particles after each step's propagation.
        log_weights: ``[T + 1, N]`` normalised filtering log-weights (``p(x_t | y_{0:t})``).
        ancestors: ``[T, N]`` index into step ``t``'s particles of each step-``t + 1`` particle.
        log_marginal: ``log p(y_{0:T})`` (tempered when ``obs_weight < 1``).
        ess: ``[T + 1]`` effective sample size after weighting at each step.
    """

    particles: torch.Tensor
    log_weights: torch.Tensor
    ancestors: torch.Tensor
    log_marginal: float
    ess: torch.Tensor

    def mean(self) -> torch.Tensor:
        """``[T + 1, D]`` filtering means."""
        w = self.log_weights.exp().to(self.particles)
        return torch.einsum("tn,tnd->td", w, self.particles)

    def variance(self) -> torch.Tensor:
        """``[T + 1, D]`` filtering variances."""
        w = self.log_weights.exp().to(self.particles)
        centred = self.particles - self.mean().unsqueeze(1)
        return torch.einsum("tn,tnd->td", w, centred * centred)


def systematic_resample(
    log_weights: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """``[N]`` indices drawn by systematic resampling from normalised ``log_weights [N]``."""
    n = log_weights.shape[0]
    cdf = torch.cumsum(log_weights.exp().double(), 0)
    cdf = cdf / cdf[-1]
    start = torch.rand((), generator=generator, dtype=torch.float64)
    points = (start + torch.arange(n, dtype=torch.float64)) / n
    return torch.searchsorted(cdf, points.to(cdf.device)).clamp_max(n - 1)


def _normalise(log_weights: torch.Tensor) -> tuple[torch.Tensor, float]:
    total = torch.logsumexp(log_weights, 0)
    if not torch.isfinite(total):
        raise EstimatorError(
            "particle filter: every particle has zero likelihood (all log-weights -inf or NaN); "
            "more particles, a wider initial distribution or a larger model noise is needed"
        )
    return log_weights - total, float(total)


def particle_filter(
    model: Kinodynamics,
    observation: ObservationModel,
    x0: torch.Tensor,
    controls: torch.Tensor,
    observations: torch.Tensor,
    dt: float,
    *,
    obs_weight: float = 1.0,
    resample_threshold: float = 0.5,
    generator: torch.Generator | None = None,
) -> FilterResult:
    """Filter one trajectory (no gradients).

    Args:
        model: the transition ``p(x' | x, u)``.
        observation: ``Q_y``.
        x0: ``[N, D]`` particles drawn from the initial-state distribution.
        controls: ``[T, nu]`` controls, ``controls[t]`` held from step ``t`` to ``t + 1``.
        observations: ``[T + 1, k]`` observations (NaN: missing).
        dt: step (s).
        obs_weight: tempering exponent ``w ∈ (0, 1]`` of ``Q_y``.
        resample_threshold: resample when ESS < this fraction of N.
        generator: the random stream (seeded by the caller).

    Raises:
        EstimatorError: shapes disagree, or every particle lost all weight at some step.
    """
    n, d = x0.shape
    steps = controls.shape[0]
    if observations.shape[0] != steps + 1:
        raise EstimatorError(
            f"particle filter: {steps} controls need {steps + 1} observations, "
            f"got {observations.shape[0]}"
        )
    if not 0.0 < obs_weight <= 1.0:
        raise EstimatorError(f"particle filter: obs_weight must be in (0, 1], got {obs_weight}")
    particles = torch.empty((steps + 1, n, d), dtype=x0.dtype, device=x0.device)
    log_weights = torch.empty((steps + 1, n), dtype=torch.float64, device=x0.device)
    ancestors = torch.empty((steps, n), dtype=torch.long, device=x0.device)
    ess = torch.empty(steps + 1, dtype=torch.float64)
    uniform = torch.full((n,), -math.log(n), dtype=torch.float64, device=x0.device)
    identity = torch.arange(n, device=x0.device)
    log_marginal = 0.0
    with torch.no_grad():
        x = x0
        lw = uniform
        for t in range(steps + 1):
            if t > 0:
                if float(ess[t - 1]) < resample_threshold * n:
                    index = systematic_resample(lw, generator)
                    lw = uniform
                else:
                    index = identity
                ancestors[t - 1] = index
                x = model.sample(x[index], controls[t - 1].to(x), dt, generator)
            scored = obs_weight * observation.log_prob(x, observations[t]).double()
            scored = torch.nan_to_num(scored, nan=-math.inf)
            lw, log_norm = _normalise(lw + scored)
            log_marginal += log_norm
            particles[t] = x
            log_weights[t] = lw
            ess[t] = 1.0 / torch.exp(2.0 * lw).sum()
    return FilterResult(particles, log_weights, ancestors, log_marginal, ess)


def trace_trajectories(
    result: FilterResult, count: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``[count, T + 1, D]`` trajectories: final particles drawn by their weights, each traced
    back through its ancestors (samples of ``p(x_{0:T} | y_{0:T})`` as N grows)."""
    weights = result.log_weights[-1].exp()
    index = torch.multinomial(weights, count, replacement=True, generator=generator)
    steps = result.ancestors.shape[0]
    path = [result.particles[steps, index]]
    for t in range(steps - 1, -1, -1):
        index = result.ancestors[t, index]
        path.append(result.particles[t, index])
    return torch.stack(path[::-1], dim=1)
