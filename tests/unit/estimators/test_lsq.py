"""The least-squares baseline: simulation error and equation error on the double pendulum."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.baselines.lsq import LeastSquares, gauss_newton_covariance
from dynid.estimators.registry import resolve_estimator
from dynid.model.integrate import TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.problem import LikelihoodSettings, Problem

TRUTH = {"link1/mass": 1.2, "link2/mass": 0.8, "joint2/damping": 0.05}
BOUNDS = {"link1/mass": (0.5, 2.0), "link2/mass": (0.4, 1.6), "joint2/damping": (0.0, 0.2)}


def _spec(names, bounds=None) -> ParameterSpec:
    limits = {**BOUNDS, **(bounds or {})}
    return ParameterSpec([Parameter(n, *limits[n]) for n in names])


def _shooting_problem(names=("link1/mass", "link2/mass"), noise: float = 0.0, bounds=None):
    """Torque-driven swings (0.4 s at 100 Hz) simulated at the truth, observed in q and v."""
    robot = load_robot("double_pendulum")
    t = np.arange(41) * 0.01
    traj = Trajectory(
        t=t,
        q=np.tile([0.6, -0.2], (t.size, 1)),
        joint_names=robot.joint_names,
        dq=np.zeros((t.size, 2)),
        effort=np.stack([2.0 * np.sin(5 * t), np.cos(3 * t)], axis=1),
    )
    obs = JointObservation(robot, velocities=True)
    problem = Problem(
        robot=robot,
        spec=_spec(names, bounds),
        dataset=Dataset([traj]),
        dt=0.01,
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=LikelihoodSettings(obs_std=(0.01, 0.01, 0.1, 0.1), shooting="single"),
    )
    truth = torch.tensor([[TRUTH[n] for n in names]], dtype=torch.float64)
    y = problem.objective.simulate(truth, traj)[0].numpy()
    rng = np.random.default_rng(0)
    y = y + rng.normal(0.0, noise, size=y.shape) * np.array([1.0, 1.0, 10.0, 10.0])
    return problem.with_dataset([traj.replace(q=y[:, :2], dq=y[:, 2:])])


def _motion(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    amp = np.array([[0.8, 0.3], [0.5, 0.4]])
    omega = 2.0 * math.pi * np.array([0.5, 1.1])
    arg = omega[None, None, :] * t[:, None, None] + np.array([0.0, 0.7])[None, :, None]
    q = (amp[None] * np.sin(arg)).sum(-1)
    v = (amp[None] * omega * np.cos(arg)).sum(-1)
    a = -(amp[None] * omega**2 * np.sin(arg)).sum(-1)
    return q, v, a


def _torque_problem(names=tuple(TRUTH)) -> Problem:
    """Exact efforts (Pinocchio RNEA plus damping) of an analytic motion, 2 s at 1 kHz."""
    robot = load_robot("double_pendulum")
    t = np.arange(2001) * 1e-3
    q, v, a = _motion(t)
    model = robot.model.copy()
    for body, mass in ((1, TRUTH["link1/mass"]), (2, TRUTH["link2/mass"])):
        old = model.inertias[body]
        model.inertias[body] = pin.Inertia(mass, old.lever, old.inertia)
    data = model.createData()
    tau = np.stack([pin.rnea(model, data, q[k], v[k], a[k]).copy() for k in range(t.size)])
    tau[:, 1] += TRUTH["joint2/damping"] * v[:, 1]
    traj = Trajectory(t=t, q=q, joint_names=robot.joint_names, dq=v, effort=tau)
    obs = JointObservation(robot)
    return Problem(
        robot=robot,
        spec=_spec(names),
        dataset=Dataset([traj]),
        dt=1e-3,
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=LikelihoodSettings(kind="inverse_dynamics", torque_std=0.01, stride=10),
    )


def test_simulation_error_recovers_the_truth_on_noiseless_data() -> None:
    problem = _shooting_problem()
    post = resolve_estimator("lsq").estimator.fit(problem)  # from the nominal (1, 1) kg
    np.testing.assert_allclose(post.map(), [1.2, 0.8], rtol=1e-6)
    assert post.particles.shape == (1, 2)
    assert post.estimator == "lsq"
    assert post.meta["residuals"] == "shooting"
    assert post.meta["converged"]
    assert post.meta["cost"] < 1e-12
    assert post.meta["nfev"] >= post.meta["iterations"] >= 1
    assert post.meta["unidentified"] == []


def test_equation_error_recovers_the_truth_on_exact_efforts() -> None:
    problem = _torque_problem()
    post = LeastSquares().fit(problem)
    # the only error left is the filter's and the central differences' (cut-off 20 Hz)
    np.testing.assert_allclose(post.map(), [1.2, 0.8, 0.05], rtol=2e-3, atol=2e-4)
    assert post.meta["residuals"] == "inverse_dynamics"
    assert post.meta["mean_squared_residual"] < 1.0  # whitened by torque_std 0.01 N·m


def test_bounds_are_respected() -> None:
    problem = _shooting_problem(bounds={"link1/mass": (0.5, 1.0)})  # the truth 1.2 lies beyond
    post = LeastSquares().fit(problem)
    assert post.map()[0] == pytest.approx(1.0)
    assert 0.4 <= post.map()[1] <= 1.6
    assert post.meta["active_bounds"] == ["link1/mass"]


def test_covariance_is_the_inverse_gauss_newton_hessian_times_the_residual_variance() -> None:
    problem = _shooting_problem(names=("link1/mass", "link2/mass", "joint2/damping"), noise=0.01)
    est = LeastSquares()
    post = est.fit(problem)
    theta = torch.as_tensor(post.map()[None])
    r = problem.objective.residuals(theta)[0].numpy()
    J = problem.objective.jacobian(theta)[0].numpy()  # per SI unit
    s2 = float(r @ r) / (r.size - J.shape[1])
    np.testing.assert_allclose(post.covariance, np.linalg.inv(J.T @ J) * s2, rtol=1e-8)
    assert post.meta["residual_variance"] == pytest.approx(s2)
    # the recorded noise is what the whitening assumes: s² about 1
    assert 0.5 < s2 < 2.0


def test_directions_the_data_do_not_see_keep_the_whole_range() -> None:
    J = np.array([[1.0, 0.0], [2.0, 0.0], [0.5, 0.0]])  # the second parameter has no effect
    cov, seen = gauss_newton_covariance(J, 4.0)
    np.testing.assert_allclose(cov, [[4.0 / 5.25, 0.0], [0.0, 1.0]])
    assert seen.tolist() == [True, False]


def test_settings_are_checked_and_step_runs_the_solve_once() -> None:
    with pytest.raises(ValueError, match="ftol"):
        resolve_estimator("lsq", None, {"ftol": -1.0})
    problem = _shooting_problem()
    est = LeastSquares(max_iterations=50)
    est.init(problem)
    first = est.step()
    assert first.converged
    again = est.step()
    assert (again.iteration, again.loss) == (first.iteration, first.loss)
    assert replace(problem).spec.names == est.posterior().names
