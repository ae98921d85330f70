"""Write a ``Dataset`` to a ROS 2 bag (mcap by default, or sqlite3) with ``rosbags``.

The same ``BagLayout`` that reads a bag writes it: joint states as ``sensor_msgs/JointState``,
mocap bodies as ``PoseStamped`` / ``TransformStamped`` or ``/tf``, commands as ``JointState``,
``Float64MultiArray`` or ``JointTrajectory``. Header stamps and log times are the sample times
``meta["t0_ns"] + t`` (ns). Segment bounds and each trajectory's ``meta`` go into the bag's
``custom_data`` so ``read_bag`` restores the dataset exactly. The bag appears atomically (written
under a temporary name, then renamed). mcap files carry CRCs of every chunk, of the data section
and of the index (``mcap_crc.seal``), which every read checks; sqlite3 storage has no CRC.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray
from rosbags.interfaces import Connection
from rosbags.rosbag2 import Writer, WriterError
from rosbags.typesys.store import Typestore

from dynid.data import mcap_crc
from dynid.data import messages as m
from dynid.data.bag import SEGMENTS_KEY
from dynid.data.errors import BagWriteError
from dynid.data.topics import BagLayout, CommandTopic
from dynid.data.trajectory import Dataset, Trajectory

_GAP_NS = 1_000_000_000  # spacing between trajectories laid out without their own t0_ns
_POSE = ("x", "y", "z", "qx", "qy", "qz", "qw")

Message = tuple[int, str, Any]  # (stamp ns, topic, message object)


class _Factory:
    """Builds message objects from the type store's classes."""

    def __init__(self, store: Typestore) -> None:
        self.store = store
        self.t = store.types

    def time(self, ns: int) -> Any:
        return self.t["builtin_interfaces/msg/Time"](
            sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000
        )

    def duration(self, ns: int) -> Any:
        return self.t["builtin_interfaces/msg/Duration"](
            sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000
        )

    def header(self, ns: int, frame: str = "") -> Any:
        return self.t["std_msgs/msg/Header"](stamp=self.time(ns), frame_id=frame)

    def joint_state(self, ns: int, names: list[str], pos: Any, vel: Any, eff: Any) -> Any:
        empty = np.zeros(0)
        return self.t[m.JOINT_STATE](
            header=self.header(ns),
            name=names,
            position=np.ascontiguousarray(pos if pos is not None else empty, dtype=np.float64),
            velocity=np.ascontiguousarray(vel if vel is not None else empty, dtype=np.float64),
            effort=np.ascontiguousarray(eff if eff is not None else empty, dtype=np.float64),
        )

    def transform(self, row: NDArray[np.float64]) -> Any:
        g = "geometry_msgs/msg/"
        return self.t[g + "Transform"](
            translation=self.t[g + "Vector3"](x=row[0], y=row[1], z=row[2]),
            rotation=self.t[g + "Quaternion"](x=row[3], y=row[4], z=row[5], w=row[6]),
        )

    def pose_stamped(self, ns: int, row: NDArray[np.float64], frame: str) -> Any:
        g = "geometry_msgs/msg/"
        pose = self.t[g + "Pose"](
            position=self.t[g + "Point"](x=row[0], y=row[1], z=row[2]),
            orientation=self.t[g + "Quaternion"](x=row[3], y=row[4], z=row[5], w=row[6]),
        )
        return self.t[m.POSE_STAMPED](header=self.header(ns, frame), pose=pose)

    def transform_stamped(self, ns: int, row: NDArray[np.float64], frame: str, child: str) -> Any:
        return self.t[m.TRANSFORM_STAMPED](
            header=self.header(ns, frame), child_frame_id=child, transform=self.transform(row)
        )


def _columns(traj: Trajectory, names: list[str], what: str, index: int) -> NDArray[np.float64]:
    missing = [n for n in names if n not in traj.obs_names]
    if traj.obs is None or missing:
        raise BagWriteError(
            f"trajectory {index}: {what} needs observation channels {missing} "
            f"(has {traj.obs_names})"
        )
    return traj.obs[:, [traj.obs_names.index(n) for n in names]]


