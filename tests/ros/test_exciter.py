"""The exciter node over real DDS beside robot_sim: it refuses to move an arm that is not at the
motion's start (and names the joint), publishes the time-scaled motion on a topic in topic mode,
cancels its goal on Ctrl-C and exits cleanly, and refuses bad parameters in one line (exit 2).
The loop with the recorder, estimator and applier is ``test_exciter_loop.py``."""

from __future__ import annotations

import signal

import numpy as np
import pytest
import yaml
from node_helpers import (
    STARTUP_S,
    call_trigger,
    collect,
    executable,
    latched_history,
    output_of,
    ros_args,
    wait_for,
)
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from dynid_bench.robot_loop import write_motion
from dynid_ros import qos
from dynid_ros.excitation_motion import read_csv

FAR = [0.5, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]  # joint 1 half a radian from home


def states(messages: list[String]) -> list[str]:
    return [yaml.safe_load(m.data)["state"] for m in messages]


def test_refusal_far_from_the_start_topic_mode_planning_and_ctrl_c(
    test_node, spawn, tmp_path, stand_in_env
) -> None:
    motion = write_motion(tmp_path / "trajectory.csv", seed=3, duration=2.0, amplitude=0.3)
    sim = spawn(executable("robot_sim"), *ros_args({"initial_positions": FAR, "seed": 1}),
                env=stand_in_env)  # fmt: skip
    common = {"trajectory_file": str(motion), "recorder": ""}
    far = spawn(executable("exciter"), *ros_args(common, "-r", "__node:=far"), env=stand_in_env)
    topic = spawn(executable("exciter"), *ros_args(
        {**common, "mode": "topic", "speed_scale": 0.5, "start_tolerance": 1.0,
         "topic": "/test_controller/joint_trajectory"}, "-r", "__node:=topic"),
        env=stand_in_env)  # fmt: skip
    interrupted = spawn(executable("exciter"), *ros_args(
        {**common, "speed_scale": 0.25, "move_to_start": True, "approach_speed": 0.05,
         "autostart": True, "wait_for_subscribers": ["/test_go"]}, "-r", "__node:=interrupted"),
        env=stand_in_env)  # fmt: skip
    planned = spawn(executable("exciter"), *ros_args(
        {"problem": "panda_payload", "recorder": "", "mode": "topic", "speed_scale": 1.0,
         "topic": "/test_controller/planned", "plan_duration": 2.0, "plan_harmonics": 1,
         "plan_starts": 1, "plan_iterations": 3}, "-r", "__node:=planned"),
        env=stand_in_env)  # fmt: skip
    far_status = collect(test_node, String, "/far/status", latched_history())
    interrupted_status = collect(test_node, String, "/interrupted/status", latched_history())
    planned_status = collect(test_node, String, "/planned/status", latched_history())
    published = collect(test_node, JointTrajectory, "/test_controller/joint_trajectory",
                        qos.reliable(10))  # fmt: skip
    plans = collect(test_node, JointTrajectory, "/test_controller/planned", qos.reliable(10))

    # far from the start and not allowed to move there: refused, the joint named, nothing sent
    # (asked once the arm's joint states flow; again after more of them while the exciter has
    # not received one yet)
    joints = collect(test_node, JointState, "/joint_states", qos.sensor(10))
    wait_for(test_node, lambda: joints, "a joint state", sim)
    answer = call_trigger(test_node, "/far/run", STARTUP_S)
    for _ in range(20):
        if answer.message != "no joint state received yet":
            break
        seen = len(joints)
        wait_for(test_node, lambda seen=seen: len(joints) > seen + 100, "more joint states", sim)
        answer = call_trigger(test_node, "/far/run", STARTUP_S)
    assert not answer.success
    assert answer.message.startswith("the arm is 0.500 rad from the motion's start at "
                                     "panda_joint1"), answer.message  # fmt: skip
    wait_for(test_node, lambda: states(far_status)[-1:] == ["refused"], "the refusal", far)
    assert "moving" not in states(far_status)

    # autostart waits for a subscriber on /test_go, then moves to the start (slowly: about 19 s,
    # so the Ctrl-C lands while it moves); Ctrl-C cancels the goal, the node says why and exits
    # with status 0
    assert "moving_to_start" not in states(interrupted_status)
    test_node.create_subscription(String, "/test_go", lambda _msg: None, 10)
    wait_for(test_node, lambda: "moving_to_start" in states(interrupted_status),
             "the autostarted move to the start", interrupted, STARTUP_S)  # fmt: skip
    interrupted.send_signal(signal.SIGINT)
    assert interrupted.wait(timeout=60) == 0
    text = output_of(interrupted)
    assert "aborted: shutting down" in text, text
    wait_for(test_node, lambda: states(interrupted_status)[-1:] == ["aborted"], "the abort", sim)

    # a motion planned where the arm stopped: it starts there
    seen = len(joints)
    wait_for(test_node, lambda: len(joints) > seen, "a joint state after the abort", sim)
    pose = np.array(joints[-1].position)
    answer = call_trigger(test_node, "/planned/run", STARTUP_S)
    assert answer.success, answer.message

    # topic mode: the motion at half speed, every point's time doubled, velocities halved
    answer = call_trigger(test_node, "/topic/run", STARTUP_S)
    assert answer.success, answer.message
    wait_for(test_node, lambda: published, "the JointTrajectory", topic)
    msg = published[-1]
    expected = read_csv(motion).scaled(0.5)
    assert list(msg.joint_names) == expected.joint_names
    times = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
                      for p in msg.points])  # fmt: skip
    assert times[-1] == pytest.approx(4.0)
    assert np.diff(times).max() <= 0.01 + 1e-9  # point_rate_hz 100
    k = int(np.argmin(np.abs(times - 1.0)))
    j = int(np.argmin(np.abs(expected.t - times[k])))
    np.testing.assert_allclose(msg.points[k].velocities, expected.v[j], atol=1e-12)
    np.testing.assert_allclose(msg.points[k].accelerations, expected.a[j], atol=1e-12)
    wait_for(test_node, lambda: states(planned_status)[-1:] in (["succeeded"], ["refused"]),
             "the planned run", planned, 300.0)  # fmt: skip
    assert states(planned_status)[-2:] == ["moving", "succeeded"], planned_status[-1].data
    first = np.array(plans[-1].points[0].positions)
    np.testing.assert_allclose(first, pose, atol=0.02)  # starts where the arm was
    sim_output = output_of(sim)
    assert "goal canceled" in sim_output, sim_output


