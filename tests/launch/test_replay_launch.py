"""launch_testing: replay.launch.py plays a bag with dynid's bag_player on /clock; the recorder
cuts a segment from it and writes its bag, and the estimator receives the segment."""

import tempfile
import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import numpy as np
import pytest
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

from dynid.data import BagLayout, CommandTopic, JointStateTopic, MocapTopic, Trajectory, write_bag
from launch import LaunchDescription

LAUNCH = Path(__file__).resolve().parents[2] / "launch" / "replay.launch.py"
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def _bag(folder: Path) -> Path:
    """3 s of a Panda moving joint 6 (100 Hz) with a box pose and PD targets, Franka topics."""
    t = np.arange(301) * 0.01
    q = np.tile([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], (t.size, 1))
    q[:, 5] += 0.1 * np.sin(np.pi * t / 3.0) ** 2
    dq = np.gradient(q, t, axis=0)
    pose = np.tile([0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 1.0], (t.size, 1))
    traj = Trajectory(
        t=t, q=q, joint_names=JOINTS, dq=dq, command=np.concatenate([q, dq], axis=1),
        command_names=[f"desired/{j}/{f}" for f in ("position", "velocity") for j in JOINTS],
        obs=pose, obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
        meta={"t0_ns": 1_700_000_000_000_000_000},
    )  # fmt: skip
    layout = BagLayout(
        joint_states=JointStateTopic("/franka/joint_states"),
        mocap=(MocapTopic("box", "/vicon/box/box", "geometry_msgs/msg/TransformStamped"),),
        commands=(CommandTopic("/franka/desired_joint_states", label="desired",
                               fields=("position", "velocity")),),
    )  # fmt: skip
    return write_bag(traj, folder / "panda_replay", layout)


@pytest.mark.launch_test
def generate_test_description():
    """The launch file under test on a small bag, without RViz."""
    folder = Path(tempfile.mkdtemp(prefix="dynid_replay_launch_"))
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH)),
        launch_arguments={
            "bag": str(_bag(folder)), "robot": "panda", "rviz": "false",
            "output_dir": str(folder / "out"),
        }.items(),
    )  # fmt: skip
    return LaunchDescription([include, launch_testing.actions.ReadyToTest()]), {"folder": folder}


class TestReplay(unittest.TestCase):
    """While running: the bag is played, a segment is written and reaches the estimator."""

    def test_player_finishes_the_bag(self, proc_output):
        proc_output.assertWaitFor("finished", timeout=240)

    def test_segment_is_written_and_received(self, proc_output, folder):
        proc_output.assertWaitFor("segment_0001", timeout=240)
        proc_output.assertWaitFor("samples", timeout=240)
        segments = folder / "out" / "segments"
        assert any(p.name.startswith("segment_") for p in segments.iterdir())


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """After shutdown: every process ended with status 0 (SIGINT from launch is a clean stop)."""

    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)  # 0 only: a clean shutdown
