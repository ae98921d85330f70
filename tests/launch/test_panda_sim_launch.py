"""launch_testing: panda_sim.launch.py with ``autostart:=true`` runs the whole loop with no other
command: robot_sim, the exciter's motion with the recorder around it, the estimator's fit and
the payload_applier's SetLoad, which robot_sim accepts; every process then shuts down cleanly.

The problem is the launch file's default (the shipped panda_payload_loop.yaml, the last fifth of the
motion held out for the gates) and the motion a short seeded one
(:func:`dynid_bench.robot_loop.write_motion`).
"""

import unittest
from pathlib import Path

import launch_testing
import launch_testing.actions
import launch_testing.asserts
import pytest
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

from dynid_bench.robot_loop import write_motion
from launch import LaunchDescription

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch" / "panda_sim.launch.py"
OUT = ROOT / "build" / "launch_test" / "panda_sim"
MASS, COM = 1.2, [0.03, -0.02, 0.06]  # robot_sim's payload in the launch file's defaults


@pytest.mark.launch_test
def generate_test_description():
    """The launch file with a short motion, autostart and no RViz, and the ready signal."""
    OUT.mkdir(parents=True, exist_ok=True)
    motion = write_motion(OUT / "trajectory.csv", seed=3, duration=4.0, amplitude=0.35)
    include = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH)),
        launch_arguments={
            "rviz": "false", "autostart": "true", "speed_scale": "1.0",
            "move_to_start": "true", "trajectory_file": str(motion),
            "payload_mass": str(MASS), "payload_com": str(COM),
            "output_dir": str(OUT / "run"),
        }.items(),
    )  # fmt: skip
    return LaunchDescription([include, launch_testing.actions.ReadyToTest()])


class TestTheLoop(unittest.TestCase):
    """While running: the motion runs and ends, and the load is set."""

    def test_the_motion_runs_with_the_recorder_around_it(self, proc_output):
        proc_output.assertWaitFor("starting_recorder: starting the recorder", timeout=240)
        proc_output.assertWaitFor("succeeded: the motion ended", timeout=120)

    def test_the_identified_load_is_set(self, proc_output):
        proc_output.assertWaitFor("franka_msgs/srv/SetLoad accepted", timeout=420)
        proc_output.assertWaitFor("applied: applied {'mass'", timeout=60)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """After shutdown: every process ended with status 0 (SIGINT from launch is a clean stop)."""

    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
