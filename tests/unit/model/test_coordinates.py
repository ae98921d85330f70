"""``Coordinates``: physical values ↔ unit box ↔ unconstrained values of a box of parameters."""

from __future__ import annotations

import math

import pytest
import torch

from dynid.model.coordinates import Coordinates
from dynid.model.errors import StateError

LOWER = torch.tensor([0.0, 2.0, -math.inf], dtype=torch.float64)
UPPER = torch.tensor([1.0, 5.0, math.inf], dtype=torch.float64)


def test_unit_box_maps_the_bounds_to_zero_and_one() -> None:
    coords = Coordinates(LOWER[:2], UPPER[:2])
    torch.testing.assert_close(coords.to_unit(LOWER[:2]), torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(coords.to_unit(UPPER[:2]), torch.ones(2, dtype=torch.float64))


def test_unit_box_round_trip() -> None:
    coords = Coordinates(LOWER, UPPER)
    theta = torch.tensor([[0.25, 4.1, -7.0], [0.9, 2.2, 3.0]], dtype=torch.float64)
    torch.testing.assert_close(coords.from_unit(coords.to_unit(theta)), theta, rtol=0, atol=1e-15)


def test_unbounded_entries_pass_through_every_map() -> None:
    coords = Coordinates(LOWER, UPPER)
    theta = torch.tensor([0.5, 3.0, -7.0], dtype=torch.float64)
    assert float(coords.to_unit(theta)[2]) == -7.0
    assert float(coords.to_unconstrained(theta)[2]) == -7.0
    assert float(coords.from_unconstrained(theta)[2]) == -7.0


def test_unconstrained_round_trip_inside_the_box() -> None:
    coords = Coordinates(LOWER, UPPER)
    theta = torch.tensor([0.3, 4.5, 1.5], dtype=torch.float64)
    y = coords.to_unconstrained(theta)
    torch.testing.assert_close(coords.from_unconstrained(y), theta, rtol=0, atol=1e-14)


def test_margin_keeps_a_bound_finite() -> None:
    coords = Coordinates(LOWER[:2], UPPER[:2])
    y = coords.to_unconstrained(UPPER[:2], margin=1e-4)
    assert bool(torch.isfinite(y).all())


def test_log_abs_det_jacobian_matches_autograd() -> None:
    coords = Coordinates(LOWER, UPPER)
    y = torch.tensor([0.3, -1.2, 4.0], dtype=torch.float64)
    jac = torch.autograd.functional.jacobian(coords.from_unconstrained, y)
    expected = float(torch.log(torch.diagonal(jac).abs()).sum())
    assert float(coords.log_abs_det_jacobian(y)) == pytest.approx(expected, rel=1e-12)


def test_clamp_clips_into_the_box() -> None:
    coords = Coordinates(LOWER, UPPER)
    theta = torch.tensor([1.5, 1.0, 1e300], dtype=torch.float64)
    expected = torch.tensor([1.0, 2.0, 1e300], dtype=torch.float64)
    torch.testing.assert_close(coords.clamp(theta), expected, rtol=0, atol=0)


def test_wrong_width_is_named() -> None:
    coords = Coordinates(LOWER, UPPER)
    with pytest.raises(StateError, match=r"to_unit\(theta\): last dim is \(2,\), expected D=3"):
        coords.to_unit(torch.zeros(2, dtype=torch.float64))


def test_empty_box_is_refused() -> None:
    with pytest.raises(StateError, match=r"entries \[0\] have upper ≤ lower"):
        Coordinates(torch.tensor([1.0]), torch.tensor([1.0]))