def test_a_recorder_without_its_first_joint_state_yet_is_asked_again(
    test_node, spawn, tmp_path, stand_in_env
) -> None:
    """A recorder started beside the arm can refuse ``~/start`` (no joint state yet) after the
    exciter has its first one: the autostarted run asks again and moves, instead of aborting."""
    from std_srvs.srv import Trigger

    motion = write_motion(tmp_path / "trajectory.csv", seed=3, duration=1.0, amplitude=0.2)
    calls: list[bool] = []

    def start(_request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        calls.append(len(calls) >= 3)
        response.success = calls[-1]
        response.message = "recording" if calls[-1] else "no valid message on /joint_states yet"
        return response

    def stop(_request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = True, "segment_0001"
        return response

    test_node.create_service(Trigger, "/lagging_recorder/start", start)
    test_node.create_service(Trigger, "/lagging_recorder/stop", stop)
    status = collect(test_node, String, "/lagging/status", latched_history())
    sim = spawn(executable("robot_sim"), *ros_args({"seed": 1}), env=stand_in_env)
    exciter = spawn(executable("exciter"), *ros_args(
        {"trajectory_file": str(motion), "recorder": "/lagging_recorder", "autostart": True,
         "speed_scale": 1.0, "move_to_start": True}, "-r", "__node:=lagging"),
        env=stand_in_env)  # fmt: skip
    wait_for(test_node, lambda: states(status)[-1:] in (["succeeded"], ["aborted"]),
             "the run's end", exciter, STARTUP_S)  # fmt: skip
    assert "moving" in states(status), [m.data for m in status]
    assert states(status)[-1] == "succeeded", status[-1].data
    assert calls == [False, False, False, True]
    assert sim.poll() is None, output_of(sim)


BAD = (
    ({}, "give exactly one of parameters 'trajectory_file'"),
    ({"trajectory_file": "x.csv", "problem": "panda_payload"}, "give exactly one of"),
    ({"trajectory_file": "/no/such.csv"}, "parameter 'trajectory_file': /no/such.csv: cannot"),
    ({"problem": "panda_payload", "speed_scale": 1.5}, "'speed_scale' must be in (0, 1]"),
    ({"problem": "panda_payload", "mode": "service"}, "parameter 'mode' must be one of"),
    ({"problem": "panda_payload", "joint_names": ["a"]}, "has 1 names for the motion's 7"),
    ({"problem": "panda_payload", "plan_harmonics": 0}, "'plan_harmonics' must be ≥ 1"),
)


def test_bad_parameters_are_refused_with_a_message(spawn, stand_in_env) -> None:
    procs = [spawn(executable("exciter"), *ros_args(p), env=stand_in_env) for p, _ in BAD]
    for proc, (_, message) in zip(procs, BAD, strict=True):  # started together: one wait
        assert proc.wait(timeout=STARTUP_S) == 2
        assert message in output_of(proc)
