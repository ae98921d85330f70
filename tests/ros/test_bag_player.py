"""bag_player node over real DDS: paused start, resume, rate, remapping, selection, /clock, a
corrupt bag, messages that cannot be played, and the shutdown."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from geometry_msgs.msg import PoseStamped
from node_helpers import call_trigger, collect, executable, output_of, ros_args, wait_for
from rcl_interfaces.msg import Log
from rclpy.context import Context
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_helpers import spin_until
from rosbags.rosbag2 import StoragePlugin, Writer
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from dynid.data import BagLayout, MocapTopic, Trajectory, write_bag
from dynid.data import messages as m
from dynid_ros import qos
from dynid_ros.bag_player import BagPlayer
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
    # rosbag2's naming: bag NAME is a folder NAME/ holding NAME_0.mcap; either form plays
    assert sorted(p.name for p in bag.iterdir()) == ["metadata.yaml", "replay_0.mcap"]
    proc = spawn(
        executable("bag_player"),
        *ros_args({
            "bag": str(bag / "replay_0.mcap"), "rate": 2.0, "start_paused": True, "clock": True,
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
    again = call_trigger(test_node, "/bag_player/resume")  # answered truthfully
    assert (again.success, again.message) == (False, "not paused: playing already")
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


def test_playback_waits_for_a_subscriber_of_the_topics_named(test_node, spawn, tmp_path):
    """``wait_for_subscribers``: nothing is played until the named topic has a subscriber (a
    launch file waits for the estimator so), then the whole bag."""
    bag, traj = _bag(tmp_path)
    player_params = {"bag": str(bag), "wait_for_subscribers": ["/late/listener"]}
    proc = spawn(executable("bag_player"), *ros_args(player_params))
    states = collect(test_node, JointState, "/joint_states", qos.reliable(1000))
    wait_for(test_node, lambda: test_node.count_publishers("/joint_states") > 0,
             "the player's publisher", proc)  # fmt: skip
    assert not spin_until(test_node, lambda: bool(states), 2.0), "played before the subscriber"
    test_node.create_subscription(String, "/late/listener", lambda _: None, qos.reliable(1))
    wait_for(test_node, lambda: len(states) == traj.num_samples, "all joint states", proc)
    assert "waiting for a subscriber on ['/late/listener']" in output_of(proc)


def test_bad_parameters_stop_the_node_with_a_message(spawn, tmp_path) -> None:
    proc = spawn(executable("bag_player"), *ros_args({"bag": str(tmp_path / "missing")}))
    assert proc.wait(timeout=30) == 2
    assert "parameter 'bag'" in output_of(proc)
    bag, _ = _bag(tmp_path)
    proc = spawn(executable("bag_player"), *ros_args({"bag": str(bag), "remap": ["nonsense"]}))
    assert proc.wait(timeout=30) == 2
    assert "is not 'from:=to'" in output_of(proc)


def _bag_without_crcs(path: Path, n: int) -> Path:
    """A bag as writers that compute no CRC leave it (``rosbags``): damage inside shows only
    while reading."""
    store = m.make_typestore()
    t = store.types
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", m.JOINT_STATE, typestore=store)
        for k in range(n):
            ns = T0_NS + k * 10_000_000
            stamp = t["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
            msg = t[m.JOINT_STATE](
                header=t["std_msgs/msg/Header"](stamp=stamp, frame_id=""), name=["j"],
                position=np.array([np.sin(k * 0.01)]), velocity=np.zeros(0), effort=np.zeros(0),
            )  # fmt: skip
            writer.write(conn, ns, store.serialize_cdr(msg, m.JOINT_STATE))
    return path


def _damage(bag: Path) -> None:
    """A chunk overwritten, the index left intact."""
    (data_file,) = [f for f in bag.iterdir() if f.suffix == ".mcap"]
    data = bytearray(data_file.read_bytes())
    third = len(data) // 3
    data[third : third + 4000] = b"\xff" * 4000
    data_file.write_bytes(bytes(data))


def test_a_corrupt_bag_stops_playback_with_an_error_and_the_node_lives_on(
    test_node, spawn, tmp_path
) -> None:
    # dynid's bags carry CRCs: a damaged chunk is refused before anything is played
    t = np.arange(2000) * 0.01
    traj = Trajectory(t=t, q=np.sin(t)[:, None], joint_names=["j"], meta={"t0_ns": T0_NS})
    checked = write_bag(traj, tmp_path / "checked")
    _damage(checked)
    proc = spawn(executable("bag_player"), *ros_args({"bag": str(checked)}))
    assert proc.wait(timeout=30) == 2
    assert "fails its CRC check" in output_of(proc)
    # a bag without CRCs: the damage shows while playing
    bag = _bag_without_crcs(tmp_path / "corrupt", 2000)
    _damage(bag)
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


def test_messages_that_cannot_be_played_are_said_with_why(test_node, spawn, tmp_path) -> None:
    """A topic whose type in metadata.yaml differs from its storage's, and sqlite3 rows under a
    topic id no topic names: playback skips them (rosbags does), and says so instead of
    "finished"."""
    retyped, traj = _bag(tmp_path)
    meta = retyped / "metadata.yaml"
    meta.write_text(meta.read_text().replace("geometry_msgs/msg/PoseStamped",
                                             "geometry_msgs/msg/TransformStamped"))  # fmt: skip
    layout = BagLayout(mocap=(MocapTopic("box", "/box_pose"),))
    orphaned = write_bag(traj, tmp_path / "orphaned", layout, storage="sqlite3")
    (db,) = orphaned.glob("*.db3")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE messages SET topic_id = 99 WHERE topic_id = "
                    "(SELECT id FROM topics WHERE name = '/box_pose')")  # fmt: skip
    n = traj.num_samples
    rosout = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL)  # fmt: skip
    logs = collect(test_node, Log, "/rosout", rosout)
    for bag, why in [
        (retyped, f"{n}: /box_pose: metadata.yaml declares geometry_msgs/msg/TransformStamped, "
                  "the storage geometry_msgs/msg/PoseStamped"),
        (orphaned, f"{n}: {db.name}: stored under a topic id that no topic record names"),
    ]:  # fmt: skip
        logs.clear()
        proc = spawn(executable("bag_player"), *ros_args({"bag": str(bag), "rate": 10.0}))
        wait_for(test_node, lambda b=bag: any(f"finished {b}" in log.msg for log in logs),
                 f"the end of {bag.name}", proc)  # fmt: skip
        finished = [log.msg for log in logs if f"finished {bag}" in log.msg]
        assert finished == [f"finished {bag}: {n} messages played; not played: {n} messages "
                            f"({why})"], finished  # fmt: skip
        # said at start-up, possibly before /rosout matched this subscriber (its messages
        # expire after 10 s): the console has every line
        output = output_of(proc)
        assert f"{bag}: {n} messages ({why}) will not be played" in output, output


def test_sigint_mid_playback_says_stopped_not_finished_and_publishes_nothing_after(
    spawn, tmp_path
) -> None:
    t = np.arange(3000) * 0.01  # 30 s
    bag = write_bag(Trajectory(t=t, q=np.sin(t)[:, None], joint_names=["j"],
                               meta={"t0_ns": T0_NS}), tmp_path / "long")  # fmt: skip
    for _ in range(3):
        proc = spawn(
            executable("bag_player"),
            *ros_args({"bag": str(bag), "clock": True, "clock_rate_hz": 1000.0}),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        time.sleep(3.0)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=30)[0]
        assert proc.returncode == 0, out
        assert "stopped by the shutdown after" in out, out
        assert "finished" not in out, out
        assert "Traceback" not in out, out


def test_the_clock_thread_never_publishes_after_shutdown(tmp_path, monkeypatch) -> None:
    """The shutdown lands between the playback thread's check of the context and its publish
    of /clock (the race a Ctrl-C hits now and then): no exception escapes the thread."""
    bag, _ = _bag(tmp_path)
    failures: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: failures.append(args.exc_value))
    context = Context()
    rclpy.init(context=context)
    values = {"bag": str(bag), "clock": True, "clock_rate_hz": 1000.0, "rate": 0.1}
    overrides = [Parameter(k, value=v) for k, v in values.items()]
    node = BagPlayer(context=context, parameter_overrides=overrides)
    publish = node.clock_pub.publish
    ticks = 0

    def shutdown_then_publish(msg) -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 20:
            rclpy.shutdown(context=context)  # another thread's shutdown, in the race window
        publish(msg)

    node.clock_pub.publish = shutdown_then_publish
    node._thread.join(timeout=10.0)
    assert not node._thread.is_alive()
    assert ticks == 20
    assert not failures, failures
    node.close()
