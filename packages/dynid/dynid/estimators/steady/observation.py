"""Observation models ``Q_y(y | x)`` of STEADY's particle filter.

Every model scores ``[N, D]`` particles against one observation ``y [k]`` and can draw
observations. A ``NaN`` entry of ``y`` is a missing reading (a dropout, a sensor that did not
report at that step): it contributes nothing.

- :class:`BearingObservation`: bearings to known landmarks (the steady paper's sensor).
- :class:`EncoderObservation`: joint encoders with Gaussian noise then quantisation.
- :class:`PoseObservation`: motion-capture positions and angles with dropouts.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from dynid.errors import EstimatorError

__all__ = [
    "BearingObservation",
    "EncoderObservation",
    "ObservationModel",
    "PoseObservation",
    "wrap_angle",
]


def wrap_angle(a: torch.Tensor) -> torch.Tensor:
    """``a`` (rad) wrapped into ``[−π, π)``."""
    return torch.remainder(a + math.pi, 2.0 * math.pi) - math.pi


def _positive(name: str, value: float, allow_zero: bool = False) -> float:
    value = float(value)
    if not (value >= 0.0 if allow_zero else value > 0.0) or not math.isfinite(value):
        bound = "≥ 0" if allow_zero else "> 0"
        raise EstimatorError(f"observation model: {name} must be finite and {bound}, got {value}")
    return value


class ObservationModel(ABC):
    """``Q_y``: ``log_prob(x [N, D], y [k]) -> [N]`` and ``sample(x [..., D]) -> [..., k]``."""

    @abstractmethod
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., k]`` noise-free observations of ``x [..., D]``."""

    @abstractmethod
    def channel_log_prob(self, predicted: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[..., k]`` per-channel log-density of ``y`` given the noise-free ``predicted``."""

    @abstractmethod
    def sample(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """``[..., k]`` observations drawn for ``x [..., D]``."""

    def log_prob(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[N]`` log ``Q_y(y | x_i)`` summed over the channels of ``y [k]`` that are not NaN."""
        present = ~torch.isnan(y)
        if not present.any():
            return torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
        per_channel = self.channel_log_prob(self.predict(x), torch.where(present, y, 0.0).to(x))
        return (per_channel * present).sum(-1)


class BearingObservation(ObservationModel):
    """Bearings of landmarks relative to the heading, ``y_l = wrap(atan2(Δy, Δx) − θ) + n``,
    ``n ~ N(0, std²)`` scored on the wrapped difference.

    Args:
        landmarks: ``[L, 2]`` landmark positions (m, world frame).
        std: bearing noise (rad).
        position, heading: state indices of ``(p_x, p_y)`` and ``θ``.
    """

    def __init__(
        self,
        landmarks: Sequence[Sequence[float]] | torch.Tensor,
        std: float,
        *,
        position: tuple[int, int] = (0, 1),
        heading: int = 2,
    ) -> None:
        self.landmarks = torch.as_tensor(landmarks, dtype=torch.float64)
        if self.landmarks.ndim != 2 or self.landmarks.shape[1] != 2:
            raise EstimatorError(
                f"bearing observation: landmarks must be [L, 2], got {tuple(self.landmarks.shape)}"
            )
        self.std = _positive("std", std)
        self.position = position
        self.heading = heading

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        lm = self.landmarks.to(x)
        dx = lm[:, 0] - x[..., self.position[0], None]
        dy = lm[:, 1] - x[..., self.position[1], None]
        return wrap_angle(torch.atan2(dy, dx) - x[..., self.heading, None])

    def channel_log_prob(self, predicted: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = wrap_angle(y - predicted) / self.std
        return -0.5 * z * z - math.log(self.std * math.sqrt(2.0 * math.pi))

    def sample(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        clean = self.predict(x)
        noise = torch.randn(clean.shape, generator=generator, dtype=x.dtype, device=x.device)
        return wrap_angle(clean + self.std * noise)


def _log_normal_interval(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(Φ(b) − Φ(a))`` for ``a < b``, accurate in both tails."""
    flip = a > 0  # both in the upper tail: use the mirrored interval (−b, −a)
    lo = torch.where(flip, -b, a)
    hi = torch.where(flip, -a, b)
    log_hi = torch.special.log_ndtr(hi)
    log_lo = torch.special.log_ndtr(lo)
    return log_hi + torch.log1p(-torch.exp((log_lo - log_hi).clamp(max=-1e-12)))


class EncoderObservation(ObservationModel):
    """Joint encoders: ``y = resolution · round((q + n) / resolution)``, ``n ~ N(0, std²)``.

    The likelihood of a reading is the probability that ``q + n`` falls in its quantisation cell,
    ``Φ((y + r/2 − q)/σ) − Φ((y − r/2 − q)/σ)``; with ``resolution = 0`` it is the Gaussian.

    Args:
        indices: state indices of the observed joint positions.
        std: ``σ`` (rad or m), one value or one per joint.
        resolution: quantisation step ``r`` (rad or m per count), one value or one per joint.
    """

    def __init__(
        self,
        indices: Sequence[int],
        std: float | Sequence[float],
        resolution: float | Sequence[float] = 0.0,
    ) -> None:
        self.indices = list(indices)
        k = len(self.indices)
        self.std = torch.as_tensor(std, dtype=torch.float64).expand(k).clone()
        self.resolution = torch.as_tensor(resolution, dtype=torch.float64).expand(k).clone()
        for name, value, zero in (("std", self.std, False), ("resolution", self.resolution, True)):
            for v in value.tolist():
                _positive(name, v, allow_zero=zero)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., self.indices]

    def channel_log_prob(self, predicted: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        std = self.std.to(predicted)
        half = 0.5 * self.resolution.to(predicted)
        gaussian = -0.5 * ((y - predicted) / std) ** 2 - torch.log(std * math.sqrt(2 * math.pi))
        cell = _log_normal_interval((y - half - predicted) / std, (y + half - predicted) / std)
        return torch.where(half > 0, cell, gaussian)

    def sample(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        clean = self.predict(x)
        noise = torch.randn(clean.shape, generator=generator, dtype=x.dtype, device=x.device)
        noisy = clean + self.std.to(clean) * noise
        r = self.resolution.to(clean)
        return torch.where(r > 0, torch.round(noisy / torch.where(r > 0, r, 1.0)) * r, noisy)


class PoseObservation(ObservationModel):
    """Motion capture: positions and angles of the state with Gaussian noise; a frame is lost
    (all channels NaN) with probability ``dropout`` when sampling.

    Args:
        positions: state indices observed as positions (m).
        angles: state indices observed as angles (rad; errors wrapped).
        position_std, angle_std: noise std (m, rad).
        dropout: probability that a sampled frame is missing.
    """

    def __init__(
        self,
        positions: Sequence[int],
        angles: Sequence[int],
        position_std: float,
        angle_std: float,
        *,
        dropout: float = 0.0,
    ) -> None:
        self.indices = [*positions, *angles]
        if not self.indices:
            raise EstimatorError("pose observation: no positions or angles to observe")
        self.is_angle = torch.tensor([False] * len(positions) + [True] * len(angles))
        std = [_positive("position_std", position_std)] * len(positions)
        std += [_positive("angle_std", angle_std)] * len(angles)
        self.std = torch.tensor(std, dtype=torch.float64)
        if not 0.0 <= dropout < 1.0:
            raise EstimatorError(f"pose observation: dropout must be in [0, 1), got {dropout}")
        self.dropout = float(dropout)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., self.indices]

    def channel_log_prob(self, predicted: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        diff = y - predicted
        diff = torch.where(self.is_angle.to(diff.device), wrap_angle(diff), diff)
        std = self.std.to(predicted)
        return -0.5 * (diff / std) ** 2 - torch.log(std * math.sqrt(2.0 * math.pi))

    def sample(self, x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        clean = self.predict(x)
        noise = torch.randn(clean.shape, generator=generator, dtype=x.dtype, device=x.device)
        y = clean + self.std.to(clean) * noise
        y = torch.where(self.is_angle.to(y.device), wrap_angle(y), y)
        lost = torch.rand(clean.shape[:-1], generator=generator, dtype=x.dtype) < self.dropout
        return torch.where(lost.unsqueeze(-1).to(y.device), torch.nan, y)
