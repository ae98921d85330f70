"""Robot loading: URDF sources, joint tables, locking, and errors that name the bad item."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from dynid.model.errors import (
    ModelError,
    UnknownFrameError,
    UnknownJointError,
    UnsupportedJointError,
    UrdfError,
)
from dynid.model.robot import JointKind, RobotModel, available_robots, load_robot, urdf_path

TWO_LINK = """<robot name="two">
  <link name="base"/>
  <joint name="j1" type="{j1_type}">
    <parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <link name="l1">{l1_inertial}</link>
  <joint name="j2" type="prismatic">
    <parent link="l1"/><child link="l2"/>
    <origin xyz="0.2 0 0"/><axis xyz="0.6 0.8 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <link name="l2">
    <inertial><origin xyz="0.1 0 0"/><mass value="2"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
  </link>
</robot>"""
INERTIAL = (
    '<inertial><mass value="1"/>'
    '<inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>'
)


def two_link(j1_type: str = "revolute", l1_inertial: str = INERTIAL) -> str:
    return TWO_LINK.format(j1_type=j1_type, l1_inertial=l1_inertial)


def test_known_robots_load_with_expected_tables() -> None:
    assert available_robots() == [
        "double_pendulum",
        "furuta",
        "open_manipulator_x",
        "panda",
        "planar_dice",
    ]
    panda = load_robot("panda")
    assert panda.nq == panda.nv == 7
    assert panda.joint_names == [f"panda_joint{i}" for i in range(1, 8)]
    assert panda.body_names[0] == "panda_link1"
    omx = load_robot("open_manipulator_x")
    assert omx.joint_names == ["joint1", "joint2", "joint3", "joint4", "gripper_left_joint"]
    assert omx.joint_kinds[-1] is JointKind.PRISMATIC
    masses = omx.nominal_inertia()[:, 0]
    # link2..link5 are moved by joint1..joint4; link5 also carries the fixed right finger
    np.testing.assert_allclose(masses[:3], [0.0984, 0.1385, 0.1327], atol=1e-4)
    np.testing.assert_allclose(masses[3], 0.1433 + 0.001, atol=1e-4)
    dp = load_robot("double_pendulum")
    np.testing.assert_allclose(dp.placement_translations[1], [0.0, 0.0, -1.5])
    assert load_robot("furuta").joint_names == ["arm_joint", "pendulum_joint"]


def test_xml_string_equals_file_and_continuous_becomes_revolute() -> None:
    path = urdf_path("double_pendulum.urdf")
    from_file = RobotModel.from_urdf(path)
    from_string = RobotModel.from_urdf(path.read_text())
    np.testing.assert_array_equal(from_file.nominal_inertia(), from_string.nominal_inertia())
    assert from_file.nq == 2  # continuous joints would be 2 coordinates each in Pinocchio
    assert all(j.shortname() == "JointModelRY" for j in list(from_file.model.joints)[1:])


def test_tables_match_pinocchio_and_gravity_is_set() -> None:
    robot = RobotModel.from_urdf(two_link(), gravity=(0.0, 1.0, -9.0))
    assert robot.joint_names == ["j1", "j2"]
    assert robot.body_names == ["l1", "l2"]
    assert robot.joint_kinds == [JointKind.REVOLUTE, JointKind.PRISMATIC]
    np.testing.assert_allclose(robot.joint_axes[1], [0.6, 0.8, 0.0])
    assert robot.parents.tolist() == [-1, 0]
    np.testing.assert_allclose(robot.model.gravity.linear, [0.0, 1.0, -9.0])
    assert robot.joint_index("j2") == 1
    assert robot.frame_id("l2") == robot.model.getFrameId("l2")
    np.testing.assert_allclose(robot.nominal_inertia()[1, :4], [2.0, 0.2, 0.0, 0.0])


def test_locking_joints_reduces_the_model() -> None:
    robot = RobotModel.from_urdf(two_link(), locked_joints={"j2": 0.3})
    assert robot.joint_names == ["j1"]
    # the locked prismatic body is merged into l1 at its locked position
    assert robot.nominal_inertia()[0, 0] == pytest.approx(3.0)
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, np.zeros(1))
    np.testing.assert_allclose(
        data.oMf[robot.frame_id("l2")].translation, [0.2 + 0.18, 0.24, 0.1], atol=1e-12
    )


@pytest.mark.parametrize(
    ("xml", "error", "needle"),
    [
        (two_link(j1_type="floating"), UnsupportedJointError, "'j1'"),
        (two_link(j1_type="planar"), UnsupportedJointError, "planar"),
        (two_link(l1_inertial=""), UrdfError, "'l1'"),
        ("<robot name='x'><link name='a'>", UrdfError, "well-formed"),
        ("<sdf/>", UrdfError, "<sdf>"),
        (
            '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaa">]><robot name="&a;"/>',
            UrdfError,
            "safe",
        ),
    ],
)
def test_bad_urdf_raises_error_naming_the_item(xml: str, error: type, needle: str) -> None:
    with pytest.raises(error, match=needle):
        RobotModel.from_urdf(xml)


def _inertial(mass: str = "1", inertia: str = "0.1 0 0 0.1 0 0.1", xyz: str = "0 0 0") -> str:
    names = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")  # fewer values leave attributes out
    attrs = " ".join(f'{a}="{v}"' for a, v in zip(names, inertia.split(), strict=False))
    return f'<inertial><origin xyz="{xyz}"/><mass value="{mass}"/><inertia {attrs}/></inertial>'


@pytest.mark.parametrize(
    ("inertial", "reason"),
    [
        (_inertial(mass="nan"), "mass value='nan' is not a finite number"),
        (_inertial(mass="nan7.9e-02"), "mass value='nan7.9e-02' is not a finite number"),
        (_inertial(mass="inf"), "mass value='inf' is not a finite number"),
        (_inertial(mass="-2"), "mass -2 kg is negative"),
        (_inertial(inertia="0.1 0 0 nan 0 0.1"), "inertia iyy='nan' is not a finite number"),
        (_inertial(inertia="0.1 0 0 0.1 0"), "inertia izz=None is not a finite number"),
        (_inertial(xyz="0 nan 0"), "origin xyz='0 nan 0' is not three finite numbers"),
        (_inertial(inertia="0.1 0 0 0.1 0 -0.1"), "inertia is not positive semi-definite"),
        (_inertial(inertia="0.1 0.2 0 0.1 0 0.1"), "inertia is not positive semi-definite"),
        (_inertial(inertia="0.1 0 0 0.1 0 0.5"), "violates the triangle inequality"),
        (_inertial(mass="0", inertia="0.1 0 0 0.1 0 0.1"), "mass is 0 kg but the inertia"),
        ('<inertial><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>',
         "has no <mass>"),
        ('<inertial><mass value="1"/></inertial>', "has no <inertia>"),
    ],
)  # fmt: skip
def test_unphysical_inertials_are_refused_naming_the_link(inertial: str, reason: str) -> None:
    """Pinocchio (urdfdom) drops an inertial it cannot parse with a warning and accepts negative
    masses; the model would be a different robot. Every inertial is checked before it."""
    with pytest.raises(UrdfError) as err:
        RobotModel.from_urdf(two_link(l1_inertial=inertial))
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("robot_description string: link 'l1': <inertial> ")
    assert reason in message


def test_physical_inertials_are_accepted() -> None:
    """Thin plates sit on the triangle inequality's bound (also when rounded), a point mass has
    zero inertia, and a massless frame (mass 0, no inertia) is no body at all."""
    plate = _inertial(inertia="0.0333 0 0 0.0833 0 0.1167")
    assert RobotModel.from_urdf(two_link(l1_inertial=plate)).nv == 2
    point = _inertial(inertia="0 0 0 0 0 0")
    assert RobotModel.from_urdf(two_link(l1_inertial=point)).nominal_inertia()[0, 0] == 1.0
    massless = _inertial(mass="0", inertia="0 0 0 0 0 0")
    xml = two_link().replace('<link name="base"/>', f'<link name="base">{massless}</link>')
    assert RobotModel.from_urdf(xml).nv == 2


def test_unknown_names_raise_model_errors() -> None:
    robot = RobotModel.from_urdf(two_link())
    with pytest.raises(UnknownJointError, match="'nope'"):
        robot.joint_index("nope")
    with pytest.raises(UnknownFrameError, match="'ghost'"):
        robot.frame_id("ghost")
    with pytest.raises(UnknownJointError, match="'j9'"):
        RobotModel.from_urdf(two_link(), locked_joints={"j9": 0.0})
    with pytest.raises(ModelError, match="unknown robot 'r2d2'"):
        load_robot("r2d2")
    with pytest.raises(UrdfError, match=r"missing\.urdf"):
        RobotModel.from_urdf("missing.urdf")


def test_mimic_joint_must_be_locked() -> None:
    head = '<joint name="j2" type="prismatic">'
    xml = two_link().replace(head, head + '<mimic joint="j1"/>')
    with pytest.raises(UnsupportedJointError, match="'j2'"):
        RobotModel.from_urdf(xml)
    assert RobotModel.from_urdf(xml, locked_joints={"j2": 0.0}).nv == 1


def test_replace_keeps_gravity_and_checks_names() -> None:
    robot = RobotModel.from_urdf(two_link(), gravity=(0.0, 0.0, -3.0))
    model = pin.Model(robot.model)
    other = robot.replace(model, ["j1", "j2"])
    np.testing.assert_allclose(other.gravity, [0.0, 0.0, -3.0])
    assert other.model is model
    with pytest.raises(UnknownJointError, match="do not match"):
        robot.replace(model, ["j2", "j1"])


def test_robot_urdf_is_the_file_load_robot_reads() -> None:
    from dynid.model.robot import robot_urdf

    for name in available_robots():
        path = robot_urdf(name)
        assert path.is_file()
        fingers = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
        robot = RobotModel.from_urdf(path, locked_joints=fingers if name == "panda" else None)
        assert robot.joint_names == load_robot(name).joint_names
    with pytest.raises(UrdfError, match="unknown robot 'nope'"):
        robot_urdf("nope")
