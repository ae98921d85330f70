"""Semi-implicit Euler, control models, rollouts and multiple shooting against Pinocchio."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.attachments import attach_payload, attach_universal_box
from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError
from dynid.model.integrate import (
    CurrentControl,
    PDControl,
    TorqueControl,
    rollout,
    shoot_windows,
    split_windows,
    step,
)
from dynid.model.params import Parameter, ParameterSpec, nominal_parameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import load_robot


@pytest.fixture(scope="module")
def pendulum():
    robot = load_robot("double_pendulum")
    return robot, TorchDynamics(robot)


@pytest.fixture(scope="module")
def panda_box():
    robot = attach_universal_box(load_robot("panda"), "panda_link8", damping=0.05)
    return robot, TorchDynamics(robot)


def _pin_step(robot, q, v, tau_fn, dt, substeps):
    """Reference semi-implicit Euler with pinocchio.aba (friction added as dynid does)."""
    model = robot.model
    data = model.createData()
    h = dt / substeps
    for _ in range(substeps):
        tau = tau_fn(q, v)
        a = pin.aba(model, data, q, v, tau)
        v = v + h * a
        q = q + h * v
    return q, v


def test_step_matches_semi_implicit_euler_with_pinocchio_aba(panda_box):
    robot, dyn = panda_box
    p = nominal_parameters(robot)
    rng = np.random.default_rng(0)
    q0 = rng.uniform(-1.0, 1.0, robot.nv)
    v0 = rng.uniform(-1.0, 1.0, robot.nv)
    u = rng.uniform(-5.0, 5.0, 7)
    damping = p.damping[0].numpy()

    def tau_fn(q, v):
        # torque on the 7 arm joints, passive universal joint; viscous damping of the model
        return np.r_[u, 0.0, 0.0] - damping * v

    q_ref, v_ref = _pin_step(robot, q0, v0, tau_fn, 0.01, 3)
    control = TorqueControl(actuated=range(7))
    q1, v1 = step(
        dyn,
        p,
        torch.tensor(q0)[None],
        torch.tensor(v0)[None],
        torch.tensor(u)[None],
        0.01,
        control,
        substeps=3,
    )
    np.testing.assert_allclose(q1[0].numpy(), q_ref, atol=1e-11)
    np.testing.assert_allclose(v1[0].numpy(), v_ref, atol=1e-10)


def test_rollout_shapes_and_initial_state(pendulum):
    robot, dyn = pendulum
    p = nominal_parameters(robot, 3)
    q0 = torch.tensor([[np.pi / 2, 0.0]], dtype=torch.float64).expand(3, 2)
    v0 = torch.zeros(3, 2, dtype=torch.float64)
    u = torch.zeros(1, 20, 2, dtype=torch.float64)
    q, v = rollout(dyn, p, q0, v0, u, 0.01, TorqueControl())
    assert q.shape == (3, 21, 2)
    assert v.shape == (3, 21, 2)
    assert torch.equal(q[:, 0], q0)
    # the pendulum falls from horizontal: the first joint moves
    assert float((q[:, -1, 0] - q0[:, 0]).abs().min()) > 1e-3


def test_multiple_shooting_from_single_shooting_starts_has_zero_defects(panda_box):
    robot, dyn = panda_box
    spec = ParameterSpec(
        [Parameter("box/weight1_x", -0.14, 0.14), Parameter("box/weight2_y", -0.08, 0.08)]
    )
    p = spec.apply(robot, spec.sample_prior(3, torch.Generator().manual_seed(1)))
    rng = np.random.default_rng(2)
    T, h = 24, 6
    q0 = torch.tensor(rng.uniform(-0.5, 0.5, (3, robot.nv)))
    v0 = torch.tensor(rng.uniform(-0.5, 0.5, (3, robot.nv)))
    targets = torch.tensor(rng.uniform(-0.5, 0.5, (1, T, 14)))
    control = PDControl(kp=50.0, kd=5.0, actuated=range(7))
    q, v = rollout(dyn, p, q0, v0, targets, 0.005, control, substeps=2)
    q_start, v_start, u_w = split_windows(q, v, targets, h)
    assert q_start.shape == (3, T // h, robot.nv)
    assert u_w.shape == (1, T // h, h, 14)
    qw, vw, defects = shoot_windows(dyn, p, q_start, v_start, u_w, 0.005, control, substeps=2)
    assert qw.shape == (3, T // h, h + 1, robot.nv)
    assert defects.shape == (3, T // h - 1, 2 * robot.nv)
    assert float(defects.abs().max()) <= 1e-12
    # every window reproduces its stretch of the single-shooting trajectory
    for w in range(T // h):
        stretch = q[:, w * h : (w + 1) * h + 1]
        assert float((qw[:, w] - stretch).abs().max()) <= 1e-12
        assert float((vw[:, w] - v[:, w * h : (w + 1) * h + 1]).abs().max()) <= 1e-12


def test_defects_measure_the_gap_to_the_next_window(pendulum):
    robot, dyn = pendulum
    p = nominal_parameters(robot)
    q_start = torch.tensor([[[0.3, 0.0], [0.4, 0.1], [0.2, -0.1]]], dtype=torch.float64)
    v_start = torch.zeros(1, 3, 2, dtype=torch.float64)
    u = torch.zeros(1, 3, 4, 2, dtype=torch.float64)
    qw, vw, defects = shoot_windows(dyn, p, q_start, v_start, u, 0.01, TorqueControl())
    expected_q = qw[:, :-1, -1] - q_start[:, 1:]
    expected_v = vw[:, :-1, -1] - v_start[:, 1:]
    assert torch.equal(defects, torch.cat([expected_q, expected_v], dim=-1))


def test_checkpointed_rollout_gives_the_same_values_and_gradients(pendulum):
    robot, dyn = pendulum
    spec = ParameterSpec([Parameter("link1/mass", 0.5, 2.0), Parameter("joint1/damping", 0, 1)])
    theta = torch.tensor([[1.2, 0.1], [0.8, 0.3]], dtype=torch.float64, requires_grad=True)
    q0 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    v0 = torch.zeros(1, 2, dtype=torch.float64)
    u = torch.zeros(1, 12, 2, dtype=torch.float64)

    def loss(checkpoint_every):
        q, v = rollout(
            dyn,
            spec.apply(robot, theta),
            q0,
            v0,
            u,
            0.01,
            TorqueControl(),
            checkpoint_every=checkpoint_every,
        )
        return q, (q[..., 1:, :] ** 2).sum() + (v**2).sum()

    q_plain, l_plain = loss(None)
    (g_plain,) = torch.autograd.grad(l_plain, theta)
    q_ckpt, l_ckpt = loss(5)
    (g_ckpt,) = torch.autograd.grad(l_ckpt, theta)
    assert torch.equal(q_plain, q_ckpt)
    torch.testing.assert_close(g_ckpt, g_plain, rtol=1e-12, atol=1e-14)
    assert float(g_plain.abs().min()) > 0.0


def test_checkpointed_rollout_gradients_reach_states_controls_and_gains(pendulum):
    """Both checkpointed paths (chunks recomputed sample by sample; torch.utils.checkpoint when
    the control model holds a tensor that requires gradients) equal the plain rollout."""
    robot, dyn = pendulum
    p = nominal_parameters(robot, 2)
    p.damping = torch.tensor([[0.1, 0.2], [0.3, 0.05]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(5)
    u_torque = 0.5 * torch.randn(2, 11, 2, generator=gen, dtype=torch.float64)
    u_pd = torch.randn(1, 11, 4, generator=gen, dtype=torch.float64)
    kp = torch.tensor([3.0, 2.0], dtype=torch.float64, requires_grad=True)
    cases = [(TorqueControl(), u_torque, []), (PDControl(kp, 0.4), u_pd, [kp])]
    for control, u0, held in cases:
        results = []
        for every in (None, 4):
            q0 = torch.tensor([[1.0, 0.2]], dtype=torch.float64, requires_grad=True)
            v0 = torch.tensor([[0.1, -0.3]], dtype=torch.float64, requires_grad=True)
            u = u0.clone().requires_grad_(True)
            q, v = rollout(dyn, p, q0, v0, u, 0.01, control, checkpoint_every=every)
            loss = (q[..., 1:, :] ** 2).sum() + (v[..., -1, :] ** 3).sum()
            results.append((q, torch.autograd.grad(loss, [q0, v0, u, *held])))
        (q_plain, g_plain), (q_ckpt, g_ckpt) = results
        assert torch.equal(q_plain, q_ckpt)
        for a, b in zip(g_ckpt, g_plain, strict=True):
            assert float(b.abs().max()) > 0.0
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_rollout_gradient_matches_finite_differences(pendulum):
    robot, dyn = pendulum
    spec = ParameterSpec([Parameter("link2/mass", 0.5, 2.0)])
    q0 = torch.tensor([[1.0, 0.5]], dtype=torch.float64)
    v0 = torch.zeros(1, 2, dtype=torch.float64)
    u = torch.zeros(1, 12, 2, dtype=torch.float64)

    def final_angle(theta):
        q, _ = rollout(dyn, spec.apply(robot, theta), q0, v0, u, 0.01, TorqueControl())
        return q[0, -1, 1]

    theta = torch.tensor([[1.1]], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(final_angle(theta), theta)
    eps = 1e-6
    with torch.no_grad():
        fd = (final_angle(theta + eps) - final_angle(theta - eps)) / (2 * eps)
    assert abs(float(grad) - float(fd)) <= 1e-6 * max(1.0, abs(float(fd)))


def test_control_models_map_inputs_to_generalised_forces(panda_box):
    robot, _ = panda_box
    p = nominal_parameters(robot, 2)
    p.motor_gain = torch.tensor([[2.0] * 9, [3.0] * 9], dtype=torch.float64)
    q = torch.zeros(2, 4, robot.nv)
    v = torch.ones(2, 4, robot.nv)
    u = torch.arange(7, dtype=torch.float64).expand(1, 4, 7)

    tau = TorqueControl(actuated=range(7))(p, q, v, u)
    assert tau.shape == (2, 4, 9)
    assert torch.equal(tau[..., :7], u.expand(2, 4, 7))
    assert torch.equal(tau[..., 7:], torch.zeros(2, 4, 2, dtype=torch.float64))

    tau = CurrentControl(actuated=range(7))(p, q, v, u)
    assert torch.equal(tau[0, ..., :7], 2.0 * u[0])
    assert torch.equal(tau[1, ..., :7], 3.0 * u[0])
    tau = CurrentControl(torque_constant=0.5, actuated=range(7))(p, q, v, u)
    assert torch.equal(tau[..., :7], 0.5 * u.expand(2, 4, 7))

    kp = torch.linspace(10.0, 70.0, 7)
    pd = PDControl(kp=kp, kd=2.0, actuated=range(7))
    q_d = torch.full((1, 4, 7), 0.1, dtype=torch.float64)
    v_d = torch.zeros(1, 4, 7, dtype=torch.float64)
    tau = pd(p, q, v, torch.cat([q_d, v_d], dim=-1))
    expected = kp.double() * 0.1 - 2.0
    torch.testing.assert_close(tau[..., :7], expected.expand(2, 4, 7))
    assert torch.equal(tau[..., 7:], torch.zeros(2, 4, 2, dtype=torch.float64))


def test_bad_inputs_raise_errors_naming_the_item(pendulum):
    robot, dyn = pendulum
    p = nominal_parameters(robot)
    control = TorqueControl()
    u = torch.zeros(1, 5, 2)
    with pytest.raises(StateError, match="q0"):
        rollout(dyn, p, torch.tensor([[float("nan"), 0.0]]), torch.zeros(1, 2), u, 0.01, control)
    with pytest.raises(StateError, match="v0"):
        rollout(dyn, p, torch.zeros(1, 2), torch.zeros(1, 3), u, 0.01, control)
    with pytest.raises(StateError, match="control columns"):
        rollout(dyn, p, torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 5, 3), 0.01, control)
    bad_u = torch.full((1, 5, 2), float("inf"))
    with pytest.raises(StateError, match="control u"):
        rollout(dyn, p, torch.zeros(1, 2), torch.zeros(1, 2), bad_u, 0.01, control)
    with pytest.raises(StateError, match="dt"):
        rollout(dyn, p, torch.zeros(1, 2), torch.zeros(1, 2), u, -0.01, control)
    with pytest.raises(StateError, match="substeps"):
        step(dyn, p, torch.zeros(1, 2), torch.zeros(1, 2), u[:, 0], 0.01, control, substeps=0)
    with pytest.raises(StateError, match="out of range"):
        TorqueControl(actuated=[5])(p, torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 1))
    with pytest.raises(StateError, match="windows"):
        shoot_windows(
            dyn,
            p,
            torch.zeros(1, 3, 2),
            torch.zeros(1, 3, 2),
            torch.zeros(1, 2, 4, 2),
            0.01,
            control,
        )
    with pytest.raises(StateError, match="horizon"):
        split_windows(torch.zeros(1, 6, 2), torch.zeros(1, 6, 2), torch.zeros(1, 5, 2), 0)


def test_both_backends_give_the_same_rollout_and_parameter_gradient():
    robot = attach_payload(
        load_robot("open_manipulator_x"), "end_effector_link", mass=0.05, com=(0.0, 0.0, 0.0)
    )
    spec = ParameterSpec(
        [Parameter("payload/mass", 0.0, 0.1), Parameter("payload/com_x", -0.03, 0.03)]
    )
    rng = np.random.default_rng(11)
    q0 = torch.tensor(rng.uniform(-0.5, 0.5, (2, robot.nv)))
    v0 = torch.tensor(rng.uniform(-0.5, 0.5, (2, robot.nv)))
    currents = torch.tensor(rng.uniform(-0.2, 0.2, (1, 8, robot.nv)))
    control = CurrentControl(torque_constant=1.5)
    results = []
    for dyn in (TorchDynamics(robot), PinocchioDynamics(robot)):
        theta = torch.tensor([[0.05, 0.01], [0.02, -0.02]], dtype=torch.float64, requires_grad=True)
        q, _ = rollout(dyn, spec.apply(robot, theta), q0, v0, currents, 1 / 240, control)
        (grad,) = torch.autograd.grad((q[..., -1, :] ** 2).sum(), theta)
        results.append((q.detach(), grad))
    (q_torch, g_torch), (q_pin, g_pin) = results
    torch.testing.assert_close(q_pin, q_torch, rtol=0, atol=1e-10)
    torch.testing.assert_close(g_pin, g_torch, rtol=1e-8, atol=1e-12)
