"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Callable
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
