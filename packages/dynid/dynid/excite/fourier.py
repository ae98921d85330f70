"""Rest-to-rest Fourier-series joint trajectories, differentiable in their coefficients.

Each joint follows the finite Fourier series of Swevers et al. (1997) in the convention of Gaz et
al. 2019 (their Table II), whose coefficients are velocity amplitudes::

    f_j(t) = Σ_{l=1..H} a_{l,j}/(l ω_f) sin(l ω_f t) − b_{l,j}/(l ω_f) cos(l ω_f t) + c_j,

with ``c_j = Σ_l b_{l,j}/(l ω_f)`` so that ``f_j(0) = 0``. The motion starts and ends at rest at
``q_start``::

    q_j(t) = q_start,j + w(t) f_j(t),

where the window ``w`` rises from 0 to 1 over the first ``ramp`` seconds and falls back over the
last ``ramp`` seconds as the septic smoothstep ``35x⁴ − 84x⁵ + 70x⁶ − 20x⁷``, whose first three
derivatives vanish at both ends. Hence ``q(0) = q(T) = q_start`` and ``q̇ = q̈ = q⃛ = 0`` at both
ends, and the jerk is continuous (bounded) everywhere. Positions in rad (m for prismatic joints),
times in s, ``ω_f`` in rad/s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

__all__ = ["FourierMotion", "septic_window"]

Array = NDArray[np.float64]


def septic_window(t: torch.Tensor, duration: float, ramp: float) -> tuple[torch.Tensor, ...]:
    """``(w, ẇ, ẅ, w⃛)`` of the window at times ``t [S]`` (module notes); ``ramp`` in s,
    ``0 < 2 ramp ≤ duration``."""
    x_in = (t / ramp).clamp(0.0, 1.0)
    x_out = ((duration - t) / ramp).clamp(0.0, 1.0)

    def smooth(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x2, x3 = x * x, x * x * x
        x4 = x2 * x2
        s = x4 * (35 - 84 * x + 70 * x2 - 20 * x3)
        d1 = x3 * (140 - 420 * x + 420 * x2 - 140 * x3)
        d2 = x2 * (420 - 1680 * x + 2100 * x2 - 840 * x3)
        d3 = x * (840 - 5040 * x + 8400 * x2 - 4200 * x3)
        return s, d1, d2, d3

    s_in, s_out = smooth(x_in), smooth(x_out)
    w = s_in[0] * s_out[0]  # the ramps do not overlap: one factor is 1 wherever the other moves
    # d/dt of s(x_out) flips the sign of odd derivatives
    dw = s_in[1] / ramp * s_out[0] - s_in[0] * s_out[1] / ramp
    ddw = s_in[2] / ramp**2 * s_out[0] + s_in[0] * s_out[2] / ramp**2
    dddw = s_in[3] / ramp**3 * s_out[0] - s_in[0] * s_out[3] / ramp**3
    return w, dw, ddw, dddw


@dataclass(frozen=True)
class FourierMotion:
    """The shape of a rest-to-rest Fourier excitation (module notes); coefficients are separate.

    Attributes:
        start: ``[nj]`` start and end configuration (rad or m).
        duration: T in s.
        harmonics: H.
        base_frequency: ``ω_f / 2π`` in Hz (default choice: ``1 / duration``).
        ramp: s of each smooth ramp at the ends.
    """

    start: Array
    duration: float
    harmonics: int
    base_frequency: float
    ramp: float

    @property
    def num_joints(self) -> int:
        """nj."""
        return int(np.asarray(self.start).size)

    @property
    def num_coefficients(self) -> int:
        """``2 H nj``: the ``a`` block ``[nj, H]`` then the ``b`` block ``[nj, H]``, row-major."""
        return 2 * self.harmonics * self.num_joints

    def split(self, coefficients: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a, b)``, each ``[nj, H]`` (rad/s), of a flat coefficient vector."""
        nj, H = self.num_joints, self.harmonics
        c = coefficients.reshape(2, nj, H)
        return c[0], c[1]

    def evaluate(
        self, coefficients: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Positions, velocities, accelerations and jerks ``[S, nj]`` at times ``t [S]`` (s),
        differentiable in ``coefficients [2 H nj]``."""
        a, b = self.split(coefficients)
        dtype = coefficients.dtype
        omega = 2.0 * np.pi * self.base_frequency
        ls = torch.arange(1, self.harmonics + 1, dtype=dtype)
        lw = ls * omega  # [H]
        phase = t[:, None] * lw[None, :]  # [S, H]
        s, c = torch.sin(phase), torch.cos(phase)
        # f and its derivatives: [S, nj]
        f = (s / lw) @ a.T - (c / lw) @ b.T + (b / lw).sum(1)
        df = c @ a.T + s @ b.T
        ddf = (-s * lw) @ a.T + (c * lw) @ b.T
        dddf = (-c * lw**2) @ a.T - (s * lw**2) @ b.T
        w, dw, ddw, dddw = (x[:, None] for x in septic_window(t, self.duration, self.ramp))
        start = torch.as_tensor(np.asarray(self.start), dtype=dtype)
        q = start + w * f
        v = dw * f + w * df
        acc = ddw * f + 2 * dw * df + w * ddf
        jerk = dddw * f + 3 * ddw * df + 3 * dw * ddf + w * dddf
        return q, v, acc, jerk

    def times(self, rate: float) -> Array:
        """``[S]`` sample times ``0, 1/rate, …, T`` (s), both ends included."""
        n = round(self.duration * rate)
        return np.arange(n + 1) / float(rate)

    def sample(self, coefficients: Array, rate: float) -> tuple[Array, Array, Array, Array, Array]:
        """``(t, q, q̇, q̈, q⃛)`` as numpy arrays at ``rate`` Hz."""
        t = self.times(rate)
        with torch.no_grad():
            out = self.evaluate(
                torch.as_tensor(np.asarray(coefficients), dtype=torch.float64),
                torch.as_tensor(t, dtype=torch.float64),
            )
        return (t, *(x.numpy() for x in out))
