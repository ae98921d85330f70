"""The recorder's spool: every sample of the open segment on disk as it arrives.

While a segment is open the recorder appends each sample it stores to a spool file,
``<output_dir>/spool/segment_<start ns>.mcap``: an MCAP file (ROS 2 profile, CDR messages with
their ``ros2msg`` schemas, log time = time of receipt) written without chunks and flushed to the
operating system at least every ``FLUSH_S`` seconds, so a crash (kill -9, power cut of the
process) loses at most that much. Each message is rebuilt from the stored sample (the recorded
joints, efforts already scaled, mocap stamps already latency-corrected), so the spool holds
exactly what the recorder's buffers hold; a metadata record ``dynid.recorder`` carries what is
needed to turn it into a segment (layout, joints, start, grid rate, storage).

When the segment's bag is written the spool is deleted. A spool left behind by a crash is
recovered by the next recorder started on the same ``output_dir`` (:func:`read_spool` gives
its messages; the recorder turns them into a segment bag as it would have), and is kept, with
an error naming it, when that fails. The file stays locked (``flock``) while its recorder
lives, so a second recorder on the same folder never takes a live spool for a leftover.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib
import json
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from geometry_msgs.msg import PoseStamped, TransformStamped
from numpy.typing import NDArray
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayLayout
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from dynid.data import BagLayout, CommandTopic, JointStateTopic, MocapTopic, TfLookup
from dynid.data import messages as m
from dynid.data.topics import StampSource
from dynid_ros import conversions as cv

MAGIC = b"\x89MCAP0\r\n"
FLUSH_S = 0.5  # the longest time a received sample stays in the process before the OS has it
META_NAME = "dynid.recorder"
SUFFIX = ".mcap"
_OP_HEADER, _OP_FOOTER, _OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE = 0x01, 0x02, 0x03, 0x04, 0x05
_OP_METADATA, _OP_DATA_END = 0x0C, 0x0F
_MAX_RECORD = 1 << 30  # a record length above this is damage, not data


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def _map(values: dict[str, str]) -> bytes:
    body = b"".join(_string(k) + _string(v) for k, v in sorted(values.items()))
    return struct.pack("<I", len(body)) + body


def _record(op: int, body: bytes) -> bytes:
    return struct.pack("<BQ", op, len(body)) + body


# ------------------------------------------------------------------------------ the layout
def layout_to_json(layout: BagLayout) -> dict[str, Any]:
    """``layout`` as JSON-able values (:func:`layout_from_json` reads them back)."""
    out = dataclasses.asdict(layout)
    out["stamps"] = layout.stamps.value
    out["joint_states"]["effort_scale"] = dict(layout.joint_states.effort_scale)
    return out


def layout_from_json(data: dict[str, Any]) -> BagLayout:
    """The ``BagLayout`` of :func:`layout_to_json`'s values."""
    js = dict(data["joint_states"])
    if js.get("joints") is not None:
        js["joints"] = tuple(js["joints"])
    cmds = []
    for c in data.get("commands", ()):
        c = dict(c)
        c["fields"] = tuple(c["fields"])
        c["names"] = None if c.get("names") is None else tuple(c["names"])
        cmds.append(CommandTopic(**c))
    return BagLayout(
        joint_states=JointStateTopic(**js),
        mocap=tuple(MocapTopic(**x) for x in data.get("mocap", ())),
        tf=tuple(TfLookup(**x) for x in data.get("tf", ())),
        commands=tuple(cmds),
        stamps=StampSource(data.get("stamps", StampSource.HEADER.value)),
    )


