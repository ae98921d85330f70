"""robot_sim over real DDS: FollowJointTrajectory goals executed as joint_trajectory_controller
does (success within tolerance, unknown joints rejected, cancel), and joint states whose torques
carry the hidden payload (a static pose's torques against Pinocchio's gravity with the payload).

robot_sim and the action client run with ``control_msgs`` importable (the ``stand_in_env``
fixture builds the stand-in overlay where the Python wheels lack it).
"""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pinocchio as pin
import pytest
from node_helpers import STARTUP_S, collect, executable, output_of, ros_args, wait_for
from ros_helpers import HERE, PYTHON, spin_until
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from dynid.model.attachments import attach_payload
from dynid.model.robot import load_robot
from dynid.sim.panda_box import HOME
from dynid_ros.conversions import stamp_ns
from dynid_ros.qos import clock as clock_qos
from dynid_ros.qos import sensor

ACTION = "/joint_trajectory_controller/follow_joint_trajectory"
PANDA = [f"panda_joint{i}" for i in range(1, 8)]
PAYLOAD = {"payload_mass": 1.5, "payload_com": [0.02, -0.01, 0.08],
           "payload_inertia": [4e-3, 5e-3, 3e-3, 0.0, 0.0, 0.0]}  # fmt: skip


def start_sim(spawn, env, test_node, **parameters):
    """robot_sim with ``parameters``, once its joint states arrive: the process and the list
    the test node's joint states collect into."""
    proc = spawn(executable("robot_sim"), *ros_args(parameters), env=env)
    states = collect(test_node, JointState, "/joint_states", sensor())
    wait_for(test_node, lambda: len(states) > 10, "robot_sim's joint states", proc, STARTUP_S)
    return proc, states


