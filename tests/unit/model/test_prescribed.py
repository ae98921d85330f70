"""Prescribed actuated motion (hybrid dynamics): a hand-checked 2-dof case, PD reproduction."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from dynid.model.attachments import attach_universal_box
from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError
from dynid.model.integrate import PDControl, PrescribedMotion, rollout, shoot_windows, step
from dynid.model.params import nominal_parameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import load_robot
from dynid.sim import panda_box
from dynid.sim.common import simulate_rollout

ARM = list(range(7))


@pytest.fixture(scope="module")
def pendulum():
    robot = load_robot("double_pendulum")
    return robot, TorchDynamics(robot), nominal_parameters(robot)


def _hand_passive_acceleration(q, v, a1, damping2, g):
    """Joint 2 of the double pendulum (1 kg tips at l1 = 1.5 m, l2 = 2 m, 1e-4 kg·m² each):
    (m l2² + I) (q̈1 + q̈2) + m l1 l2 (cos q2 q̈1 + sin q2 q̇1²) + m g l2 sin(q1 + q2) + d q̇2 = 0."""
    m, l1, l2, inertia = 1.0, 1.5, 2.0, 1e-4
    m22 = m * l2**2 + inertia
    m21 = m22 + m * l1 * l2 * math.cos(q[1])
    bias = m * l1 * l2 * math.sin(q[1]) * v[0] ** 2 + m * g * l2 * math.sin(q[0] + q[1])
    return -(m21 * a1 + bias + damping2 * v[1]) / m22


def test_hybrid_acceleration_of_the_double_pendulum_matches_the_hand_derivation(pendulum):
    _, dyn, p = pendulum
    p = dataclasses.replace(p, damping=torch.tensor([[0.0, 0.3]], dtype=torch.float64))
    control = PrescribedMotion([0])
    rng = np.random.default_rng(1)
    g = float(-p.gravity[0, 2])
    for _ in range(5):
        q, v = rng.uniform(-2.0, 2.0, 2), rng.uniform(-2.0, 2.0, 2)
        a1 = float(rng.uniform(-3.0, 3.0))
        u = torch.tensor([[q[0], v[0], a1]], dtype=torch.float64)
        a = control.accelerations(dyn, p, torch.tensor(q[None]), torch.tensor(v[None]), u)
        assert a[0, 0].item() == pytest.approx(a1, abs=1e-12)
        expected = _hand_passive_acceleration(q, v, a1, 0.3, g)
        assert a[0, 1].item() == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_one_step_sets_the_actuated_state_and_integrates_the_passive_joint(pendulum):
    _, dyn, p = pendulum
    control = PrescribedMotion([0])
    q = torch.tensor([[9.0, 0.4]], dtype=torch.float64)  # actuated entries are overwritten
    v = torch.tensor([[9.0, -0.7]], dtype=torch.float64)
    u = torch.tensor([[0.3, 1.2, -2.0]], dtype=torch.float64)
    dt = 0.01
    q1, v1 = step(dyn, p, q, v, u, dt, control)
    a2 = _hand_passive_acceleration([0.3, 0.4], [1.2, -0.7], -2.0, 0.0, 9.81)
    assert v1[0, 0].item() == pytest.approx(1.2 - 2.0 * dt, abs=1e-14)
    assert q1[0, 0].item() == pytest.approx(0.3 + dt * (1.2 - 2.0 * dt), abs=1e-14)
    assert v1[0, 1].item() == pytest.approx(-0.7 + dt * a2, abs=1e-9)
    assert q1[0, 1].item() == pytest.approx(0.4 + dt * (-0.7 + dt * a2), abs=1e-9)


def _pd_box_simulation(sim_dt: float):
    """Panda + box tracking the demo's moves (0.2 s holds) with the PD law: q, v [T+1, 9]."""
    robot = attach_universal_box(
        load_robot("panda"), "panda_link8", damping=(0.06, 0.04),
        weight_positions=np.array([[0.04, -0.04], [-0.12, 0.06]]),
    )  # fmt: skip
    params = nominal_parameters(robot)
    q_d, v_d = panda_box.offset_plan(sim_dt, hold=0.2)
    u = np.concatenate([q_d, v_d], axis=1)[None]
    q0 = np.concatenate([panda_box.HOME, [0.05, -0.08]])[None]
    control = PDControl(panda_box.KP, panda_box.KD, actuated=ARM)
    q, v = simulate_rollout(
        PinocchioDynamics(robot), params, q0, np.zeros_like(q0), u, sim_dt, control
    )
    return robot, params, q[0], v[0]


@pytest.fixture(scope="module")
def pd_box():
    return _pd_box_simulation(1e-3)


