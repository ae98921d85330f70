"""The problem's objective: residuals and their Jacobian, the torque likelihood, the transition."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.base import EstimatorError, make_estimator
from dynid.model.integrate import PDControl, TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.problem import LikelihoodSettings, Problem, ProblemError

DT = 1e-3
DURATION = 3.0
TRUTH = {"link1/mass": 1.2, "link2/mass": 0.8, "joint2/damping": 0.05}


def _spec(names=tuple(TRUTH)) -> ParameterSpec:
    bounds = {
        "link1/mass": (0.5, 2.0),
        "link2/mass": (0.4, 1.6),
        "joint2/damping": (0.0, 0.2),
        "link1/length": (0.8, 1.2),
    }
    return ParameterSpec([Parameter(n, *bounds[n]) for n in names])


def _motion(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Analytic joint positions, velocities and accelerations ``[T, 2]`` of two sinusoids each."""
    amp = np.array([[0.8, 0.3], [0.5, 0.4]])  # joint × harmonic (rad)
    omega = 2.0 * math.pi * np.array([0.5, 1.1])
    phase = np.array([0.0, 0.7])
    arg = omega[None, None, :] * t[:, None, None] + phase[None, :, None]
    q = (amp[None] * np.sin(arg)).sum(-1)
    v = (amp[None] * omega * np.cos(arg)).sum(-1)
    a = -(amp[None] * omega**2 * np.sin(arg)).sum(-1)
    return q, v, a


def _problem(
    effort: np.ndarray | None = None, *, names=tuple(TRUTH), **likelihood: object
) -> Problem:
    """The double pendulum on the analytic motion, efforts ``effort`` (zeros by default)."""
    robot = load_robot("double_pendulum")
    t = np.arange(round(DURATION / DT) + 1) * DT
    q, v, _ = _motion(t)
    traj = Trajectory(
        t=t,
        q=q,
        joint_names=robot.joint_names,
        dq=v,
        effort=np.zeros_like(q) if effort is None else effort,
    )
    obs = JointObservation(robot, velocities=True)
    settings = {"kind": "inverse_dynamics", "torque_std": 0.01, "stride": 10, **likelihood}
    return Problem(
        robot=robot,
        spec=_spec(names),
        dataset=Dataset([traj]),
        dt=DT,
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=LikelihoodSettings(**settings),
    )


def _true_theta(problem: Problem) -> torch.Tensor:
    return torch.tensor([[TRUTH[n] for n in problem.spec.names]], dtype=torch.float64)


def _pinocchio_efforts(t: np.ndarray) -> np.ndarray:
    """``[T, 2]`` efforts of the true pendulum from Pinocchio's RNEA plus viscous damping."""
    model = load_robot("double_pendulum").model.copy()
    for body, mass in ((1, TRUTH["link1/mass"]), (2, TRUTH["link2/mass"])):
        old = model.inertias[body]
        model.inertias[body] = pin.Inertia(mass, old.lever, old.inertia)
    data = model.createData()
    q, v, a = _motion(t)
    tau = np.stack([pin.rnea(model, data, q[k], v[k], a[k]).copy() for k in range(t.size)])
    tau[:, 1] += TRUTH["joint2/damping"] * v[:, 1]
    return tau


@pytest.fixture(scope="module")
def torque_problem() -> Problem:
    t = np.arange(round(DURATION / DT) + 1) * DT
    return _problem(_pinocchio_efforts(t))


def test_inverse_dynamics_residuals_match_pinocchio(torque_problem: Problem) -> None:
    traj = torque_problem.dataset[0]
    q, v, a = (torque_problem.tensor(x) for x in _motion(traj.t))
    tau = torque_problem.tensor(traj.effort)
    r = torque_problem.objective.inverse_dynamics_residuals(
        _true_theta(torque_problem), q, v, a, tau
    )
    assert r.shape == (1, traj.num_samples, 2)
    assert float(r.abs().max()) < 1e-10
    wrong = _true_theta(torque_problem) * torch.tensor([[1.1, 1.0, 1.0]], dtype=torch.float64)
    r_wrong = torque_problem.objective.inverse_dynamics_residuals(wrong, q, v, a, tau)
    assert float(r_wrong.abs().max()) > 0.01


