"""recorder over real DDS under faults: nothing received is lost, and no loss is silent.

A message stamped an hour ahead is one bad message; a recorder killed with SIGKILL mid-segment
loses at most a second (its spool is recovered by the next recorder); a segment the disk refuses
is kept and written once the disk takes it; streams that share no time span leave the joint
states written, the loss stated in ``~/stop``'s answer and on ``/diagnostics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped
from node_helpers import call_trigger, collect, executable, output_of, ros_args, wait_for
from sensor_msgs.msg import JointState
from test_recorder import JOINTS, T0_NS, joint_state, pose, start_segment

from dynid.data import BagLayout, CommandTopic, JointStateTopic, read_bag
from dynid_msgs.msg import TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import ns_to_stamp, segment_to_trajectory


def _stamps(traj) -> np.ndarray:
    return traj.meta["t0_ns"] + np.round(traj.t * 1e9).astype(np.int64)


def _node_values(diags: list) -> dict[str, str]:
    """The latest values of the recorder's node status on /diagnostics."""
    for d in reversed(diags):
        for s in d.status:
            if s.name.endswith(": node"):
                return {kv.key: kv.value for kv in s.values}
    return {}


def _stream_values(diags: list, topic: str) -> dict[str, str]:
    for d in reversed(diags):
        for s in d.status:
            if s.name.endswith(f": {topic}"):
                return {kv.key: kv.value for kv in s.values}
    return {}


def _paced(publish: Callable[[int], None]) -> Callable[[int], None]:
    def run(k: int) -> None:
        publish(k)
        time.sleep(0.002)

    return run


def test_a_stamp_an_hour_ahead_is_one_bad_message(test_node, spawn, tmp_path) -> None:
    topic = "/ahead_test/joint_states"
    proc = spawn(
        executable("recorder"),
        *ros_args({"joint_state_topic": topic, "joints": JOINTS, "output_dir": str(tmp_path),
                   "diagnostics_period_s": 0.3}),
    )  # fmt: skip
    js = test_node.create_publisher(JointState, topic, qos.reliable(1000))
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    wait_for(test_node, lambda: js.get_subscription_count() > 0, "recorder subscription", proc)
    sent: list[int] = []

    def now(k: int) -> None:
        msg = joint_state(k, stamp_ns=time.time_ns())
        sent.append(stamp := msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)
        assert stamp > 0
        js.publish(msg)

    start_segment(test_node, proc, _paced(now))
    sent.clear()
    for k in range(1, 101):
        _paced(now)(k)
    ahead = time.time_ns() + 3600 * 10**9
    js.publish(joint_state(101, stamp_ns=ahead))  # one hour ahead
    bad_nanosec = joint_state(102, stamp_ns=time.time_ns())
    bad_nanosec.header.stamp.nanosec = 1_500_000_000
    js.publish(bad_nanosec)
    for k in range(103, 203):
        _paced(now)(k)
    time.sleep(0.3)
    stop = call_trigger(test_node, "/recorder/stop")
    assert stop.success, f"{stop.message}: {output_of(proc)}"
    wait_for(test_node, lambda: len(segments) == 1, "the segment", proc)
    stamps = _stamps(segment_to_trajectory(segments[0]))
    assert len(sent) == 200
    missing = sorted(set(sent) - set(stamps.tolist()))
    assert not missing, f"{len(missing)} of the 200 good joint states missing from the segment"
    assert stamps.max() < ahead

    def counted() -> bool:
        values = _stream_values(diags, topic)
        return (values.get("header.stamp: jumps far ahead of the stream") == "1"
                and values.get("header.stamp: nanosec not below 1e9") == "1")  # fmt: skip

    wait_for(test_node, counted, f"both rejections counted ({_stream_values(diags, topic)})", proc)
    # not stuck: the next segment records as the first did
    assert call_trigger(test_node, "/recorder/start").success
    for k in range(300, 350):
        _paced(now)(k)
    time.sleep(0.3)
    assert call_trigger(test_node, "/recorder/stop").success
    wait_for(test_node, lambda: len(segments) == 2, "the second segment", proc)
    assert segment_to_trajectory(segments[1]).num_samples >= 50
    assert proc.poll() is None, output_of(proc)


