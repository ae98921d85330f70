"""launch_testing tests run only where the ROS 2 launch packages exist.

``launch``, ``launch_ros`` and ``launch_testing`` come with a system ROS 2 install (and the
Docker image) but are not published as Python wheels; elsewhere these tests are skipped with the
reason printed in the pytest summary.
"""

import importlib.util

import pytest

_NEEDED = ("launch", "launch_ros", "launch_testing")
_MISSING = [m for m in _NEEDED if importlib.util.find_spec(m) is None]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the launch tests; skip them, saying why, when the launch packages are missing."""
    for item in items:
        if "tests/launch" not in str(item.fspath).replace("\\", "/"):
            continue
        item.add_marker(pytest.mark.launch)
        if _MISSING:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"needs {', '.join(_MISSING)} (system ROS 2 install or docker image)"
                )
            )