def test_torque_likelihood_is_maximised_at_the_truth(torque_problem: Problem) -> None:
    objective = torque_problem.objective
    truth = _true_theta(torque_problem)
    best = objective.log_likelihood(truth)
    for m in range(truth.shape[1]):
        grid = truth.repeat(9, 1)
        grid[:, m] += torch.linspace(-0.04, 0.04, 9, dtype=torch.float64)
        ll = objective.log_likelihood(grid)
        assert int(ll.argmax()) == 4, (torque_problem.spec.names[m], ll)
        assert torch.allclose(ll[4], best)
    # the filtering and differencing of the recorded motion leave the residuals at noise level
    assert float(objective.residuals(truth).abs().max()) < 2.0


def test_torque_residual_jacobian_equals_finite_differences(torque_problem: Problem) -> None:
    objective = torque_problem.objective
    theta = _true_theta(torque_problem).repeat(2, 1)
    theta[1] += torch.tensor([0.1, -0.1, 0.02], dtype=torch.float64)
    J = objective.jacobian(theta)
    R = objective.residuals(theta).shape[1]
    assert J.shape == (2, R, 3)
    fd = _finite_differences(objective.residuals, theta)
    torch.testing.assert_close(J, fd, rtol=1e-6, atol=1e-6)


def test_torque_likelihood_by_regressor_equals_inverse_dynamics(
    torque_problem: Problem, monkeypatch
) -> None:
    """Masses and damping leave joints and gravity alone: the likelihood scores through the
    inertia regressor, with the residuals, gradients and Jacobian of the problem's RNEA."""
    lik = torque_problem.objective.torque_likelihood
    assert lik.regressors is not None
    theta = _true_theta(torque_problem).repeat(3, 1)
    theta[1:] *= torch.tensor([[1.3, 0.7, 2.0], [0.6, 1.4, 0.5]], dtype=torch.float64)

    def scored() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = lik.augment(theta).requires_grad_(True)
        (grad,) = torch.autograd.grad(lik.evaluate(z).log_likelihood.sum(), z)
        return lik.errors(theta)[0].detach(), grad, lik.jacobian(theta)

    fast = scored()
    monkeypatch.setattr(lik, "regressors", None)
    for a, b in zip(fast, scored(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_torque_likelihood_moving_a_joint_scores_through_rnea() -> None:
    """A link length moves the joints the regressor was built on: no regressor."""
    problem = _problem(names=("link1/mass", "link1/length"))
    lik = problem.objective.torque_likelihood
    assert lik.regressors is None
    assert torch.isfinite(lik.errors(problem.spec.nominal_theta(problem.robot)[None])[0]).all()


def test_jacobian_in_chunks_equals_one_pass(torque_problem: Problem, monkeypatch) -> None:
    """The per-sample copies of the particles go through reverse mode in chunks of at most
    ``JACOBIAN_COPIES``; the chunking (here across the particle boundary) changes nothing."""
    from dynid.objective import torque

    theta = _true_theta(torque_problem).repeat(2, 1)
    theta[1] += torch.tensor([0.1, -0.1, 0.02], dtype=torch.float64)
    whole = torque_problem.objective.jacobian(theta)
    samples = torque_problem.objective.torque_likelihood.samples[0].q.shape[0]
    monkeypatch.setattr(torque, "JACOBIAN_COPIES", samples // 2 + 1)
    torch.testing.assert_close(torque_problem.objective.jacobian(theta), whole)


def _finite_differences(f, theta: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    cols = []
    for m in range(theta.shape[1]):
        d = torch.zeros_like(theta)
        d[:, m] = h
        cols.append((f(theta + d) - f(theta - d)) / (2 * h))
    return torch.stack(cols, dim=-1)


def _shooting_problem() -> Problem:
    """Torque-driven swings of the pendulum (0.3 s at 100 Hz), observed in q and v."""
    base = _problem(names=("link1/mass", "link2/mass"))
    T = 31
    t = np.arange(T) * 0.01
    traj = Trajectory(
        t=t,
        q=np.tile([0.6, -0.2], (T, 1)),
        joint_names=base.robot.joint_names,
        dq=np.zeros((T, 2)),
        effort=np.stack([2.0 * np.sin(5 * t), np.cos(3 * t)], axis=1),
    )
    sim = replace(base, dataset=Dataset([traj]), dt=0.01, likelihood=LikelihoodSettings())
    theta = torch.tensor([[1.2, 0.8]], dtype=torch.float64)
    y = sim.objective.simulate(theta, traj)[0].numpy()
    recorded = traj.replace(q=y[:, :2], dq=y[:, 2:])
    settings = LikelihoodSettings(obs_std=(0.01, 0.01, 0.1, 0.1), shooting="single")
    return replace(sim, dataset=Dataset([recorded]), likelihood=settings)


def test_shooting_residual_jacobian_equals_finite_differences() -> None:
    problem = _shooting_problem()
    objective = problem.objective
    theta = torch.tensor([[1.2, 0.8], [1.0, 1.1]], dtype=torch.float64)
    r = objective.residuals(theta)
    assert r.shape == (2, 30 * 4)
    assert float(r[0].abs().max()) < 1e-9  # the data were simulated at the first particle
    torch.testing.assert_close(
        objective.jacobian(theta), _finite_differences(objective.residuals, theta), rtol=1e-5,
        atol=1e-6,
    )  # fmt: skip
    std = objective.residual_std()
    assert std.shape == (30 * 4,)
    torch.testing.assert_close(std[:4], problem.obs_std)


def test_transition_mean_is_the_first_step_of_the_shooting_rollout() -> None:
    problem = _shooting_problem()
    theta = torch.tensor([[1.2, 0.8], [1.0, 1.1]], dtype=torch.float64)
    traj = problem.dataset[0]
    q0, v0 = problem.initial_state(traj)
    state = torch.cat([q0, v0]).expand(2, -1)
    u0 = problem.controls(traj)[:1]
    mean, scale = problem.objective.transition(theta, state, u0)
    first = problem.objective.simulate(theta, traj)[:, 1]  # observes q and v
    torch.testing.assert_close(mean, first, rtol=0.0, atol=1e-12)
    torch.testing.assert_close(scale, torch.full_like(mean, 1e-3))
    # the process noise is given per problem step and grows as sqrt(dt)
    _, half = problem.objective.transition(theta, state, u0, dt=problem.dt / 4)
    torch.testing.assert_close(half, torch.full_like(mean, 0.5e-3))
    with pytest.raises(EstimatorError, match="2 nv"):
        problem.objective.transition(theta, state[:, :3], u0)


def test_state_residuals_vanish_along_the_models_own_step() -> None:
    """From a recorded state, the transition's step lacks no impulse, the model's observation of
    it is what the shooting rollout observes, and the applied efforts are the recorded ones."""
    problem = _shooting_problem()
    objective = problem.objective
    theta = torch.tensor([[1.2, 0.8], [1.0, 1.1]], dtype=torch.float64)
    traj = problem.dataset[0]
    q0, v0 = problem.initial_state(traj)
    x_a = torch.cat([q0, v0]).expand(2, 1, -1)
    u0 = problem.controls(traj)[:1]
    x_b, _ = objective.transition(theta, x_a, u0[None])
    impulses = objective.impulse_residuals(theta, x_a, x_b, u0[None], problem.dt)
    assert impulses.shape == (2, 1, 4)
    torch.testing.assert_close(impulses, torch.zeros_like(impulses), rtol=0.0, atol=1e-12)
    # a state the step does not reach lacks an impulse: M (q_b − q_a − h v_b) / h in position
    shifted = x_b + torch.tensor([1e-3, 0.0, 0.0, 0.0], dtype=torch.float64)
    moved = objective.impulse_residuals(theta, x_a, shifted, u0[None], problem.dt)
    assert float(moved[..., 2:].abs().max()) > 1e-3
    y = problem.targets(traj)[1:2]
    errors = objective.observation_errors(theta[:1], x_b[:1], y)
    torch.testing.assert_close(errors, torch.zeros_like(errors), rtol=0.0, atol=1e-9)
    effort = problem.controls(traj)[:1]
    applied = objective.effort_errors(theta, x_a, u0[None], effort)
    torch.testing.assert_close(applied, torch.zeros_like(applied), rtol=0.0, atol=0.0)


def test_impulse_residuals_need_efforts() -> None:
    from dynid.model.integrate import PrescribedMotion

    problem = _shooting_problem()
    prescribed = replace(problem, control=PrescribedMotion([0]))
    x = torch.zeros(1, 1, 4, dtype=torch.float64)
    with pytest.raises(EstimatorError, match="prescribed motion"):
        prescribed.objective.impulse_residuals(
            torch.tensor([[1.2, 0.8]], dtype=torch.float64), x, x, torch.zeros(1, 1, 1), 0.01
        )


def test_shooting_log_likelihood_is_the_configured_likelihood() -> None:
    problem = _shooting_problem()
    theta = torch.tensor([[1.2, 0.8], [1.0, 1.1]], dtype=torch.float64)
    lik = problem.objective.likelihood()
    expected = lik.evaluate(lik.augment(theta)).log_likelihood
    torch.testing.assert_close(problem.objective.log_likelihood(theta), expected)
    # single shooting, one trajectory: the Gaussian of the whitened residuals
    r = problem.objective.residuals(theta)
    gauss = -0.5 * (r * r).sum(-1) - torch.log(problem.objective.residual_std()).sum()
    gauss = gauss - 0.5 * r.shape[1] * math.log(2 * math.pi)
    torch.testing.assert_close(expected, gauss)


def test_torque_likelihood_refuses_multiple_shooting_and_bad_settings(
    torque_problem: Problem,
) -> None:
    with pytest.raises(EstimatorError, match="inverse_dynamics"):
        torque_problem.objective.likelihood(shooting="multiple")
    with pytest.raises(ProblemError, match="torque_std has 3 values"):
        _problem(torque_std=(0.1, 0.1, 0.1))
    with pytest.raises(ProblemError, match=r"likelihood\.kind"):
        LikelihoodSettings(kind="equation_error")  # type: ignore[arg-type]
    with pytest.raises(ProblemError, match="stride"):
        LikelihoodSettings(stride=0)
    with pytest.raises(EstimatorError, match="cutoff"):
        _problem(cutoff_hz=600.0).objective.likelihood()
    with pytest.raises(ProblemError, match=r"effort_delay must be finite and at most trim_s"):
        LikelihoodSettings(trim_s=0.1, effort_delay=0.2)
    pd = replace(_problem(effort_delay=5e-4), control=PDControl(10.0, 1.0))
    with pytest.raises(EstimatorError, match=r"effort_delay .* control.type pd needs 0"):
        pd.objective.likelihood()


SETTINGS = {
    "csvgd": {"num_particles": 8, "max_iterations": 60, "learning_rate": 0.05},
    "svgd": {"num_particles": 8, "max_iterations": 60, "learning_rate": 0.05},
    "emcee": {"num_particles": 8, "max_iterations": 60},
    "nuts": {"num_particles": 4, "max_iterations": 20},
    "cem": {"num_particles": 16, "max_iterations": 20},
    "sgld": {"num_particles": 8, "max_iterations": 60},
    "proprio": {"max_iterations": 60, "lr": 0.05, "starts": 2},
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_estimator_runs_on_the_torque_likelihood(name: str) -> None:
    torch.manual_seed(0)
    t = np.arange(round(DURATION / DT) + 1) * DT
    problem = _problem(_pinocchio_efforts(t), names=("link2/mass",), torque_std=0.05)
    post = make_estimator(name, seed=0, **SETTINGS[name]).fit(problem)
    assert post.names == ["link2/mass"]
    assert np.isfinite(post.particles).all()
    assert ((post.particles >= 0.4) & (post.particles <= 1.6)).all()
    if name == "sgld":
        # one chain with a fixed step schedule mixes poorly on this sharp posterior
        # (posterior std ≈ 1 g): it runs on the likelihood, but its mean is no estimate
        return
    estimate = float(post.map()[0]) if name == "proprio" else float(post.mean()[0])
    assert abs(estimate - TRUTH["link2/mass"]) < 0.05, estimate
