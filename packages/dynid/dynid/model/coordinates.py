"""``Coordinates``: the three coordinate systems of a box of parameters and the maps between them.

- physical ``θ`` (SI units of each entry), inside ``[lower, upper]``;
- the unit box ``u = (θ − lower) / (upper − lower) ∈ [0, 1]`` (csvgd App. I-C), where the
  particle estimators, the samplers and least squares work for conditioning;
- unconstrained ``y = logit(u) = log u − log(1 − u)``, so that ``θ = lower + (upper − lower) σ(y)``
  covers the open box for every real ``y`` (optimisers and samplers that need the whole line).

An entry with an infinite bound (the shooting variables of an augmented likelihood vector) is
already unconstrained: every map passes it through unchanged. ``ParameterSpec.coordinates`` is the
transform of a problem's free parameters; a likelihood's ``coordinates`` that of its augmented
vector.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dynid.model.errors import StateError

__all__ = ["Coordinates"]


class Coordinates:
    """Maps between physical values, the unit box and unconstrained values of ``D`` entries.

    Every method takes tensors ``[..., D]`` of any dtype and device (the bounds follow them) and
    returns the same shape; only :meth:`log_abs_det_jacobian` sums over the last dimension.

    Args:
        lower, upper: ``[D]`` bounds (``lower < upper`` where both are finite); an entry with an
            infinite bound is unconstrained and passes through every map.

    Attributes:
        dim: ``D``.
        lower, upper: ``[D]`` float64 bounds as given.
        bounded: ``[D]`` bool, entries with both bounds finite.
        scale: ``[D]`` float64 ``∂θ/∂u``: ``upper − lower`` on bounded entries, ``1`` elsewhere
            (a Jacobian or covariance in the unit box times it is in physical units).

    Raises:
        StateError: bounds of different shapes, not 1-D, or a finite box that is empty.
    """

    def __init__(self, lower: Tensor, upper: Tensor) -> None:
        lower = torch.as_tensor(lower, dtype=torch.float64)
        upper = torch.as_tensor(upper, dtype=torch.float64)
        if lower.dim() != 1 or lower.shape != upper.shape:
            raise StateError(
                f"coordinates: lower and upper must be [D] of one shape, got "
                f"{tuple(lower.shape)} and {tuple(upper.shape)}"
            )
        self.dim = int(lower.shape[0])
        self.bounded = torch.isfinite(lower) & torch.isfinite(upper)
        width = upper - lower
        if bool((self.bounded & ~(width > 0)).any()):
            empty = torch.nonzero(self.bounded & ~(width > 0)).flatten().tolist()
            raise StateError(f"coordinates: entries {empty} have upper ≤ lower")
        self.lower, self.upper = lower, upper
        # the affine maps are the identity on unbounded entries
        self._offset = torch.where(self.bounded, lower, torch.zeros_like(lower))
        self.scale = torch.where(self.bounded, width, torch.ones_like(width))

    def __repr__(self) -> str:
        return f"Coordinates(dim={self.dim}, bounded={int(self.bounded.sum())})"

    def _box(self, like: Tensor, what: str) -> tuple[Tensor, Tensor]:
        if like.shape[-1:] != (self.dim,):
            raise StateError(f"{what}: last dim is {tuple(like.shape)}, expected D={self.dim}")
        return self._offset.to(like), self.scale.to(like)

    # ------------------------------------------------------------------ unit box
    def to_unit(self, theta: Tensor) -> Tensor:
        """``θ → u = (θ − lower) / (upper − lower)``; not clipped (outside the box: outside
        ``[0, 1]``)."""
        lo, width = self._box(theta, "to_unit(theta)")
        return (theta - lo) / width

    def from_unit(self, u: Tensor) -> Tensor:
        """``u → θ = lower + u (upper − lower)``; the inverse of :meth:`to_unit`."""
        lo, width = self._box(u, "from_unit(u)")
        return lo + u * width

    def clamp(self, theta: Tensor) -> Tensor:
        """``θ`` clipped into ``[lower, upper]``."""
        self._box(theta, "clamp(theta)")
        return torch.maximum(torch.minimum(theta, self.upper.to(theta)), self.lower.to(theta))

    # ------------------------------------------------------------------ unconstrained
    def to_unconstrained(self, theta: Tensor, margin: float = 0.0) -> Tensor:
        """``θ → y = log u − log(1 − u)`` with ``u`` clipped into ``[margin, 1 − margin]``.

        Args:
            theta: ``[..., D]`` physical values.
            margin: distance kept from the bounds in the unit box (``0 ≤ margin < ½``), so that a
                value on a bound maps to a finite ``y``.
        """
        if not 0.0 <= margin < 0.5:
            raise StateError(f"to_unconstrained: margin must be in [0, 0.5), got {margin}")
        u = self.to_unit(theta).clamp(margin, 1.0 - margin)
        y = torch.log(u) - torch.log1p(-u)
        return torch.where(self.bounded.to(theta.device), y, theta)

    def from_unconstrained(self, y: Tensor) -> Tensor:
        """``y → θ = lower + (upper − lower) σ(y)``; the inverse of :meth:`to_unconstrained`
        inside the margin."""
        lo, width = self._box(y, "from_unconstrained(y)")
        return torch.where(self.bounded.to(y.device), lo + width * torch.sigmoid(y), y)

    def log_abs_det_jacobian(self, y: Tensor) -> Tensor:
        """``[...]`` ``log |det ∂θ/∂y|`` of :meth:`from_unconstrained`:
        ``Σ log(upper − lower) + log σ(y) + log σ(−y)`` over the bounded entries."""
        _, width = self._box(y, "log_abs_det_jacobian(y)")
        logsigmoid = torch.nn.functional.logsigmoid
        per_entry = torch.log(width) + logsigmoid(y) + logsigmoid(-y)
        return torch.where(self.bounded.to(y.device), per_entry, torch.zeros_like(y)).sum(-1)
