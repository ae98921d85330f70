"""The damaged-bag corpus, each bag fitted with ``dynid fit`` (its Python entry, ``main``).

The corpus is built from bags ``dynid simulate double_pendulum`` writes (mcap, CRC-sealed, and
sqlite3): files truncated, bytes flipped inside a chunk, its CRC, the index and at random
(seeded), ``metadata.yaml`` missing, unparsable or declaring another type, ``/joint_states``
carrying another message type, and bags rewritten (``rosbags``, then CRC-sealed like dynid's own)
with a share of the joint states NaN, of the wrong length, garbage bytes or stamped backwards;
sqlite3 rows with garbage or empty data or an unknown topic id. Each case names the words a
warning or an error must contain to name its damage (``Case.damage``, a regular expression).

A case is *fitted silently* when the fit exits 0 and writes its outputs, and nothing it printed
or logged matches the case's ``damage``. A case that ends in an exception escaping
``dynid.cli.main``, or an error of more than one line, is counted as ``tracebacks``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import shutil
import sqlite3
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rosbags.rosbag2 import Writer

from dynid.cli import main as dynid_main
from dynid.data import StorageFormat, bag_messages, open_bag
from dynid.data import messages as m
from dynid.data.mcap_crc import seal
from dynid.records import Record
from dynid_ros.benchmark import _problem
from dynid_ros.spool import _records

JS = "/joint_states"
_CRC = r"CRC|corrupt"
_CUT = r"truncated|corrupt|cannot open"
_SKIPPED = r"skipped"


@dataclass(frozen=True)
class Case:
    """One damaged bag and the words that name its damage."""

    name: str
    bag: Path
    damage: str


@dataclass
class Outcome:
    """What ``dynid fit`` did with one case."""

    case: Case
    status: int | None  # exit status; None: an exception escaped
    fitted: bool  # exit 0 with posterior.yaml written
    named: bool  # an output line matches the case's damage
    output: str

    @property
    def silent(self) -> bool:
        """Fitted, and no word about the damage."""
        return self.fitted and not self.named

    @property
    def traceback(self) -> bool:
        """An exception escaped, or the fit failed without ending on one line
        ``dynid fit: error: ...``."""
        if self.status is None:
            return True
        lines = self.output.strip().splitlines()
        return self.status != 0 and not (lines and lines[-1].startswith("dynid fit: error: "))


def fit(bag: Path, problem: Path, out: Path) -> tuple[int | None, str]:
    """Run ``dynid fit`` on ``bag`` in this process: its exit status (``None`` when an exception
    escaped) and everything it printed, logged or warned."""
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)
    argv = [
        "fit",
        "--problem",
        str(problem),
        "--bag",
        str(bag),
        "-o",
        str(out),
        "--particles",
        "4",
        "--iterations",
        "2",
        "--no-progress",
    ]
    status: int | None
    try:
        with (
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            try:
                status = dynid_main(argv)
            except SystemExit as exc:  # argparse
                status = int(exc.code or 0)
            except Exception as exc:  # the count of escaped exceptions is what is measured
                status = None
                log.write(f"Traceback: {type(exc).__name__}: {exc}\n")
        for w in caught:
            log.write(f"warning: {w.message}\n")
    finally:
        root.removeHandler(handler)
    return status, log.getvalue()


def _mcap(bag: Path) -> Path:
    (file,) = bag.glob("*.mcap")
    return file


def _bytes_edit(edit: Callable[[bytearray], bytearray]) -> Callable[[Path], None]:
    def apply(bag: Path) -> None:
        file = next(p for p in bag.iterdir() if p.suffix in (".mcap", ".db3"))
        file.write_bytes(bytes(edit(bytearray(file.read_bytes()))))

    return apply


def _truncate(fraction: float) -> Callable[[Path], None]:
    return _bytes_edit(lambda data: data[: int(len(data) * fraction)])


def _flip_in_record(opcode: int, offset: Callable[[int], int]) -> Callable[[Path], None]:
    """XOR 0x10 into the first record of ``opcode`` at ``offset(body length)`` of its body."""

    def edit(data: bytearray) -> bytearray:
        pos, _, body = next(r for r in _records(bytes(data), 8) if r[1] == opcode)
        data[pos + 9 + offset(len(body))] ^= 0x10
        return data

    return _bytes_edit(edit)


def _flip_random(flips: int, seed: int) -> Callable[[Path], None]:
    def edit(data: bytearray) -> bytearray:
        rng = np.random.default_rng(seed)
        for pos in rng.choice(len(data), size=flips, replace=False):
            data[pos] ^= int(rng.integers(1, 256))
        return data

    return _bytes_edit(edit)


def _metadata(edit: Callable[[dict[str, Any]], str | None]) -> Callable[[Path], None]:
    """Replace ``metadata.yaml`` by ``edit(its contents)`` (``None``: delete it)."""

    def apply(bag: Path) -> None:
        meta = bag / "metadata.yaml"
        text = edit(yaml.safe_load(meta.read_text()))
        if text is None:
            meta.unlink()
        else:
            meta.write_text(text)

    return apply


def _declare_imu(meta: dict[str, Any]) -> str:
    for topic in meta["rosbag2_bagfile_information"]["topics_with_message_count"]:
        if topic["topic_metadata"]["name"] == JS:
            topic["topic_metadata"]["type"] = "sensor_msgs/msg/Imu"
    return yaml.safe_dump(meta)


Rewrite = Callable[[int, Any, np.random.Generator], tuple[str, bytes] | None]


def _rewrite(source: Path, dest: Path, edit: Rewrite, *, sealed: bool = True) -> None:
    """Copy ``source``'s messages to a new mcap bag ``dest``, ``edit(k, message, rng)`` giving
    ``(type, CDR bytes)`` for the ``k``-th joint state (``None``: unchanged); then CRC-seal it
    as dynid seals its own bags (unless ``sealed`` is false)."""
    store = m.make_typestore()
    rng = np.random.default_rng(0)
    with (
        open_bag(source, notes=[]) as reader,
        Writer(dest, version=9, storage_plugin=StorageFormat.MCAP.plugin) as writer,
    ):
        custom = getattr(getattr(reader.storage, "metadata", None), "custom", None) or {}
        for key, value in custom.items():
            writer.set_custom_data(key, value)
        conns: dict[tuple[str, str], Any] = {}
        k = 0
        for conn, log_ns, raw in bag_messages(reader, source, reader.connections):
            msgtype, data = conn.msgtype, bytes(raw)
            if conn.topic == JS:
                edited = edit(k, store.deserialize_cdr(data, m.JOINT_STATE), rng)
                if edited is not None:
                    msgtype, data = edited
                k += 1
            out = conns.get((conn.topic, msgtype))
            if out is None:
                out = conns[(conn.topic, msgtype)] = writer.add_connection(
                    conn.topic, msgtype, typestore=store
                )
            writer.write(out, log_ns, data)
    if sealed:
        seal(_mcap(dest))


def _every(share: float, change: Callable[[Any, np.random.Generator], Any]) -> Rewrite:
    """Change a ``share`` of the joint states (evenly spread) with ``change(msg, rng)``."""
    store = m.make_typestore()
    step = round(1 / share)

    def edit(k: int, msg: Any, rng: np.random.Generator) -> tuple[str, bytes] | None:
        if k % step != step // 2:
            return None
        msg = change(msg, rng)
        if isinstance(msg, bytes):
            return m.JOINT_STATE, msg
        return m.JOINT_STATE, bytes(store.serialize_cdr(msg, m.JOINT_STATE))

    return edit


def _nan(msg: Any, _: np.random.Generator) -> Any:
    position = msg.position.copy()
    position[0] = np.nan
    msg.position = position
    return msg


def _short(msg: Any, _: np.random.Generator) -> Any:
    msg.position = msg.position[:1].copy()
    return msg


def _garbage(msg: Any, rng: np.random.Generator) -> bytes:
    data = bytes(m.make_typestore().serialize_cdr(msg, m.JOINT_STATE))
    return data[:4] + rng.integers(0, 256, len(data) - 4, dtype=np.uint8).tobytes()


def _backwards(msg: Any, _: np.random.Generator) -> Any:
    ns = m.stamp_ns(msg.header.stamp) - 50_000_000
    msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 10**9, ns % 10**9
    return msg


def _as_float64_array(k: int, msg: Any, _: np.random.Generator) -> tuple[str, bytes]:
    store = m.make_typestore()
    t = store.types
    layout = t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    array = t[m.FLOAT64_MULTI_ARRAY](layout=layout, data=np.asarray(msg.position, float))
    return m.FLOAT64_MULTI_ARRAY, bytes(store.serialize_cdr(array, m.FLOAT64_MULTI_ARRAY))


def _flip_value(k: int, msg: Any, _: np.random.Generator) -> tuple[str, bytes] | None:
    """Message 100: the top byte of position[0] changed (a bit error no reader can see)."""
    if k != 100:
        return None
    data = bytearray(m.make_typestore().serialize_cdr(msg, m.JOINT_STATE))
    value = np.float64(msg.position[0]).tobytes()
    at = bytes(data).index(value)
    data[at + 7] ^= 0x01
    return m.JOINT_STATE, bytes(data)


def _sql(statement: str) -> Callable[[Path], None]:
    def apply(bag: Path) -> None:
        (db,) = bag.glob("*.db3")
        with contextlib.closing(sqlite3.connect(db)) as con:
            con.execute(statement)
            con.commit()

    return apply


def build(out: Path, seed: int) -> tuple[list[Case], Path, Path]:
    """Write the corpus into ``out``; returns the cases and the intact mcap and sqlite3 bags."""
    out.mkdir(parents=True)
    sources = {}
    for storage in ("mcap", "sqlite3"):
        bag = out / f"simulated_{storage}"
        status, text = simulate(bag, storage)
        if status != 0:
            raise RuntimeError(f"dynid simulate failed: {text}")
        sources[storage] = bag
    mcap, db = sources["mcap"], sources["sqlite3"]
    copied: list[tuple[str, Path, Callable[[Path], None], str]] = [
        *((f"mcap truncated at {f:.0%}", mcap, _truncate(f), _CUT) for f in (0.25, 0.5, 0.9)),
        ("mcap without its last byte", mcap, _bytes_edit(lambda d: d[:-1]), _CUT),
        ("mcap: a byte of chunk data flipped", mcap, _flip_in_record(0x06, lambda n: n // 2), _CRC),
        ("mcap: a chunk's CRC changed", mcap, _flip_in_record(0x06, lambda n: 24), _CRC),
        ("mcap: a byte of the index flipped", mcap, _flip_in_record(0x08, lambda n: n - 3), _CRC),
        *(
            (
                f"mcap: {n} random bytes changed (seed {seed + i})",
                mcap,
                _flip_random(n, seed + i),
                f"{_CRC}|{_CUT}",
            )
            for i, n in enumerate((1, 2, 4, 8, 16))
        ),
        ("metadata.yaml missing", mcap, _metadata(lambda _: None), r"metadata"),
        ("metadata.yaml not YAML", mcap, _metadata(lambda _: "{topics: [\n"), r"metadata"),
        (
            "metadata.yaml declares /joint_states a sensor_msgs/msg/Imu",
            mcap,
            _metadata(_declare_imu),
            r"Imu|type",
        ),
        ("sqlite3 truncated at 50%", db, _truncate(0.5), r"truncated|corrupt|malformed|cannot"),
        (
            "sqlite3: 10% of rows garbage bytes",
            db,
            _sql("UPDATE messages SET data = randomblob(length(data)) WHERE id % 10 = 5"),
            _SKIPPED,
        ),
        (
            "sqlite3: 10% of rows with empty data",
            db,
            _sql("UPDATE messages SET data = zeroblob(0) WHERE id % 10 = 5"),
            _SKIPPED,
        ),
        (
            "sqlite3: 10% of rows under an unknown topic id",
            db,
            _sql("UPDATE messages SET topic_id = 99 WHERE id % 10 = 5"),
            r"topic id|skipped|TRUNCATED|missing",
        ),
    ]
    rewritten: list[tuple[str, Rewrite, str, bool]] = [
        ("2% of joint states NaN", _every(0.02, _nan), _SKIPPED, True),
        ("10% of joint states NaN", _every(0.1, _nan), _SKIPPED, True),
        ("10% of joint states of the wrong length", _every(0.1, _short), _SKIPPED, True),
        ("10% of joint states garbage bytes", _every(0.1, _garbage), _SKIPPED, True),
        (
            "10% of joint states stamped 50 ms back",
            _every(0.1, _backwards),
            r"skipped|out of order|backwards",
            True,
        ),
        (
            "/joint_states carries std_msgs/msg/Float64MultiArray",
            _as_float64_array,
            r"Float64MultiArray|type",
            True,
        ),
        (
            "a position byte changed in a bag without CRCs",
            _flip_value,
            r"cannot be (detected|verified)|no CRC",
            False,
        ),
    ]
    cases = []
    for i, (name, source, apply, damage) in enumerate(copied):
        bag = out / f"case_{i:02d}"
        shutil.copytree(source, bag)
        apply(bag)
        cases.append(Case(name, bag, damage))
    for j, (name, edit, damage, sealed) in enumerate(rewritten, start=len(copied)):
        bag = out / f"case_{j:02d}"
        _rewrite(mcap, bag, edit, sealed=sealed)
        cases.append(Case(name, bag, damage))
    return cases, mcap, db


def simulate(bag: Path, storage: str) -> tuple[int | None, str]:
    """``dynid simulate double_pendulum`` (one swing of 300 steps) into ``bag``."""
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        status = dynid_main(
            [
                "simulate",
                "double_pendulum",
                "-o",
                str(bag),
                "--set",
                "trajectories=1",
                "--set",
                f"storage={storage}",
            ]
        )
    return status, log.getvalue()


def run(out: Path, seed: int) -> tuple[list[Record], list[Outcome]]:
    """Build the corpus in ``out``, fit every case; the records and each case's outcome.

    Raises:
        RuntimeError: an intact bag does not fit cleanly (the harness, not the corpus, is wrong).
    """
    cases, mcap, db = build(out / "bags", seed)
    problem = _problem(out / "problem.yaml", iterations=2)
    for intact in (mcap, db):
        status, text = fit(intact, problem, out / "fits" / intact.name)
        if status != 0:
            raise RuntimeError(f"the intact bag {intact} does not fit: {text}")
    outcomes = []
    for case in cases:
        target = out / "fits" / case.bag.name
        status, text = fit(case.bag, problem, target)
        fitted = status == 0 and (target / "posterior.yaml").is_file()
        named = re.search(case.damage, text) is not None
        outcomes.append(Outcome(case, status, fitted, named, text))
    silent = [o.case.name for o in outcomes if o.silent]
    warned = [o.case.name for o in outcomes if o.fitted and o.named]
    traced = [o.case.name for o in outcomes if o.traceback]
    case = f"damaged-bag corpus/{len(cases)} bags/dynid fit"
    return [
        Record(
            case, "fitted_silently", float(len(silent)), "bags", target=0.0, notes="; ".join(silent)
        ),
        Record(
            case,
            "refused",
            float(sum(not o.fitted for o in outcomes)),
            "bags",
            notes="exit status 2 with a one-line error",
        ),
        Record(case, "fitted_with_warning", float(len(warned)), "bags", notes="; ".join(warned)),
        Record(case, "tracebacks", float(len(traced)), "bags", target=0.0, notes="; ".join(traced)),
    ], outcomes
