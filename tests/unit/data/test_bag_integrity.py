"""Bag integrity: mcap CRCs written by dynid and checked on every read, and metadata that cannot
be trusted (message counts, segment bounds) never sizes a buffer or escapes as a traceback."""

from __future__ import annotations

import logging
import re
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer

from dynid.data import (
    BagLayout,
    BagReadError,
    MocapTopic,
    StorageFormat,
    Trajectory,
    iter_joint_states,
    open_bag,
    read_bag,
    read_segments,
    write_bag,
)
from dynid.data import messages as m
from dynid.data.bag import SEGMENTS_KEY

T0 = 1_700_000_000_000_000_000
LAYOUT = BagLayout(mocap=(MocapTopic("box", "/mocap/box"),))
TOPICS = {"/joint_states", "/mocap/box"}


def _trajectory(n: int = 1500) -> Trajectory:
    t = np.arange(n) * 0.01
    q = np.stack([np.sin(t), np.cos(t), 0.1 * t], axis=1)
    half = 0.25 * t
    obs = np.stack([t, -t, 0 * t, 0 * t, 0 * t, np.sin(half), np.cos(half)], axis=1)
    return Trajectory(
        t=t, q=q, joint_names=["j1", "j2", "j3"], dq=np.cos(q), effort=q**2,
        obs=obs, obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
        meta={"t0_ns": T0},
    )  # fmt: skip


