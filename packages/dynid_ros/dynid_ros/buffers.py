"""The recorder's streams: converters that validate each message and ring buffers that keep it.

``StreamBuffers`` turns a message of any configured topic into samples keyed by the buffer
they go to (:meth:`~StreamBuffers.convert`), stores them (:meth:`~StreamBuffers.push`) and
copies a time range of every buffer into a ``Snapshot`` (:meth:`~StreamBuffers.snapshot`).
The live recorder and the recovery of a spool go through the same three steps.

Buffer keys: ``("js",)`` the joint states, ``("pose", topic)`` a mocap topic, ``("tf", parent,
child)`` a dynamic TF edge, ``("tf_static", parent, child)`` a static one, ``("cmd", topic)`` a
command topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dynid.data import BagLayout, DataError, TfLookup
from dynid.data import tf as tf_chain
from dynid_ros import conversions as cv
from dynid_ros.assemble import Snapshot
from dynid_ros.errors import BadMessageError
from dynid_ros.ring import RingBuffer

Key = tuple[str, ...]
Sample = tuple[Key, int, NDArray[np.float64]]
_POSE = ("x", "y", "z", "qx", "qy", "qz", "qw")
_MAX_TF_EDGES = 64
NOT_AFTER = "not after the previous message"


class StreamBuffers:
    """Converters and ring buffers of every stream of ``layout``.

    Args:
        layout: the recorded topics.
        world_frame: the frame mocap poses must be given in.
        capacity: samples per buffer.
        age_ns: samples older than this behind a buffer's newest are dropped on read.
        scale_effort: apply ``layout``'s effort scale (off for samples scaled already).
        correct_latency: subtract the mocap latency of uncorrected topics (off for samples
            corrected already).
    """

    def __init__(
        self,
        layout: BagLayout,
        world_frame: str,
        capacity: int,
        age_ns: int,
        *,
        scale_effort: bool = True,
        correct_latency: bool = True,
    ) -> None:
        self.layout = layout
        self.world_frame = world_frame
        self.capacity = capacity
        self.age_ns = age_ns
        js = layout.joint_states
        joints = js.joints or ()
        scale = [js.effort_scale.get(j, 1.0) for j in joints] if scale_effort else []
        self.js_topic = js.topic
        self.js_conv = cv.JointStateConverter(joints, scale)
        self.js: RingBuffer | None = None
        self.mocap = {spec.topic: spec for spec in layout.mocap}
        self.shift = {
            spec.topic: 0 if spec.stamps_latency_corrected or not correct_latency
            else round(spec.latency * 1e9)
            for spec in layout.mocap
        }  # fmt: skip
        self.poses = {spec.topic: RingBuffer(7, capacity, age_ns) for spec in layout.mocap}
        self.commands = {c.topic: c for c in layout.commands}
        self.cmd_convs = {c.topic: cv.CommandConverter(c) for c in layout.commands}
        self.cmds: dict[str, RingBuffer] = {}
        self.tf_topic = layout.tf[0].topic if layout.tf else None
        self.tf_static_topic = layout.tf[0].static_topic if layout.tf else None
        self.tf_edges: dict[tuple[str, str], RingBuffer] = {}
        self.tf_static: dict[tuple[str, str], tuple[float, ...]] = {}

    # ------------------------------------------------------------------ in
    def convert(self, topic: str, msg: Any, receive_ns: int) -> tuple[list[Sample], list[Any]]:
        """The samples of ``msg`` received on ``topic`` and the ``BadMessageError`` of each part
        that is invalid (a ``BadMessageError`` is raised only when nothing is valid)."""
        if topic == self.js_topic:
            s = self.js_conv(msg)
            parts = [s.position] + [x for x in (s.velocity, s.effort) if x is not None]
            row = np.concatenate(parts) if len(parts) > 1 else s.position
            return [(("js",), s.stamp_ns, row)], []
        spec = self.mocap.get(topic)
        if spec is not None:
            if spec.msgtype == cv.POSE_STAMPED:
                stamp, row = cv.pose_stamped_sample(msg)
                frame = msg.header.frame_id
            else:
                stamp, frame, _, row = cv.transform_stamped_sample(msg)
            cv.check_frame(frame, self.world_frame)
            return [(("pose", topic), stamp - self.shift[topic], row)], []
        if topic in (self.tf_topic, self.tf_static_topic):
            kind = "tf" if topic == self.tf_topic else "tf_static"
            good, bad = cv.tf_message_samples(msg)
            return [((kind, p, c), stamp, row) for stamp, p, c, row in good], bad
        conv = self.cmd_convs[topic]
        return [(("cmd", topic), stamp, row) for stamp, row in conv(msg, receive_ns)], []

    def push(self, key: Key, stamp: int, row: NDArray[np.float64]) -> BadMessageError | None:
        """Store one sample; the reason it was refused, or ``None``."""
        kind = key[0]
        if kind == "js":
            if self.js is None:
                self.js = RingBuffer(row.size, self.capacity, self.age_ns)
            buffer = self.js
        elif kind == "pose":
            buffer = self.poses[key[1]]
        elif kind == "tf_static":
            self.tf_static[(key[1], key[2])] = tuple(row.tolist())
            return None
        elif kind == "tf":
            edge = (key[1], key[2])
            found = self.tf_edges.get(edge)
            if found is None:
                if len(self.tf_edges) >= _MAX_TF_EDGES:
                    return BadMessageError("transforms", "too many tf edges")
                found = self.tf_edges[edge] = RingBuffer(7, self.capacity, self.age_ns)
            if not found.push(stamp, row):
                return BadMessageError("transforms.header.stamp",
                                       "not after the previous transform of its edge")  # fmt: skip
            return None
        else:
            topic = key[1]
            found = self.cmds.get(topic)
            if found is None:
                found = self.cmds[topic] = RingBuffer(row.size, self.capacity, self.age_ns)
            if self.commands[topic].msgtype == cv.JOINT_TRAJECTORY:  # later plans replace the tail
                found.truncate_after(stamp)
            buffer = found
        if not buffer.push(stamp, row):
            return BadMessageError("header.stamp", NOT_AFTER)
        return None

    def buffers(self) -> Iterator[RingBuffer]:
        """Every ring buffer."""
        yield from (b for b in (self.js,) if b is not None)
        yield from self.poses.values()
        yield from self.cmds.values()
        yield from self.tf_edges.values()

    def samples(self, start_ns: int, end_ns: int | None = None) -> Iterator[Sample]:
        """Every stored sample stamped from ``start_ns`` (to ``end_ns``), buffer by buffer,
        static TF edges included."""
        keyed: list[tuple[Key, RingBuffer | None]] = [(("js",), self.js)]
        keyed += [(("pose", t), b) for t, b in self.poses.items()]
        keyed += [(("tf", *e), b) for e, b in self.tf_edges.items()]
        keyed += [(("cmd", t), b) for t, b in self.cmds.items()]
        for (parent, child), row in self.tf_static.items():
            yield ("tf_static", parent, child), 0, np.array(row)
        for key, buffer in keyed:
            if buffer is None:
                continue
            stamps, rows = buffer.window(start_ns, end_ns)
            for stamp, row in zip(stamps, rows, strict=True):
                yield key, int(stamp), row

    # ------------------------------------------------------------------ out
    def snapshot(
        self, start_ns: int, end_ns: int, *, name: str, publish: bool, reason: str
    ) -> tuple[Snapshot | None, list[str]]:
        """Copies of every buffer over ``[start_ns, end_ns]`` (``None``: < 2 joint states) and
        warnings about TF lookups that failed."""
        if self.js is None or self.js_conv.has_velocity is None:
            return None, []
        js = self.js.window(start_ns, end_ns)
        if js[0].size < 2:
            return None, []
        warnings: list[str] = []
        channels = []
        for spec in self.layout.mocap:
            stamps, rows = self.poses[spec.topic].window(start_ns, end_ns)
            channels.append((spec.topic, [f"{spec.body}/{c}" for c in _POSE], stamps, rows, False))
        for lookup in self.layout.tf:
            dynamic = {e: b.window(start_ns, end_ns) for e, b in self.tf_edges.items()}
            stamps, rows = self._tf_lookup(lookup, {e: w for e, w in dynamic.items() if w[0].size},
                                           warnings)  # fmt: skip
            names = [f"{lookup.body}/{c}" for c in _POSE]
            channels.append((tf_channel(lookup), names, stamps, rows, False))
        for spec in self.layout.commands:
            buffer = self.cmds.get(spec.topic)
            stamps, rows = (np.zeros(0, np.int64), np.zeros((0, 1))) if buffer is None else (
                buffer.window(start_ns, end_ns))  # fmt: skip
            channels.append((spec.topic, self.cmd_convs[spec.topic].channels, stamps, rows, True))
        snap = Snapshot(
            name=name,
            joints=self.js_conv.joints,
            has_velocity=bool(self.js_conv.has_velocity),
            has_effort=bool(self.js_conv.has_effort),
            js=js,
            channels=channels,
            publish=publish,
            reason=reason,
        )
        return snap, warnings

    def _tf_lookup(
        self, lookup: TfLookup, dynamic: dict[tuple[str, str], Any], warnings: list[str]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        try:
            stamps, poses = tf_chain.lookup(
                lookup.parent,
                lookup.child,
                dynamic,
                self.tf_static,
                where=f"tf {lookup.parent!r} -> {lookup.child!r}",
            )
        except DataError as err:
            warnings.append(str(err))
            return np.zeros(0, np.int64), np.zeros((0, 7))
        if stamps is None:  # a static chain: constant over the segment
            return np.zeros(0, np.int64), poses
        return stamps, poses


def tf_channel(lookup: TfLookup) -> str:
    """The channel name of a TF lookup in a snapshot: ``<tf topic>:<child frame>``."""
    return f"{lookup.topic}:{lookup.child}"
