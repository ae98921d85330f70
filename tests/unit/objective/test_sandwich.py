"""The covariance of least squares on time-correlated residuals (dynid.objective.sandwich)."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from dynid.objective.sandwich import (
    bandwidth,
    correlation_time,
    long_run_covariance,
    sample_scores,
    sandwich_covariance,
    with_floor,
)


def _ar1(rng: np.random.Generator, rho: float, size: int | tuple[int, ...]) -> np.ndarray:
    """AR(1) series along axis 0 with unit innovations."""
    return lfilter([1.0], [1.0, -rho], rng.normal(size=size), axis=0)


def test_correlation_time_of_an_ar1_residual_is_its_integrated_autocorrelation() -> None:
    """``τ = (1 + ρ) / (1 − ρ)`` for AR(1): 4 at ρ = 0.6, 1 for white noise."""
    rng = np.random.default_rng(0)
    r = np.stack([_ar1(rng, 0.6, 200_000), rng.normal(size=200_000)], axis=1)
    tau = correlation_time(r, (100_000, 100_000))
    assert abs(tau[0] - 4.0) < 0.4
    assert tau[1] < 1.1


def test_bandwidth_follows_the_scores_correlation() -> None:
    rng = np.random.default_rng(1)
    white = bandwidth(rng.normal(size=(2000, 3)))
    slow = bandwidth(_ar1(rng, 0.9, (2000, 3)))
    assert white <= 3
    assert slow >= 20


def test_long_run_variance_of_ar1_scores() -> None:
    """The long-run variance of AR(1) with unit innovations is ``1 / (1 − ρ)²`` per sample
    (25 at ρ = 0.8), where the plain sum of squares gives ``1 / (1 − ρ²)`` (2.8)."""
    rng = np.random.default_rng(2)
    estimates = [long_run_covariance(_ar1(rng, 0.8, (20_000, 1)))[0, 0] / 20_000 for _ in range(20)]
    assert abs(np.mean(estimates) - 25.0) < 0.15 * 25.0


def test_no_cross_product_spans_two_trajectories() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(50, 2)), rng.normal(size=(70, 2))
    joined = long_run_covariance(np.concatenate([a, b]), segments=(50, 70), lags=4)
    np.testing.assert_allclose(
        joined, long_run_covariance(a, lags=4) + long_run_covariance(b, lags=4)
    )


def test_sample_scores_sum_the_rows_of_each_sample() -> None:
    J = np.arange(12.0).reshape(6, 2)
    r = np.array([1.0, -1.0, 2.0, 0.0, 0.5, 0.5])
    g = sample_scores(J, r, rows=2)
    np.testing.assert_allclose(g, [[-2, -2], [8, 10], [9, 10]])


def test_sandwich_sigma_grows_by_the_correlation_factor_and_covers_the_truth() -> None:
    """Slow regressors with AR(1) noise (ρ = 0.8): the estimate's σ is √((1 + ρ)/(1 − ρ)) = 3
    times the plain ``s² (JᵀJ)⁻¹`` one; the sandwich's 95 % intervals hold the truth about 90 %
    of the time (a kernel estimate of the long-run variance runs a little low on finite
    records), the plain ones about half the time."""
    rng = np.random.default_rng(4)
    samples, rows, draws, rho = 2000, 2, 300, 0.8
    t = np.linspace(0.0, 20.0, samples)
    basis = np.stack([np.sin(0.5 * t), np.cos(0.3 * t), np.ones(samples)], axis=-1)
    J = np.repeat(basis, rows, axis=0) * np.tile([1.0, 0.5], samples)[:, None]
    truth = np.array([0.3, -0.2, 0.5])
    covered = {"sandwich": np.zeros(3), "plain": np.zeros(3)}
    ratio = []
    for _ in range(draws):
        noise = _ar1(rng, rho, (samples, rows)) * np.sqrt(1.0 - rho**2)
        y = J @ truth + 0.1 * noise.reshape(-1)
        est, *_ = np.linalg.lstsq(J, y, rcond=None)
        r = y - J @ est
        sandwich = sandwich_covariance(J, r, rows)
        plain = np.linalg.inv(J.T @ J) * (r @ r) / (r.size - 3)
        ratio.append(np.sqrt(np.diag(sandwich) / np.diag(plain)))
        for name, cov in (("sandwich", sandwich), ("plain", plain)):
            covered[name] += np.abs(est - truth) <= 1.96 * np.sqrt(np.diag(cov))
    assert np.all(np.abs(np.mean(ratio, axis=0) - 3.0) < 0.45)
    assert (covered["sandwich"] / draws).min() >= 0.87
    assert (covered["plain"] / draws).max() < 0.7


def test_a_prior_bounds_the_sandwich_and_the_floor_keeps_correlations() -> None:
    rng = np.random.default_rng(5)
    J = rng.normal(size=(40, 2))
    J[:, 1] *= 1e-6  # the data barely see the second parameter
    r = rng.normal(size=40)
    P = np.diag([0.0, 4.0])  # prior σ 0.5 on it
    cov = sandwich_covariance(J, r, 1, prior_precision=P)
    assert np.sqrt(cov[1, 1]) <= 0.5 + 1e-9
    floor = np.diag([4.0 * cov[0, 0], cov[1, 1] / 4.0])
    widened = with_floor(cov, floor)
    assert np.isclose(widened[0, 0], floor[0, 0])
    assert np.isclose(widened[1, 1], cov[1, 1])
    corr = cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1])
    assert np.isclose(widened[0, 1] / np.sqrt(widened[0, 0] * widened[1, 1]), corr)
