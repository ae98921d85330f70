"""The loop beside franka_ros2 on a Franka arm: the exciter drives the arm controller's
FollowJointTrajectory, the recorder records ``/franka/joint_states`` (1 kHz) for exactly the
motion, the estimator fits the payload problem, payload_applier hands the result to
``/service_server/set_load`` only with ``apply:=franka`` and when the gates pass (franka_ros2
takes a load only while no controller runs; the applier reports the robot's answer).

    ros2 launch dynid_bringup franka.launch.py trajectory_file:=build/excite/trajectory.csv

then ``ros2 service call /exciter/run std_srvs/srv/Trigger``. The problem file's robot must name
the joints as the driver does; the
defaults are a Panda (``panda_joint1…7``, ``panda_link8``) with the arm controller of
franka_ros2; an FR3 (``fr3_joint1…7``, ``fr3_link8``) needs a problem on the FR3's URDF. Apply
defaults to none. Arguments: ``ros2 launch dynid_bringup franka.launch.py --show-args``.
"""

from dynid_bringup.loop_launch import loop_launch_description

from launch import LaunchDescription

JOINTS = [f"panda_joint{k}" for k in range(1, 8)]


def generate_launch_description() -> LaunchDescription:
    """The loop with franka_ros2's topic, action and SetLoad service."""
    defaults = {
        "problem": "panda_payload_loop",
        "joint_state_topic": "/franka/joint_states",
        "action": "/fr3_arm_controller/follow_joint_trajectory",
        "set_load_service": "/service_server/set_load",
        "set_payload_service": "/io_and_status_controller/set_payload",
        "flange_frame": "panda_link8",
        "output_dir": "dynid_output/franka",
    }
    return loop_launch_description(defaults, JOINTS)