# ------------------------------------------------------------------------------ messages
class MessageBuilder:
    """Rebuilds the message of a stored sample (the inverse of the recorder's conversions).

    Keys name the buffers: ``("js",)``, ``("pose", topic)``, ``("tf", parent, child)``,
    ``("tf_static", parent, child)`` and ``("cmd", topic)``.
    """

    def __init__(self, layout: BagLayout, world_frame: str) -> None:
        self.layout = layout
        self.world = world_frame
        self.mocap = {s.topic: s for s in layout.mocap}
        self.commands = {c.topic: c for c in layout.commands}
        self.tf_topic = layout.tf[0].topic if layout.tf else "/tf"
        self.tf_static_topic = layout.tf[0].static_topic if layout.tf else "/tf_static"
        #: what the recorder learnt from the first messages: the joint-state columns and the
        #: joints of each JointState / JointTrajectory command topic
        self.joints: tuple[str, ...] = ()
        self.has_velocity = self.has_effort = False
        self.command_joints: dict[str, tuple[str, ...]] = {}

    def topic(self, key: tuple[str, ...]) -> tuple[str, str]:
        """``(topic, message type)`` of the buffer ``key``."""
        kind = key[0]
        if kind == "js":
            return self.layout.joint_states.topic, m.JOINT_STATE
        if kind == "pose":
            return key[1], self.mocap[key[1]].msgtype
        if kind == "tf":
            return self.tf_topic, m.TF_MESSAGE
        if kind == "tf_static":
            return self.tf_static_topic, m.TF_MESSAGE
        return key[1], self.commands[key[1]].msgtype

    def build(self, key: tuple[str, ...], stamp: int, row: NDArray[np.float64]) -> Any:
        """The message of sample ``(stamp, row)`` of buffer ``key``."""
        kind = key[0]
        if kind == "js":
            n = len(self.joints)
            msg = JointState(name=list(self.joints), position=row[:n].tolist())
            col = n
            if self.has_velocity:
                msg.velocity, col = row[col : col + n].tolist(), col + n
            if self.has_effort:
                msg.effort = row[col : col + n].tolist()
            msg.header.stamp = cv.ns_to_stamp(stamp)
            return msg
        if kind == "pose":
            spec = self.mocap[key[1]]
            if spec.msgtype == m.TRANSFORM_STAMPED:
                msg = TransformStamped(child_frame_id=spec.body)
                _fill_transform(msg, row)
            else:
                msg = PoseStamped()
                p, o = msg.pose.position, msg.pose.orientation
                p.x, p.y, p.z = float(row[0]), float(row[1]), float(row[2])
                o.x, o.y, o.z, o.w = (float(v) for v in row[3:7])
            msg.header.stamp, msg.header.frame_id = cv.ns_to_stamp(stamp), self.world
            return msg
        if kind in ("tf", "tf_static"):
            from tf2_msgs.msg import TFMessage  # only with TF lookups (see recorder)

            tf = TransformStamped(child_frame_id=key[2])
            tf.header.stamp, tf.header.frame_id = cv.ns_to_stamp(stamp), key[1]
            _fill_transform(tf, row)
            return TFMessage(transforms=[tf])
        spec = self.commands[key[1]]
        if spec.msgtype == m.FLOAT64_MULTI_ARRAY:
            return Float64MultiArray(layout=MultiArrayLayout(), data=row.tolist())
        joints = self.command_joints.get(key[1], ())
        n = len(joints)
        parts = {f: row[i * n : (i + 1) * n].tolist() for i, f in enumerate(spec.fields)}
        if spec.msgtype == m.JOINT_STATE:
            msg = JointState(name=list(joints), **parts)
            msg.header.stamp = cv.ns_to_stamp(stamp)
            return msg
        attrs = {"position": "positions", "velocity": "velocities",
                 "acceleration": "accelerations", "effort": "effort"}  # fmt: skip
        point = JointTrajectoryPoint(**{attrs[f]: v for f, v in parts.items()})
        msg = JointTrajectory(joint_names=list(joints), points=[point])
        msg.header.stamp = cv.ns_to_stamp(stamp)
        return msg


def _fill_transform(msg: Any, row: NDArray[np.float64]) -> None:
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = float(row[0]), float(row[1]), float(row[2])
    r.x, r.y, r.z, r.w = (float(v) for v in row[3:7])


