"""launch_testing: open_manipulator_payload.launch.py (live mode, no RViz) starts the recorder on
/joint_states and the estimator on the payload problem (proprio), and both shut down."""

import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import pytest
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

from launch import LaunchDescription

LAUNCH = Path(__file__).resolve().parents[2] / "launch" / "open_manipulator_payload.launch.py"


@pytest.mark.launch_test
def generate_test_description():
    """The launch file under test (live mode, no RViz) and the ready signal."""
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH)),
        launch_arguments={"rviz": "false", "output_dir": "build/launch_test/omx_payload"}.items(),
    )
    return LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestNodesStart(unittest.TestCase):
    """While running: both nodes report their configuration."""

    def test_recorder_listens_to_the_joint_states(self, proc_output):
        proc_output.assertWaitFor("recording /joint_states (auto segments", timeout=120)

    def test_estimator_loads_the_payload_problem(self, proc_output):
        proc_output.assertWaitFor("proprio on", timeout=240)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """After shutdown: every process ended with status 0 (SIGINT from launch is a clean stop)."""

    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)  # 0 only: a clean shutdown
