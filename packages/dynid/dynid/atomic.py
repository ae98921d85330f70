"""Atomic file output: write to a temporary name in the target folder, then rename.

A crash or Ctrl-C while writing never leaves a half-written posterior, report, truth file or
benchmark record behind; the previous file (if any) stays intact until the rename.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_open", "atomic_write_text"]


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` (``mode`` "w" or "wb"); rename it on success.

    The parent folder is created if needed. On any exception the temporary file is removed
    and ``path`` is left untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path."""
    with atomic_open(path) as fh:
        fh.write(text)
    return Path(path)