def run_client(env, goals: list[dict], test_node=None) -> list[dict]:
    """Send ``goals`` with ``trajectory_client.py`` and return its results; ``test_node`` spins
    meanwhile (its subscriptions keep receiving)."""
    client = subprocess.Popen(
        [PYTHON, str(HERE / "trajectory_client.py"), ACTION, json.dumps(goals)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    if test_node is not None:
        spin_until(test_node, lambda: client.poll() is not None, 180.0)
    out = client.communicate(timeout=180)[0]
    results = [json.loads(x[7:]) for x in out.splitlines() if x.startswith("RESULT ")]
    assert len(results) == len(goals), out
    return results


def test_goals_succeed_within_tolerance_unknown_joints_are_rejected_and_cancel_holds(
    test_node, spawn, stand_in_env
) -> None:
    proc, states = start_sim(spawn, stand_in_env, test_node, seed=1)
    home = list(HOME)
    target = list(home)
    target[3] += 0.3  # joint 4 by 0.3 rad in 1 s
    far = list(target)
    far[0] += 1.0  # joint 1 by 1 rad in 4 s: canceled after 1 s
    goals = [
        {"joints": PANDA, "points": [{"t": 1.0, "q": target}], "goal_tolerance": 0.01,
         "goal_time_tolerance": 1.0},
        {"joints": [*PANDA[:6], "fr3_joint7"], "points": [{"t": 1.0, "q": home}]},
        {"joints": PANDA, "points": [{"t": 4.0, "q": far, "v": [0.0] * 7}],
         "cancel_after_s": 1.0},
    ]  # fmt: skip
    reached, rejected, canceled = run_client(stand_in_env, goals)
    assert reached["status"] == "SUCCEEDED", (reached, output_of(proc))
    assert reached["error_code"] == 0
    assert reached["feedback"]["count"] > 10  # one per 10 ms tick over about 1 s
    assert reached["feedback"]["index"] == 0
    assert rejected == {"accepted": False}
    assert canceled["status"] == "CANCELED", canceled
    # held where the cancel left it: joint 1 has moved, far from the 1 rad target, and is still
    spin_until(test_node, lambda: False, 1.0)  # drain what queued while the client ran
    states.clear()
    assert spin_until(test_node, lambda: len(states) > 300, 30.0)
    last = np.array([s.position for s in states[-200:]])
    assert 0.02 < last[-1, 0] - home[0] < 0.8, last[-1]
    assert np.ptp(last[:, 0]) < 2e-3
    np.testing.assert_allclose(last[-1, 3], target[3], atol=0.01)  # joint 4 stayed
    log = output_of(proc)
    assert "INVALID_JOINTS" in log, log
    assert "fr3_joint7" in log, log


def test_static_joint_torques_are_the_gravity_of_the_arm_with_the_hidden_payload(
    test_node, spawn, stand_in_env
) -> None:
    """Holding still, the measured torques (noise and offsets off) are what the impedance
    controller applies: Pinocchio's gravity torques of the Panda carrying the payload, at the
    measured pose, not those of the Panda alone. The controller sags under the payload it was
    not told of, until SetLoad tells it."""
    proc, states = start_sim(spawn, stand_in_env, test_node, torque_noise=0.0,
                             torque_offset=0.0, velocity_noise=0.0, **PAYLOAD)  # fmt: skip
    assert spin_until(test_node, lambda: len(states) > 3500, 60.0), output_of(proc)
    window = states[-500:]  # settled after 3 s of holding
    assert [list(s.name) for s in window[:1]] == [PANDA]
    q = np.mean([s.position for s in window], axis=0)
    tau = np.mean([s.effort for s in window], axis=0)
    assert np.max(np.abs([s.velocity for s in window])) < 1e-3
    inertia = np.array([[4e-3, 0.0, 0.0], [0.0, 5e-3, 0.0], [0.0, 0.0, 3e-3]])
    loaded = attach_payload(load_robot("panda"), "panda_link8", mass=1.5,
                            com=PAYLOAD["payload_com"], inertia=inertia)  # fmt: skip
    bare = load_robot("panda")
    gravity = [pin.computeGeneralizedGravity(r.model, r.model.createData(), q)
               for r in (loaded, bare)]  # fmt: skip
    # to the stiffness times the encoder's 6e-6 rad grid (the loop limit-cycles on it)
    np.testing.assert_allclose(tau, gravity[0], atol=5e-3)
    assert np.max(np.abs(gravity[0] - gravity[1])) > 1.0  # the payload's share is large
    # the controller does not know the payload: it sags below a tight goal tolerance, and a
    # tight path tolerance stops a motion at once
    home = list(HOME)
    moved = list(HOME)
    moved[0] += 0.2
    sagging, stopped = run_client(stand_in_env, [
        {"joints": PANDA, "points": [{"t": 0.5, "q": home}], "goal_tolerance": 1e-3,
         "goal_time_tolerance": 0.3},
        {"joints": PANDA, "points": [{"t": 1.0, "q": moved}], "path_tolerance": 1e-3},
    ])  # fmt: skip
    assert sagging["status"] == "ABORTED", sagging
    assert sagging["error_code"] == -5  # GOAL_TOLERANCE_VIOLATED
    assert "panda_joint2 position error" in sagging["error_string"]
    assert stopped["status"] == "ABORTED", stopped
    assert stopped["error_code"] == -4  # PATH_TOLERANCE_VIOLATED
    # told the load (SetLoad), the controller compensates it: the same goal now succeeds
    told, reached = run_client(stand_in_env, [
        {"set_load": {"mass": 1.5, "center_of_mass": PAYLOAD["payload_com"],
                      "load_inertia": inertia.flatten(order="F").tolist()}},
        {"joints": PANDA, "points": [{"t": 0.5, "q": home}], "goal_tolerance": 1e-3,
         "goal_time_tolerance": 0.3},
    ])  # fmt: skip
    assert told == {"success": True, "error": ""}
    assert reached["status"] == "SUCCEEDED", (reached, output_of(proc))


def test_bad_parameters_are_refused_with_a_message(spawn, stand_in_env) -> None:
    cases = (
        ({"publish_rate_hz": 300.0}, "parameter 'publish_rate_hz' must divide 1000 Hz"),
        ({"robot": "kuka"}, "parameter 'robot' must be one of ['panda', 'ur5']"),
        ({"payload_mass": 1.0, "payload_inertia": [1.0, -1.0, 1.0, 0.0, 0.0, 0.0]},
         "setting 'payload_inertia' must be a symmetric positive-definite"),
        ({"joint_damping": [0.1, 0.2]}, "parameter 'joint_damping' needs 7 values"),
        ({"torque_sensing": "joint"}, "parameter 'torque_sensing' must be one of ['motor', "
                                      "'link']"),
    )  # fmt: skip
    procs = [spawn(executable("robot_sim"), *ros_args(p), env=stand_in_env) for p, _ in cases]
    for proc, (_, message) in zip(procs, cases, strict=True):  # started together: one wait
        assert proc.wait(timeout=STARTUP_S) == 2
        assert message in output_of(proc)


def test_faster_than_real_time_on_clock_with_stamps_at_the_publish_rate(
    test_node, spawn, stand_in_env
) -> None:
    """``real_time_factor: 0`` runs ahead of the wall clock and says where on ``/clock``; the
    joint states at 500 Hz are 2 ms of simulated time apart."""
    proc, states = start_sim(spawn, stand_in_env, test_node, real_time_factor=0.0,
                             publish_clock=True, publish_rate_hz=500.0)  # fmt: skip
    clock = collect(test_node, Clock, "/clock", clock_qos())
    assert spin_until(test_node, lambda: len(clock) > 1, 30.0), output_of(proc)
    first, wall = clock[-1].clock, time.monotonic()
    assert spin_until(test_node, lambda: False, 2.0) is False
    simulated = stamp_ns(clock[-1].clock) - stamp_ns(first)
    assert simulated * 1e-9 > 1.5 * (time.monotonic() - wall), output_of(proc)
    stamps = np.array([stamp_ns(s.header.stamp) for s in states[-100:]])
    steps = np.diff(stamps)
    assert np.all(steps % 2_000_000 == 0)  # 2 ms apart; best effort may drop some
    assert np.median(steps) == 2_000_000


@pytest.mark.parametrize(("sensing", "share"), [("motor", 1.0), ("link", 0.0)])
def test_joint_friction_shows_in_motor_side_torques_only_at_constant_velocity(
    test_node, spawn, stand_in_env, sensing: str, share: float
) -> None:
    """Joint 1 of the Panda turns about the vertical at a constant 0.3 rad/s (a linear segment):
    no gravity, no Coriolis torque on it, so its motor-side torque (noise and offsets off) is its
    friction, dry plus viscous, ``joint_coulomb`` + ``joint_damping`` × 0.3; a link-side sensor
    (the Panda's default, as its ``tau_J``) reads none of it."""
    coulomb, damping = 1.0, 0.5
    proc, states = start_sim(spawn, stand_in_env, test_node, torque_noise=0.0,
                             torque_offset=0.0, velocity_noise=0.0, torque_sensing=sensing,
                             joint_coulomb=[coulomb] * 7, joint_damping=[damping] * 7)  # fmt: skip
    home = list(HOME)
    first, last = list(HOME), list(HOME)
    first[0] += 0.3
    last[0] += 0.9
    (result,) = run_client(stand_in_env, [
        {"joints": PANDA, "points": [{"t": 1.0, "q": first}, {"t": 3.0, "q": last}]},
    ], test_node)  # fmt: skip
    assert result["status"] == "SUCCEEDED", (result, output_of(proc))
    q1 = np.array([s.position[0] for s in states]) - home[0]
    v1 = np.array([s.velocity[0] for s in states])
    tau1 = np.array([s.effort[0] for s in states])
    middle = (q1 > 0.45) & (q1 < 0.75)  # the middle of the constant-velocity segment
    assert middle.sum() > 300, middle.sum()  # best effort: most of its 1000 samples arrive
    np.testing.assert_allclose(np.median(v1[middle]), 0.3, atol=0.01)
    friction = coulomb + damping * 0.3
    np.testing.assert_allclose(np.median(tau1[middle]), share * friction, atol=0.05 * friction)
