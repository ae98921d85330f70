"""The loop beside ur_robot_driver on a UR arm: the exciter drives
``/scaled_joint_trajectory_controller/follow_joint_trajectory``, the recorder records
``/joint_states`` for exactly the motion, the estimator fits ``problem`` (required: the arm's
URDF and the payload on ``tool0``, e.g. ``docs/guide/examples/ur5_payload/ur5_payload.yaml``),
and payload_applier hands the result to ``/io_and_status_controller/set_payload`` only with
``apply:=ur`` and when the gates pass.

    ros2 launch dynid_bringup ur.launch.py problem:=my_ur_payload.yaml \\
        trajectory_file:=build/excite/trajectory.csv

then ``ros2 service call /exciter/run std_srvs/srv/Trigger``. Apply defaults to none.
Arguments: ``ros2 launch dynid_bringup ur.launch.py --show-args``.
"""

from dynid_bringup.loop_launch import loop_launch_description

from launch import LaunchDescription

JOINTS = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
          "wrist_2_joint", "wrist_3_joint"]  # fmt: skip


def generate_launch_description() -> LaunchDescription:
    """The loop with ur_robot_driver's topic, action and SetPayload service."""
    defaults = {
        "problem": None,
        "joint_state_topic": "/joint_states",
        "action": "/scaled_joint_trajectory_controller/follow_joint_trajectory",
        "set_load_service": "/service_server/set_load",
        "set_payload_service": "/io_and_status_controller/set_payload",
        "flange_frame": "tool0",
        "output_dir": "dynid_output/ur",
    }
    return loop_launch_description(defaults, JOINTS)
