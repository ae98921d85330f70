"""Metrics against analytic Gaussian values and independent implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynid.metrics import (
    MetricError,
    knn_kl_divergence,
    mmd,
    rmse,
    trajectory_log_likelihood,
)


def _gaussian_kl(mu0, S0, mu1, S1) -> float:
    """KL(N(mu0, S0) ‖ N(mu1, S1)) in nats."""
    d = len(mu0)
    S1i = np.linalg.inv(S1)
    diff = mu1 - mu0
    return 0.5 * (
        np.trace(S1i @ S0) + diff @ S1i @ diff - d + math.log(np.linalg.det(S1) / np.linalg.det(S0))
    )


def _gaussian_mmd2(mu0, S0, mu1, S1, sigma) -> float:
    """Population MMD² between two Gaussians for k = exp(−‖a − b‖² / 2σ²)."""
    d = len(mu0)
    s2 = sigma * sigma

    def mean_k(ma, Sa, mb, Sb) -> float:
        S = Sa + Sb
        diff = ma - mb
        return np.linalg.det(np.eye(d) + S / s2) ** -0.5 * math.exp(
            -0.5 * diff @ np.linalg.solve(S + s2 * np.eye(d), diff)
        )

    return mean_k(mu0, S0, mu0, S0) + mean_k(mu1, S1, mu1, S1) - 2 * mean_k(mu0, S0, mu1, S1)


def test_knn_kl_matches_analytic_gaussians_both_ways() -> None:
    rng = np.random.default_rng(0)
    mu0, S0 = np.zeros(2), np.array([[1.0, 0.3], [0.3, 1.0]])
    mu1, S1 = np.array([0.5, -0.3]), np.diag([1.3, 0.8])
    x = rng.multivariate_normal(mu0, S0, size=4000)
    y = rng.multivariate_normal(mu1, S1, size=4000)
    assert knn_kl_divergence(x, y) == pytest.approx(_gaussian_kl(mu0, S0, mu1, S1), abs=0.05)
    assert knn_kl_divergence(y, x) == pytest.approx(_gaussian_kl(mu1, S1, mu0, S0), abs=0.05)
    # identical distributions: close to zero
    z = rng.multivariate_normal(mu0, S0, size=4000)
    assert abs(knn_kl_divergence(x, z)) < 0.05


def test_knn_kl_equals_universal_divergence_for_equal_ranks() -> None:
    universal_divergence = pytest.importorskip("universal_divergence")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(60, 5))
    y = rng.normal(loc=0.3, size=(80, 5)) * 1.5
    for k in (1, 3):
        ref = universal_divergence.estimate(x, y, k=k)
        assert knn_kl_divergence(x, y, k=k, l=k) == pytest.approx(ref, rel=1e-10)


def test_knn_kl_digamma_term_for_unequal_ranks() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 3)), rng.normal(size=(40, 3))
    from scipy.special import digamma

    base = knn_kl_divergence(x, y, k=2, l=2)
    # changing only l moves the ρ term and adds ψ(l) − ψ(k)
    d_xx = np.sort(np.linalg.norm(x[:, None] - x[None], axis=-1), axis=1)
    rho2, rho4 = d_xx[:, 2], d_xx[:, 4]  # column 0 is the point itself
    expected = base - 3 / 50 * np.log(rho4 / rho2).sum() + digamma(4) - digamma(2)
    assert knn_kl_divergence(x, y, k=2, l=4) == pytest.approx(expected, rel=1e-12)


def test_knn_kl_is_nan_for_collapsed_sets() -> None:
    x = np.zeros((10, 2))
    y = np.random.default_rng(3).normal(size=(10, 2))
    assert math.isnan(knn_kl_divergence(x, y))


def test_mmd_matches_analytic_gaussians() -> None:
    rng = np.random.default_rng(4)
    mu0, S0 = np.zeros(2), np.eye(2)
    mu1, S1 = np.array([1.0, 0.0]), np.diag([1.5, 0.5])
    x = rng.multivariate_normal(mu0, S0, size=2000)
    y = rng.multivariate_normal(mu1, S1, size=2000)
    expected = _gaussian_mmd2(mu0, S0, mu1, S1, sigma=1.0)
    assert mmd(x, y, bandwidth=1.0, unbiased=True) == pytest.approx(expected, abs=0.01)
    assert mmd(x, y, bandwidth=1.0) == pytest.approx(expected, abs=0.01)
    assert mmd(x, x) == pytest.approx(0.0, abs=1e-12)


def test_mmd_is_twice_geomloss_gaussian_loss() -> None:
    geomloss = pytest.importorskip("geomloss")
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(70, 3)), rng.normal(loc=0.4, size=(90, 3))
    loss = geomloss.SamplesLoss("gaussian", blur=0.8, backend="tensorized")
    ref = float(loss(torch.from_numpy(x), torch.from_numpy(y)))
    assert mmd(x, y, bandwidth=0.8) == pytest.approx(2.0 * ref, rel=1e-9)


def test_trajectory_sets_are_flattened() -> None:
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(20, 5, 2)), rng.normal(size=(20, 5, 2))
    assert mmd(a, b) == pytest.approx(mmd(a.reshape(20, 10), b.reshape(20, 10)))
    assert knn_kl_divergence(a, b) == pytest.approx(
        knn_kl_divergence(a.reshape(20, 10), b.reshape(20, 10))
    )


def test_trajectory_log_likelihood_single_particle_is_gaussian() -> None:
    rng = np.random.default_rng(7)
    real = rng.normal(size=(3, 4, 2))
    sim = rng.normal(size=(1, 4, 2))
    sigma = np.array([0.5, 2.0])
    z = (real - sim) / sigma
    logp = -0.5 * (z**2).sum((1, 2)) - 4 * (np.log(sigma).sum() + math.log(2 * math.pi))
    assert trajectory_log_likelihood(real, sim, sigma) == pytest.approx(logp.mean() / 4)
    # a mixture with a far-away second particle of weight 1/2 costs log 2 per trajectory
    far = np.concatenate([sim, sim + 1e3])
    assert trajectory_log_likelihood(real, far, sigma) == pytest.approx(
        (logp.mean() - math.log(2)) / 4
    )


def test_metric_errors_name_the_problem() -> None:
    with pytest.raises(MetricError, match="different dimensions"):
        mmd(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(MetricError, match="NaN"):
        knn_kl_divergence(np.full((5, 2), np.nan), np.zeros((5, 2)))
    with pytest.raises(MetricError, match="equal shape"):
        rmse(np.zeros(3), np.zeros(4))
