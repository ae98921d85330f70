"""Causal state-variable filter: a low-passed signal and its first two derivatives, one delay.

The continuous filter is the 2nd-order Butterworth low-pass ``H(s) = ω² / (s² + √2 ω s + ω²)``;
its outputs are ``H x``, ``s H x`` and ``s² H x`` (the filtered signal, its derivative and its
second derivative). All three are discretised by the bilinear transform ``s = (2/Δt)(1 − z⁻¹) /
(1 + z⁻¹)`` with the cut-off pre-warped (the low-pass is
:func:`dynid.data.preprocess.butterworth2`), so they share one denominator: the derivatives are
those of the filtered signal and every output carries the same phase lag. A signal filtered by
:attr:`StateVariableFilter.low` only (the joint torques) is delayed exactly as the derivatives
are, which keeps an equation error ``τ_f = Y(q_f, q̇_f, q̈_f) π`` consistent.

Samples may be pushed one at a time or in blocks (``[B, C]``, B samples of C channels); a block
gives the outputs sample by sample as one-at-a-time pushes would (``scipy.signal.lfilter`` with
its state carried over). The first sample initialises the state at rest at that value.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter, lfilter_zi

from dynid.data.preprocess import butterworth2

__all__ = ["CausalFilter", "StateVariableFilter"]

Array = NDArray[np.float64]


class CausalFilter:
    """One discrete transfer function ``b / a`` over ``C`` channels, its state carried between
    blocks. ``steady`` is the filter's gain at zero frequency, used to start at rest."""

    def __init__(self, b: Array, a: Array) -> None:
        self.b = np.asarray(b, dtype=np.float64) / a[0]
        self.a = np.asarray(a, dtype=np.float64) / a[0]
        self._zi_unit = lfilter_zi(self.b, self.a)
        self._state: Array | None = None

    def reset(self) -> None:
        """Forget the state; the next sample starts the filter at rest again."""
        self._state = None

    def __call__(self, x: Array) -> Array:
        """Filter ``x [B, C]`` (B ≥ 1 samples in time order) and return ``[B, C]``."""
        x = np.asarray(x, dtype=np.float64)
        if self._state is None:
            self._state = self._zi_unit[:, None] * x[0][None, :]
        y, self._state = lfilter(self.b, self.a, x, axis=0, zi=self._state)
        return np.asarray(y)


class StateVariableFilter:
    """The filtered signal and its first two derivatives (module docstring).

    Args:
        dt: sample period (s), > 0.
        cutoff_hz: cut-off of the Butterworth low-pass (Hz), in ``(0, 0.5/dt)``.

    Raises:
        ValueError: ``dt`` or ``cutoff_hz`` out of range (the caller names the setting).
    """

    def __init__(self, dt: float, cutoff_hz: float) -> None:
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f"sample period must be > 0 s, got {dt!r}")
        if not (math.isfinite(cutoff_hz) and 0.0 < cutoff_hz < 0.5 / dt):
            raise ValueError(
                f"cut-off must be in (0, {0.5 / dt:g}) Hz (below Nyquist), got {cutoff_hz!r}"
            )
        self.dt = float(dt)
        self.cutoff_hz = float(cutoff_hz)
        low, self._a = butterworth2(cutoff_hz, 1.0 / dt)
        # low = g (1 + z⁻¹)²; s = k (1 − z⁻¹) / (1 + z⁻¹) turns one factor (1 + z⁻¹) into
        # k (1 − z⁻¹) per derivative, over the same denominator
        g, k = low[0], 2.0 / dt
        minus, plus = np.array([1.0, -1.0]), np.array([1.0, 1.0])
        self._numerators = (
            low,
            g * k * np.polymul(minus, plus),
            g * k**2 * np.polymul(minus, minus),
        )

    def low(self) -> CausalFilter:
        """A fresh low-pass ``H`` (e.g. for the torques)."""
        return CausalFilter(self._numerators[0], self._a)

    def derivative(self, order: int) -> CausalFilter:
        """A fresh ``s^order H`` (``order`` 0, 1 or 2)."""
        return CausalFilter(self._numerators[order], self._a)

    def group_delay(self) -> float:
        """The low-pass's group delay at zero frequency (s): ``√2 / ω``, the lag every output
        carries for slow signals."""
        return math.sqrt(2.0) / (2.0 * math.pi * self.cutoff_hz)

    def white_noise_rho(self, lags: int) -> Array:
        """``ρ_k [lags + 1]``: the autocorrelation of white noise through the low-pass,
        ``Σ_i h_i h_{i+k} / Σ_i h_i²`` over its impulse response ``h``."""
        unit = np.zeros(max(2 * lags + 2, math.ceil(20.0 / (self.cutoff_hz * self.dt))))
        unit[0] = 1.0
        h = lfilter(self._numerators[0], self._a, unit)
        r = np.array([h[: h.size - k] @ h[k:] for k in range(lags + 1)])
        return r / r[0]
