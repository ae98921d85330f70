"""Physically consistent least squares on synthetic Panda torques."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.errors import EstimatorError
from dynid.estimators.registry import make_estimator
from dynid.model.robot import load_robot
from dynid.objective.linear import linear_torque_model, pi_from_log_cholesky, pseudo_inertia
from dynid.problem_file import load_problem

JOINTS = [f"panda_joint{j}" for j in range(1, 8)]
DAMPING = np.array([0.05, 0.2, 0.04, 0.15, 0.06, 0.01, 0.05])
COULOMB = np.array([0.2, 0.2, 0.2, 0.35, 0.2, 0.15, 0.2])
OFFSET = np.array([-0.15, 0.2, 0.08, -0.07, 0.03, 0.08, 0.0])


def _config(parameters: list | None = None) -> dict:
    return {
        "name": "panda_synthetic",
        "robot": {"name": "panda"},
        "parameters": parameters
        or [
            {"group": "inertials", "links": "all"},
            {
                "group": "joints",
                "fields": {
                    "damping": {"lower": 0.0, "upper": 5.0},
                    "coulomb": {"lower": 0.0, "upper": 5.0},
                    "torque_offset": {"lower": -5.0, "upper": 5.0},
                },
            },
        ],
        "data": {"source": "bag", "joint_states": {"topic": "/joint_states", "joints": JOINTS}},
        "control": {"type": "torque"},
        "likelihood": {
            "kind": "inverse_dynamics",
            "torque_std": 0.05,
            "cutoff_hz": 20.0,
            "stride": 10,
            "trim_s": 0.3,
        },
    }


def _recording(
    still: tuple[int, ...] = (),
    seconds: float = 8.0,
    noise: float = 0.0,
    armature: np.ndarray | None = None,
    coulomb_speed: float = 0.01,
):
    """A 5-harmonic excitation at 500 Hz and its exact efforts: Pinocchio's RNEA with the
    example-robot-data inertials (and ``armature`` kg·m² on the mass-matrix diagonal, when
    given), plus viscous, ``tanh(v / coulomb_speed)`` Coulomb friction and offsets."""
    robot = load_robot("panda")
    rng = np.random.default_rng(0)
    t = np.arange(round(seconds * 500) + 1) / 500.0
    w = 2.0 * math.pi * 0.15
    q0 = np.array([0.0, 0.0, 0.0, -1.6, 0.0, 1.6, 0.0])
    a_l, b_l = 0.15 * rng.normal(size=(2, 5, 7))
    q, v, a = np.tile(q0, (t.size, 1)), np.zeros((t.size, 7)), np.zeros((t.size, 7))
    for k in range(1, 6):
        s, c = np.sin(k * w * t)[:, None], np.cos(k * w * t)[:, None]
        q += a_l[k - 1] / (k * w) * s - b_l[k - 1] / (k * w) * c
        v += a_l[k - 1] * c + b_l[k - 1] * s
        a += k * w * (-a_l[k - 1] * s + b_l[k - 1] * c)
    for j in still:
        q[:, j], v[:, j], a[:, j] = q[0, j], 0.0, 0.0
    data = robot.model.createData()
    rnea = np.stack([pin.rnea(robot.model, data, q[i], v[i], a[i]) for i in range(t.size)])
    effort = rnea + DAMPING * v + COULOMB * np.tanh(v / coulomb_speed) + OFFSET
    if armature is not None:
        effort += armature * a
    effort += noise * rng.normal(size=effort.shape)
    traj = Trajectory(t=t, q=q, joint_names=JOINTS, dq=v, effort=effort)
    return Dataset([traj])


def test_fit_recovers_the_excited_base_parameters_with_every_body_consistent() -> None:
    problem, _ = load_problem(_config(), dataset=_recording(noise=0.005))
    est = make_estimator("consistent_lsq")
    post = est.fit(problem)
    meta = post.meta
    assert meta["rmse_train"]["overall"] < 0.01  # N·m: the low-pass smooths the Coulomb steps
    robot = problem.robot
    layout = est.model.layout
    x_truth = np.concatenate([robot.nominal_inertia().reshape(-1), DAMPING, COULOMB, OFFSET])
    x_fit = layout.x_of_theta(post.map())
    ident = meta["identifiability"]
    assert ident["rank"] == 43 + 21
    base = est.base_parameters  # the representation meta["identifiability"] reports
    beta_true, beta_fit = base.values(x_truth), base.values(x_fit)
    std = np.array([row["std"] for row in ident["base_parameters"]])
    identified = np.array([row["identified"] for row in ident["base_parameters"]])
    # every base parameter is identified here and lies within 5 σ of the truth (the σ come from
    # the residual: 0.005 N·m of noise, the Coulomb steps' rows below 0.1 rad/s left out); the
    # large ones within 2 %
    assert identified.all()
    z = np.abs(beta_fit - beta_true) / std
    assert z.max() < 5.0, z.max()
    inertial = np.array([base.names[i].startswith("panda_link") for i in base.base])
    large = inertial & (np.abs(beta_true) > 0.1)
    assert large.sum() >= 10
    np.testing.assert_allclose(beta_fit[large], beta_true[large], rtol=0.02)
    for k, (_, link, _) in enumerate(layout.bodies):
        eig = np.linalg.eigvalsh(pseudo_inertia(x_fit[10 * k : 10 * k + 10]))
        assert eig[0] > 0.0, link
    np.testing.assert_allclose(x_fit[-21:-14], DAMPING, atol=0.015)
    np.testing.assert_allclose(x_fit[-14:-7], COULOMB, atol=0.005)
    # the offsets within 0.035 N·m, or 2 σ where the data fix one only that well (joint 2's
    # trades against the gravity terms: σ about 0.05 N·m)
    offset_std = np.array([post.std()[post.names.index(f"{j}/torque_offset")] for j in JOINTS])
    error = np.abs(x_fit[-7:] - OFFSET)
    assert np.all(error < np.maximum(0.035, 2.0 * offset_std)), (error, offset_std)
    assert set(ident["unexcited"]) >= {"panda_link1/m", "panda_link2/m"}
    # link 1 acts through its inertia about the vertical axis only: its centre of mass stays at
    # the prior
    for k in (7, 8, 9):
        assert f"panda_link1/log_cholesky_{k}" in meta["unidentified"]


def test_rotor_inertias_are_fitted_beside_the_link_inertials() -> None:
    """``<joint>/armature`` enters the efforts as ``armature_j q̈_j``: free, it is fitted with the
    links. On the Panda the rotors of joints 1 and 2 act exactly like their links' inertia about
    the joint axis (Gautier–Khalil), so they are known only in combination; joints 3–7 alone."""
    armature = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.08, 0.05])
    config = _config()
    config["parameters"][1]["fields"]["armature"] = {"lower": 0.0, "upper": 1.0}
    problem, _ = load_problem(config, dataset=_recording(armature=armature))
    est = make_estimator("consistent_lsq")
    post = est.fit(problem)
    assert post.meta["rmse_train"]["overall"] < 0.01
    names = list(est.model.layout.names)
    x_fit = est.model.layout.x_of_theta(post.map())
    fitted = np.array([x_fit[names.index(f"{j}/armature")] for j in JOINTS])
    np.testing.assert_allclose(fitted[2:], armature[2:], atol=0.002)
    ident = post.meta["identifiability"]
    assert ident["rank"] == 43 + 21 + 5
    assert {"panda_joint1/armature", "panda_joint2/armature"} <= set(ident["combined"])
    assert {f"{j}/armature" for j in JOINTS[2:]} <= set(ident["alone"])


def test_random_torques_still_give_positive_definite_pseudo_inertias() -> None:
    data = _recording(seconds=4.0)
    rng = np.random.default_rng(5)
    (traj,) = data
    random = Dataset([traj.replace(effort=20.0 * rng.normal(size=traj.effort.shape))])
    problem, _ = load_problem(_config(), dataset=random)
    post = make_estimator("consistent_lsq").fit(problem)
    theta = post.map()
    for link in problem.robot.body_names:
        cols = [post.names.index(f"{link}/log_cholesky_{k}") for k in range(10)]
        pi = pi_from_log_cholesky(theta[cols])
        assert np.linalg.eigvalsh(pseudo_inertia(pi))[0] > 0.0
    for link, value in post.meta["min_pseudo_inertia_eigenvalue"].items():
        assert value > 0.0, link
    assert np.all(np.isfinite(post.cov()))
    assert np.all(np.diag(post.cov()) > 0.0)


def test_no_posterior_spread_exceeds_the_prior_spread() -> None:
    """θ's Laplace covariance includes the prior in θ: data only narrow it, including the
    ``ln d`` coordinates of bodies that sit at their margin of consistency."""
    problem, _ = load_problem(_config(), dataset=_recording(seconds=4.0, noise=0.05))
    est = make_estimator("consistent_lsq")
    post = est.fit(problem)
    prior_std = np.array([p.prior_std for p in problem.spec.parameters])
    assert np.all(post.std() <= prior_std * (1.0 + 1e-9))
    assert np.any(post.std() < 0.1 * prior_std)  # the data do narrow the excited ones


def test_unidentified_parameters_stay_at_their_prior_mean() -> None:
    """The reported value is the posterior's mode in θ, the point its Laplace covariance is
    taken at: a coordinate the data leave at its prior spread stays near its prior mean (the
    convex fit's solution mapped to θ had ``ln d1`` of links 3 and 5 4–5 prior σ away)."""
    problem, _ = load_problem(_config(), dataset=_recording(seconds=4.0, noise=0.05))
    post = make_estimator("consistent_lsq").fit(problem)
    assert post.meta["unidentified"]
    for name in post.meta["unidentified"]:
        p = problem.spec.parameters[post.names.index(name)]
        if p.prior == "gaussian":
            z = (post.map()[post.names.index(name)] - p.mean) / p.prior_std
            assert abs(z) < 2.0, (name, z)


def test_slow_rows_leave_the_dry_friction_unbiased() -> None:
    """Dry friction that reaches its level only at about 0.1 rad/s (``tanh(v / 0.05)``, as real
    joints' Stribeck region does) against the model's
    ``tanh(v / 0.01)``: with the rows below ``coulomb_min_speed`` (default 0.1 rad/s) left out,
    Coulomb and viscous coefficients are inside their intervals; fitted on every row, the model
    gap biases them by several σ."""
    problem, _ = load_problem(
        _config(), dataset=_recording(seconds=4.0, noise=0.05, coulomb_speed=0.05)
    )

    def z_scores(post) -> np.ndarray:
        z = [
            (post.map()[post.names.index(f"{j}/{field}")] - truth)
            / post.std()[post.names.index(f"{j}/{field}")]
            for field, values in (("coulomb", COULOMB), ("damping", DAMPING))
            for j, truth in zip(JOINTS, values, strict=True)
        ]
        return np.abs(np.array(z))

    post = make_estimator("consistent_lsq").fit(problem)
    assert all(n > 0 for n in post.meta["slow_rows_left_out"].values())
    assert z_scores(post).max() < 2.5
    every_row = make_estimator("consistent_lsq", coulomb_min_speed=0.0).fit(problem)
    assert z_scores(every_row).max() > 4.0


def test_a_joint_that_never_moves_is_reported_as_not_identified() -> None:
    problem, _ = load_problem(_config(), dataset=_recording(still=(6,), seconds=4.0))
    post = make_estimator("consistent_lsq").fit(problem)
    meta = post.meta
    for name in ("panda_joint7/damping", "panda_joint7/coulomb"):
        assert name in meta["unidentified"]
        assert name in meta["identifiability"]["unexcited"]
        assert name in meta["identifiability"]["at_prior"]
        # the prior's spread is kept: the uniform [0, 5] as a Gaussian of its variance
        assert post.std()[post.names.index(name)] == pytest.approx(5.0 / math.sqrt(12.0), 1e-6)
    for name in ("panda_joint6/damping", "panda_joint6/coulomb"):
        assert name not in meta["unidentified"]


def test_parameters_that_enter_nonlinearly_are_refused() -> None:
    config = _config(
        [
            {"name": "panda_joint2/damping", "lower": 0.0, "upper": 1.0},
            {"name": "panda_joint2/sigmoid_rate", "lower": 0.1, "upper": 20.0},
        ]
    )
    problem, _ = load_problem(config, dataset=_recording(seconds=2.0))
    with pytest.raises(EstimatorError, match="sigmoid_rate"):
        make_estimator("consistent_lsq").fit(problem)
    with pytest.raises(EstimatorError, match="linear torque model"):
        linear_torque_model(problem)


def test_the_same_groups_fit_a_current_controlled_open_manipulator() -> None:
    """Whole-body groups on another URDF robot: the OpenManipulator-X, Dynamixel currents times a
    torque constant as the applied torques (no torque sensor)."""
    joints = ["joint1", "joint2", "joint3", "joint4"]
    config = {
        "robot": {"name": "open_manipulator_x", "locked_joints": {"gripper_left_joint": 0.0}},
        "parameters": [
            {"group": "inertials"},
            {
                "group": "joints",
                "fields": {
                    "damping": {"lower": 0.0, "upper": 1.0},
                    "coulomb": {"lower": 0.0, "upper": 1.0},
                },
            },
        ],
        "data": {"source": "bag", "joint_states": {"topic": "/joint_states", "joints": joints}},
        "control": {
            "type": "current",
            "inputs": [f"{j}/current" for j in joints],
            "torque_constant": 0.0018,
        },
        "likelihood": {
            "kind": "inverse_dynamics",
            "torque_std": 0.01,
            "cutoff_hz": 10.0,
            "stride": 10,
            "trim_s": 0.3,
        },
    }
    robot = load_robot("open_manipulator_x", locked_joints={"gripper_left_joint": 0.0})
    rng = np.random.default_rng(1)
    t = np.arange(6001) / 1000.0
    w = 2.0 * math.pi * 0.2
    q, v = np.zeros((t.size, 4)), np.zeros((t.size, 4))
    a = np.zeros((t.size, 4))
    a_l, b_l = 0.3 * rng.normal(size=(2, 4, 4))
    for k in range(1, 5):
        s, c = np.sin(k * w * t)[:, None], np.cos(k * w * t)[:, None]
        q += a_l[k - 1] / (k * w) * s - b_l[k - 1] / (k * w) * c
        v += a_l[k - 1] * c + b_l[k - 1] * s
        a += k * w * (-a_l[k - 1] * s + b_l[k - 1] * c)
    data = robot.model.createData()
    rnea = np.stack([pin.rnea(robot.model, data, q[i], v[i], a[i]) for i in range(t.size)])
    tau = rnea + 0.02 * v + 0.01 * np.tanh(v / 0.01)
    traj = Trajectory(t=t, q=q, joint_names=joints, dq=v, effort=tau, command=tau / 0.0018,
                      command_names=[f"{j}/current" for j in joints])  # fmt: skip
    problem, _ = load_problem(config, dataset=Dataset([traj]))
    post = make_estimator("consistent_lsq").fit(problem)
    assert post.meta["rmse_train"]["overall"] < 0.003
    standard = post.meta["standard_parameters"]
    for joint in joints:
        assert standard[f"{joint}/damping"]["value"] == pytest.approx(0.02, abs=0.005)
        assert standard[f"{joint}/coulomb"]["value"] == pytest.approx(0.01, abs=0.003)
    assert all(value > 0.0 for value in post.meta["min_pseudo_inertia_eigenvalue"].values())
