"""The steady paper's hovercraft: equations, controls, initial states, bearings, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynid.sim import hovercraft as hov
from dynid.sim.common import SimulationError


def test_body_accelerations_follow_the_equations_with_and_without_drag() -> None:
    truth, hand = hov.HovercraftDynamics().double(), hov.HovercraftDynamics(drag=False).double()
    heading = torch.tensor([0.0], dtype=torch.float64)
    vb = torch.tensor([[2.0, -1.0, 0.5]], dtype=torch.float64)
    u = torch.tensor([[0.6, 0.2]], dtype=torch.float64)
    mean, std = truth.acceleration(heading, vb, u)
    expected = [(0.8 - 0.015 * 4.0) / 1.5, 0.03 * 1.0 / 1.5, (0.2 - 0.6 - 0.07 * 0.5) / 1.5]
    assert mean[0].tolist() == pytest.approx(expected)
    assert std[0].tolist() == pytest.approx(hov.TRUE_STD)
    assert hand.acceleration(heading, vb, u)[0][0].tolist() == pytest.approx(
        [0.8 / 1.5, 0.0, -0.4 / 1.5]
    )


def test_explicit_euler_step_rotates_body_accelerations_into_the_world() -> None:
    model = hov.HovercraftDynamics(std=(1e-12, 1e-12, 1e-12)).double()
    x = torch.tensor([[1.0, 2.0, math.pi / 2, 0.0, 0.0, 0.0]], dtype=torch.float64)
    u = torch.tensor([[0.75, 0.75]], dtype=torch.float64)  # a_x = 1 m/s² forward, no turn
    nxt = model.sample(x, u, 0.1, torch.Generator().manual_seed(0))
    # facing +y: the forward acceleration becomes world v_y; position moves with the old velocity
    assert nxt[0].tolist() == pytest.approx([1.0, 2.0, math.pi / 2, 0.0, 0.1, 0.0], abs=1e-9)
    lp = model.log_prob(x, u, nxt, 0.1)
    assert torch.isfinite(lp).all()


def test_simulation_is_deterministic_and_has_the_papers_shapes() -> None:
    a, b = hov.simulate(3, 4), hov.simulate(3, 4)
    assert a.states.shape == (4, 101, 6)
    assert a.controls.shape == (4, 100, 2)
    assert a.observations.shape == (4, 101, 4)
    np.testing.assert_array_equal(a.states, b.states)
    np.testing.assert_array_equal(a.observations, b.observations)
    # bearings are the truth's within a few σ (5°)
    error = np.angle(np.exp(1j * (a.observations - hov.bearings_to(a.states, hov.LANDMARKS))))
    assert np.abs(error).max() < 5 * hov.BEARING_STD
    assert 0.8 * hov.BEARING_STD < error.std() < 1.2 * hov.BEARING_STD
    train, valid, test = hov.simulate(0, 10).split((4, 3, 3))
    assert (len(train), len(valid), len(test)) == (4, 3, 3)
    with pytest.raises(SimulationError, match="runs must be"):
        hov.simulate(0, 0)


def test_controls_pass_through_the_knots_and_are_sometimes_swapped() -> None:
    rng = np.random.default_rng(0)
    times = np.arange(100) * hov.DT
    runs = [hov.controls(rng, times) for _ in range(200)]
    for u in runs:
        assert u[0].tolist() == [0.0, 0.0]  # the first knot is not perturbed
    # at 5 s the nominal knot is (1.1, 0.5); swapped 60 % of the time
    left_high = np.mean([u[50, 0] > u[50, 1] for u in runs])
    assert 0.3 < left_high < 0.5
    x0 = hov.initial_states(np.random.default_rng(1), 20_000)
    assert x0[:, :2].mean(0) == pytest.approx([0.5, 1.0], abs=0.05)
    assert x0[:, 3].std() == pytest.approx(0.3, rel=0.05)
