"""Batched torch dynamics against Pinocchio on random states and per-particle parameters."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.dynamics import TorchDynamics
from dynid.model.params import DynamicParameters, nominal_parameters
from dynid.model.robot import RobotModel, load_robot
from dynid.model.spatial import dynamic_params_from_log_cholesky, log_cholesky_from_dynamic_params

N_PARTICLES = 4
N_STATES = 25  # per particle: 4 × 25 = 100 random states with per-particle parameters


def _panda_box() -> RobotModel:
    attachments = pytest.importorskip("dynid.model.attachments")
    return attachments.attach_universal_box(load_robot("panda"), "panda_link8", damping=0.05)


def _omx_payload() -> RobotModel:
    attachments = pytest.importorskip("dynid.model.attachments")
    return attachments.attach_payload(
        load_robot("open_manipulator_x"), "link5", mass=0.2, com=(0.05, 0.0, 0.01)
    )


ROBOTS: dict[str, Callable[[], RobotModel]] = {
    "panda_box": _panda_box,
    "omx_payload": _omx_payload,
    "double_pendulum": lambda: load_robot("double_pendulum"),
    "furuta": lambda: load_robot("furuta"),
}


def random_parameters(robot: RobotModel, n: int, seed: int) -> DynamicParameters:
    """Per-particle physically consistent inertias, link offsets, armature and gravity."""
    gen = torch.Generator().manual_seed(seed)
    p = nominal_parameters(robot, n)
    # massless intermediate bodies (e.g. the cross of a universal joint) get a small body first
    small = torch.tensor([1e-3, 0, 0, 0, 1e-5, 0, 1e-5, 0, 0, 1e-5], dtype=torch.float64)
    massless = (p.inertia[..., :1] <= 0.0).to(torch.float64)
    lc = log_cholesky_from_dynamic_params(p.inertia + massless * small)
    lc = lc + 0.2 * torch.randn(lc.shape, generator=gen, dtype=torch.float64)
    inertia = dynamic_params_from_log_cholesky(lc)
    scale = p.joint_translation.abs().amax(-1, keepdim=True) + 0.01
    trans = p.joint_translation + 0.2 * scale * torch.randn(
        p.joint_translation.shape, generator=gen, dtype=torch.float64
    )
    armature = 0.01 * torch.rand(p.armature.shape, generator=gen, dtype=torch.float64)
    gravity = p.gravity + torch.randn(p.gravity.shape, generator=gen, dtype=torch.float64)
    zeros = torch.zeros_like(p.damping)
    return DynamicParameters(
        inertia=inertia,
        joint_translation=trans,
        damping=zeros,
        coulomb=zeros,
        armature=armature,
        motor_gain=torch.ones_like(zeros),
        stribeck_delta=zeros,
        stribeck_rate=zeros,
        gravity=gravity,
    )


def pinocchio_model(robot: RobotModel, p: DynamicParameters, i: int) -> pin.Model:
    """A copy of the robot's Pinocchio model carrying particle i's parameters."""
    model = pin.Model(robot.model)
    for j in range(robot.nv):
        model.inertias[j + 1] = pin.Inertia.FromDynamicParameters(p.inertia[i, j].numpy())
        placement = model.jointPlacements[j + 1].copy()
        placement.translation = p.joint_translation[i, j].numpy()
        model.jointPlacements[j + 1] = placement
    model.armature = p.armature[i].numpy()
    model.gravity = pin.Motion(p.gravity[i].numpy(), np.zeros(3))
    return model


def random_states(robot: RobotModel, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    shape = (N_PARTICLES, N_STATES, robot.nv)
    return tuple(torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(3))


def assert_close(actual: np.ndarray, ref: np.ndarray, what: str) -> None:
    err = np.abs(actual - ref).max()
    tol = 1e-10 * (1.0 + np.abs(ref).max())
    assert err <= tol, f"{what}: max error {err:.3e} > {tol:.3e}"


@pytest.fixture(params=list(ROBOTS), scope="module")
def case(request: pytest.FixtureRequest) -> tuple[RobotModel, DynamicParameters, tuple]:
    robot = ROBOTS[request.param]()
    return robot, random_parameters(robot, N_PARTICLES, seed=1), random_states(robot, seed=2)


def test_rnea_mass_matrix_aba_frames_match_pinocchio(case: tuple) -> None:
    robot, p, (q, v, a) = case
    dyn = TorchDynamics(robot)
    tau = dyn.rnea(p, q, v, a).numpy()
    M = dyn.mass_matrix(p, q).numpy()
    qdd = dyn.forward_dynamics(p, q, v, a).numpy()
    qdd_aba = dyn.forward_dynamics_aba(p, q, v, a).numpy()
    frames = [f for f in robot.frame_names if f != "universe"]
    R, t = (x.numpy() for x in dyn.frame_placement(p, q, frames))
    for i in range(N_PARTICLES):
        model = pinocchio_model(robot, p, i)
        data = model.createData()
        for k in range(N_STATES):
            qk, vk, ak = q[i, k].numpy(), v[i, k].numpy(), a[i, k].numpy()
            assert_close(tau[i, k], pin.rnea(model, data, qk, vk, ak), "rnea")
            Mr = pin.crba(model, data, qk)
            Mr = np.triu(Mr) + np.triu(Mr, 1).T
            assert_close(M[i, k], Mr, "mass matrix")
            ref = pin.aba(model, data, qk, vk, ak)
            assert_close(qdd[i, k], ref, "forward dynamics")
            assert_close(qdd_aba[i, k], ref, "forward dynamics (torch ABA)")
            pin.framesForwardKinematics(model, data, qk)
            for f, name in enumerate(frames):
                oMf = data.oMf[model.getFrameId(name)]
                assert_close(t[i, k, f], oMf.translation, f"frame {name} translation")
                assert_close(R[i, k, f], oMf.rotation, f"frame {name} rotation")


def test_rnea_equals_joint_torque_regressor(case: tuple) -> None:
    robot, p, (q, v, a) = case
    # the regressor covers the rigid bodies; rnea adds the armature's rotor inertia on top
    tau = (TorchDynamics(robot).rnea(p, q, v, a) - p.armature[:, None] * a).numpy()
    for i in range(N_PARTICLES):
        model = pinocchio_model(robot, p, i)
        data = model.createData()
        pi = p.inertia[i].reshape(-1).numpy()
        for k in range(0, N_STATES, 5):
            Y = pin.computeJointTorqueRegressor(
                model, data, q[i, k].numpy(), v[i, k].numpy(), a[i, k].numpy()
            )
            resid = np.abs(tau[i, k] - Y @ pi).max()
            assert resid <= 1e-12 * (1.0 + np.abs(tau[i, k]).max())


def test_dqdd_dinertia_equals_minus_minv_regressor(case: tuple) -> None:
    robot, p, (q, v, a) = case
    dyn = TorchDynamics(robot)
    qk, vk, tk = q[:1, 0], v[:1, 0], a[:1, 0]
    p1 = p.index(0)

    def qdd_of(inertia: torch.Tensor) -> torch.Tensor:
        return dyn.forward_dynamics(
            DynamicParameters(**{**p1.__dict__, "inertia": inertia}), qk, vk, tk
        )[0]

    J = torch.autograd.functional.jacobian(qdd_of, p1.inertia)[:, 0].reshape(robot.nv, -1)
    model = pinocchio_model(robot, p, 0)
    data = model.createData()
    qn, vn = qk[0].numpy(), vk[0].numpy()
    qdd = pin.aba(model, data, qn, vn, tk[0].numpy())
    Y = pin.computeJointTorqueRegressor(model, data, qn, vn, qdd)
    M = pin.crba(model, data, qn)
    M = np.triu(M) + np.triu(M, 1).T
    ref = -np.linalg.solve(M, Y)
    err = np.abs(J.numpy() - ref).max()
    assert err <= 1e-8 * np.abs(ref).max()


def test_state_gradients_equal_aba_derivatives(case: tuple) -> None:
    robot, p, (q, v, a) = case
    dyn = TorchDynamics(robot)
    p1 = p.index(1)
    qk, vk, tk = q[1:2, 3], v[1:2, 3], a[1:2, 3]
    jq, jv, jt = torch.autograd.functional.jacobian(
        lambda x, y, z: dyn.forward_dynamics(p1, x, y, z)[0], (qk, vk, tk)
    )
    model = pinocchio_model(robot, p, 1)
    data = model.createData()
    ddq_dq, ddq_dv, minv = pin.computeABADerivatives(
        model, data, qk[0].numpy(), vk[0].numpy(), tk[0].numpy()
    )
    minv = np.triu(minv) + np.triu(minv, 1).T
    for mine, ref, what in ((jq, ddq_dq, "dq"), (jv, ddq_dv, "dv"), (jt, minv, "dtau")):
        assert_close(mine[:, 0].numpy(), ref, f"d qdd / {what}")


def test_parameters_broadcast_over_states_and_windows() -> None:
    robot = load_robot("double_pendulum")
    dyn = TorchDynamics(robot)
    p = random_parameters(robot, 3, seed=5)
    gen = torch.Generator().manual_seed(6)
    q = torch.randn(1, 2, 4, robot.nv, generator=gen, dtype=torch.float64)
    v = torch.randn(1, 2, 4, robot.nv, generator=gen, dtype=torch.float64)
    qdd = dyn.forward_dynamics(p, q, v, torch.zeros_like(q))
    assert qdd.shape == (3, 2, 4, robot.nv)
    for i in range(3):
        single = dyn.forward_dynamics(p.index(i), q[0, 1, 2:3], v[0, 1, 2:3], q[0, 1, 2:3] * 0)
        assert torch.allclose(qdd[i, 1, 2], single[0], rtol=0, atol=1e-13)


def test_friction_adds_to_pinocchio_aba() -> None:
    robot = load_robot("furuta")
    p = random_parameters(robot, 1, seed=7)
    p.damping = torch.tensor([[0.3, 0.02]], dtype=torch.float64)
    p.coulomb = torch.tensor([[0.05, 0.01]], dtype=torch.float64)
    p.stribeck_delta = torch.tensor([[0.02, 0.004]], dtype=torch.float64)
    p.stribeck_rate = torch.tensor([[2.0, 5.0]], dtype=torch.float64)
    dyn = TorchDynamics(robot, coulomb_smoothing=0.01)
    q = torch.tensor([[0.3, 2.0]], dtype=torch.float64)
    v = torch.tensor([[0.4, -0.2]], dtype=torch.float64)
    tau = torch.tensor([[0.1, 0.0]], dtype=torch.float64)
    vn = v[0].numpy()
    mu = p.coulomb[0].numpy() + p.stribeck_delta[0].numpy() * np.exp(
        -((p.stribeck_rate[0].numpy() * vn) ** 2)
    )
    friction = p.damping[0].numpy() * vn + mu * np.tanh(vn / 0.01)
    model = pinocchio_model(robot, p, 0)
    ref = pin.aba(model, model.createData(), q[0].numpy(), vn, tau[0].numpy() - friction)
    assert_close(dyn.forward_dynamics(p, q, v, tau)[0].numpy(), ref, "aba with friction")
    assert_close(dyn.forward_dynamics_aba(p, q, v, tau)[0].numpy(), ref, "torch ABA, friction")
    assert_close(dyn.friction_torque(p, v)[0].numpy(), friction, "friction torque")
