"""The container-sphere mode: penalty contact as the fit uses it (zero apart, repelling inside)."""

from __future__ import annotations

import pytest
import torch

from dynid.estimators.proprio import ProprioLoss
from dynid.objective import RigidSimulation
from dynid_bench.proprio import CONTAINER, container_problem


@pytest.fixture(scope="module")
def problem():
    torch.set_num_threads(1)
    return container_problem(duration=0.25)


def _state(problem, x: float, z: float, vx: float = 0.0, vz: float = 0.0):
    robot = problem.robot
    q = torch.zeros(1, robot.nv, dtype=torch.float64)
    v = torch.zeros_like(q)
    q[0, robot.joint_index("sphere_x")] = x
    q[0, robot.joint_index("sphere_z")] = z
    v[0, robot.joint_index("sphere_x")] = vx
    v[0, robot.joint_index("sphere_z")] = vz
    return q, v


def test_contact_force_is_zero_without_penetration(problem) -> None:
    sphere = problem.robot.attachment("sphere")
    p = problem.parameters(torch.tensor([[0.012]], dtype=torch.float64))
    gap = CONTAINER["inner_size"][0] / 2 - CONTAINER["radius"]
    for x, z in [(0.0, 0.0), (gap - 1e-4, 0.0), (0.0, -(gap - 1e-4))]:
        q, v = _state(problem, x, z, vx=0.3, vz=-0.2)
        force, depth, _ = sphere.contact_force(p, q, v)
        assert float(depth.max()) < 0.0
        assert float(force.abs().max()) == 0.0
        assert float(sphere(p, q, v).abs().max()) == 0.0


def test_contact_force_repels_a_penetrating_sphere(problem) -> None:
    sphere = problem.robot.attachment("sphere")
    robot = problem.robot
    p = problem.parameters(torch.tensor([[0.012]], dtype=torch.float64))
    gap = CONTAINER["inner_size"][0] / 2 - CONTAINER["radius"]
    depth_in = 2e-3
    q, v = _state(problem, gap + depth_in, 0.0)
    tau = sphere(p, q, v)[0]
    # Pushed back towards the cavity centre with k_e · d (no motion: no damping or friction).
    assert float(tau[robot.joint_index("sphere_x")]) == pytest.approx(
        -CONTAINER["stiffness"] * depth_in, rel=1e-9
    )
    assert float(tau[robot.joint_index("sphere_z")]) == 0.0
    q, v = _state(problem, 0.0, -(gap + depth_in), vz=-0.1)  # into the floor, still moving in
    tau = sphere(p, q, v)[0]
    expected = CONTAINER["stiffness"] * depth_in + CONTAINER["damping"] * 0.1
    assert float(tau[robot.joint_index("sphere_z")]) == pytest.approx(expected, rel=1e-9)


def test_fit_loss_sees_the_sphere_through_the_contact(problem) -> None:
    traj = problem.dataset[0]
    light, heavy = torch.tensor([[0.002]]), torch.tensor([[0.1]])
    with torch.no_grad():
        q_light = RigidSimulation()(problem, light.double(), traj)
        q_heavy = RigidSimulation()(problem, heavy.double(), traj)
    assert float((q_light - q_heavy).abs().max()) > 1e-3  # joint4 alone tells them apart
    loss = ProprioLoss(problem)
    with torch.no_grad():
        values = loss(torch.tensor([[0.002], [0.012], [0.1]], dtype=torch.float64))
    assert float(values[1]) < float(values[0])
    assert float(values[1]) < float(values[2])
