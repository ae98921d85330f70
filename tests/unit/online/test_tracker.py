"""The payload tracker on MuJoCo streams: it converges to the true payload within the issue's
accuracy, detects a release quickly and nothing on steady motion, its σ covers the truth, and it
refuses bad samples with a clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dynid.data import Trajectory
from dynid.online import PayloadTracker, SampleError, TrackerError, TrackerSettings
from dynid.problem_file import read_problem_file
from dynid.sim.mujoco import panda_payload

ROOT = Path(__file__).resolve().parents[3]
PROBLEM = ROOT / "config" / "problems" / "panda_payload_track.yaml"
RELEASE = 6.0  # s
PERIOD = 0.02  # s: 50 Hz updates


@pytest.fixture(scope="module")
def problem():
    return read_problem_file(PROBLEM)


@pytest.fixture(scope="module")
def release() -> tuple[Trajectory, dict]:
    """10 s at 1 kHz, the default payload (1.2 kg) released at 6 s."""
    dataset, truth = panda_payload.simulate(0, duration=10.0, release_time=RELEASE)
    return dataset.trajectories[0], truth


@pytest.fixture(scope="module")
def steady() -> tuple[Trajectory, dict]:
    """15 s at 1 kHz of other motion with a drawn payload, no change."""
    dataset, truth = panda_payload.simulate(3, duration=15.0, draw_payload=True)
    return dataset.trajectories[0], truth


def _run(problem, traj: Trajectory, **settings):
    tracker = PayloadTracker.from_problem(problem, 1e-3, TrackerSettings(**settings))
    return tracker, tracker.track(traj.t, traj.q, traj.effort, period=PERIOD)


def _truth_values(tracker: PayloadTracker, truth: dict) -> np.ndarray:
    return np.array([truth["parameters"][n] for n in tracker.names])


def _within(values: np.ndarray, mass: float, com: np.ndarray) -> np.ndarray:
    """Mass within 1 % and centre of mass within 5 mm (every axis), per update."""
    return (np.abs(values[:, 0] - mass) <= 0.01 * mass) & (
        np.abs(values[:, 1:4] - com).max(axis=1) <= 0.005
    )


def test_the_estimate_converges_within_5_s_and_stays(problem, steady) -> None:
    traj, truth = steady
    tracker, updates = _run(problem, traj)
    true = _truth_values(tracker, truth)
    times = np.array([u.estimate.time for u in updates])
    values = np.array([u.estimate.values for u in updates])
    ok = _within(values, true[0], true[1:4])
    assert ok[times >= 5.0].all(), f"first miss after 5 s at {times[(times >= 5) & ~ok][:1]}"
    assert not ok[0]  # the prior (1 kg) is not already the answer
    final = updates[-1].estimate
    assert "payload/mass" not in final.unexcited
    assert "payload/com_x" not in final.unexcited


def test_no_change_is_flagged_on_steady_motion(problem, steady) -> None:
    tracker, updates = _run(problem, steady[0])
    assert not any(u.detected for u in updates)
    assert tracker.events == []


def test_the_interval_covers_the_truth(problem, steady) -> None:
    traj, truth = steady
    tracker, updates = _run(problem, traj)
    true = _truth_values(tracker, truth)
    late = [u.estimate for u in updates if u.estimate.time > 2.0]
    values = np.array([e.values for e in late])
    std = np.array([e.std for e in late])
    inside = np.abs(values - true) <= 1.96 * std
    # mass and centre of mass, 95 % intervals: the share of one stream's updates is a correlated
    # time average (the benchmark measures coverage over streams); intervals not widened for the
    # residuals' correlation time hold far less of it
    assert inside[:, :4].mean(axis=0).min() >= 0.8
    # honest, not vacuous: the interval is narrow enough to meet the accuracy asked
    assert std[-1, 0] < 0.005 * true[0]
    assert std[-1, 1:4].max() < 0.0025


def test_a_release_is_detected_within_half_a_second_with_before_and_after(problem, release) -> None:
    traj, truth = release
    (change,) = truth["payload_changes"]
    assert change == {"time": RELEASE, "kind": "release"}
    tracker, updates = _run(problem, traj)
    detected = [e for u in updates for e in u.detected]
    assert len(detected) == 1, [(e.change_time, e.detect_time) for e in detected]
    event = detected[0]
    assert RELEASE <= event.detect_time <= RELEASE + 0.5
    assert RELEASE - 0.5 <= event.change_time <= event.detect_time
    true = _truth_values(tracker, truth)
    assert event.before.mass == pytest.approx(true[0], rel=0.01)
    assert np.abs(event.before.com - true[1:4]).max() < 0.005
    (done,) = tracker.events
    assert done.after is not None
    assert done.after.time >= event.detect_time + 2.0
    assert abs(done.after.mass) < 0.012  # released: 1 % of the 1.2 kg it carried
    assert "payload/com_x" in done.after.unexcited  # no mass, no centre of mass
    offsets = [n for n in tracker.names if n.endswith("torque_offset")]
    after = np.array([done.after.value(n) for n in offsets])
    assert np.abs(after - true[10:]).max() < 0.03  # the sensors' offsets survive the reset
    # (prior σ 0.5 N·m)


def test_sample_by_sample_updates_equal_the_recording_pass(problem, release) -> None:
    traj = release[0]
    n = 600
    one = PayloadTracker.from_problem(problem, 1e-3)
    streamed = []
    for i in range(n + 1):
        one.push(traj.t[i], traj.q[i], traj.effort[i])
        if i > 0 and i % 20 == 0:  # every 20 ms of stream time, the first after 0.020 s
            streamed.append(one.update().estimate)
    other = PayloadTracker.from_problem(problem, 1e-3)
    passed = other.track(traj.t[: n + 1], traj.q[: n + 1], traj.effort[: n + 1], period=PERIOD)
    assert len(passed) == len(streamed)
    for a, b in zip(streamed, passed, strict=True):
        assert a.time == b.estimate.time
        assert np.allclose(a.values, b.estimate.values, rtol=1e-9, atol=1e-12)


def test_bad_samples_are_refused_with_a_clear_error(problem) -> None:
    tracker = PayloadTracker.from_problem(problem, 1e-3)
    q, tau = np.zeros(7), np.zeros(7)
    with pytest.raises(SampleError, match="effort: expected 7 values per sample, got 6"):
        tracker.push(0.0, q, np.zeros(6))
    with pytest.raises(SampleError, match=r"position: non-finite value at t = 0\.0 s"):
        tracker.push(0.0, np.r_[np.nan, np.zeros(6)], tau)
    tracker.push(0.0, q, tau)
    with pytest.raises(SampleError, match=r"time 0\.0 s is not after the last"):
        tracker.push(0.0, q, tau)
    tracker.push(0.001, q, tau)  # the refused samples left nothing behind
    assert tracker.update().estimate.time == 0.001


def test_a_problem_freeing_other_parameters_is_refused(problem) -> None:
    mapping = dict(problem.mapping)
    mapping["parameters"] = [
        *mapping["parameters"],
        {"name": "panda_joint1/damping", "lower": 0.0, "upper": 1.0},
    ]
    other = read_problem_file({**mapping, "data": {**mapping["data"], "path": "x.mcap"}})
    with pytest.raises(TrackerError, match=r"also frees \['panda_joint1/damping'\]"):
        PayloadTracker.from_problem(other, 1e-3)


def test_settings_out_of_range_are_named() -> None:
    with pytest.raises(TrackerError, match="'change_rate' must be a number > 0"):
        TrackerSettings(change_rate=0.0)


def test_lost_samples_are_filled_and_a_long_gap_restarts_the_filters(problem, release) -> None:
    traj = release[0]
    n = 1500
    keep = np.ones(n, dtype=bool)
    keep[[300, 301, 302, 700]] = False  # lost messages: filled in
    full = PayloadTracker.from_problem(problem, 1e-3)
    full.push_block(traj.t[:n], traj.q[:n], traj.effort[:n])
    lossy = PayloadTracker.from_problem(problem, 1e-3)
    lossy.push_block(traj.t[:n][keep], traj.q[:n][keep], traj.effort[:n][keep])
    a, b = full.update().estimate, lossy.update().estimate
    assert b.samples == a.samples  # every grid point was used
    assert np.allclose(a.values[:4], b.values[:4], rtol=1e-3, atol=5e-4)  # 0.1 %, 0.5 mm
    keep[1000:1010] = False  # 10 ms: the filters restart and wait out their warm-up
    gapped = PayloadTracker.from_problem(problem, 1e-3)
    gapped.push_block(traj.t[:n][keep], traj.q[:n][keep], traj.effort[:n][keep])
    assert gapped.update().estimate.samples < a.samples - 100