def _command_messages(
    f: _Factory,
    cmd: CommandTopic,
    traj: Trajectory,
    stamps: NDArray[np.int64],
    index: int,
    used: set[str],
) -> list[Message]:
    parsed = [(c, cmd.parse_channel(c)) for c in traj.command_names]
    mine = {p: c for c, p in parsed if p is not None}
    if not mine:
        raise BagWriteError(
            f"trajectory {index}: no command channel for topic {cmd.topic!r} among "
            f"{traj.command_names}"
        )
    assert traj.command is not None
    col = {c: i for i, c in enumerate(traj.command_names)}
    used.update(mine.values())
    if cmd.msgtype == m.FLOAT64_MULTI_ARRAY:
        names = list(cmd.names or ())
        data = np.ascontiguousarray(traj.command[:, [col[cmd.channel(n)] for n in names]])
        layout = f.t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        return [
            (
                int(s),
                cmd.topic,
                f.t[m.FLOAT64_MULTI_ARRAY](layout=layout, data=data[k]),
            )
            for k, s in enumerate(stamps)
        ]
    joints = list(dict.fromkeys(name for name, _ in mine))
    block: dict[str, NDArray[np.float64]] = {}
    for fld in cmd.fields:
        missing = [j for j in joints if (j, fld) not in mine]
        if missing:
            raise BagWriteError(
                f"trajectory {index}: command topic {cmd.topic!r} field {fld!r} lacks channels "
                f"for joints {missing}"
            )
        block[fld] = np.ascontiguousarray(traj.command[:, [col[mine[(j, fld)]] for j in joints]])
    if cmd.msgtype == m.JOINT_STATE:
        return [
            (int(s), cmd.topic, f.joint_state(int(s), joints, *(
                block[x][k] if x in block else None for x in ("position", "velocity", "effort")
            )))
            for k, s in enumerate(stamps)
        ]  # fmt: skip
    if cmd.msgtype == m.JOINT_TRAJECTORY:
        attrs = {"position": "positions", "velocity": "velocities",
                 "acceleration": "accelerations", "effort": "effort"}  # fmt: skip
        out = []
        for k, s in enumerate(stamps):
            values = {attrs[x]: np.zeros(0) for x in attrs}
            values.update({attrs[x]: block[x][k] for x in block})
            point = f.t["trajectory_msgs/msg/JointTrajectoryPoint"](
                time_from_start=f.duration(0), **values
            )
            msg = f.t[m.JOINT_TRAJECTORY](
                header=f.header(int(s)), joint_names=joints, points=[point]
            )
            out.append((int(s), cmd.topic, msg))
        return out
    raise BagWriteError(
        f"command topic {cmd.topic!r}: writing {cmd.msgtype} is not supported (JointState, "
        "Float64MultiArray or JointTrajectory)"
    )


