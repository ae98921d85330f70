"""Planar rigid square dropped on the ground: point-contact impulses and a batched time stepper.

The analytical contact model of the residual-contact paper (Fazeli et al., eqs. 1–3): at a
contact the model selects an impulse ``p_m = m(s_pre, μ, ε, M, f_ext)`` in the contact frame,
an optional residual learner adds ``p_res`` (eq. 4), and ``v_post = v_pre + M⁻¹ (f_ext dt +
Jᵀ p)`` (eq. 3). Contact-free motion is deterministic (gravity only).

A residual may also be a wrench: the contact impulse extended by an angular impulse ``L`` about
the centre of mass, ``P = (p_t, p_n, L)`` with the Jacobian ``J₃`` of :func:`contact_quantities`
(the residual wrench learner of Fig. 4).

Conventions (all SI): the state is ``s = (x, z, θ, ẋ, ż, θ̇)`` with ``z`` up, the ground the line
``z = 0`` and ``θ`` counter-clockwise from the ``x`` towards the ``z`` axis (rad). A contact
frame has its tangent along ``+x`` and its normal along ``+z``; impulses are ``(p_t, p_n)``
(N·s). Batches are any leading shape ``[*B]``; tensors follow the dtype and device of the state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = [
    "ContactModel",
    "ImpulseResidual",
    "PlanarImpactSimulator",
    "PlanarSquare",
    "contact_features",
    "contact_impulse",
    "contact_quantities",
    "energy_change",
    "kinetic_energy",
]

GRAVITY = 9.81
"""Magnitude of gravity (m/s²), acting along ``-z``."""


@dataclass(frozen=True)
class PlanarSquare:
    """A homogeneous square body in the plane.

    Attributes:
        side: edge length (m).
        mass: mass (kg).
    """

    side: float = 0.06
    mass: float = 0.049

    def __post_init__(self) -> None:
        if not (self.side > 0 and self.mass > 0):
            raise ValueError(
                f"PlanarSquare: side and mass must be > 0, got {self.side} m, {self.mass} kg"
            )

    @property
    def inertia(self) -> float:
        """Rotational inertia about the centre of mass, ``m a² / 6`` (kg·m²)."""
        return self.mass * self.side**2 / 6.0

    @property
    def radius_of_gyration(self) -> float:
        """``sqrt(I / m) = a / sqrt(6)`` (m): scales ``θ`` to metres in configuration errors."""
        return self.side / math.sqrt(6.0)

    def corners(self, theta: torch.Tensor) -> torch.Tensor:
        """``[*B, 4, 2]`` world offsets ``(r_x, r_z)`` (m) of the corners from the centre of mass
        for orientations ``theta [*B]`` (rad)."""
        h = 0.5 * self.side
        local = theta.new_tensor([[h, h], [-h, h], [-h, -h], [h, -h]])
        c, s = torch.cos(theta)[..., None], torch.sin(theta)[..., None]
        rx = c * local[:, 0] - s * local[:, 1]
        rz = s * local[:, 0] + c * local[:, 1]
        return torch.stack([rx, rz], dim=-1)


def kinetic_energy(body: PlanarSquare, state: torch.Tensor) -> torch.Tensor:
    """``[*B]`` kinetic energy (J) of states ``[*B, 6]``."""
    v = state[..., 3:]
    return 0.5 * (body.mass * (v[..., 0] ** 2 + v[..., 1] ** 2) + body.inertia * v[..., 2] ** 2)


def contact_quantities(
    body: PlanarSquare, state: torch.Tensor, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Contact-frame velocity ``(v_t, v_n, θ̇) [*B, 3]`` and inverse inertia
    ``A₃ = J₃ M⁻¹ J₃ᵀ [*B, 3, 3]`` at corner offsets ``r [*B, 2]`` (m) of states ``[*B, 6]``.

    ``J₃`` has the rows ``(1, 0, -r_z)`` (tangent), ``(0, 1, r_x)`` (normal) and ``(0, 0, 1)``
    (rotation), so a contact-frame wrench impulse ``P = (p_t, p_n, L)`` changes the velocity by
    ``A₃ P`` and the body's by ``M⁻¹ J₃ᵀ P``. The first two rows are the contact point's
    velocity ``v_c`` and ``A = J M⁻¹ Jᵀ`` of the impulse ``(p_t, p_n)`` alone.
    """
    rx, rz = r[..., 0], r[..., 1]
    w = state[..., 5]
    v = torch.stack([state[..., 3] - w * rz, state[..., 4] + w * rx, w], dim=-1)
    inv_m, inv_i = 1.0 / body.mass, 1.0 / body.inertia
    a_tt = inv_m + rz * rz * inv_i
    a_tn = -rz * rx * inv_i
    a_nn = inv_m + rx * rx * inv_i
    a_t, a_n = -rz * inv_i, rx * inv_i
    A = torch.stack(
        [
            torch.stack([a_tt, a_tn, a_t], -1),
            torch.stack([a_tn, a_nn, a_n], -1),
            torch.stack([a_t, a_n, torch.full_like(a_t, inv_i)], -1),
        ],
        -2,
    )
    return v, A


def _newton_coulomb(
    v_c: torch.Tensor, A: torch.Tensor, mu: torch.Tensor, eps: torch.Tensor
) -> torch.Tensor:
    """Impulse ``[*B, 2]`` reaching ``v_n⁺ = -ε v_n⁻`` with Coulomb friction: the sticking impulse
    (``v_t⁺ = 0``) when it lies in the cone ``|p_t| ≤ μ p_n``, else sliding on the cone edge
    opposing the sticking direction."""
    vt, vn = v_c[..., 0], v_c[..., 1]
    a_tt, a_tn, a_nn = A[..., 0, 0], A[..., 0, 1], A[..., 1, 1]
    dvn = -(1.0 + eps) * vn  # wanted change of normal velocity
    det = a_tt * a_nn - a_tn * a_tn
    pt_stick = (a_nn * -vt - a_tn * dvn) / det
    pn_stick = (-a_tn * -vt + a_tt * dvn) / det
    sign = torch.sign(pt_stick)
    denom = a_nn + sign * mu * a_tn
    ok = denom > 1e-9 * a_nn
    pn_slide = torch.where(ok, dvn / torch.where(ok, denom, a_nn), dvn / a_nn)
    pt_slide = torch.where(ok, sign * mu * pn_slide, torch.zeros_like(pn_slide))
    stick = pt_stick.abs() <= mu * pn_stick
    return torch.stack(
        [torch.where(stick, pt_stick, pt_slide), torch.where(stick, pn_stick, pn_slide)], -1
    )


