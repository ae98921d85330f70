"""STEADY: the particle filter against a Kalman filter, the observation models, the EM loop on a
tiny system, and the estimator on a pendulum problem read through quantised encoders."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dynid.estimators.errors import EstimatorError
from dynid.estimators.registry import make_estimator
from dynid.estimators.steady import (
    BearingObservation,
    EMSettings,
    EncoderObservation,
    Kinodynamics,
    PoseObservation,
    Sequences,
    SteadyEM,
    particle_filter,
    systematic_resample,
    thin,
    trace_trajectories,
)
from dynid.estimators.steady import em as em_module
from dynid.estimators.steady.baselines import poses_from_bearings, tv_derivative
from dynid.estimators.steady.em import fit_supervised, transition_loss
from dynid.estimators.steady.estimator import louis_information
from dynid.estimators.steady.hybrid import HybridKinodynamics
from dynid.model.kinodynamics import NeuralPlanarKinodynamics

sys.path.insert(0, str(Path(__file__).parent))
from test_lm import _problem

pytestmark = pytest.mark.usefixtures("one_thread")


class RandomWalk(Kinodynamics):
    """``x' = a x + b u + s ε`` (scalar, linear Gaussian); ``a`` and ``log s`` learnable."""

    state_dim = 1

    def __init__(self, a: float = 0.9, b: float = 0.5, s: float = 0.3) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(a, dtype=torch.float64))
        self.b = b
        self.log_s = torch.nn.Parameter(torch.tensor(math.log(s), dtype=torch.float64))

    def sample(self, x, u, dt, generator):
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype)
        return self.a * x + self.b * u + self.log_s.exp() * noise

    def log_prob(self, x, u, x_next, dt):
        s = self.log_s.exp()
        z = (x_next - self.a * x - self.b * u) / s
        return (-0.5 * z * z - torch.log(s) - 0.5 * math.log(2 * math.pi)).sum(-1)


def _kalman(y, u, a, b, s, r, m0, p0):
    """Filtering means, variances and log p(y) of the scalar model (NaN y: missing)."""
    means, variances, log_lik = [], [], 0.0
    m, p = m0, p0
    for t in range(len(y)):
        if t > 0:
            m, p = a * m + b * u[t - 1], a * a * p + s * s
        if not np.isnan(y[t]):
            k = p / (p + r * r)
            log_lik += -0.5 * ((y[t] - m) ** 2 / (p + r * r) + math.log(2 * math.pi * (p + r * r)))
            m, p = m + k * (y[t] - m), (1 - k) * p
        means.append(m)
        variances.append(p)
    return np.array(means), np.array(variances), log_lik


def test_particle_filter_matches_the_kalman_filter() -> None:
    rng = np.random.default_rng(0)
    steps, r = 30, 0.2
    u = rng.normal(size=steps)
    x = [0.0]
    for t in range(steps):
        x.append(0.9 * x[-1] + 0.5 * u[t] + 0.3 * rng.normal())
    y = np.array(x) + r * rng.normal(size=steps + 1)
    y[[5, 6, 17]] = np.nan  # missing readings
    mk, vk, lk = _kalman(y, u, 0.9, 0.5, 0.3, r, 0.0, 0.25)
    obs = EncoderObservation([0], r)
    n = 20_000
    gen = torch.Generator().manual_seed(1)
    x0 = 0.5 * torch.randn((n, 1), generator=gen, dtype=torch.float64)
    result = particle_filter(
        RandomWalk(), obs, x0, torch.tensor(u).unsqueeze(-1), torch.tensor(y).unsqueeze(-1), 0.1,
        generator=gen,
    )  # fmt: skip
    mean = result.mean()[:, 0].numpy()
    var = result.variance()[:, 0].numpy()
    # Monte-Carlo error of a weighted mean with ESS ≥ N/2: about sqrt(2 var / N) ≈ 0.002
    assert np.abs(mean - mk).max() < 6 * math.sqrt(2 * vk.max() / n)
    assert np.abs(var / vk - 1).max() < 0.1
    assert result.log_marginal == pytest.approx(lk, abs=0.1)
    assert float(result.ess.min()) > 0.0


def test_systematic_resampling_is_proportional_and_trace_back_follows_ancestors() -> None:
    weights = torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.float64)
    index = systematic_resample(weights.log(), torch.Generator().manual_seed(0))
    counts = torch.bincount(index, minlength=4).double()
    # systematic resampling: every count within one of N w_i, none of the zero-weight particle
    assert torch.all((counts - 4 * weights).abs() < 1.0)
    assert counts[1] == 0
    gen = torch.Generator().manual_seed(0)
    x0 = torch.arange(4, dtype=torch.float64).reshape(4, 1)
    ident = RandomWalk(a=1.0, b=0.0, s=1e-9)
    obs = EncoderObservation([0], 0.5)
    y = torch.full((4, 1), 2.0, dtype=torch.float64)
    result = particle_filter(ident, obs, x0, torch.zeros(3, 1), y, 0.1, generator=gen)
    paths = trace_trajectories(result, 50, gen)
    # a particle never changes (identity dynamics), so a traced path is constant in time
    assert torch.allclose(paths, paths[:, :1].expand_as(paths), atol=1e-6)


def test_encoder_likelihood_is_the_probability_of_the_quantisation_cell() -> None:
    obs = EncoderObservation([0], std=0.01, resolution=0.05)
    q = torch.tensor([[0.0], [0.02], [0.2]], dtype=torch.float64)
    p = obs.log_prob(q, torch.tensor([0.0], dtype=torch.float64)).exp()
    # the cell [-0.025, 0.025]: Φ(2.5) − Φ(−2.5), Φ(0.5) − Φ(−4.5), and almost nothing
    assert p[0].item() == pytest.approx(0.987581, abs=1e-5)
    assert p[1].item() == pytest.approx(0.691459, abs=1e-5)
    assert p[2].item() < 1e-30
    # draws land on the grid
    y = obs.sample(
        torch.full((100, 1), 0.013, dtype=torch.float64), torch.Generator().manual_seed(0)
    )
    assert torch.allclose(y / 0.05, torch.round(y / 0.05))
    with pytest.raises(EstimatorError, match="std must be finite and > 0"):
        EncoderObservation([0], std=0.0)


