"""The project's pytest configuration survives a ROS 2 install whose launch_testing pytest plugin
does not load under the pinned pytest: unit and ROS tests still run, and the launch tests are
skipped with the command that runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from node_helpers import ROOT

# the hook signature of launch_testing releases written for pytest < 8 (a py.path ``path``),
# which pytest 9 refuses when it registers the plugin
_BROKEN_HOOKS = """
import pytest


@pytest.hookimpl
def pytest_pycollect_makemodule(path, parent):
    return None
"""


def _install_plugin(site: Path, name: str) -> None:
    """A distribution in ``site`` registering module ``broken_hooks`` as pytest plugin ``name``
    (how the ROS 2 launch packages register theirs)."""
    (site / "broken_hooks.py").write_text(_BROKEN_HOOKS)
    info = site / f"{name}_plugin-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.0.0\n")
    (info / "entry_points.txt").write_text(f"[pytest11]\n{name} = broken_hooks\n")


def _pytest(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_launch_plugin_that_does_not_load_breaks_no_test_run(tmp_path) -> None:
    for name in ("launch_testing", "launch_pytest"):
        _install_plugin(tmp_path, name)
    # the plugin is there: loading it explicitly fails as it would under pytest's defaults
    target = "tests/ros/test_conversions.py"
    loaded = _pytest(tmp_path, "-p", "launch_testing", "--co", "-q", target)
    assert loaded.returncode != 0
    assert "'path'" in loaded.stdout + loaded.stderr
    # the project's configuration leaves it out: unit and ROS tests are collected and run
    run = _pytest(tmp_path, "-q", target, "tests/launch")
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout
