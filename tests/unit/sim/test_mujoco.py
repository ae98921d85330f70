"""The MuJoCo engine (dynid.sim.mujoco): the compiled robot is the URDF's, Pinocchio's inverse
dynamics explain the recorded torques, and a short recording is fitted to the true payload."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from xml.etree.ElementTree import Element, tostring

import numpy as np
import pinocchio as pin
import pytest
import torch
import yaml

from dynid.data import BagLayout, read_bag
from dynid.model.robot import load_robot
from dynid.model.spatial import log_cholesky_from_dynamic_params
from dynid.posterior import Posterior
from dynid.sim import read_truth
from dynid.sim.common import SimulationError
from dynid.sim.mujoco import arm, engine, panda_payload, panda_whole_arm, ur5_payload
from dynid.sim.panda_payload import PAYLOAD_COM, PAYLOAD_INERTIA, PAYLOAD_LINK, PAYLOAD_MASS

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = engine.Payload(
    PAYLOAD_LINK, engine.Inertial(PAYLOAD_MASS, np.array(PAYLOAD_COM), PAYLOAD_INERTIA)
)


def _panda_urdf() -> Element:
    return engine.prepared_urdf(
        engine.read_urdf(panda_payload.panda().urdf), locked=panda_payload.FINGERS
    )


def test_the_compiled_panda_has_the_urdf_inertials_and_the_payload() -> None:
    urdf = _panda_urdf()
    model = engine.compile_arm(urdf, PAYLOAD)
    expected = {**engine.urdf_inertials(urdf), "payload": PAYLOAD.inertial}
    assert len(expected) == 14  # 13 links with an <inertial> and the payload
    for body, want in expected.items():
        got = engine.compiled_inertial(model, body)
        assert got.mass == pytest.approx(want.mass, rel=1e-12), body
        np.testing.assert_allclose(got.com, want.com, atol=1e-12, err_msg=body)
        np.testing.assert_allclose(got.inertia, want.inertia, atol=1e-12, err_msg=body)


def test_the_flange_stays_a_body_and_the_payload_hangs_from_it() -> None:
    model = engine.compile_arm(_panda_urdf(), PAYLOAD)
    assert model.body(model.body("payload").parentid[0]).name == PAYLOAD_LINK
    assert model.nv == 7  # the fingers are locked


def test_a_compiled_inertial_that_differs_from_the_urdf_fails_loudly() -> None:
    model = engine.compile_arm(_panda_urdf())
    wrong = engine.Inertial(4.0, np.zeros(3), np.eye(3) * 1e-2)
    with pytest.raises(SimulationError, match="body 'panda_link1' with mass"):
        engine.check_inertials(model, {"panda_link1": wrong})


def test_a_payload_on_a_link_the_urdf_lacks_is_refused() -> None:
    payload = engine.Payload("panda_link9", PAYLOAD.inertial)
    with pytest.raises(SimulationError, match="payload link 'panda_link9'"):
        engine.compile_arm(_panda_urdf(), payload)


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"payload_com": [0.0, 0.1]}, "'payload_com' must be 3 finite numbers"),
        ({"payload_inertia": [[1e-3, 0, 0], [0, -1e-3, 0], [0, 0, 1e-3]]}, "positive-definite"),
        ({"payload_mass": 0.0}, "'payload_mass' must be"),
    ],
)
def test_a_bad_payload_setting_is_named(settings: dict[str, object], needle: str) -> None:
    with pytest.raises(SimulationError, match=needle):
        ur5_payload.simulate(0, duration=0.1, **settings)  # type: ignore[arg-type]


def test_a_perturbation_of_a_joint_the_urdf_lacks_is_refused() -> None:
    root = engine.read_urdf(panda_payload.panda().urdf)
    with pytest.raises(SimulationError, match="no joint 'panda_joint9'"):
        engine.prepared_urdf(root, friction={"panda_joint9": engine.JointFriction(0.1, 0.2)})


def test_without_mujoco_the_engine_names_the_missing_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(SimulationError, match="needs the mujoco package"):
        engine.load_mujoco()


def test_mujoco_is_imported_only_when_the_engine_runs() -> None:
    code = (
        "import sys, dynid.cli, dynid.sim.mujoco.panda_payload, dynid.sim.mujoco.ur5_payload; "
        "sys.exit('mujoco' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def _pinocchio_panda_with_payload() -> tuple[pin.Model, pin.Data]:
    """The Panda of the same URDF built by Pinocchio, fingers locked, payload appended."""
    full = pin.buildModelFromUrdf(str(panda_payload.panda().urdf))
    locked = [full.getJointId(j) for j in panda_payload.FINGERS]
    model = pin.buildReducedModel(full, locked, pin.neutral(full))
    flange = model.frames[model.getFrameId(PAYLOAD_LINK)]
    inertia = pin.Inertia(PAYLOAD_MASS, np.array(PAYLOAD_COM), np.asarray(PAYLOAD_INERTIA))
    model.appendBodyToJoint(flange.parentJoint, inertia, flange.placement)
    return model, model.createData()


@pytest.fixture(scope="module")
def panda_run() -> tuple[engine.Recording, engine.Sensors]:
    """Two seconds of the Panda payload scenario's run, with its defaults' sensors."""
    rng = np.random.default_rng(7)
    robot = panda_payload.panda()
    urdf = engine.read_urdf(robot.urdf)
    motion = arm.excitation(rng, robot, urdf, 2.0)
    sensors = engine.Sensors(engine.ENCODER_TICKS, 1e-3, 0.05, rng.uniform(-0.2, 0.2, size=7))
    return arm.run(robot, urdf, motion, sensors, rng, payload=PAYLOAD), sensors


def test_pinocchio_inverse_dynamics_explain_the_applied_torques(
    panda_run: tuple[engine.Recording, engine.Sensors],
) -> None:
    """Another implementation of the rigid-body equations, on the true state and acceleration,
    gives the torques MuJoCo was driven with (plus the URDF's joint damping, 0.003 N·m·s/rad)."""
    rec, _ = panda_run
    model, data = _pinocchio_panda_with_payload()
    rnea = np.stack([pin.rnea(model, data, *x) for x in zip(rec.q, rec.v, rec.acc, strict=True)])
    np.testing.assert_allclose(rnea + 0.003 * rec.v, rec.tau, atol=1e-9)


def test_the_measured_torques_differ_from_the_applied_by_the_sensor_model(
    panda_run: tuple[engine.Recording, engine.Sensors],
) -> None:
    rec, sensors = panda_run
    error = rec.tau_measured - sensors.torque_offset - rec.tau
    assert np.abs(error.mean(axis=0)).max() < 4 * 0.05 / np.sqrt(len(rec.t))
    np.testing.assert_allclose(error.std(axis=0), 0.05, rtol=0.1)


def test_the_encoders_quantise_and_the_velocities_are_noisy(
    panda_run: tuple[engine.Recording, engine.Sensors],
) -> None:
    rec, _ = panda_run
    step = 2 * np.pi / engine.ENCODER_TICKS
    ticks = rec.q_measured / step
    np.testing.assert_allclose(ticks, np.round(ticks), atol=1e-6)
    assert np.abs(rec.q_measured - rec.q).max() <= step / 2 + 1e-12
    np.testing.assert_allclose((rec.v_measured - rec.v).std(axis=0), 1e-3, rtol=0.1)


def test_the_impedance_controller_tracks_the_excitation(
    panda_run: tuple[engine.Recording, engine.Sensors],
) -> None:
    """Without the payload in its model the controller lags by at most a few hundredths of a
    radian: the payload shows in the torques, the motion is still the excitation."""
    rec, _ = panda_run
    rng = np.random.default_rng(7)
    robot = panda_payload.panda()
    motion = arm.excitation(rng, robot, engine.read_urdf(robot.urdf), 2.0)
    assert np.abs(rec.q - motion.q).max() < 0.03


def test_fed_forward_accelerations_leave_the_feedback_only_the_models_error() -> None:
    """A brisk motion (1 Hz, 0.2 rad on every joint): the controller without the desired
    accelerations makes the inertial torque from a tracking error of several hundredths of a
    radian; fed forward through its mass matrix, the error and the feedback torque shrink by
    more than an order of magnitude and the applied torque is the motion's inverse dynamics."""
    robot = panda_payload.panda()
    urdf = engine.read_urdf(robot.urdf)
    t = np.arange(1001) * engine.CONTROL_PERIOD
    w = 2 * np.pi
    shape = np.array([1.0, 0.8, 1.0, 0.8, 1.0, 1.0, 1.0]) * 0.2
    q0 = np.array(robot.home)
    q = q0 + (1 - np.cos(w * t))[:, None] * shape
    v = (w * np.sin(w * t))[:, None] * shape
    a = (w**2 * np.cos(w * t))[:, None] * shape
    zeros = np.zeros((7, 1))
    sensors = engine.Sensors(engine.ENCODER_TICKS, 1e-3, 0.05, np.zeros(7))
    lag, feedback = [], []
    for acc in (None, a):
        motion = arm.Excitation(q0, zeros, zeros, w, q, v, acc)
        rec = arm.run(robot, urdf, motion, sensors, np.random.default_rng(3))
        lag.append(np.abs(rec.q - q).max())
        feedback.append(np.abs(np.array(robot.kp) * (q - rec.q_measured)).max())
    assert lag[0] > 0.02
    assert lag[1] < lag[0] / 20
    assert feedback[1] < feedback[0] / 20
    full = pin.buildModelFromUrdf(str(robot.urdf))
    locked = [full.getJointId(j) for j in panda_payload.FINGERS]
    model = pin.buildReducedModel(full, locked, pin.neutral(full))
    data = model.createData()
    rnea = np.stack([pin.rnea(model, data, *x) for x in zip(q, v, a, strict=True)])
    assert np.abs(rec.tau - rnea).max() < 0.1 * np.abs(rnea).max()


def test_an_effort_beyond_the_urdf_limit_stops_the_run() -> None:
    with pytest.raises(SimulationError, match=r"N·m of joint 'panda_joint\d' at t = .* limit"):
        panda_payload.simulate(0, duration=0.5, payload_mass=50.0)


@pytest.mark.parametrize("scenario", [panda_payload, panda_whole_arm, ur5_payload])
def test_a_scenario_writes_the_bag_and_truth_its_layout_reads(
    scenario: object, tmp_path: Path
) -> None:
    bag = tmp_path / "run"
    dataset, truth = scenario.simulate(1, bag, duration=0.5)  # type: ignore[attr-defined]
    assert read_truth(bag) == truth
    assert truth["engine"]["name"] == "mujoco"
    read, _ = read_bag(bag, BagLayout.from_mapping(truth["layout"]))
    np.testing.assert_allclose(read.trajectories[0].effort, dataset.trajectories[0].effort)


def test_recordings_of_one_robot_seed_share_the_robot_and_differ_in_motion() -> None:
    """A held-out recording (another ``seed``) of the same robot (``robot_seed``): the same
    perturbed inertials, friction and torque offsets, another excitation."""
    _, first = panda_whole_arm.simulate(3, duration=0.2, robot_seed=11)
    _, second = panda_whole_arm.simulate(4, duration=0.2, robot_seed=11)
    _, alone = panda_whole_arm.simulate(4, duration=0.2)
    assert second["parameters"] == first["parameters"]
    assert second["excitation"] != first["excitation"]
    assert alone["parameters"] != second["parameters"]


def test_a_recording_without_robot_seed_is_of_the_robot_its_truth_names() -> None:
    """The truth file says ``robot_seed: seed``; simulating with that ``robot_seed`` and another
    ``seed`` gives the same robot (a held-out recording of the training draw's robot)."""
    _, train = panda_payload.simulate(2, duration=0.2)
    _, heldout = panda_payload.simulate(7, duration=0.2, robot_seed=train["robot_seed"])
    assert train["robot_seed"] == 2
    assert heldout["parameters"] == train["parameters"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("panda_box", "--engine", "mujoco"), "no scenario 'panda_box' on engine 'mujoco'"),
        (("panda_payload", "--engine", "bullet"), "unknown engine 'bullet'"),
        (("ur5_payload",), "no scenario 'ur5_payload' on engine 'dynid'"),
    ],
)
def test_simulate_names_an_unknown_engine_or_a_missing_version_in_one_line(
    args: tuple[str, ...],
    needle: str,
    tmp_path: Path,
    run_dynid: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    result = run_dynid("simulate", *args, "-o", "x", cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]


def test_a_short_mujoco_recording_fits_the_true_payload(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """``dynid simulate panda_payload --engine mujoco`` and ``dynid fit`` with the regressor
    least squares (lsq) on the payload problem with the torque sensors' offsets freed: mass
    within 2 % and centre of mass within 1 cm of the truth."""
    simulated = run_dynid("simulate", "panda_payload", "--engine", "mujoco", "-o", "bag",
                           "--set", "duration=4", cwd=tmp_path)  # fmt: skip
    assert simulated.returncode == 0, simulated.stderr
    problem = yaml.safe_load((ROOT / "config/problems/panda_payload.yaml").read_text())
    problem["parameters"].append(
        {"group": "joints", "joints": "all",
         "fields": {"torque_offset": {"lower": -1.0, "upper": 1.0}}}
    )  # fmt: skip
    (tmp_path / "problem.yaml").write_text(yaml.safe_dump(problem))
    fitted = run_dynid("fit", "--bag", "bag", "--problem", "problem.yaml", "--estimator", "lsq",
                        "-o", "fit", "--no-progress", cwd=tmp_path)  # fmt: skip
    assert fitted.returncode == 0, fitted.stderr
    mean = Posterior.from_summary(tmp_path / "fit" / "posterior.yaml").as_dict()
    truth = read_truth(tmp_path / "bag")["parameters"]
    assert mean["payload/mass"] == pytest.approx(truth["payload/mass"], rel=0.02)
    com = np.array([mean[f"payload/com_{a}"] - truth[f"payload/com_{a}"] for a in "xyz"])
    assert np.linalg.norm(com) < 0.01


@pytest.fixture(scope="module")
def whole_arm_run() -> tuple[engine.Recording, dict[str, engine.Inertial], np.ndarray, np.ndarray]:
    """Two seconds of the perturbed Panda (panda_whole_arm's perturbation, seed 5)."""
    rng = np.random.default_rng(5)
    robot = panda_payload.panda()
    urdf = engine.read_urdf(robot.urdf)
    motion = arm.excitation(rng, robot, urdf, 2.0)
    inertials = panda_whole_arm.perturbed_inertials(rng, urdf, 0.2, 0.02)
    damping, coulomb = rng.uniform(0.05, 0.5, size=7), rng.uniform(0.1, 0.6, size=7)
    friction = {
        j: engine.JointFriction(d, c)
        for j, d, c in zip(robot.joints, damping, coulomb, strict=True)
    }
    sensors = engine.Sensors(engine.ENCODER_TICKS, 1e-3, 0.05, np.zeros(7))
    rec = arm.run(robot, urdf, motion, sensors, rng, inertials=inertials, friction=friction)
    return rec, inertials, damping, coulomb


def test_the_perturbed_arm_is_pinocchios_arm_with_viscous_and_dry_friction(
    whole_arm_run: tuple[engine.Recording, dict[str, engine.Inertial], np.ndarray, np.ndarray],
) -> None:
    """Pinocchio on the perturbed URDF: the applied torque less inverse dynamics and viscous
    friction is MuJoCo's dry friction: ± coulomb exactly while a joint slides (|q̇| > 0.05
    rad/s), and within ± coulomb (to the 0.1 % its soft constraint allows) while it sticks."""
    rec, inertials, damping, coulomb = whole_arm_run
    urdf = engine.prepared_urdf(engine.read_urdf(panda_payload.panda().urdf), inertials=inertials)
    full = pin.buildModelFromXML(tostring(urdf, encoding="unicode"))
    locked = [full.getJointId(j) for j in panda_payload.FINGERS]
    model = pin.buildReducedModel(full, locked, pin.neutral(full))
    data = model.createData()
    rnea = np.stack([pin.rnea(model, data, *x) for x in zip(rec.q, rec.v, rec.acc, strict=True)])
    dry = rec.tau - rnea - damping * rec.v
    assert np.all(np.abs(dry) <= coulomb * (1.0 + 1e-3))
    sliding = np.abs(rec.v) > 0.05
    np.testing.assert_allclose(dry[sliding], (coulomb * np.sign(rec.v))[sliding], rtol=1e-9)


def test_the_log_cholesky_truth_is_of_the_bodies_dynid_fits() -> None:
    """On the URDF as shipped, the truth's log-Cholesky coordinates are those of the bodies of
    dynid's Panda (link 7 with hand and fingers, joint frames)."""
    robot = load_robot("panda")
    urdf = engine.prepared_urdf(engine.read_urdf(panda_payload.panda().urdf))
    truth = panda_whole_arm.log_cholesky_truth(urdf)
    for k, joint in enumerate(robot.joint_names, start=1):
        jid = robot.model.getJointId(joint)
        pi = torch.as_tensor(np.asarray(robot.model.inertias[jid].toDynamicParameters()))
        want = log_cholesky_from_dynamic_params(pi).numpy()
        got = [truth[f"panda_link{k}/log_cholesky_{i}"] for i in range(10)]
        np.testing.assert_allclose(got, want, atol=1e-9, err_msg=joint)


def test_a_grasp_and_a_release_change_the_load_at_their_times_only() -> None:
    steady, _ = panda_payload.simulate(4, duration=1.0, torque_noise=0.0)
    picked, truth = panda_payload.simulate(
        4, duration=1.0, torque_noise=0.0, grasp_time=0.3, release_time=0.7
    )
    assert truth["payload_changes"] == [
        {"time": pytest.approx(0.3), "kind": "grasp"},
        {"time": pytest.approx(0.7), "kind": "release"},
    ]
    assert truth["settings"]["grasp_time"] == 0.3
    a, b = steady.trajectories[0], picked.trajectories[0]
    t = a.t
    held = (t >= 0.3 - 1e-9) & (t < 0.7 - 1e-9)
    # nothing carried before the grasp: the arm alone, far from the loaded run
    assert np.abs(a.effort[t < 0.3] - b.effort[t < 0.3]).max() > 1.0
    # carried in between: the same load as the steady run, whose state it reaches
    assert np.abs(a.effort[held][-1] - b.effort[held][-1]).max() < 0.5
    for bad, match in (
        ({"grasp_time": 2.0}, "inside the recording"),
        ({"grasp_time": 0.5, "release_time": 0.4}, "after 'grasp_time'"),
    ):
        with pytest.raises(SimulationError, match=match):
            panda_payload.simulate(4, duration=1.0, **bad)
    _, plain = panda_payload.simulate(4, duration=0.05)
    assert "payload_changes" not in plain
    assert "grasp_time" not in plain["settings"]


@pytest.fixture(scope="module")
def sided_runs() -> tuple[dict[str, engine.Recording], np.ndarray, np.ndarray]:
    """Two seconds of the Panda with the payload and friction on every joint (viscous 0.3
    N·m·s/rad, dry as Gaz et al. 2019 identified it), once per torque-sensor side, with one seed
    (so one motion), noise and offsets off: ``({side: recording}, damping, coulomb)``."""
    robot = panda_payload.panda()
    urdf = engine.read_urdf(robot.urdf)
    damping, coulomb = np.full(7, 0.3), np.array(panda_payload.JOINT_COULOMB)
    friction = {
        j: engine.JointFriction(d, c)
        for j, d, c in zip(robot.joints, damping, coulomb, strict=True)
    }
    runs = {}
    for side in engine.TORQUE_SIDES:
        rng = np.random.default_rng(5)
        motion = arm.excitation(rng, robot, urdf, 2.0)
        sensors = engine.Sensors(engine.ENCODER_TICKS, 1e-3, 0.0, np.zeros(7), side)
        runs[side] = arm.run(robot, urdf, motion, sensors, rng, payload=PAYLOAD, friction=friction)
    return runs, damping, coulomb


def _mujoco_dynamics(
    rec: engine.Recording, friction: dict[str, engine.JointFriction]
) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's own inverse dynamics of the recording's true ``(q, q̇, q̈)`` on the simulated
    model: ``mj_rne`` (rigid bodies only, ``M q̈ + c + g``) and ``mj_inverse`` (the applied
    torque, friction included)."""
    mj = engine.load_mujoco()
    robot = panda_payload.panda()
    prepared = engine.prepared_urdf(
        engine.read_urdf(robot.urdf), locked=robot.locked, friction=friction
    )
    model = engine.compile_arm(prepared, PAYLOAD)
    data = mj.MjData(model)
    rne, inverse = [], []
    for q, v, acc in zip(rec.q, rec.v, rec.acc, strict=True):
        data.qpos[:], data.qvel[:] = q, v
        mj.mj_forward(model, data)
        data.qacc[:] = acc
        out = np.zeros(model.nv)
        mj.mj_rne(model, data, 1, out)
        mj.mj_inverse(model, data)
        rne.append(out)
        inverse.append(data.qfrc_inverse.copy())
    return np.array(rne), np.array(inverse)


def test_a_link_side_sensor_reads_the_rigid_body_torque_beyond_the_joint(
    sided_runs: tuple[dict[str, engine.Recording], np.ndarray, np.ndarray],
) -> None:
    """Link side: ``M(q) q̈ + c(q, q̇) + g(q)`` of the links and payload beyond each joint, as
    MuJoCo's ``mj_rne`` and Pinocchio's RNEA give it, without the joint friction; motor side: the
    applied torque, as ``mj_inverse`` gives it, friction included. Their difference is the
    friction: viscous plus dry, ± coulomb while a joint slides."""
    runs, damping, coulomb = sided_runs
    link, motor = runs["link"], runs["motor"]
    np.testing.assert_array_equal(link.q, motor.q)  # one motion, two sensors
    friction = {
        j: engine.JointFriction(d, c)
        for j, d, c in zip(panda_payload.ARM, damping, coulomb, strict=True)
    }
    rne, inverse = _mujoco_dynamics(link, friction)
    scale = np.abs(rne).max()
    assert scale > 10.0
    np.testing.assert_allclose(link.tau_measured, rne, atol=1e-6 * scale)
    np.testing.assert_allclose(motor.tau_measured, inverse, atol=1e-6 * scale)
    model, data = _pinocchio_panda_with_payload()
    x = zip(link.q, link.v, link.acc, strict=True)
    rnea = np.stack([pin.rnea(model, data, q, v, a) for q, v, a in x])
    np.testing.assert_allclose(link.tau_measured, rnea, atol=1e-6 * scale)
    dry = motor.tau_measured - link.tau_measured - damping * link.v
    assert np.all(np.abs(dry) <= coulomb * (1.0 + 1e-3))
    sliding = np.abs(link.v) > 0.3
    assert sliding.sum() > 1000
    np.testing.assert_allclose(dry[sliding], (coulomb * np.sign(link.v))[sliding], rtol=1e-9)


def test_at_a_slow_constant_velocity_the_link_side_sensor_reads_no_dry_friction() -> None:
    """Every joint turning at 0.1 rad/s against 2 N·m of dry friction: after the start's
    transient the link-side torques are Pinocchio's gravity and Coriolis torques of the arm with
    the payload (to 0.025 N·m); the motor-side torques of the same motion exceed them by the
    friction, in the direction of motion: the 2 N·m on every joint, the light wrist joint 7
    included (with MuJoCo's default friction time constant its row is a viscous law there and
    holds a third of it, engine.FRICTION_SOLREF)."""
    robot = panda_payload.panda()
    urdf = engine.read_urdf(robot.urdf)
    coulomb = 2.0
    friction = {j: engine.JointFriction(0.0, coulomb) for j in robot.joints}
    t = np.arange(3001) * engine.CONTROL_PERIOD
    speed = 0.1 * np.array([1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0])
    q0 = np.array(robot.home)
    zeros = np.zeros((7, 1))
    motion = arm.Excitation(q0, zeros, zeros, 1.0, q0 + t[:, None] * speed,
                            np.tile(speed, (len(t), 1)), np.zeros((len(t), 7)))  # fmt: skip
    model, data = _pinocchio_panda_with_payload()
    late = t > 1.5
    excess = {}
    for side in engine.TORQUE_SIDES:
        sensors = engine.Sensors(engine.ENCODER_TICKS, 0.0, 0.0, np.zeros(7), side)
        rec = arm.run(robot, urdf, motion, sensors, np.random.default_rng(0), payload=PAYLOAD,
                      friction=friction)  # fmt: skip
        np.testing.assert_allclose(rec.v[late], np.tile(speed, (late.sum(), 1)), atol=0.01)
        x = zip(rec.q[late], rec.v[late], strict=True)
        static = np.stack([pin.nonLinearEffects(model, data, q, v) for q, v in x])
        excess[side] = rec.tau_measured[late] - static
    assert np.abs(excess["link"]).max() < 0.025
    along = excess["motor"].mean(axis=0) * np.sign(speed)
    np.testing.assert_allclose(along, coulomb, rtol=0.02)


def test_an_unknown_torque_side_is_named() -> None:
    with pytest.raises(SimulationError, match=r"'torque_side' must be one of \['motor', 'link'\]"):
        engine.Sensors(engine.ENCODER_TICKS, 0.0, 0.0, np.zeros(7), "joint")
