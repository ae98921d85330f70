"""dynid on recorded or live data: [bag player] -> recorder -> estimator -> RViz.

With ``bag:=<path>`` the bag is replayed (``player:=bag_player``, dynid's own player, or
``player:=ros2bag`` for ``ros2 bag play --clock``) and every node runs on the bag's ``/clock``;
with an empty ``bag`` the recorder listens to the live robot. ``robot`` selects the node
parameter files ``config/nodes/<robot>_recorder.yaml`` and ``<robot>_estimator.yaml``.

    ros2 launch dynid_bringup replay.launch.py bag:=build/panda_box.mcap robot:=panda
"""

from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from launch import LaunchDescription

ARGUMENTS = (
    ("bag", "", "bag to replay (directory, .mcap or .db3); empty: live topics"),
    ("player", "bag_player", "bag_player (dynid) | ros2bag (ros2 bag play --clock)"),
    ("rate", "1.0", "playback speed factor"),
    ("robot", "panda", "robot of the node parameter files: panda | open_manipulator_x"),
    ("estimator", "csvgd", "estimator name: csvgd, proprio, ..."),
    ("problem", "panda_box", "problem YAML path or name in config/problems"),
    ("device", "cpu", "torch device of the estimator: cpu | cuda"),
    ("use_sim_time", "true", "run the nodes on /clock (true when replaying)"),
    ("output_dir", "dynid_output", "segment bags and identified parameters go below here"),
    ("rviz", "true", "start RViz with config/rviz/dynid.rviz"),
)


def generate_launch_description() -> LaunchDescription:
    """The launch description (see the module docstring)."""
    share = FindPackageShare("dynid_bringup")
    arg = LaunchConfiguration
    nodes_dir = PathJoinSubstitution([share, "config", "nodes"])
    has_bag = PythonExpression(["'", arg("bag"), "' != ''"])
    sim_time = {"use_sim_time": arg("use_sim_time")}
    player = Node(
        package="dynid_ros",
        executable="bag_player",
        name="bag_player",
        parameters=[{"bag": arg("bag"), "rate": arg("rate"), "clock": True, "delay": 2.0}],
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
    recorder = Node(
        package="dynid_ros",
        executable="recorder",
        name="recorder",
        parameters=[
            [nodes_dir, "/", arg("robot"), "_recorder.yaml"],
            {"output_dir": PathJoinSubstitution([arg("output_dir"), "segments"]), **sim_time},
        ],
        output="screen",
    )
    estimator = Node(
        package="dynid_ros",
        executable="estimator",
        name="estimator",
        parameters=[
            [nodes_dir, "/", arg("robot"), "_estimator.yaml"],
            {
                "estimator": arg("estimator"),
                "problem": arg("problem"),
                "device": arg("device"),
                "output_dir": PathJoinSubstitution([arg("output_dir"), "identified"]),
                **sim_time,
            },
        ],
        remappings=[("segment", "/recorder/segment")],
        output="screen",
    )
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        name="rviz",
        arguments=["-d", PathJoinSubstitution([share, "config", "rviz", "dynid.rviz"])],
        parameters=[sim_time],
        condition=IfCondition(arg("rviz")),
    )
    return LaunchDescription(
        [DeclareLaunchArgument(n, default_value=v, description=d) for n, v, d in ARGUMENTS]
        + [player, ros2bag, recorder, estimator, rviz]
    )
