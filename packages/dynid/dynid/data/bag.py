"""Read ROS 2 bags (mcap or sqlite3) into ``Dataset``s with the pure-Python ``rosbags`` library.

``read_bag`` streams every message once, decodes it with a per-topic handler (``decode.py``),
and aligns all streams onto the joint-state time grid (linear interpolation for vectors, slerp
for quaternions). ``iter_joint_states`` yields fixed-size chunks for bags larger than memory.
``read_segments`` reads dynid's own ``TrajectorySegment`` messages. Every read returns a
``ReadSummary`` with the duplicated, out-of-order, invalid and dropped messages per topic. mcap
files are checked against their CRCs before any message is read (``open_bag``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rosbags.interfaces import Connection
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.storage_mcap import McapReader

from dynid.data import mcap_crc
from dynid.data import messages as m
from dynid.data import tf as tf_chain
from dynid.data.align import align_streams, interp_linear, uniform_grid
from dynid.data.decode import (
    CommandHandler,
    Handler,
    JointStateHandler,
    MocapHandler,
    SegmentHandler,
    TfHandler,
)
from dynid.data.errors import BagReadError
from dynid.data.stream import ReadSummary, TopicStream
from dynid.data.topics import BagLayout, JointStateTopic, OutOfOrder, StampSource
from dynid.data.trajectory import Dataset, Trajectory

#: ``metadata.yaml`` custom-data key under which ``write_bag`` stores segment bounds and metadata.
SEGMENTS_KEY = "dynid.segments"
#: Topic of the recorder node's ``TrajectorySegment`` output.
DEFAULT_SEGMENT_TOPIC = "/recorder/segment"
_POSE_CHANNELS = ("x", "y", "z", "qx", "qy", "qz", "qw")
_COMMAND_TYPES = (m.JOINT_STATE, m.FLOAT64_MULTI_ARRAY, m.JOINT_TRAJECTORY, m.CONTROLLER_STATE)
_log = logging.getLogger(__name__)
#: Fewest bytes one message takes in a storage file (an mcap message record has a 31-byte header
#: and at least 4 bytes of CDR; a sqlite3 row more): bounds the messages a file can hold.
_MIN_MESSAGE_BYTES = 32


@contextmanager
def open_bag(path: str | Path, notes: list[str] | None = None) -> Iterator[Reader]:
    """Open a bag directory (or a bare ``.mcap`` / ``.db3`` file) as a ``rosbags`` reader.

    Every error of ``rosbags`` and of the storage while opening (a missing file, a truncated or
    corrupt index, ...) becomes ``BagReadError`` naming the path; :func:`bag_messages` does the
    same while reading.

    Before any message is read, every mcap file of the bag is checked against the CRCs it carries
    (chunks, data section, index; ``mcap_crc.verify``): a mismatch is a ``BagReadError`` naming the
    file and the damaged chunk (byte offset, log times, topics) or section, so a damaged recording
    is never read as if it were whole. What carries no CRC cannot be verified and is read all the
    same, with a note saying so: mcap files of writers that compute none (``rosbags`` itself, some
    tools), and sqlite3 storage, which has no checksums at all (damage inside a row shows only
    where it breaks decoding or validation). The notes go to ``notes`` when given, otherwise they
    are logged as warnings.
    """
    path = Path(path)
    try:
        reader = Reader(path)
        reader.open()
    except Exception as err:  # rosbags and the storage raise assorted errors on a corrupt index
        raise BagReadError(
            f"{path}: cannot open bag (missing, truncated or corrupt): {_one_line(err)}"
        ) from err
    try:
        for note in _verify(reader):
            if notes is None:
                _log.warning("%s", note)
            else:
                notes.append(note)
        yield reader
    finally:
        reader.close()


def _one_line(err: BaseException) -> str:
    """``"<type>: <message>"`` on one line (YAML and sqlite errors span several)."""
    return " ".join(f"{type(err).__name__}: {err}".split())


def _verify(reader: Reader) -> list[str]:
    """Check the CRCs of every storage file of an open bag; notes on what cannot be verified."""
    storage = reader.storage
    out = []
    for file in getattr(storage, "storages", None) or [storage]:
        if isinstance(file, McapReader):
            note = mcap_crc.verify(file.path).unverified()
        else:
            note = (
                f"{file.path}: sqlite3 storage carries no CRC, so damage inside a message cannot "
                "be detected"
            )
        if note is not None:
            out.append(note)
    return out


def bag_messages(
    reader: Reader, path: Path, connections: list[Connection], start: int | None = None
) -> Iterator[tuple[Connection, int, memoryview]]:
    """``reader.messages(connections, start)`` with every error of the storage layer raised as
    ``BagReadError`` naming ``path``, the topics read and the last message read.

    A corrupt chunk surfaces from ``rosbags`` and the storage libraries as many exception types
    (``ReaderError``, ``sqlite3.Error``, ``struct.error``, ``OverflowError``,
    ``UnicodeDecodeError``, decompression errors, ...), so every exception of the reader's
    iteration is converted; exceptions of the caller's loop body pass through unchanged.

    Yields:
        ``(connection, log time (ns), serialized message)`` in log-time order.
    """
    messages = reader.messages(connections=connections, start=start)
    conn, log_ns = None, 0  # the last message read (formatted only on an error: a hot loop)
    while True:
        try:
            conn, log_ns, raw = next(messages)
        except StopIteration:
            return
        except Exception as err:  # any storage-layer failure means the bag is unreadable here
            topics = sorted({c.topic for c in connections})
            last = ("before the first message" if conn is None
                    else f"after a message on {conn.topic!r} logged at {log_ns} ns")  # fmt: skip
            raise BagReadError(
                f"{path}: bag is truncated or corrupt (reading {topics}; stopped {last}): "
                f"{_one_line(err)}"
            ) from err
        yield conn, log_ns, raw


def _storage(path: Path) -> str:
    """``"mcap"`` or ``"sqlite3"`` from the bag's storage file suffixes."""
    files = list(path.iterdir()) if path.is_dir() else [path]
    return "sqlite3" if any(f.suffix == ".db3" for f in files) else "mcap"


