"""Residual impulse policy (density network, residual-contact paper III-B, III-C) and the contact
model that applies it, ``p = p_m + p_res`` (eq. 4), with the feasibility filter of Sec. IV.

The policy maps the contact-frame features ``x = (M_c, v_c)``
(:func:`dynid.model.planar_impact.contact_features`) to a Gaussian over the corrective impulse
``(p_t, p_n)`` (N·s) or, as the residual wrench learner of Fig. 4, over the corrective wrench
``(p_t, p_n, L)`` with an angular impulse ``L`` (N·m·s) about the centre of mass. Weights are
saved as a plain ``state_dict`` and read back with ``torch.load(weights_only=True)``: nothing
is unpickled.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from dynid.model.planar_impact import ImpulseResidual, energy_change
from dynid.model.weights import load_state, save_state

__all__ = ["DensityNetwork", "ResidualContact", "load_policy", "save_policy"]


class DensityNetwork(nn.Module):
    """``x [*B, 5] -> (mean, std)`` of the residual: ``[*B, 2]``, the impulse ``(p_t, p_n)``
    (N·s), or with ``outputs=3`` ``[*B, 3]``, the wrench ``(p_t, p_n, L)`` (``L`` in N·m·s).

    One hidden ``tanh`` layer; outputs are in units of ``impulse_scale`` (by default the dice's
    mass times 0.1 m/s), ``L`` in units of ``impulse_scale × lever``; the standard deviation is
    ``softplus(o - 2) + min_std`` so that a network with small weights starts with a small
    spread (about 0.13 units).

    Args:
        hidden: width of the hidden layer.
        impulse_scale: N·s per output unit.
        min_std: floor of the standard deviation, in output units (≥ 0).
        outputs: 2 (impulse) or 3 (wrench).
        lever: m; the angular output unit is ``impulse_scale × lever`` (``outputs=3`` only; by
            default half the dice's side).

    Raises:
        ValueError: a size or scale out of range.
    """

    def __init__(
        self,
        hidden: int = 8,
        impulse_scale: float = 0.0049,
        min_std: float = 1e-3,
        outputs: int = 2,
        lever: float = 0.03,
    ) -> None:
        super().__init__()
        if hidden < 1 or not impulse_scale > 0 or min_std < 0 or outputs not in (2, 3):
            raise ValueError(
                f"DensityNetwork: need hidden ≥ 1, impulse_scale > 0, min_std ≥ 0, outputs 2 or "
                f"3; got {hidden}, {impulse_scale}, {min_std}, {outputs}"
            )
        if not lever > 0:
            raise ValueError(f"DensityNetwork: need lever > 0 m, got {lever}")
        self.hidden = hidden
        self.outputs = outputs
        self.layers = nn.Sequential(nn.Linear(5, hidden), nn.Tanh(), nn.Linear(hidden, 2 * outputs))
        self.register_buffer("impulse_scale", torch.tensor(float(impulse_scale)))
        self.register_buffer("min_std", torch.tensor(float(min_std)))
        if outputs == 3:
            self.register_buffer("lever", torch.tensor(float(lever)))
        self.double()

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and standard deviation ``[*B, outputs]`` of ``p_res`` for ``features [*B, 5]``
        (N·s, and N·m·s for ``L``)."""
        out = self.layers(features.to(self.layers[0].weight.dtype))
        k = self.outputs
        scale = self.impulse_scale
        if k == 3:
            scale = scale * torch.cat([scale.new_ones(2), self.lever[None]])
        std = (nn.functional.softplus(out[..., k:] - 2.0) + self.min_std) * scale
        return out[..., :k] * scale, std

    def parameter_vector(self) -> torch.Tensor:
        """All weights as one flat vector (the order of ``parameters()``)."""
        return nn.utils.parameters_to_vector(self.parameters()).detach().clone()

    def set_parameter_vector(self, vector: torch.Tensor) -> None:
        """Overwrite every weight from a flat vector of :meth:`parameter_vector`'s length."""
        nn.utils.vector_to_parameters(
            torch.as_tensor(vector, dtype=torch.float64), self.parameters()
        )


class ResidualContact:
    """Contact model ``p = p_m + p_res`` with ``p_res`` from a residual policy: a
    :class:`DensityNetwork` or any :class:`~dynid.model.planar_impact.ImpulseResidual` (such as
    the Gaussian process of :mod:`dynid.model.gp_residual`).

    Without a generator the mean residual is applied (deterministic prediction). With one,
    ``p_res`` is drawn from the policy; a draw whose impulse would leave the contact point
    approaching the ground (penetration) or add kinetic energy is discarded and drawn again,
    up to ``tries`` times, after which the analytical impulse is kept (Sec. IV). The mean
    residual is held to the same test: where it is infeasible the analytical impulse is kept.
    An impulse residual ``(p_t, p_n)`` is a wrench with ``L = 0``.

    Args:
        policy: ``features [*B, 5] -> (mean, std)`` of ``p_res``, ``[*B, 2]`` (N·s) or
            ``[*B, 3]`` (a wrench, :class:`~dynid.model.planar_impact.ImpulseResidual`).
        generator: random source of the draws, or ``None`` for the mean.
        tries: draws per contact event before falling back to ``p_m``.
        scale_std: multiplies the policy's standard deviation (0 gives the mean).
        extra_std: a standard deviation (N·s) added in quadrature to the scaled one, the same
            for both impulse components ``(p_t, p_n)`` (a calibrated spread; 0: the policy's
            own); ``L`` keeps the policy's spread.
    """

    def __init__(
        self,
        policy: ImpulseResidual,
        generator: torch.Generator | None = None,
        tries: int = 10,
        scale_std: float = 1.0,
        extra_std: float = 0.0,
    ) -> None:
        if tries < 1 or scale_std < 0 or extra_std < 0:
            raise ValueError(
                f"ResidualContact: tries ≥ 1, scale_std ≥ 0 and extra_std ≥ 0, got {tries}, "
                f"{scale_std}, {extra_std}"
            )
        self.policy = policy
        self.generator = generator
        self.tries = tries
        self.scale_std = scale_std
        self.extra_std = extra_std
        self.rejected = 0
        """Draws discarded as infeasible so far."""

    def __call__(
        self, features: torch.Tensor, v_c: torch.Tensor, A: torch.Tensor, p_m: torch.Tensor
    ) -> torch.Tensor:
        """The wrench impulse ``(p_t, p_n, L) [*B, 3]`` at contact events with analytical
        impulses ``p_m [*B, 3]`` (:class:`~dynid.model.planar_impact.ContactModel`)."""
        mean, std = self.policy(features)
        mean, std = mean.to(p_m.dtype), std.to(p_m.dtype) * self.scale_std
        if self.extra_std > 0:
            extra = std.new_tensor([self.extra_std, self.extra_std, 0.0][: std.shape[-1]])
            std = torch.sqrt(std * std + extra * extra)
        pad = p_m.shape[-1] - mean.shape[-1]  # an impulse residual has L = 0
        if self.generator is None:
            p = p_m + nn.functional.pad(mean, (0, pad))
            return torch.where(self._feasible(p, v_c, A)[..., None], p, p_m)
        out = p_m.clone()
        pending = torch.ones(p_m.shape[:-1], dtype=torch.bool, device=p_m.device)
        for _ in range(self.tries):
            noise = torch.randn(
                mean.shape, generator=self.generator, dtype=p_m.dtype, device=p_m.device
            )
            p = p_m + nn.functional.pad(mean + std * noise, (0, pad))
            ok = self._feasible(p, v_c, A)
            take = pending & ok
            out = torch.where(take[..., None], p, out)
            self.rejected += int((pending & ~ok).sum())
            pending = pending & ~ok
            if not bool(pending.any()):
                break
        return out

    @staticmethod
    def _feasible(p: torch.Tensor, v_c: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
        """``[*B]`` whether the wrench impulse ``p [*B, 3]`` leaves the contact point separating
        or at rest (no penetration) without adding kinetic energy (``v_c``, ``A``: the
        contact-frame velocity and inverse inertia of
        :func:`~dynid.model.planar_impact.contact_quantities`)."""
        v_n = v_c[..., 1] + (A @ p[..., None])[..., 1, 0]
        return (v_n >= 0.0) & (energy_change(p, v_c, A) <= 0.0)


def save_policy(policy: DensityNetwork, path: str | Path) -> Path:
    """Write the policy's ``state_dict`` (tensors only) with its width and outputs to ``path``."""
    return save_state(policy, path, hidden=policy.hidden, outputs=policy.outputs)


def load_policy(path: str | Path) -> DensityNetwork:
    """Read a policy written by :func:`save_policy` (``weights_only=True``: no unpickling).

    Raises:
        ValueError: the file is not such a state dict (naming the file and the missing keys).
    """
    return load_state(path, DensityNetwork, "residual policy", ("hidden", "outputs"))
