"""The loop on a simulated robot, over real DDS: robot_sim carries a payload only this test knows;
the exciter drives it through a short excitation at full speed with the recorder running for
exactly the motion; the estimator (``lm``) fits the recorded segment; the payload_applier sends
the result to Franka ``SetLoad``, which robot_sim records. What SetLoad received must be the
hidden payload: mass within 1 %, centre of mass within 5 mm.

Failure paths on the same processes: an ``~/abort`` midway cancels the goal, stops the recorder
(its segment kept) and applies no load (the applier's ``motion`` gate); a goal the controller
rejects (a motion beyond the joint limits) ends the run with the reason; an applier with a gate
that cannot pass sends nothing and names the gate.

The motion is a rest-to-rest Fourier motion of :class:`dynid.excite.FourierMotion` (seeded), as
``dynid excite`` writes it to ``trajectory.csv``, made here rather than optimised (planning takes
minutes on a loaded 2-core machine). robot_sim runs as the launch file starts it: its torque
sensors have offsets (within ±0.2 N·m, drawn from its seed), which the problem fits, and its
joints the dry friction Gaz et al. 2019 identified on a real Panda (0.15–0.64 N·m) besides the
URDF's 0.003 N·m·s/rad. The payload problem models no friction; it need not, because robot_sim
senses the torques on the link side, as a Panda's ``tau_J`` is measured after the gearbox. (With
motor-side torques, friction of only 0.02 N·m·s/rad and 0.05 N·m on every joint made the 4 s
motion's centre-of-mass σ reach 9 mm and the applier refuse the load.) The problem is the
launch files' default, ``panda_payload_loop.yaml`` (``lm``, the last fifth of the motion held
out for the gates), as ``panda_sim.launch.py`` runs it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import yaml
from loop_fixtures import COM, INERTIA, MASS
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
from rclpy.context import Context
from rclpy.node import Node
from ros_helpers import spin_until, stop
from std_msgs.msg import String

from dynid.resources import repo_root
from dynid_bench.robot_loop import JOINTS, interfaces_env, write_motion
from dynid_msgs.msg import EstimatorStatus


class Loop:
    """The processes of the loop and what the test node collects from them."""

    def __init__(self, node: Node, procs: dict[str, subprocess.Popen], out: Path) -> None:
        self.node, self.procs, self.out = node, procs, out
        self.loads = collect(node, String, "/robot_sim/received_loads", latched_history())
        self.results = collect(node, String, "/payload_applier/result", latched_history())
        self.strict = collect(node, String, "/strict_applier/result", latched_history())
        self.status = collect(node, String, "/exciter/status", latched_history())
        self.bad_status = collect(node, String, "/bad_exciter/status", latched_history())
        self.fits = collect(node, EstimatorStatus, "/estimator/status", latched_history())

    def wait(self, what: str, predicate: Callable[[], bool], proc: str,
             timeout_s: float = 60.0) -> None:  # fmt: skip
        wait_for(self.node, predicate, what, self.procs[proc], timeout_s)

    @staticmethod
    def last(messages: list[String]) -> dict[str, Any]:
        return yaml.safe_load(messages[-1].data)

    def ended(self, messages: list[String], count: int) -> Callable[[], bool]:
        """Whether ``count`` runs have ended (succeeded, aborted or refused)."""
        return lambda: sum(
            yaml.safe_load(m.data)["state"] in ("succeeded", "aborted", "refused") for m in messages
        ) >= count  # fmt: skip


@pytest.fixture(scope="module")
def loop(tmp_path_factory) -> Iterator[Loop]:
    """Every node of the loop started, up and listening; torn down after the module."""
    out = tmp_path_factory.mktemp("loop")
    env = interfaces_env()
    problem = repo_root() / "config" / "problems" / "panda_payload_loop.yaml"
    good = write_motion(out / "trajectory.csv", seed=3, duration=4.0, amplitude=0.35)
    beyond = write_motion(out / "beyond.csv", seed=4, duration=2.0, amplitude=30.0)
    identified = out / "identified"
    exciter_common = {"speed_scale": 1.0, "recorder": "/recorder", "start_tolerance": 0.05,
                      "move_to_start": True, "approach_speed": 1.0}  # fmt: skip
    commands = {
        "robot_sim": (executable("robot_sim"), *ros_args({
            "payload_mass": MASS, "payload_com": COM, "payload_inertia": INERTIA,
            "seed": 5})),
        "recorder": (executable("recorder"), *ros_args({
            "joints": JOINTS, "output_dir": str(out / "segments"), "segment_mode": "service"})),
        "estimator": (executable("estimator"), *ros_args({
            "problem": str(problem), "output_dir": str(identified), "publish_every": 5,
            "estimator": "lm"},
            "-r", "segment:=/recorder/segment")),
        "payload_applier": (executable("payload_applier"), *ros_args({
            "problem": str(problem), "posterior_dir": str(identified), "apply": "franka",
            "exciter_status_topic": "/exciter/status"})),
        "strict_applier": (executable("payload_applier"), *ros_args({
            "problem": str(problem), "posterior_dir": str(identified), "apply": "franka",
            "max_mass_std": 1e-9}, "-r", "__node:=strict_applier")),
        "exciter": (executable("exciter"), *ros_args(
            {"trajectory_file": str(good), **exciter_common})),
        "bad_exciter": (executable("exciter"), *ros_args(
            {"trajectory_file": str(beyond), **exciter_common, "recorder": ""},
            "-r", "__node:=bad_exciter")),
    }  # fmt: skip
    procs = {
        name: subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        for name, cmd in commands.items()
    }
    context = Context()
    rclpy.init(context=context)
    node = Node("loop_test", context=context)
    try:
        loop = Loop(node, procs, out)
        loop.wait("the estimator", lambda: node.count_subscribers("/recorder/segment") >= 1,
                  "estimator", STARTUP_S)  # fmt: skip
        loop.wait("the exciters", lambda: len(loop.status) and len(loop.bad_status), "exciter",
                  STARTUP_S)  # fmt: skip
        loop.wait("the appliers", lambda: node.count_subscribers("/estimator/status") >= 3,
                  "payload_applier", STARTUP_S)  # fmt: skip
        yield loop
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
        for proc in procs.values():
            stop(proc)


def run(loop: Loop, exciter: str) -> Any:
    """``~/run`` of ``exciter``, retried while the arm or its controller is not there yet."""
    answer = None
    for _ in range(60):
        answer = call_trigger(loop.node, f"/{exciter}/run", 30.0)
        waiting = "not available" in answer.message or "no joint state" in answer.message
        if answer.success or not waiting:
            return answer
        spin_until(loop.node, lambda: False, 0.5)
    return answer


def fits_ended(loop: Loop) -> int:
    """How many estimator runs have ended."""
    done = (EstimatorStatus.CONVERGED, EstimatorStatus.FAILED)
    return sum(s.state in done for s in loop.fits)


def fits_converged(loop: Loop) -> int:
    """How many estimator runs have converged (each one the appliers judge)."""
    return sum(s.state == EstimatorStatus.CONVERGED for s in loop.fits)


def test_a_rejected_goal_ends_the_run_with_the_reason(loop: Loop) -> None:
    answer = run(loop, "bad_exciter")
    assert answer.success, answer.message
    loop.wait("the bad run's end", loop.ended(loop.bad_status, 1), "bad_exciter")
    status = loop.last(loop.bad_status)
    assert status["state"] == "aborted"
    assert status["message"] == "the controller rejected the goal", status


def test_abort_midway_then_the_loop_sets_the_hidden_payload(loop: Loop) -> None:
    # an abort midway: the goal is cancelled, the recorder keeps the segment, nothing applied
    answer = run(loop, "exciter")
    assert answer.success, answer.message
    loop.wait("the motion", lambda: loop.last(loop.status)["state"] == "moving", "exciter")
    spin_until(loop.node, lambda: False, 1.0)  # a second into the motion
    aborted = call_trigger(loop.node, "/exciter/abort")
    assert aborted.success, "\n".join(m.data for m in loop.status)
    loop.wait("the aborted run's end", loop.ended(loop.status, 1), "exciter")
    status = loop.last(loop.status)
    assert status["state"] == "aborted", status
    assert status["message"].startswith("~/abort called; recorder: "), status
    assert "segment_" in status["recorder"], status  # the recorder wrote what it had
    loop.wait("the fit of the aborted run", lambda: fits_ended(loop) >= 1, "estimator", 180.0)
    if loop.fits[-1].state == EstimatorStatus.CONVERGED:  # the applier refuses it
        loop.wait("the applier's verdict", lambda: loop.results, "payload_applier")
        verdict = loop.last(loop.results)
        assert verdict["outcome"] == "gates_failed", verdict
        assert [g["name"] for g in verdict["gates"] if not g["passed"]][-1] == "motion"
    assert not loop.loads

    # the whole run: the recorded motion identified and the load set
    answer = run(loop, "exciter")
    assert answer.success, answer.message
    loop.wait("the run's end", loop.ended(loop.status, 2), "exciter", 60.0)
    status = loop.last(loop.status)
    assert status["state"] == "succeeded", status
    loop.wait("SetLoad at robot_sim", lambda: loop.loads, "payload_applier", 300.0)
    got = loop.last(loop.loads)
    assert got["count"] == 1, got  # the strict applier and the aborted run sent nothing
    request = got["request"]
    assert abs(request["mass"] - MASS) <= 0.01 * MASS, request
    assert np.linalg.norm(np.subtract(request["center_of_mass"], COM)) <= 0.005, request
    loop.wait("the strict applier's refusal", lambda: len(loop.strict) >= fits_converged(loop),
              "strict_applier")  # fmt: skip
    refusal = loop.last(loop.strict)
    assert refusal["outcome"] == "gates_failed"
    assert "mass_std" in refusal["summary"]
    for name, proc in loop.procs.items():
        assert proc.poll() is None, f"{name} died:\n{output_of(proc)}"
