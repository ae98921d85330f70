"""The soft block coupled to the gripper joint through the shared robot model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynid.model.params import nominal_parameters
from dynid.objective import SoftBlockSimulation
from dynid_bench.proprio import block_problem


@pytest.fixture(scope="module")
def soft():
    torch.set_num_threads(1)
    problem = block_problem("soft_block", duration=0.1)
    return problem, problem.simulator


def test_without_current_the_block_stays_at_rest(soft) -> None:
    problem, simulate = soft
    assert isinstance(simulate, SoftBlockSimulation)
    squeeze = simulate.squeeze
    p = nominal_parameters(problem.robot, 1)
    q0, v0 = problem.initial_state(problem.dataset[0])
    u = torch.zeros(1, 4, 1, dtype=torch.float64)
    mu = torch.tensor([1e5], dtype=torch.float64)
    q, _, x = squeeze.rollout(
        problem.dynamics, p, q0[None], v0[None], u, problem.dt, problem.control, mu, mu, 10
    )
    # The locked arm holds the gripper horizontal, so nothing moves: rest shape, joint still.
    torch.testing.assert_close(x[0], squeeze.mesh.rest, rtol=0.0, atol=1e-12)
    torch.testing.assert_close(q[0, :, 0], q0.expand(5), rtol=0.0, atol=1e-12)


def test_softer_block_is_squeezed_further(soft) -> None:
    problem, simulate = soft
    theta = torch.tensor([[5e4, 5e4], [2e5, 2e5], [8e5, 8e5]], dtype=torch.float64)
    with torch.no_grad():
        q = simulate(problem, theta, problem.dataset[0])[:, :, 0].numpy()
    closing = q[:, 0:1] - q  # positive when the finger closes
    assert np.all(closing[:, -1] > 0.0)
    assert closing[0, -1] > closing[1, -1] > closing[2, -1]


def test_lame_gradient_matches_finite_differences(soft) -> None:
    problem, simulate = soft
    traj = problem.dataset[0]
    theta = torch.tensor([[1.2e5, 6e4]], dtype=torch.float64, requires_grad=True)
    simulate(problem, theta, traj)[0, -1, 0].backward()
    h = torch.tensor([[100.0, 0.0], [0.0, 100.0]], dtype=torch.float64)
    with torch.no_grad():
        fd = [
            (simulate(problem, theta + d, traj) - simulate(problem, theta - d, traj))[0, -1, 0]
            / 200.0
            for d in h
        ]
    torch.testing.assert_close(theta.grad[0], torch.stack(fd), rtol=1e-4, atol=1e-14)
