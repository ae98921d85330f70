"""Baseline samplers on an analytic bounded Gaussian target (the Target protocol of CSVGD)."""

from __future__ import annotations

import math

import torch

from dynid.estimators.baselines.cem import CEMSampler, GaussianMixture
from dynid.estimators.baselines.emcee_ import EmceeSampler
from dynid.estimators.baselines.nuts import NUTSSampler
from dynid.estimators.baselines.sgld import SGLDSampler, reflect

MEAN = torch.tensor([0.4, 0.6], dtype=torch.float64)
COV = torch.tensor([[0.004, 0.002], [0.002, 0.003]], dtype=torch.float64)


class GaussianTarget:
    """N(MEAN, COV) restricted to [0, 1]²; optionally NaN on a half-plane (an unstable model)."""

    def __init__(self, nan_above: float | None = None) -> None:
        self.dim = 2
        self.lower = torch.zeros(2, dtype=torch.float64)
        self.upper = torch.ones(2, dtype=torch.float64)
        self.dist = torch.distributions.MultivariateNormal(MEAN, COV)
        self.nan_above = nan_above

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        lp = self.dist.log_prob(z)
        inside = ((z >= self.lower) & (z <= self.upper)).all(-1)
        lp = torch.where(inside, lp, torch.full_like(lp, -math.inf))
        if self.nan_above is not None:
            lp = torch.where(z[:, 0] > self.nan_above, torch.full_like(lp, math.nan), lp)
        return lp


def _box(n: int) -> torch.Tensor:
    return torch.quasirandom.SobolEngine(2, scramble=True, seed=0).draw(n, dtype=torch.float64)


def test_cem_concentrates_on_the_mode_and_skips_nan_samples() -> None:
    target = GaussianTarget(nan_above=0.8)
    sampler = CEMSampler(target, _box(64), elite_fraction=0.2, components=3, seed=0)
    for _ in range(15):
        sampler.step()
    z, lp = sampler.samples()
    assert sampler.nan_evaluations > 0
    best = z[torch.argmax(lp)]
    assert torch.allclose(best, MEAN, atol=0.03)
    assert bool(((z >= 0) & (z <= 1)).all())


def test_gaussian_mixture_em_recovers_two_clusters() -> None:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(200, 2, generator=gen, dtype=torch.float64) * 0.1 + torch.tensor([1.0, 0.0])
    b = torch.randn(100, 2, generator=gen, dtype=torch.float64) * 0.2 - torch.tensor([1.0, 0.0])
    gmm = GaussianMixture.fit(torch.cat([a, b]), 2, gen)
    order = torch.argsort(gmm.means[:, 0])
    assert torch.allclose(
        gmm.means[order], torch.tensor([[-1.0, 0.0], [1.0, 0.0]], dtype=torch.float64), atol=0.06
    )
    assert torch.allclose(
        torch.exp(gmm.log_weights[order]),
        torch.tensor([1 / 3, 2 / 3], dtype=torch.float64),
        atol=0.02,
    )


def test_sgld_samples_the_gaussian_and_stays_in_bounds() -> None:
    target = GaussianTarget()
    z0 = torch.full((32, 2), 0.5, dtype=torch.float64)  # 32 batched chains
    sampler = SGLDSampler(
        target, z0, step_size=5e-4, step_offset=10.0, decay=0.2, keep=32 * 50, seed=0
    )
    for _ in range(300):
        sampler.step()
    z, _ = sampler.samples()
    assert torch.allclose(z.mean(0), MEAN, atol=0.02)
    assert torch.allclose(torch.cov(z.T), COV, atol=0.0015)
    assert bool(((z >= 0) & (z <= 1)).all())


def test_reflect_folds_into_the_box() -> None:
    lo, hi = torch.tensor([0.0, -math.inf]), torch.tensor([1.0, math.inf])
    z = torch.tensor([[1.2, 5.0], [-0.3, -7.0], [2.5, 0.0]])
    out = reflect(z, lo, hi)
    assert torch.allclose(out, torch.tensor([[0.8, 5.0], [0.3, -7.0], [0.5, 0.0]]))


def test_emcee_ensemble_moments_and_seeded_reproducibility() -> None:
    def run() -> tuple[torch.Tensor, EmceeSampler]:
        sampler = EmceeSampler(GaussianTarget(), MEAN + 0.05 * (_box(32) - 0.5), seed=3)
        chain = []
        for k in range(400):
            sampler.step()
            if k >= 200:
                chain.append(sampler.samples()[0])
        return torch.cat(chain), sampler

    z, sampler = run()
    assert torch.allclose(z.mean(0), MEAN, atol=0.01)
    assert torch.allclose(torch.cov(z.T), COV, atol=0.0008)
    assert 0.2 < sampler.acceptance_fraction < 0.9
    assert torch.equal(run()[0], z)


def test_emcee_counts_nan_as_rejections() -> None:
    sampler = EmceeSampler(GaussianTarget(nan_above=0.45), MEAN - 0.1 + 0.05 * _box(16), seed=0)
    for _ in range(30):
        sampler.step()
    z, lp = sampler.samples()
    assert sampler.nan_evaluations > 0
    assert bool((z[:, 0] <= 0.45).all())
    assert bool(torch.isfinite(lp).all())


def test_nuts_chain_matches_gaussian_moments() -> None:
    target = GaussianTarget()
    sampler = NUTSSampler(
        target,
        torch.full((1, 2), 0.5, dtype=torch.float64),
        warmup_steps=60,
        max_tree_depth=3,
        keep=150,
        seed=0,
    )
    for _ in range(210):
        sampler.step()
    z, lp = sampler.samples()
    assert z.shape == (150, 2)
    assert bool(torch.isfinite(lp).all())
    assert torch.allclose(z.mean(0), MEAN, atol=0.02)
    assert torch.allclose(torch.cov(z.T), COV, rtol=0.5)
    before = torch.get_rng_state()
    sampler.step()
    assert torch.equal(before, torch.get_rng_state())  # the chain leaves the global RNG alone
