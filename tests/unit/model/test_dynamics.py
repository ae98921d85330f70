"""Torch dynamics: input validation, gradients (implicit, forward mode) and the solver."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from dynid.model.cf_cholesky import cf_cholesky_apply_inverse, cf_cholesky_solve_
from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError, UnknownFrameError
from dynid.model.params import DynamicParameters, Parameter, ParameterSpec, nominal_parameters
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


def _omx_case(n_params: int) -> tuple:
    robot = load_robot("open_manipulator_x")  # revolute joints and a prismatic gripper
    p = nominal_parameters(robot, n_params)
    gen = torch.Generator().manual_seed(3)
    p.damping = 0.1 * torch.rand(p.damping.shape, generator=gen, dtype=torch.float64)
    p.coulomb = 0.05 * torch.rand(p.coulomb.shape, generator=gen, dtype=torch.float64)
    p.stribeck_delta = 0.02 * torch.rand(p.coulomb.shape, generator=gen, dtype=torch.float64)
    p.stribeck_rate = 1.0 + torch.rand(p.coulomb.shape, generator=gen, dtype=torch.float64)
    p.armature = 0.01 * torch.rand(p.armature.shape, generator=gen, dtype=torch.float64)
    states = tuple(
        torch.randn(2, 3, robot.nv, generator=gen, dtype=torch.float64) for _ in range(3)
    )
    return robot, p, states


def test_implicit_gradients_match_finite_differences_for_every_input() -> None:
    # one parameter particle broadcast over two state particles × three windows: the backward
    # pass must reduce the cotangents of the parameters over the batch it was broadcast to
    robot, p, (q, v, tau) = _omx_case(1)
    dyn = TorchDynamics(robot, coulomb_smoothing=0.5)
    names = (
        "inertia",
        "joint_translation",
        "armature",
        "gravity",
        "damping",
        "coulomb",
        "stribeck_delta",
        "stribeck_rate",
    )

    def qdd(q: torch.Tensor, v: torch.Tensor, tau: torch.Tensor, *fields: torch.Tensor):
        pp = DynamicParameters(**{**p.__dict__, **dict(zip(names, fields, strict=True))})
        return dyn.forward_dynamics(pp, q, v, tau)

    inputs = tuple(x.clone().requires_grad_(True) for x in (q, v, tau))
    inputs += tuple(getattr(p, name).clone().requires_grad_(True) for name in names)
    assert torch.autograd.gradcheck(qdd, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_forward_mode_derivatives_equal_reverse_mode() -> None:
    robot, p, (q, v, tau) = _omx_case(2)
    dyn = TorchDynamics(robot)

    def of_inertia(inertia: torch.Tensor) -> torch.Tensor:
        return dyn.forward_dynamics(
            DynamicParameters(**{**p.__dict__, "inertia": inertia}), q, v, tau
        )

    forward = torch.func.jacfwd(of_inertia)(p.inertia)
    reverse = torch.autograd.functional.jacobian(of_inertia, p.inertia)
    torch.testing.assert_close(forward, reverse, rtol=1e-9, atol=1e-9 * reverse.abs().max())
    of_q = lambda x: dyn.forward_dynamics(p, x, v, tau)  # noqa: E731
    reverse_q = torch.autograd.functional.jacobian(of_q, q)
    torch.testing.assert_close(torch.func.jacfwd(of_q)(q), reverse_q, rtol=1e-9, atol=1e-9)


def test_forward_mode_under_no_grad_keeps_the_tangent() -> None:
    """No backward pass is needed there, but the forward-mode rule still is."""
    robot, p, (q, v, tau) = _omx_case(2)
    dyn = TorchDynamics(robot)
    direction = torch.linspace(-1.0, 1.0, q.numel(), dtype=q.dtype).reshape(q.shape)
    jacobian = torch.autograd.functional.jacobian(
        lambda x: dyn.forward_dynamics(p, x, v, tau), q
    )  # reverse mode, [*qdd.shape, *q.shape]
    reverse = (jacobian * direction).sum(tuple(range(q.dim(), 2 * q.dim())))
    for _ in range(3):  # also once the forward pass without tape is replayed
        with torch.no_grad():
            _, tangent = torch.func.jvp(
                lambda x: dyn.forward_dynamics(p, x, v, tau), (q,), (direction,)
            )
        torch.testing.assert_close(tangent, reverse, rtol=1e-9, atol=1e-9)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="forward mode"):
        # dual tensors of torch.autograd.forward_ad reach the forward-mode rule (which nests
        # torch.func.jvp, unsupported there): an error, never a result without its tangent
        dyn.forward_dynamics(p, fwAD.make_dual(q, direction), v, tau)


def test_second_derivatives_are_refused_not_wrong() -> None:
    robot, p, (q, v, tau) = _omx_case(2)
    q = q.clone().requires_grad_(True)
    qdd = TorchDynamics(robot).forward_dynamics(p, q, v, tau)
    (grad,) = torch.autograd.grad(qdd.square().sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        grad.sum().backward()


def test_component_first_cholesky_solves_and_reapplies_the_inverse() -> None:
    gen = torch.Generator().manual_seed(4)
    n, batch = 6, 5
    X = torch.randn(batch, n, n, generator=gen, dtype=torch.float64)
    M = X @ X.transpose(1, 2) + n * torch.eye(n, dtype=torch.float64)
    b, c = (torch.randn(batch, n, generator=gen, dtype=torch.float64) for _ in range(2))
    system = torch.cat((M.permute(1, 2, 0), b.T.unsqueeze(1)), 1)
    system[3, 1] = float("nan")  # the strict lower triangle is never read
    x = cf_cholesky_solve_(system)
    torch.testing.assert_close(x.T, torch.linalg.solve(M, b), rtol=1e-12, atol=1e-12)
    again = cf_cholesky_apply_inverse(system, c.T)
    torch.testing.assert_close(again.T, torch.linalg.solve(M, c), rtol=1e-12, atol=1e-12)


def test_both_solver_paths_give_the_same_dynamics_and_gradients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """forward_dynamics picks LAPACK or the component-first Cholesky by batch size
    (cf_cholesky.LAPACK_BELOW); q̈ and its gradients must not depend on which one ran."""
    robot, p, (q, v, tau) = _omx_case(2)
    dyn = TorchDynamics(robot, coulomb_smoothing=0.5)

    def run(threshold: int) -> tuple[torch.Tensor, ...]:
        monkeypatch.setattr("dynid.model.cf_cholesky.LAPACK_BELOW", threshold)
        inertia = p.inertia.clone().requires_grad_(True)
        qq = q.clone().requires_grad_(True)
        pp = DynamicParameters(**{**p.__dict__, "inertia": inertia})
        qdd = dyn.forward_dynamics(pp, qq, v, tau)
        g_inertia, g_q = torch.autograd.grad(qdd.square().sum(), (inertia, qq))
        return qdd.detach(), g_inertia, g_q

    lapack, component_first = run(10**9), run(0)
    for got, want in zip(component_first, lapack, strict=True):  # two factorisations' round-off
        scale = 1.0 + float(want.abs().max())
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-11 * scale)


def test_recycled_tapes_never_overwrite_a_graph_that_is_still_alive(monkeypatch) -> None:
    """Inside ``recycling_tapes`` a call reuses saved buffers only once their graph is freed:
    two graphs alive at once, and a third call after the first was freed, all keep exact
    gradients (component-first solver: the factor is saved too)."""
    monkeypatch.setattr("dynid.model.cf_cholesky.LAPACK_BELOW", 1)
    robot, p, state = _omx_case(2)
    dyn = TorchDynamics(robot)
    states = [state, tuple(2.0 * x for x in state), tuple(-x for x in state)]

    def graph(q: torch.Tensor, v: torch.Tensor, tau: torch.Tensor) -> tuple:
        inertia = p.inertia.clone().requires_grad_(True)
        pp = DynamicParameters(**{**p.__dict__, "inertia": inertia})
        return inertia, dyn.forward_dynamics(pp, q, v, tau).square().sum()

    def gradient(loss_and_leaf: tuple) -> torch.Tensor:
        leaf, loss = loss_and_leaf
        return torch.autograd.grad(loss, leaf)[0]

    reference = [gradient(graph(*x)) for x in states]
    with dyn.recycling_tapes():
        first, second = graph(*states[0]), graph(*states[1])
        got = [gradient(second), gradient(first)]
        del first, second
        got.append(gradient(graph(*states[2])))
    for a, b in zip(got, [reference[1], reference[0], reference[2]], strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
