"""Belief propagation through contact (residual-contact paper IV) and the residual policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynid.estimators.impact_belief import (
    STATE_NAMES,
    TrajectoryBelief,
    covered,
    propagate_belief,
    recalibrated_thresholds,
)
from dynid.model.impulse_residual import (
    DensityNetwork,
    ResidualContact,
    load_policy,
    save_policy,
)
from dynid.model.planar_impact import (
    GRAVITY,
    PlanarImpactSimulator,
    contact_features,
    contact_impulse,
    contact_quantities,
)

SIM = PlanarImpactSimulator()
START = torch.tensor([0.0, 0.12, 0.4, 0.5, -1.0, 3.0], dtype=torch.float64)


def _policy(seed: int, std_bias: float = 0.0) -> DensityNetwork:
    torch.manual_seed(seed)
    policy = DensityNetwork(hidden=6)
    with torch.no_grad():
        policy.layers[2].bias[2:] += std_bias
    return policy


def test_zero_variance_belief_is_the_deterministic_simulation() -> None:
    torch.manual_seed(4)
    policy = DensityNetwork(hidden=6, min_std=0.0)
    with torch.no_grad():
        policy.layers[2].bias[2:] = -1e3  # softplus → 0: no spread
    belief = propagate_belief(SIM, START, 120, 0.2, 0.5, policy, particles=8, seed=1)
    with torch.no_grad():
        expected = SIM.rollout(START[None], 120, 0.2, 0.5, ResidualContact(policy))[0]
    assert belief.states.shape == (8, 121, 6)
    np.testing.assert_allclose(belief.states, expected.numpy()[None].repeat(8, 0), atol=1e-12)
    assert len(belief.boundaries) >= 1  # it bounced: dynamic steps ended
    post = belief.posterior(60)
    assert post.names == list(STATE_NAMES)
    np.testing.assert_allclose(post.mean(), expected[60].numpy(), atol=1e-12)


def test_stochastic_belief_spreads_after_contact_and_stays_feasible() -> None:
    policy = _policy(0, std_bias=2.0)  # a clearly noisy residual
    belief = propagate_belief(SIM, START, 120, 0.2, 0.5, policy, particles=32, seed=2)
    first = int(np.argmax(np.ptp(belief.states[:, :, 1], axis=0) > 0))
    assert first > 5  # deterministic until the first contact
    assert np.ptp(belief.states[:, -1, 0]) > 1e-4  # uncertainty after contact
    lowest = SIM.lowest_point(torch.from_numpy(belief.states))
    assert (lowest >= -1e-12).all()
    again = propagate_belief(SIM, START, 120, 0.2, 0.5, policy, particles=32, seed=2)
    np.testing.assert_array_equal(belief.states, again.states)  # seeded


def test_extra_spread_widens_the_belief() -> None:
    torch.manual_seed(4)
    policy = DensityNetwork(hidden=6, min_std=0.0)
    with torch.no_grad():
        policy.layers[2].bias[2:] = -1e3  # the policy's own spread is zero
    narrow = propagate_belief(SIM, START, 120, 0.2, 0.5, policy, particles=32, seed=3)
    wide = propagate_belief(
        SIM, START, 120, 0.2, 0.5, policy, particles=32, seed=3, extra_std=0.01 * 0.049
    )
    assert np.ptp(narrow.states[:, -1, 0]) < 1e-12
    assert np.ptp(wide.states[:, -1, 0]) > 1e-3
    assert (SIM.lowest_point(torch.from_numpy(wide.states)) >= -1e-12).all()
    with pytest.raises(ValueError, match="extra_std"):
        ResidualContact(policy, extra_std=-1.0)


def _gaussian_belief() -> TrajectoryBelief:
    """400 particles over 3 samples, configurations ~ N(0, 0.01² I) (m), r_g = 1."""
    states = np.zeros((400, 3, 6))
    states[:, :, :3] = np.random.default_rng(0).normal(size=(400, 3, 3)) * 0.01
    return TrajectoryBelief(states, radius_of_gyration=1.0)


def test_coverage_of_a_known_gaussian() -> None:
    belief = _gaussian_belief()
    inside = np.zeros((3, 6))
    far = np.zeros((3, 6))
    far[:, 0] = 0.05  # 5 σ away
    assert belief.coverage(inside, components=1) == {0.5: 1.0, 0.9: 1.0}
    assert belief.coverage(far, components=1) == {0.5: 0.0, 0.9: 0.0}
    edge = np.zeros((3, 6))
    edge[:, 0] = 0.0155  # between the 50 % (1.54 σ) and 90 % (2.50 σ) radii of a 3-D Gaussian
    assert belief.coverage(edge, components=1) == {0.5: 0.0, 0.9: 1.0}


def test_infeasible_mean_residual_falls_back_to_the_model() -> None:
    policy = DensityNetwork(hidden=6)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
        policy.layers[2].bias[1] = -1e3  # pull the contact into the ground
    with torch.no_grad():
        plain = SIM.rollout(START[None], 80, 0.2, 0.5)
        corrected = SIM.rollout(START[None], 80, 0.2, 0.5, ResidualContact(policy))
    torch.testing.assert_close(corrected, plain, rtol=0, atol=0)


def _wrench_policy(angular: float) -> DensityNetwork:
    """A wrench policy whose residual is ``(0, 0, angular)`` (N·m·s) everywhere, no spread."""
    policy = DensityNetwork(hidden=6, min_std=0.0, outputs=3)
    with torch.no_grad():
        for p in policy.parameters():
            p.zero_()
        policy.layers[2].bias[3:] = -1e3
        policy.layers[2].bias[2] = angular / float(policy.impulse_scale * policy.lever)
    return policy


def test_wrench_residual_spins_the_square_unless_it_adds_energy() -> None:
    # corner-down impact: the analytical impulse leaves the square spinning at w_m; an angular
    # impulse L = -½ I w_m slows that spin (feasible), L = +2 I |w_m| sign(w_m) speeds it up
    # (adds energy: the analytical impulse is kept)
    body = SIM.body
    state = torch.tensor([[0.0, 0.0, 0.4, 0.3, -1.5, 6.0]], dtype=torch.float64)
    state[0, 1] = -body.corners(state[:, 2])[0, :, 1].min() + 1e-4
    free = state.clone()
    free[0, 4] -= GRAVITY * SIM.dt  # the velocity the contact model sees
    r = body.corners(state[:, 2])[0]
    v, A = contact_quantities(body, free, r[r[:, 1].argmin()][None])
    p_m = contact_impulse(v[:, :2], A[:, :2, :2], torch.tensor(0.2), torch.tensor(0.5))
    p_m = torch.cat([p_m, torch.zeros(1, 1, dtype=torch.float64)], -1)
    w_m = float((v + (A @ p_m[..., None])[..., 0])[0, 2])
    features = contact_features(body, v[:, :2], A[:, :2, :2])
    slow, fast = -0.5 * body.inertia * w_m, 2.0 * body.inertia * w_m
    for angular, kept in ((slow, True), (fast, False)):
        out = ResidualContact(_wrench_policy(angular))(features, v, A, p_m)
        expected = p_m + torch.tensor([0.0, 0.0, angular if kept else 0.0], dtype=torch.float64)
        torch.testing.assert_close(out, expected)
    # through the simulator: the same step, the spin changed by L / I and nothing else
    with torch.no_grad():
        plain, _ = SIM.step(state, 0.2, 0.5)
        spun, event = SIM.step(state, 0.2, 0.5, ResidualContact(_wrench_policy(slow)))
    assert bool(event)
    torch.testing.assert_close(spun[0, 3:5], plain[0, 3:5])
    assert float(spun[0, 5] - plain[0, 5]) == pytest.approx(slow / body.inertia, rel=1e-9)


def test_policy_weights_round_trip_without_pickle(tmp_path) -> None:
    x = torch.randn(5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(3)
    for policy in (_policy(3), DensityNetwork(hidden=4, outputs=3, lever=0.02)):
        loaded = load_policy(save_policy(policy, tmp_path / "policy.pt"))
        assert loaded.outputs == policy.outputs
        for a, b in zip(policy(x), loaded(x), strict=True):
            assert a.shape == (5, policy.outputs)
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.save({"hidden": torch.tensor(6), "payload": object()}, tmp_path / "evil.pt")
    with pytest.raises(Exception, match=r"(?i)weights_only|unpickl|global"):
        load_policy(tmp_path / "evil.pt")


def test_predictive_coverage_widens_the_belief_by_the_observation_error() -> None:
    belief = _gaussian_belief()
    observed = np.zeros((3, 6))
    observed[:, 0] = 0.065  # 6.5 σ of the belief; 2.06 σ of belief ⊕ N(0, 0.03²): √(0.01² + 0.03²)
    cover = belief.coverages(observed, (0.0, 0.03, 0.3), components=1, seed=1)
    assert cover[0.0] == {0.5: 0.0, 0.9: 0.0}
    assert cover[0.03] == {0.5: 0.0, 0.9: 1.0}  # between the 50 % and 90 % radii
    assert cover[0.3] == {0.5: 1.0, 0.9: 1.0}
    assert belief.coverage(observed, components=1, seed=1, observation_std=0.03) == cover[0.03]
    with pytest.raises(ValueError, match="observation stds"):
        belief.coverages(observed, (-0.01,))


def test_predictive_coverage_of_coinciding_particles_is_the_observation_error() -> None:
    belief = TrajectoryBelief(np.zeros((32, 2, 6)), radius_of_gyration=1.0)  # no contact yet
    observed = np.zeros((2, 6))
    observed[:, 1] = 0.02  # 2 σ of N(0, 0.01² I) in 3-D: inside the 90 %, outside the 50 % region
    assert belief.coverage(observed, components=1) == {0.5: 0.0, 0.9: 0.0}
    assert belief.coverage(observed, components=1, observation_std=0.01) == {0.5: 0.0, 0.9: 1.0}


def test_density_ranks_place_the_observation_among_the_belief() -> None:
    belief = _gaussian_belief()
    observed = np.zeros((3, 6))
    observed[1, 0] = 0.05  # beyond every particle
    observed[2, 0] = 0.0155  # near the median radius (1.54 σ) of a 3-D Gaussian
    ranks = belief.density_ranks(observed, (0.0,), components=1)[0.0]
    assert ranks.shape == (2,)
    assert ranks[0] == 0.0
    assert 0.35 < ranks[1] < 0.65
    assert belief.coverages(observed, (0.0,), components=1)[0.0] == covered(ranks)


def test_recalibrated_thresholds_cover_held_out_ranks_at_the_nominal_levels() -> None:
    rng = np.random.default_rng(3)
    skewed = rng.uniform(size=(2, 4000)) ** 3  # a predictive too narrow: ranks crowd at 0
    thresholds = recalibrated_thresholds(skewed[0])
    cover = covered(skewed[1], thresholds=thresholds)
    assert covered(skewed[1]) == pytest.approx({0.5: 0.21, 0.9: 0.54}, abs=0.03)
    assert cover == pytest.approx({0.5: 0.5, 0.9: 0.9}, abs=0.03)
    assert thresholds[0.9] < thresholds[0.5] < 0.5
    # split-conformal: the ⌊(1 − a)(n + 1)⌋-th smallest of n ranks, 0 where that is below 1
    assert recalibrated_thresholds(np.array([0.4, 0.1, 0.7]), (0.5, 0.9)) == {0.5: 0.4, 0.9: 0.0}
    with pytest.raises(ValueError, match="ranks"):
        recalibrated_thresholds(np.array([1.2]))
    with pytest.raises(ValueError, match="levels"):
        recalibrated_thresholds(np.array([0.5]), (1.0,))
