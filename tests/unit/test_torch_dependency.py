"""dynid's hold on torch (and mujoco): the requirement admits the version CI pins and no untested
minor version, and torch's internals are used in one module only."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "packages" / "dynid" / "dynid"


def _requirement(name: str) -> Requirement:
    project = tomllib.loads((ROOT / "packages" / "dynid" / "pyproject.toml").read_text())
    found = [Requirement(r) for r in project["project"]["dependencies"]]
    return next(r for r in found if r.name == name)


def _pinned(path: Path, name: str) -> Version:
    pins = re.findall(rf"^{name}==(\S+)$", path.read_text(), flags=re.MULTILINE)
    assert len(pins) == 1, f"{path.relative_to(ROOT)}: expected one {name}== pin, found {pins}"
    return Version(pins[0])


@pytest.mark.parametrize("name", ["torch", "mujoco"])
def test_the_requirement_admits_the_pinned_version_and_not_the_next_minor(name: str):
    requirement = _requirement(name)
    pin = _pinned(ROOT / "requirements" / "constraints.txt", name)
    assert _pinned(ROOT / "requirements" / "base.txt", name) == pin
    assert requirement.specifier.contains(pin), f"{requirement} does not admit {name} {pin}"
    untested = Version(f"{pin.major}.{pin.minor + 1}")
    assert not requirement.specifier.contains(untested), f"{requirement} admits {name} {untested}"


_PRIVATE = re.compile(r"torch(\.\w+)*\._\w|\._schema\b|\._version\b|_python_dispatch")


def test_torch_internals_are_used_only_by_the_operator_replay():
    users = {
        str(path.relative_to(CORE))
        for path in CORE.rglob("*.py")
        if _PRIVATE.search(path.read_text(encoding="utf-8"))
    }
    assert users == {"model/op_replay.py"}
