"""``dynid excite`` on the Panda payload problem (short motion, few iterations): the written
trajectory checked independently (Pinocchio RNEA, coal, finite differences), the design against
random motions, the predicted σ against least-squares fits on simulated torques, and the
refusals (one line, exit 2)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import scipy.optimize
import torch
import yaml

from dynid.cli import main
from dynid.data.trajectory import Dataset, Trajectory
from dynid.excite import (
    DesignSettings,
    ExcitationPlanner,
    SensorNoise,
    criteria,
    propagated_covariance,
)
from dynid.model.robot import robot_urdf
from dynid.objective.torque import InverseDynamicsLikelihood, inverse_dynamics_residuals
from dynid.problem_file import read_problem_file

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = ROOT / "config/problems/panda_payload.yaml"
JOINTS = [f"panda_joint{k}" for k in range(1, 8)]
ARGS = ["--duration", "3", "--harmonics", "2", "--rate", "1000", "--starts", "1",
        "--iterations", "24", "--seed", "3"]  # fmt: skip
SETTINGS = DesignSettings(duration=3.0, harmonics=2, rate=1000.0, starts=1, iterations=24, seed=3)


@pytest.fixture(scope="module")
def designed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("excite") / "payload"
    assert main(["excite", "--problem", str(PAYLOAD), "-o", str(out), *ARGS]) == 0
    return out


def _csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open() as fh:
        header = next(csv.reader(fh))
    return header, np.loadtxt(path, delimiter=",", skiprows=1)


def _acm_geometry(model: pin.Model) -> tuple[pin.GeometryModel, pin.GeometryData]:
    """The Panda's collision geometry with every pair but those on one body, adjacent bodies,
    or touching at the neutral configuration (built here, apart from dynid.excite)."""
    urdf = robot_urdf("panda")
    geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION,
                                 package_dirs=[str(p) for p in urdf.parents])  # fmt: skip
    geom.addAllCollisionPairs()
    data, gdata = model.createData(), pin.GeometryData(geom)
    pin.computeDistances(model, data, geom, gdata, pin.neutral(model))
    objs = geom.geometryObjects
    for k in reversed(range(len(geom.collisionPairs))):
        pair = geom.collisionPairs[k]
        ja, jb = objs[pair.first].parentJoint, objs[pair.second].parentJoint
        adjacent = ja == jb or model.parents[ja] == jb or model.parents[jb] == ja
        if adjacent or gdata.distanceResults[k].min_distance <= 0:
            geom.removeCollisionPair(pair)
    return geom, pin.GeometryData(geom)


def test_the_written_trajectory_respects_every_limit_checked_independently(designed: Path) -> None:
    header, data = _csv(designed / "trajectory.csv")
    assert header == ["time", *JOINTS, *(f"{j}/velocity" for j in JOINTS),
                      *(f"{j}/acceleration" for j in JOINTS)]  # fmt: skip
    t, q, v, a = data[:, 0], data[:, 1:8], data[:, 8:15], data[:, 15:22]
    np.testing.assert_allclose(np.diff(t), 1e-3, atol=1e-9)
    assert t[-1] == pytest.approx(3.0)
    robot = read_problem_file(PAYLOAD).robot  # the Panda with the payload guess attached
    model = robot.model
    assert np.all(q >= model.lowerPositionLimit + 0.05 - 1e-9)
    assert np.all(q <= model.upperPositionLimit - 0.05 + 1e-9)
    # derivatives by finite differences of the written columns, against the limits
    v_fd, a_fd = np.gradient(q, t, axis=0), np.gradient(v, t, axis=0)
    j_fd = np.gradient(a, t, axis=0)
    np.testing.assert_allclose(v_fd[1:-1], v[1:-1], atol=1e-4)
    np.testing.assert_allclose(a_fd[1:-1], a[1:-1], atol=1e-2)
    assert np.all(np.abs(v_fd) <= np.array(model.velocityLimit) * 1.001)
    franka_acc = np.array([15, 7.5, 10, 12.5, 15, 20, 20])
    franka_jerk = np.array([7500, 3750, 5000, 6250, 7500, 10000, 10000])
    assert np.all(np.abs(a_fd) <= franka_acc * 1.001)
    assert np.all(np.abs(j_fd) <= franka_jerk * 1.001)
    assert np.abs(v).max() > 0.05  # it moves
    # torques: Pinocchio's RNEA of the URDF with the payload guess
    data_pin = model.createData()
    tau = np.stack([pin.rnea(model, data_pin, q[s], v[s], a_fd[s]) for s in range(t.size)])
    assert np.all(np.abs(tau) <= np.array(model.effortLimit))
    # no self-collision at any sample
    geom, gdata = _acm_geometry(model)
    hits = [
        s for s in range(t.size) if pin.computeCollisions(model, data_pin, geom, gdata, q[s], True)
    ]
    assert hits == []


def test_the_outputs_carry_the_prediction_and_a_joint_trajectory(designed: Path) -> None:
    excitation = yaml.safe_load((designed / "excitation.yaml").read_text())
    sigma = {row["name"]: row for row in excitation["predicted_sigma"]}
    assert set(sigma) == {"payload/mass", "payload/com_x", "payload/com_y", "payload/com_z"}
    assert sigma["payload/mass"]["display_unit"] == "g"
    assert sigma["payload/mass"]["sigma_display"] == pytest.approx(
        1e3 * sigma["payload/mass"]["sigma"]
    )
    assert sigma["payload/com_x"]["display_unit"] == "mm"
    assert excitation["criteria"]["log_det"] > 0
    assert excitation["limits"]["acceleration"][1] == 7.5
    assert len(excitation["coefficients"]["panda_joint1"]["a"]) == 2
    msg = yaml.safe_load((designed / "trajectory.yaml").read_text())
    assert msg["joint_names"] == JOINTS
    times = [p["time_from_start"]["sec"] + 1e-9 * p["time_from_start"]["nanosec"]
             for p in msg["points"]]  # fmt: skip
    assert np.all(np.diff(times) > 0)
    assert times[-1] == pytest.approx(3.0)
    assert all(len(p["positions"]) == len(p["accelerations"]) == 7 for p in msg["points"])
    report = (designed / "report.html").read_text()
    assert "payload/com_z" in report
    assert "smallest distance" in report


def _planner_and_coefficients(designed: Path) -> tuple[ExcitationPlanner, np.ndarray]:
    excitation = yaml.safe_load((designed / "excitation.yaml").read_text())
    coeffs = excitation["coefficients"]
    c = np.array([[coeffs[j]["a"] for j in JOINTS], [coeffs[j]["b"] for j in JOINTS]])
    return ExcitationPlanner(read_problem_file(PAYLOAD), SETTINGS), c.reshape(-1)


def _scored_states(planner: ExcitationPlanner, c: np.ndarray) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        q, v, a, _ = planner.motion.evaluate(torch.as_tensor(c), torch.as_tensor(planner.t_scored))
    return q, v, a


def test_the_designed_motion_beats_random_motions_within_the_same_limits(designed: Path) -> None:
    planner, c = _planner_and_coefficients(designed)
    designed_log_det = criteria(planner.info.fisher(*_scored_states(planner, c)).numpy()).log_det
    rng = np.random.default_rng(11)
    for _ in range(3):
        random, _ = planner.feasible(planner.random_coefficients(rng, fraction=0.95))
        F = planner.info.fisher(*_scored_states(planner, random)).numpy()
        assert criteria(F).log_det < designed_log_det - 1.0


def test_predicted_sigma_matches_the_spread_of_least_squares_fits(designed: Path) -> None:
    """30 noise draws of the problem's torque noise on the scored samples along the motion, each
    fitted by nonlinear least squares (finite-difference Jacobian) on the problem's residuals:
    the spread of the estimates matches the Cramér–Rao σ."""
    planner, c = _planner_and_coefficients(designed)
    problem, info = planner.problem, planner.info
    q, v, a = _scored_states(planner, c)
    _, sigma = info.cramer_rao(info.fisher(q, v, a).numpy())
    theta0 = problem.spec.nominal_theta(problem.robot)
    zero = torch.zeros_like(q)
    with torch.no_grad():
        tau = -inverse_dynamics_residuals(problem, theta0[None], q, v, a, zero)[0]
    std = torch.as_tensor(info.torque_std)
    rng = np.random.default_rng(5)
    estimates = []
    for _ in range(30):
        measured = tau + std * torch.as_tensor(rng.standard_normal(tuple(tau.shape)))

        def residuals(theta: np.ndarray, measured: torch.Tensor = measured) -> np.ndarray:
            with torch.no_grad():
                r = inverse_dynamics_residuals(problem, torch.as_tensor(theta)[None], q, v, a,
                                               measured)  # fmt: skip
            return (r[0] / std).reshape(-1).numpy()

        fit = scipy.optimize.least_squares(residuals, theta0.numpy(), diff_step=1e-7)
        estimates.append(fit.x)
    spread = np.std(np.array(estimates), axis=0, ddof=1)
    ratio = spread / sigma
    assert np.all((ratio > 1 / 1.4) & (ratio < 1.4)), ratio


def test_sensor_noise_through_the_preprocessing_predicts_the_spread_of_fits(designed: Path) -> None:
    """30 recordings along the motion at 1 kHz with white sensor noise (encoder-fine positions,
    noisy velocities, 0.05 N·m torque noise), each filtered, differentiated and thinned by the
    problem's likelihood and fitted by least squares on its weighted residuals: the spread of the
    estimates matches the σ the design propagates from that sensor noise, where the Cramér–Rao σ
    under the file's ``torque_std`` (set for coarser encoders) does not."""
    planner, c = _planner_and_coefficients(designed)
    pf, info = read_problem_file(PAYLOAD), planner.info
    sensors = SensorNoise(position=2e-6, velocity=1e-3, effort=0.05)
    t, q, v, a, _ = planner.motion.sample(c, 1000.0)
    tau = planner._dense_torque(q, v, a)
    zero = np.zeros((info.dim, info.dim))
    cov = propagated_covariance(pf, info, (t, q, v, tau), zero, sensors, draws=200, seed=1)
    predicted = np.sqrt(np.diag(cov))
    _, crb = info.cramer_rao(info.fisher(*_scored_states(planner, c)).numpy())
    rng = np.random.default_rng(7)
    theta0 = info.theta0.numpy()
    std = torch.as_tensor(info.torque_std)
    estimates = []
    for _ in range(30):
        traj = Trajectory(t=t, q=q + sensors.position * rng.standard_normal(q.shape),
                          dq=v + sensors.velocity * rng.standard_normal(q.shape),
                          effort=tau + sensors.effort * rng.standard_normal(q.shape),
                          joint_names=JOINTS)  # fmt: skip
        likelihood = InverseDynamicsLikelihood(pf.build(Dataset([traj]), device="cpu"))

        def residuals(theta: np.ndarray, likelihood=likelihood) -> np.ndarray:
            with torch.no_grad():
                (e,) = likelihood.errors(torch.as_tensor(theta)[None])
            return (e[0] / std).reshape(-1).numpy()

        estimates.append(scipy.optimize.least_squares(residuals, theta0, diff_step=1e-7).x)
    spread = np.std(np.array(estimates), axis=0, ddof=1)
    ratio = spread / predicted
    assert np.all((ratio > 1 / 1.4) & (ratio < 1.4)), ratio
    old = crb / spread  # the Cramér–Rao σ under the file's torque_std misses the same band
    assert not np.all((old > 1 / 1.4) & (old < 1.4)), old


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    status = main(["excite", *argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1, err
    return lines[0].removeprefix("dynid excite: error: ")


def test_infeasible_requests_end_with_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--problem", str(PAYLOAD), "-o", str(tmp_path / "x"), "--duration", "3"]
    line = _error(capsys, *base, "--start", "panda_joint4=0.0")
    assert line.startswith("--start: joint panda_joint4 at 0 is outside its limits")
    line = _error(capsys, *base, "--start", "panda_joint9=0.1")
    assert line.startswith("--start: unknown joint 'panda_joint9'")
    line = _error(capsys, *base, "--start", "0,0,0")
    assert line.startswith("--start: 3 values for 7 joints")
    mapping = yaml.safe_load(PAYLOAD.read_text())
    mapping["excitation"] = {"position_margin": 1.8}
    tight = tmp_path / "tight.yaml"
    tight.write_text(yaml.safe_dump(mapping))
    line = _error(capsys, "--problem", str(tight), "-o", str(tmp_path / "y"))
    assert line.startswith("joint panda_joint2: position range")
    mapping["excitation"] = {}
    mapping["robot"]["limits"] = {"effort": 1.0}
    weak = tmp_path / "weak.yaml"
    weak.write_text(yaml.safe_dump(mapping))
    line = _error(capsys, "--problem", str(weak), "-o", str(tmp_path / "z"))
    assert line.startswith("--start: joint panda_joint2 needs")
    assert "effort limit 0.8 N·m" in line
    mapping["robot"]["limits"] = {"snap": 1.0}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(mapping))
    line = _error(capsys, "--problem", str(bad), "-o", str(tmp_path / "w"))
    assert "robot.limits" in line
    assert "unknown keys ['snap']" in line
    mapping["robot"]["limits"] = {}
    mapping["excitation"] = {"sensor_noise": {"position": 1e-6, "effort": -0.05}}
    noisy = tmp_path / "noisy.yaml"
    noisy.write_text(yaml.safe_dump(mapping))
    line = _error(capsys, "--problem", str(noisy), "-o", str(tmp_path / "v"))
    assert "excitation.sensor_noise.effort: expected a number ≥ 0, got -0.05" in line
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "z").exists()


