"""The Pinocchio backend agrees with the torch backend in values and in every gradient."""

from __future__ import annotations

import pytest
import torch
from test_dynamics_vs_pinocchio import random_parameters

from dynid.model.dynamics import TorchDynamics
from dynid.model.errors import StateError, UnsupportedGradientError
from dynid.model.params import DynamicParameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import RobotModel, load_robot


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return load_robot("panda")


def _with_friction(p: DynamicParameters) -> DynamicParameters:
    p.damping = torch.full_like(p.damping, 0.1)
    p.coulomb = torch.full_like(p.coulomb, 0.2)
    p.stribeck_delta = torch.full_like(p.coulomb, 0.05)
    p.stribeck_rate = torch.full_like(p.coulomb, 3.0)
    return p


def _states(shape: tuple[int, ...], nv: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, nv, generator=gen, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize(("n_params", "shape"), [(3, (3, 4)), (1, (5, 6)), (2, (1, 3))])
@pytest.mark.parametrize("method", ["forward_dynamics", "rnea"])
def test_values_and_gradients_match_torch_backend(
    robot: RobotModel, n_params: int, shape: tuple[int, ...], method: str
) -> None:
    p = _with_friction(random_parameters(robot, n_params, seed=1))
    fields = ("inertia", "armature", "gravity", "damping", "coulomb")
    for f in fields:
        getattr(p, f).requires_grad_(True)
    states = [x.requires_grad_(True) for x in _states(shape, robot.nv, seed=2)]
    inputs = [*states, *(getattr(p, f) for f in fields)]
    results = []
    for dyn in (TorchDynamics(robot), PinocchioDynamics(robot)):
        y = getattr(dyn, method)(p, *states)
        weights = torch.sin(torch.arange(y.numel(), dtype=torch.float64)).reshape(y.shape)
        grads = torch.autograd.grad((y * weights).sum(), inputs, allow_unused=True)
        results.append((y.detach(), grads))
    (y_t, g_t), (y_p, g_p) = results
    torch.testing.assert_close(y_p, y_t, rtol=1e-10, atol=1e-10)
    for name, a, b in zip(["q", "v", "tau/a", *fields], g_t, g_p, strict=True):
        if a is None:
            assert b is None or not bool(b.any()), name
            continue
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-9 * (1 + a.abs().max().item()))


def test_no_grad_paths_match_torch(robot: RobotModel) -> None:
    dyn_t, dyn_p = TorchDynamics(robot), PinocchioDynamics(robot, num_threads=2)
    for n_params, shape in ((1, (1, 64)), (4, (4, 2))):  # abaInParallel, per-particle loop
        p = _with_friction(random_parameters(robot, n_params, seed=3))
        q, v, tau = _states(shape, robot.nv, seed=4)
        with torch.no_grad():
            torch.testing.assert_close(
                dyn_p.forward_dynamics(p, q, v, tau), dyn_t.forward_dynamics(p, q, v, tau)
            )
        torch.testing.assert_close(dyn_p.mass_matrix(p, q), dyn_t.mass_matrix(p, q))
        frames = ["panda_hand", "panda_link0"]
        for a, b in zip(
            dyn_p.frame_placement(p, q, frames), dyn_t.frame_placement(p, q, frames), strict=True
        ):
            torch.testing.assert_close(a, b)


def test_translation_gradient_is_refused(robot: RobotModel) -> None:
    p = random_parameters(robot, 1, seed=5)
    p.joint_translation.requires_grad_(True)
    q, v, tau = _states((1, 2), robot.nv, seed=6)
    with pytest.raises(UnsupportedGradientError, match="joint_translation"):
        PinocchioDynamics(robot).forward_dynamics(p, q, v, tau)


def test_bad_states_raise(robot: RobotModel) -> None:
    p = random_parameters(robot, 2, seed=7)
    dyn = PinocchioDynamics(robot)
    q, v, tau = _states((2, 3), robot.nv, seed=8)
    with pytest.raises(StateError, match=r"tau has shape"):
        dyn.forward_dynamics(p, q, v, tau[..., :3])
    v[1, 2, 4] = float("nan")
    with pytest.raises(StateError, match="panda_joint5"):
        dyn.forward_dynamics(p, q, v, tau)
    with pytest.raises(StateError, match="N=2"):
        dyn.rnea(p, *_states((3, 1), robot.nv, seed=9))


def test_massless_intermediate_body_of_universal_joint() -> None:
    """The universal joint's intermediate body has zero mass; Pinocchio must not see a NaN COM."""
    from dynid.model.attachments import attach_universal_box
    from dynid.model.params import nominal_parameters

    robot = attach_universal_box(load_robot("panda"), "panda_link8")
    params = nominal_parameters(robot)
    gen = torch.Generator().manual_seed(3)
    q, v, tau = (torch.randn(1, 4, robot.nv, generator=gen, dtype=torch.float64) for _ in range(3))
    qdd = PinocchioDynamics(robot).forward_dynamics(params, q, v, tau)
    assert torch.isfinite(qdd).all()
    torch.testing.assert_close(
        qdd, TorchDynamics(robot).forward_dynamics(params, q, v, tau), rtol=1e-9, atol=1e-9
    )
