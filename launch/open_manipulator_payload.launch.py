"""OpenManipulator-X lifting a payload; the proprioceptive fit identifies its mass and friction.

Live beside the robot (ROBOTIS open_manipulator_x driver with its current controller):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py

or on a recording (``dynid simulate omx_payload -o build/omx_payload.mcap`` writes a synthetic one):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py bag:=build/omx_payload.mcap

Arguments: bag, player, estimator (default proprio), device, output_dir, rviz
(see ``dynid_bringup.robot_launch``).
"""

from dynid_bringup.robot_launch import robot_launch_description

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    """replay.launch.py with the OpenManipulator-X robot, payload problem and estimator."""
    return robot_launch_description(
        robot="open_manipulator_x", problem="open_manipulator_payload", estimator="proprio"
    )