# ------------------------------------------------------------------------------ writing
class SpoolWriter:
    """Appends messages to a new spool file (see the module docstring).

    Raises ``OSError`` from every method when the disk refuses (full, not writable); the
    recorder then counts the error and starts a new spool from its buffers later.
    """

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO = path.open("xb")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._file.write(MAGIC)
            self._file.write(_record(_OP_HEADER, _string("ros2") + _string("dynid recorder")))
            meta_body = _string(META_NAME) + _map({"json": json.dumps(meta)})
            self._file.write(_record(_OP_METADATA, meta_body))
            self._file.flush()
        except BaseException:
            self._file.close()
            raise
        self._store = m.make_typestore()
        self._schemas: dict[str, int] = {}
        self._channels: dict[str, int] = {}
        self._last_log = 0
        self._last_flush = time.monotonic()
        self.messages = 0

    def _channel(self, topic: str, msgtype: str) -> int:
        cid = self._channels.get(topic)
        if cid is not None:
            return cid
        sid = self._schemas.get(msgtype)
        if sid is None:
            sid = self._schemas[msgtype] = len(self._schemas) + 1
            text, _ = self._store.generate_msgdef(msgtype, ros_version=2)
            data = text.encode()
            body = (struct.pack("<H", sid) + _string(msgtype) + _string("ros2msg")
                    + struct.pack("<I", len(data)) + data)  # fmt: skip
            self._file.write(_record(_OP_SCHEMA, body))
        cid = self._channels[topic] = len(self._channels) + 1
        body = struct.pack("<HH", cid, sid) + _string(topic) + _string("cdr") + _map({})
        self._file.write(_record(_OP_CHANNEL, body))
        return cid

    def add(self, topic: str, msgtype: str, msg: Any, stamp_ns: int) -> None:
        """Append ``msg`` (stamped ``stamp_ns``: its publish time) received now."""
        cid = self._channel(topic, msgtype)
        data = serialize_message(msg)
        self._last_log = log = max(time.time_ns(), self._last_log)
        head = struct.pack("<BQHIQQ", _OP_MESSAGE, 22 + len(data), cid, self.messages, log,
                           max(int(stamp_ns), 0))  # fmt: skip
        self._file.write(head + data)
        self.messages += 1
        if time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Hand what is buffered to the operating system (survives the process's death)."""
        self._file.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """End the data section (a complete MCAP without summary) and close the file."""
        if self._file.closed:
            return
        try:
            self._file.write(_record(_OP_DATA_END, struct.pack("<I", 0)))
            self._file.write(_record(_OP_FOOTER, struct.pack("<QQI", 0, 0, 0)) + MAGIC)
            self._file.flush()
        finally:
            self._file.close()

    def abandon(self) -> None:
        """Close the file as it is (after a write error); what reached the disk stays."""
        with contextlib.suppress(OSError):
            self._file.close()


# ------------------------------------------------------------------------------ reading
@dataclass
class SpoolContents:
    """What a spool file holds.

    Attributes:
        path: the file.
        meta: the recorder's ``dynid.recorder`` record (empty when missing).
        messages: ``(topic, message type, log time, publish time (the sample's stamp), CDR)``.
        complete: the file ends with a footer (the segment was closed before the crash).
        unread_bytes: bytes at the end that are not a whole record (cut off by the crash).
    """

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    messages: list[tuple[str, str, int, int, bytes]] = field(default_factory=list)
    complete: bool = False
    unread_bytes: int = 0


class SpoolError(ValueError):
    """A spool file that cannot be read at all (not an MCAP, no recorder metadata)."""


def _records(data: bytes, start: int) -> Iterator[tuple[int, int, bytes]]:
    """``(offset, opcode, body)`` of the whole records from ``start``."""
    pos = start
    while pos + 9 <= len(data):
        op, size = struct.unpack_from("<BQ", data, pos)
        if size > _MAX_RECORD or pos + 9 + size > len(data):
            return
        yield pos, op, data[pos + 9 : pos + 9 + size]
        pos += 9 + size


def _read_string(body: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<I", body, pos)
    return body[pos + 4 : pos + 4 + n].decode(), pos + 4 + n


def read_spool(path: Path) -> SpoolContents:
    """Read a spool, complete or cut off by a crash (a partial last record is ignored).

    Raises:
        SpoolError: not an MCAP spool of the recorder (named with the reason).
    """
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise SpoolError(f"{path}: not an MCAP file ({len(data)} bytes)")
    out = SpoolContents(path)
    channels: dict[int, tuple[str, str]] = {}
    schemas: dict[int, str] = {}
    end = len(MAGIC)
    try:
        for pos, op, body in _records(data, len(MAGIC)):
            end = pos + 9 + len(body)
            if op == _OP_SCHEMA:
                (sid,) = struct.unpack_from("<H", body, 0)
                schemas[sid], _ = _read_string(body, 2)
            elif op == _OP_CHANNEL:
                cid, sid = struct.unpack_from("<HH", body, 0)
                topic, _ = _read_string(body, 4)
                channels[cid] = (topic, schemas.get(sid, ""))
            elif op == _OP_MESSAGE:
                cid, _, log, pub = struct.unpack_from("<HIQQ", body, 0)
                topic, msgtype = channels[cid]
                out.messages.append((topic, msgtype, log, pub, body[22:]))
            elif op == _OP_METADATA:
                name, p = _read_string(body, 0)
                if name == META_NAME:
                    key, p = _read_string(body, p + 4)  # after the map's byte length
                    value, _ = _read_string(body, p)
                    if key == "json":
                        out.meta = json.loads(value)
            elif op == _OP_FOOTER:
                out.complete = True
                end += len(MAGIC)
                break
    except (struct.error, KeyError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SpoolError(f"{path}: damaged record at byte {end}: {type(err).__name__}: {err}") \
            from err  # fmt: skip
    if not out.meta:
        raise SpoolError(f"{path}: no '{META_NAME}' metadata record")
    out.unread_bytes = max(len(data) - end, 0)
    return out


def message_type(msgtype: str) -> type:
    """The Python class of ``"pkg/msg/Name"`` (``SpoolError`` when it is not importable)."""
    pkg, _, name = msgtype.rpartition("/")
    try:
        return getattr(importlib.import_module(pkg.replace("/", ".")), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise SpoolError(f"message type {msgtype!r} is not importable: {err}") from err


def leftover_spools(folder: Path) -> list[Path]:
    """The spool files in ``folder`` that no living recorder holds (oldest first)."""
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        try:
            with path.open("rb") as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a recorder writes it now
        except OSError:
            pass  # unreadable: reported by the recovery
        out.append(path)
    return out


def remove(path: Path) -> None:
    """Delete a spool file whose segment is on disk now (missing already: fine)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
