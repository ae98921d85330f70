"""OpenManipulator-X lifting a payload; the proprioceptive fit identifies its mass and friction.

Live beside the robot (ROBOTIS open_manipulator_x driver with its current controller):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py

or on a recording (``dynid simulate omx_payload -o build/omx_payload`` writes a synthetic one;
the recorder cuts a segment per current step by itself):

    ros2 launch dynid_bringup open_manipulator_payload.launch.py bag:=build/omx_payload

Arguments (``--show-args``): bag, player, rate, device, max_iterations, estimator_settings,
rviz, estimator, output_dir (see ``dynid_bringup.robot_launch``); on a bag, ``robot_tf``
publishes the robot's TF so RViz shows the markers (docs/ros.md).
"""

from dynid_bringup.robot_launch import robot_launch_description

from launch import LaunchDescription


def generate_launch_description() -> LaunchDescription:
    """The dynid pipeline with the OpenManipulator-X robot, payload problem and estimator."""
    return robot_launch_description(
        robot="open_manipulator_x", problem="open_manipulator_payload", estimator="proprio"
    )