def test_a_prior_recording_adds_its_information(tmp_path: Path) -> None:
    """``--prior BAG``: the criteria with the prior are those of the motion's information plus
    the recording's, scored as the problem's likelihood scores that recording."""
    bag = tmp_path / "first.mcap"
    assert main(["simulate", "panda_payload", "-o", str(bag), "--set", "duration=3"]) == 0
    out = tmp_path / "second"
    args = ["--duration", "3", "--harmonics", "2", "--starts", "1", "--iterations", "3"]
    assert (
        main(["excite", "--problem", str(PAYLOAD), "-o", str(out), "--prior", str(bag), *args]) == 0
    )
    excitation = yaml.safe_load((out / "excitation.yaml").read_text())
    pf = read_problem_file(PAYLOAD)
    recorded = pf.build(pf.load_dataset(bag, holdout=False), device="cpu")
    planner = ExcitationPlanner(pf, SETTINGS)
    F_prior = planner.info.fisher_of_recordings(recorded)
    coeffs = excitation["coefficients"]
    c = np.array([[coeffs[j]["a"] for j in JOINTS], [coeffs[j]["b"] for j in JOINTS]]).reshape(-1)
    F_motion = planner.info.fisher(*_scored_states(planner, c)).numpy()
    expected = criteria(F_motion + F_prior)
    assert excitation["criteria"]["log_det"] == pytest.approx(expected.log_det, rel=1e-9)
    assert excitation["criteria_motion_only"]["log_det"] == pytest.approx(
        criteria(F_motion).log_det, rel=1e-9
    )
    assert expected.log_det > criteria(F_motion).log_det + 1.0
