"""Cross-entropy method with a Gaussian-mixture proposal (csvgd Sec. V: 3 components).

Each generation draws ``N`` samples from the mixture (clipped into the target's bounds), scores
them in one batched call, keeps the ``elite_fraction`` best and refits the mixture to them by a
few EM iterations (Rubinstein and Kroese 2004; Botev et al. 2013). Samples whose log-density is
NaN are counted and never elite.
"""

from __future__ import annotations

import math
from importlib import resources

import torch

from dynid.estimators.base import EstimatorError
from dynid.estimators.baselines.base import SamplerEstimator, safe_log_prob
from dynid.objective import Target

__all__ = ["CEM", "CEMSampler", "GaussianMixture"]


class GaussianMixture:
    """A ``K``-component full-covariance Gaussian mixture over ``[D]`` fitted by EM.

    Attributes:
        log_weights: ``[K]``; means: ``[K, D]``; chol: ``[K, D, D]`` Cholesky factors.
    """

    def __init__(self, log_weights: torch.Tensor, means: torch.Tensor, chol: torch.Tensor) -> None:
        self.log_weights, self.means, self.chol = log_weights, means, chol

    @classmethod
    def fit(
        cls,
        x: torch.Tensor,
        components: int,
        generator: torch.Generator,
        iterations: int = 20,
        reg: float = 1e-6,
    ) -> GaussianMixture:
        """EM on samples ``x [n, D]``, initialised at ``components`` distinct random samples.

        ``reg`` (added to every covariance diagonal) keeps the fit proper when the samples
        collapse.
        """
        n, D = x.shape
        k = min(components, n)
        idx = torch.randperm(n, generator=generator)[:k].to(x.device)
        eye = torch.eye(D, dtype=x.dtype, device=x.device)
        cov0 = torch.atleast_2d(torch.cov(x.T)) if n > 1 else eye
        cov0 = torch.diag_embed(torch.diagonal(cov0).clamp_min(reg))
        gmm = cls(
            torch.full((k,), -math.log(k), dtype=x.dtype, device=x.device),
            x[idx].clone(),
            torch.linalg.cholesky(cov0 + reg * eye).expand(k, D, D).clone(),
        )
        for _ in range(iterations):
            resp = gmm._responsibilities(x)  # [n, k]
            nk = resp.sum(0).clamp_min(1e-12)
            means = (resp.T @ x) / nk[:, None]
            diff = x[None] - means[:, None]  # [k, n, D]
            cov = torch.einsum("kn,kni,knj->kij", resp.T, diff, diff) / nk[:, None, None]
            gmm = cls(torch.log(nk / n), means, torch.linalg.cholesky(cov + reg * eye))
        return gmm

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``[n, K]`` log weight + component log density of ``x [n, D]``."""
        diff = x[None] - self.means[:, None]  # [K, n, D]
        sol = torch.linalg.solve_triangular(self.chol, diff.transpose(-1, -2), upper=False)
        maha = (sol * sol).sum(-2)  # [K, n]
        logdet = torch.log(torch.diagonal(self.chol, dim1=-2, dim2=-1)).sum(-1)
        D = x.shape[-1]
        comp = -0.5 * maha - logdet[:, None] - 0.5 * D * math.log(2 * math.pi)
        return (comp + self.log_weights[:, None]).T

    def _responsibilities(self, x: torch.Tensor) -> torch.Tensor:
        lp = self.log_prob(x)
        return torch.softmax(lp, dim=-1)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``[n, D]`` draws."""
        cpu = self.log_weights.cpu()
        comp = torch.multinomial(torch.exp(cpu), n, replacement=True, generator=generator)
        eps = torch.randn(n, self.means.shape[1], generator=generator, dtype=cpu.dtype)
        comp, eps = comp.to(self.means.device), eps.to(self.means.device)
        return self.means[comp] + (self.chol[comp] @ eps.unsqueeze(-1)).squeeze(-1)


class CEMSampler:
    """CEM over a target: population ``z [N, D]``, mixture refitted to the elites each step.

    Args:
        target: the log-density.
        z0: ``[N, D]`` initial population (the first mixture is fitted to it).
        elite_fraction: share of the population kept as elites.
        components: mixture components (3 in the paper).
        seed: seeds the sampling generator.
    """

    def __init__(
        self,
        target: Target,
        z0: torch.Tensor,
        elite_fraction: float = 0.2,
        components: int = 3,
        seed: int = 0,
    ) -> None:
        if not 0.0 < elite_fraction <= 1.0:
            raise EstimatorError(f"elite_fraction must be in (0, 1], got {elite_fraction}")
        self.target = target
        self.generator = torch.Generator().manual_seed(seed)
        self.components = int(components)
        self.n_elite = max(self.components + 1, round(elite_fraction * z0.shape[0]))
        self.nan_evaluations = 0
        self.z = z0
        self.lp, bad = safe_log_prob(target, z0)
        self.nan_evaluations += int(bad.sum())

    def step(self) -> None:
        """Refit on the elites of the current population and draw the next one."""
        finite = torch.isfinite(self.lp)
        order = torch.argsort(torch.where(finite, self.lp, -math.inf), descending=True)
        elite = self.z[order[: min(self.n_elite, int(finite.sum()))]]
        if elite.shape[0] < 2:
            raise EstimatorError("CEM: fewer than two finite samples left to refit the mixture")
        gmm = GaussianMixture.fit(elite, self.components, self.generator)
        z = gmm.sample(self.z.shape[0], self.generator)
        z = torch.maximum(torch.minimum(z, self.target.upper), self.target.lower)
        self.z = z
        self.lp, bad = safe_log_prob(self.target, z)
        self.nan_evaluations += int(bad.sum())

    def samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current population and its log-densities."""
        return self.z, self.lp


class CEM(SamplerEstimator):
    """CEM baseline on a problem. Settings of :class:`SamplerEstimator` plus
    ``elite_fraction`` and ``components`` (see :class:`CEMSampler`)."""

    kind = "cem"
    defaults_file = resources.files("dynid.estimators") / "defaults/cem.yaml"
    ensemble = True

    def __init__(self, *, elite_fraction: float = 0.2, components: int = 3, **settings) -> None:
        super().__init__(**settings)
        self.elite_fraction = elite_fraction
        self.components = components

    def make_sampler(self, target: Target, z0: torch.Tensor) -> CEMSampler:
        """A :class:`CEMSampler` on ``target``."""
        return CEMSampler(target, z0, self.elite_fraction, self.components, self.seed)
