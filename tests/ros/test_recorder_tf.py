"""recorder on ``/tf``: a mocap body looked up through a TF chain (static + dynamic edges).

The recorder and the TF publisher run with ``tf2_msgs`` importable (the ``stand_in_env`` fixture
builds a stand-in overlay where the Python wheels lack it), so the ``/tf`` path crosses real DDS
here too.
"""

from __future__ import annotations

import numpy as np
from node_helpers import call_trigger, collect, executable, output_of, ros_args, wait_for
from ros_helpers import PYTHON, spin_until

from dynid_msgs.msg import TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import segment_to_trajectory

# Publishes /tf_static (world -> base, 1 m along x) and /tf (base -> box moving along y) with
# /joint_states at 100 Hz, stamped with the wall clock, after the recorder has subscribed.
PUBLISHER = r"""
import math, time
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, QoSDurabilityPolicy, QoSReliabilityPolicy
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

rclpy.init()
node = Node("tf_test_publisher")
latched = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                     durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
static = node.create_publisher(TFMessage, "/tf_static", latched)
tf = node.create_publisher(TFMessage, "/tf", 100)
js = node.create_publisher(JointState, "/tf_test/joint_states", 100)

def transform(parent, child, stamp, x, y):
    t = TransformStamped()
    t.header.stamp, t.header.frame_id, t.child_frame_id = stamp, parent, child
    t.transform.translation.x, t.transform.translation.y = x, y
    t.transform.rotation.w = 1.0
    return t

static.publish(TFMessage(transforms=[transform("world", "base", node.get_clock().now().to_msg(),
                                               1.0, 0.0)]))
while tf.get_subscription_count() == 0 or js.get_subscription_count() == 0:
    rclpy.spin_once(node, timeout_sec=0.05)
for k in range(400):
    stamp = node.get_clock().now().to_msg()
    tf.publish(TFMessage(transforms=[transform("base", "box", stamp, 0.0, 0.01 * k)]))
    msg = JointState(name=["j1"], position=[0.001 * k], velocity=[0.1])
    msg.header.stamp = stamp
    js.publish(msg)
    time.sleep(0.01)
print("published", flush=True)
rclpy.spin(node)
"""


def test_mocap_body_from_a_tf_chain(test_node, spawn, tmp_path, stand_in_env) -> None:
    recorder = spawn(
        executable("recorder"),
        *ros_args({"joint_state_topic": "/tf_test/joint_states", "tf_frames": ["box"],
                   "world_frame": "world", "output_dir": str(tmp_path)}),
        env=stand_in_env,
    )  # fmt: skip
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    publisher = spawn(PYTHON, "-c", PUBLISHER, env=stand_in_env)
    wait_for(test_node, lambda: test_node.count_publishers("/tf") > 0, "tf publisher", publisher)
    for _ in range(100):
        if call_trigger(test_node, "/recorder/start").success:
            break
        spin_until(test_node, lambda: False, 0.1)
    else:
        raise AssertionError(f"segment never started:\n{output_of(recorder)}")
    spin_until(test_node, lambda: False, 1.5)
    stop = call_trigger(test_node, "/recorder/stop")
    assert stop.success, f"{stop.message}\n{output_of(recorder)}"
    wait_for(test_node, lambda: segments, "the segment", recorder)
    traj = segment_to_trajectory(segments[0])
    assert traj.obs_names == [f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    pos, quat = traj.pose("box")
    # world -> base (static, x = 1 m) composed with base -> box (y = 0.01 m per sample)
    np.testing.assert_allclose(pos[:, 0], 1.0)
    np.testing.assert_allclose(pos[:, 1], 10.0 * traj.q[:, 0], atol=1e-9)  # y = 0.01 k, q = 0.001 k
    np.testing.assert_allclose(quat, np.tile([0.0, 0.0, 0.0, 1.0], (traj.num_samples, 1)))
    assert recorder.poll() is None, output_of(recorder)
