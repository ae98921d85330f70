"""bag_player node over real DDS: paused start, resume, rate, remapping, selection, /clock, and a
corrupt bag."""

from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import PoseStamped
from node_helpers import call_trigger, collect, executable, output_of, ros_args, wait_for
from rcl_interfaces.msg import Log
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_helpers import spin_until
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from dynid.data import BagLayout, MocapTopic, Trajectory, write_bag
from dynid_ros import qos
from dynid_ros.conversions import stamp_ns

T0_NS = 1_750_000_000_000_000_000


def _bag(tmp_path):
    t = np.arange(101) * 0.01  # 1 s at 100 Hz
    q = np.stack([np.sin(t), np.cos(t)], axis=1)
    obs = np.zeros((t.size, 7))
    obs[:, 0] = t
    obs[:, 6] = 1.0
    traj = Trajectory(
        t=t, q=q, joint_names=["j1", "j2"], dq=np.cos(t)[:, None] * [1.0, -1.0],
        obs=obs, obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
        meta={"t0_ns": T0_NS},
    )  # fmt: skip
    layout = BagLayout(mocap=(MocapTopic("box", "/box_pose"),))
    return write_bag(traj, tmp_path / "replay", layout), traj


def test_paused_start_resume_rate_remap_selection_and_clock(test_node, spawn, tmp_path) -> None:
    bag, traj = _bag(tmp_path)
    proc = spawn(
        executable("bag_player"),
        *ros_args({
            "bag": str(bag), "rate": 2.0, "start_paused": True, "clock": True,
            "topics": ["/joint_states"], "remap": ["/joint_states:=/replayed/joint_states"],
        }),
    )  # fmt: skip
    states = collect(test_node, JointState, "/replayed/joint_states", qos.reliable(1000))
    poses = collect(test_node, PoseStamped, "/box_pose", qos.reliable(1000))
    clocks = collect(test_node, Clock, "/clock", qos.reliable(100))
    arrivals: list[float] = []
    test_node.create_subscription(
        JointState, "/replayed/joint_states", lambda _: arrivals.append(time.monotonic()),
        qos.reliable(1000),
    )  # fmt: skip
    wait_for(test_node, lambda: test_node.count_publishers("/replayed/joint_states") > 0,
             "the player's publisher", proc)  # fmt: skip
    assert not spin_until(test_node, lambda: bool(states), 1.0), "published while paused"
    assert call_trigger(test_node, "/bag_player/resume").success
    wait_for(test_node, lambda: len(states) == traj.num_samples, "all joint states", proc)
    got = np.array([m.position for m in states])
    np.testing.assert_array_equal(got, traj.q)
    stamps = np.array([stamp_ns(m.header.stamp) for m in states])
    np.testing.assert_array_equal(stamps, T0_NS + np.round(traj.t * 1e9).astype(np.int64))
    # 1 s of data at rate 2 lasts about 0.5 s: played with its timing, not in one burst
    assert arrivals[-1] - arrivals[0] > 0.3
    assert not poses, "an unselected topic was played"
    clock_ns = np.array([stamp_ns(c.clock) for c in clocks])
    assert clock_ns.size > 10
    assert np.all(np.diff(clock_ns) >= 0)
    assert clock_ns[0] >= T0_NS
    assert clock_ns[-1] <= stamps[-1]
    # after the last message the time stands at the bag's end: a late subscriber still hears it
    late = collect(test_node, Clock, "/clock", qos.reliable(10))
    wait_for(test_node, lambda: len(late) >= 3, "/clock after the end of the bag", proc)
    assert {stamp_ns(c.clock) for c in late} == {stamps[-1]}
    assert proc.poll() is None, output_of(proc)


def test_bad_parameters_stop_the_node_with_a_message(spawn, tmp_path) -> None:
    proc = spawn(executable("bag_player"), *ros_args({"bag": str(tmp_path / "missing")}))
    assert proc.wait(timeout=30) == 2
    assert "parameter 'bag'" in output_of(proc)
    bag, _ = _bag(tmp_path)
    proc = spawn(executable("bag_player"), *ros_args({"bag": str(bag), "remap": ["nonsense"]}))
    assert proc.wait(timeout=30) == 2
    assert "is not 'from:=to'" in output_of(proc)


def test_a_corrupt_bag_stops_playback_with_an_error_and_the_node_lives_on(
    test_node, spawn, tmp_path
) -> None:
    t = np.arange(2000) * 0.01
    traj = Trajectory(t=t, q=np.sin(t)[:, None], joint_names=["j"], meta={"t0_ns": T0_NS})
    bag = write_bag(traj, tmp_path / "corrupt")
    (data_file,) = [f for f in bag.iterdir() if f.suffix == ".mcap"]
    data = bytearray(data_file.read_bytes())
    third = len(data) // 3
    data[third : third + 4000] = b"\xff" * 4000  # a chunk overwritten, the index left intact
    data_file.write_bytes(bytes(data))
    rosout = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)  # fmt: skip
    logs = collect(test_node, Log, "/rosout", rosout)
    proc = spawn(executable("bag_player"),
                 *ros_args({"bag": str(bag), "rate": 20.0, "start_paused": True}))  # fmt: skip
    assert call_trigger(test_node, "/bag_player/resume").success
    wait_for(test_node, lambda: any("playback stopped" in log.msg for log in logs),
             "the playback error on /rosout", proc)  # fmt: skip
    stopped = [log.msg for log in logs if "playback stopped" in log.msg]
    assert str(bag) in stopped[0]
    assert "truncated or corrupt" in stopped[0]
    assert call_trigger(test_node, "/bag_player/pause").success  # the node still serves
    assert proc.poll() is None, output_of(proc)
