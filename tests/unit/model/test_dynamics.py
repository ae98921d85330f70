"""Torch dynamics: input validation and gradients with respect to kinematic parameters."""

from __future__ import annotations

import pytest
import torch

from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError, UnknownFrameError
from dynid.model.params import Parameter, ParameterSpec, nominal_parameters
from dynid.model.robot import load_robot


def test_bad_states_raise_errors_naming_the_item() -> None:
    robot = load_robot("open_manipulator_x")
    dyn = TorchDynamics(robot)
    p = nominal_parameters(robot, 2)
    q = torch.zeros(2, 3, robot.nv, dtype=torch.float64)
    with pytest.raises(StateError, match=r"q has shape \(2, 3, 4\)"):
        dyn.mass_matrix(p, q[..., :4])
    with pytest.raises(StateError, match=r"expected \[N, \*B, 5\]"):
        dyn.rnea(p, q, q, torch.zeros(robot.nv, dtype=torch.float64))
    v = q.clone()
    v[0, 1, 4] = float("inf")
    with pytest.raises(StateError, match="gripper_left_joint"):
        dyn.forward_dynamics(p, q, v, q)
    with pytest.raises(StateError, match="N=2"):
        dyn.forward_dynamics(p, q[:1].expand(3, 3, 5), q[:1].expand(3, 3, 5), q[:1].expand(3, 3, 5))
    with pytest.raises(UnknownFrameError, match="'hand'"):
        dyn.frame_placement(p, q, ["hand"])


def test_link_length_gradients_match_finite_differences() -> None:
    robot = load_robot("double_pendulum")
    spec = ParameterSpec([Parameter("link1/length", 1.0, 3.0), Parameter("link2/length", 1, 3)])
    dyn = TorchDynamics(robot)
    q = torch.tensor([[[1.2, -0.4], [0.3, 0.8]]], dtype=torch.float64)
    v = torch.tensor([[[0.5, -1.0], [2.0, 0.1]]], dtype=torch.float64)
    tau = torch.zeros_like(q)

    def qdd_and_tip(theta: torch.Tensor) -> torch.Tensor:
        p = spec.apply(robot, theta)
        _, tip = dyn.frame_placement(p, q, ["link2"])
        return torch.cat((dyn.forward_dynamics(p, q, v, tau).flatten(), tip.flatten()))

    theta = torch.tensor([[1.4, 2.2]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(qdd_and_tip, (theta,), eps=1e-6, atol=1e-6)


def test_float32_and_extra_batch_dims() -> None:
    robot = load_robot("furuta")
    dyn64 = TorchDynamics(robot)
    dyn32 = TorchDynamics(robot, dtype=torch.float32)
    p = nominal_parameters(robot, 3)
    gen = torch.Generator().manual_seed(0)
    q, v, tau = (torch.randn(3, 2, 5, 2, generator=gen, dtype=torch.float64) for _ in range(3))
    ref = dyn64.forward_dynamics(p, q, v, tau)
    assert ref.shape == (3, 2, 5, 2)
    out = dyn32.forward_dynamics(p.to(torch.float32), q.float(), v.float(), tau.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-3)
