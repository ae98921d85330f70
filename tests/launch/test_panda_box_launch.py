"""launch_testing: panda_box.launch.py (live mode, no RViz) starts the recorder on the Franka
topics and the estimator on the Panda box problem, and both shut down cleanly."""

import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import pytest
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

from launch import LaunchDescription

LAUNCH = Path(__file__).resolve().parents[2] / "launch" / "panda_box.launch.py"


@pytest.mark.launch_test
def generate_test_description():
    """The launch file under test (live mode, no RViz) and the ready signal."""
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH)),
        launch_arguments={"rviz": "false", "output_dir": "build/launch_test/panda_box"}.items(),
    )
    return LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestNodesStart(unittest.TestCase):
    """While running: both nodes report their configuration."""

    def test_recorder_listens_to_the_franka_joint_states(self, proc_output):
        proc_output.assertWaitFor("recording /franka/joint_states (auto segments", timeout=120)

    def test_estimator_loads_the_panda_box_problem(self, proc_output):
        proc_output.assertWaitFor("panda_box.yaml (cpu)", timeout=240)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """After shutdown: every process ended with status 0 (SIGINT from launch is a clean stop)."""

    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)  # 0 only: a clean shutdown