def _trajectory_messages(
    f: _Factory,
    traj: Trajectory,
    t0_ns: int,
    layout: BagLayout,
    index: int,
    segment_topic: str | None,
    source: str,
) -> list[Message]:
    stamps = t0_ns + np.round(traj.t * 1e9).astype(np.int64)
    js = layout.joint_states
    joints = list(js.joints or traj.joint_names)
    if sorted(joints) != sorted(traj.joint_names):
        raise BagWriteError(
            f"trajectory {index}: layout joints {joints} differ from joint_names {traj.joint_names}"
        )
    order = [traj.joint_names.index(j) for j in joints]
    q = traj.q[:, order]
    dq = None if traj.dq is None else traj.dq[:, order]
    eff = None
    if traj.effort is not None:
        scale = np.array([js.effort_scale.get(j, 1.0) for j in joints])
        eff = traj.effort[:, order] / scale
    msgs: list[Message] = [
        (int(s), js.topic, f.joint_state(int(s), joints, q[k],
                                         None if dq is None else dq[k],
                                         None if eff is None else eff[k]))
        for k, s in enumerate(stamps)
    ]  # fmt: skip
    for spec in layout.mocap:
        rows = _columns(traj, [f"{spec.body}/{c}" for c in _POSE], f"mocap {spec.topic!r}", index)
        shift = 0 if spec.stamps_latency_corrected else round(spec.latency * 1e9)
        for k, s in enumerate(stamps + shift):
            if spec.msgtype == m.TRANSFORM_STAMPED:
                msg = f.transform_stamped(int(s), rows[k], "world", spec.body)
            else:
                msg = f.pose_stamped(int(s), rows[k], "world")
            msgs.append((int(s), spec.topic, msg))
    tf_topics: dict[str, list[tuple[str, str, NDArray[np.float64]]]] = {}
    for lookup in layout.tf:
        rows = _columns(traj, [f"{lookup.body}/{c}" for c in _POSE], f"tf {lookup.child!r}", index)
        tf_topics.setdefault(lookup.topic, []).append((lookup.parent, lookup.child, rows))
    for topic, frames in tf_topics.items():
        for k, s in enumerate(stamps):
            transforms = [
                f.t[m.TRANSFORM_STAMPED](header=f.header(int(s), parent), child_frame_id=child,
                                         transform=f.transform(rows[k]))
                for parent, child, rows in frames
            ]  # fmt: skip
            msgs.append((int(s), topic, f.t[m.TF_MESSAGE](transforms=transforms)))
    used: set[str] = set()
    for cmd in layout.commands:
        msgs.extend(_command_messages(f, cmd, traj, stamps, index, used))
    unwritten = [c for c in traj.command_names if c not in used]
    bodies = {x.body for x in layout.mocap} | {x.body for x in layout.tf}
    unwritten += [o for o in traj.obs_names if o.rpartition("/")[0] not in bodies]
    if unwritten and segment_topic is None:
        raise BagWriteError(
            f"trajectory {index}: channels {unwritten} have no topic in the layout (add mocap or "
            "command topics, or a segment topic)"
        )
    if segment_topic is not None:
        msgs.append((int(stamps[0]), segment_topic, _segment(f, traj, t0_ns, stamps, source)))
    return msgs


def _segment(
    f: _Factory, traj: Trajectory, t0_ns: int, stamps: NDArray[np.int64], source: str
) -> Any:
    def flat(x: NDArray[np.float64] | None) -> NDArray[np.float64]:
        return np.zeros(0) if x is None else np.ascontiguousarray(x, dtype=np.float64).ravel()

    return f.t[m.TRAJECTORY_SEGMENT](
        header=f.header(int(stamps[0]), "world"),
        joint_names=list(traj.joint_names),
        time=(stamps - stamps[0]) * 1e-9,
        position=flat(traj.q),
        velocity=flat(traj.dq),
        effort=flat(traj.effort),
        command_names=list(traj.command_names),
        command=flat(traj.command),
        observation_names=list(traj.obs_names),
        observation=flat(traj.obs),
        source=source,
    )


