"""Consecutive segments of a long recording lose no joint state at their boundaries (the
segmenter's promise: "a long recording becomes consecutive segments, none lost").

With a mocap stream beside the joint states, a cut at ``max_buffer_s`` is written up to the last
mocap sample before it (``fit_spans`` cuts each segment to the span its mocap covers); the next
segment then starts there (``Segmenter.written``) instead of at the cut, which left up to one
mocap period (5 ms at 200 Hz) per boundary on no disk. The recorder's own steps without DDS:
``StreamBuffers`` → ``Segmenter`` → ``snapshot`` → ``fit_spans`` → ``Segmenter.written`` →
``assemble``, in the order the recorder runs them (a joint state, and the cut it triggers, before
the mocap sample of the same instant).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import JointState

from dynid.data import BagLayout, JointStateTopic, MocapTopic
from dynid_ros.assemble import assemble, fit_spans
from dynid_ros.buffers import StreamBuffers
from dynid_ros.conversions import ns_to_stamp
from dynid_ros.segmenter import Segmenter, SegmentMode

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def test_consecutive_segments_keep_every_joint_state_with_mocap_recorded() -> None:
    layout = BagLayout(JointStateTopic("/js", joints=("a",)), mocap=(MocapTopic("box", "/box"),))
    streams = StreamBuffers(layout, "world", capacity=5000, age_ns=4 * 10**9)
    segmenter = Segmenter(SegmentMode.AUTO, threshold=0.01, quiet_s=1.0, pre_s=0.0,
                          min_duration_s=0.5, max_duration_s=1.0)  # fmt: skip
    written: list[np.ndarray] = []

    def store(topic: str, msg: object, stamp: int) -> int:
        ((key, s, row),), bad = streams.convert(topic, msg, stamp)
        assert not bad
        assert streams.push(key, s, row) is None
        return s

    for k in range(3500):  # 3.5 s moving at 1 kHz, mocap at 200 Hz with the same clock
        stamp = T0 + k * MS
        js = JointState(name=["a"], position=[0.001 * k], velocity=[1.0])
        js.header.stamp = ns_to_stamp(stamp)
        for cut in segmenter.update(store("/js", js, stamp), speed=1.0):
            snap, _ = streams.snapshot(cut.start_ns, cut.end_ns, name="s", publish=False,
                                       reason=cut.reason)  # fmt: skip
            assert snap is not None
            snap = fit_spans(snap, tail_carried=segmenter.continues(cut))
            assert snap.notes == [], snap.notes  # what is not in this segment is in the next
            segmenter.written(cut, snap.span()[1])
            traj = assemble(snap, rate_hz=0.0)
            written.append(traj.meta["t0_ns"] + np.round(traj.t * 1e9).astype(np.int64))
        if k % 5 == 0:
            pose = PoseStamped()
            pose.header.stamp, pose.header.frame_id = ns_to_stamp(stamp), "world"
            pose.pose.orientation.w = 1.0
            store("/box", pose, stamp)
    assert len(written) == 3  # cuts about 1 s apart
    kept = np.unique(np.concatenate(written))
    assert kept.max() >= T0 + 2980 * MS  # the third cut, a mocap period or two before 3 s
    expected = T0 + np.arange(0, (kept.max() - T0) // MS + 1) * MS
    lost = np.setdiff1d(expected, kept)
    assert lost.size == 0, f"{lost.size} joint states on no segment: {(lost - T0) // MS} ms"
    # consecutive segments share one instant at most
    assert sum(w.size for w in written) - kept.size <= len(written) - 1
