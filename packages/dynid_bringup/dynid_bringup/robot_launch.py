"""The launch description shared by the per-robot launch files.

A per-robot launch file (``panda_box.launch.py``, ``open_manipulator_payload.launch.py``) fixes
the robot and the problem, picks a default estimator, and otherwise includes
``replay.launch.py`` unchanged: live beside the robot when ``bag`` is empty, on a replayed bag
(and its ``/clock``) otherwise.
"""

from __future__ import annotations

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

__all__ = ["robot_launch_description"]


def robot_launch_description(*, robot: str, problem: str, estimator: str) -> LaunchDescription:
    """Arguments ``bag``, ``player``, ``estimator``, ``device``, ``output_dir``, ``rviz``, then
    ``replay.launch.py`` with ``robot`` and ``problem`` fixed.

    Args:
        robot: robot of the node parameter files (``config/nodes/<robot>_*.yaml``).
        problem: problem name in ``config/problems`` (also the default output folder).
        estimator: default of the ``estimator`` argument (an estimator registry name).
    """
    arguments = (
        ("bag", "", "bag to replay; empty: the live robot"),
        ("player", "bag_player", "bag_player | ros2bag"),
        ("estimator", estimator, "estimator name"),
        ("device", "cpu", "torch device: cpu | cuda"),
        ("output_dir", f"dynid_output/{problem}", "segment bags and identified parameters"),
        ("rviz", "true", "start RViz"),
    )
    arg = LaunchConfiguration
    replay = PathJoinSubstitution([FindPackageShare("dynid_bringup"), "launch",
                                   "replay.launch.py"])  # fmt: skip
    forwarded = {name: arg(name) for name, _, _ in arguments}
    forwarded.update(
        robot=robot,
        problem=problem,
        # sim time only when a bag provides /clock
        use_sim_time=PythonExpression(["'true' if '", arg("bag"), "' else 'false'"]),
    )
    return LaunchDescription(
        [DeclareLaunchArgument(n, default_value=v, description=d) for n, v, d in arguments]
        + [
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(replay), launch_arguments=forwarded.items()
            )
        ]
    )
