"""Inverse-dynamics regressor: ``Y π`` is Pinocchio's RNEA, and one body's parameters come back
from exact torques, in the frame they were given in."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.attachments import attach_payload
from dynid.model.errors import StateError
from dynid.model.regressor import (
    body_columns,
    fit_body_parameters,
    inertial_in_frame,
    joint_torque_regressor,
)
from dynid.model.robot import load_robot

COM = np.array([0.03, -0.02, 0.06])
INERTIA = np.array([[2e-3, -2e-4, 3e-4], [-2e-4, 2.5e-3, 1e-4], [3e-4, 1e-4, 1.5e-3]])


def _states(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1.5, 1.5, (n, 7)) for _ in range(3))


def test_regressor_times_parameters_is_rnea() -> None:
    robot = attach_payload(load_robot("panda"), "panda_link8", mass=1.2, com=COM, inertia=INERTIA)
    q, v, a = _states(5)
    Y = joint_torque_regressor(robot, q, v, a)
    assert Y.shape == (5, 7, 70)
    pi = robot.nominal_inertia().reshape(-1)
    data = robot.model.createData()
    for s in range(5):
        np.testing.assert_allclose(
            Y[s] @ pi, pin.rnea(robot.model, data, q[s], v[s], a[s]), atol=1e-10
        )
    assert body_columns(robot, "panda_link8") == slice(60, 70)
    with pytest.raises(StateError, match=r"\[S, 7\]"):
        joint_torque_regressor(robot, q[:, :6], v, a)


def test_inertial_in_frame_inverts_the_payload_placement() -> None:
    robot = attach_payload(load_robot("panda"), "panda_hand", mass=1.2, com=COM, inertia=INERTIA)
    payload = robot.attachment("payload")
    t = torch.as_tensor
    pi = payload.joint_frame_parameters(t([1.2]), t(COM)[None], t(INERTIA)[None])[0].numpy()
    mass, com, inertia = inertial_in_frame(robot, "panda_hand", pi)  # rotated 45° about z
    assert mass == pytest.approx(1.2)
    np.testing.assert_allclose(com, COM, atol=1e-12)
    np.testing.assert_allclose(inertia, INERTIA, atol=1e-12)


def test_fit_recovers_a_payload_from_exact_torques() -> None:
    arm = load_robot("panda")
    loaded = attach_payload(arm, "panda_link8", mass=1.2, com=COM, inertia=INERTIA)
    q, v, a = _states(200, seed=1)
    model, data = loaded.model, loaded.model.createData()
    bare, bare_data = arm.model, arm.model.createData()
    extra = np.stack(
        [
            pin.rnea(model, data, q[s], v[s], a[s]) - pin.rnea(bare, bare_data, q[s], v[s], a[s])
            for s in range(200)
        ]
    )
    fit = fit_body_parameters(arm, "panda_link8", q, v, a, extra)
    assert fit.mass == pytest.approx(1.2, rel=1e-9)
    np.testing.assert_allclose(fit.com, COM, atol=1e-9)
    np.testing.assert_allclose(fit.inertia, INERTIA, atol=1e-9)
    assert fit.rmse < 1e-9
    assert fit.samples == 200
    assert fit.condition_number < 1e3
    assert fit.pi_covariance.shape == (10, 10)
