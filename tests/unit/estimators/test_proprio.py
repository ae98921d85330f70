"""Proprioceptive fit: payload mass from joint3 encoders, gradients, contact, baseline."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynid.data.open_manipulator_ball import SOURCE_FRAME_DT, load_heavy_ball
from dynid.estimators.base import EstimatorError, make_estimator
from dynid.estimators.proprio import ProprioFit, ProprioLoss, initial_guesses
from dynid.model.dynamixel import PAPER_STEPS
from dynid.model.integrate import rollout
from dynid.objective import RigidSimulation
from dynid_bench.proprio import fixed_joint_problem, simulated_recording, step_trajectory

TRUE_MASS = 0.050


def _short_problem(duration: float = 0.3):
    rec = load_heavy_ball()
    step = PAPER_STEPS["fixed_joint"]
    T = round(duration / SOURCE_FRAME_DT) + 1
    command = -step.command(SOURCE_FRAME_DT, total=T)
    traj = step_trajectory(step.joint, rec.start_angle, command, SOURCE_FRAME_DT)
    return fixed_joint_problem(traj, rec.locked_joints, nominal=0.03)


@pytest.fixture(scope="module")
def problem():
    torch.set_num_threads(1)
    return simulated_recording(_short_problem(), {"payload/mass": TRUE_MASS}, seed=0)


def test_payload_fit_recovers_mass_within_five_percent(problem) -> None:
    est = make_estimator("proprio", max_iterations=30, starts=3)
    post = est.fit(problem)
    mass = float(post.map()[0])
    assert abs(mass - TRUE_MASS) < 0.05 * TRUE_MASS
    assert post.particles.shape == (3, 1)
    assert post.names == ["payload/mass"]
    assert post.estimator == "proprio/adam"
    # Laplace covariance: finite, positive, and the truth within a few standard deviations.
    std = float(post.std()[0])
    assert 0.0 < std < 0.01
    assert abs(mass - TRUE_MASS) < 6.0 * std + 1e-3
    assert post.meta["best_loss"] < 1e-5


def test_loss_gradient_matches_finite_differences(problem) -> None:
    loss = ProprioLoss(problem)
    theta = torch.tensor([[0.03], [0.08]], dtype=torch.float64, requires_grad=True)
    loss(theta).sum().backward()
    h = 1e-6
    with torch.no_grad():
        fd = (loss(theta + h) - loss(theta - h)) / (2 * h)
    torch.testing.assert_close(theta.grad[:, 0], fd, rtol=1e-5, atol=1e-10)
    assert bool((theta.grad[0] < 0).all())  # too light: the loss falls with more mass
    assert bool((theta.grad[1] > 0).all())


def test_single_joint_path_equals_generic_rollout(problem) -> None:
    theta = torch.tensor([[0.01], [0.05], [0.2]], dtype=torch.float64)
    traj = problem.dataset[0]
    fast = RigidSimulation()(problem, theta, traj)
    p = problem.parameters(theta)
    q0, v0 = problem.initial_state(traj)
    u = problem.controls(traj)[:-1].unsqueeze(0)
    q, _ = rollout(
        problem.dynamics, p, q0[None], v0[None], u, problem.dt, problem.control, problem.substeps
    )
    torch.testing.assert_close(fast, q, rtol=0.0, atol=1e-10)


def test_cma_baseline_reduces_the_same_loss(problem) -> None:
    est = ProprioFit(optimizer="cma", max_iterations=15, seed=3)
    post = est.fit(problem)
    hist = est.history
    assert hist[-1]["best_loss"] < 0.1 * hist[0]["best_loss"]
    assert hist[-1]["evaluations"] == 5 + 15 * 5  # simulations: initial guesses, then 5 a step
    assert abs(float(post.map()[0]) - TRUE_MASS) < 0.1 * TRUE_MASS
    assert post.estimator == "proprio/cma"


def test_initial_guesses_span_two_orders_of_magnitude(problem) -> None:
    guesses = initial_guesses(problem, 5, 100.0)[:, 0]
    assert float(guesses[-1] / guesses[0]) == pytest.approx(100.0)
    assert float(guesses[2]) == pytest.approx(0.03)
    assert bool((torch.diff(guesses) > 0).all())


def test_settings_are_checked() -> None:
    with pytest.raises(EstimatorError, match="optimizer"):
        ProprioFit(optimizer="lbfgs")
    with pytest.raises(EstimatorError, match="starts"):
        ProprioFit(starts=0)


def test_posterior_before_init_is_an_error() -> None:
    with pytest.raises(EstimatorError, match="before init"):
        ProprioFit().posterior()


def test_gauss_newton_covariance_matches_finite_difference_jacobian(problem) -> None:
    est = ProprioFit(max_iterations=1)
    est.init(problem)
    theta = torch.tensor([0.05], dtype=torch.float64)
    cov = est.covariance(theta)
    loss = ProprioLoss(problem)
    h = 1e-6
    with torch.no_grad():
        J = (loss.residuals(theta[None] + h) - loss.residuals(theta[None] - h))[0] / (2 * h)
    sigma = float(problem.obs_std[0])
    expected = sigma**2 / float((J * J).sum())
    assert cov.shape == (1, 1)
    assert cov[0, 0] == pytest.approx(expected, rel=1e-5)
    assert math.isfinite(cov[0, 0])
    assert np.all(np.linalg.eigvalsh(cov) > 0)


def test_warm_start_centres_the_initial_guesses(problem) -> None:
    from dynid.posterior import Posterior

    last = Posterior(particles=np.array([[0.04], [0.06]]), names=["payload/mass"], units=["kg"])
    last.log_density = np.array([0.0, -1.0])
    post = ProprioFit(max_iterations=1, starts=3, span=4.0).fit(problem, warm_start=last)
    guesses = np.asarray(post.meta["initial_guesses"])[:, 0]
    np.testing.assert_allclose(guesses, [0.02, 0.04, 0.08])
    assert post.iteration == 1
