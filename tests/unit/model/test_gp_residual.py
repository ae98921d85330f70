"""The GP residual of III-B: the optimal impulse, the contact events, the Gaussian process and
its saved form, and its use as the residual of the simulator's contact model."""

from __future__ import annotations

import math

import pytest
import torch

from dynid.estimators.baselines.gp_residual import contact_events, optimal_impulse
from dynid.model.gp_residual import (
    GPResidual,
    GPSettings,
    fit_gp_residual,
    load_gp_residual,
    save_gp_residual,
)
from dynid.model.impulse_residual import ResidualContact
from dynid.model.planar_impact import GRAVITY, PlanarImpactSimulator, contact_quantities

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

SIM = PlanarImpactSimulator()


def _inverse_inertias(n: int, seed: int) -> torch.Tensor:
    """``[n, 2, 2]`` ``J M⁻¹ Jᵀ`` of the dice at random corners."""
    g = torch.Generator().manual_seed(seed)
    theta = (torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 2 * math.pi
    corner = SIM.body.corners(theta)[:, 0]
    _, A = contact_quantities(SIM.body, torch.zeros(n, 6, dtype=torch.float64), corner)
    return A[:, :2, :2]


def test_optimal_impulse_recovers_a_feasible_impulse_and_stays_in_the_cone() -> None:
    g = torch.Generator().manual_seed(0)
    n, mu = 64, 0.3
    A = _inverse_inertias(n, seed=1)
    free = torch.tensor([0.0, -2.0 * GRAVITY * SIM.dt], dtype=torch.float64).expand(n, 2)
    p_n = 0.05 * torch.rand(n, generator=g, dtype=torch.float64)
    p_t = mu * p_n * (2.0 * torch.rand(n, generator=g, dtype=torch.float64) - 1.0)
    p_t[:8] = mu * p_n[:8]  # on the cone's edge
    p_true = torch.stack([p_t, p_n], -1)
    dv = free + (A @ p_true[..., None])[..., 0]
    torch.testing.assert_close(optimal_impulse(dv, free, A, mu), p_true, rtol=0, atol=1e-10)

    # Velocity changes no impulse in the cone explains: pulling, or sliding beyond the cone.
    bad = torch.stack([0.1 * torch.randn(n, generator=g, dtype=torch.float64), -p_n], -1)
    bad[: n // 2, 0] = 3.0 * p_n[: n // 2]
    bad[: n // 2, 1] = p_n[: n // 2]
    dv = free + (A @ bad[..., None])[..., 0]
    p = optimal_impulse(dv, free, A, mu)
    assert (p[:, 1] >= 0).all()
    assert (p[:, 0].abs() <= mu * p[:, 1] + 1e-12).all()
    miss = ((dv - free - (A @ p[..., None])[..., 0]) ** 2).sum(-1)
    for s in torch.linspace(-1.0, 1.0, 9, dtype=torch.float64):  # no feasible point is better
        for scale in (0.0, 0.01, 0.05):
            q = torch.tensor([mu * s * scale, scale], dtype=torch.float64).expand(n, 2)
            other = ((dv - free - (A @ q[..., None])[..., 0]) ** 2).sum(-1)
            assert (miss <= other + 1e-15).all()
    with pytest.raises(ValueError):
        optimal_impulse(dv, free, A, 0.0)


def test_events_of_a_simulated_drop_have_the_analytical_impulse_as_optimum() -> None:
    """On the simulator's own trajectories the optimal impulse of an isolated event (no contact
    in the step after it) is the one the simulator applied, so the residual targets vanish."""
    state = torch.tensor(
        [[0.0, 0.12, 0.4, 0.3, -0.5, 3.0], [0.02, 0.10, -0.9, -0.2, 0.0, -6.0]],
        dtype=torch.float64,
    )
    traj = SIM.rollout(state, 120, 0.4, 0.3)
    events = contact_events(SIM, traj, 0.4, 0.3)
    _, touching = SIM.step(traj.reshape(-1, 6), 0.4, 0.3)
    isolated = ~touching.reshape(2, -1)[events.drop, events.step + 1]
    assert int(isolated.sum()) >= 4
    assert (events.p_m[:, 1] > 0).all()
    torch.testing.assert_close(
        events.residuals[isolated], torch.zeros_like(events.p_m[isolated]), rtol=0, atol=1e-12
    )


def _synthetic(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 5, generator=g, dtype=torch.float64)
    y = torch.stack([0.01 * torch.sin(3.0 * x[:, 3]), 0.02 * x[:, 4] ** 2 - 0.01 * x[:, 0]], -1)
    return x, y + 1e-4 * torch.randn(n, 2, generator=g, dtype=torch.float64)


@pytest.fixture(scope="module")
def fitted() -> GPResidual:
    x, y = _synthetic(60, seed=3)
    return fit_gp_residual(x, y, GPSettings(restarts=1, seed=0))


def test_gp_predicts_held_out_targets_and_is_unsure_away_from_the_data(
    fitted: GPResidual,
) -> None:
    x, y = _synthetic(40, seed=4)
    mean, std = fitted(x)
    assert mean.shape == (40, 2)
    assert std.shape == (40, 2)
    assert mean.dtype == torch.float64
    assert float((mean - y).abs().max()) < 1e-3  # targets span about 0.02 N·s
    _far, far_std = fitted(x + 3.0)
    assert (far_std > 5.0 * std).all()
    assert fitted(x.reshape(4, 10, 5))[0].shape == (4, 10, 2)


def test_save_and_load_give_identical_predictions(fitted: GPResidual, tmp_path) -> None:
    path = save_gp_residual(fitted, tmp_path / "gp.pt")
    state = torch.load(path, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    loaded = load_gp_residual(path)
    x, _ = _synthetic(20, seed=5)
    for a, b in zip(fitted(x), loaded(x), strict=True):
        assert torch.equal(a, b)
    torch.save({"inputs": state["inputs"]}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="not a GP residual"):
        load_gp_residual(tmp_path / "bad.pt")


def test_a_zero_residual_leaves_the_simulation_unchanged() -> None:
    x, _ = _synthetic(30, seed=6)
    gp = fit_gp_residual(x, torch.zeros(30, 2, dtype=torch.float64), GPSettings(0, 0))
    state = torch.tensor(
        [[0.0, 0.08, 0.5, 0.4, -1.0, 5.0], [0.0, 0.06, 0.1, -0.3, -2.0, -8.0]],
        dtype=torch.float64,
    )
    plain = SIM.rollout(state, 60, 0.2, 0.4)
    with_gp = SIM.rollout(state, 60, 0.2, 0.4, ResidualContact(gp))
    assert torch.equal(with_gp, plain)
    assert not torch.equal(plain[:, -1], SIM.rollout(state, 60, 0.2, 0.9)[:, -1])  # contacts