def write_bag(
    dataset: Dataset | Trajectory,
    path: str | Path,
    layout: BagLayout | None = None,
    *,
    storage: m.StorageFormat | str = m.StorageFormat.MCAP,
    segment_topic: str | None = None,
    source: str = "",
) -> Path:
    """Write ``dataset`` to a new bag directory ``path`` and return it.

    Args:
        dataset: trajectories to write; each starts at ``meta["t0_ns"]`` (absolute ns of
            ``t = 0``) when present, otherwise they are laid out one after another.
        path: bag directory to create (must not exist).
        layout: topics to write (default: ``/joint_states`` only).
        storage: ``StorageFormat.MCAP`` (default) or ``StorageFormat.SQLITE3`` (or their
            values ``"mcap"`` / ``"sqlite3"``).
        segment_topic: also write each trajectory as one ``dynid_msgs/TrajectorySegment``.
        source: ``TrajectorySegment.source`` text (e.g. ``"sim:double_pendulum"``).

    Raises:
        BagWriteError: existing path, channels without a topic, unsupported command type.
    """
    if isinstance(dataset, Trajectory):
        dataset = Dataset([dataset])
    try:
        storage = m.StorageFormat(storage)
    except ValueError as err:
        raise BagWriteError(
            f"{path}: storage must be one of {[f.value for f in m.StorageFormat]}, got {storage!r}"
        ) from err
    layout = layout or BagLayout()
    path = Path(path)
    if path.exists():
        raise BagWriteError(f"{path}: exists already; bags are never overwritten")
    if not len(dataset):
        raise BagWriteError(f"{path}: the dataset is empty")
    store = m.make_typestore()
    factory = _Factory(store)
    messages: list[Message] = []
    segments: list[dict[str, Any]] = []
    next_free = 0
    for i, traj in enumerate(dataset):
        t0 = traj.meta.get("t0_ns")
        start = None if t0 is None else int(t0) + round(float(traj.t[0]) * 1e9)
        if start is None or start < next_free:
            t0 = next_free + (_GAP_NS if i else 0) - round(float(traj.t[0]) * 1e9)
        t0 = int(t0)
        msgs = _trajectory_messages(factory, traj, t0, layout, i, segment_topic, source)
        first, last = t0 + round(float(traj.t[0]) * 1e9), t0 + round(float(traj.t[-1]) * 1e9)
        segments.append({"start_ns": first, "end_ns": last, "meta": traj.meta})
        next_free = max(s for s, _, _ in msgs) + 1
        messages.extend(msgs)
    messages.sort(key=lambda x: x[0])
    _write(path, store, messages, storage, {SEGMENTS_KEY: json.dumps(segments)})
    return path


def _write(
    path: Path,
    store: Typestore,
    messages: list[Message],
    storage: m.StorageFormat,
    custom: dict[str, str],
) -> None:
    """Serialise ``messages`` (sorted by stamp) into a bag appearing atomically at ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_root = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    except OSError as err:
        raise BagWriteError(f"{path}: cannot create the bag's folder: {err}") from err
    tmp = tmp_root / path.name
    types = {topic: type(msg).__msgtype__ for _, topic, msg in messages}
    serialize: Callable[[Any, str], bytes] = store.serialize_cdr  # type: ignore[assignment]
    try:
        with Writer(tmp, version=Writer.VERSION_LATEST, storage_plugin=storage.plugin) as writer:
            conns: dict[str, Connection] = {
                topic: writer.add_connection(topic, msgtype, typestore=store)
                for topic, msgtype in types.items()
            }
            for key, value in custom.items():
                writer.set_custom_data(key, value)
            for stamp, topic, msg in messages:
                writer.write(conns[topic], stamp, serialize(msg, types[topic]))
        for file in sorted(tmp.glob("*.mcap")):
            mcap_crc.seal(file, BagWriteError)
        _rosbag2_file_name(tmp, path.name)
        os.replace(tmp, path)
    except (WriterError, OSError) as err:
        raise BagWriteError(f"{path}: cannot write bag: {err}") from err
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


def _rosbag2_file_name(folder: Path, name: str) -> None:
    """Rename the single storage file of the bag ``folder`` (to become bag ``name``) after
    rosbag2's convention, ``<name>_0.<ext>`` (``name`` without a storage suffix), and update
    ``metadata.yaml``: ``-o build/run`` gives ``build/run/run_0.mcap``."""
    meta_path = folder / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    info = meta["rosbag2_bagfile_information"]
    (old,) = info["relative_file_paths"]
    ext = Path(old).suffix
    new = f"{name.removesuffix(ext)}_0{ext}"
    os.replace(folder / old, folder / new)
    info["relative_file_paths"] = [new]
    for entry in info.get("files", []):
        if entry.get("path") == old:
            entry["path"] = new
    meta_path.write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
