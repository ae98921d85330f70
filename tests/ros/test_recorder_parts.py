"""The recorder's parts without DDS (fast): stamp validation and the stamp guard, the choice of
what a segment can align, and the spool (written, cut off as by SIGKILL, read back)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from dynid.data import BagLayout, CommandTopic, JointStateTopic, MocapTopic, TfLookup
from dynid_ros import conversions as cv
from dynid_ros import spool as sp
from dynid_ros.assemble import Snapshot, fit_spans
from dynid_ros.buffers import StreamBuffers
from dynid_ros.errors import BadMessageError
from dynid_ros.stamps import AHEAD_OF_CLOCK, JUMP_AHEAD, StampGuard

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def test_stamps_with_nanosec_past_a_second_or_negative_seconds_are_refused() -> None:
    conv = cv.JointStateConverter(["a"])
    msg = JointState(name=["a"], position=[1.0])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 5, 1_500_000_000
    with pytest.raises(BadMessageError, match=r"header\.stamp: nanosec not below 1e9"):
        conv(msg)
    msg.header.stamp.sec, msg.header.stamp.nanosec = -1, 0
    with pytest.raises(BadMessageError, match=r"header\.stamp: negative sec"):
        conv(msg)


def _feed(guard: StampGuard, stamps: list[int], now: int = 0) -> tuple[list[int], list[str]]:
    stored: list[int] = []
    rejected: list[str] = []
    for s in stamps:
        ok, bad = guard.admit(s, None, now)
        stored += [x for x, _ in ok]
        rejected += [h.reason for h in bad]
    return stored, rejected


def test_one_stamp_far_ahead_is_rejected_and_the_stream_goes_on() -> None:
    good = [T0 + k * MS for k in range(100)]
    later = [T0 + k * MS for k in range(101, 200)]
    stored, rejected = _feed(StampGuard(), [*good, T0 + 3600 * 10**9, *later])
    assert stored == good + later
    assert rejected == [JUMP_AHEAD]


def test_a_stream_that_really_jumps_is_followed_after_three_messages() -> None:
    before = [T0 + k * MS for k in range(50)]
    after = [T0 + 10**10 + k * MS for k in range(10)]  # the driver restarted 10 s later
    guard = StampGuard()
    stored, rejected = _feed(guard, [*before, *after[:2]])
    assert stored == before
    assert guard.held == 2
    stored, rejected = _feed(guard, after[2:])
    assert stored == after
    assert not rejected


def test_a_first_stamp_far_ahead_of_the_node_clock_waits_for_confirmation() -> None:
    now = T0
    guard = StampGuard(future_ns=10 * 10**9)
    stored, rejected = _feed(guard, [now + 3600 * 10**9, now + MS, now + 2 * MS], now)
    assert stored == [now + MS, now + 2 * MS]
    assert rejected == [AHEAD_OF_CLOCK]
    # without a node clock (sim time not received yet) nothing is judged against it
    assert _feed(StampGuard(), [now + 3600 * 10**9], 0)[0] == [now + 3600 * 10**9]


def _snap(js: np.ndarray, channels: list) -> Snapshot:
    rows = np.zeros((js.size, 1))
    return Snapshot("s", ("a",), False, False, (js, rows), channels, False, "test")


def _channel(topic: str, stamps: np.ndarray, command: bool = False):
    return (topic, [f"{topic}/v"], stamps, np.zeros((stamps.size, 1)), command)


def test_streams_without_a_common_span_are_left_out_with_a_note() -> None:
    js = T0 + np.arange(301) * MS
    mocap = _channel("/mocap", js[:90])  # fewer joint states than the commands' span
    cmd = _channel("/cmd", js[200:], command=True)
    silent = _channel("/silent", js[:0])
    outside = _channel("/outside", T0 + np.arange(1000, 1010) * MS)
    snap = fit_spans(_snap(js, [mocap, cmd, silent, outside]))
    assert [ch[0] for ch in snap.channels] == ["/cmd"]
    notes = "\n".join(snap.notes)
    assert "/silent left out: no sample in the segment" in notes
    assert "/outside left out: its samples" in notes
    assert "/mocap left out: it shares no time span with ['/cmd']" in notes
    assert "200 of 301 joint states (0.200 s)" in notes
    # streams over the whole segment: nothing left out, nothing said
    full = fit_spans(_snap(js, [_channel("/mocap", js)]))
    assert [ch[0] for ch in full.channels] == ["/mocap"]
    assert full.notes == []


def test_joint_states_after_the_span_are_not_lost_when_the_next_segment_carries_them() -> None:
    js = T0 + np.arange(301) * MS
    mocap = _channel("/mocap", js[10:297:5])  # from 10 ms to 295 ms
    (lost,) = fit_spans(_snap(js, [mocap])).notes
    assert "15 of 301 joint states (0.015 s)" in lost  # 10 before the span, 5 after it
    (head,) = fit_spans(_snap(js, [mocap]), tail_carried=True).notes
    assert "10 of 301 joint states (0.010 s)" in head
    assert fit_spans(_snap(js, [_channel("/mocap", js[:297:5])]), tail_carried=True).notes == []


def _layout() -> BagLayout:
    return BagLayout(
        JointStateTopic("/js", joints=("a", "b"), effort_scale={"a": 2.0}),
        mocap=(MocapTopic("box", "/box", stamps_latency_corrected=False, latency=0.01),),
        tf=(TfLookup("tool", "world", "tool"),),
        commands=(CommandTopic("/cmd", fields=("position", "velocity")),),
    )


def test_the_layout_goes_through_json() -> None:
    layout = _layout()
    assert sp.layout_from_json(json.loads(json.dumps(sp.layout_to_json(layout)))) == layout


def test_a_spool_cut_off_mid_record_gives_back_every_whole_message(tmp_path) -> None:
    layout = BagLayout(JointStateTopic("/js", joints=("a", "b")),
                       mocap=(MocapTopic("box", "/box"),))  # fmt: skip
    streams = StreamBuffers(layout, "world", 100, 10**12)
    builder = sp.MessageBuilder(layout, "world")
    path = tmp_path / "spool" / "segment_1.mcap"
    writer = sp.SpoolWriter(path, {"start_ns": T0, "layout": sp.layout_to_json(layout)})
    sent = []
    for k in range(20):
        row = np.array([0.1 * k, -0.1 * k, 1.0, 2.0])  # positions and velocities
        builder.joints, builder.has_velocity = ("a", "b"), True
        writer.add("/js", "sensor_msgs/msg/JointState", builder.build(("js",), T0 + k * MS, row),
                   T0 + k * MS)  # fmt: skip
        pose = np.array([k, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
        msg = builder.build(("pose", "/box"), T0 + k * MS, pose)
        writer.add("/box", "geometry_msgs/msg/PoseStamped", msg, T0 + k * MS)
        sent.append(row)
    writer.flush()  # what a crash leaves: no data end, no footer, and half a record
    data = path.read_bytes()
    path.write_bytes(data[:-30])
    contents = sp.read_spool(path)
    assert not contents.complete
    assert contents.unread_bytes > 0
    assert contents.meta["start_ns"] == T0
    topics = [m[0] for m in contents.messages]
    assert topics == ["/js", "/box"] * 19 + ["/js"]  # the last pose was cut
    for topic, msgtype, _, stamp, raw in contents.messages:
        msg = deserialize_message(raw, sp.message_type(msgtype))
        samples, bad = streams.convert(topic, msg, stamp)
        assert not bad
        for key, s, r in samples:
            assert streams.push(key, s, r) is None
    stamps, rows = streams.js.window()
    np.testing.assert_array_equal(stamps, T0 + np.arange(20) * MS)
    np.testing.assert_array_equal(rows, sent)
    # a closed spool ends with a footer
    closed = sp.SpoolWriter(tmp_path / "spool" / "segment_2.mcap", {"start_ns": 0})
    closed.close()
    assert sp.read_spool(closed.path).complete
    (tmp_path / "junk.mcap").write_bytes(b"junk")
    with pytest.raises(sp.SpoolError, match="not an MCAP file"):
        sp.read_spool(tmp_path / "junk.mcap")


def test_a_spool_a_living_writer_holds_is_no_leftover(tmp_path) -> None:
    folder = tmp_path / "spool"
    live = sp.SpoolWriter(folder / "segment_1.mcap", {"start_ns": 0})
    dead = sp.SpoolWriter(folder / "segment_2.mcap", {"start_ns": 0})
    dead.abandon()  # the lock goes with the file, as with the process
    assert sp.leftover_spools(folder) == [dead.path]
    live.close()
    assert sp.leftover_spools(folder) == [live.path, dead.path]