def _storage_bytes(path: Path) -> int:
    """Bytes of the bag's files (a bound on how many messages they can hold)."""
    files = list(path.iterdir()) if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file())


def _claimed(conn: Connection) -> int:
    """The message count the bag's metadata announces for ``conn`` (0 when it is not a count)."""
    n = conn.msgcount
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _capacity(conn: Connection, storage_bytes: int) -> int:
    """Initial buffer rows for ``conn``'s samples: the count the metadata announces, but never
    more than the storage files can hold (metadata may claim anything, e.g. 10⁹ messages);
    buffers grow as messages are read."""
    return max(16, min(_claimed(conn), storage_bytes // _MIN_MESSAGE_BYTES))


def _connection(reader: Reader, topic: str, types: tuple[str, ...], path: Path) -> Connection:
    """The first connection of ``topic``; every connection of it must have one of ``types``."""
    conns = [c for c in reader.connections if c.topic == topic]
    if not conns:
        available = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
        raise BagReadError(f"{path}: topic {topic!r} not in bag; available: {available}")
    for conn in conns:
        if conn.msgtype not in types:
            raise BagReadError(
                f"{path}: topic {topic!r} has type {conn.msgtype}, expected " + " or ".join(types)
            )
    return conns[0]


def _custom_data(reader: Reader) -> dict[str, str]:
    meta = getattr(reader.storage, "metadata", None)
    return dict(getattr(meta, "custom", None) or {})


def _segments(reader: Reader, path: Path) -> list[dict[str, Any]]:
    """The segment bounds ``write_bag`` stored in the metadata (``[]`` when there are none).

    Raises:
        BagReadError: one line naming the key, when the value is not JSON or not a list of
            ``{"start_ns": int, "end_ns": int, "meta": {...}}`` with ``start_ns <= end_ns``.
    """
    text = _custom_data(reader).get(SEGMENTS_KEY)
    if text is None:
        return []
    where = f"{path}: metadata custom_data {SEGMENTS_KEY!r}"
    try:
        segments = json.loads(text)
    except (TypeError, ValueError) as err:
        raise BagReadError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(segments, list):
        raise BagReadError(f"{where}: expected a list of segments, got {type(segments).__name__}")
    for i, seg in enumerate(segments):
        bounds = [seg.get(k) for k in ("start_ns", "end_ns")] if isinstance(seg, dict) else []
        if not (
            len(bounds) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            and bounds[0] <= bounds[1]
            and isinstance(seg.get("meta", {}), dict)
        ):
            shown = json.dumps(seg)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise BagReadError(
                f'{where}[{i}]: expected {{"start_ns": int, "end_ns": int >= start_ns, '
                f'"meta": {{...}}}}, got {shown}'
            )
    return segments


def _stream_messages(reader: Reader, handlers: dict[str, Handler], path: Path) -> None:
    conns = [c for c in reader.connections if c.topic in handlers]
    for conn, log_ns, raw in bag_messages(reader, path, conns):
        handlers[conn.topic].handle(raw, log_ns)


@dataclass
class _Channels:
    """One aligned secondary stream: names, stamps ``[n]`` (ns; ``None`` = constant), rows."""

    names: list[str]
    stamps: NDArray[np.int64] | None
    values: NDArray[np.float64]
    is_command: bool
    topic: str


def read_bag(
    path: str | Path,
    layout: BagLayout | None = None,
    *,
    strict: bool = False,
    out_of_order: OutOfOrder = OutOfOrder.SKIP,
    rate: float | None = None,
    split_segments: bool = True,
) -> tuple[Dataset, ReadSummary]:
    """Read a bag into a ``Dataset`` on the joint-state time grid.

    Args:
        path: bag directory (or ``.mcap`` / ``.db3`` file).
        layout: which topics hold joint states, mocap, TF lookups and commands.
        strict: raise ``BagReadError`` on the first invalid message instead of counting it.
        out_of_order: policy for stamps going backwards within a topic.
        rate: resample onto a uniform grid of this rate (Hz) instead of the joint-state stamps.
        split_segments: split into the trajectories ``write_bag`` recorded in the metadata.

    Returns:
        The dataset (one trajectory per segment; times in s from each segment's first grid
        sample, absolute start in ``meta["t0_ns"]``) and the read summary.

    Raises:
        BagReadError: missing file/topic, wrong type, truncated data, a CRC mismatch (see
            :func:`open_bag`), segment bounds in the metadata that are not valid, no usable
            message, or streams that never overlap in time; the message names file, topic and
            field (or metadata key).
    """
    layout = layout or BagLayout()
    path = Path(path)
    notes: list[str] = []
    with open_bag(path, notes) as reader:
        store = m.make_typestore()
        m.register_bag_types(store, reader.connections, str(path))
        segments = _segments(reader, path)
        summary = ReadSummary(str(path), _storage(path), notes=notes)
        size = _storage_bytes(path)
        common = {"path": str(path), "stamps": layout.stamps, "strict": strict,
                  "policy": out_of_order}  # fmt: skip
        js_conn = _connection(reader, layout.joint_states.topic, (m.JOINT_STATE,), path)
        js = JointStateHandler(
            layout.joint_states, store, capacity=_capacity(js_conn, size), **common
        )
        handlers: dict[str, Handler] = {js.summary.topic: js}
        for spec in layout.mocap:
            conn = _connection(reader, spec.topic, (m.POSE_STAMPED, m.TRANSFORM_STAMPED), path)
            handlers[spec.topic] = MocapHandler(
                spec, conn.msgtype, store, capacity=_capacity(conn, size), **common
            )
        for lookup in layout.tf:
            if lookup.topic not in handlers:
                _connection(reader, lookup.topic, (m.TF_MESSAGE,), path)
                handlers[lookup.topic] = TfHandler(
                    lookup.topic, store, static=False, capacity=16, **common
                )
            if lookup.static_topic not in handlers and any(
                c.topic == lookup.static_topic for c in reader.connections
            ):
                _connection(reader, lookup.static_topic, (m.TF_MESSAGE,), path)
                handlers[lookup.static_topic] = TfHandler(
                    lookup.static_topic, store, static=True, capacity=16, **common
                )
        for cmd in layout.commands:
            conn = _connection(reader, cmd.topic, (cmd.msgtype,), path)
            if cmd.msgtype == m.FLOAT64_MULTI_ARRAY and layout.stamps is StampSource.HEADER:
                summary.notes.append(
                    f"{cmd.topic}: Float64MultiArray has no header; receive times used"
                )
            handlers[cmd.topic] = CommandHandler(
                cmd, conn.msgtype, store, capacity=_capacity(conn, size), **common
            )
        summary.expected_messages = sum(
            _claimed(c) for c in reader.connections if c.topic in handlers
        )
        _stream_messages(reader, handlers, path)
    for handler in handlers.values():
        summary.topics[handler.summary.topic] = handler.summary
    starts = np.array(sorted(int(s["start_ns"]) for s in segments), dtype=np.int64)
    js_stamps, js_values = js.finish(starts)
    channels = _secondary_channels(layout, handlers, summary, path, starts)
    if not (split_segments and segments):
        segments = [{"start_ns": int(js_stamps[0]), "end_ns": int(js_stamps[-1]), "meta": {}}]
    trajectories = [
        _assemble(js, js_stamps, js_values, channels, seg, rate, summary, path) for seg in segments
    ]
    return Dataset(trajectories, {"source": str(path), "storage": summary.storage}), summary


def _secondary_channels(
    layout: BagLayout,
    handlers: dict[str, Handler],
    summary: ReadSummary,
    path: Path,
    starts: NDArray[np.int64],
) -> list[_Channels]:
    out: list[_Channels] = []
    for spec in layout.mocap:
        stamps, values = handlers[spec.topic].finish(starts)
        names = [f"{spec.body}/{c}" for c in _POSE_CHANNELS]
        out.append(_Channels(names, stamps, values, False, spec.topic))
    for lookup in layout.tf:
        dyn_handler = handlers[lookup.topic]
        assert isinstance(dyn_handler, TfHandler)
        dynamic: dict[tuple[str, str], tuple[NDArray[np.int64], NDArray[np.float64]]] = {}
        streams: dict[tuple[str, str], TopicStream] = dyn_handler.edges
        for edge, stream in streams.items():
            if len(stream):
                dynamic[edge] = stream.finish(starts)
            summary.topics[stream.summary.topic] = stream.summary
        static_handler = handlers.get(lookup.static_topic)
        static = static_handler.static_edges if isinstance(static_handler, TfHandler) else {}
        where = f"{path}: tf lookup {lookup.parent!r} -> {lookup.child!r}"
        stamps, values = tf_chain.lookup(lookup.parent, lookup.child, dynamic, static, where=where)
        names = [f"{lookup.body}/{c}" for c in _POSE_CHANNELS]
        out.append(_Channels(names, stamps, values, False, lookup.topic))
    for cmd in layout.commands:
        handler = handlers[cmd.topic]
        assert isinstance(handler, CommandHandler)
        stamps, values = handler.finish(starts)
        out.append(_Channels(handler.channels, stamps, values, True, cmd.topic))
    return out


def _assemble(
    js: JointStateHandler,
    js_stamps: NDArray[np.int64],
    js_values: NDArray[np.float64],
    channels: list[_Channels],
    segment: dict[str, Any],
    rate: float | None,
    summary: ReadSummary,
    path: Path,
) -> Trajectory:
    """One trajectory: joint states of ``segment`` with every channel interpolated onto them."""
    a, b = int(segment["start_ns"]), int(segment["end_ns"])
    # stamps are sorted: contiguous ranges select by slicing (views, no copy of the rows)
    i0, i1 = np.searchsorted(js_stamps, a, "left"), np.searchsorted(js_stamps, b, "right")
    grid, rows = js_stamps[i0:i1], js_values[i0:i1]
    windows = []
    lo, hi = int(grid[0]) if grid.size else a, int(grid[-1]) if grid.size else b
    for ch in channels:
        if ch.stamps is None:
            windows.append((None, ch.values))
            continue
        # the segment's samples plus one neighbour on each side, for interpolation at the ends
        i0 = max(int(np.searchsorted(ch.stamps, a, side="left")) - 1, 0)
        i1 = min(int(np.searchsorted(ch.stamps, b, side="right")) + 1, ch.stamps.size)
        s = ch.stamps[i0:i1]
        if s.size == 0:
            raise BagReadError(
                f"{path}: topic {ch.topic!r} has no sample near [{a}, {b}] ns next to "
                f"{js.summary.topic!r}"
            )
        windows.append((s, ch.values[i0:i1]))
        lo, hi = max(lo, int(s[0])), min(hi, int(s[-1]))
    if not grid.size or lo > hi:
        raise BagReadError(
            f"{path}: topic {js.summary.topic!r} and {[c.topic for c in channels]} share no time "
            f"span in [{a}, {b}] ns"
        )
    k0, k1 = np.searchsorted(grid, lo, "left"), np.searchsorted(grid, hi, "right")
    trimmed = int(grid.size - (k1 - k0))
    if trimmed:
        summary.notes.append(
            f"segment at {a} ns: {trimmed} joint-state samples outside the span of all other "
            "topics were trimmed (no extrapolation)"
        )
    grid, rows = grid[k0:k1], rows[k0:k1]
    origin = int(grid[0])
    t_src = (grid - origin) * 1e-9
    if rate is not None:
        t = uniform_grid(0.0, t_src[-1], 1.0 / rate)
        rows = interp_linear(t_src, rows, t, what=js.summary.topic)
    else:
        t = t_src
    q, dq, effort = js.split(rows)
    command, cmd_names, obs, obs_names = align_streams(
        (
            (ch.topic, ch.names, s, values, ch.is_command)
            for ch, (s, values) in zip(channels, windows, strict=True)
        ),
        t,
        origin,
    )
    meta = dict(segment.get("meta", {}))
    meta.update(
        source=str(path),
        storage=summary.storage,
        t0_ns=origin,
        joint_states_topic=js.summary.topic,
        topics=[js.summary.topic, *dict.fromkeys(c.topic for c in channels)],
    )
    return Trajectory(
        t=t,
        q=q,
        joint_names=list(js.joints),
        dq=dq,
        effort=effort,
        command=command,
        command_names=cmd_names,
        obs=obs,
        obs_names=obs_names,
        meta=meta,
    )


@dataclass
class JointStateChunk:
    """A block of joint-state samples from ``iter_joint_states``.

    Attributes:
        stamps_ns: ``[c]`` stamps (ns).
        joint_names: column order.
        q: ``[c, n]`` positions; dq, effort: ``[c, n]`` or ``None`` (effort scaled to N·m).
    """

    stamps_ns: NDArray[np.int64]
    joint_names: list[str]
    q: NDArray[np.float64]
    dq: NDArray[np.float64] | None
    effort: NDArray[np.float64] | None


def iter_joint_states(
    path: str | Path,
    spec: JointStateTopic | None = None,
    *,
    chunk: int = 65536,
    stamps: StampSource = StampSource.HEADER,
    strict: bool = False,
    summary: ReadSummary | None = None,
) -> Iterator[JointStateChunk]:
    """Stream a joint-state topic in chunks of at most ``chunk`` samples (bounded memory).

    Out-of-order and duplicated stamps are counted and skipped. When ``summary`` is given, it
    receives the topic's counts as the stream progresses.
    """
    spec = spec or JointStateTopic()
    path = Path(path)
    with open_bag(path, None if summary is None else summary.notes) as reader:
        store = m.make_typestore()
        conn = _connection(reader, spec.topic, (m.JOINT_STATE,), path)
        handler = JointStateHandler(
            spec, store, path=str(path), stamps=stamps, strict=strict,
            policy=OutOfOrder.SKIP, capacity=chunk,
        )  # fmt: skip
        if summary is not None:
            summary.topics[spec.topic] = handler.summary
            summary.expected_messages += _claimed(conn)
        for _, log_ns, raw in bag_messages(reader, path, [conn]):
            handler.handle(raw, log_ns)
            stream = handler.stream
            if stream is not None and len(stream) >= chunk:
                yield _chunk(handler, *stream.drain())
        stream = handler.stream
        if stream is not None and len(stream):
            yield _chunk(handler, *stream.finish())
        elif handler.summary.received and stream is None:
            handler.finish()  # raises with the skip reasons


def _chunk(
    handler: JointStateHandler, stamps: NDArray[np.int64], values: NDArray[np.float64]
) -> JointStateChunk:
    q, dq, effort = handler.split(values)
    return JointStateChunk(stamps, list(handler.joints), q, dq, effort)


def read_segments(
    path: str | Path, topic: str = DEFAULT_SEGMENT_TOPIC, *, strict: bool = False
) -> tuple[Dataset, ReadSummary]:
    """Read ``dynid_msgs/TrajectorySegment`` messages, one trajectory each.

    Malformed segments (lengths that do not match ``T × n``, non-finite values, bad times) are
    counted and skipped, or raise ``BagReadError`` naming the field when ``strict``.
    """
    path = Path(path)
    notes: list[str] = []
    with open_bag(path, notes) as reader:
        store = m.make_typestore()
        conn = _connection(reader, topic, (m.TRAJECTORY_SEGMENT,), path)
        handler = SegmentHandler(topic, store, path=str(path), strict=strict)
        summary = ReadSummary(
            str(path), _storage(path), expected_messages=_claimed(conn), notes=notes
        )
        summary.topics[topic] = handler.summary
        for _, log_ns, raw in bag_messages(reader, path, [conn]):
            handler.handle(raw, log_ns)
    trajectories = handler.trajectories
    if not trajectories:
        handler.finish()  # raises with the skip reasons
    return Dataset(trajectories, {"source": str(path), "storage": summary.storage}), summary
