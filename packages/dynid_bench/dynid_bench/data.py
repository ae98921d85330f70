"""Bag reading throughput and memory: dynid's reader against rosbags' raw deserialisation.

A ``sensor_msgs/JointState`` bag of ``--messages`` messages (7 joints, position, velocity and
effort, 1 kHz stamps) is generated under ``build/bench/`` for each storage (mcap, sqlite3). Each
measurement runs in a fresh process: messages/s and the peak resident-memory growth over the
process's state after imports (``ru_maxrss``), for

* ``rosbags_raw``: ``rosbags`` ``Reader.messages`` + ``Typestore.deserialize_cdr`` per message,
  nothing kept (the library's raw deserialisation speed);
* ``iter_joint_states``: dynid's chunked stream (bounded memory, 65,536-sample chunks: about
  11 MiB of buffers);
* ``read_bag``: dynid's full read into a ``Dataset`` (memory grows with the output arrays,
  ``T × (1 + 21) × 8`` bytes, plus a constant).

Peak memory growth is the peak RSS during the read minus the RSS just before it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import Writer

from dynid.data import StorageFormat, iter_joint_states, read_bag
from dynid.data import messages as m
from dynid.records import Record

JOINTS = [f"fr3_joint{i}" for i in range(1, 8)]
T0_NS = 1_700_000_000_000_000_000
PERIOD_NS = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--messages`` (default 1,000,000; 50,000 with ``--quick``) and ``--keep`` (reuse bags)."""
    parser.add_argument("--messages", type=int, default=None, help="joint_states messages")
    parser.add_argument("--keep", action="store_true", help="reuse existing generated bags")


def write_joint_state_bag(path: Path, n: int, storage: StorageFormat, seed: int = 0) -> Path:
    """Write ``n`` JointState messages (7 joints, 1 kHz) fast by patching one serialised template.

    The stamp and the 21 doubles of each message are written into a copy of the template's CDR
    bytes at their offsets, which ``rosbags`` itself serialised; values are a seeded random walk.
    """
    store = m.make_typestore()
    types = store.types
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""
    )
    zeros = np.zeros(len(JOINTS))
    template = bytearray(
        store.serialize_cdr(
            types[m.JOINT_STATE](header=header, name=JOINTS, position=zeros + 1.0,
                                 velocity=zeros + 2.0, effort=zeros + 3.0),
            m.JOINT_STATE,
        )
    )  # fmt: skip
    doubles = np.frombuffer(bytes(template), dtype="<f8", count=-1, offset=len(template) % 8)
    offsets = []
    for marker in (1.0, 2.0, 3.0):
        start = int(np.flatnonzero(doubles == marker)[0]) * 8 + len(template) % 8
        offsets.append(start)
    stamp = struct.Struct("<iI")
    block = struct.Struct(f"<{len(JOINTS)}d")
    rng = np.random.default_rng(seed)
    walk = np.cumsum(rng.normal(scale=1e-3, size=(n, len(JOINTS))), axis=0)
    with Writer(path, version=9, storage_plugin=storage.plugin) as writer:
        conn = writer.add_connection("/franka/joint_states", m.JOINT_STATE, typestore=store)
        for k in range(n):
            ns = T0_NS + k * PERIOD_NS
            stamp.pack_into(template, 4, ns // 1_000_000_000, ns % 1_000_000_000)
            row = walk[k].tolist()
            for off in offsets:
                block.pack_into(template, off, *row)
            writer.write(conn, ns, bytes(template))
    return path


def _status_kib(field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM``) of this process's ``/proc/self/status``, in KiB."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _measure(job: tuple[str, str]) -> tuple[float, int, int]:
    """In a fresh process: (seconds, messages, peak RSS growth in bytes) of one reader.

    The growth is the process's peak RSS (``VmHWM``, reset to the current RSS just before
    reading through ``/proc/self/clear_refs``) minus its RSS just before, so neither the
    transient peaks of the imports nor the parent's size count. (``ru_maxrss`` would not do:
    Linux carries it across the ``execve`` of a spawned worker, so it starts at the size of the
    parent that forked it, which holds the freshly generated bag's random walk.)
    """
    kind, path = job
    store = m.make_typestore()
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    before = _status_kib("VmRSS")
    start = time.perf_counter()
    count = 0
    if kind == "rosbags_raw":
        from rosbags.rosbag2 import Reader

        with Reader(path) as reader:
            for _, _, raw in reader.messages():
                store.deserialize_cdr(raw, m.JOINT_STATE)
                count += 1
    elif kind == "iter_joint_states":
        for chunk in iter_joint_states(path, m_spec()):
            count += chunk.stamps_ns.size
    else:
        from dynid.data import BagLayout

        dataset, _ = read_bag(path, BagLayout(joint_states=m_spec()))
        count = dataset[0].num_samples
    seconds = time.perf_counter() - start
    return seconds, count, max(_status_kib("VmHWM") - before, 0) * 1024


def m_spec() -> Any:
    """The benchmark bag's joint-state topic."""
    from dynid.data import JointStateTopic

    return JointStateTopic("/franka/joint_states")


def run(args: argparse.Namespace) -> list[Record]:
    """Generate the bags, time the three readers per storage, return one record per number."""
    n = args.messages or (50_000 if args.quick else 1_000_000)
    out = Path(getattr(args, "out_dir", "build/bench")) / "data"
    out.mkdir(parents=True, exist_ok=True)
    records: list[Record] = []
    ctx = multiprocessing.get_context("spawn")
    for storage in StorageFormat:
        path = out / f"joint_states_{n}_{storage.value}"
        if path.exists() and not getattr(args, "keep", False):
            shutil.rmtree(path)
        if not path.exists():
            start = time.perf_counter()
            write_joint_state_bag(path, n, storage)
            gen = time.perf_counter() - start
            case = f"{storage.value}/n={n}/generate"
            records.append(
                Record(case, "write_rate", n / gen, "msg/s", better="higher", notes="patched CDR")
            )
        output_bytes = n * (8 + 21 * 8)
        for kind in ("rosbags_raw", "iter_joint_states", "read_bag"):
            with ctx.Pool(1) as pool:
                seconds, count, peak = pool.apply(_measure, ((kind, str(path)),))
            if count != n:
                raise RuntimeError(f"{kind} read {count} of {n} messages from {path}")
            case = f"{storage.value}/n={n}/{kind}"
            records.append(Record(case, "throughput", n / seconds, "msg/s", better="higher",
                                  notes="2-core shared CPU, one process"))  # fmt: skip
            target = 64.0 if kind == "iter_joint_states" else None
            note = "bounded: independent of n" if kind == "iter_joint_states" else (
                f"output arrays {output_bytes / 2**20:.0f} MiB" if kind == "read_bag" else
                "nothing kept"
            )  # fmt: skip
            records.append(Record(case, "peak_rss_growth", peak / 2**20, "MiB", target=target,
                                  notes=note))  # fmt: skip
    return records
