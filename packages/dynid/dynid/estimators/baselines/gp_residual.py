"""The earlier residual of the residual-contact paper (III-B): isolated contact events, the
optimal impulse of each by constrained least squares, and a Gaussian process on the residual.

Contact events are found by the simulator itself: a recorded state ``s_t`` is an event when
:meth:`PlanarImpactSimulator.step` from it resolves a contact (a corner at or below the ground
after the step while approaching it), and only single-corner events are kept (the optimal
impulse is that of one point). The recorded velocities are backward differences of the
positions (``v_t = (q_t - q_{t-1}) / dt``), so an impact during the step ``t → t+1`` is split
between ``v_{t+1}`` and ``v_{t+2}``: the velocity change of an event is taken over two steps,
``Δv = v_{t+2} - v_t`` (``v_t`` wholly before the contact, ``v_{t+2}`` wholly after it), with
two steps of gravity. Only the first step of each run of consecutive event steps is an event
(the impact; the steps after it lie in its window or are sustained contact).

The optimal impulse (III-B) is
``p_opt = argmin_p ‖Δv_c - J M⁻¹ f_ext Δt - M_c⁻¹ p‖₂`` s.t. ``p_n ≥ 0, |p_t| ≤ μ p_n``,
solved as a bounded linear least-squares problem (``scipy.optimize.lsq_linear``) in the cone's
edge coordinates ``p = (μ (a - b), a + b)``, ``a, b ≥ 0`` (a one-to-one map onto the cone for
``μ > 0``). The regression target is ``p_res = p_opt - p_m``, ``p_m`` the analytical impulse
the simulator chose at that event with the identified (μ, ε).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import lsq_linear

from dynid.model.gp_residual import GPResidual, GPSettings, fit_gp_residual
from dynid.model.planar_impact import GRAVITY, PlanarImpactSimulator, contact_quantities

__all__ = ["ContactEvents", "contact_events", "optimal_impulse", "train_gp_residual"]


def optimal_impulse(
    delta_vc: torch.Tensor, free_vc: torch.Tensor, A: torch.Tensor, mu: float
) -> torch.Tensor:
    """The impulses in the friction cone that best explain contact-velocity changes.

    Args:
        delta_vc: ``[N, 2]`` observed change of the contact-point velocity ``(v_t, v_n)`` (m/s).
        free_vc: ``[N, 2]`` its contact-free part ``J M⁻¹ f_ext Δt`` (m/s).
        A: ``[N, 2, 2]`` inverse contact-frame inertia ``M_c⁻¹ = J M⁻¹ Jᵀ`` (1/kg).
        mu: friction coefficient (> 0).

    Returns:
        ``[N, 2]`` ``p_opt = (p_t, p_n)`` (N·s), with ``p_n ≥ 0`` and ``|p_t| ≤ μ p_n``.

    Raises:
        ValueError: ``mu ≤ 0`` or shapes that do not match.
    """
    n = delta_vc.shape[0]
    if not mu > 0 or tuple(delta_vc.shape) != (n, 2) or tuple(free_vc.shape) != (n, 2):
        raise ValueError(f"optimal_impulse: need mu > 0 and [N, 2] velocities, got mu = {mu}")
    if tuple(A.shape) != (n, 2, 2):
        raise ValueError(f"optimal_impulse: A must be [N, 2, 2], got {tuple(A.shape)}")
    edges = np.array([[mu, -mu], [1.0, 1.0]])  # p = edges @ (a, b), a, b ≥ 0
    rhs = (delta_vc - free_vc).detach().cpu().numpy().astype(np.float64)
    mats = A.detach().cpu().numpy().astype(np.float64)
    out = np.empty((n, 2))
    for i in range(n):
        fit = lsq_linear(mats[i] @ edges, rhs[i], bounds=(0.0, np.inf), method="bvls")
        out[i] = edges @ fit.x
    return torch.from_numpy(out).to(delta_vc)


@dataclass(frozen=True)
class ContactEvents:
    """Isolated single-corner contact events of recorded trajectories.

    Attributes:
        features: ``[N, 5]`` contact features at the pre-contact states.
        p_m: ``[N, 2]`` analytical impulses there (N·s).
        p_opt: ``[N, 2]`` optimal impulses (N·s).
        drop, step: ``[N]`` trajectory index and sample ``t`` of each event.
        multi: events left out because two corners touched.
    """

    features: torch.Tensor
    p_m: torch.Tensor
    p_opt: torch.Tensor
    drop: torch.Tensor
    step: torch.Tensor
    multi: int

    @property
    def residuals(self) -> torch.Tensor:
        """``[N, 2]`` regression targets ``p_opt - p_m`` (N·s)."""
        return self.p_opt - self.p_m


class _Recorder:
    """Contact model that keeps the analytical impulse and records what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, ...]] = []

    def __call__(
        self, features: torch.Tensor, v_c: torch.Tensor, A: torch.Tensor, p_m: torch.Tensor
    ) -> torch.Tensor:
        self.calls.append((features, v_c, A, p_m))
        return p_m


