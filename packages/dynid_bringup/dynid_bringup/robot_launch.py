"""The pipeline every dynid launch file starts: [bag player] -> recorder -> estimator -> RViz.

``replay.launch.py`` takes the robot and the problem as arguments; a per-robot launch file
(``panda_box.launch.py``, ``open_manipulator_payload.launch.py``) fixes them and declares only
the arguments that take effect there (``ros2 launch ... --show-args``). Both build the same
actions with :func:`pipeline`:

* ``bag_player`` (``player:=bag_player``) or ``ros2 bag play --clock`` (``player:=ros2bag``)
  when ``bag`` is given, every node then on the bag's ``/clock``;
* ``robot_tf`` when ``bag`` is given: the robot's TF from the replayed joint states and mocap
  poses (live, ``robot_state_publisher`` and the mocap bridge publish it);
* ``recorder`` and ``estimator`` with ``config/nodes/<robot>_recorder.yaml`` /
  ``<robot>_estimator.yaml``, the estimator's ``estimator``, ``max_iterations`` and
  ``estimator_settings`` from the arguments;
* RViz with ``config/rviz/dynid.rviz`` unless ``rviz:=false``.
"""

from __future__ import annotations

from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import Action, LaunchDescription, SomeSubstitutionsType

__all__ = ["COMMON_ARGUMENTS", "declare", "pipeline", "robot_launch_description"]

#: (name, default, description) of the arguments of every dynid launch file
COMMON_ARGUMENTS = (
    ("bag", "", "bag to replay (folder, .mcap or .db3); empty: the live robot's topics"),
    ("player", "bag_player", "bag_player (dynid) | ros2bag (ros2 bag play --clock)"),
    ("rate", "1.0", "playback speed factor"),
    ("device", "cpu", "torch device of the estimator: cpu | cuda"),
    ("max_iterations", "0", "iteration budget of each estimator run; 0: the estimator's settings"),
    ("estimator_settings", "{}", "YAML mapping of estimator settings, e.g. '{num_particles: 16}'"),
    ("rviz", "true", "start RViz with config/rviz/dynid.rviz"),
)


def declare(arguments: tuple[tuple[str, str, str], ...]) -> list[DeclareLaunchArgument]:
    """``DeclareLaunchArgument`` of each ``(name, default, description)``."""
    return [DeclareLaunchArgument(n, default_value=v, description=d) for n, v, d in arguments]


def pipeline(
    *,
    robot: SomeSubstitutionsType,
    problem: SomeSubstitutionsType,
    use_sim_time: SomeSubstitutionsType,
) -> list[Action]:
    """The nodes of a dynid launch file (see the module docstring), reading the arguments of
    :data:`COMMON_ARGUMENTS` plus ``estimator`` and ``output_dir``.

    Args:
        robot: robot of the node parameter files (``config/nodes/<robot>_*.yaml``).
        problem: problem YAML path or name in ``config/problems``.
        use_sim_time: ``'true'`` when the nodes run on a replayed ``/clock``.
    """
    share = FindPackageShare("dynid_bringup")
    arg = LaunchConfiguration
    nodes_dir = PathJoinSubstitution([share, "config", "nodes"])
    has_bag = PythonExpression(["'", arg("bag"), "' != ''"])
    sim_time = {"use_sim_time": use_sim_time}
    player = Node(
        package="dynid_ros",
        executable="bag_player",
        name="bag_player",
        # plays once the estimator listens to the segments: none is cut before it starts
        parameters=[
            {
                "bag": arg("bag"),
                "rate": arg("rate"),
                "clock": True,
                "delay": 2.0,
                "wait_for_subscribers": ["/recorder/segment"],
            }
        ],
        condition=IfCondition(
            PythonExpression([has_bag, " and '", arg("player"), "' == 'bag_player'"])
        ),
        output="screen",
    )
    ros2bag = ExecuteProcess(
        cmd=["ros2", "bag", "play", "--clock", "--rate", arg("rate"), "--delay", "2.0",
             arg("bag")],
        condition=IfCondition(
            PythonExpression([has_bag, " and '", arg("player"), "' == 'ros2bag'"])
        ),
        output="screen",
    )  # fmt: skip
    robot_tf = Node(
        package="dynid_ros",
        executable="robot_tf",
        name="robot_tf",
        parameters=[[nodes_dir, "/", robot, "_robot_tf.yaml"], sim_time],
        condition=IfCondition(has_bag),
        output="screen",
    )
    recorder = Node(
        package="dynid_ros",
        executable="recorder",
        name="recorder",
        parameters=[
            [nodes_dir, "/", robot, "_recorder.yaml"],
            {"output_dir": PathJoinSubstitution([arg("output_dir"), "segments"]), **sim_time},
        ],
        output="screen",
    )
    estimator = Node(
        package="dynid_ros",
        executable="estimator",
        name="estimator",
        parameters=[
            [nodes_dir, "/", robot, "_estimator.yaml"],
            {
                "estimator": arg("estimator"),
                "problem": problem,
                "device": arg("device"),
                "max_iterations": arg("max_iterations"),
                # a YAML mapping passed on as text (launch would read it as a mapping)
                "estimator_settings": ParameterValue(arg("estimator_settings"), value_type=str),
                "output_dir": PathJoinSubstitution([arg("output_dir"), "identified"]),
                **sim_time,
            },
        ],
        remappings=[("segment", "/recorder/segment")],
        output="screen",
        # on Ctrl-C a run ends its current iteration (seconds on a CPU) and saves its posterior:
        # SIGTERM, then SIGKILL, only after that
        sigterm_timeout="30",
    )
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        name="rviz",
        arguments=["-d", PathJoinSubstitution([share, "config", "rviz", "dynid.rviz"])],
        parameters=[sim_time],
        condition=IfCondition(arg("rviz")),
    )
    return [player, ros2bag, robot_tf, recorder, estimator, rviz]


def robot_launch_description(*, robot: str, problem: str, estimator: str) -> LaunchDescription:
    """A per-robot launch file: :data:`COMMON_ARGUMENTS`, ``estimator`` (default ``estimator``)
    and ``output_dir`` (default ``dynid_output/<problem>``), then :func:`pipeline` with
    ``robot`` and ``problem`` fixed, on sim time exactly when a bag is replayed.

    Args:
        robot: robot of the node parameter files (``config/nodes/<robot>_*.yaml``).
        problem: problem name in ``config/problems`` (also the default output folder).
        estimator: default of the ``estimator`` argument (an estimator registry name).
    """
    arguments = (
        *COMMON_ARGUMENTS,
        ("estimator", estimator, "estimator name (dynid's registry: csvgd, proprio, lm, ...)"),
        ("output_dir", f"dynid_output/{problem}", "segment bags and identified parameters"),
    )
    use_sim_time = PythonExpression(["'true' if '", LaunchConfiguration("bag"), "' else 'false'"])
    return LaunchDescription(
        declare(arguments) + pipeline(robot=robot, problem=problem, use_sim_time=use_sim_time)
    )
