"""Per-topic message handlers: raw CDR bytes in, validated fixed-width samples out.

Each handler owns the ``TopicStream`` (or streams) of its topic. A message that cannot be used is
counted in the topic's summary with the field and the reason, or raises ``BagReadError`` when the
read is strict. Stamps are integer nanoseconds.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rosbags.typesys.store import Typestore

from dynid.data import messages as m
from dynid.data.errors import BagReadError, SegmentError
from dynid.data.stream import TopicStream, TopicSummary
from dynid.data.topics import CommandTopic, JointStateTopic, MocapTopic, OutOfOrder, StampSource
from dynid.data.trajectory import Trajectory

_POINT_ATTRS = {
    "position": "positions",
    "velocity": "velocities",
    "acceleration": "accelerations",
    "effort": "effort",
}
# Field names of control_msgs before Humble's rename (reference/feedback were desired/actual).
_OLD_POINTS = {"reference": "desired", "feedback": "actual"}


def _finite(row: Sequence[float]) -> bool:
    """Whether every value is finite (fast path: a finite sum implies finite terms)."""
    total = sum(row)
    return total - total == 0.0 or all(map(math.isfinite, row))


class Handler(ABC):
    """Common state: topic summary, stream(s), stamp choice, strictness."""

    def __init__(
        self,
        topic: str,
        msgtype: str,
        *,
        path: str,
        stamps: StampSource,
        strict: bool,
        policy: OutOfOrder,
        capacity: int,
    ) -> None:
        self.summary = TopicSummary(topic, msgtype)
        self.path = path
        self.stamps = stamps
        self.strict = strict
        self.policy = policy
        self.capacity = capacity
        self.stream: TopicStream | None = None

    def _stream(self, width: int) -> TopicStream:
        if self.stream is None:
            self.stream = TopicStream(
                self.summary, width, capacity=self.capacity, policy=self.policy, path=self.path
            )
        return self.stream

    def _invalid(self, reason: str) -> None:
        self.summary.invalid += 1
        self.summary.invalid_reasons[reason] += 1
        if self.strict:
            raise BagReadError(f"{self.path}: topic {self.summary.topic!r}: {reason}")

    def _stamp(self, header_ns: int, log_ns: int) -> int:
        return log_ns if self.stamps is StampSource.RECEIVE else header_ns

    @abstractmethod
    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        """Decode one message and add its sample(s)."""

    def finish(
        self, starts_ns: NDArray[np.int64] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Kept stamps ``[n]`` (ns) and rows ``[n, width]``; raises when nothing usable was read.

        ``starts_ns``: segment start stamps, see ``TopicStream.finish``.
        """
        if self.stream is None or len(self.stream) == 0:
            reasons = ", ".join(f"{r} ({n}x)" for r, n in self.summary.invalid_reasons.items())
            raise BagReadError(
                f"{self.path}: topic {self.summary.topic!r} ({self.summary.msgtype}): no usable "
                f"message among {self.summary.received}"
                + (f"; skipped: {reasons}" if reasons else "")
            )
        return self.stream.finish(starts_ns)


class _JointSelection:
    """Maps a message's ``name`` list onto the requested joint order, cached per name tuple."""

    def __init__(self, joints: Sequence[str] | None) -> None:
        self.joints: tuple[str, ...] | None = None if joints is None else tuple(joints)
        self._names: tuple[str, ...] | None = None
        self._index: list[int] | None = None
        self._identity = False

    def index(self, names: Sequence[str]) -> tuple[list[int] | None, bool, str | None]:
        """``(index, identity, error)`` for a message's joint names."""
        names = tuple(names)
        if names == self._names:
            return self._index, self._identity, None
        if self.joints is None:
            if len(set(names)) != len(names) or not names:
                return None, False, f"name: empty or repeated joint names {list(names)}"
            self.joints = names
        missing = [j for j in self.joints if j not in names]
        if missing:
            return None, False, f"name: joint(s) {missing} missing (message names {list(names)})"
        self._names = names
        self._index = [names.index(j) for j in self.joints]
        self._identity = self._index == list(range(len(names)))
        return self._index, self._identity, None


