"""The package root exposes the main entry points, lazily."""

import subprocess
import sys

import pytest

import dynid


@pytest.mark.parametrize("name", [n for n in dynid.__all__ if n != "__version__"])
def test_root_names_resolve(name: str) -> None:
    assert getattr(dynid, name).__name__ == name


def test_unknown_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = dynid.nope


def test_import_is_light() -> None:
    """``import dynid`` alone does not pull in torch or Pinocchio."""
    code = "import sys, dynid; print('torch' in sys.modules, 'pinocchio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
