"""robot_tf: the robot's TF from joint states (forward kinematics of the dynid model) and mocap
poses, so every frame the estimator's markers name resolves to the fixed frame ``world`` in a
replay without robot_state_publisher.

The DDS test replays a bag and resolves each marker frame by composing the ``/tf`` and
``/tf_static`` transforms a listener received (tf2_ros's buffer is not assumed); robot_tf and the
listener run with ``tf2_msgs`` importable (the ``stand_in_env`` fixture builds a stand-in overlay
where the Python wheels lack it).
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import yaml
from node_helpers import ROOT, call_trigger, executable, output_of, ros_args, wait_for
from ros_helpers import PYTHON

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


def _resolves(edges: dict[str, str], frame: str, root: str) -> bool:
    """Whether ``frame`` reaches ``root`` through child -> parent ``edges``."""
    seen = set()
    while frame != root:
        if frame in seen or frame not in edges:
            return False
        seen.add(frame)
        frame = edges[frame]
    return True


# Collects child -> parent edges from /tf and /tf_static (static ones latched, as tf2 subscribes)
# until every frame named in argv resolves to world or 120 s pass, then prints the edges as JSON.
LISTENER = r"""
import json, sys, time
import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage

def resolves(edges, frame):
    seen = set()
    while frame != "world":
        if frame in seen or frame not in edges:
            return False
        seen.add(frame)
        frame = edges[frame]
    return True

rclpy.init()
node = rclpy.create_node("tf_listener")
edges = {}
def take(msg):
    edges.update({t.child_frame_id: t.header.frame_id for t in msg.transforms})
for topic, durability in (("/tf", DurabilityPolicy.VOLATILE),
                          ("/tf_static", DurabilityPolicy.TRANSIENT_LOCAL)):
    node.create_subscription(TFMessage, topic, take, QoSProfile(
        depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=durability))
deadline = time.monotonic() + 120.0
while time.monotonic() < deadline and not all(resolves(edges, f) for f in sys.argv[1:]):
    rclpy.spin_once(node, timeout_sec=0.05)
print("EDGES " + json.dumps(edges), flush=True)
"""


def test_replayed_panda_bag_puts_every_marker_frame_under_world(
    test_node, spawn, tmp_path, stand_in_env
) -> None:
    """A Panda bag replayed with robot_tf: a TF listener over DDS (in a process with
    ``tf2_msgs``) resolves every frame the estimator's markers name to ``world``."""
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
    }), env=stand_in_env)  # fmt: skip
    frames = sorted(_marker_frames("panda", ["box/weight1_x", "box/weight1_y", "link7/mass"]))
    links = [f"panda_link{i}" for i in range(8)]
    # the listener waits for the links too: the marker frames may resolve before the first
    # joint state's transforms arrive
    listener = spawn(PYTHON, "-c", LISTENER, *frames, *links, env=stand_in_env)
    wait_for(test_node, lambda: test_node.count_subscribers("/vicon/box/box") > 0,
             "robot_tf's subscriptions", node, 120.0)  # fmt: skip
    wait_for(test_node, lambda: test_node.count_subscribers("/tf") > 0,
             "the TF listener's subscription", listener, 60.0)  # fmt: skip
    assert call_trigger(test_node, "/bag_player/resume").success
    try:
        listener.wait(timeout=180.0)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the TF listener did not finish:\n{output_of(listener)}") from None
    lines = [x for x in output_of(listener).splitlines() if x.startswith("EDGES ")]
    assert lines, output_of(node)
    edges = json.loads(lines[-1].removeprefix("EDGES "))
    assert all(_resolves(edges, f, "world") for f in frames), (edges, output_of(node))
    assert player.poll() is None, output_of(player)
    assert all(_resolves(edges, link, "world") for link in links), edges