def _records(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """``(opcode, record start, record end)`` of the records in ``data[start:end]``."""
    out, pos = [], start
    while pos < end:
        op, length = struct.unpack_from("<BQ", data, pos)
        out.append((op, pos, pos + 9 + length))
        pos += 9 + length
    return out


def _layout(data: bytes) -> dict[str, list]:
    """Where things are in an mcap with uncompressed chunks: message data spans (with their
    channel), chunk records, message indexes, the data-end record and the summary records."""
    (summary_start,) = struct.unpack_from("<Q", data, len(data) - 8 - 20)
    out: dict[str, list] = {"messages": [], "chunks": [], "indexes": [], "summary": []}
    for op, start, end in _records(data, 8, summary_start):
        if op == 0x06:
            out["chunks"].append((start, end))
            (n,) = struct.unpack_from("<I", data, start + 9 + 28)
            first = start + 9 + 40 + n
            for inner, a, b in _records(data, first, end):
                if inner == 0x05:
                    (channel,) = struct.unpack_from("<H", data, a + 9)
                    out["messages"].append((a + 9 + 22, b, channel))
        elif op == 0x07:
            out["indexes"].append((start, end))
        elif op == 0x0F:
            out["data_end"] = [(start, end)]
    footer = len(data) - 8 - 29
    out["summary"] = [(a, b, op) for op, a, b in _records(data, summary_start, footer)]
    return out


def _channels(data: bytes, summary: list) -> dict[int, str]:
    topics = {}
    for a, _, op in summary:
        if op == 0x04:
            (cid,) = struct.unpack_from("<H", data, a + 9)
            (n,) = struct.unpack_from("<I", data, a + 9 + 4)
            topics[cid] = data[a + 9 + 8 : a + 9 + 8 + n].decode()
    return topics


def _write(tmp_path: Path, name: str = "bag") -> tuple[Path, Path, bytes]:
    path = write_bag(_trajectory(), tmp_path / name, LAYOUT)
    (file,) = path.glob("*.mcap")
    return path, file, file.read_bytes()


def test_dynid_mcap_carries_every_crc_of_the_mcap_specification(tmp_path: Path) -> None:
    """Chunk CRCs over the uncompressed records, the data-section CRC over every byte before
    the data-end record, the summary CRC over the summary and the footer up to that field."""
    _, _, data = _write(tmp_path)
    where = _layout(data)
    assert where["chunks"]
    for start, end in where["chunks"]:
        (stored,) = struct.unpack_from("<I", data, start + 9 + 24)
        (n,) = struct.unpack_from("<I", data, start + 9 + 28)
        assert stored != 0
        assert stored == zlib.crc32(data[start + 9 + 40 + n : end])
    ((data_end, _),) = where["data_end"]
    assert struct.unpack_from("<I", data, data_end + 9)[0] == zlib.crc32(data[:data_end])
    footer = len(data) - 8 - 29
    (summary_start,) = struct.unpack_from("<Q", data, footer + 9)
    assert summary_start == data_end + 13
    expected = zlib.crc32(data[summary_start : footer + 25])
    assert struct.unpack_from("<I", data, footer + 25)[0] == expected


def test_flipped_bytes_in_message_data_are_never_read(tmp_path: Path) -> None:
    """50 seeded corruptions of message data (1-4 bytes flipped in one message): every read
    raises one line naming the file, the chunk and the damaged message's topic; none is fitted."""
    path, file, original = _write(tmp_path)
    reference, _ = read_bag(path, LAYOUT)
    where = _layout(original)
    topics = _channels(original, where["summary"])
    assert set(topics.values()) == TOPICS
    rng = np.random.default_rng(6)
    silent, errors = 0, []
    for _ in range(50):
        a, b, channel = where["messages"][int(rng.integers(len(where["messages"])))]
        damaged = bytearray(original)
        for pos in rng.choice(np.arange(a, b), size=int(rng.integers(1, 5)), replace=False):
            damaged[int(pos)] ^= int(rng.integers(1, 256))
        file.write_bytes(bytes(damaged))
        try:
            read_bag(path, LAYOUT)
        except BagReadError as err:
            errors.append((str(err), topics[channel]))
        else:
            silent += 1
    assert silent == 0
    for message, topic in errors:
        assert "\n" not in message
        assert message.startswith(f"{file}: bag is corrupt: the chunk at byte ")
        assert "fails its CRC check" in message
        assert repr(topic) in message
    file.write_bytes(original)
    again, _ = read_bag(path, LAYOUT)
    assert again.same_data(reference)


def test_damage_outside_chunks_is_named_by_section(tmp_path: Path) -> None:
    path, file, original = _write(tmp_path)
    where = _layout(original)
    cases = {
        "the data section": where["indexes"][0][0] + 12,  # a message index record
        "the index (summary section": next(a for a, _, op in where["summary"] if op == 0x08) + 20,
    }
    for what, pos in cases.items():
        damaged = bytearray(original)
        damaged[pos] ^= 0x10
        file.write_bytes(bytes(damaged))
        for read in (
            lambda: read_bag(path, LAYOUT),
            lambda: list(iter_joint_states(path)),
        ):
            with pytest.raises(
                BagReadError,
                match=rf"^{re.escape(str(file))}: bag is corrupt: {re.escape(what)}.*CRC",
            ):
                read()


def test_bags_without_crcs_are_read_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Bags of writers that compute no CRC (rosbags itself) and sqlite3 bags are read, with a
    note that they cannot be verified; dynid's own mcap bags carry no such note."""
    store = m.make_typestore()
    t = store.types
    with Writer(tmp_path / "other", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", m.JOINT_STATE, typestore=store)
        for k in range(20):
            ns = T0 + k * 10_000_000
            stamp = t["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
            msg = t[m.JOINT_STATE](
                header=t["std_msgs/msg/Header"](stamp=stamp, frame_id=""), name=["a"],
                position=np.array([k], float), velocity=np.zeros(0), effort=np.zeros(0),
            )  # fmt: skip
            writer.write(conn, ns, store.serialize_cdr(msg, m.JOINT_STATE))
    (traj,), summary = read_bag(tmp_path / "other")
    assert traj.num_samples == 20
    (note,) = summary.notes
    assert note.startswith(str(tmp_path / "other" / "other.mcap"))
    assert "1 of 1 chunks and the index (summary section) carry no CRC" in note
    assert "rosbags" in note
    assert "cannot be detected" in note

    sqlite = write_bag(_trajectory(50), tmp_path / "sqlite", LAYOUT, storage=StorageFormat.SQLITE3)
    _, summary = read_bag(sqlite)
    assert any("sqlite3 storage carries no CRC" in n for n in summary.notes)

    own, _, _ = _write(tmp_path, "own")
    _, summary = read_bag(own, LAYOUT)
    assert summary.notes == []

    caplog.set_level(logging.WARNING, logger="dynid.data.bag")
    with open_bag(tmp_path / "other"):
        pass
    assert any("carry no CRC" in r.getMessage() for r in caplog.records)


def _edit_metadata(path: Path, edit) -> None:
    meta_file = path / "metadata.yaml"
    meta = yaml.safe_load(meta_file.read_text())
    edit(meta["rosbag2_bagfile_information"])
    meta_file.write_text(yaml.safe_dump(meta))


@pytest.mark.parametrize("storage", list(StorageFormat))
def test_metadata_claiming_a_billion_messages_sizes_no_buffer(
    tmp_path: Path, storage: StorageFormat
) -> None:
    traj = _trajectory()
    path = write_bag(traj, tmp_path / "bag", LAYOUT, storage=storage, segment_topic="/seg")

    def claim(info: dict) -> None:
        info["message_count"] = 3 * 10**9
        for topic in info["topics_with_message_count"]:
            topic["message_count"] = 10**9

    _edit_metadata(path, claim)
    tracemalloc.start()
    try:
        (back,), summary = read_bag(path, LAYOUT)
        chunks = list(iter_joint_states(path))
        segments, _ = read_segments(path, "/seg")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert back.same_data(read_bag(path, LAYOUT, split_segments=False)[0][0])
    np.testing.assert_array_equal(back.q, traj.q)
    assert sum(c.q.shape[0] for c in chunks) == traj.num_samples
    assert len(segments) == 1
    assert summary.expected_messages == 2 * 10**9
    assert summary.truncated


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('[{"start_ns": 1, ', "not valid JSON"),
        ('{"start_ns": 1}', "expected a list of segments, got dict"),
        ('[{"start_ns": "x", "end_ns": 2}]', r"\[0\]: expected .*got .*\"x\""),
        ('[{"start_ns": 5, "end_ns": 2}]', r"\[0\]: expected .*end_ns.*>= start_ns"),
        ('[{"start_ns": 1, "end_ns": 2, "meta": 3}]', r"\[0\]: expected"),
        ("[7]", r"\[0\]: expected .*got 7"),
    ],
)
def test_bad_segments_metadata_is_one_line_naming_the_key(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = write_bag(_trajectory(50), tmp_path / "bag", LAYOUT)
    _edit_metadata(path, lambda info: info["custom_data"].__setitem__(SEGMENTS_KEY, value))
    with pytest.raises(BagReadError) as err:
        read_bag(path, LAYOUT)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: metadata custom_data '{SEGMENTS_KEY}'")
    assert err.match(expected)
