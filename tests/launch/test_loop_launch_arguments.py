"""The loop launch files' arguments (``ros2 launch ... --show-args``): each declares the loop's
arguments with its driver's defaults, every declared argument is used by an action, apply is
none beside a real arm and franka on robot_sim, and the UR file requires the problem."""

from pathlib import Path

import pytest
from dynid_bringup.loop_launch import LOOP_ARGUMENTS
from launch.launch_description_sources import get_launch_description_from_python_launch_file
from test_launch_arguments import _used

LAUNCH = Path(__file__).resolve().parents[2] / "launch"
LOOP = {name for name, _ in LOOP_ARGUMENTS}


def _defaults(file: str) -> dict[str, str | None]:
    description = get_launch_description_from_python_launch_file(str(LAUNCH / file))
    out = {}
    for argument in description.get_launch_arguments():
        default = argument.default_value
        out[argument.name] = None if default is None else "".join(s.text for s in default)
    return out


@pytest.mark.parametrize(
    ("file", "extra", "expected"),
    [
        ("panda_sim.launch.py", {"payload_mass", "payload_com", "real_time_factor"}, {
            "apply": "franka", "joint_state_topic": "/joint_states",
            "problem": "panda_payload_loop",
            "action": "/joint_trajectory_controller/follow_joint_trajectory"}),
        ("franka.launch.py", set(), {
            "apply": "none", "joint_state_topic": "/franka/joint_states",
            "action": "/fr3_arm_controller/follow_joint_trajectory",
            "set_load_service": "/service_server/set_load", "speed_scale": "0.25"}),
        ("ur.launch.py", set(), {
            "apply": "none", "joint_state_topic": "/joint_states", "problem": None,
            "action": "/scaled_joint_trajectory_controller/follow_joint_trajectory",
            "set_payload_service": "/io_and_status_controller/set_payload",
            "flange_frame": "tool0", "autostart": "false"}),
    ],
)  # fmt: skip
def test_loop_files_declare_the_drivers_defaults(file: str, extra: set, expected: dict) -> None:
    defaults = _defaults(file)
    assert set(defaults) == LOOP | extra
    assert set(defaults) <= _used(file), set(defaults) - _used(file)
    assert {k: defaults[k] for k in expected} == expected
