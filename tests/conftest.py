"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

from dynid.resources import shared_data_dir


@pytest.fixture
def shared_recording() -> Callable[..., Path]:
    """``shared_recording(*parts)``: the path ``parts`` below the shared recordings
    (:func:`dynid.resources.shared_data_dir`); the test is skipped, saying why, when the
    recordings or that path are not present."""

    def find(*parts: str) -> Path:
        try:
            path = shared_data_dir().joinpath(*parts)
        except FileNotFoundError as exc:
            pytest.skip(str(exc))
        if not path.is_dir():
            pytest.skip(f"{path} is not present")
        return path

    return find


@pytest.fixture
def run_dynid() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_dynid(*args, cwd, path=(), env=None, script=False)``: the command line ``dynid
    ARGS`` run in ``cwd`` in a subprocess, its output captured as text and its exit status not
    checked (600 s at most).

    ``path``: directories put in front of ``PYTHONPATH`` (a plug-in installed for the test);
    ``env``: variables set on top of this process's environment; ``script``: run the installed
    ``dynid`` console script as a user types it (``python -m dynid.cli`` where it is not
    installed).
    """

    def run(
        *args: str,
        cwd: Path,
        path: Iterable[Path] = (),
        env: Mapping[str, str] | None = None,
        script: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        console = shutil.which("dynid") if script else None
        prefix = [console] if console else [sys.executable, "-m", "dynid.cli"]
        pythonpath = os.pathsep.join([*map(str, path), os.environ.get("PYTHONPATH", "")])
        variables = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
        return subprocess.run([*prefix, *args], cwd=cwd, env={**variables, **(env or {})},
                              capture_output=True, text=True, timeout=600, check=False)  # fmt: skip

    return run
