"""(μ, ε) identification by Metropolis–Hastings, the residual policy training (Alg. 2) and the
generic residual, on drops simulated with known coefficients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynid.data.trajectory import Trajectory
from dynid.estimators.base import EstimatorError
from dynid.estimators.baselines.generic_residual import (
    GenericTraining,
    load_generic_residual,
    save_generic_residual,
    train_generic_residual,
)
from dynid.estimators.registry import available_estimators, estimator_defaults, resolve_estimator
from dynid.estimators.residual_contact import (
    PolicyTraining,
    median_coefficients,
    train_residual_policy,
    trajectory_errors,
    trajectory_score,
)
from dynid.model.impulse_residual import ResidualContact
from dynid.model.planar_impact import PlanarImpactSimulator
from dynid.objective.impact import FRICTION, RESTITUTION, dice_problem

SIM = PlanarImpactSimulator()
STARTS = torch.tensor(
    [[0.0, 0.10, 0.3, 0.4, -1.5, 4.0], [0.1, 0.14, -0.5, -0.6, -1.0, -6.0]], dtype=torch.float64
)


def _drops(mu: float, eps: float, steps: int = 70) -> torch.Tensor:
    return SIM.rollout(STARTS, steps, mu, eps)


def _trajectories(states: torch.Tensor) -> list[Trajectory]:
    t = np.arange(states.shape[1]) / 250.0
    return [
        Trajectory(t=t, q=s[:, :3].numpy(), dq=s[:, 3:].numpy(), joint_names=["x", "z", "theta"])
        for s in states
    ]


def test_metropolis_is_registered_with_the_paper_settings() -> None:
    assert "metropolis" in available_estimators()
    defaults = estimator_defaults("metropolis")
    assert (defaults["max_iterations"], defaults["burn_in"], defaults["step"]) == (3000, 1000, 0.05)


def test_problem_simulates_through_the_objective() -> None:
    states = _drops(0.3, 0.6)
    problem = dice_problem(_trajectories(states))
    theta = torch.tensor([[0.3, 0.6], [0.1, 0.2]], dtype=torch.float64)
    sim = problem.objective.simulate(theta)
    assert sim.shape == (2, 2, 71, 3)
    torch.testing.assert_close(sim[0], states[..., :3], rtol=0, atol=1e-12)
    assert (sim[1] - states[..., :3]).abs().max() > 1e-3


def test_metropolis_recovers_the_restitution() -> None:
    problem = dice_problem(_trajectories(_drops(0.3, 0.6)), position_std=0.002)
    settings = {"max_iterations": 160, "burn_in": 60, "chains": 2, "seed": 1}
    post = resolve_estimator("metropolis", None, settings).estimator.fit(problem)
    assert post.num_particles == 2 * 100
    mu, eps = median_coefficients(post, [FRICTION, RESTITUTION])
    assert abs(eps - 0.6) < 0.05
    assert 0.0 <= mu <= 1.0
    assert 0.0 < post.meta["acceptance"] < 1.0
    assert post.meta["median"][RESTITUTION] == eps


@pytest.mark.parametrize("wrench", [False, True])
def test_residual_policy_training_beats_the_mismatched_simulator(wrench: bool) -> None:
    observed = _drops(0.3, 0.75)  # the "real" bounces higher than the model's ε = 0.5
    with torch.no_grad():
        base = float(trajectory_errors(_drops(0.3, 0.5), observed, 0.0245).sum())
    policy, history = train_residual_policy(
        SIM, observed, 0.3, 0.5, PolicyTraining(budget=60, samples=1, seed=0, wrench=wrench)
    )
    assert policy.outputs == (3 if wrench else 2)
    assert history == sorted(history, reverse=True)
    assert history[-1] < 0.8 * base


def test_residual_policy_search_moves_the_weights_by_its_mutation_scale() -> None:
    observed = _drops(0.3, 0.75, steps=50)
    start = np.random.default_rng(0).normal(0.0, 0.05, size=84)  # the initial draw of seed 0
    moved = {}
    for sigma in (1e-6, 0.2):
        settings = PolicyTraining(budget=20, samples=1, seed=0, mutation_std=sigma)
        policy, _ = train_residual_policy(SIM, observed, 0.3, 0.5, settings)
        moved[sigma] = float(np.abs(policy.parameter_vector().numpy() - start).max())
    assert moved[1e-6] < 1e-2 < moved[0.2]  # the search starts at its scale and adapts it
    with pytest.raises(EstimatorError, match="mutation_std"):
        train_residual_policy(SIM, observed, 0.3, 0.5, PolicyTraining(mutation_std=0.0))


@pytest.mark.parametrize(("batch", "rolled"), [(None, 12), (5, 5)])
def test_residual_policy_evaluations_roll_every_drop_unless_batched(
    batch: int | None, rolled: int
) -> None:
    shapes: list[tuple[int, ...]] = []

    class Recording(PlanarImpactSimulator):
        def rollout(self, state0: torch.Tensor, *args, **kwargs) -> torch.Tensor:
            shapes.append(tuple(state0.shape))
            return super().rollout(state0, *args, **kwargs)

    observed = _drops(0.3, 0.75, steps=30).repeat(6, 1, 1)  # 12 drops
    settings = PolicyTraining(budget=5, samples=3, seed=0, batch=batch)
    train_residual_policy(Recording(), observed, 0.3, 0.5, settings)
    assert shapes == [(3, rolled, 6)] * 5
    with pytest.raises(EstimatorError, match="batch"):
        train_residual_policy(SIM, observed, 0.3, 0.5, PolicyTraining(batch=0))


def test_residual_policy_trains_by_gradients_through_the_simulator() -> None:
    observed = _drops(0.3, 0.75, steps=50)
    settings = PolicyTraining(budget=8, samples=1, method="adam", learning_rate=0.05, seed=0)
    _, history = train_residual_policy(SIM, observed, 0.3, 0.5, settings)
    assert len(history) == 8
    assert history == sorted(history, reverse=True)
    assert history[-1] < history[0]
    with pytest.raises(EstimatorError, match="method"):
        train_residual_policy(SIM, observed, 0.3, 0.5, PolicyTraining(method="sgd"))


def test_trajectory_scores_of_draws_either_side_of_the_observation() -> None:
    observed = _drops(0.3, 0.75, steps=20)  # [2, 21, 6]
    offset = torch.zeros(6, dtype=torch.float64)
    offset[1] = 0.01  # 1 cm in z at every sample
    pair = torch.stack([observed + offset, observed - offset])  # draws on either side
    error = trajectory_errors(pair, observed.expand_as(pair), 0.0245)  # [2, 2]
    torch.testing.assert_close(error, torch.full_like(error, 0.01 * 21**0.5))
    # eq. 5: the mean over draws of the summed errors, whatever the draws' spread
    score = trajectory_score(pair, observed, 0.0245, "error")
    torch.testing.assert_close(score, error.sum(-1).mean())
    # energy: E|X - y| - ½ E|X - X'|, zero for draws symmetric about the observation ...
    torch.testing.assert_close(
        trajectory_score(pair, observed, 0.0245, "energy"), torch.zeros((), dtype=torch.float64)
    )
    # ... and eq. 5 itself for identical draws
    same = (observed + offset).expand(3, *observed.shape)
    torch.testing.assert_close(
        trajectory_score(same, observed, 0.0245, "energy"),
        trajectory_score(same, observed, 0.0245, "error"),
    )
    # mean: the error of the draws' mean trajectory, zero for the symmetric pair; draws at
    # +2 cm and 0 have their mean at +1 cm
    torch.testing.assert_close(
        trajectory_score(pair, observed, 0.0245, "mean"), torch.zeros((), dtype=torch.float64)
    )
    torch.testing.assert_close(
        trajectory_score(pair + offset, observed, 0.0245, "mean"),
        torch.tensor(2 * 0.01 * 21**0.5, dtype=torch.float64),
    )
    for score in ("energy", "mean"):
        with pytest.raises(EstimatorError, match="2 draws"):
            trajectory_score(pair[:1], observed, 0.0245, score)
    with pytest.raises(EstimatorError, match="score"):
        trajectory_score(pair, observed, 0.0245, "crps")
    with pytest.raises(EstimatorError, match="score"):
        train_residual_policy(SIM, observed, 0.3, 0.5, PolicyTraining(score="energy", samples=1))
    with pytest.raises(EstimatorError, match="score"):
        train_residual_policy(SIM, observed, 0.3, 0.5, PolicyTraining(score="mean", samples=1))


def test_energy_score_training_spreads_the_policy_over_two_outcomes_of_one_start() -> None:
    start = STARTS[:1].expand(2, 6)  # one start, bouncing low and high: no single outcome fits
    observed = torch.cat(
        [SIM.rollout(start[:1], 50, 0.3, 0.3), SIM.rollout(start[:1], 50, 0.3, 0.8)]
    )
    spreads = {}
    for score in ("error", "energy"):
        settings = PolicyTraining(budget=40, samples=4, seed=0, score=score, mutation_std=0.5)
        policy, history = train_residual_policy(SIM, observed, 0.3, 0.5, settings)
        assert history == sorted(history, reverse=True)
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            draws = SIM.rollout(start[:1].expand(16, 6), 50, 0.3, 0.5, ResidualContact(policy, gen))
        spreads[score] = float(draws[:, -1, 1].std())  # spread of the final height (m)
    assert spreads["energy"] > 2 * spreads["error"]


def test_generic_residual_keeps_the_best_validation_weights() -> None:
    observed = _drops(0.3, 0.75, steps=40)
    settings = GenericTraining(epochs=4, learning_rate=1e-2, seed=0)
    net, _ = train_generic_residual(SIM, observed, 0.3, 0.5, settings, validation=observed[:1])
    untrained, _ = train_generic_residual(
        SIM, observed, 0.3, 0.5, GenericTraining(epochs=1, learning_rate=0.0, seed=0)
    )
    with torch.no_grad():
        err = trajectory_errors(
            net.rollout(SIM, observed[:1, 0], 40, 0.3, 0.5), observed[:1], 0.0245
        )
        ref = trajectory_errors(
            untrained.rollout(SIM, observed[:1, 0], 40, 0.3, 0.5), observed[:1], 0.0245
        )
    assert float(err) <= float(ref) + 1e-12


def test_generic_residual_trains_and_round_trips(tmp_path) -> None:
    observed = _drops(0.3, 0.75, steps=40)
    net, history = train_generic_residual(
        SIM, observed, 0.3, 0.5, GenericTraining(epochs=6, learning_rate=1e-2, seed=0)
    )
    assert min(history[1:]) < history[0]
    loaded = load_generic_residual(save_generic_residual(net, tmp_path / "gru.pt"))
    with torch.no_grad():
        a = net.rollout(SIM, observed[:, 0], 10, 0.3, 0.5)
        b = loaded.rollout(SIM, observed[:, 0], 10, 0.3, 0.5)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
