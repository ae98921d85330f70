"""launch_testing tests run only where the ROS 2 launch packages exist.

``launch``, ``launch_ros`` and ``launch_testing`` come with a system ROS 2 install (and the
Docker image) but are not published as Python wheels; elsewhere each test module here is
skipped before it is imported, with the reason printed in the pytest summary.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_NEEDED = ("launch", "launch_ros", "launch_testing")
_MISSING = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
_REASON = f"needs {', '.join(_MISSING)} (a system ROS 2 install or the docker image)"


class _SkippedModule(pytest.Module):
    """A test module that is reported as skipped instead of being imported."""

    def collect(self):
        raise pytest.skip.Exception(_REASON, allow_module_level=True)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """Skip the module when the launch packages are missing (it imports them at the top)."""
    if _MISSING and module_path.name.startswith("test_"):
        return _SkippedModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test collected here carries the ``launch`` marker."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.launch)
