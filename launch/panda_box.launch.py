"""Panda shaking the Vicon-tracked box with two weights; CSVGD identifies the weight positions.

Live beside the robot (franka_ros2 and ros2-vicon-bridge running):

    ros2 launch dynid_bringup panda_box.launch.py

or on a recording (``dynid simulate panda_box -o build/panda_box`` writes a synthetic one):

    ros2 launch dynid_bringup panda_box.launch.py bag:=build/panda_box

Arguments (``--show-args``): bag, player, rate, device, max_iterations, estimator_settings,
rviz, estimator, output_dir (see ``dynid_bringup.robot_launch``); on a bag, ``robot_tf``
publishes the robot's TF so RViz shows the markers (docs/ros.md).
"""

from dynid_bringup.robot_launch import robot_launch_description

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    """The dynid pipeline with the Panda box robot, problem and estimator."""
    return robot_launch_description(robot="panda", problem="panda_box", estimator="csvgd")
