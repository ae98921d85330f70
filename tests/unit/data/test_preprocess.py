"""Zero-phase filtering, finite differences, segmentation and downsampling."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.data import PreprocessError, Trajectory
from dynid.data.preprocess import (
    accelerations,
    differentiate,
    downsample,
    excitation,
    filter_trajectory,
    filtered_motion,
    lowpass,
    segment_by_excitation,
    segment_by_motion,
    split_windows,
    uniform_step,
    with_velocities,
)


def test_lowpass_is_zero_phase_and_removes_noise() -> None:
    dt = 0.001
    t = np.arange(4000) * dt
    clean = np.sin(2 * np.pi * 1.0 * t)
    noisy = clean + 0.3 * np.sin(2 * np.pi * 150.0 * t)
    out = lowpass(noisy[:, None], dt, 10.0)[:, 0]
    inner = slice(500, -500)
    # 1 Hz passes with no lag (a causal 2nd-order filter at 10 Hz would lag by ~20 ms)
    np.testing.assert_allclose(out[inner], clean[inner], atol=2e-3)
    lag = np.argmax(np.correlate(out[inner], clean[inner], "full")) - (out[inner].size - 1)
    assert lag == 0
    with pytest.raises(PreprocessError, match="Nyquist"):
        lowpass(noisy, dt, 600.0)


@pytest.mark.parametrize(("samples", "cutoff_hz", "fs"), [(20001, 10.0, 1000.0), (40, 4.0, 100.0)])
def test_lowpass_is_the_butterworth_forward_backward_filter_of_scipy(
    samples: int, cutoff_hz: float, fs: float
) -> None:
    """The same filter as ``scipy.signal``'s second-order Butterworth run by ``sosfiltfilt``
    with odd padding over three periods of the cut-off (no longer than the signal)."""
    from scipy import signal

    x = np.cumsum(np.random.default_rng(2).normal(size=(samples, 3, 2)), axis=0) + 4.0
    sos = signal.butter(2, cutoff_hz, btype="low", fs=fs, output="sos")
    pad = min(max(9, int(3.0 * fs / cutoff_hz)), samples - 1)
    expected = signal.sosfiltfilt(sos, x, axis=0, padlen=pad)
    np.testing.assert_allclose(lowpass(x, 1.0 / fs, cutoff_hz), expected, rtol=1e-11, atol=1e-11)


def test_differences_are_exact_on_polynomials() -> None:
    t = np.cumsum(np.random.default_rng(0).uniform(0.005, 0.015, size=50))
    x = np.stack([3.0 * t - 1.0, t**2], axis=1)
    central = differentiate(x, t, "central")
    np.testing.assert_allclose(central[:, 0], 3.0, atol=1e-10)
    np.testing.assert_allclose(central[:, 1], 2 * t, atol=1e-9)  # exact for quadratics
    backward = differentiate(x, t, "backward")
    np.testing.assert_allclose(backward[1:, 1], t[1:] + t[:-1], atol=1e-12)
    forward = differentiate(x, t, "forward")
    np.testing.assert_allclose(forward[:-1, 1], t[1:] + t[:-1], atol=1e-12)
    with pytest.raises(PreprocessError, match="unknown method"):
        differentiate(x, t, "spline")  # type: ignore[arg-type]


def _swing(T: int = 1000, dt: float = 0.002) -> Trajectory:
    t = np.arange(T) * dt
    rng = np.random.default_rng(1)
    q = np.stack([np.sin(2 * t), 0.5 * np.cos(3 * t)], axis=1)
    return Trajectory(t=t, q=q + 1e-4 * rng.normal(size=q.shape), joint_names=["a", "b"])


def test_velocities_and_accelerations_from_filtered_positions() -> None:
    traj = _swing()
    out = with_velocities(traj, cutoff_hz=5.0)
    inner = slice(100, -100)
    np.testing.assert_allclose(out.dq[inner, 0], 2 * np.cos(2 * traj.t[inner]), atol=5e-3)
    acc = accelerations(out, cutoff_hz=5.0)
    inner = slice(200, -200)  # differentiating twice widens the edge transients
    np.testing.assert_allclose(acc[inner, 1], -4.5 * np.cos(3 * traj.t[inner]), atol=5e-2)


def test_filter_keeps_quaternions_unit_and_requires_uniform_grid() -> None:
    traj = _swing()
    angle = traj.t
    quat = np.stack([0 * angle, 0 * angle, np.sin(angle / 2), np.cos(angle / 2)], axis=1)
    quat[::2] *= -1  # sign flips of the same rotation must not be averaged away
    with_obs = traj.replace(obs=quat, obs_names=["b/qx", "b/qy", "b/qz", "b/qw"])
    out = filter_trajectory(with_obs, 20.0)
    np.testing.assert_allclose(np.linalg.norm(out.obs, axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(np.abs(out.obs[50:-50, 2]), np.sin(angle[50:-50] / 2), atol=1e-4)
    bent = traj.replace(t=traj.t + 1e-4 * traj.t**2)
    with pytest.raises(PreprocessError, match="not uniform"):
        uniform_step(bent.t)


def test_downsample_to_simulator_step() -> None:
    traj = _swing()
    out = downsample(traj, 0.01)
    np.testing.assert_allclose(np.diff(out.t), 0.01, atol=1e-12)
    assert out.t[-1] <= traj.t[-1]
    np.testing.assert_allclose(out.q[5:-5, 0], np.sin(2 * out.t[5:-5]), atol=2e-3)
    assert out.meta["downsampled_dt"] == 0.01


def test_segment_by_motion_and_excitation() -> None:
    dt = 0.01
    t = np.arange(1000) * dt
    q = np.zeros((1000, 2))
    moving = (t >= 2.0) & (t < 4.0)
    q[moving, 0] = np.sin(np.pi * (t[moving] - 2.0))  # continuous, turning point at 3 s
    q[(t >= 6.0) & (t < 6.1), 1] = 0.01 * np.arange(10)  # a twitch, too short
    traj = Trajectory(t=t, q=q, joint_names=["a", "b"])
    parts = segment_by_motion(traj, speed_threshold=0.05, min_duration=0.5)
    assert len(parts) == 1
    assert parts[0].t[0] == pytest.approx(2.0, abs=0.02)
    assert parts[0].t[-1] == pytest.approx(4.0, abs=0.05)
    padded = segment_by_motion(traj, speed_threshold=0.05, min_duration=0.5, pad=0.2)
    assert padded[0].t[0] == pytest.approx(1.8, abs=0.02)
    # joint b never moves in the long stretch: joint a alone is not "excited" for both joints
    starts, scores = excitation(traj, 1.0)
    assert starts.size == 9  # full 1 s windows within [0, 9.99] s
    assert scores.max() < 1e-3
    both = traj.replace(q=q + np.stack([0 * t, 0.2 * np.sin(2 * np.pi * t) * moving], axis=1))
    excited = segment_by_excitation(both, window=1.0, min_score=0.1)
    assert len(excited) == 1
    assert excited[0].t[0] == pytest.approx(2.0)
    assert excited[0].t[-1] == pytest.approx(4.0)


def test_split_windows() -> None:
    traj = _swing(T=501, dt=0.01)
    windows = split_windows(traj, 1.0)
    assert len(windows) == 5
    assert all(w.num_samples == 101 for w in windows)
    assert windows[1].t[0] == windows[0].t[-1]


def test_filtered_motion_gives_derivatives_on_the_trimmed_thinned_grid() -> None:
    t = np.arange(2001) * 1e-3
    w = 2 * np.pi * 0.7
    q = np.sin(w * t)[:, None]
    traj = Trajectory(t=t, q=q, joint_names=["j"], dq=np.full_like(q, 99.0), effort=3 * q)
    smooth, a, _ = filtered_motion(traj, 20.0, trim_s=0.1, stride=10, measured_velocities=False)
    assert smooth.num_samples == len(range(100, 1901, 10))
    np.testing.assert_allclose(smooth.t, t[100:1901:10])
    np.testing.assert_allclose(smooth.dq[:, 0], w * np.cos(w * smooth.t), atol=1e-4)
    np.testing.assert_allclose(a[:, 0], -(w**2) * np.sin(w * smooth.t), rtol=1e-3, atol=5e-3)
    np.testing.assert_allclose(smooth.effort, 3 * smooth.q, atol=1e-12)
    measured, _, _ = filtered_motion(traj, 20.0, trim_s=0.1)
    assert np.allclose(measured.dq, 99.0)  # the recorded velocities, low-passed


def test_effort_delay_matches_a_torque_held_over_each_step() -> None:
    # a unit mass driven by a brisk torque held over each 1 ms step (semi-implicit Euler, as a
    # simulator steps it): the centrally differenced acceleration at a sample is the mean of the
    # steps before and after it, half a step behind the torque stamped there
    dt = 1e-3
    t = np.arange(3001) * dt
    tau = 40.0 * np.sin(2 * np.pi * 3.0 * t)[:, None]
    v = np.concatenate([[0.0], np.cumsum(tau[:-1, 0] * dt)])[:, None]
    q = np.concatenate([[0.0], np.cumsum(v[1:, 0] * dt)])[:, None]
    traj = Trajectory(t=t, q=q, dq=v, effort=tau, joint_names=["j"])

    def worst(delay: float) -> float:
        smooth, a, _ = filtered_motion(traj, 40.0, trim_s=0.2, effort_delay=delay)
        return float(np.abs(smooth.effort - a).max())

    assert worst(0.0) > 0.3  # ≈ the torque's rate × dt/2 = 40 · 6π · 5e-4
    assert worst(dt / 2) < 0.02 * worst(0.0)
    with pytest.raises(PreprocessError, match="effort_delay"):
        filtered_motion(traj, 40.0, trim_s=0.01, effort_delay=0.02)


def test_the_dry_friction_direction_is_filtered_like_the_efforts() -> None:
    # efforts that are only dry friction c tanh(v/ε) of a joint reversing twice a second: the
    # low-pass spreads each step over tens of ms, where the filtered velocity is far from zero
    t = np.arange(4001) * 1e-3
    v = (0.5 * np.sin(2 * np.pi * 1.0 * t))[:, None]
    q = np.cumsum(v, axis=0) * 1e-3
    c, eps = 2.0, 0.01
    traj = Trajectory(t=t, q=q, dq=v, effort=c * np.tanh(v / eps), joint_names=["j"])
    smooth, _, direction = filtered_motion(traj, 10.0, trim_s=0.25, coulomb_smoothing=eps)
    np.testing.assert_allclose(smooth.effort, c * direction, atol=1e-12)
    naive = c * np.tanh(smooth.dq / eps)  # the step at the filtered velocity's reversal
    assert np.abs(smooth.effort - naive).max() > 0.5
    with pytest.raises(PreprocessError, match="coulomb_smoothing"):
        filtered_motion(traj, 10.0, trim_s=0.25, coulomb_smoothing=0.0)


@pytest.mark.parametrize("settings", [{"trim_s": 1.1}, {"stride": 0}, {"trim_s": -1.0}])
def test_filtered_motion_refuses_what_leaves_no_samples(settings) -> None:
    t = np.arange(2001) * 1e-3
    traj = Trajectory(t=t, q=np.sin(t)[:, None], joint_names=["j"])
    with pytest.raises(PreprocessError, match="filtered_motion"):
        filtered_motion(traj, 20.0, **settings)
