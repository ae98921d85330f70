"""The excitation's building blocks: the rest-to-rest Fourier motion and the Fisher information
of a problem's free parameters (against Pinocchio's regressor)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch
import yaml

from dynid.data.trajectory import Dataset, Trajectory
from dynid.excite import FourierMotion, InformationModel, JointLimits, criteria
from dynid.model.regressor import joint_torque_regressor
from dynid.problem_file import read_problem_file

ROOT = Path(__file__).resolve().parents[3]


def _motion(seed: int = 0) -> tuple[FourierMotion, np.ndarray]:
    start = np.array([0.1, -0.4, 0.2, -2.0, 0.3, 1.6, 0.5])
    motion = FourierMotion(start, duration=4.0, harmonics=3, base_frequency=0.25, ramp=0.5)
    c = np.random.default_rng(seed).standard_normal(motion.num_coefficients) * 0.3
    return motion, c


def test_the_motion_starts_and_ends_at_rest_and_its_derivatives_are_consistent() -> None:
    motion, c = _motion()
    t, q, v, a, j = motion.sample(c, 2000.0)
    for k in (0, -1):
        np.testing.assert_allclose(q[k], motion.start, atol=1e-12)
        np.testing.assert_allclose(v[k], 0.0, atol=1e-12)
        np.testing.assert_allclose(a[k], 0.0, atol=1e-12)
        np.testing.assert_allclose(j[k], 0.0, atol=1e-9)
    assert np.abs(q - motion.start).max() > 0.05  # it does move
    dt = t[1] - t[0]
    # the jerk's own derivative jumps where the ramps join (the septic step's fourth derivative
    # does not vanish), so its central difference is first-order accurate there
    for x, dx, rtol in ((q, v, 1e-4), (v, a, 1e-4), (a, j, 1e-2)):
        fd = (x[2:] - x[:-2]) / (2 * dt)
        assert np.abs(fd - dx[1:-1]).max() < rtol * np.abs(dx).max()


def test_the_jerk_stays_bounded_through_the_ramps() -> None:
    motion, c = _motion(1)
    _, _, _, _, jerk = motion.sample(c, 5000.0)
    _, _, _, _, jerk_fine = motion.sample(c, 20000.0)
    # a jump in jerk would show as a larger maximum on the finer grid; it converges instead
    np.testing.assert_allclose(np.abs(jerk).max(), np.abs(jerk_fine).max(), rtol=1e-3)


def test_panda_limits_default_to_frankas_and_the_problem_file_overrides_them() -> None:
    pf = read_problem_file(ROOT / "config/problems/panda_payload.yaml")
    limits = JointLimits.of(pf.robot, {"jerk": 100.0}, margin=0.1, scale=0.5)
    np.testing.assert_allclose(limits.acceleration, 0.5 * np.array([15, 7.5, 10, 12.5, 15, 20, 20]))
    np.testing.assert_allclose(limits.jerk, 50.0)
    np.testing.assert_allclose(limits.velocity[:4], 0.5 * 2.175, rtol=1e-3)
    assert limits.upper[3] < -0.0698 - 0.099  # URDF upper limit of joint 4 less the margin


def _whole_arm_problem():
    pf = read_problem_file(ROOT / "config/problems/panda_whole_arm.yaml")
    t = np.arange(100) * 0.01
    q = np.zeros((t.size, 7))
    traj = Trajectory(t=t, q=q, dq=q, effort=q, joint_names=list(pf.robot.joint_names))
    return pf.build(Dataset([traj]), device="cpu")


def _random_states(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    q = rng.uniform(-1.5, 1.5, (n, 7))
    q[:, 3] = rng.uniform(-2.8, -0.3, n)
    return q, rng.normal(0, 1.0, (n, 7)), rng.normal(0, 3.0, (n, 7))


def test_whole_arm_information_is_that_of_pinocchios_base_regressor() -> None:
    """The Jacobian of the problem's torque model, mapped to base parameters,
    equals Pinocchio's joint-torque regressor columns of the base set (whitened by the problem's
    torque noise) plus the friction and offset columns."""
    problem = _whole_arm_problem()
    rng = np.random.default_rng(0)
    info = InformationModel(problem, *_random_states(rng, 150))
    assert info.base is not None
    assert 40 < info.dim < 91
    q, v, a = _random_states(rng, 12)
    with torch.no_grad():
        J, tau = info.regressor(*(torch.as_tensor(x) for x in (q, v, a)))
    Y = joint_torque_regressor(problem.robot, q, v, a)  # [S, 7, 70]
    eps = problem.dynamics.coulomb_smoothing
    columns = [Y.reshape(-1, 70)]
    for values in (v, np.tanh(v / eps), np.ones_like(v)):  # damping, coulomb, torque_offset
        block = np.zeros((12, 7, 7))
        block[:, np.arange(7), np.arange(7)] = values
        columns.append(block.reshape(-1, 7))
    A = np.concatenate(columns, axis=1) / 0.1  # torque_std 0.1 N·m
    expected = -A[:, list(info.base.base)]
    np.testing.assert_allclose(J.numpy(), expected, atol=1e-8 * np.abs(expected).max())
    # the torques are the nominal model's: Pinocchio's RNEA on the URDF plus nominal friction
    theta0 = problem.spec.nominal_theta(problem.robot)
    p = problem.parameters(theta0[None])
    friction = problem.dynamics.friction_torque(p, torch.as_tensor(v)[None])[0].numpy()
    model = problem.robot.model
    data = model.createData()
    rnea = np.stack([pin.rnea(model, data, q[s], v[s], a[s]) for s in range(12)])
    np.testing.assert_allclose(tau.numpy(), rnea + friction, atol=1e-8)


_SIGMOID = [
    {"name": "panda_joint2/sigmoid_scale", "lower": 0.0, "upper": 3.0, "nominal": 0.5},
    {"name": "panda_joint2/sigmoid_rate", "lower": 0.5, "upper": 50.0, "nominal": 5.0},
]


@pytest.mark.parametrize(("extra", "linear"), [([], True), (_SIGMOID, False)])
def test_the_information_jacobian_is_the_torque_models_own_derivative(
    tmp_path: Path, extra: list[dict], linear: bool
) -> None:
    """The payload's mass and centre of mass move only fields the torques are linear in, so the
    Jacobian is one inverse-dynamics pass over the parameter tangents; a free sigmoid rate is not
    such a field and takes forward mode. Either way it is forward-mode differentiation's."""
    config = yaml.safe_load((ROOT / "config/problems/panda_payload.yaml").read_text())
    config["parameters"] += extra
    path = tmp_path / "problem.yaml"
    path.write_text(yaml.safe_dump(config))
    pf = read_problem_file(path)
    t = np.arange(100) * 0.01
    zeros = np.zeros((t.size, 7))
    traj = Trajectory(t=t, q=zeros, dq=zeros, effort=zeros, joint_names=list(pf.robot.joint_names))
    problem = pf.build(Dataset([traj]), device="cpu")
    rng = np.random.default_rng(1)
    info = InformationModel(problem, *_random_states(rng, 40))
    assert (info._linear is not None) == linear
    q, v, a = (torch.as_tensor(x) for x in _random_states(rng, 10))
    J, tau = info._jacobian_theta(q, v, a)
    J_forward, tau_forward = info._jacobian_forward(q, v, a)
    np.testing.assert_allclose(J.detach(), J_forward.detach(), atol=1e-10 * float(J.abs().max()))
    np.testing.assert_allclose(tau.detach(), tau_forward.detach(), atol=1e-10)


def test_criteria_of_a_known_matrix() -> None:
    c = criteria(np.diag([4.0, 1.0, 0.25]))
    assert abs(c.log_det - 0.0) < 1e-12
    assert abs(c.condition_number - 16.0) < 1e-12
    assert abs(c.regressor_condition_number - 4.0) < 1e-12
    assert abs(c.min_eigenvalue - 0.25) < 1e-12
