"""Base parameters of the Panda's regressor, and the log-Cholesky map in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynid.model.base_parameters import BaseParameters
from dynid.model.errors import StateError
from dynid.model.regressor import joint_torque_regressor
from dynid.model.robot import load_robot
from dynid.model.spatial import dynamic_params_from_log_cholesky, log_cholesky_from_dynamic_params
from dynid.objective.linear import (
    INERTIAL_NAMES,
    log_cholesky_from_pi,
    pi_from_log_cholesky,
    pi_jacobian,
    pseudo_inertia,
)


def _panda_regressor(samples: int = 120, seed: int = 0):
    robot = load_robot("panda")
    rng = np.random.default_rng(seed)
    lower, upper = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    q = rng.uniform(lower, upper, size=(samples, robot.nv))
    v, a = rng.normal(size=(2, samples, robot.nv))
    W = joint_torque_regressor(robot, q, v, a).reshape(-1, 10 * robot.nv)
    names = [f"{link}/{k}" for link in robot.body_names for k in INERTIAL_NAMES]
    return robot, W, names


def test_noiseless_base_parameters_are_recovered_to_1e_8() -> None:
    robot, W, names = _panda_regressor()
    base = BaseParameters.of(W, names)
    assert base.rank == 43  # 70 standard parameters of the seven links
    pi = robot.nominal_inertia().reshape(-1)
    beta, *_ = np.linalg.lstsq(W[:, list(base.base)], W @ pi, rcond=None)
    truth = base.values(pi)
    assert np.max(np.abs(beta - truth)) <= 1e-8 * np.max(np.abs(truth))
    # the same torques from the base parameters alone: W x = W_B β for any x
    other = pi + np.random.default_rng(1).normal(size=pi.size)
    np.testing.assert_allclose(
        W[:, list(base.base)] @ base.values(other), W @ other, rtol=1e-9, atol=1e-9
    )


def test_structure_of_the_first_links() -> None:
    _, W, names = _panda_regressor()
    base = BaseParameters.of(W, names)
    unexcited = {names[i] for i in base.unexcited}
    link1 = {f"panda_link1/{k}" for k in INERTIAL_NAMES if k != "ZZ"}
    assert unexcited == link1 | {"panda_link2/m", "panda_link2/mz"}
    members = [{names[i] for i in base.members(k)} for k in range(base.rank)]
    # the first link acts only through its inertia about its axis, with link 2's and beyond
    (first,) = [m for m in members if "panda_link1/ZZ" in m]
    assert len(first) > 1
    assert all(not n.startswith("panda_link1/") for n in first - {"panda_link1/ZZ"})
    assert {"panda_link7/ZZ"} in members  # the last link's inertia about its axis, alone
    assert "panda_link7/ZZ" in [base.expression(k) for k in range(base.rank)]
    combined = {names[i] for i in base.combined()}
    assert "panda_link1/ZZ" in combined
    assert "panda_link7/ZZ" not in combined
    assert "panda_link7/ZZ" in {names[i] for i in base.alone()}


def test_rank_of_a_regressor_with_a_repeated_column() -> None:
    rng = np.random.default_rng(2)
    W = rng.normal(size=(30, 3))
    W = np.column_stack([W, 2.0 * W[:, 0] - W[:, 2], np.zeros(30)])
    base = BaseParameters.of(W, ["a", "b", "c", "d", "e"])
    assert base.rank == 3
    assert base.unexcited == (4,)
    x = rng.normal(size=5)
    np.testing.assert_allclose(W[:, list(base.base)] @ base.values(x), W @ x, atol=1e-12)
    with pytest.raises(StateError, match="5 parameter names"):
        BaseParameters.of(W[:, :4], ["a", "b", "c", "d", "e"])


def test_numpy_log_cholesky_matches_the_torch_reference() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        theta = rng.normal(size=10)
        ref = dynamic_params_from_log_cholesky(torch.as_tensor(theta)).numpy()
        pi = pi_from_log_cholesky(theta)
        np.testing.assert_allclose(pi, ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(log_cholesky_from_pi(pi), theta, rtol=1e-10, atol=1e-10)
        jac = torch.autograd.functional.jacobian(
            dynamic_params_from_log_cholesky, torch.as_tensor(theta)
        ).numpy()
        np.testing.assert_allclose(pi_jacobian(theta), jac, rtol=1e-10, atol=1e-12)
        assert np.linalg.eigvalsh(pseudo_inertia(pi))[0] > 0.0
    pi = load_robot("panda").nominal_inertia()[3]
    np.testing.assert_allclose(
        log_cholesky_from_pi(pi),
        log_cholesky_from_dynamic_params(torch.as_tensor(pi)).numpy(),
        rtol=1e-10,
        atol=1e-12,
    )
