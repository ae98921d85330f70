"""Atomic file output: write to a temporary name in the target folder, then rename.

A crash or Ctrl-C while writing never leaves a half-written posterior, report, truth file or
benchmark record behind; the previous file (if any) stays intact until the rename. A write that
fails (a full disk, a read-only folder) raises :class:`OutputFileError`, an ``OSError`` whose
message names the file: ``could not write out/posterior.yaml: [Errno 28] No space left on
device``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from dynid.errors import DynidError

__all__ = ["OutputFileError", "atomic_open", "atomic_write_text"]


class OutputFileError(DynidError, OSError):
    """An output file could not be written: ``errno`` and ``strerror`` of the cause, ``filename``
    the file meant to be written, which the message names first."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror, str(path))
        self.cause = cause

    def __str__(self) -> str:
        return f"could not write {self.filename}: {self.cause}"

    def __reduce__(self) -> tuple[type[OutputFileError], tuple[Path, OSError]]:
        return type(self), (Path(self.filename), self.cause)


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` (``mode`` "w" or "wb"); rename it on success.

    The parent folder is created if needed. On any exception the temporary file is removed
    and ``path`` is left untouched.

    Raises:
        OutputFileError: creating the folder or the temporary file, closing or renaming it
            failed, or the block raised an ``OSError`` that names no file (a write to ``fh``).
            An ``OSError`` of the block that names a file passes unchanged.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp: str | None = None
    in_block = False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            in_block = True
            yield fh
            in_block = False
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and not (in_block and err.filename is not None):
            raise OutputFileError(path, err) from err
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path."""
    with atomic_open(path) as fh:
        fh.write(text)
    return Path(path)
