"""The tracker's parts: the state-variable filter, the inertial maps and projection, the
information-form least squares, the correlation time and the CUSUM."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
from scipy import signal

from dynid.online.filters import StateVariableFilter
from dynid.online.inertial import (
    frame_to_joint,
    linear_from_physical,
    physical_from_linear,
    project_consistent,
    pseudo_inertia,
)
from dynid.online.information import InformationLS
from dynid.online.residuals import CorrelationTime, Cusum, cusum_threshold


def test_the_filter_gives_the_derivatives_of_a_slow_signal_with_one_delay() -> None:
    dt, cutoff, w = 1e-3, 10.0, 2.0 * math.pi * 0.5
    svf = StateVariableFilter(dt, cutoff)
    t = np.arange(0.0, 4.0, dt)
    x = np.sin(w * t)[:, None]
    low, d1, d2 = svf.low(), svf.derivative(1), svf.derivative(2)
    tail = t > 2.0
    lag = t[tail] - svf.group_delay()
    assert np.allclose(low(x)[tail, 0], np.sin(w * lag), atol=2e-3)
    assert np.allclose(d1(x)[tail, 0], w * np.cos(w * lag), atol=2e-2)
    assert np.allclose(d2(x)[tail, 0], -(w**2) * np.sin(w * lag), atol=1e-1)


@pytest.mark.parametrize(("dt", "cutoff"), [(1e-3, 10.0), (2e-3, 200.0)])
def test_the_filter_is_the_bilinear_transform_of_the_butterworth_and_its_derivatives(
    dt: float, cutoff: float
) -> None:
    """``H``, ``s H`` and ``s² H`` at the pre-warped cut-off through ``scipy.signal.bilinear``."""
    svf = StateVariableFilter(dt, cutoff)
    w = 2.0 / dt * math.tan(math.pi * cutoff * dt)
    denominator = [1.0, math.sqrt(2.0) * w, w**2]
    for order, numerator in enumerate(([w**2], [w**2, 0.0], [w**2, 0.0, 0.0])):
        b, a = signal.bilinear(numerator, denominator, fs=1.0 / dt)
        f = svf.derivative(order)
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(f.a, a / a[0], rtol=1e-12)
        np.testing.assert_allclose(f.b / scale, b / a[0] / scale, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(svf.low().b, svf.derivative(0).b, rtol=0.0)


def test_the_filter_gives_the_same_output_in_blocks_as_in_one_pass() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 3))
    svf = StateVariableFilter(1e-3, 20.0)
    whole = svf.derivative(1)(x)
    blocked = svf.derivative(1)
    parts = np.concatenate([blocked(x[a : a + 7]) for a in range(0, 300, 7)])
    assert np.allclose(parts, whole, atol=1e-12)


def test_the_filter_refuses_a_cutoff_above_nyquist() -> None:
    with pytest.raises(ValueError, match="below Nyquist"):
        StateVariableFilter(1e-3, 600.0)


def test_the_frame_change_and_the_physical_map_agree_with_pinocchio() -> None:
    rng = np.random.default_rng(1)
    mass, com = 2.0, rng.uniform(-0.2, 0.2, 3)
    inertia = pin.Inertia(mass, com, np.diag([0.02, 0.03, 0.04]))
    rotation = pin.exp3(rng.uniform(-1.0, 1.0, 3))
    placement = pin.SE3(rotation, rng.uniform(-0.5, 0.5, 3))
    T = frame_to_joint(placement.rotation, placement.translation)
    moved = placement.act(inertia).toDynamicParameters()
    assert np.allclose(T @ inertia.toDynamicParameters(), moved, atol=1e-12)
    pi = inertia.toDynamicParameters()
    phi, jac = physical_from_linear(pi)
    assert phi[0] == pytest.approx(inertia.mass)
    assert np.allclose(phi[1:4], inertia.lever)
    assert np.allclose(linear_from_physical(phi), pi, atol=1e-12)
    step = 1e-7
    numeric = np.stack(
        [(physical_from_linear(pi + step * e)[0] - phi) / step for e in np.eye(10)], axis=1
    )
    assert np.allclose(jac, numeric, atol=1e-5)


def test_the_projection_makes_the_pseudo_inertia_positive_and_keeps_a_consistent_body() -> None:
    mass, (a, b, c) = 1.5, (0.1, 0.2, 0.3)  # a solid box (m)
    box = np.diag([b**2 + c**2, a**2 + c**2, a**2 + b**2]) * mass / 12.0
    pi = pin.Inertia(mass, np.array([0.1, -0.05, 0.2]), box).toDynamicParameters()
    same, moved = project_consistent(pi)
    assert not moved
    assert np.array_equal(same, pi)
    bad = pi.copy()
    bad[4] = -abs(bad[4]) - 1.0  # I_xx < 0: no body has it
    assert np.linalg.eigvalsh(pseudo_inertia(bad)).min() < 0
    fixed, moved = project_consistent(bad)
    assert moved
    assert np.linalg.eigvalsh(pseudo_inertia(fixed)).min() > -1e-12


def test_without_forgetting_the_information_form_is_the_batch_bayesian_solution() -> None:
    rng = np.random.default_rng(3)
    p, c, b = 4, 2, 200
    theta = rng.standard_normal(p)
    Y = rng.standard_normal((b, c, p))
    y = Y @ theta + 0.1 * rng.standard_normal((b, c))
    prior_mean, prior_cov = np.zeros(p), np.eye(p)
    ls = InformationLS(prior_mean, prior_cov, np.array([0.1, 0.1]), 1e9, 1.0)
    for a in range(0, b, 30):
        ls.add(Y[a : a + 30], y[a : a + 30])
    ls.solve(1.0)
    A = Y.reshape(-1, p) / 0.1
    info = np.eye(p) + A.T @ A
    mean = np.linalg.solve(info, A.T @ (y.reshape(-1) / 0.1))
    assert np.allclose(ls.mean, mean, atol=1e-6)
    assert np.allclose(ls.covariance(), np.linalg.inv(info), atol=1e-9)


def test_forgetting_follows_a_parameter_that_moved_and_the_prior_stays() -> None:
    rng = np.random.default_rng(4)
    Y = rng.standard_normal((4000, 1, 2))
    means = []
    for forgetting in (math.exp(-1 / 300), 1.0):
        ls = InformationLS(np.zeros(2), np.eye(2), np.array([0.01]), 10.0, forgetting)
        ls.add(Y[:2000], Y[:2000] @ np.array([1.0, 2.0]))
        ls.add(Y[2000:], Y[2000:] @ np.array([-1.0, 0.5]))
        ls.solve(1.0)
        means.append(ls.mean)
    assert np.allclose(means[0], [-1.0, 0.5], atol=1e-2)  # e^(-2000/300) of the old data left
    assert np.abs(means[1] - [-1.0, 0.5]).max() > 0.5
    unexcited = InformationLS(np.array([0.3, 0.0]), np.eye(2), np.array([0.01]), 10.0, 0.99)
    rows = np.zeros((500, 1, 2))
    rows[:, 0, 1] = 1.0  # only the second parameter is seen
    unexcited.add(rows, np.full((500, 1), 2.0))
    unexcited.solve(1.0)
    assert unexcited.mean[0] == pytest.approx(0.3)
    assert unexcited.covariance()[0, 0] == pytest.approx(1.0)


def test_the_correlation_time_of_an_ar1_sequence() -> None:
    rng = np.random.default_rng(5)
    phi, n = 0.8, 200_000
    e = np.empty((n, 2))
    e[0] = rng.standard_normal(2)
    for i in range(1, n):
        e[i] = phi * e[i - 1] + math.sqrt(1 - phi**2) * rng.standard_normal(2)
    corr = CorrelationTime(lags=60, forgetting=1.0 - 1e-6, floor=np.eye(61)[0], stride=3)
    for a in range(0, n, 1000):
        corr.add(e[a : a + 1000])
    assert np.allclose(corr.kappa(), (1 + phi) / (1 - phi), rtol=0.1)
    m = 50
    block_means = e[: n - n % m].reshape(-1, m, 2).mean(axis=1)
    assert np.allclose(corr.mean_variance(m), block_means.var(axis=0), rtol=0.15)
    floored = CorrelationTime(lags=60, forgetting=1.0 - 1e-6, floor=np.full(61, 0.5), stride=3)
    floored.add(e[:5000])
    assert np.allclose(floored.kappa(), 61.0)  # 1 + 2 · 60 · 0.5 > the measured 9


def test_the_cusum_threshold_gives_the_asked_run_length() -> None:
    h = cusum_threshold(1.0, 1e6)
    x = 2.0 * (h + 1.166)
    assert (math.exp(x) - x - 1.0) / 2.0 == pytest.approx(1e6, rel=1e-6)
    assert cusum_threshold(1.0, 1e8) > h


def test_the_cusum_finds_a_shift_and_its_start() -> None:
    rng = np.random.default_rng(6)
    cusum = Cusum(3, drift=1.0, threshold=cusum_threshold(1.0, 1e6))
    alarm = None
    for k in range(400):
        z = rng.standard_normal(3)
        if k >= 300:
            z[1] -= 4.0
        alarm = cusum.add(z, float(k))
        if alarm is not None:
            break
    assert alarm is not None
    channel, onset, statistic = alarm
    assert channel == 1
    assert 300 <= k <= 305
    assert 295 <= onset < 300 + 1
    assert statistic > cusum.threshold