def test_sigkill_mid_segment_loses_at_most_a_second(test_node, spawn, tmp_path) -> None:
    topic = "/kill_test/joint_states"
    params = ros_args({"joint_state_topic": topic, "joints": JOINTS, "output_dir": str(tmp_path)})
    proc = spawn(executable("recorder"), *params)
    js = test_node.create_publisher(JointState, topic, qos.reliable(1000))
    wait_for(test_node, lambda: js.get_subscription_count() > 0, "recorder subscription", proc)
    sent: dict[int, list[float]] = {}

    def now(k: int) -> None:
        msg = joint_state(k, stamp_ns=time.time_ns())
        sent[msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec] = list(msg.position)
        js.publish(msg)
        time.sleep(0.004)

    start_segment(test_node, proc, now)
    sent.clear()
    end = time.monotonic() + 3.0
    k = 1
    while time.monotonic() < end:
        now(k)
        k += 1
    proc.kill()  # SIGKILL: no handler, no close()
    proc.wait()
    spools = list((tmp_path / "spool").glob("*.mcap"))
    assert spools, "no spool on disk"
    # what a kill in the middle of write_bag leaves: its temporary folder, an empty mcap inside
    unfinished = tmp_path / ".segment_0001_1.k2j_x9q0" / "segment_0001_1"
    unfinished.mkdir(parents=True)
    (unfinished / "segment_0001_1_0.mcap").touch()
    restarted = spawn(executable("recorder"), *params)
    wait_for(test_node, lambda: any(p.name.startswith("segment_recovered_")
                                    for p in tmp_path.iterdir()),
             "the recovered segment", restarted)  # fmt: skip
    (bag,) = [p for p in tmp_path.iterdir() if p.name.startswith("segment_recovered_")]
    data, summary = read_bag(bag, BagLayout(JointStateTopic(topic, joints=tuple(JOINTS))))
    stamps = _stamps(data[0])
    last_sent = max(sent)
    assert stamps[-1] >= last_sent - 1_000_000_000, (
        f"{(last_sent - stamps[-1]) * 1e-9:.3f} s lost at the end; {summary}"
    )
    expected = [s for s in sorted(sent) if s <= stamps[-1]]
    missing = set(expected) - set(stamps.tolist())
    assert len(missing) <= 0.01 * len(expected), f"{len(missing)} of {len(expected)} missing"
    rows = {int(s): q for s, q in zip(stamps, data[0].q, strict=True)}
    for s in expected[:: max(len(expected) // 20, 1)]:
        if s in rows:
            np.testing.assert_allclose(rows[s], sent[s])
    # the spool is gone once recovered, and nothing half-written is left behind
    wait_for(test_node, lambda: not list((tmp_path / "spool").iterdir()), "spool removed",
             restarted)  # fmt: skip
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert restarted.poll() is None, output_of(restarted)


def test_a_segment_the_disk_refuses_is_kept_and_written_later(test_node, spawn, tmp_path) -> None:
    """The output folder is replaced by a file while a segment is recorded (chmod would not
    stop root, who runs CI containers), so every write fails with an OSError, like a full disk;
    once the folder is back the segment is written."""
    topic = "/disk_test/joint_states"
    out = tmp_path / "out"
    proc = spawn(
        executable("recorder"),
        *ros_args({"joint_state_topic": topic, "joints": JOINTS, "output_dir": str(out),
                   "diagnostics_period_s": 0.2}),
    )  # fmt: skip
    js = test_node.create_publisher(JointState, topic, qos.reliable(1000))
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    statuses: list[DiagnosticStatus] = []
    test_node.create_subscription(
        DiagnosticArray, "/diagnostics",
        lambda d: statuses.extend(s for s in d.status if s.name.endswith(": node")),
        qos.reliable(10),
    )  # fmt: skip
    wait_for(test_node, lambda: js.get_subscription_count() > 0, "recorder subscription", proc)
    sent: list[int] = []

    def publish(k: int) -> None:
        msg = joint_state(k)
        sent.append(T0_NS + k * 1_000_000)
        js.publish(msg)
        time.sleep(0.002)

    start_segment(test_node, proc, publish)
    sent.clear()
    for k in range(1, 201):
        publish(k)
    aside = tmp_path / "aside"
    out.rename(aside)
    out.write_text("not a folder")
    for k in range(201, 301):
        publish(k)
    time.sleep(0.3)
    stop = call_trigger(test_node, "/recorder/stop")
    assert stop.success, stop.message

    def refused() -> bool:
        values = _node_values(diags)
        return int(values.get("write_errors", 0)) >= 2 and values.get("segments_unwritten") == "1"

    wait_for(test_node, refused, f"write errors on /diagnostics ({_node_values(diags)})", proc)
    assert "cannot" in _node_values(diags)["last_write_error"]
    assert statuses[-1].level == DiagnosticStatus.WARN
    assert "wait for the disk" in statuses[-1].message
    assert not segments  # published only once written
    out.unlink()
    aside.rename(out)
    wait_for(test_node, lambda: len(segments) == 1, "the segment, written once possible", proc)
    bag = Path(segments[0].source)
    assert bag.parent == out
    assert bag.is_dir()
    data, _ = read_bag(bag, BagLayout(JointStateTopic(topic, joints=tuple(JOINTS))))
    assert set(sent) <= set(_stamps(data[0]).tolist())
    wait_for(test_node, lambda: _node_values(diags).get("segments_unwritten") == "0",
             "no segment waiting", proc)  # fmt: skip
    assert _node_values(diags)["segments_failed"] == "0"
    assert not list((out / "spool").iterdir())
    assert proc.poll() is None, output_of(proc)


def test_streams_sharing_no_span_leave_the_joint_states_written(test_node, spawn, tmp_path):
    """Mocap received over the first third of the segment, commands over the last: the
    segment is written (never answered with success, then dropped), the answer and
    /diagnostics say what was left out."""
    base = "/span_test"
    proc = spawn(
        executable("recorder"),
        *ros_args({
            "joint_state_topic": f"{base}/joint_states", "joints": JOINTS,
            "output_dir": str(tmp_path), "diagnostics_period_s": 0.2,
            "mocap_topics": [f"{base}/box_pose"], "mocap_types": ["PoseStamped"],
            "mocap_bodies": ["box"],
            "command_topics": [f"{base}/cmd"], "command_types": ["JointState"],
        }),
    )  # fmt: skip
    js = test_node.create_publisher(JointState, f"{base}/joint_states", qos.reliable(1000))
    mocap = test_node.create_publisher(PoseStamped, f"{base}/box_pose", qos.reliable(1000))
    cmd = test_node.create_publisher(JointState, f"{base}/cmd", qos.reliable(1000))
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    wait_for(test_node, lambda: all(p.get_subscription_count() for p in (js, mocap, cmd)),
             "recorder subscriptions", proc)  # fmt: skip
    start_segment(test_node, proc, _paced(lambda k: js.publish(joint_state(k))))
    for k in range(1, 301):
        js.publish(joint_state(k))
        stamp = T0_NS + k * 1_000_000
        if k <= 100:
            mocap.publish(pose(k, stamp))
        if k >= 200:
            command = JointState(name=JOINTS, position=[0.01 * k] * len(JOINTS))
            command.header.stamp = ns_to_stamp(stamp)
            cmd.publish(command)
        time.sleep(0.002)
    time.sleep(0.3)
    stop = call_trigger(test_node, "/recorder/stop")
    assert stop.success, stop.message
    assert "/span_test/box_pose left out: it shares no time span with ['/span_test/cmd']" \
        in stop.message  # fmt: skip
    assert "joint states" in stop.message
    assert "left out" in stop.message
    wait_for(test_node, lambda: len(segments) == 1, "the segment", proc)
    traj = segment_to_trajectory(segments[0])
    assert traj.obs is None
    assert traj.command_names == [f"{j}/position" for j in JOINTS]
    stamps = _stamps(traj)
    assert stamps[0] == T0_NS + 200 * 1_000_000
    assert stamps[-1] == T0_NS + 300 * 1_000_000
    bag = Path(stop.message.split(" (")[0])
    layout = BagLayout(JointStateTopic(f"{base}/joint_states", joints=tuple(JOINTS)),
                       commands=(CommandTopic(f"{base}/cmd"),))  # fmt: skip
    data, _ = read_bag(bag, layout)
    assert data[0].num_samples == traj.num_samples
    wait_for(test_node, lambda: _node_values(diags).get("segments_with_loss") == "1",
             "the loss on /diagnostics", proc)  # fmt: skip
    assert "box_pose left out" in _node_values(diags)["last_segment_note"]
    assert _node_values(diags)["segments_failed"] == "0"
    assert proc.poll() is None, output_of(proc)
