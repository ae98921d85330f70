"""XM430-W350 conversions: datasheet torque constant, current units, encoder grid, steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynid.model.dynamixel import PAPER_STEPS, XM430_W350, CurrentStep
from dynid.model.errors import StateError


def test_torque_constant_and_current_unit_follow_the_datasheet() -> None:
    assert XM430_W350.torque_constant == pytest.approx(4.1 / 2.3)
    assert XM430_W350.current_limit == pytest.approx(3.209, abs=1e-3)
    # 300 mA (proprio V-A) is 112 register counts and about 0.535 N·m at the output.
    assert float(XM430_W350.amps_to_units(np.array(0.3))) == 112.0
    assert XM430_W350.current_to_torque(0.3) == pytest.approx(0.5348, abs=1e-4)
    k = torch.tensor([[1.5], [2.0]], dtype=torch.float64)
    tau = XM430_W350.current_to_torque(torch.full((2, 3), 0.1, dtype=torch.float64), k)
    torch.testing.assert_close(tau, torch.tensor([[0.15] * 3, [0.2] * 3], dtype=torch.float64))


def test_units_round_trip_numpy_and_torch() -> None:
    units = np.array([-1193.0, -1.0, 0.0, 37.0, 1193.0])
    np.testing.assert_allclose(XM430_W350.amps_to_units(XM430_W350.units_to_amps(units)), units)
    t = torch.tensor(units)
    torch.testing.assert_close(XM430_W350.amps_to_units(XM430_W350.units_to_amps(t)), t)


def test_encoder_quantisation_grid() -> None:
    res = 2.0 * math.pi / 4096
    assert XM430_W350.position_resolution == pytest.approx(res)
    rng = np.random.default_rng(0)
    q = rng.uniform(-2.0, 2.0, size=1000)
    qq = XM430_W350.quantize(q)
    assert np.abs(qq - q).max() <= res / 2 + 1e-15
    np.testing.assert_allclose(qq / res, np.round(qq / res), atol=1e-9)
    assert XM430_W350.ticks_to_rad(2048) == pytest.approx(math.pi)
    torch.testing.assert_close(XM430_W350.quantize(torch.from_numpy(q)), torch.from_numpy(qq))


def test_paper_current_steps() -> None:
    step = PAPER_STEPS["fixed_joint"]
    assert (step.joint, step.current, step.duration) == ("joint3", 0.3, 0.6)
    u = step.command(1.0 / 60.0, total=50)
    assert u.shape == (50, 1)
    assert np.all(u[:36] == 0.3)
    assert np.all(u[36:] == 0.0)
    assert PAPER_STEPS["soft_block"].samples(1.0 / 60.0) == 60
    with pytest.raises(StateError, match="duration"):
        CurrentStep("joint3", 0.1, 0.0)
    with pytest.raises(StateError, match="dt"):
        step.samples(0.0)
