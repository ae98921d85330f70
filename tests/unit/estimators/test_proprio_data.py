"""Loader of the real heavy-ball recording (proprio Sec. V-A)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dynid.data.errors import DataError
from dynid.data.open_manipulator_ball import SOURCE_TORQUE, load_heavy_ball


def _write(tmp_path, joint_q, start) -> None:
    (tmp_path / "real_joint_q.json").write_text(json.dumps({"joint_q": joint_q}))
    (tmp_path / "initial_state.json").write_text(json.dumps({"joint_q": start}))


def test_loader_maps_servo_angles_to_the_urdf(tmp_path) -> None:
    _write(tmp_path, [0.0, -0.1, -0.3], [0.1, 0.2, 2.0, 0.5, 1.0])
    rec = load_heavy_ball(tmp_path, dt=0.02, torque=-0.4)
    traj = rec.trajectory
    assert rec.joint == "joint3"
    assert rec.start_angle == pytest.approx(2.0 - math.pi / 2)
    np.testing.assert_allclose(traj.q[:, 0], rec.start_angle + np.array([0.0, -0.1, -0.3]))
    np.testing.assert_allclose(traj.t, [0.0, 0.02, 0.04])
    np.testing.assert_allclose(traj.command[:, 0], -0.4)
    assert traj.command_names == ["joint3/torque"]
    assert rec.locked_joints == {
        "joint1": 0.1,
        "joint2": 0.2,
        "joint4": 0.5,
        "gripper_left_joint": 0.0,
    }


def test_loader_errors_name_the_problem(tmp_path) -> None:
    _write(tmp_path, [0.0, "x"], [0.1, 0.2, 2.0, 0.5, 1.0])
    with pytest.raises(DataError, match=r"real_joint_q\.json"):
        load_heavy_ball(tmp_path)
    _write(tmp_path, [0.0, 0.1], [0.1, 0.2])
    with pytest.raises(DataError, match="expected 5"):
        load_heavy_ball(tmp_path)
    with pytest.raises(DataError, match="dt"):
        load_heavy_ball(tmp_path, dt=0.0)
    with pytest.raises(DataError, match="free joint"):
        load_heavy_ball(tmp_path, joint="gripper")


def test_real_recording_loads(shared_recording) -> None:
    shared_recording("open-manipulator-ball")
    rec = load_heavy_ball()
    traj = rec.trajectory
    assert traj.q.shape == (61, 1)
    assert traj.q[0, 0] == pytest.approx(rec.start_angle)
    assert float(traj.command[0, 0]) == SOURCE_TORQUE
    # The arm lifts (negative direction) by about 1.27 rad, then swings back.
    assert float(traj.q[:, 0].min() - rec.start_angle) == pytest.approx(-1.2711, abs=1e-3)