def _prescribed_rollout(robot, params, q, v, every: int, substeps: int, steps: int | None = None):
    """Roll out the box joints under the PD simulation's arm motion sampled every ``every``
    simulator steps (accelerations: forward differences of the sampled velocities), over the
    first ``steps`` simulator steps (default all)."""
    qs, vs = q[:steps:every], v[:steps:every]
    dt = 1e-3 * every
    acc = np.diff(vs[:, :7], axis=0) / dt
    u = torch.as_tensor(np.concatenate([qs[:-1, :7], vs[:-1, :7], acc], axis=1))[None]
    start_q, start_v = torch.as_tensor(qs[:1]), torch.as_tensor(vs[:1])
    with torch.no_grad():
        q_sim, _ = rollout(
            TorchDynamics(robot), params, start_q, start_v, u, dt, PrescribedMotion(ARM), substeps
        )
    return q_sim[0].numpy(), qs


def test_prescribed_rollout_on_the_simulation_grid_reproduces_the_pd_simulation(pd_box):
    """Fed the arm's exact per-step accelerations, the hybrid dynamics give the same box
    accelerations as the forward dynamics of the full PD simulation: equal to rounding."""
    robot, params, q, v = pd_box
    q_sim, q_ref = _prescribed_rollout(robot, params, q, v, every=1, substeps=1, steps=400)
    assert np.abs(q_ref[:, 7:]).max() > 0.05  # the box swings
    np.testing.assert_allclose(q_sim[:, 7:], q_ref[:, 7:], atol=1e-10)


def test_prescribed_rollout_at_100_hz_follows_the_pd_simulation(pd_box):
    """At the 100 Hz data rate the arm's acceleration is held per sample (its mean over the
    sample); with 10 substeps the box angles stay within 2e-4 rad of the 1 kHz simulation over
    1.6 s (semi-implicit Euler error O(dt/substeps); 1e-4 rad is 0.1 mm at the box's points 1 m
    out, far below the mocap noise), and with one substep within 1e-2 rad (the ~1.5 Hz swing is
    still resolved by 65 steps per period)."""
    robot, params, q, v = pd_box
    amplitude = np.abs(q[:, 7:]).max()
    fine, q_ref = _prescribed_rollout(robot, params, q, v, every=10, substeps=10)
    coarse, _ = _prescribed_rollout(robot, params, q, v, every=10, substeps=1)
    assert amplitude > 0.1
    assert np.abs(fine[:, 7:] - q_ref[:, 7:]).max() < 2e-4
    assert np.abs(coarse[:, 7:] - q_ref[:, 7:]).max() < 1e-2
    assert np.abs(fine[:, :7] - q_ref[:, :7]).max() < 1e-3  # the arm follows its recording


def test_shooting_defects_remain_only_on_the_passive_joints(pendulum):
    _, dyn, p = pendulum
    control = PrescribedMotion([0])
    gen = torch.Generator().manual_seed(0)
    q_start = torch.randn(1, 3, 2, generator=gen, dtype=torch.float64)
    v_start = torch.randn(1, 3, 2, generator=gen, dtype=torch.float64)
    u = 0.5 * torch.randn(1, 3, 4, 3, generator=gen, dtype=torch.float64)
    q, v, defects = shoot_windows(dyn, p, q_start, v_start, u, 0.01, control)
    assert torch.equal(q[:, :, 0, 0], u[:, :, 0, 0])  # window starts follow the data
    assert torch.all(defects[..., [0, 2]] == 0.0)
    expected_q = q[:, :-1, -1, 1] - q_start[:, 1:, 1]
    expected_v = v[:, :-1, -1, 1] - v_start[:, 1:, 1]
    torch.testing.assert_close(defects[..., 1], expected_q)
    torch.testing.assert_close(defects[..., 3], expected_v)
    assert defects[..., [1, 3]].abs().min() > 0


def test_gradient_reaches_the_inertial_parameters(pendulum):
    _, dyn, p = pendulum
    inertia = p.inertia.clone().requires_grad_(True)
    q = torch.tensor([[0.3, 0.4]], dtype=torch.float64)
    v = torch.tensor([[0.1, -0.2]], dtype=torch.float64)
    u = torch.tensor([[0.3, 0.1, 1.0]], dtype=torch.float64)
    a = PrescribedMotion([0]).accelerations(dyn, dataclasses.replace(p, inertia=inertia), q, v, u)
    (grad,) = torch.autograd.grad(a[0, 1], inertia)
    assert grad.abs().sum() > 0


def test_bad_inputs_are_rejected(pendulum):
    robot, dyn, p = pendulum
    q = torch.zeros(1, 2, dtype=torch.float64)
    with pytest.raises(StateError, match="actuated dofs"):
        PrescribedMotion([])
    with pytest.raises(StateError, match="at least one dof must be passive"):
        PrescribedMotion([0, 1]).input_size(2)
    with pytest.raises(StateError, match="out of range"):
        PrescribedMotion([5]).input_size(2)
    with pytest.raises(StateError, match="3 columns"):
        step(dyn, p, q, q, torch.zeros(1, 2, dtype=torch.float64), 0.01, PrescribedMotion([0]))
    pin_dyn = PinocchioDynamics(robot)
    p_grad = dataclasses.replace(p, inertia=p.inertia.clone().requires_grad_(True))
    u = torch.zeros(1, 3, dtype=torch.float64)
    with pytest.raises(StateError, match="mass_matrix carries no gradient"):
        PrescribedMotion([0]).accelerations(pin_dyn, p_grad, q, q, u)
