"""ROS 2 message types known to the data layer, the type store, and a fast JointState decoder.

The core works without any ROS installation: message definitions come from ``rosbags``' built-in
type store (``ROS2_KILTED``), from dynid's own ``TrajectorySegment`` definition below, and from the
definitions a bag carries for any other type (e.g. ``control_msgs``).
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import Any

import numpy as np
from rosbags.interfaces import Connection, MessageDefinitionFormat
from rosbags.rosbag2 import StoragePlugin
from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from dynid.data.errors import BagReadError, DataError, SegmentError, TrajectoryError
from dynid.data.trajectory import Trajectory
from dynid.resources import repo_root

JOINT_STATE = "sensor_msgs/msg/JointState"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
TRANSFORM_STAMPED = "geometry_msgs/msg/TransformStamped"
TF_MESSAGE = "tf2_msgs/msg/TFMessage"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
CONTROLLER_STATE = "control_msgs/msg/JointTrajectoryControllerState"
TRAJECTORY_SEGMENT = "dynid_msgs/msg/TrajectorySegment"

#: Field definitions of ``dynid_msgs/msg/TrajectorySegment`` (packages/dynid_msgs/msg), used when
#: the interface package's source is not beside the core. Matrices are row-major ``[T, n]``.
TRAJECTORY_SEGMENT_DEFINITION = """\
std_msgs/Header header
string[] joint_names
float64[] time
float64[] position
float64[] velocity
float64[] effort
string[] command_names
float64[] command
string[] observation_names
float64[] observation
string source
"""


class StorageFormat(Enum):
    """rosbag2 storage back ends; ``MCAP`` is the ROS 2 default since Iron."""

    MCAP = "mcap"
    SQLITE3 = "sqlite3"

    @property
    def plugin(self) -> StoragePlugin:
        """The matching ``rosbags`` storage plugin."""
        return StoragePlugin.MCAP if self is StorageFormat.MCAP else StoragePlugin.SQLITE3


def trajectory_segment_definition() -> str:
    """The ``TrajectorySegment`` definition: the source checkout's ``.msg`` file if present."""
    path = repo_root() / "packages" / "dynid_msgs" / "msg" / "TrajectorySegment.msg"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    return TRAJECTORY_SEGMENT_DEFINITION


def make_typestore() -> Typestore:
    """A ROS 2 (Kilted) type store with ``dynid_msgs/msg/TrajectorySegment`` registered."""
    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg(trajectory_segment_definition(), TRAJECTORY_SEGMENT))
    return store


def register_bag_types(store: Typestore, connections: list[Connection], path: str) -> None:
    """Register the definitions a bag carries for message types ``store`` does not know yet."""
    for conn in connections:
        if conn.msgtype in store.types or conn.msgdef.format != MessageDefinitionFormat.MSG:
            continue
        try:
            store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        except TypesysError as err:
            raise BagReadError(
                f"{path}: topic {conn.topic!r}: cannot parse the bag's definition of "
                f"{conn.msgtype}: {err}"
            ) from err


def stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class StampError(DataError, ValueError):
    """A ``builtin_interfaces`` Time or Duration that is no valid time; ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def checked_ns(sec: int, nanosec: int, field: str = "header.stamp") -> int:
    """``sec`` s + ``nanosec`` ns as integer nanoseconds, refusing what is no valid ROS time.

    Raises:
        StampError: ``nanosec`` not below 1e9 (it would alias a later second) or a negative
            ``sec``, naming ``field``.
    """
    if not 0 <= nanosec < 1_000_000_000:
        raise StampError(field, f"nanosec {nanosec} is not below 1e9")
    if sec < 0:
        raise StampError(field, f"sec {sec} is negative")
    return sec * 1_000_000_000 + nanosec


def checked_stamp_ns(stamp: Any, field: str = "header.stamp") -> int:
    """``builtin_interfaces/Time`` (or ``Duration``) as integer nanoseconds, see ``checked_ns``."""
    return checked_ns(int(stamp.sec), int(stamp.nanosec), field)


class JointStateDecoder:
    """Decode CDR-serialised ``sensor_msgs/msg/JointState`` without building message objects.

    Little-endian CDR is parsed in place with ``struct``; the joint-name block is compared as raw
    bytes with the previous message so names are only decoded when they change. Big-endian data
    falls back to the type store. ``decode`` returns ``(stamp_ns, names, position, velocity,
    effort)`` with tuples of floats.
    """

    _U32 = struct.Struct("<I")
    _STAMP = struct.Struct("<iI")

    def __init__(self, store: Typestore) -> None:
        self._store = store
        self._names_raw = b""
        self._names: tuple[str, ...] = ()
        self._vectors: dict[int, struct.Struct] = {}

    def _vector(self, data: bytes | memoryview, pos: int) -> tuple[tuple[float, ...], int]:
        pos += -pos % 4
        (count,) = self._U32.unpack_from(data, pos + 4)
        pos += 4
        if count == 0:
            return (), pos
        pos += -pos % 8
        fmt = self._vectors.get(count)
        if fmt is None:
            fmt = self._vectors[count] = struct.Struct(f"<{count}d")
        return fmt.unpack_from(data, pos + 4), pos + 8 * count

    def decode(
        self, data: bytes | memoryview
    ) -> tuple[int, tuple[str, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """Decode one message.

        Raises:
            StampError: a header stamp that is no valid time (see ``checked_ns``).
            struct.error, ValueError, ...: malformed data.
        """
        if data[1] != 1:  # encapsulation kind 0x0001 is CDR_LE; anything else goes the slow way
            msg = self._store.deserialize_cdr(bytes(data), JOINT_STATE)
            return (
                checked_stamp_ns(msg.header.stamp),
                tuple(msg.name),
                tuple(msg.position.tolist()),
                tuple(msg.velocity.tolist()),
                tuple(msg.effort.tolist()),
            )
        u32 = self._U32.unpack_from
        sec, nsec = self._STAMP.unpack_from(data, 4)
        (flen,) = u32(data, 12)
        pos = 12 + flen  # payload offset of the name block (payload starts at byte 4)
        pos += -pos % 4
        start = pos
        cached = self._names_raw
        stamp = checked_ns(sec, nsec)
        if cached and data[start + 4 : start + 4 + len(cached)] == cached:
            # same joint-name block as the previous message: skip walking it
            return self._values(data, start + len(cached), stamp)
        (count,) = u32(data, pos + 4)
        pos += 4
        for _ in range(count):
            pos += -pos % 4
            (slen,) = u32(data, pos + 4)
            pos += 4 + slen
        raw = bytes(data[start + 4 : pos + 4])
        if raw != cached:
            names = []
            p = start + 4
            for _ in range(count):
                p += -p % 4
                (slen,) = u32(data, p + 4)
                names.append(bytes(data[p + 8 : p + 8 + slen - 1]).decode("utf-8"))
                p += 4 + slen
            self._names_raw, self._names = raw, tuple(names)
        return self._values(data, pos, stamp)

    def _values(
        self, data: bytes | memoryview, pos: int, stamp: int
    ) -> tuple[int, tuple[str, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
        """The three float64 sequences after the name block ending at payload offset ``pos``."""
        position, pos = self._vector(data, pos)
        velocity, pos = self._vector(data, pos)
        effort, pos = self._vector(data, pos)
        if pos + 4 > len(data):
            raise ValueError(f"message ends at byte {len(data)}, {pos + 4} needed")
        return stamp, self._names, position, velocity, effort


#: ``Trajectory`` attribute -> the ``TrajectorySegment`` field it comes from.
_SEGMENT_FIELDS = {"t": "time", "q": "position", "dq": "velocity", "effort": "effort",
                   "command": "command", "obs": "observation", "joint_names": "joint_names",
                   "command_names": "command_names", "obs_names": "observation_names"}  # fmt: skip


def segment_to_trajectory(msg: Any, meta: dict[str, Any]) -> Trajectory:
    """A validated ``Trajectory`` of a ``dynid_msgs/TrajectorySegment`` message.

    ``msg`` may come from rosbags or from rclpy (same field names). The matrices are row-major
    ``[T, n]``; empty velocity/effort/command/observation fields become ``None``. ``meta`` is
    stored on the trajectory, with ``t0_ns`` (the header stamp) and ``frame_id`` added.

    Raises:
        SegmentError: naming the field whose length, values or names are wrong.
    """
    T = len(msg.time)
    if T == 0:
        raise SegmentError("time", "empty segment")
    columns = {
        "position": list(msg.joint_names),
        "velocity": list(msg.joint_names),
        "effort": list(msg.joint_names),
        "command": list(msg.command_names),
        "observation": list(msg.observation_names),
    }
    arrays: dict[str, np.ndarray | None] = {}
    for fld, names in columns.items():
        values = np.asarray(getattr(msg, fld), dtype=np.float64)
        if values.size == 0 and fld != "position":
            arrays[fld] = None
        elif values.size != T * len(names) or not names:
            raise SegmentError(
                fld, f"expected {T} x {len(names)} = {T * len(names)} values, got {values.size}"
            )
        else:
            arrays[fld] = values.reshape(T, len(names))
    try:
        t0_ns = checked_stamp_ns(msg.header.stamp)
    except StampError as err:
        raise SegmentError(err.field, err.reason) from None
    meta = {**meta, "t0_ns": t0_ns, "frame_id": msg.header.frame_id}
    try:
        return Trajectory(
            t=np.asarray(msg.time, dtype=np.float64),
            q=arrays["position"],
            joint_names=columns["position"],
            dq=arrays["velocity"],
            effort=arrays["effort"],
            command=arrays["command"],
            command_names=columns["command"],
            obs=arrays["observation"],
            obs_names=columns["observation"],
            meta=meta,
        )
    except TrajectoryError as err:
        field, _, reason = str(err).removeprefix("Trajectory.").partition(": ")
        raise SegmentError(_SEGMENT_FIELDS.get(field, field), reason) from err
