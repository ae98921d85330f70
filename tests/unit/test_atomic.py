"""Atomic output: a failed write leaves the previous file and no temporary behind."""

import pytest

from dynid.atomic import atomic_open, atomic_write_text


def test_write_replaces_and_creates_parents(tmp_path) -> None:
    path = atomic_write_text(tmp_path / "a" / "b.yaml", "x: 1\n")
    assert path.read_text() == "x: 1\n"
    atomic_write_text(path, "x: 2\n")
    assert path.read_text() == "x: 2\n"
    assert [p.name for p in path.parent.iterdir()] == ["b.yaml"]


def test_failure_keeps_the_old_file(tmp_path) -> None:
    path = atomic_write_text(tmp_path / "post.yaml", "old")

    def crash_midway() -> None:
        with atomic_open(path) as fh:
            fh.write("half")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        crash_midway()
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["post.yaml"]


def test_binary_mode_and_bad_mode(tmp_path) -> None:
    with atomic_open(tmp_path / "x.bin", "wb") as fh:
        fh.write(b"\x00\x01")
    assert (tmp_path / "x.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(ValueError, match="mode must be"):
        atomic_open(tmp_path / "y", "a").__enter__()
