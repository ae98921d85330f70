"""The loop on an arm: exciter -> recorder -> estimator -> payload_applier, beside the arm's
driver (``franka.launch.py``, ``ur.launch.py``) or robot_sim (``panda_sim.launch.py``).

:func:`loop_launch_description` declares the arguments of :data:`LOOP_ARGUMENTS` with the
robot's defaults and starts

* ``exciter``: ``trajectory_file`` (``dynid excite``'s ``trajectory.csv``) or, empty, a motion
  planned from ``problem`` at the arm's current pose; ``speed_scale``, ``move_to_start``, the
  controller's ``action``; it starts one run by itself only with ``autostart:=true``, once the
  estimator listens to the recorder's segments;
* ``recorder`` on ``joint_state_topic`` (segments by the exciter's ``~/start`` / ``~/stop``);
* ``estimator`` on ``problem`` with ``estimator`` (default ``lm``), the last
  ``holdout_fraction`` (default 0.2) of the motion held out to score the fit when the problem
  file names no held-out data;
* ``payload_applier`` with ``apply`` (``none`` | ``franka`` | ``ur``), the robot's load service
  and ``flange_frame``, gated also on the exciter's run having succeeded;
* RViz unless ``rviz:=false`` (beside a driver, its robot_state_publisher publishes the TF).

Outputs go under ``output_dir`` (``segments/``, ``identified/``).
"""

from __future__ import annotations

from collections.abc import Mapping

from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import Action, LaunchDescription

__all__ = ["LOOP_ARGUMENTS", "loop_launch_description", "loop_nodes"]

#: (name, description) of the arguments of every loop launch file; defaults per robot
LOOP_ARGUMENTS = (
    ("problem", "payload problem file (path or config/problems name)"),
    ("trajectory_file", "dynid excite's trajectory.csv; empty: plan from problem at the pose"),
    ("speed_scale", "time scaling of the motion, (0, 1]: 0.25 for a first run"),
    ("move_to_start", "move slowly to the motion's start when the arm is elsewhere"),
    ("autostart", "start the motion without a ~/run call (once the estimator listens)"),
    ("joint_state_topic", "the driver's 1 kHz sensor_msgs/JointState"),
    ("action", "the controller's FollowJointTrajectory action"),
    ("apply", "where an identified payload goes once the gates pass: none | franka | ur"),
    ("set_load_service", "franka_msgs/srv/SetLoad service"),
    ("set_payload_service", "ur_msgs/srv/SetPayload service"),
    ("flange_frame", "frame the controller takes the load in"),
    ("estimator", "estimator name (dynid's registry: lm, csvgd, ...)"),
    (
        "holdout_fraction",
        "tail of the recorded motion held out of the fit to score it (the "
        "held-out gate), when the problem file has no validation section",
    ),
    ("output_dir", "segment bags and identified parameters"),
    ("rviz", "start RViz with config/rviz/dynid.rviz"),
)

_COMMON_DEFAULTS = {
    "trajectory_file": "",
    "speed_scale": "0.25",
    "move_to_start": "false",
    "autostart": "false",
    "apply": "none",
    "estimator": "lm",
    "holdout_fraction": "0.2",
    "rviz": "true",
}


def loop_nodes(joints: list[str]) -> list[Action]:
    """The loop's nodes, reading the arguments of :data:`LOOP_ARGUMENTS`; ``joints`` are the
    recorded joints in the problem's order."""
    arg = LaunchConfiguration
    share = FindPackageShare("dynid_bringup")
    identified = PathJoinSubstitution([arg("output_dir"), "identified"])
    exciter = Node(
        package="dynid_ros",
        executable="exciter",
        name="exciter",
        parameters=[{
            "trajectory_file": arg("trajectory_file"),
            # the problem plans only when no trajectory file is given
            "problem": PythonExpression(["'' if '", arg("trajectory_file"), "' else '",
                                         arg("problem"), "'"]),
            "speed_scale": ParameterValue(arg("speed_scale"), value_type=float),
            "move_to_start": arg("move_to_start"),
            "autostart": arg("autostart"),
            "wait_for_subscribers": ["/recorder/segment"],
            "joint_state_topic": arg("joint_state_topic"),
            "action": arg("action"),
            "recorder": "/recorder",
        }],
        output="screen",
        # a run stopped by launch's SIGINT cancels the goal and stops the recorder (up to 3 s),
        # then the process exits; launch's default 5 s is short for both on a loaded machine
        sigterm_timeout="15",
    )  # fmt: skip
    recorder = Node(
        package="dynid_ros",
        executable="recorder",
        name="recorder",
        parameters=[{
            "joint_state_topic": arg("joint_state_topic"),
            "joints": joints,
            "segment_mode": "service",
            "output_dir": PathJoinSubstitution([arg("output_dir"), "segments"]),
        }],
        output="screen",
    )  # fmt: skip
    estimator = Node(
        package="dynid_ros",
        executable="estimator",
        name="estimator",
        parameters=[{
            "estimator": arg("estimator"),
            "problem": arg("problem"),
            "holdout_fraction": ParameterValue(arg("holdout_fraction"), value_type=float),
            "output_dir": identified,
            "max_segments": 1,
            "auto_run": True,
        }],
        remappings=[("segment", "/recorder/segment")],
        output="screen",
        sigterm_timeout="30",
    )  # fmt: skip
    applier = Node(
        package="dynid_ros",
        executable="payload_applier",
        name="payload_applier",
        parameters=[{
            "problem": arg("problem"),
            "posterior_dir": identified,
            "apply": arg("apply"),
            "flange_frame": arg("flange_frame"),
            "set_load_service": arg("set_load_service"),
            "set_payload_service": arg("set_payload_service"),
            "exciter_status_topic": "/exciter/status",
        }],
        output="screen",
    )  # fmt: skip
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        name="rviz",
        arguments=["-d", PathJoinSubstitution([share, "config", "rviz", "dynid.rviz"])],
        condition=IfCondition(arg("rviz")),
    )
    return [exciter, recorder, estimator, applier, rviz]


def loop_launch_description(
    defaults: Mapping[str, str | None], joints: list[str], extra: list[Action] | None = None
) -> LaunchDescription:
    """The arguments of :data:`LOOP_ARGUMENTS` with ``defaults`` over the common ones (``None``:
    no default, the argument is required), then ``extra`` actions (robot_sim) and
    :func:`loop_nodes`."""
    values = {**_COMMON_DEFAULTS, **defaults}
    declared = [
        DeclareLaunchArgument(name, description=text)
        if values[name] is None
        else DeclareLaunchArgument(name, default_value=values[name], description=text)
        for name, text in LOOP_ARGUMENTS
    ]
    return LaunchDescription([*declared, *(extra or []), *loop_nodes(joints)])
