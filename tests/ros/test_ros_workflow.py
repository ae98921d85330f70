"""The nodes as a ROS user drives them, over real DDS: a replay that segments by itself and loses
no header-less command, and a manual segment in automatic mode kept until ``~/stop``."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from node_helpers import ROOT, call_trigger, collect, executable, output_of, ros_args, wait_for
from rclpy.node import Node
from rclpy.publisher import Publisher
from ros_helpers import spin_until
from rosbags.highlevel import AnyReader
from sensor_msgs.msg import JointState
from test_recorder import JOINTS, joint_state

from dynid.data import read_segments
from dynid_msgs.msg import TrajectorySegment
from dynid_ros import qos

NODES = ROOT / "config" / "nodes"
COMMANDS = "/current_controller/commands"


def _stream_values(diags: list[DiagnosticArray], topic: str) -> dict[str, str]:
    """The key/values of the newest diagnostics status of ``topic`` ({} before any)."""
    for array in reversed(diags):
        for status in array.status:
            if status.name.endswith(f": {topic}"):
                return {v.key: v.value for v in status.values}
    return {}


def _start_manual_segment(test_node: Node, pub: Publisher, proc: subprocess.Popen) -> int:
    """Publish joint states 10 at a time until ``/recorder/start`` opens a segment (the recorder
    needs a joint state first); returns the index of the next joint state to publish."""
    k = 0
    while not call_trigger(test_node, "/recorder/start").success:
        for _ in range(10):
            pub.publish(joint_state(k))
            k += 1
        assert k < 5000, output_of(proc)
    return k


def _count(bag: Path, topic: str) -> int:
    """Messages on ``topic`` in ``bag``."""
    with AnyReader([bag]) as reader:
        return sum(1 for _ in reader.messages([c for c in reader.connections if c.topic == topic]))


def test_an_open_manipulator_replay_segments_by_itself_and_keeps_every_command(
    test_node, spawn, tmp_path
) -> None:
    """The OpenManipulator-X recorder configuration on a replayed bag (its /clock): segments are
    cut without a service call, and every ``Float64MultiArray`` command (no header: stamped on
    receipt with a clock that stands still between ``/clock`` messages) is taken."""
    from dynid.sim.omx_payload import simulate

    bag = tmp_path / "omx"
    simulate(out_path=bag, payload_masses=(0.1,), seed=0)
    published = _count(bag, COMMANDS)
    assert published > 50
    player = spawn(
        executable("bag_player"),
        *ros_args({"bag": str(bag), "start_paused": True, "clock": True}),
    )
    recorder = spawn(
        executable("recorder"), "--ros-args", "--params-file",
        str(NODES / "open_manipulator_x_recorder.yaml"),
        *ros_args({"output_dir": str(tmp_path / "segments"), "use_sim_time": True,
                   "diagnostics_period_s": 0.2})[1:],
    )  # fmt: skip
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(50))
    for topic in ("/joint_states", COMMANDS, "/clock"):
        wait_for(test_node, lambda t=topic: test_node.count_subscribers(t) >= 1,
                 f"the recorder's subscription to {topic}", recorder, 60.0)  # fmt: skip
    assert call_trigger(test_node, "/bag_player/resume").success
    wait_for(test_node, lambda: segments, "a segment cut without a service call", recorder, 60.0)
    wait_for(
        test_node, lambda: _stream_values(diags, COMMANDS).get("received") == str(published),
        f"all {published} commands at the recorder", player, 60.0,
    )  # fmt: skip
    counts = _stream_values(diags, COMMANDS)
    assert counts["rejected"] == "0", f"{counts}\n{output_of(recorder)}"
    assert counts["used"] == str(published)
    traj = read_segments(segments[0].source, "/recorder/segment")[0][0]
    assert traj.command is not None
    assert traj.command_names == ["joint3/current"]
    assert traj.duration > 1.0
    assert recorder.poll() is None, output_of(recorder)


def test_a_manual_segment_in_automatic_mode_is_kept_until_stop(test_node, spawn, tmp_path):
    """``~/start`` in ``segment_mode: auto``: neither rest nor silent joint states close the
    segment; ``~/stop`` does and writes it."""
    topic = "/manual_auto/joint_states"
    proc = spawn(
        executable("recorder"),
        *ros_args({
            "joint_state_topic": topic, "joints": JOINTS, "output_dir": str(tmp_path),
            "segment_mode": "auto", "auto_speed_threshold": 100.0,  # never moving
            "auto_quiet_s": 0.2, "diagnostics_period_s": 0.2,
        }),
    )  # fmt: skip
    pub = test_node.create_publisher(JointState, topic, qos.reliable(1000))
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(50))
    wait_for(test_node, lambda: pub.get_subscription_count() > 0, "recorder subscription", proc)
    k = _start_manual_segment(test_node, pub, proc)
    for _ in range(300):
        pub.publish(joint_state(k))
        k += 1
    # the joint states stop: wait for five diagnostics after the stall check would have fired
    seen = len(diags)
    wait_for(test_node, lambda: len(diags) >= seen + 5, "diagnostics", proc)
    assert not segments, "the stall check closed the manual segment"
    node_values = {v.key: v.value for s in diags[-1].status for v in s.values}
    assert node_values["segment_open"] == "True"
    stop = call_trigger(test_node, "/recorder/stop")
    assert stop.success, f"{stop.message}\n{output_of(proc)}"
    assert spin_until(test_node, lambda: bool(segments), 30.0), output_of(proc)
    traj = read_segments(segments[0].source, "/recorder/segment")[0][0]
    assert traj.num_samples >= 300


@pytest.mark.parametrize("signals", [("SIGINT",), ("SIGTERM",), ("SIGINT", "SIGINT", "SIGTERM")])
def test_a_signalled_recorder_writes_its_open_segment_and_exits_cleanly(
    test_node, spawn, tmp_path, signals
) -> None:
    """Ctrl-C, SIGTERM, or more signals while it shuts down: the open segment is written, the
    shutdown is logged, no traceback, exit status 0."""
    topic = "/signalled/joint_states"
    proc = spawn(
        executable("recorder"),
        *ros_args({"joint_state_topic": topic, "joints": JOINTS, "output_dir": str(tmp_path)}),
        # Ctrl-C raises KeyboardInterrupt, as in a terminal, however pytest itself was started
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    pub = test_node.create_publisher(JointState, topic, qos.reliable(1000))
    wait_for(test_node, lambda: pub.get_subscription_count() > 0, "recorder subscription", proc)
    k = _start_manual_segment(test_node, pub, proc)
    for _ in range(200):
        pub.publish(joint_state(k))
        k += 1
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    wait_for(test_node, lambda: _stream_values(diags, topic).get("used") == str(k),
             f"all {k} joint states at the recorder", proc)  # fmt: skip
    for name in signals:
        proc.send_signal(getattr(signal, name))
    status = proc.wait(timeout=60)
    log = proc.stdout.read() if proc.stdout else ""
    assert status == 0, log
    assert "Traceback" not in log, log
    assert f"{signals[0]}: shutting down" in log, log
    (bag,) = [p for p in tmp_path.iterdir() if p.name.startswith("segment_")]
    traj = read_segments(bag, "/recorder/segment")[0][0]
    assert traj.num_samples >= 200
