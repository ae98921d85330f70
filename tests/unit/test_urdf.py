"""Identified parameters written into URDF XML read back as the same dynamics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from defusedxml.ElementTree import fromstring

from dynid.model.attachments import attach_payload, attach_universal_box
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import RobotModel, load_robot, urdf_path
from dynid.posterior import Posterior
from dynid.urdf import UrdfWriteError, apply_parameters


def _applied(robot: RobotModel, values: dict[str, float]):
    spec = ParameterSpec([Parameter(n, v - 1.0, v + 1.0) for n, v in values.items()])
    return spec.apply(robot, torch.tensor([list(values.values())], dtype=torch.float64))


def _pendulum_xml() -> str:
    return urdf_path("double_pendulum.urdf").read_text()


def test_link_and_joint_parameters_round_trip() -> None:
    robot = load_robot("double_pendulum")
    values = {
        "link1/mass": 1.7,
        "link1/com_z": -1.2,
        "link2/ixx": 1.5e-4,  # a rigid body: positive definite, A + B >= C
        "link2/iyz": 2e-5,
        "joint1/damping": 0.25,
        "joint2/coulomb": 0.05,
    }
    update = apply_parameters(_pendulum_xml(), values, robot)
    assert sorted(update.applied) == sorted(values)
    assert update.ignored == []
    reloaded = RobotModel.from_urdf(update.xml)
    expected = _applied(robot, values)
    np.testing.assert_allclose(reloaded.nominal_inertia(), expected.inertia[0].numpy(), atol=1e-10)
    assert reloaded.model.damping[0] == pytest.approx(0.25)
    assert reloaded.model.friction[1] == pytest.approx(0.05)


def test_length_moves_the_child_joint_and_log_cholesky_is_written() -> None:
    robot = load_robot("double_pendulum")
    lc = _applied(robot, {"link2/mass": 2.0})
    from dynid.model.spatial import log_cholesky_from_dynamic_params

    theta = log_cholesky_from_dynamic_params(lc.inertia[0, 1]).tolist()
    values = {"link1/length": 1.2, **{f"link2/log_cholesky_{k}": v for k, v in enumerate(theta)}}
    update = apply_parameters(_pendulum_xml(), values, robot)
    reloaded = RobotModel.from_urdf(update.xml)
    expected = _applied(robot, values)
    np.testing.assert_allclose(
        reloaded.placement_translations, expected.joint_translation[0].numpy(), atol=1e-12
    )
    np.testing.assert_allclose(reloaded.nominal_inertia(), expected.inertia[0].numpy(), atol=1e-10)
    assert reloaded.nominal_inertia()[1, 0] == pytest.approx(2.0)


def test_panda_box_adds_the_universal_joint_and_box() -> None:
    from dynid.model.robot import example_robot_data_urdf

    xml = example_robot_data_urdf("panda_description/urdf/panda.urdf").read_text()
    robot = attach_universal_box(
        load_robot("panda"), "panda_link8", weight_positions=[[-0.05, 0.0], [0.05, 0.0]]
    )
    values = {
        "box/weight1_x": -0.1,
        "box/weight1_y": 0.03,
        "box/weight2_x": 0.09,
        "box/weight2_y": -0.02,
        "panda_link7/mass": 1.2,
        "box_joint_x/damping": 0.05,
        "panda_joint1/armature": 0.1,
        "gravity/z": -9.7,
    }
    update = apply_parameters(xml, values, robot)
    assert set(update.ignored) == {"panda_joint1/armature", "gravity/z"}
    assert {"box", "box_joint_x", "box_joint_y"} <= set(update.added)
    locked = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
    reloaded = RobotModel.from_urdf(update.xml, locked_joints=locked)
    assert reloaded.joint_names == robot.joint_names
    expected = _applied(robot, {k: v for k, v in values.items() if k not in update.ignored})
    np.testing.assert_allclose(reloaded.nominal_inertia(), expected.inertia[0].numpy(), atol=1e-10)
    np.testing.assert_allclose(
        np.asarray(reloaded.model.damping), expected.damping[0].numpy(), atol=1e-12
    )
    np.testing.assert_allclose(
        reloaded.placement_translations, robot.placement_translations, atol=1e-12
    )


def test_payload_becomes_a_fixed_link() -> None:
    base = load_robot("double_pendulum")
    robot = attach_payload(base, "tip", mass=0.5, com=[0.0, 0.0, -0.05])
    values = {"payload/mass": 0.8, "payload/com_z": -0.1}
    update = apply_parameters(_pendulum_xml(), values, robot)
    assert {"payload", "payload_joint"} <= set(update.added)
    root = fromstring(update.xml)
    link = next(lk for lk in root.findall("link") if lk.get("name") == "payload")
    assert float(link.find("inertial/mass").get("value")) == pytest.approx(0.8)
    reloaded = RobotModel.from_urdf(update.xml)
    expected = _applied(robot, values)
    np.testing.assert_allclose(reloaded.nominal_inertia(), expected.inertia[0].numpy(), atol=1e-10)


def test_rotated_inertial_frames_are_rewritten_in_link_axes() -> None:
    xml = _pendulum_xml().replace(
        '<origin xyz="0 0 -1.5"/>', '<origin xyz="0 0 -1.5" rpy="0.3 0.2 0.1"/>'
    )
    robot = RobotModel.from_urdf(xml)
    update = apply_parameters(xml, {"link1/mass": 1.5}, robot)
    reloaded = RobotModel.from_urdf(update.xml)
    expected = _applied(robot, {"link1/mass": 1.5})
    np.testing.assert_allclose(reloaded.nominal_inertia(), expected.inertia[0].numpy(), atol=1e-10)
    assert 'rpy="0 0 0"' in update.xml


def test_errors_and_posterior_to_urdf() -> None:
    with pytest.raises(UrdfWriteError, match="well-formed"):
        apply_parameters("<robot", {"link1/mass": 1.0})
    with pytest.raises(UrdfWriteError, match="not finite"):
        apply_parameters(_pendulum_xml(), {"link1/mass": float("nan")})
    post = Posterior(particles=np.array([[1.4], [1.6]]), names=["link1/mass"], units=["kg"])
    xml = post.to_urdf(_pendulum_xml())
    assert RobotModel.from_urdf(xml).nominal_inertia()[0, 0] == pytest.approx(1.5)


def test_a_body_lighter_than_its_fixed_links_moves_into_the_named_link() -> None:
    """The Panda's link-7 body carries the hand; an identified body of 0.4 kg (a recording
    without the hand) cannot keep the hand's 0.73 kg: link 7 takes the whole body."""
    robot = load_robot("panda")
    from dynid.model.robot import robot_urdf
    from dynid.model.spatial import log_cholesky_from_dynamic_params

    b = robot.body_names.index("panda_link7")
    identified = _applied(robot, {"panda_link7/mass": 0.4}).inertia[0, b]  # com, inertia as before
    theta = log_cholesky_from_dynamic_params(identified).tolist()
    values = {f"panda_link7/log_cholesky_{k}": v for k, v in enumerate(theta)}
    values["panda_joint7/coulomb"] = 0.2
    update = apply_parameters(robot_urdf("panda").read_text(), values, robot)
    assert any("panda_link7 takes the whole identified body" in n for n in update.notes)
    reloaded = RobotModel.from_urdf(
        update.xml, locked_joints={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
    )
    np.testing.assert_allclose(reloaded.nominal_inertia()[b], identified.numpy(), atol=1e-8)
    np.testing.assert_allclose(reloaded.nominal_inertia()[:b], robot.nominal_inertia()[:b])
    assert reloaded.model.friction[b] == pytest.approx(0.2)
    # a heavier body keeps the hand as it was and changes link 7 only
    heavier = _applied(robot, {"panda_link7/mass": 2.0}).inertia[0, b]
    theta = log_cholesky_from_dynamic_params(heavier).tolist()
    values = {f"panda_link7/log_cholesky_{k}": v for k, v in enumerate(theta)}
    update = apply_parameters(robot_urdf("panda").read_text(), values, robot)
    assert update.notes == []
    hand = fromstring(update.xml).find("link[@name='panda_hand']/inertial/mass")
    assert float(hand.get("value")) == pytest.approx(0.73)
