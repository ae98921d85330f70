"""SVGD core: kernel, bandwidth, Sobol initialisation, recovery of analytic Gaussian posteriors."""

from __future__ import annotations

import math

import pytest
import torch

from dynid.estimators.base import EstimatorError
from dynid.estimators.svgd import (
    median_bandwidth,
    rbf_kernel,
    sobol_particles,
    stein_terms,
    svgd_direction,
)


def _run_svgd(mean: torch.Tensor, cov: torch.Tensor, n: int, iters: int, seed: int) -> torch.Tensor:
    """SVGD with Adam on N(mean, cov), particles from a Sobol box ±1 around the mean."""
    prec = torch.linalg.inv(cov)
    x = sobol_particles(mean - 1.0, mean + 1.0, n, seed).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=0.05)
    for _ in range(iters):
        grad = -(x.detach() - mean) @ prec
        opt.zero_grad()
        x.grad = -svgd_direction(x.detach(), grad)
        opt.step()
    return x.detach()


def test_svgd_recovers_1d_gaussian() -> None:
    mean, cov = (
        torch.tensor([1.5], dtype=torch.float64),
        torch.tensor([[0.25]], dtype=torch.float64),
    )
    x = _run_svgd(mean, cov, 64, 300, seed=0)
    assert float(x.mean()) == pytest.approx(1.5, abs=0.03)
    assert float(x.var()) == pytest.approx(0.25, rel=0.15)


def test_svgd_recovers_correlated_2d_gaussian() -> None:
    mean = torch.tensor([1.5, 2.0], dtype=torch.float64)
    cov = torch.tensor([[0.04, -0.0564], [-0.0564, 0.09]], dtype=torch.float64)  # ρ = −0.94
    x = _run_svgd(mean, cov, 64, 500, seed=1)
    assert torch.allclose(x.mean(0), mean, atol=0.03)
    emp = torch.cov(x.T)
    assert torch.allclose(emp, cov, rtol=0.1, atol=0.003)
    rho = emp[0, 1] / torch.sqrt(emp[0, 0] * emp[1, 1])
    assert float(rho) == pytest.approx(-0.94, abs=0.05)


def test_svgd_agrees_with_pyro_svgd_on_a_shared_problem() -> None:
    pyro = pytest.importorskip("pyro")
    import pyro.distributions as dist
    from pyro.infer import SVGD, RBFSteinKernel
    from pyro.optim import Adam

    mean = torch.tensor([0.5, -1.0], dtype=torch.float64)
    cov = torch.tensor([[0.3, 0.2], [0.2, 0.4]], dtype=torch.float64)

    def model() -> None:
        pyro.sample("x", dist.MultivariateNormal(mean, cov))

    pyro.clear_param_store()
    with torch.random.fork_rng(devices=[]):
        pyro.set_rng_seed(0)
        svgd = SVGD(
            model,
            RBFSteinKernel(),
            Adam({"lr": 0.05}),
            num_particles=64,
            max_plate_nesting=0,
            mode="multivariate",
        )
        for _ in range(400):
            svgd.step()
        ref = svgd.get_named_particles()["x"].detach().to(torch.float64)
    ours = _run_svgd(mean, cov, 64, 400, seed=2)
    for x in (ref, ours):
        assert torch.allclose(x.mean(0), mean, atol=0.05)
        assert torch.allclose(torch.cov(x.T), cov, rtol=0.3)
    assert torch.allclose(ours.mean(0), ref.mean(0), atol=0.06)
    assert torch.allclose(torch.cov(ours.T), torch.cov(ref.T), rtol=0.3)


def test_median_bandwidth_and_kernel_gradient() -> None:
    x = torch.tensor([[0.0], [1.0], [3.0]], dtype=torch.float64)
    sq = (x - x.T) ** 2
    h = median_bandwidth(sq)
    assert float(h) == pytest.approx(4.0 / math.log(3))  # off-diagonal squared: 1, 9, 4 → median 4
    K, rep, _ = rbf_kernel(x)
    assert torch.allclose(K, torch.exp(-sq / h))
    # repulsion equals Σ_j ∇_{x_j} k(x_j, x_i) by autograd
    xj = x.clone().requires_grad_(True)
    for i in range(3):
        k_i = torch.exp(-((xj - x[i]) ** 2).sum(-1) / h).sum()
        (g,) = torch.autograd.grad(k_i, xj)
        assert float(rep[i, 0]) == pytest.approx(float(g.sum()), rel=1e-12)
    assert float(median_bandwidth(torch.zeros(4, 4))) == 1.0
    # the upper triangle's median is the off-diagonal one (each value appears twice)
    for n in (5, 6, 9):
        y = torch.randn(n, 3, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
        d2 = torch.cdist(y, y) ** 2
        off = d2[~torch.eye(n, dtype=torch.bool)]
        assert float(median_bandwidth(d2)) == float(off.median()) / math.log(n)


def test_kernel_matches_the_pairwise_differences() -> None:
    """The ``[N, N]`` product form equals the direct sum over pairwise differences."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(40, 11, generator=gen, dtype=torch.float64)
    diff = x.unsqueeze(1) - x.unsqueeze(0)  # [N, N, D]
    sq = (diff * diff).sum(-1)
    h = median_bandwidth(sq)
    K, rep, h_ours = rbf_kernel(x)
    assert float(h_ours) == pytest.approx(float(h), rel=1e-12)
    assert torch.allclose(K, torch.exp(-sq / h), rtol=0, atol=1e-13)
    assert torch.equal(torch.diagonal(K), torch.ones(40, dtype=torch.float64))
    expected = (2.0 / h) * (torch.exp(-sq / h).unsqueeze(-1) * diff).sum(1)
    assert torch.allclose(rep, expected, rtol=0, atol=1e-12)


def test_sobol_particles_seeded_and_inside_limits() -> None:
    lo = torch.tensor([0.05, -0.2, 0.002], dtype=torch.float64)
    hi = torch.tensor([0.5, 0.2, 1.0], dtype=torch.float64)
    a, b = sobol_particles(lo, hi, 64, seed=3), sobol_particles(lo, hi, 64, seed=3)
    assert torch.equal(a, b)
    assert not torch.equal(a, sobol_particles(lo, hi, 64, seed=4))
    assert bool(((a >= lo) & (a <= hi)).all())
    # low discrepancy: every half of every axis holds close to half of the points
    u = (a - lo) / (hi - lo)
    assert bool(((u < 0.5).sum(0) - 32).abs().max() <= 2)
    with pytest.raises(EstimatorError, match="finite"):
        sobol_particles(lo, torch.full_like(hi, math.inf), 4, 0)


def test_stein_terms_split_the_direction() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 2, generator=gen, dtype=torch.float64)
    g = torch.randn(6, 2, generator=gen, dtype=torch.float64)
    terms = stein_terms(x, g)
    K, rep, _ = rbf_kernel(x)
    assert float(terms.bandwidth) == pytest.approx(float(median_bandwidth(torch.cdist(x, x) ** 2)))
    assert torch.allclose(terms.driving, K @ g / 6)
    assert torch.allclose(terms.repulsive, rep / 6)
    assert torch.equal(terms.direction, svgd_direction(x, g))
