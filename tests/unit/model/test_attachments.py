"""Attachments: extended Pinocchio trees, per-particle attachment parameters, penalty contact."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.attachments import (
    AttachmentError,
    attach_payload,
    attach_universal_box,
    sphere_in_container,
)
from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import ParameterSpecError, UnknownFrameError
from dynid.model.integrate import TorqueControl, rollout
from dynid.model.params import Parameter, ParameterSpec, nominal_parameters
from dynid.model.robot import load_robot

BOX_INERTIA = np.array([[0.07, 0.004, -0.002], [0.004, 0.08, 0.001], [-0.002, 0.001, 0.06]])


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda")


@pytest.fixture(scope="module")
def omx():
    return load_robot("open_manipulator_x")


def _assert_dynamics_equal_pinocchio(robot, p, references, states_per_particle, seed):
    """Torch forward dynamics and mass matrix with ``p`` equal Pinocchio on reference models."""
    dyn = TorchDynamics(robot)
    rng = np.random.default_rng(seed)
    n = len(references)
    shape = (n, states_per_particle, robot.nv)
    q, v, tau = (torch.tensor(rng.uniform(-1.5, 1.5, shape)) for _ in range(3))
    qdd = dyn.forward_dynamics(p, q, v, tau)
    M = dyn.mass_matrix(p, q)
    friction = dyn.friction_torque(p, v)
    for i, ref in enumerate(references):
        data = ref.model.createData()
        for k in range(states_per_particle):
            tau_ref = (tau[i, k] - friction[i, k]).numpy()
            a_ref = pin.aba(ref.model, data, q[i, k].numpy(), v[i, k].numpy(), tau_ref)
            M_ref = pin.crba(ref.model, data, q[i, k].numpy())
            M_ref = np.triu(M_ref) + np.triu(M_ref, 1).T
            tol_a = 1e-10 * (1.0 + np.abs(a_ref).max())
            np.testing.assert_allclose(qdd[i, k].detach().numpy(), a_ref, rtol=0, atol=tol_a)
            tol_m = 1e-10 * (1.0 + np.abs(M_ref).max())
            np.testing.assert_allclose(M[i, k].detach().numpy(), M_ref, rtol=0, atol=tol_m)


def test_panda_box_parameters_match_a_pinocchio_model_built_with_them(panda):
    robot = attach_universal_box(panda, "panda_link8", damping=(0.05, 0.08))
    assert robot.nv == 9
    assert robot.joint_names[-2:] == ["box_joint_x", "box_joint_y"]
    assert robot.body_names[-1] == "box"
    names = [f"box/weight{i}_{a}" for i in (1, 2) for a in "xy"]
    names += ["box/ixx", "box/iyy", "box/izz", "box/ixy", "box/ixz", "box/iyz", "box/com_z"]
    spec = ParameterSpec(
        [Parameter(n, -0.08, 0.08) for n in names[:4]]
        + [Parameter(n, 0.05, 0.1) for n in names[4:7]]
        + [Parameter(n, -0.01, 0.01) for n in names[7:10]]
        + [Parameter("box/com_z", 0.1, 0.4)]
    )
    theta = spec.sample_prior(4, torch.Generator().manual_seed(7))
    p = spec.apply(robot, theta)
    references = []
    for row in theta.numpy():
        values = dict(zip(names, row, strict=True))
        ixx, iyy, izz, ixy, ixz, iyz = (
            values[f"box/i{k}"] for k in ("xx", "yy", "zz", "xy", "xz", "yz")
        )
        ref = attach_universal_box(
            panda,
            "panda_link8",
            damping=(0.05, 0.08),
            weight_positions=row[:4].reshape(2, 2),
            box_com=(0.0, 0.0, values["box/com_z"]),
            box_inertia=[[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]],
        )
        references.append(ref)
    for i, ref in enumerate(references):
        np.testing.assert_allclose(p.inertia[i].numpy(), ref.nominal_inertia(), atol=1e-13)
    # weights at different places give different box inertias per particle
    assert float((p.inertia[0, -1] - p.inertia[1, -1]).abs().max()) > 1e-3
    _assert_dynamics_equal_pinocchio(robot, p, references, states_per_particle=25, seed=8)


def test_universal_joint_is_passive_damped_and_carries_the_box_mass(panda):
    robot = attach_universal_box(panda, "panda_hand", damping=0.1, weights=2)
    p = nominal_parameters(robot)
    assert torch.equal(p.damping[0, -2:], torch.tensor([0.1, 0.1], dtype=torch.float64))
    # box body: 0.92 kg box + 2 × 0.5 kg weights; nothing on the intermediate joint
    assert float(p.inertia[0, -1, 0]) == pytest.approx(0.92 + 1.0, abs=1e-12)
    assert float(p.inertia[0, -2].abs().max()) == 0.0
    # hanging at rest under gravity with the arm still, the box stays at rest
    dyn = TorchDynamics(robot)
    q = torch.zeros(1, robot.nv, dtype=torch.float64)
    bias = dyn.rnea(p, q, torch.zeros_like(q), torch.zeros_like(q))
    arm_axes_down = bias[0, -2:]
    data = robot.model.createData()
    np.testing.assert_allclose(
        arm_axes_down.numpy(),
        pin.rnea(robot.model, data, q[0].numpy(), q[0].numpy() * 0, q[0].numpy() * 0)[-2:],
        atol=1e-12,
    )


def test_omx_payload_parameters_match_a_pinocchio_model_built_with_them(omx):
    robot = attach_payload(omx, "end_effector_link", mass=0.05, com=(0.0, 0.0, 0.0))
    spec = ParameterSpec(
        [
            Parameter("payload/mass", 0.005, 0.1),
            Parameter("payload/com_x", -0.03, 0.03),
            Parameter("payload/com_y", -0.03, 0.03),
            Parameter("payload/com_z", -0.03, 0.03),
        ]
    )
    theta = spec.sample_prior(4, torch.Generator().manual_seed(9))
    p = spec.apply(robot, theta)
    references = [
        attach_payload(omx, "end_effector_link", mass=float(m), com=(x, y, z))
        for m, x, y, z in theta.numpy()
    ]
    for i, ref in enumerate(references):
        np.testing.assert_allclose(p.inertia[i].numpy(), ref.nominal_inertia(), atol=1e-14)
    _assert_dynamics_equal_pinocchio(robot, p, references, states_per_particle=25, seed=10)


def test_payload_on_a_rotated_link_frame_with_inertia(panda):
    inertia = np.diag([2e-4, 3e-4, 4e-4])
    robot = attach_payload(panda, "panda_hand", mass=0.3, com=(0.01, 0.02, 0.05), inertia=inertia)
    spec = ParameterSpec([Parameter("payload/com_x", -0.1, 0.1), Parameter("payload/izz", 0, 1e-3)])
    theta = torch.tensor([[0.04, 6e-4]], dtype=torch.float64)
    p = spec.apply(robot, theta)
    ref = attach_payload(
        panda, "panda_hand", mass=0.3, com=(0.04, 0.02, 0.05), inertia=np.diag([2e-4, 3e-4, 6e-4])
    )
    np.testing.assert_allclose(p.inertia[0].numpy(), ref.nominal_inertia(), atol=1e-14)
    # the payload frame sits at the centre of mass of the nominal payload
    data = robot.model.createData()
    pin.framesForwardKinematics(robot.model, data, np.zeros(robot.nv))
    hand = data.oMf[robot.frame_id("panda_hand")]
    np.testing.assert_allclose(
        data.oMf[robot.frame_id("payload")].translation,
        hand.act(np.array([0.01, 0.02, 0.05])),
        atol=1e-12,
    )


def test_attachments_survive_further_extension(panda):
    robot = attach_payload(panda, "panda_link7", mass=0.2, com=(0.0, 0.0, 0.05))
    robot = attach_universal_box(robot, "panda_link8")
    assert sorted(robot.resolvers) == ["box", "payload"]
    spec = ParameterSpec(
        [Parameter("payload/mass", 0.0, 1.0), Parameter("box/weight1_y", -0.08, 0.08)]
    )
    p = spec.apply(robot, torch.tensor([[0.5, 0.05]], dtype=torch.float64))
    ref = attach_payload(panda, "panda_link7", mass=0.5, com=(0.0, 0.0, 0.05))
    ref = attach_universal_box(ref, "panda_link8", weight_positions=[[-0.075, 0.05], [0.075, 0.0]])
    np.testing.assert_allclose(p.inertia[0].numpy(), ref.nominal_inertia(), atol=1e-14)


@pytest.fixture(scope="module")
def sphere_robot(omx):
    # container fixed to the world: every arm joint locked, only the sphere's dofs move
    locked = dict.fromkeys(omx.joint_names, 0.0)
    base = load_robot("open_manipulator_x", locked_joints=locked)
    return sphere_in_container(
        base,
        "link5",
        inner_size=(0.06, 0.05, 0.04),
        radius=0.01,
        mass=0.012,
        stiffness=500.0,
        damping=0.5,
        friction_stiffness=1.0,
        friction=0.4,
    )


def test_contact_force_is_zero_apart_and_repelling_in_penetration(sphere_robot):
    sphere = sphere_robot.attachment("sphere")
    p = nominal_parameters(sphere_robot)
    assert sphere.dofs == (0, 1, 2)
    q = torch.tensor([[0.005, -0.01, 0.0]], dtype=torch.float64)
    v = torch.tensor([[0.3, 0.2, -0.1]], dtype=torch.float64)
    assert float(sphere(p, q, v).abs().max()) == 0.0
    # 2 mm into the +x wall (half extent 0.03 m), at rest
    q = torch.tensor([[0.022, 0.0, 0.0]], dtype=torch.float64)
    force, depth, _ = sphere.contact_force(p, q, torch.zeros_like(q))
    assert float(depth[0, 0]) == pytest.approx(0.002, abs=1e-15)
    torch.testing.assert_close(force[0, 0], torch.tensor([-500.0 * 0.002, 0.0, 0.0]).double())
    assert float(force[0, 1:].abs().max()) == 0.0
    tau = sphere(p, q, torch.zeros_like(q))
    torch.testing.assert_close(tau[0], torch.tensor([-1.0, 0.0, 0.0]).double())
    # approaching the wall adds damping, separating fast never pulls the sphere in
    approaching = sphere(p, q, torch.tensor([[0.1, 0.0, 0.0]], dtype=torch.float64))
    assert float(approaching[0, 0]) == pytest.approx(-1.0 - 0.5 * 0.1)
    separating = sphere(p, q, torch.tensor([[-10.0, 0.0, 0.0]], dtype=torch.float64))
    assert float(separating[0, 0]) == 0.0


def test_friction_is_viscous_when_slow_and_coulomb_bounded_when_fast(sphere_robot):
    sphere = sphere_robot.attachment("sphere")
    p = nominal_parameters(sphere_robot)
    q = torch.tensor([[0.0, 0.0, -0.012]], dtype=torch.float64)  # 2 mm into the −z floor
    f_n = 500.0 * 0.002
    slow = torch.tensor([[0.01, 0.0, 0.0]], dtype=torch.float64)
    force, _, _ = sphere.contact_force(p, q, slow)
    floor = force[0, -1]
    torch.testing.assert_close(floor, torch.tensor([-1.0 * 0.01, 0.0, f_n]).double())
    fast = torch.tensor([[0.3, 0.4, 0.0]], dtype=torch.float64)
    force, _, _ = sphere.contact_force(p, q, fast)
    tangential = force[0, -1, :2]
    assert float(tangential.norm()) == pytest.approx(0.4 * f_n, rel=1e-12)
    direction = tangential / tangential.norm()
    torch.testing.assert_close(direction, torch.tensor([-0.6, -0.8]).double())


def test_rolling_sphere_feels_friction_torque_and_sticks_without_slip(omx):
    locked = dict.fromkeys(omx.joint_names, 0.0)
    base = load_robot("open_manipulator_x", locked_joints=locked)
    robot = sphere_in_container(
        base,
        "link5",
        inner_size=(0.06, 0.05, 0.04),
        radius=0.01,
        mass=0.012,
        stiffness=500.0,
        damping=0.5,
        friction_stiffness=5.0,
        friction=0.4,
        axes="xz",
        rolling=True,
    )
    sphere = robot.attachment("sphere")
    assert robot.joint_names == ["sphere_x", "sphere_z", "sphere_roll"]
    p = nominal_parameters(robot)
    q = torch.tensor([[0.0, -0.012, 0.0]], dtype=torch.float64)
    # rolling without slip on the −z floor: the contact point moves with
    # v + ω × (−r e_z) = (v_x − r ω_y) e_x, zero for ω_y = v_x / r
    rolling = torch.tensor([[0.01, 0.0, 1.0]], dtype=torch.float64)
    force, _, torque = sphere.contact_force(p, q, rolling)
    assert float(force[0, -1, 0].abs()) <= 1e-15
    assert float(torque.abs().max()) <= 1e-15
    # pure spin slips at the contact point: friction pushes the centre and brakes the spin
    spin = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
    tau = sphere(p, q, spin)
    assert float(tau[0, 0]) > 0.0
    assert float(tau[0, 2]) < 0.0


def test_sphere_settles_on_the_floor_with_weight_balanced_by_contact(sphere_robot):
    sphere = sphere_robot.attachment("sphere")
    dyn = TorchDynamics(sphere_robot)
    p = nominal_parameters(sphere_robot)
    q0 = torch.zeros(1, 3, dtype=torch.float64)
    v0 = torch.tensor([[0.05, -0.03, 0.0]], dtype=torch.float64)
    u = torch.zeros(1, 100, 0, dtype=torch.float64)
    q, v = rollout(dyn, p, q0, v0, u, 0.01, TorqueControl(actuated=[]), substeps=2)
    assert float(v[0, -1].abs().max()) < 1e-3
    force, depth, _ = sphere.contact_force(p, q[:, -1], v[:, -1])
    # total contact force in world axes balances gravity m g
    data = sphere_robot.model.createData()
    pin.framesForwardKinematics(sphere_robot.model, data, q[0, -1].numpy())
    R = data.oMf[sphere_robot.frame_id("link5")].rotation
    world = R @ force[0].sum(0).numpy()
    np.testing.assert_allclose(world, [0.0, 0.0, 0.012 * 9.81], atol=1e-4)
    assert float(depth.max()) > 0.0
    # the contact is applied by default; without it the sphere falls through the floor
    assert sphere_robot.generalized_forces == (sphere,)
    q_free, _ = rollout(dyn, p, q0, v0, u[:, :30], 0.01, TorqueControl(actuated=[]), forces=())
    assert float(q_free[0, -1, 2]) < -0.2


def test_sphere_parameters_resolve_to_inertia_and_contact_constants(sphere_robot):
    spec = ParameterSpec(
        [Parameter("sphere/mass", 0.001, 0.1), Parameter("sphere/stiffness", 10.0, 1e4)]
    )
    theta = torch.tensor([[0.018, 1000.0], [0.006, 200.0]], dtype=torch.float64)
    p = spec.apply(sphere_robot, theta)
    assert torch.equal(p.extra["sphere/stiffness"], theta[:, 1])
    row = sphere_robot.attachment("sphere").row
    for i in range(2):
        m = float(theta[i, 0])
        expected = [m, 0, 0, 0, 0.4 * m * 1e-4, 0, 0.4 * m * 1e-4, 0, 0, 0.4 * m * 1e-4]
        np.testing.assert_allclose(p.inertia[i, row].numpy(), expected, atol=1e-15)
    sphere = sphere_robot.attachment("sphere")
    q = torch.tensor([[0.022, 0.0, 0.0]], dtype=torch.float64).expand(2, 3)
    tau = sphere(p, q, torch.zeros_like(q))
    torch.testing.assert_close(tau[:, 0], -theta[:, 1] * 0.002)


def test_contact_gradients_are_finite_at_rest_in_contact(sphere_robot):
    sphere = sphere_robot.attachment("sphere")
    p = nominal_parameters(sphere_robot)
    q = torch.tensor([[0.0, 0.0, -0.012]], dtype=torch.float64, requires_grad=True)
    v = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    sphere(p, q, v).sum().backward()
    assert bool(torch.isfinite(q.grad).all())
    assert bool(torch.isfinite(v.grad).all())
    assert float(q.grad[0, 2]) == pytest.approx(-500.0)


def test_bad_attachment_inputs_raise_errors_naming_the_item(panda, omx):
    with pytest.raises(UnknownFrameError, match="flange_link"):
        attach_universal_box(panda, "flange_link")
    with pytest.raises(AttachmentError, match="mass"):
        attach_payload(omx, "link5", mass=-0.1, com=(0, 0, 0))
    with pytest.raises(AttachmentError, match="inertia"):
        attach_payload(omx, "link5", mass=0.1, com=(0, 0, 0), inertia=[[1, 2], [3, 4]])
    with pytest.raises(AttachmentError, match="outside"):
        attach_universal_box(panda, "panda_link8", weight_positions=[[0.2, 0.0], [0.0, 0.0]])
    with pytest.raises(AttachmentError, match="box"):
        attach_universal_box(attach_universal_box(panda, "panda_link8"), "panda_hand")
    with pytest.raises(AttachmentError, match="fixed to the base"):
        attach_payload(omx, "link1", mass=0.1, com=(0, 0, 0))
    contact = {
        "radius": 0.01,
        "mass": 0.01,
        "stiffness": 1.0,
        "damping": 0.0,
        "friction_stiffness": 0.0,
        "friction": 0.0,
    }
    with pytest.raises(AttachmentError, match="rolling"):
        sphere_in_container(omx, "link5", inner_size=(0.1, 0.1, 0.1), rolling=True, **contact)
    with pytest.raises(AttachmentError, match="diameter"):
        sphere_in_container(omx, "link5", inner_size=(0.1, 0.1, 0.015), **contact)
    robot = attach_universal_box(panda, "panda_link8")
    with pytest.raises(ParameterSpecError, match="weight3_x"):
        ParameterSpec([Parameter("box/weight3_x", -0.1, 0.1)]).apply(
            robot, torch.zeros(1, 1, dtype=torch.float64)
        )
