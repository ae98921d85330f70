"""The whole loop with nothing real: robot_sim (a MuJoCo Panda carrying a payload dynid is not
told) behind FollowJointTrajectory and Franka SetLoad, the exciter, recorder, estimator,
payload_applier (``apply:=franka``), robot_tf and RViz.

    dynid excite --problem config/problems/panda_payload_loop.yaml -o build/excite
    ros2 launch dynid_bringup panda_sim.launch.py trajectory_file:=build/excite/trajectory.csv \\
        autostart:=true

identifies the payload and sets it with SetLoad (robot_sim logs and publishes what it got on
``/robot_sim/received_loads``) with no other command; without ``autostart`` the motion starts on
``ros2 service call /exciter/run std_srvs/srv/Trigger``. Arguments (``--show-args``): those of
``dynid_bringup.loop_launch`` and robot_sim's hidden payload (``payload_mass``, ``payload_com``)
and ``real_time_factor``.
"""

from dynid_bringup.loop_launch import loop_launch_description
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

from launch import LaunchDescription

JOINTS = [f"panda_joint{k}" for k in range(1, 8)]


def generate_launch_description() -> LaunchDescription:
    """robot_sim and the loop on the Panda payload problem, SetLoad applied."""
    arg = LaunchConfiguration
    sim = [
        DeclareLaunchArgument("payload_mass", default_value="1.2",
                              description="robot_sim's hidden payload mass (kg)"),
        DeclareLaunchArgument("payload_com", default_value="[0.03, -0.02, 0.06]",
                              description="its centre of mass in panda_link8 (m), three floats"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0",
                              description="simulated s per wall s"),
        Node(
            package="dynid_ros",
            executable="robot_sim",
            name="robot_sim",
            parameters=[{
                        "payload_mass": ParameterValue(arg("payload_mass"), value_type=float),
                "payload_com": arg("payload_com"),  # YAML: a list of floats
                "real_time_factor": ParameterValue(arg("real_time_factor"), value_type=float),
                "joint_state_topic": arg("joint_state_topic"),
                "action_name": arg("action"),
                "set_load_service": arg("set_load_service"),
                "set_payload_service": arg("set_payload_service"),
            }],
            output="screen",
        ),
        Node(  # the arm's TF from its joint states, for RViz
            package="dynid_ros",
            executable="robot_tf",
            name="robot_tf",
            parameters=[{"robot": "panda", "joint_state_topic": arg("joint_state_topic")}],
            output="screen",
        ),
    ]  # fmt: skip
    defaults = {
        "problem": "panda_payload_loop",
        "joint_state_topic": "/joint_states",
        "action": "/joint_trajectory_controller/follow_joint_trajectory",
        "apply": "franka",
        "set_load_service": "/service_server/set_load",
        "set_payload_service": "/io_and_status_controller/set_payload",
        "flange_frame": "panda_link8",
        "output_dir": "dynid_output/panda_sim",
    }
    return loop_launch_description(defaults, JOINTS, sim)