class JointStateHandler(Handler):
    """``sensor_msgs/JointState`` measurements: rows ``[position | velocity | effort]``."""

    def __init__(self, spec: JointStateTopic, store: Typestore, **kwargs: Any) -> None:
        super().__init__(spec.topic, m.JOINT_STATE, **kwargs)
        self.spec = spec
        self.decoder = m.JointStateDecoder(store)
        self.select = _JointSelection(spec.joints)
        self.has_velocity: bool | None = None
        self.has_effort: bool | None = None

    @property
    def joints(self) -> tuple[str, ...]:
        """The joint order of the columns (known after the first valid message)."""
        return self.select.joints or ()

    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        self.summary.received += 1
        try:
            header_ns, names, pos, vel, eff = self.decoder.decode(raw)
        except m.StampError as err:
            self._invalid(str(err))
            return
        except Exception as err:  # rosbags raises assorted errors on corrupt CDR
            self._invalid(f"data: malformed JointState ({type(err).__name__}: {err})")
            return
        index, identity, error = self.select.index(names)
        if error is not None or index is None:
            self._invalid(error or "name")
            return
        n = len(names)
        if len(pos) != n:
            self._invalid(f"position: expected {n} values (one per name), got {len(pos)}")
            return
        if self.has_velocity is None:
            self.has_velocity = self.spec.read_velocity and len(vel) == n
            self.has_effort = self.spec.read_effort and len(eff) == n
        parts = [pos]
        for wanted, values, fld in ((self.has_velocity, vel, "velocity"),
                                    (self.has_effort, eff, "effort")):  # fmt: skip
            if wanted:
                if len(values) != n:
                    self._invalid(f"{fld}: expected {n} values (one per name), got {len(values)}")
                    return
                parts.append(values)
        row: tuple[float, ...] = ()
        for values in parts:
            row += values if identity else tuple(values[i] for i in index)
        if not _finite(row):
            fld = ("position", "velocity", "effort")[
                next(k for k, v in enumerate(parts) if not _finite(v))
            ]
            self._invalid(f"{fld}: non-finite value")
            return
        self._stream(len(row)).add(self._stamp(header_ns, log_ns), row)

    def split(
        self, values: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, NDArray[np.float64] | None]:
        """Columns ``[q | dq | effort]`` of finished rows, effort scaled to N·m (or N)."""
        n = len(self.joints)
        q = values[:, :n]
        col = n
        dq = effort = None
        if self.has_velocity:
            dq, col = values[:, col : col + n], col + n
        if self.has_effort:
            scale = np.array([self.spec.effort_scale.get(j, 1.0) for j in self.joints])
            effort = values[:, col : col + n]
            if np.any(scale != 1.0):
                effort = effort * scale
        return q, dq, effort


class MocapHandler(Handler):
    """``PoseStamped`` / ``TransformStamped`` mocap: rows ``[x, y, z, qx, qy, qz, qw]``."""

    def __init__(self, spec: MocapTopic, msgtype: str, store: Typestore, **kwargs: Any) -> None:
        super().__init__(spec.topic, msgtype, **kwargs)
        self.spec = spec
        self.store = store
        self.shift = 0 if spec.stamps_latency_corrected else round(spec.latency * 1e9)

    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        self.summary.received += 1
        try:
            msg = self.store.deserialize_cdr(bytes(raw), self.summary.msgtype)
        except Exception as err:  # rosbags raises assorted errors on corrupt CDR
            self._invalid(f"data: malformed {self.summary.msgtype} ({type(err).__name__}: {err})")
            return
        if self.summary.msgtype == m.POSE_STAMPED:
            p, o = msg.pose.position, msg.pose.orientation
            fields = ("pose.position", "pose.orientation")
        else:
            p, o = msg.transform.translation, msg.transform.rotation
            fields = ("transform.translation", "transform.rotation")
        add_pose(self, msg.header.stamp, log_ns, (p.x, p.y, p.z), (o.x, o.y, o.z, o.w), fields)


def add_pose(
    handler: Handler,
    stamp: Any,
    log_ns: int,
    position: tuple[float, float, float],
    quat: tuple[float, float, float, float],
    fields: tuple[str, str],
    stream: TopicStream | None = None,
    stamp_field: str = "header.stamp",
) -> None:
    """Validate one pose and add it to ``stream`` (default: the handler's own 7-wide stream)."""
    try:
        header_ns = m.checked_stamp_ns(stamp, stamp_field)
    except m.StampError as err:
        handler._invalid(str(err))
        return
    if not _finite(position):
        handler._invalid(f"{fields[0]}: non-finite value")
        return
    norm = math.sqrt(sum(c * c for c in quat))
    if not math.isfinite(norm) or abs(norm - 1.0) > 1e-3:
        handler._invalid(f"{fields[1]}: not a unit quaternion (norm {norm:.6g})")
        return
    shift = getattr(handler, "shift", 0)
    target = stream if stream is not None else handler._stream(7)
    target.add(handler._stamp(header_ns, log_ns) - shift, position + quat)


