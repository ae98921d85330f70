"""The STEADY benchmark's model diagnostic: predicted disturbance std and mean-acceleration
error of a model against the true hovercraft, on the test runs' true states."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.benchmarks import steady
from dynid.sim import hovercraft as hov


def _by_metric(model: hov.HovercraftDynamics) -> dict[str, float]:
    test = hov.simulate(3, 2)
    return {r.metric: r.value for r in steady.acceleration_errors(model, test)}


def test_the_true_model_has_no_mean_error_and_its_own_std() -> None:
    by = _by_metric(hov.HovercraftDynamics())
    for c, (name, _) in enumerate(steady.COMPONENTS):
        assert by[f"accel_mean_err_{name}"] == pytest.approx(0.0, abs=1e-7)
        assert by[f"accel_std_{name}"] == pytest.approx(hov.TRUE_STD[c])


def test_hand_is_off_by_the_drag_and_reports_its_wider_std() -> None:
    test = hov.simulate(3, 2)
    by = {r.metric: r.value for r in steady.acceleration_errors(hov.HovercraftDynamics(
        drag=False, std=hov.HAND_STD), test)}  # fmt: skip
    # the angular drag alone: α misses c_ω ω / m_r
    omega = test.states[:, :-1, 5].ravel()
    expected = np.sqrt(np.mean((0.07 * omega / 1.5) ** 2))
    assert by["accel_mean_err_theta"] == pytest.approx(expected, rel=1e-4)
    assert by["accel_mean_err_x"] > 0.0
    assert [by[f"accel_std_{name}"] for name, _ in steady.COMPONENTS] == pytest.approx(hov.HAND_STD)
