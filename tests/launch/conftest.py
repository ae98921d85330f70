"""launch_testing tests run only where the ROS 2 launch packages exist, with their plugin.

``launch``, ``launch_ros`` and ``launch_testing`` come with a system ROS 2 install (and the
Docker image) but are not published as Python wheels; elsewhere each test module here is
skipped before it is imported, with the reason printed in the pytest summary. The project's
pytest configuration leaves launch_testing's pytest plugin out (some ROS releases ship one that
does not load under the pinned pytest, which would break every run): ``scripts/test`` runs the
launch_testing modules with launch_testing's own runner (``python -m
launch_testing.launch_test FILE``), and pytest skips them saying so unless ``-p launch_testing``
loads the plugin.
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

    reason = _REASON

    def collect(self):
        raise pytest.skip.Exception(self.reason, allow_module_level=True)


class _NoPluginModule(_SkippedModule):
    """A test module that is reported as skipped: launch_testing's plugin is not loaded."""

    reason = (
        "launch_testing's pytest plugin is not loaded: scripts/test runs this module with "
        "python -m launch_testing.launch_test"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """Skip the module when the launch packages are missing (it imports them at the top), or
    when it is a launch_testing module and that plugin is not loaded (its tests would not run
    as launch tests)."""
    if not module_path.name.startswith("test_"):
        return None
    if _MISSING:
        return _SkippedModule.from_parent(parent, path=module_path)
    uses_plugin = "import launch_testing" in module_path.read_text(encoding="utf-8")
    if uses_plugin and not parent.config.pluginmanager.has_plugin("launch_testing"):
        return _NoPluginModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test collected here carries the ``launch`` marker."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.launch)