class TfHandler(Handler):
    """``tf2_msgs/TFMessage``: one stream per ``(parent, child)`` edge; static edges kept last."""

    def __init__(self, topic: str, store: Typestore, *, static: bool, **kwargs: Any) -> None:
        super().__init__(topic, m.TF_MESSAGE, **kwargs)
        self.store = store
        self.static = static
        self.edges: dict[tuple[str, str], TopicStream] = {}
        self.static_edges: dict[tuple[str, str], tuple[float, ...]] = {}

    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        self.summary.received += 1
        try:
            msg = self.store.deserialize_cdr(bytes(raw), m.TF_MESSAGE)
        except Exception as err:  # rosbags raises assorted errors on corrupt CDR
            self._invalid(f"data: malformed TFMessage ({type(err).__name__}: {err})")
            return
        for tf in msg.transforms:
            edge = (tf.header.frame_id.lstrip("/"), tf.child_frame_id.lstrip("/"))
            tr, rot = tf.transform.translation, tf.transform.rotation
            fields = ("transforms.transform.translation", "transforms.transform.rotation")
            if self.static:
                row = (tr.x, tr.y, tr.z, rot.x, rot.y, rot.z, rot.w)
                if _finite(row):
                    self.static_edges[edge] = row
                else:
                    self._invalid(f"{fields[0]}: non-finite value ({edge[0]} -> {edge[1]})")
                continue
            stream = self.edges.get(edge)
            if stream is None:
                summary = TopicSummary(f"{self.summary.topic}:{edge[0]}->{edge[1]}", m.TF_MESSAGE)
                stream = self.edges[edge] = TopicStream(
                    summary, 7, capacity=1024, policy=self.policy, path=self.path
                )
            stream.summary.received += 1  # an invalid transform counts on the topic's summary
            add_pose(self, tf.header.stamp, log_ns, (tr.x, tr.y, tr.z),
                     (rot.x, rot.y, rot.z, rot.w), fields, stream,
                     "transforms.header.stamp")  # fmt: skip
        self.summary.used = self.summary.received - self.summary.invalid


