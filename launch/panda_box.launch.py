"""Panda shaking the Vicon-tracked box with two weights; CSVGD identifies the weight positions.

Live beside the robot (franka_ros2 and ros2-vicon-bridge running):

    ros2 launch dynid_bringup panda_box.launch.py

or on a recording (``dynid simulate panda_box -o build/panda_box.mcap`` writes a synthetic one):

    ros2 launch dynid_bringup panda_box.launch.py bag:=build/panda_box.mcap
"""

from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

ARGUMENTS = (
    ("bag", "", "bag to replay; empty: the live robot"),
    ("player", "bag_player", "bag_player | ros2bag"),
    ("estimator", "csvgd", "estimator name"),
    ("device", "cpu", "torch device: cpu | cuda"),
    ("output_dir", "dynid_output/panda_box", "segment bags and identified parameters"),
    ("rviz", "true", "start RViz"),
)


def generate_launch_description() -> LaunchDescription:
    """Declare the arguments and include replay.launch.py with the Panda box settings."""
    arg = LaunchConfiguration
    replay = PathJoinSubstitution([FindPackageShare("dynid_bringup"), "launch",
                                   "replay.launch.py"])  # fmt: skip
    forwarded = {name: arg(name) for name, _, _ in ARGUMENTS}
    forwarded.update(
        robot="panda",
        problem="panda_box",
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
