"""Atomic output: a failed write leaves the previous file and no temporary behind, and its
error names the file."""

import errno
import os
import pickle

import numpy as np
import pytest

from dynid import atomic
from dynid.atomic import OutputFileError, atomic_open, atomic_write_text
from dynid.posterior import Posterior


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


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write to a file that atomic_open opens fails with ENOSPC."""
    fdopen = os.fdopen

    def full(fd: int, mode: str, **kwargs):
        fh = fdopen(fd, mode, **kwargs)

        def write(_data) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        fh.write = write
        return fh

    monkeypatch.setattr(atomic.os, "fdopen", full)


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch) -> None:
    posterior = Posterior(np.zeros((3, 1)), ["a"], ["kg"], estimator="test")
    yaml_path = atomic_write_text(tmp_path / "out" / "posterior.yaml", "old")
    npz_path = tmp_path / "out" / "particles.npz"
    _full_disk(monkeypatch)
    for write, path in ((posterior.to_yaml, yaml_path), (posterior.save_npz, npz_path)):
        with pytest.raises(OutputFileError) as raised:
            write(path)
        assert str(raised.value) == f"could not write {path}: [Errno 28] {os.strerror(28)}"
        assert isinstance(raised.value, OSError)  # the family the CLI prints in one line
        assert raised.value.errno == errno.ENOSPC
    assert yaml_path.read_text() == "old"
    assert sorted(p.name for p in yaml_path.parent.iterdir()) == ["posterior.yaml"]
    again = pickle.loads(pickle.dumps(raised.value))
    assert str(again) == str(raised.value)


def test_a_folder_that_cannot_be_made_names_the_file(tmp_path) -> None:
    (tmp_path / "out").write_text("a file where a folder should be")
    path = tmp_path / "out" / "posterior.yaml"
    with pytest.raises(OutputFileError, match=f"^could not write {path}: "):
        atomic_write_text(path, "x: 1\n")


def test_an_error_about_another_file_passes_unchanged(tmp_path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(FileNotFoundError) as raised, atomic_open(tmp_path / "b.yaml") as fh:
        fh.write(missing.read_text())
    assert raised.value.filename == str(missing)
    assert [p.name for p in tmp_path.iterdir()] == []