class CommandHandler(Handler):
    """Control signals from ``JointState``, ``Float64MultiArray``, ``JointTrajectory`` or
    ``JointTrajectoryControllerState`` topics; channel names from ``CommandTopic.channel``."""

    def __init__(self, spec: CommandTopic, msgtype: str, store: Typestore, **kwargs: Any) -> None:
        super().__init__(spec.topic, msgtype, **kwargs)
        self.spec = spec
        self.store = store
        self.select = _JointSelection(None if msgtype == m.FLOAT64_MULTI_ARRAY else spec.names)
        self.decoder = m.JointStateDecoder(store) if msgtype == m.JOINT_STATE else None
        # JointTrajectory points: kept in time order, later messages replace the tail.
        self._points: list[tuple[int, tuple[float, ...]]] = []

    @property
    def channels(self) -> list[str]:
        """Channel names of the columns (known after the first valid message)."""
        if self.summary.msgtype == m.FLOAT64_MULTI_ARRAY:
            return [self.spec.channel(n) for n in self.spec.names or ()]
        return [self.spec.channel(j, f) for f in self.spec.fields for j in self.select.joints or ()]

    def _joint_row(self, names: Sequence[str], getter: Any) -> tuple[float, ...] | None:
        index, _, error = self.select.index(names)
        if error is not None or index is None:
            self._invalid(error or "name")
            return None
        row: list[float] = []
        for fld in self.spec.fields:
            values = getter(fld)
            if values is None or len(values) != len(names):
                got = 0 if values is None else len(values)
                self._invalid(f"{fld}: expected {len(names)} values (one per name), got {got}")
                return None
            row.extend(float(values[i]) for i in index)
        if not _finite(row):
            self._invalid(f"{'/'.join(self.spec.fields)}: non-finite value")
            return None
        return tuple(row)

    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        self.summary.received += 1
        msgtype = self.summary.msgtype
        try:
            if self.decoder is not None:
                header_ns, names, pos, vel, eff = self.decoder.decode(raw)
                msg = None
            else:
                msg = self.store.deserialize_cdr(bytes(raw), msgtype)
        except m.StampError as err:
            self._invalid(str(err))
            return
        except Exception as err:  # rosbags raises assorted errors on corrupt CDR
            self._invalid(f"data: malformed {msgtype} ({type(err).__name__}: {err})")
            return
        if msg is None:
            fields = {"position": pos, "velocity": vel, "effort": eff}
            row = self._joint_row(names, fields.get)
            if row is not None:
                self._stream(len(row)).add(self._stamp(header_ns, log_ns), row)
        elif msgtype == m.FLOAT64_MULTI_ARRAY:
            data = msg.data
            names = self.spec.names or ()
            if len(data) != len(names):
                self._invalid(f"data: expected {len(names)} values {list(names)}, got {len(data)}")
            elif not _finite(data.tolist()):
                self._invalid("data: non-finite value")
            else:
                self._stream(len(names)).add(log_ns, data)
        else:
            try:
                if msgtype == m.JOINT_TRAJECTORY:
                    self._trajectory(msg, log_ns)
                else:
                    self._controller_state(msg, log_ns)
            except m.StampError as err:
                self._invalid(str(err))

    def _trajectory(self, msg: Any, log_ns: int) -> None:
        start = m.checked_stamp_ns(msg.header.stamp)
        if start == 0 or self.stamps is StampSource.RECEIVE:
            start = log_ns  # a zero stamp means "start now" in trajectory_msgs
        new: list[tuple[int, tuple[float, ...]]] = []
        for point in msg.points:
            row = self._joint_row(
                msg.joint_names, lambda f, p=point: getattr(p, _POINT_ATTRS[f], None)
            )
            if row is None:
                return
            offset = m.checked_stamp_ns(point.time_from_start, "points.time_from_start")
            new.append((start + offset, row))
        if not new:
            self._invalid("points: empty trajectory")
            return
        t_new = new[0][0]
        while self._points and self._points[-1][0] >= t_new:
            self._points.pop()
        self._points.extend(new)

    def _controller_state(self, msg: Any, log_ns: int) -> None:
        def getter(fld: str) -> Any:
            point_name, _, quantity = fld.partition("_")
            point = getattr(msg, point_name, None)
            if point is None and point_name in _OLD_POINTS:
                point = getattr(msg, _OLD_POINTS[point_name], None)
            return None if point is None else getattr(point, _POINT_ATTRS[quantity], None)

        header_ns = m.checked_stamp_ns(msg.header.stamp)
        row = self._joint_row(msg.joint_names, getter)
        if row is not None:
            self._stream(len(row)).add(self._stamp(header_ns, log_ns), row)

    def finish(
        self, starts_ns: NDArray[np.int64] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        if self._points:
            stream = self._stream(len(self._points[0][1]))
            for stamp, row in self._points:
                stream.add(stamp, row)
            self._points = []
        return super().finish(starts_ns)


class SegmentHandler(Handler):
    """``dynid_msgs/TrajectorySegment``: each valid message becomes one ``Trajectory``.

    ``finish`` (inherited) raises with the skip reasons; call it only when nothing was usable.
    """

    def __init__(self, topic: str, store: Typestore, *, path: str, strict: bool) -> None:
        super().__init__(topic, m.TRAJECTORY_SEGMENT, path=path, stamps=StampSource.HEADER,
                         strict=strict, policy=OutOfOrder.SKIP, capacity=16)  # fmt: skip
        self.store = store
        self.trajectories: list[Trajectory] = []

    def handle(self, raw: bytes | memoryview, log_ns: int) -> None:
        self.summary.received += 1
        traj = self._trajectory(raw)
        if traj is not None:
            self.trajectories.append(traj)
            self.summary.used += 1

    def _trajectory(self, raw: bytes | memoryview) -> Trajectory | None:
        """One segment as a trajectory, or ``None`` after counting it as invalid."""
        try:
            msg = self.store.deserialize_cdr(bytes(raw), m.TRAJECTORY_SEGMENT)
        except Exception as err:  # rosbags raises assorted errors on corrupt CDR
            self._invalid(f"data: malformed TrajectorySegment ({type(err).__name__}: {err})")
            return None
        try:
            return m.segment_to_trajectory(msg, {"source": self.path, "origin": msg.source})
        except SegmentError as err:
            self._invalid(str(err))
            return None
