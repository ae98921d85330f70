"""Torque offsets and the sigmoid friction of Gaz et al. 2019 against a direct computation."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import torch

from dynid.model.dynamics import TorchDynamics
from dynid.model.params import DynamicParameters, Parameter, ParameterSpec
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import load_robot

# Gaz et al. 2019, Table I, joints 1-3 (N·m, s/rad, rad/s), and torque offsets (N·m)
PHI1 = (0.54615, 0.87224, 0.64068)
PHI2 = (5.1181, 9.0657, 10.136)
PHI3 = (0.039533, 0.025882, -0.04607)
OFFSET = (0.3, -0.2, 0.1)


def _spec_and_theta() -> tuple[ParameterSpec, torch.Tensor]:
    params, values = [], []
    for j in range(3):
        joint = f"panda_joint{j + 1}"
        for field, value in (
            ("torque_offset", OFFSET[j]),
            ("sigmoid_scale", PHI1[j]),
            ("sigmoid_rate", PHI2[j]),
            ("sigmoid_shift", PHI3[j]),
        ):
            params.append(Parameter(f"{joint}/{field}", -20.0, 20.0))
            values.append(value)
    return ParameterSpec(params), torch.tensor([values], dtype=torch.float64)


def _direct(v: np.ndarray) -> np.ndarray:
    """τ_0 + φ1/(1 + e^{−φ2(v + φ3)}) − φ1/(1 + e^{−φ2 φ3}) on joints 1-3, written out."""
    out = np.zeros_like(v)
    for j in range(3):
        phi1, phi2, phi3 = PHI1[j], PHI2[j], PHI3[j]
        sig = phi1 / (1.0 + np.exp(-phi2 * (v[..., j] + phi3)))
        out[..., j] = OFFSET[j] + sig - phi1 / (1.0 + np.exp(-phi2 * phi3))
    return out


def _states(robot, n: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    q = np.stack([pin.randomConfiguration(robot.model) for _ in range(n)])
    return q, rng.normal(scale=0.5, size=(n, robot.nv)), rng.normal(size=(n, robot.nv))


def test_offsets_and_sigmoid_friction_match_the_formula_in_both_backends() -> None:
    robot = load_robot("panda")
    spec, theta = _spec_and_theta()
    p = spec.apply(robot, theta)
    q, v, tau = _states(robot)
    qt, vt, taut = (torch.as_tensor(x)[None] for x in (q, v, tau))
    damping = np.asarray(robot.model.damping)  # the URDF's viscous friction
    expected_friction = _direct(v) + damping * v
    for dyn in (TorchDynamics(robot), PinocchioDynamics(robot)):
        friction = dyn.friction_torque(p, vt)[0].numpy()
        np.testing.assert_allclose(friction, expected_friction, rtol=1e-12, atol=1e-12)
    # forward dynamics: Pinocchio's ABA on the applied torque minus that friction
    model, data = robot.model, robot.model.createData()
    expected = np.stack(
        [pin.aba(model, data, q[s], v[s], tau[s] - expected_friction[s]) for s in range(len(q))]
    )
    for dyn in (TorchDynamics(robot), PinocchioDynamics(robot)):
        qdd = dyn.forward_dynamics(p, qt, vt, taut)[0].numpy()
        np.testing.assert_allclose(qdd, expected, rtol=1e-9, atol=1e-9)


def test_nothing_changes_when_offsets_and_sigmoids_are_zero() -> None:
    robot = load_robot("panda")
    spec, theta = _spec_and_theta()
    p = spec.apply(robot, torch.zeros_like(theta))
    v = torch.as_tensor(_states(robot)[1])[None]
    dyn = TorchDynamics(robot)
    damping = torch.as_tensor(np.asarray(robot.model.damping))
    torch.testing.assert_close(dyn.friction_torque(p, v), damping * v, rtol=0, atol=0)


def test_offset_and_sigmoid_gradients_match_finite_differences() -> None:
    robot = load_robot("panda")
    spec, theta = _spec_and_theta()
    q, v, tau = (torch.as_tensor(x)[None] for x in _states(robot, 2))
    dyn = TorchDynamics(robot)

    def qdd(theta: torch.Tensor) -> torch.Tensor:
        return dyn.forward_dynamics(spec.apply(robot, theta), q, v, tau)

    theta = theta.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(qdd, (theta,), eps=1e-6, atol=1e-6, rtol=1e-5)


def test_parameters_default_to_zero_offsets_and_sigmoids() -> None:
    zeros = torch.zeros(2, 3, dtype=torch.float64)
    p = DynamicParameters(
        inertia=torch.zeros(2, 3, 10),
        joint_translation=torch.zeros(2, 3, 3),
        damping=zeros,
        coulomb=zeros,
        armature=zeros,
        motor_gain=zeros,
        stribeck_delta=zeros,
        stribeck_rate=zeros,
        gravity=torch.zeros(2, 3),
    )
    for name in ("torque_offset", "sigmoid_scale", "sigmoid_rate", "sigmoid_shift"):
        assert torch.equal(getattr(p, name), zeros)
    assert p.index(1).torque_offset.shape == (1, 3)
