"""dynid on recorded or live data: [bag player] -> recorder -> estimator -> RViz.

With ``bag:=<path>`` the bag is replayed (``player:=bag_player``, dynid's own player, or
``player:=ros2bag`` for ``ros2 bag play --clock``), every node runs on the bag's ``/clock`` and
``robot_tf`` publishes the robot's TF from the replayed joint states; with an empty ``bag`` the
recorder listens to the live robot. ``robot`` selects the node parameter files
``config/nodes/<robot>_recorder.yaml``, ``<robot>_estimator.yaml`` and ``<robot>_robot_tf.yaml``.

    ros2 launch dynid_bringup replay.launch.py bag:=build/panda_box robot:=panda

Arguments (``--show-args``): bag, player, rate, device, max_iterations, estimator_settings,
rviz (see ``dynid_bringup.robot_launch``), robot, problem, estimator, use_sim_time, output_dir.
"""

from dynid_bringup.robot_launch import COMMON_ARGUMENTS, declare, pipeline
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

ARGUMENTS = (
    *COMMON_ARGUMENTS,
    ("robot", "panda", "robot of the node parameter files: panda | open_manipulator_x"),
    ("problem", "panda_box", "problem YAML path or name in config/problems"),
    ("estimator", "csvgd", "estimator name (dynid's registry: csvgd, proprio, lm, ...)"),
    ("use_sim_time", "true", "run the nodes on /clock (true when replaying)"),
    ("output_dir", "dynid_output", "segment bags and identified parameters go below here"),
)


def generate_launch_description() -> LaunchDescription:
    """The launch description (see the module docstring)."""
    arg = LaunchConfiguration
    return LaunchDescription(
        declare(ARGUMENTS)
        + pipeline(robot=arg("robot"), problem=arg("problem"), use_sim_time=arg("use_sim_time"))
    )
