"""Observation functions against Pinocchio's frame placements."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.attachments import attach_universal_box
from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError, UnknownJointError
from dynid.model.observe import (
    AXIS_POINTS,
    FramePointObservation,
    FramePoseObservation,
    JointObservation,
    frame_points,
    frame_poses,
    joint_positions,
    rotation_to_quaternion,
)
from dynid.model.params import nominal_parameters
from dynid.model.robot import load_robot


@pytest.fixture(scope="module")
def panda_box():
    robot = attach_universal_box(load_robot("panda"), "panda_link8", damping=0.05)
    return robot, TorchDynamics(robot)


def _pin_placement(robot, q, frame):
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, q)
    return data.oMf[robot.frame_id(frame)]


def test_box_axis_points_match_pinocchio(panda_box):
    robot, dyn = panda_box
    p = nominal_parameters(robot)
    rng = np.random.default_rng(3)
    q = rng.uniform(-1.5, 1.5, (5, robot.nv))
    points = frame_points(dyn, p, torch.tensor(q), "box", AXIS_POINTS)
    assert points.shape == (5, 4, 3)
    for i in range(5):
        oMf = _pin_placement(robot, q[i], "box")
        expected = np.array([oMf.act(np.array(pt)) for pt in AXIS_POINTS])
        np.testing.assert_allclose(points[i].numpy(), expected, atol=1e-12)
    # the points are 1 m from the origin point
    distances = (points[:, 1:] - points[:, :1]).norm(dim=-1)
    torch.testing.assert_close(distances, torch.ones(5, 3, dtype=torch.float64))


def test_frame_poses_match_pinocchio(panda_box):
    robot, dyn = panda_box
    p = nominal_parameters(robot)
    rng = np.random.default_rng(4)
    q = rng.uniform(-2.0, 2.0, (2, 3, robot.nv))
    frames = ["box", "panda_hand", "box/weight1"]
    poses = frame_poses(dyn, p, torch.tensor(q), frames)
    assert poses.shape == (2, 3, 3, 7)
    for idx in np.ndindex(2, 3):
        for k, frame in enumerate(frames):
            oMf = _pin_placement(robot, q[idx], frame)
            quat = pin.Quaternion(oMf.rotation).coeffs()  # x, y, z, w
            quat = quat if quat[3] >= 0 else -quat
            np.testing.assert_allclose(poses[idx][k, :3].numpy(), oMf.translation, atol=1e-12)
            np.testing.assert_allclose(poses[idx][k, 3:].numpy(), quat, atol=1e-12)


def test_quaternion_of_every_pivot_case_and_its_gradient_is_finite():
    rng = np.random.default_rng(5)
    rotations = [pin.exp3(rng.normal(size=3)) for _ in range(20)]
    # rotations by ~π about each axis select the x, y and z pivots of Shepperd's method
    rotations += [pin.exp3(np.pi * 0.999 * np.eye(3)[i]) for i in range(3)]
    rotations.append(np.eye(3))
    R = torch.tensor(np.array(rotations), requires_grad=True)
    quat = rotation_to_quaternion(R)
    for k, rot in enumerate(rotations):
        expected = pin.Quaternion(rot).coeffs()
        expected = expected if expected[3] >= 0 else -expected
        np.testing.assert_allclose(quat[k].detach().numpy(), expected, atol=1e-12)
    quat.sum().backward()
    assert bool(torch.isfinite(R.grad).all())


def test_observation_models_name_their_columns(panda_box):
    robot, dyn = panda_box
    p = nominal_parameters(robot)
    q = torch.zeros(1, 2, robot.nv, dtype=torch.float64)
    v = torch.ones(1, 2, robot.nv, dtype=torch.float64)

    markers = FramePointObservation("box")
    assert markers.names[:3] == ["box/origin/x", "box/origin/y", "box/origin/z"]
    assert markers.names[-1] == "box/z_axis/z"
    assert markers(dyn, p, q, v).shape == (1, 2, 12)

    poses = FramePoseObservation(["box"])
    assert poses.names == [f"box/{f}" for f in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    assert poses(dyn, p, q, v).shape == (1, 2, 7)

    encoders = JointObservation(robot, ["panda_joint6", "box_joint_y"], velocities=True)
    assert encoders.names == [
        "panda_joint6/position",
        "box_joint_y/position",
        "panda_joint6/velocity",
        "box_joint_y/velocity",
    ]
    q_ramp = torch.arange(robot.nv, dtype=torch.float64).expand(1, 2, robot.nv)
    out = encoders(dyn, p, q_ramp, v)
    assert torch.equal(out[0, 0], torch.tensor([5.0, 8.0, 1.0, 1.0], dtype=torch.float64))


def test_bad_observation_inputs_raise_errors_naming_the_item(panda_box):
    robot, _ = panda_box
    with pytest.raises(UnknownJointError, match="elbow"):
        JointObservation(robot, ["elbow"])
    with pytest.raises(StateError, match="box"):
        FramePointObservation("box", [[0.0, 0.0]])
    with pytest.raises(StateError, match="out of range"):
        joint_positions(torch.zeros(1, 3), [4])
