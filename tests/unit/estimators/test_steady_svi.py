"""The SVI baseline of STEADY: the structured inference network on short hovercraft runs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

pytest.importorskip("pyro")
from pyro import poutine

from dynid.estimators.errors import EstimatorError
from dynid.estimators.steady import BearingObservation, NeuralPlanarKinodynamics, Sequences
from dynid.estimators.steady.svi import StructuredSVI, SVISettings
from dynid.sim import hovercraft as hov

pytestmark = pytest.mark.usefixtures("one_thread")


def _sequences(data: hov.HovercraftData) -> Sequences:
    x0 = torch.as_tensor(data.states[:, 0], dtype=torch.float32)

    def initial(k: int, n: int, generator: torch.Generator) -> torch.Tensor:
        return hov.initial_distribution(x0[k], n, generator)

    return Sequences(
        torch.as_tensor(data.controls, dtype=torch.float32),
        torch.as_tensor(data.observations, dtype=torch.float32),
        initial,
        data.dt,
    )


def _svi(seed: int, **settings: float) -> StructuredSVI:
    train, valid = hov.simulate(5, 6, duration_s=2.0).split((4, 2))
    torch.manual_seed(0)
    model = NeuralPlanarKinodynamics(2)
    model.fit_normalisation(
        torch.as_tensor(train.states, dtype=torch.float32),
        torch.as_tensor(train.controls, dtype=torch.float32),
    )
    options = {"batch": 4, "kl_start": 1.0, "validation_every": 10, "validation_particles": 200,
               "learning_rate": 1e-2, "hidden": 16, "prior_draws": 200} | settings  # fmt: skip
    obs = BearingObservation(hov.LANDMARKS, hov.BEARING_STD)
    return StructuredSVI(
        model, obs, _sequences(train), _sequences(valid), SVISettings(**options), seed=seed
    )


def test_svi_lowers_the_loss_and_seeded_runs_reproduce() -> None:
    svi = _svi(seed=3)
    losses = [svi.step() for _ in range(40)]
    # the negative ELBO per sequence and step falls by nats (about 10 at first)
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 5
    assert len(svi.history) == 4
    assert svi.best_iteration > 0
    again = _svi(seed=3)
    assert [again.step() for _ in range(40)] == losses
    for name, value in svi.model.state_dict().items():
        assert torch.equal(value, again.model.state_dict()[name])
    # torch's global generator is left as it was
    state = torch.get_rng_state()
    svi = StructuredSVI(svi.model, svi.observation, svi.train, svi.valid, seed=4)
    svi.step()
    assert torch.equal(torch.get_rng_state(), state)


def test_guide_samples_states_and_skips_missing_observations() -> None:
    svi = _svi(seed=0)
    states = svi.sample_states(torch.tensor([2, 0]))
    assert states.shape == (2, 21, 6)
    assert torch.isfinite(states).all()
    # the backward summary h_t depends on y_{t:T} only; a missing reading keeps it finite
    y = svi.train.observations[:2].clone()
    u = svi.train.controls[:2]
    h = svi.network.encode(y, u)
    y[:, 7] = torch.nan
    missing = svi.network.encode(y, u)
    assert torch.isfinite(missing).all()
    assert torch.equal(missing[:, 8:], h[:, 8:])
    assert not torch.allclose(missing[:, :8], h[:, :8])
    # in the model, missing readings contribute nothing to the likelihood
    args = (u, torch.full_like(y, torch.nan), svi.prior_loc[:2], svi.prior_scale[:2])
    trace = poutine.trace(svi.generative).get_trace(*args)
    assert torch.equal(trace.nodes["y"]["fn"].log_factor, torch.zeros(2))
    assert trace.nodes["a_20"]["value"].shape == (2, 3)


def test_svi_needs_a_planar_model() -> None:
    svi = _svi(seed=0)
    with pytest.raises(EstimatorError, match="PlanarKinodynamics"):
        StructuredSVI(torch.nn.Linear(1, 1), svi.observation, svi.train, svi.valid)  # type: ignore[arg-type]


def _poison_step(svi: StructuredSVI, call: int) -> Callable[..., Any]:
    """``svi.svi.step`` whose ``call``-th call ends as a NaN loss does: the step applied and a
    model parameter left NaN, the loss NaN."""
    step, calls = svi.svi.step, [0]

    def poisoned(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        loss = step(*args, **kwargs)
        if calls[0] != call:
            return loss
        with torch.no_grad():
            next(svi.model.parameters()).fill_(math.nan)
        return math.nan

    return poisoned


def _assert_at_best(svi: StructuredSVI) -> None:
    for name, value in svi.model.state_dict().items():
        assert torch.isfinite(value).all(), name
        assert torch.equal(value, svi.best_state[name]), name


def test_a_nan_loss_ends_the_run_at_the_best_validated_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svi = _svi(seed=1)
    monkeypatch.setattr(svi.svi, "step", _poison_step(svi, call=1))
    with pytest.raises(EstimatorError, match=r"^svi: .* before its first validation: the ELBO"):
        svi.step()
    svi = _svi(seed=1)
    monkeypatch.setattr(svi.svi, "step", _poison_step(svi, call=16))
    assert svi.run(40) is svi.model  # no raise: the next validation would have no particle
    assert svi.converged
    assert svi.iteration == 15
    assert svi.diverged.startswith("iteration 15: the ELBO loss on training sequences")
    assert [h["iteration"] for h in svi.history] == [10.0]
    assert svi.best_iteration == 10
    _assert_at_best(svi)


def test_a_failed_validation_during_the_annealing_ends_the_run_at_the_best_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svi = _svi(seed=2, kl_start=0.01, anneal_steps=100)
    validate, calls = svi.validate, [0]

    def poisoned() -> float:
        calls[0] += 1
        if calls[0] == 2:  # a model with no finite likelihood: the filter raises
            with torch.no_grad():
                next(svi.model.parameters()).fill_(math.nan)
        return validate()

    monkeypatch.setattr(svi, "validate", poisoned)
    svi.run(60)
    assert svi.converged
    assert svi.iteration == 20
    assert svi.diverged.startswith("iteration 20: the validation failed: particle filter")
    assert len(svi.history) == 1
    _assert_at_best(svi)