def test_bearings_and_poses_score_wrapped_errors_and_skip_dropouts() -> None:
    bearing = BearingObservation([[1.0, 0.0], [0.0, 1.0]], std=0.1)
    x = torch.tensor([[0.0, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(
        bearing.predict(x), torch.tensor([[0.0, math.pi / 2]], dtype=torch.float64)
    )
    near_pi = BearingObservation([[-1.0, 0.0]], std=0.1)
    # y = −π + 0.01 against a prediction of π: a 0.01 rad error, not 2π
    lp = near_pi.log_prob(x, torch.tensor([-math.pi + 0.01], dtype=torch.float64))
    assert lp.item() == pytest.approx(
        -0.5 * 0.01 - math.log(0.1 * math.sqrt(2 * math.pi)), abs=1e-6
    )
    pose = PoseObservation([0, 1], [2], 0.01, 0.02, dropout=0.5)
    y = pose.sample(torch.zeros((400, 3), dtype=torch.float64), torch.Generator().manual_seed(0))
    lost = torch.isnan(y).all(-1)
    assert 0.4 < lost.double().mean() < 0.6
    missing = pose.log_prob(torch.zeros((3, 3), dtype=torch.float64), torch.full((3,), torch.nan))
    assert torch.equal(missing, torch.zeros(3, dtype=torch.float64))


def _em(seed: int) -> tuple[SteadyEM, float]:
    rng = np.random.default_rng(3)
    truth = RandomWalk(a=0.95, b=0.5, s=0.1)
    gen = torch.Generator().manual_seed(4)
    u = torch.tensor(rng.normal(size=(6, 40, 1)))
    x = [torch.zeros(6, 1, dtype=torch.float64)]
    with torch.no_grad():
        for t in range(40):
            x.append(truth.sample(x[-1], u[:, t], 0.1, gen))
    y = torch.stack(x, 1) + 0.05 * torch.randn((6, 41, 1), generator=gen, dtype=torch.float64)

    def initial(k: int, n: int, generator: torch.Generator) -> torch.Tensor:
        return 0.05 * torch.randn((n, 1), generator=generator, dtype=torch.float64)

    train = Sequences(u[:4], y[:4], initial, 0.1)
    valid = Sequences(u[4:], y[4:], initial, 0.1)
    settings = EMSettings(num_particles=300, learning_rate=0.02, anneal_steps=10,
                          validation_every=20, validation_stride=2, validation_particles=300,
                          patience=5)  # fmt: skip
    em = SteadyEM(RandomWalk(a=0.5, s=1.0), EncoderObservation([0], 0.05), train, valid,
                  settings, seed=seed)  # fmt: skip
    return em, em.validate()


def test_a_diverged_model_ends_the_run_at_the_best_validated_one() -> None:
    em, _ = _em(seed=0)
    with torch.no_grad():
        em.model.log_s.fill_(math.nan)  # every particle of the next E step has no likelihood
    with pytest.raises(EstimatorError, match=r"^steady: .* before its first validation: the E"):
        em.step()
    em, _ = _em(seed=0)
    em.run(40)  # two validations
    best = em.best_state["a"].clone()
    with torch.no_grad():
        em.model.a.fill_(math.nan)
    assert math.isnan(em.step())
    assert em.converged
    assert "E step on training sequence" in em.diverged
    assert torch.equal(em.model.a.detach(), best)
    stopped_at = em.iteration
    em.run(120)  # a stopped run stays stopped, no validation of the diverged model
    assert em.iteration == stopped_at
    assert torch.equal(em.model.a.detach(), best)


def test_a_failed_validation_ends_the_run_at_the_best_validated_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    em, _ = _em(seed=0)
    with torch.no_grad():
        em.model.log_s.fill_(math.nan)  # the validation filter finds no finite likelihood
    with pytest.raises(EstimatorError, match=r"^steady: .* before its first validation: the val"):
        em.validate_and_keep()
    em, _ = _em(seed=0)
    validate, calls = em.validate, [0]

    def poisoned() -> float:
        calls[0] += 1
        if calls[0] == 3:
            with torch.no_grad():
                em.model.log_s.fill_(math.nan)
        return validate()

    monkeypatch.setattr(em, "validate", poisoned)
    assert em.run(120) is em.model  # the third validation, at iteration 60, fails
    assert em.converged
    assert em.diverged.startswith("iteration 60: the validation failed: particle filter")
    assert [h["iteration"] for h in em.history] == [20.0, 40.0]
    for name, value in em.model.state_dict().items():
        assert torch.isfinite(value).all(), name
        assert torch.equal(value, em.best_state[name]), name


def test_em_raises_the_validation_likelihood_and_seeded_runs_reproduce() -> None:
    em, before = _em(seed=0)
    em.run(120)
    after = em.best_log_likelihood
    assert after > before + 0.5
    assert em.model.a.item() == pytest.approx(0.95, abs=0.1)
    again, _ = _em(seed=0)
    again.run(120)
    assert again.model.a.item() == em.model.a.item()
    assert [h["valid_log_likelihood"] for h in again.history] == [
        h["valid_log_likelihood"] for h in em.history
    ]


def test_an_m_step_takes_m_steps_adam_steps_on_one_e_steps_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(EstimatorError, match="steady: m_steps must be ≥ 1, got 0"):
        EMSettings(m_steps=0)
    em, _ = _em(seed=0)
    em.settings.m_steps = 4
    calls: list[tuple[torch.Tensor, float]] = []

    def recorded(model, paths, controls, dt):
        loss = transition_loss(model, paths, controls, dt)
        calls.append((paths, loss.item()))
        return loss

    monkeypatch.setattr(em_module, "transition_loss", recorded)
    loss = em.step()
    assert len(calls) == 4
    assert all(paths is calls[0][0] for paths, _ in calls)  # one E step's traces
    assert [s["step"].item() for s in em.optimizer.state.values()] == [4.0, 4.0]
    assert loss == calls[0][1]  # the loss before the first Adam step
    assert calls[-1][1] < calls[0][1]


def test_a_run_out_of_patience_goes_on_from_its_best_model_at_a_lower_learning_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(EstimatorError, match="steady: lr_drops must be ≥ 0 and lr_drop_factor"):
        EMSettings(lr_drop_factor=1.0)
    em, _ = _em(seed=0)
    em.settings.patience, em.settings.lr_drops = 1, 1
    scores = iter([1.0, 0.5, 0.7])  # the second validation runs out of patience, the third too
    monkeypatch.setattr(em, "validate", lambda: next(scores))
    drop, restarts = em.drop_learning_rate, []

    def recorded(reason: str) -> None:
        drop(reason)
        restarts.append({k: v.clone() for k, v in em.model.state_dict().items()})

    monkeypatch.setattr(em, "drop_learning_rate", recorded)
    em.run(1000)
    assert (em.iteration, em.drops, em.converged, em.diverged) == (60, 1, True, "")
    assert em.drop_reasons == ["iteration 40: out of patience"]
    assert len(restarts) == 1  # from the model of iteration 20
    assert all(torch.equal(restarts[0][k], v) for k, v in em.best_state.items())
    assert em.best_iteration == 20
    assert [h["lr_divisor"] for h in em.history] == [1.0, 1.0, 10.0]
    assert [g["lr"] for g in em.optimizer.param_groups] == [pytest.approx(0.002)]
    # Adam's moments restarted with the drop: 20 steps since iteration 40
    assert [st["step"].item() for st in em.optimizer.state.values()] == [20.0, 20.0]


def test_a_diverged_run_with_a_drop_left_goes_on_from_its_best_model() -> None:
    em, _ = _em(seed=0)
    em.settings.lr_drops = 1
    em.run(40)  # two validations
    best = {k: v.clone() for k, v in em.best_state.items()}
    with torch.no_grad():
        em.model.a.fill_(math.nan)  # every particle of the next E step has no likelihood
    assert math.isnan(em.step())
    assert (em.drops, em.converged, em.diverged) == (1, False, "")
    assert em.drop_reasons[0].startswith("iteration 40: the E step on training sequence")
    assert all(torch.equal(em.model.state_dict()[k], v) for k, v in best.items())
    assert [g["lr"] for g in em.optimizer.param_groups] == [pytest.approx(0.002)]
    assert math.isfinite(em.step())  # the run goes on
    with torch.no_grad():
        em.model.a.fill_(math.nan)  # no drop left: the run ends
    assert math.isnan(em.step())
    assert em.converged
    assert em.diverged.startswith("iteration 41: the E step")


def test_a_weight_average_is_validated_and_kept_while_training_goes_on_from_the_current_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(EstimatorError, match=r"steady: weight_average must be in \[0, 1\), got 1"):
        EMSettings(weight_average=1.0)
    em, _ = _em(seed=0)
    assert em.average == {}  # the paper: no average
    em.settings.weight_average = 0.9
    em.start_average()
    expected = {k: v.clone() for k, v in em.model.state_dict().items()}
    validate, scored = em.validate, []

    def recorded() -> float:
        scored.append({k: v.clone() for k, v in em.model.state_dict().items()})
        return validate()

    monkeypatch.setattr(em, "validate", recorded)
    for _ in range(20):  # the 20th iteration validates
        em.step()
        for name, value in em.model.state_dict().items():
            expected[name] = expected[name] + 0.1 * (value - expected[name])
    assert len(scored) == 1
    for name, value in expected.items():
        torch.testing.assert_close(scored[0][name], value)
        torch.testing.assert_close(em.best_state[name], value)
    assert not torch.allclose(em.model.a, expected["a"])  # training goes on from its own weights
    em.drop_learning_rate("test")  # back at the best (averaged) model, the average restarted
    assert all(torch.equal(em.average[k], v) for k, v in em.best_state.items())
    assert all(torch.equal(em.model.state_dict()[k], v) for k, v in em.best_state.items())


def test_decoupled_weight_decay_shrinks_the_weight_matrices_after_the_adam_step() -> None:
    with pytest.raises(EstimatorError, match=r"weight_decay in \[0, 1\), got 0.001, 1.0"):
        EMSettings(learning_rate=1e-3, weight_decay=1.0)
    base = _wide_network_em()
    runs = {}
    for decoupled in (False, True):
        settings = EMSettings(num_particles=400, validation_particles=400,
                              weight_decay=0.1 if decoupled else 0.0,
                              decoupled_decay=decoupled)  # fmt: skip
        em = SteadyEM(copy.deepcopy(base.model), base.observation, base.train, base.valid,
                      settings, seed=3)  # fmt: skip
        em.step()
        runs[decoupled] = em
    assert [g["weight_decay"] for g in runs[True].optimizer.param_groups] == [0.0]
    plain, decayed = runs[False].model.state_dict(), runs[True].model.state_dict()
    names = [n for n, v in decayed.items() if n.endswith("weight")]
    assert len(names) == len(runs[True].decayed) == 5  # skip, hidden, residual, out, sigma
    for name, value in decayed.items():
        factor = 0.9 if name in names else 1.0  # biases and buffers are not decayed
        torch.testing.assert_close(value, factor * plain[name])
    assert not torch.equal(decayed["network.hidden.weight"], plain["network.hidden.weight"])


def test_supervised_fit_learns_the_transitions_and_decays_its_weight_matrices_decoupled() -> None:
    torch.manual_seed(0)
    truth = NeuralPlanarKinodynamics(2, initial_std=0.1)
    with torch.no_grad():
        truth.network.skip.bias.copy_(torch.tensor([0.5, -0.3, 0.2]))  # a constant acceleration
    gen = torch.Generator().manual_seed(2)
    u = torch.zeros(12, 20, 2)
    x = [torch.zeros(12, 6)]
    with torch.no_grad():
        for t in range(20):
            x.append(truth.sample(x[-1], u[:, t], 0.1, gen))
    paths = torch.stack(x, 1)
    data = (paths[:8], u[:8], paths[8:], u[8:], 0.1)
    start = NeuralPlanarKinodynamics(2, initial_std=0.4)
    fits = {}
    for decoupled in (False, True):
        model = copy.deepcopy(start)
        fits[decoupled] = fit_supervised(model, *data, learning_rate=1e-2, weight_decay=0.1,
                                         decoupled_decay=decoupled, max_iterations=1,
                                         validation_every=1)  # fmt: skip
    plain = copy.deepcopy(start)
    fit_supervised(plain, *data, learning_rate=1e-2, weight_decay=0.0, max_iterations=1,
                   validation_every=1)  # fmt: skip
    decayed = fits[True][0].state_dict()
    for name, value in plain.state_dict().items():  # the same Adam step, then the shrinkage
        factor = 0.9 if name.endswith("weight") else 1.0
        torch.testing.assert_close(decayed[name], factor * value)
    coupled = fits[False][0].state_dict()  # Adam's L2 term changes the step itself
    assert not torch.allclose(coupled["network.hidden.weight"],
                              0.9 * plain.state_dict()["network.hidden.weight"])  # fmt: skip
    model, history = fit_supervised(copy.deepcopy(start), *data, learning_rate=1e-2,
                                    max_iterations=300, validation_every=50)  # fmt: skip
    assert history[-1]["valid_loss"] < history[0]["valid_loss"]
    mean, _ = model.acceleration(torch.zeros(1), torch.zeros(1, 3), torch.zeros(1, 2))
    torch.testing.assert_close(mean[0], torch.tensor([0.5, -0.3, 0.2]), atol=0.1, rtol=0.0)


def _wide_network_em() -> SteadyEM:
    """EM over a zero-mean planar network with std 0.4 on data drawn with std 0.1 whose
    velocities are observed (5 mm/s, 5 mrad/s) at every step."""
    torch.manual_seed(0)
    truth = NeuralPlanarKinodynamics(2, initial_std=0.1)
    gen = torch.Generator().manual_seed(5)
    pose = PoseObservation([3, 4], [5], 0.005, 0.005)
    x = [torch.zeros(8, 6)]
    u = torch.zeros(8, 30, 2)
    with torch.no_grad():
        for t in range(30):
            x.append(truth.sample(x[-1], u[:, t], 0.1, gen))
    y = torch.stack([pose.sample(s, gen) for s in x], 1).float()

    def initial(k: int, n: int, generator: torch.Generator) -> torch.Tensor:
        return torch.zeros(n, 6)

    train, valid = Sequences(u[:4], y[:4], initial, 0.1), Sequences(u[4:], y[4:], initial, 0.1)
    settings = EMSettings(num_particles=400, validation_stride=1, validation_particles=400,
                          std_scales=(0.25, 0.5, 2.0))  # fmt: skip
    return SteadyEM(NeuralPlanarKinodynamics(2, initial_std=0.4), pose, train, valid, settings)


def test_std_calibration_scales_a_too_wide_std_to_the_validation_optimum() -> None:
    with pytest.raises(EstimatorError, match=r"steady: std_scales must be finite and > 0"):
        EMSettings(std_scales=(0.5, 0.0))
    em = _wide_network_em()
    em.validate_and_keep()
    before = em.best_log_likelihood
    assert em.calibrate_std() == [0.25, 0.25, 0.25]  # 0.4 → 0.1, the std of the data
    assert em.calibration["valid_log_likelihood_before"] == before
    assert em.best_log_likelihood == em.calibration["valid_log_likelihood"] > before + 1.0
    assert em.validate() == em.best_log_likelihood
    assert torch.equal(em.best_state["network.std_scale"], torch.full((3,), 0.25))
    _, std = em.model.acceleration(torch.zeros(2), torch.zeros(2, 3), torch.zeros(2, 2))
    assert torch.allclose(std, torch.full((2, 3), 0.1))
    reloaded = NeuralPlanarKinodynamics(2)
    reloaded.load_state_dict(em.model.state_dict())  # the scale travels with the state dict
    assert torch.equal(reloaded.network.std_scale, em.model.network.std_scale)


def test_a_run_with_std_scales_ends_calibrated_once_and_models_without_a_network_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    em = _wide_network_em()
    em.settings.validation_every = 2
    calls = []
    calibrate = em.calibrate_std
    monkeypatch.setattr(em, "calibrate_std", lambda: calls.append(calibrate()))
    em.run(2)
    em.run(2)  # a finished run is not calibrated again
    assert len(calls) == 1
    assert em.calibration["std_scale"] == calls[0]
    plain, _ = _em(seed=0)
    with pytest.raises(EstimatorError, match="std calibration needs a model with a residual"):
        plain.calibrate_std()


def test_network_starts_at_zero_acceleration_with_large_std() -> None:
    model = NeuralPlanarKinodynamics(2, initial_std=1.0)
    mean, std = model.acceleration(torch.zeros(5), torch.randn(5, 3), torch.randn(5, 2))
    assert torch.equal(mean, torch.zeros(5, 3))
    assert torch.allclose(std, torch.ones(5, 3))


def _ramp(dt: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Samples of a position whose speed jumps from 1 to -0.5 at 5 s, the speed, the times."""
    t = np.arange(101) * dt
    slope = np.where(t < 5.0, 1.0, -0.5)
    return np.concatenate([[0.0], np.cumsum(slope[:-1] * dt)]), slope, t


def test_tv_derivative_recovers_a_piecewise_constant_slope() -> None:
    f, slope, t = _ramp()
    noisy = f + 0.02 * np.random.default_rng(0).normal(size=f.size)
    u, fit = tv_derivative(noisy, 0.1, alpha=0.05)
    plain = np.gradient(noisy, 0.1)
    inner = (np.abs(t - 5.0) > 0.5) & (t > 0.5) & (t < 9.5)
    assert np.sqrt(np.mean((u - slope)[inner] ** 2)) < 0.5 * np.sqrt(
        np.mean((plain - slope)[inner] ** 2)
    )
    assert np.sqrt(np.mean((fit - f) ** 2)) < 0.02  # the integral smooths the samples


def test_tv_derivative_chooses_its_weight_and_ignores_outliers_and_gaps() -> None:
    """Noise growing along the record (std 0.02 → 1), a first sample off by 1 (the offset is
    free), three samples in a wrong minimum and a gap: the derivative by the discrepancy
    principle stays near the true slope where a fixed small weight follows the noise."""
    f, slope, t = _ramp()
    std = np.linspace(0.02, 1.0, f.size)
    noisy = f + std * np.random.default_rng(1).normal(size=f.size)
    noisy[0] += 1.0
    noisy[[30, 60, 61]] += 8.0
    noisy[70:75] = np.nan
    u, fit = tv_derivative(noisy, 0.1, std=std)
    inner = (np.abs(t - 5.0) > 1.0) & (t > 0.5) & (t < 9.5)
    rmse = np.sqrt(np.mean((u - slope)[inner] ** 2))
    assert rmse < 0.2, rmse  # unweighted: 0.30, without the Huber loss: 1.26
    assert np.isfinite(fit).all()
    fixed, _ = tv_derivative(noisy, 0.1, alpha=1e-3, std=std)
    assert np.sqrt(np.mean((fixed - slope)[inner] ** 2)) > 3 * rmse
    with pytest.raises(EstimatorError, match="std must be finite"):
        tv_derivative(noisy, 0.1, std=np.zeros(f.size))


def test_poses_from_bearings_triangulate() -> None:
    landmarks = np.array([[12.0, -8.0], [-6.0, -4.0], [-4.0, 10.0], [6.0, 7.0]])
    x = np.array([[1.0, 2.0, 0.3], [-3.0, 4.0, -2.0], [25.0, 20.0, 1.0]])
    dx, dy = landmarks[:, 0] - x[:, :1], landmarks[:, 1] - x[:, 1:2]
    y = np.angle(np.exp(1j * (np.arctan2(dy, dx) - x[:, 2:3])))
    y[1, 0] = np.nan  # three bearings still fix the pose
    poses, std = poses_from_bearings(y, landmarks, 0.1)
    assert np.allclose(poses, x, atol=1e-5)
    # far from the landmarks the bearings are nearly parallel: the position is known worse
    assert (std[2, :2] > 3 * std[0, :2]).all()
    assert (std > 0).all()
    assert thin(torch.ones(1, 5, 1), 2)[0, :, 0].isnan().tolist() == [
        False,
        True,
        False,
        True,
        False,
    ]


def test_steady_estimator_moves_the_payload_mass_towards_the_truth_and_saves_its_residual(
    tmp_path,
) -> None:
    torch.manual_seed(0)
    problem, _ = _problem(names=("link1/mass",), steps=40, noise=0.002)
    est = make_estimator("steady", num_particles=64, max_iterations=12, anneal_steps=4,
                         validation_every=6, encoder_resolution=0.005,
                         parameter_learning_rate=0.05, seed=0)  # fmt: skip
    post = est.fit(problem)
    # nominal 1.0 kg, truth 1.2 kg
    assert post.estimator == "steady"
    assert post.names == ["link1/mass"]
    assert 1.05 < post.mean()[0] < 1.35
    # the spread by Louis' identity: the traced paths disagree, so some information is missing
    # and the std is wider than the complete-data one, and the truth is within it
    missing = post.meta["missing_information_fraction"][0]
    assert 0.0 < missing < 0.5
    assert post.meta["louis_floored_directions"] == 0
    assert post.meta["lr_drops"] == []  # the paper's schedule: no learning-rate drop
    assert post.meta["std_calibration"] == {}  # nor a std calibration
    assert make_estimator("steady", lr_drops=1).settings.lr_drops == 1
    assert make_estimator("steady", std_scales=[0.5, 2]).settings.std_scales == (0.5, 2.0)
    assert np.isfinite(post.covariance).all()
    assert post.std()[0] > math.sqrt(1.0 - missing) * post.std()[0] > 0
    assert abs(post.mean()[0] - 1.2) < 3 * post.std()[0]
    with pytest.raises(EstimatorError, match="num_trajectories ≥ 2"):
        make_estimator("steady", num_trajectories=1)
    path = est.save_residual(tmp_path / "residual.pt")
    other = make_estimator("steady", num_particles=8, max_iterations=1, seed=1)
    other.init(problem)
    other.load_residual(path)
    for a, b in zip(est.model.network.state_dict().values(),
                    other.model.network.state_dict().values(), strict=True):  # fmt: skip
        assert torch.equal(a, b)
    with pytest.raises(EstimatorError, match="residual state"):
        other.load_residual(tmp_path / "missing.pt")
    # a residual of other features is refused by name, even where the widths agree
    position = make_estimator("steady", num_particles=8, max_iterations=1, seed=1,
                              residual_inputs=["position"])  # fmt: skip
    position.init(problem)
    velocity = make_estimator("steady", num_particles=8, max_iterations=1, seed=1,
                              residual_inputs=["velocity"])  # fmt: skip
    velocity.init(problem)
    velocity_path = velocity.save_residual(tmp_path / "velocity.pt")
    with pytest.raises(EstimatorError, match=r"trained on the features \['velocity'\]"):
        position.load_residual(velocity_path)


def test_steady_estimator_with_decoupled_decay_leaves_its_physical_parameters_undecayed() -> None:
    torch.manual_seed(0)
    problem, _ = _problem(names=("link1/mass",), steps=20, noise=0.002)
    est = make_estimator("steady", num_particles=16, max_iterations=1, weight_decay=0.01,
                         seed=0)  # fmt: skip
    est.init(problem)
    em = est._em
    assert [g["weight_decay"] for g in em.optimizer.param_groups] == [0.0, 0.0]
    network = [m.weight for m in est.model.network.modules() if isinstance(m, torch.nn.Linear)]
    assert len(em.decayed) == len(network) == 5
    assert all(any(w is d for d in em.decayed) for w in network)
    assert not any(est.model.z is d for d in em.decayed)
    coupled = make_estimator("steady", num_particles=16, max_iterations=1, weight_decay=0.01,
                             decoupled_decay=False)  # fmt: skip
    coupled.init(problem)
    assert [g["weight_decay"] for g in coupled._em.optimizer.param_groups] == [0.01, 0.01]
    assert coupled._em.decayed == []


def test_steady_estimator_ends_at_its_best_validated_model_calibrated() -> None:
    torch.manual_seed(0)
    problem, _ = _problem(names=("link1/mass",), steps=20, noise=0.002)
    est = make_estimator("steady", num_particles=32, max_iterations=5, validation_every=3,
                         anneal_steps=2, std_scales=[0.5, 2.0], seed=0)  # fmt: skip
    post = est.fit(problem)
    em = est._em
    assert [h["iteration"] for h in em.history] == [3.0, 5.0]  # the last iteration validated
    calibration = post.meta["std_calibration"]
    assert len(calibration["std_scale"]) == problem.robot.nv
    assert calibration["valid_log_likelihood"] >= calibration["valid_log_likelihood_before"]
    assert calibration["std_scale"] == est.model.network.std_scale.tolist()
    for name, value in est.model.state_dict().items():
        assert torch.equal(value, em.best_state[name]), name
    assert est.step(3).iteration == 5  # the budget is spent: nothing moves
    assert [h["iteration"] for h in em.history] == [3.0, 5.0]


def test_a_velocity_residual_sees_only_the_velocities_and_bad_inputs_are_refused() -> None:
    torch.manual_seed(0)
    problem, _ = _problem(names=("link1/mass",), steps=20, noise=0.002)
    nv = problem.robot.nv
    theta = problem.spec.nominal_theta(problem.robot)
    full = HybridKinodynamics(problem, theta)
    velocity = HybridKinodynamics(problem, theta, inputs=["velocity"])
    assert velocity.network.hidden.in_features == nv
    assert full.network.hidden.in_features == 2 * nv + problem.objective.control_width
    mean = torch.arange(2 * nv + problem.objective.control_width, dtype=torch.float64)
    velocity.set_normalisation(mean, mean + 1)
    assert torch.equal(velocity.network.feature_mean, mean[nv : 2 * nv])
    for model in (full, velocity):
        for p in model.network.parameters():
            torch.nn.init.normal_(p, std=0.5, generator=torch.Generator().manual_seed(1))
    x = torch.randn(6, 2 * nv, dtype=torch.float64)
    u = torch.randn(6, problem.objective.control_width, dtype=torch.float64)
    moved_x = x.clone()
    moved_x[:, :nv] += 0.7  # another configuration, the same velocities
    moved_u = u + 0.5
    _, mean_v, std_v = velocity._parts(x, u, problem.dt)
    _, mean_v2, std_v2 = velocity._parts(moved_x, moved_u, problem.dt)
    assert torch.equal(mean_v, mean_v2)
    assert torch.equal(std_v, std_v2)
    _, mean_f, _ = full._parts(x, u, problem.dt)
    _, mean_f2, _ = full._parts(moved_x, moved_u, problem.dt)
    assert not torch.allclose(mean_f, mean_f2)
    faster = x.clone()
    faster[:, nv:] += 0.3
    assert not torch.allclose(velocity._parts(faster, u, problem.dt)[1], mean_v)
    assert "feature_columns" not in velocity.state_dict()  # EM copies and averages state dicts
    assert make_estimator("steady", residual_inputs=["velocity", "position"]).network["inputs"] == (
        "position",
        "velocity",
    )
    for bad in ([], ["velocity", "velocity"], ["torque"]):
        with pytest.raises(EstimatorError, match="residual_inputs"):
            make_estimator("steady", residual_inputs=bad)


def test_louis_information_subtracts_each_sequence_score_covariance_and_floors() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 2))
    complete = a @ a.T + 50.0 * np.eye(2)
    scores = rng.normal(size=(3, 6, 2))
    got = louis_information(torch.tensor(scores), torch.tensor(complete))
    expected = complete - sum(np.cov(scores[k], rowvar=False) for k in range(3))
    assert np.allclose(got.observed.numpy(), expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(got.covariance.numpy(), np.linalg.inv(expected), rtol=1e-10)
    fraction = 1.0 - np.diag(np.linalg.inv(complete)) / np.diag(np.linalg.inv(expected))
    assert np.allclose(got.missing_fraction.numpy(), fraction, rtol=1e-10)
    assert got.floored == 0
    # the first parameter's scores spread more than its information allows (I_c − C < 0 there),
    # the second's not at all: the first keeps the floor's share, the second all of I_c
    scores = np.zeros((2, 4, 2))
    scores[:, :, 0] = [[-3.0, 3.0, 0.0, 1.0], [2.0, -2.0, 5.0, 0.0]]
    floored = louis_information(
        torch.tensor(scores), torch.diag(torch.tensor([4.0, 9.0], dtype=torch.float64))
    )
    assert np.allclose(floored.observed.numpy(), np.diag([4e-3, 9.0]), rtol=1e-12)
    assert np.allclose(floored.missing_fraction.numpy(), [1 - 1e-3, 0.0], atol=1e-12)
    assert floored.floored == 1
    with pytest.raises(EstimatorError, match="M ≥ 2"):
        louis_information(torch.zeros(2, 1, 2), torch.eye(2))


def test_louis_information_recovers_the_observed_information_of_a_latent_gaussian() -> None:
    """Latent ``x ~ N(θ, 1)`` per component, read as ``y = x + N(0, s²)``: the complete-data
    information of ``n`` readings is ``n``, the observed one ``n / (1 + s²)``. Exact smoothing
    draws of ``K`` sequences give it back within their Monte-Carlo error; pooling the draws of
    all sequences (their posterior means differ) or the biased covariance would not."""
    rng = np.random.default_rng(1)
    k, m, n, s = 400, 5, 3, np.array([1.0, 0.5])
    theta = np.zeros(2)
    y = theta + rng.normal(size=(k, 1, n, 2)) * np.sqrt(1 + s**2)
    shrink = 1.0 / (1.0 + s**2)  # x | y ~ N(θ + shrink (y − θ), s² shrink)
    x = theta + shrink * (y - theta) + np.sqrt(s**2 * shrink) * rng.normal(size=(k, m, n, 2))
    scores = torch.tensor((x - theta).sum(2))  # [K, M, 2]
    got = louis_information(scores, torch.tensor(np.diag([k * n, k * n]).astype(float)))
    truth = np.diag(k * n * shrink)
    # the summed covariance has K (M − 1) degrees of freedom: relative error ≈ 0.035 here
    assert np.allclose(got.observed.numpy(), truth, rtol=0.1, atol=0.1 * k * n * shrink.min())
    assert np.allclose(got.missing_fraction.numpy(), 1.0 - shrink, atol=0.05)
