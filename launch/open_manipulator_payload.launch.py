"""OpenManipulator-X lifting a payload; the proprioceptive fit identifies its mass and friction.

Live beside the robot (ROBOTIS open_manipulator_x driver with its current controller):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py

or on a recording (``dynid simulate omx_payload -o build/omx_payload.mcap`` writes a synthetic one):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py bag:=build/omx_payload.mcap
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

ARGUMENTS = (
    ("bag", "", "bag to replay; empty: the live robot"),
    ("player", "bag_player", "bag_player | ros2bag"),
    ("estimator", "proprio", "estimator name"),
    ("device", "cpu", "torch device: cpu | cuda"),
    ("output_dir", "dynid_output/omx_payload", "segment bags and identified parameters"),
    ("rviz", "true", "start RViz"),
)


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments and include replay.launch.py with the OpenManipulator-X settings."""
    arg = LaunchConfiguration
    replay = PathJoinSubstitution([FindPackageShare("dynid_bringup"), "launch",
                                   "replay.launch.py"])  # fmt: skip
    forwarded = {name: arg(name) for name, _, _ in ARGUMENTS}
    forwarded.update(
        robot="open_manipulator_x",
        problem="open_manipulator_payload",
        # sim time only when a bag provides /clock
        use_sim_time=PythonExpression(["'true' if '", arg("bag"), "' else 'false'"]),
    )
    return LaunchDescription(
        [DeclareLaunchArgument(n, default_value=v, description=d) for n, v, d in ARGUMENTS]
        + [
            IncludeLaunchDescription(
                PythonLaunchDescriptionSource(replay), launch_arguments=forwarded.items()
            )
        ]
    )
