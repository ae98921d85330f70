"""Equation-error check: the length-scale argument holds exactly, and the fit finds the gravity
scale of a simulated chain whose lengths lie outside the problem's limits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.model.integrate import rollout
from dynid.problem import Problem
from dynid.problem_file import load_problem
from dynid_bench import csvgd
from dynid_bench.equation_error import equation_error, fit_equation_error, rescale_lengths

# inside the IBM appendix ranges (link1 mass, iyy, com x/z, damping, joint-2 offset, link 2 …)
THETA = np.array([0.3, 0.01, 0.0, -0.1, 0.005, -0.2, 0.2, 0.004, 0.0, -0.08, 0.002])


def _problem() -> Problem:
    cfg = csvgd._config("ibm_double_pendulum")
    cfg["data"]["max_samples"] = 41
    return load_problem(cfg)[0]


def _swing(problem: Problem, theta: np.ndarray, steps: int = 200) -> Trajectory:
    """A 400 Hz unactuated swing from an energetic start, 4 integrator sub-steps per sample."""
    p = problem.parameters(torch.as_tensor(theta, dtype=problem.dtype)[None])
    q0 = torch.tensor([[2.0, -1.0]], dtype=problem.dtype)
    v0 = torch.tensor([[-6.0, 9.0]], dtype=problem.dtype)
    u = torch.zeros(1, steps, 0, dtype=problem.dtype)
    with torch.no_grad():
        q, v = rollout(problem.dynamics, p, q0, v0, u, 1 / 400, problem.control, substeps=4)
    t = np.arange(steps + 1) / 400
    return Trajectory(t=t, q=q[0].numpy(), joint_names=["joint1", "joint2"], dq=v[0].numpy())


def test_rescaled_chain_under_g_moves_as_the_original_under_g_over_lambda() -> None:
    problem = _problem()
    lam = 0.4
    scaled = rescale_lengths(problem, THETA, lam)
    assert scaled[0] == THETA[0]  # mass
    assert scaled[5] == pytest.approx(lam * THETA[5])  # joint offset (m)
    assert scaled[1] == pytest.approx(lam**2 * THETA[1])  # inertia
    assert scaled[4] == pytest.approx(lam**2 * THETA[4])  # damping
    rng = np.random.default_rng(0)
    q = torch.as_tensor(rng.uniform(-3, 3, (64, 2)))
    v = torch.as_tensor(rng.uniform(-20, 20, (64, 2)))
    tau = torch.zeros(64, 2, dtype=torch.float64)
    original = problem.parameters(torch.as_tensor(THETA)[None].expand(64, -1))
    original.gravity = original.gravity / lam
    rescaled = problem.parameters(torch.as_tensor(scaled)[None].expand(64, -1))
    a0 = problem.dynamics.forward_dynamics(original, q, v, tau)
    a1 = problem.dynamics.forward_dynamics(rescaled, q, v, tau)
    assert torch.allclose(a0, a1, rtol=1e-10, atol=1e-8)
    problem.spec.units[0] = "furlong"
    with pytest.raises(ValueError, match="'link1/mass' has unit 'furlong'"):
        rescale_lengths(problem, THETA, lam)


def test_fit_with_free_gravity_explains_a_chain_the_limits_rule_out() -> None:
    problem = _problem()
    # a chain at a third of the lengths: its link 2 inertia (0.00044) lies below the 0.002 floor
    small = rescale_lengths(problem, THETA, 1 / 3)
    swing = [_swing(problem, small)]
    _, truth_mse = equation_error(problem, swing, small)
    fixed = fit_equation_error(problem, swing, starts=4, iterations=120)
    free = fit_equation_error(problem, swing, free_gravity=True, starts=4, iterations=120)
    assert fixed.gravity_scale == 1.0
    assert truth_mse < 1e-3  # the filtered differences recover the accelerations
    assert fixed.normalised_mse > 10 * free.normalised_mse
    assert free.gravity_scale > 2.0  # only g / L is identified: about 3 and more
    rescaled = rescale_lengths(problem, free.theta, 1 / free.gravity_scale)
    _, mse = equation_error(problem, swing, rescaled)
    assert mse == pytest.approx(free.normalised_mse, rel=1e-6)
    assert rescaled[7] < 0.002  # the chain under the true g needs the lower inertia


def test_fit_refuses_an_actuated_problem() -> None:
    plain = _problem()
    driven = [dataclasses.replace(t, effort=np.zeros_like(t.q)) for t in plain.dataset]
    problem = dataclasses.replace(plain, dataset=Dataset(driven), control_names=["effort"])
    with pytest.raises(ValueError, match=r"driven by \['effort'\].*unactuated"):
        fit_equation_error(problem, list(problem.dataset), iterations=1)