def energy_change(p: torch.Tensor, v_c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``[*B]`` change of kinetic energy (J) from a contact-frame impulse ``p [*B, k]``:
    ``pᵀ v_c + ½ pᵀ A p``, with ``v_c [*B, k]`` and ``A [*B, k, k]`` (``k = 2``: the impulse
    at the contact point; ``k = 3``: a wrench, :func:`contact_quantities`)."""
    return (p * v_c).sum(-1) + 0.5 * (p * (A @ p[..., None])[..., 0]).sum(-1)


def contact_impulse(
    v_c: torch.Tensor, A: torch.Tensor, mu: torch.Tensor, eps: torch.Tensor
) -> torch.Tensor:
    """The analytical contact model ``m(s_pre, μ, ε, M, f_ext)`` (eq. 1) at one approaching point.

    Newton restitution on the normal velocity (``v_n⁺ = -ε v_n⁻``) with Coulomb friction
    (sticking when the sticking impulse lies in the friction cone, else sliding on its edge).
    Where that impulse would add kinetic energy (Newton restitution with friction can), the
    restitution part is scaled down, ``p = p₀ + λ (p_ε - p₀)`` with ``p₀`` the plastic (ε = 0)
    impulse and the largest ``λ ∈ [0, 1]`` keeping the energy from rising. The result satisfies
    ``p_n ≥ 0``, ``|p_t| ≤ μ p_n``, ``v_n⁺ ≥ 0`` and never increases the kinetic energy.

    Args:
        v_c: ``[*B, 2]`` pre-impact contact velocity ``(v_t, v_n)`` (m/s), ``v_n < 0``.
        A: ``[*B, 2, 2]`` inverse contact-frame inertia ``J M⁻¹ Jᵀ`` (1/kg).
        mu: friction coefficient, broadcastable to ``[*B]``.
        eps: restitution coefficient in ``[0, 1]``, broadcastable to ``[*B]``.

    Returns:
        ``[*B, 2]`` impulse ``(p_t, p_n)`` (N·s).
    """
    p0 = _newton_coulomb(v_c, A, mu, torch.zeros_like(eps))
    pe = _newton_coulomb(v_c, A, mu, eps)
    d = pe - p0
    a = energy_change(p0, v_c, A)  # ≤ 0: plastic, maximally dissipative in the cone
    b = (d * (v_c + (A @ p0[..., None])[..., 0])).sum(-1)
    c = 0.5 * (d * (A @ d[..., None])[..., 0]).sum(-1)
    gain = a + b + c > 0
    # The masked branches are kept finite so that gradients through torch.where stay finite.
    disc = b * b - 4.0 * c * a
    root = torch.sqrt(torch.where(disc > 0, disc, torch.ones_like(disc))) * (disc > 0)
    safe_c = torch.where(c > 0, c, torch.ones_like(c))
    lam = torch.where(gain & (c > 0), (-b + root) / (2.0 * safe_c), torch.ones_like(c))
    lam = torch.clamp(torch.where(gain & (c <= 0), torch.zeros_like(c), lam), 0.0, 1.0)
    return p0 + lam[..., None] * d


def contact_features(body: PlanarSquare, v_c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """``[*B, 5]`` residual-policy features ``x = (M_c, v_c)`` (III-C): the contact-frame inertia
    ``M_c = A⁻¹`` as ``(M_tt, M_tn, M_nn)`` divided by the body mass (dimensionless) and the
    contact-point velocity ``(v_t, v_n)`` (m/s)."""
    Mc = torch.linalg.inv(A) / body.mass
    return torch.stack([Mc[..., 0, 0], Mc[..., 0, 1], Mc[..., 1, 1], v_c[..., 0], v_c[..., 1]], -1)


class ImpulseResidual(Protocol):
    """A residual policy ``π(x | θ)``: a Gaussian over corrective impulses given the features."""

    def __call__(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, std)`` of ``p_res`` for features ``[*B, 5]`` (:func:`contact_features`):
        ``[*B, 2]``, the impulse ``(p_t, p_n)`` (N·s), or ``[*B, 3]``, the wrench
        ``(p_t, p_n, L)`` with the angular impulse ``L`` (N·m·s) about the centre of mass."""
        ...


class ContactModel(Protocol):
    """Chooses the impulse at each contact event of :meth:`PlanarImpactSimulator.step`."""

    def __call__(
        self, features: torch.Tensor, v_c: torch.Tensor, A: torch.Tensor, p_m: torch.Tensor
    ) -> torch.Tensor:
        """The wrench impulse ``(p_t, p_n, L) [*B, 3]`` applied, given the features
        ``[*B, 5]``, the contact-frame velocity ``v_c [*B, 3]`` and inverse inertia
        ``A [*B, 3, 3]`` (:func:`contact_quantities`) and the analytical impulse
        ``p_m = (p_t, p_n, 0) [*B, 3]``."""
        ...


@dataclass(frozen=True)
class PlanarImpactSimulator:
    """Time stepper of a :class:`PlanarSquare` falling on the ground (Alg. 1 of the paper).

    Each step of ``dt``: gravity acts (``f_ext dt``); every corner whose predicted position
    after the step is at or below the ground while approaching it is a contact event, resolved
    with the contact model at the corner (the two lowest corners, ``sweeps`` passes of
    sequential impulses, so a face landing on both corners is resolved too); the configuration
    is advanced with the new velocity (semi-implicit Euler) and any remaining penetration is
    projected out along ``+z``, the potential energy this adds taken from the kinetic energy
    (the velocity is scaled), so the projection adds no energy. Below an approach speed of
    ``rest_speed`` the restitution is zero, so a resting square does not chatter.

    Attributes:
        body: the square.
        dt: time step (s); the data rate of the dice drops is 250 Hz.
        sweeps: passes of sequential impulses over the contacting corners per step.
        rest_speed: approach speed (m/s) below which contacts are plastic.
    """

    body: PlanarSquare = PlanarSquare()
    dt: float = 1.0 / 250.0
    sweeps: int = 2
    rest_speed: float = 2.0 * GRAVITY / 250.0

    def __post_init__(self) -> None:
        if not (self.dt > 0 and self.sweeps >= 1 and self.rest_speed >= 0):
            raise ValueError(
                f"PlanarImpactSimulator: need dt > 0 s, sweeps ≥ 1, rest_speed ≥ 0 m/s; got "
                f"dt={self.dt}, sweeps={self.sweeps}, rest_speed={self.rest_speed}"
            )

    def step(
        self,
        state: torch.Tensor,
        mu: torch.Tensor,
        eps: torch.Tensor,
        contact: ContactModel | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of ``dt``.

        Args:
            state: ``[*B, 6]`` states ``(x, z, θ, ẋ, ż, θ̇)``.
            mu, eps: friction and restitution, broadcastable to ``[*B]``.
            contact: how the impulse of a contact event is chosen from the analytical one;
                ``None``: the analytical impulse itself.

        Returns:
            ``(next_state [*B, 6], event [*B] bool)``: whether a contact event happened.
        """
        body = self.body
        mu = torch.as_tensor(mu, dtype=state.dtype, device=state.device).expand(state.shape[:-1])
        eps = torch.as_tensor(eps, dtype=state.dtype, device=state.device).expand(state.shape[:-1])
        v = state[..., 3:] + state.new_tensor([0.0, -GRAVITY * self.dt, 0.0])
        s = torch.cat([state[..., :3], v], -1)
        corners = body.corners(state[..., 2])  # [*B, 4, 2]
        order = torch.argsort(corners[..., 1], dim=-1)[..., :2]  # the two lowest corners
        lowest = torch.gather(corners, -2, order[..., None].expand(*order.shape, 2))
        inv_mass = s.new_tensor([1.0 / body.mass, 1.0 / body.mass, 1.0 / body.inertia])
        event = torch.zeros(state.shape[:-1], dtype=torch.bool, device=state.device)
        # Time into the step at which the first contact of the step is reached (dt: none).
        t_hit = torch.full(state.shape[:-1], self.dt, dtype=state.dtype, device=state.device)
        for sweep in range(self.sweeps):
            for k in range(2):
                r = lowest[..., k, :]
                v3, A3 = contact_quantities(body, s, r)
                v_c, A = v3[..., :2], A3[..., :2, :2]
                height = state[..., 1] + r[..., 1] + self.dt * v_c[..., 1]
                active = (height <= 0.0) & (v_c[..., 1] < 0.0)
                if not bool(active.any()):
                    continue
                # The corner reaches the ground ``reach`` into the step; the restitution acts on
                # its approach speed then, not on the end-of-step one that also holds the gravity
                # of the rest of the step (``late``), which the corner still feels afterwards.
                gap = torch.clamp(state[..., 1] + r[..., 1], min=0.0)
                speed = torch.where(active, -v_c[..., 1], torch.ones_like(gap))
                reach = torch.clamp(gap / speed, max=self.dt)
                if sweep == 0:
                    t_hit = torch.where(active, torch.minimum(t_hit, reach), t_hit)
                late = GRAVITY * (self.dt - reach)
                e = torch.clamp(eps - (1.0 + eps) * late / speed, min=0.0)
                e = torch.where(v_c[..., 1] < -self.rest_speed, e, torch.zeros_like(eps))
                safe_v = torch.where(active[..., None], v3, v3.new_tensor([0.0, -1.0, 0.0]))
                p = contact_impulse(safe_v[..., :2], A, mu, e)
                p = torch.cat([p, torch.zeros_like(p[..., :1])], -1)  # (p_t, p_n, L = 0)
                if contact is not None and sweep == 0:
                    features = contact_features(body, safe_v[..., :2], A)
                    p = contact(features, safe_v, A3, p)
                p = torch.where(active[..., None], p, torch.zeros_like(p))
                gen = torch.stack(  # J₃ᵀ P
                    [
                        p[..., 0],
                        p[..., 1],
                        -r[..., 1] * p[..., 0] + r[..., 0] * p[..., 1] + p[..., 2],
                    ],
                    -1,
                )
                s = torch.cat([s[..., :3], s[..., 3:] + inv_mass * gen], -1)
                event = event | active
        # Free flight up to the contact (exact under gravity), the post-impact velocity after it.
        v_mid = 0.5 * (state[..., 3:] + v)
        rest = self.dt - t_hit
        v_after = s[..., 3:] + torch.stack(
            [torch.zeros_like(rest), 0.5 * GRAVITY * rest, torch.zeros_like(rest)], -1
        )
        q = state[..., :3] + t_hit[..., None] * v_mid + rest[..., None] * v_after
        depth = torch.clamp(-(q[..., 1] + body.corners(q[..., 2])[..., 1].amin(-1)), min=0.0)
        q = q + torch.stack([torch.zeros_like(depth), depth, torch.zeros_like(depth)], -1)
        # The lift adds m g depth of potential energy; take it from the kinetic energy so that
        # the projection never adds energy (velocities scaled, their direction kept).
        s = torch.cat([q, s[..., 3:]], -1)
        kinetic = kinetic_energy(body, s)
        lift = body.mass * GRAVITY * depth
        ratio = torch.where(kinetic > 0, lift / torch.where(kinetic > 0, kinetic, 1.0), 0.0)
        scale = torch.sqrt(torch.clamp(1.0 - ratio, min=0.0))
        return torch.cat([q, s[..., 3:] * scale[..., None]], -1), event

    def rollout(
        self,
        state0: torch.Tensor,
        steps: int,
        mu: torch.Tensor,
        eps: torch.Tensor,
        contact: ContactModel | None = None,
    ) -> torch.Tensor:
        """``[*B, steps + 1, 6]`` states from ``state0 [*B, 6]`` (index 0 is ``state0``)."""
        states = [state0]
        s = state0
        for _ in range(steps):
            s, _ = self.step(s, mu, eps, contact)
            states.append(s)
        return torch.stack(states, dim=-2)

    def lowest_point(self, state: torch.Tensor) -> torch.Tensor:
        """``[*B]`` height (m) of the lowest corner of states ``[*B, 6]`` (< 0: penetrating)."""
        return state[..., 1] + self.body.corners(state[..., 2])[..., 1].amin(-1)