def contact_events(
    simulator: PlanarImpactSimulator, observed: torch.Tensor, mu: float, eps: float
) -> ContactEvents:
    """Isolate the contact events of recorded trajectories and their optimal impulses (see the
    module notes for the detection and the two-step velocity window).

    Args:
        simulator: the analytical simulator (its ``dt`` is the sample interval).
        observed: ``[K, T + 1, 6]`` recorded states ``(x, z, θ, ẋ, ż, θ̇)``, ``T ≥ 2``.
        mu, eps: the identified friction (> 0) and restitution.

    Raises:
        ValueError: ``observed`` is not ``[K, T + 1, 6]`` with ``T ≥ 2``, or ``mu ≤ 0``.
    """
    if observed.dim() != 3 or observed.shape[-1] != 6 or observed.shape[1] < 3:
        raise ValueError(
            f"contact_events: observed must be [K, T + 1 ≥ 3, 6], got {observed.shape}"
        )
    body, dt = simulator.body, simulator.dt
    with torch.no_grad():
        pre = observed[:, :-2]
        _, event = simulator.step(pre.reshape(-1, 6), mu, eps)
        event = event.reshape(pre.shape[:2])
        rows: list[tuple[int, int, tuple[torch.Tensor, ...], torch.Tensor]] = []
        multi = 0
        for k, t in event.nonzero().tolist():
            if t > 0 and bool(event[k, t - 1]):
                continue  # within the window of the impact before, or sustained contact
            record = _Recorder()
            simulator.step(observed[k, t][None], mu, eps, record)
            if len(record.calls) != 1:
                multi += 1
                continue
            rows.append((k, t, tuple(c[0] for c in record.calls[0]), observed[k, t]))
        if not rows:
            raise ValueError("contact_events: no single-corner contact event in the trajectories")
        features, v_c, A, p_m = (torch.stack(c) for c in zip(*(r[2] for r in rows), strict=True))
        states = torch.stack([r[3] for r in rows])
        drop = torch.tensor([r[0] for r in rows])
        step = torch.tensor([r[1] for r in rows])
        # The touching corner: of the four, the one whose contact quantities the simulator used.
        grav = states + states.new_tensor([0.0, 0.0, 0.0, 0.0, -GRAVITY * dt, 0.0])
        corners = body.corners(states[:, 2])  # [N, 4, 2]
        vc4, A4 = contact_quantities(body, grav[:, None].expand(-1, 4, 6), corners)
        miss = (vc4 - v_c[:, None]).abs().sum(-1) + (A4 - A[:, None]).abs().sum((-1, -2))
        A, p_m = A[:, :2, :2], p_m[:, :2]  # the impulse at the contact point (L = 0)
        r = corners[torch.arange(len(rows)), miss.argmin(-1)]
        dv = observed[drop, step + 2, 3:] - observed[drop, step, 3:]
        delta_vc = torch.stack([dv[:, 0] - dv[:, 2] * r[:, 1], dv[:, 1] + dv[:, 2] * r[:, 0]], -1)
        free_vc = delta_vc.new_tensor([0.0, -2.0 * GRAVITY * dt]).expand_as(delta_vc)
        p_opt = optimal_impulse(delta_vc, free_vc, A, mu)
    return ContactEvents(features, p_m, p_opt, drop, step, multi)


def train_gp_residual(
    simulator: PlanarImpactSimulator,
    observed: torch.Tensor,
    mu: float,
    eps: float,
    settings: GPSettings | None = None,
) -> tuple[GPResidual, ContactEvents]:
    """The GP residual of III-B fitted on the contact events of ``observed [K, T + 1, 6]``
    (``settings``: the hyper-parameter fit, ``None`` for :class:`GPSettings`' defaults).

    Returns:
        The fitted residual and the events it was fitted on.

    Raises:
        ValueError: as :func:`contact_events` and :func:`fit_gp_residual`.
    """
    events = contact_events(simulator, observed, mu, eps)
    fitted = fit_gp_residual(events.features, events.residuals, settings or GPSettings())
    return fitted, events
