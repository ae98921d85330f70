"""IBM double-pendulum loader: angles from pixel geometry in the model's convention (App. II-B)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynid.data.ibm_pendulum import (
    IBM_RATE_HZ,
    IbmPendulumError,
    angles_from_pixels,
    ibm_pendulum_dir,
    load_ibm_pendulum,
)
from dynid.model.robot import load_robot


def _pixels(q: np.ndarray, l1: float = 600.0, l2: float = 460.0) -> np.ndarray:
    """Image coordinates (y down, gravity along +x) of pivot, elbow and tip for ``q [T, 2]``."""
    a1, a2 = q[:, 0], q[:, 0] + q[:, 1]
    x0, y0 = np.full_like(a1, 1200.0), np.full_like(a1, 1220.0)
    x1, y1 = x0 + l1 * np.cos(a1), y0 + l1 * np.sin(a1)  # image (x, y) = −world (z, x)
    return np.stack([x0, y0, x1, y1, x1 + l2 * np.cos(a2), y1 + l2 * np.sin(a2)], axis=1)


def test_angles_round_trip_and_unwrap(tmp_path) -> None:
    t = np.arange(800) / IBM_RATE_HZ
    q = np.stack([3.0 * np.sin(2.0 * t) + 0.2, 8.0 * t - 1.0], axis=1)  # passes ±π: unwrapped
    assert np.allclose(angles_from_pixels(_pixels(q)), q, atol=1e-9)
    path = tmp_path / "run.csv"
    np.savetxt(path, _pixels(q), delimiter=",")
    traj = load_ibm_pendulum(path, start=10, max_samples=500)
    assert traj.joint_names == ["joint1", "joint2"]
    assert traj.num_samples == 500
    assert np.allclose(np.diff(traj.t), 1.0 / IBM_RATE_HZ)
    assert np.allclose(traj.q, q[10:510], atol=1e-9)
    dq = np.stack([6.0 * np.cos(2.0 * t), np.full_like(t, 8.0)], axis=1)[10:510]
    assert np.allclose(traj.dq, dq, atol=2e-3)  # central differences, O(dt²)


def test_angles_match_the_model_kinematics() -> None:
    robot = load_robot("double_pendulum")
    data = robot.model.createData()
    q = np.array([[0.7, -1.1]])
    pin.forwardKinematics(robot.model, data, q[0])
    pin.updateFramePlacements(robot.model, data)
    elbow = data.oMf[robot.frame_id("joint2")].translation
    tip = data.oMf[robot.frame_id("tip")].translation
    pix = np.array([[0.0, 0.0, -elbow[2], -elbow[0], -tip[2], -tip[0]]])  # image (x, y) = −(z, x)
    assert np.allclose(angles_from_pixels(pix), q, atol=1e-12)


def test_real_recording_loads_when_present() -> None:
    try:
        path = ibm_pendulum_dir() / "0.csv"
    except FileNotFoundError:
        pytest.skip("real recordings not available")
    if not path.is_file():
        pytest.skip("IBM double-pendulum recordings not available")
    traj = load_ibm_pendulum(0, max_samples=400)
    assert traj.q.shape == (400, 2)
    assert np.isfinite(traj.dq).all()
    assert np.abs(np.diff(traj.q, axis=0)).max() < 0.5  # no 2π jumps


def test_real_runs_come_to_rest_hanging_at_zero() -> None:
    """Gravity points along image +x in these recordings: the runs end in small swings about
    q = 0 (reading image +y as down put that rest at q1 = −π/2)."""
    try:
        directory = ibm_pendulum_dir()
    except FileNotFoundError:
        pytest.skip("real recordings not available")
    if not (directory / "0.csv").is_file():
        pytest.skip("IBM double-pendulum recordings not available")

    def rest(run: int, joint: int) -> tuple[float, float]:
        """Circular mean angle and resultant length of ``q[joint]`` over the run's last 10 %."""
        q = load_ibm_pendulum(run).q
        mean = np.exp(1j * q[int(0.9 * q.shape[0]) :, joint]).mean()
        return float(np.angle(mean)), float(abs(mean))

    for run in (0, 5, 11, 17):  # the first link swings about hanging down
        angle, length = rest(run, 0)
        assert length > 0.85, (run, length)
        assert abs(angle) < 0.05, (run, angle)
    for run in (3, 16):  # runs whose second link has settled too
        angle, length = rest(run, 1)
        assert length > 0.85, (run, length)
        assert abs(angle) < 0.05, (run, angle)


def test_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(IbmPendulumError, match="not found"):
        load_ibm_pendulum(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,5,6\n7,8,9\n")
    with pytest.raises(IbmPendulumError, match="6 columns"):
        load_ibm_pendulum(bad)
    with pytest.raises(IbmPendulumError, match=r"\[T, 6\]"):
        angles_from_pixels(np.zeros((3, 4)))
