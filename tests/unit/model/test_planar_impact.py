"""The planar impact model: free flight, non-penetration, friction, restitution and energy."""

from __future__ import annotations

import math

import torch

from dynid.model.planar_impact import (
    GRAVITY,
    PlanarImpactSimulator,
    PlanarSquare,
    contact_impulse,
    contact_quantities,
    energy_change,
    kinetic_energy,
)

SIM = PlanarImpactSimulator()
H = 0.5 * SIM.body.side


def _random_contacts(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Corner-down states just above the ground moving down, and random (μ, ε)."""
    g = torch.Generator().manual_seed(seed)
    theta = (torch.rand(n, generator=g, dtype=torch.float64) - 0.5) * 2 * math.pi
    state = torch.zeros(n, 6, dtype=torch.float64)
    state[:, 2] = theta
    state[:, 1] = -SIM.body.corners(theta)[..., 1].amin(-1) + 1e-3 * torch.rand(n, generator=g)
    state[:, 3] = torch.randn(n, generator=g, dtype=torch.float64)
    state[:, 4] = -3.0 * torch.rand(n, generator=g, dtype=torch.float64) - 0.5
    state[:, 5] = 20.0 * torch.randn(n, generator=g, dtype=torch.float64)
    mu = 2.0 * torch.rand(n, generator=g, dtype=torch.float64)
    eps = torch.rand(n, generator=g, dtype=torch.float64)
    return state, mu, eps


def _point_quantities(
    body: PlanarSquare, state: torch.Tensor, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The contact point's velocity ``[*B, 2]`` and ``J M⁻¹ Jᵀ [*B, 2, 2]``."""
    v, A = contact_quantities(body, state, r)
    return v[..., :2], A[..., :2, :2]


def test_contact_quantities_map_a_wrench_to_the_body_velocity_change() -> None:
    # A₃ = J₃ M⁻¹ J₃ᵀ and v = J₃ q̇: a wrench P changes v by A₃ P and the kinetic energy by
    # energy_change(P, v, A₃), checked against the body's velocity change M⁻¹ J₃ᵀ P
    state, _, _ = _random_contacts(64, seed=4)
    body = SIM.body
    r = body.corners(state[:, 2])[:, 0]
    v, A = contact_quantities(body, state, r)
    g = torch.Generator().manual_seed(5)
    P = 0.01 * torch.randn(64, 3, generator=g, dtype=torch.float64)
    J = torch.zeros(64, 3, 3, dtype=torch.float64)
    J[:, 0, 0] = J[:, 1, 1] = J[:, 2, 2] = 1.0
    J[:, 0, 2], J[:, 1, 2] = -r[:, 1], r[:, 0]
    qdot = state[:, 3:]
    torch.testing.assert_close(v, (J @ qdot[..., None])[..., 0])
    m_inv = torch.tensor([1 / body.mass, 1 / body.mass, 1 / body.inertia], dtype=torch.float64)
    after = state.clone()
    after[:, 3:] = qdot + m_inv * (J.transpose(-1, -2) @ P[..., None])[..., 0]
    v_after, _ = contact_quantities(body, after, r)
    torch.testing.assert_close(v_after, v + (A @ P[..., None])[..., 0])
    gained = kinetic_energy(body, after) - kinetic_energy(body, state)
    torch.testing.assert_close(energy_change(P, v, A), gained)


def test_free_flight_conserves_momentum() -> None:
    state = torch.tensor([[0.1, 0.5, 0.3, 0.7, 1.2, -4.0]], dtype=torch.float64)
    traj = SIM.rollout(state, 20, 0.3, 0.5)
    assert torch.equal(traj[0, :, 3], traj[0, 0, 3].expand(21))  # horizontal momentum
    assert torch.equal(traj[0, :, 5], traj[0, 0, 5].expand(21))  # angular momentum
    dvz = torch.diff(traj[0, :, 4])
    torch.testing.assert_close(dvz, torch.full_like(dvz, -GRAVITY * SIM.dt))


def test_never_penetrates_after_resolution() -> None:
    state, mu, eps = _random_contacts(512, seed=1)
    s = state
    for _ in range(60):
        s, _ = SIM.step(s, mu, eps)
        assert (SIM.lowest_point(s) >= -1e-12).all()


def test_impulse_respects_cone_and_separates() -> None:
    state, mu, eps = _random_contacts(2048, seed=2)
    r = SIM.body.corners(state[:, 2])
    lowest = r[torch.arange(r.shape[0]), r[..., 1].argmin(-1)]
    v_c, A = _point_quantities(SIM.body, state, lowest)
    approaching = v_c[:, 1] < 0  # the model's precondition
    assert approaching.sum() > 1000
    v_c, A, mu, eps = v_c[approaching], A[approaching], mu[approaching], eps[approaching]
    p = contact_impulse(v_c, A, mu, eps)
    assert (p[:, 1] >= 0).all()
    assert (p[:, 0].abs() <= mu * p[:, 1] + 1e-12).all()
    v_post = v_c + (A @ p[..., None])[..., 0]
    assert (v_post[:, 1] >= -1e-12).all()
    assert (v_post[:, 1] <= -eps * v_c[:, 1] + 1e-12).all()  # at most Newton's rebound
    assert (energy_change(p, v_c, A) <= 1e-12).all()


def test_contact_resolution_never_adds_energy() -> None:
    # Every step: the kinetic energy after contact resolution and the penetration projection is
    # at most that of the free-flight velocity v + g dt the contact model received (eq. 2).
    state, mu, eps = _random_contacts(256, seed=3)
    body = SIM.body
    s = state
    for _ in range(80):
        free = s.clone()
        free[:, 4] -= GRAVITY * SIM.dt
        s, event = SIM.step(s, mu, eps)
        assert (kinetic_energy(body, s) <= kinetic_energy(body, free) * (1 + 1e-12)).all()
        assert (event | (s[:, 3:] == free[:, 3:]).all(-1)).all()  # no event: free flight


def test_plastic_high_friction_stops_sliding() -> None:
    # corner down, sliding and falling: with ε = 0 and μ large the corner sticks (no slip, no
    # rebound) at the impact
    theta = math.pi / 4 + 0.1
    state = torch.tensor([[0.0, 0.0, theta, 1.0, -1.0, 2.0]], dtype=torch.float64)
    state[0, 1] = -SIM.body.corners(state[:, 2])[0, :, 1].min() + 1e-4
    s, event = SIM.step(state, 10.0, 0.0)
    assert bool(event)
    r = SIM.body.corners(state[:, 2])[0]
    lowest = r[r[:, 1].argmin()]
    v_c, _ = _point_quantities(SIM.body, s, lowest[None])
    torch.testing.assert_close(v_c, torch.zeros_like(v_c), atol=1e-12, rtol=0)
    assert float(s[0, 3]) != 0.0  # the square itself still moves: it pivots about the corner


def test_frictionless_elastic_corner_impact_keeps_energy() -> None:
    # corner down (θ = 45°), falling straight: μ = 0, ε = 1 reverses the corner's normal velocity
    square = PlanarSquare()
    theta = torch.tensor([math.pi / 4], dtype=torch.float64)
    r = square.corners(theta)[0]
    lowest = r[r[:, 1].argmin()]
    state = torch.tensor([[0.0, 0.0, math.pi / 4, 0.3, -2.0, 5.0]], dtype=torch.float64)
    v_c, A = _point_quantities(square, state, lowest[None])
    p = contact_impulse(v_c, A, torch.tensor(0.0), torch.tensor(1.0))
    assert float(p[0, 0]) == 0.0  # μ = 0 scales every tangential impulse: exactly zero
    v_post = v_c + (A @ p[..., None])[..., 0]
    torch.testing.assert_close(v_post[0, 1], -v_c[0, 1])
    torch.testing.assert_close(energy_change(p, v_c, A), torch.zeros(1, dtype=torch.float64))


def test_free_flight_is_exact_under_gravity() -> None:
    state = torch.tensor([[0.1, 0.5, 0.3, 0.7, 1.2, -4.0]], dtype=torch.float64)
    traj = SIM.rollout(state, 30, 0.3, 0.5)[0]
    t = torch.arange(31, dtype=torch.float64) * SIM.dt
    torch.testing.assert_close(traj[:, 1], 0.5 + 1.2 * t - 0.5 * GRAVITY * t * t)
    torch.testing.assert_close(traj[:, 2], 0.3 - 4.0 * t)


def test_elastic_corner_bounce_returns_to_its_height() -> None:
    """A diamond dropped on its corner (the impulse through the centre of mass) with ε = 1 and
    no friction comes back to where it fell from: the impact happens at the ground, not a step
    early (which would lift it by up to the fall speed times dt)."""
    z0 = 0.2
    state = torch.tensor([[0.0, z0, math.pi / 4, 0.0, 0.0, 0.0]], dtype=torch.float64)
    traj = SIM.rollout(state, 110, 0.0, 1.0)[0]
    low = int(torch.argmin(traj[:, 1]))
    assert 0 < low < 110
    apex = float(traj[low:, 1].max())
    assert abs(apex - z0) < 5e-4
    assert float(SIM.lowest_point(traj).min()) > -1e-9
