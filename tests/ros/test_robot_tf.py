"""robot_tf: the robot's TF from joint states (forward kinematics of the dynid model) and mocap
poses, so every frame the estimator's markers name resolves to the fixed frame ``world`` in a
replay without robot_state_publisher.

The DDS test needs ``tf2_msgs`` (a system ROS 2 install or the Docker image; the Python wheels
lack it); there it replays a bag and resolves each marker frame by composing the received
``/tf`` and ``/tf_static`` transforms (tf2_ros's buffer is not assumed either).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import yaml
from node_helpers import ROOT, call_trigger, executable, output_of, ros_args, wait_for
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from dynid.data import BagLayout, JointStateTopic, MocapTopic, Trajectory, write_bag
from dynid.model.robot import robot_urdf
from dynid.posterior import Posterior
from dynid_ros.conversions import posterior_markers
from dynid_ros.robot_tf import LinkTransforms

PANDA = [f"panda_joint{i}" for i in range(1, 8)]


def _marker_frames(robot: str, names: list[str]) -> set[str]:
    """Frames of the markers the estimator publishes with ``config/nodes/<robot>_estimator.yaml``
    for a posterior over ``names``."""
    config = yaml.safe_load((ROOT / "config" / "nodes" / f"{robot}_estimator.yaml").read_text())
    node = config["estimator"]["ros__parameters"]
    frames = dict(entry.split(":", 1) for entry in node["marker_frames"])
    post = Posterior(particles=np.zeros((2, len(names))), names=names, units=["m"] * len(names))
    markers = posterior_markers(post, stamp=None, frames=frames,
                                scatter_frame=node["scatter_frame"])  # fmt: skip
    return {m.header.frame_id for m in markers.markers}


def test_joint1_of_the_open_manipulator_turns_its_links_about_the_vertical() -> None:
    """Forward kinematics: turning the base joint by θ turns every link above it by θ about the
    vertical axis through the base joint, heights unchanged; links below it do not move."""
    tf = LinkTransforms(robot_urdf("open_manipulator_x").read_text())
    names = ["joint1", "joint2", "joint3", "joint4"]
    rest = {c: xyz for _, c, xyz, _ in tf(names, [0.0, 0.3, -0.2, 0.4])}
    theta = 0.7
    turned = {c: xyz for _, c, xyz, _ in tf(names, [theta, 0.3, -0.2, 0.4])}
    still = [c for c in rest if np.allclose(rest[c], turned[c])]
    assert "link1" in still
    assert "end_effector_link" not in still
    pivot = rest["link2"]  # joint1's child: on the axis
    c, s = np.cos(theta), np.sin(theta)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    for link in ("link3", "link5", "end_effector_link"):
        np.testing.assert_allclose(turned[link], pivot + rz @ (rest[link] - pivot), atol=1e-12)
    with pytest.raises(ValueError, match="joint2"):
        tf(names, [0.0, float("nan"), 0.0, 0.0])


def test_a_continuous_joint_turns_by_its_angle() -> None:
    """A continuous joint (two configuration entries in Pinocchio: cos, sin) takes the angle of
    the joint state; a fixed child link follows it."""
    urdf = """<robot name="c"><link name="base"/><link name="arm"/><link name="tip"/>
      <joint name="j" type="continuous"><parent link="base"/><child link="arm"/>
        <origin xyz="1 0 0"/><axis xyz="0 0 1"/></joint>
      <joint name="f" type="fixed"><parent link="arm"/><child link="tip"/>
        <origin xyz="1 0 0"/></joint></robot>"""
    tf = LinkTransforms(urdf)
    assert tf.joint_names == ["j"]
    poses = {child: (xyz, xyzw) for _, child, xyz, xyzw in tf(["j"], [np.pi / 2])}
    np.testing.assert_allclose(poses["tip"][0], [1.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(poses["arm"][1], [0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5)])


def test_every_marker_frame_of_the_robot_configs_is_a_link_or_a_published_frame() -> None:
    """The estimator's marker frames for each robot are frames robot_tf publishes: the payload's
    ``end_effector_link`` (a link), the box (a mocap frame of the Panda replay) and the
    scatter frame (static)."""
    omx = LinkTransforms(robot_urdf("open_manipulator_x").read_text())
    frames = _marker_frames("open_manipulator_x", ["payload/com_x", "payload/com_y",
                                                   "payload/mass"])  # fmt: skip
    assert frames == {"end_effector_link", "dynid_parameters"}
    assert "end_effector_link" in omx.links
    frames = _marker_frames("panda", ["box/weight1_x", "box/weight1_y", "link7/mass"])
    assert frames == {"box", "dynid_parameters"}


def _tf_qos(static: bool) -> QoSProfile:
    durability = DurabilityPolicy.TRANSIENT_LOCAL if static else DurabilityPolicy.VOLATILE
    return QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=durability)


def _resolves(edges: dict[str, str], frame: str, root: str) -> bool:
    """Whether ``frame`` reaches ``root`` through child -> parent ``edges``."""
    seen = set()
    while frame != root:
        if frame in seen or frame not in edges:
            return False
        seen.add(frame)
        frame = edges[frame]
    return True


NO_TF2_MSGS = importlib.util.find_spec("tf2_msgs") is None


@pytest.mark.skipif(NO_TF2_MSGS, reason="needs tf2_msgs (a system ROS 2 install or the image)")
def test_replayed_panda_bag_puts_every_marker_frame_under_world(test_node, spawn, tmp_path):
    from tf2_msgs.msg import TFMessage

    t = np.arange(101) * 0.01
    q = np.tile([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], (t.size, 1))
    q[:, 5] += 0.1 * np.sin(np.pi * t)
    pose = np.tile([0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0], (t.size, 1))
    traj = Trajectory(t=t, q=q, joint_names=PANDA, dq=np.gradient(q, t, axis=0), obs=pose,
                      obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
                      meta={"t0_ns": 1_700_000_000_000_000_000})  # fmt: skip
    layout = BagLayout(joint_states=JointStateTopic("/franka/joint_states"),
                       mocap=(MocapTopic("box", "/vicon/box/box",
                                         "geometry_msgs/msg/TransformStamped"),))  # fmt: skip
    bag = write_bag(traj, tmp_path / "panda_tf", layout)
    player = spawn(executable("bag_player"),
                   *ros_args({"bag": str(bag), "start_paused": True}))  # fmt: skip
    node = spawn(executable("robot_tf"), *ros_args({
        "robot": "panda", "joint_state_topic": "/franka/joint_states",
        "mocap_topics": ["/vicon/box/box"], "mocap_types": ["TransformStamped"],
        "mocap_frames": ["box"],
    }))  # fmt: skip
    edges: dict[str, str] = {}

    def take(msg: TFMessage) -> None:
        edges.update({t.child_frame_id: t.header.frame_id for t in msg.transforms})

    test_node.create_subscription(TFMessage, "/tf", take, _tf_qos(False))
    test_node.create_subscription(TFMessage, "/tf_static", take, _tf_qos(True))
    wait_for(test_node, lambda: test_node.count_subscribers("/vicon/box/box") > 0,
             "robot_tf's subscriptions", node, 120.0)  # fmt: skip
    assert call_trigger(test_node, "/bag_player/resume").success
    frames = _marker_frames("panda", ["box/weight1_x", "box/weight1_y", "link7/mass"])
    wait_for(test_node, lambda: all(_resolves(edges, f, "world") for f in frames),
             f"{sorted(frames)} under world in {edges}", node, 60.0)  # fmt: skip
    assert player.poll() is None, output_of(player)
    assert {f"panda_link{i}" for i in range(8)} <= edges.keys()
