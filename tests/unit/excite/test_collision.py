"""The collision model's fast paths against its brute-force definitions: the smallest distance
(hull bounds, then exact mesh distances) against every pair's mesh distance, the pairs within a
clearance against the distances, and the witness-point gradient against central differences."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from dynid.excite.collision import CollisionModel, Environment
from dynid.model.robot import robot_urdf
from dynid.problem_file import read_problem_file

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def model_and_states() -> tuple[CollisionModel, np.ndarray, np.ndarray]:
    pf = read_problem_file(ROOT / "config/problems/panda_payload.yaml")
    box = ((0.5, 0.0, 0.3), (0.1, 0.1, 0.1))
    collision = CollisionModel(pf.robot, robot_urdf("panda"), Environment(0.0, (box,)))
    rng = np.random.default_rng(0)
    q = pin.neutral(pf.robot.model) + 0.6 * rng.standard_normal((60, pf.robot.nv))
    return collision, q, collision.distances(q)


def test_the_smallest_distance_is_the_smallest_mesh_distance(model_and_states) -> None:
    collision, q, d = model_and_states
    assert (d.min(axis=1) < 0).any()  # both penetrating states
    assert (d.min(axis=1) > 0.05).any()  # and clear ones
    smallest, names = collision.min_distance(q)
    np.testing.assert_allclose(smallest, d.min(axis=1), atol=1e-12)
    pairs = collision.pair_names
    assert names == [" / ".join(pairs[k]) for k in d.argmin(axis=1)]


def test_the_close_pairs_are_those_within_the_clearance(model_and_states) -> None:
    collision, q, d = model_and_states
    close = set(collision.close_pairs(q, 0.04))
    assert close == {(int(s), int(k)) for s, k in np.argwhere(d < 0.04)}


def test_the_distance_gradient_is_that_of_central_differences(model_and_states) -> None:
    collision, q, d = model_and_states
    checked = 0
    for s, k in np.argwhere((d > 0.002) & (d < 0.15))[:40]:
        analytic = collision.pair_gradient(q[s], k)
        h = 1e-6
        numeric = [
            (collision.pair_distance(q[s] + h * e, k) - collision.pair_distance(q[s] - h * e, k))
            / (2 * h)
            for e in np.eye(q.shape[1])
        ]
        np.testing.assert_allclose(analytic, numeric, atol=2e-6)
        checked += 1
    assert checked >= 20
