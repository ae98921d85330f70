"""What the torque residuals tell: how correlated they are in time, and whether their mean moved.

:class:`CorrelationTime` measures the autocorrelation ``ρ_k`` of whitened residuals over lags
``k = 0 … L`` (exponentially forgotten, per channel) and from it the integrated
autocorrelation time ``κ = 1 + 2 Σ_{k ≥ 1} ρ_k``, the sum stopped at the first lag where ``ρ``
falls below zero (Geyer's initial positive sequence), and the variance factor of a mean of ``M``
consecutive samples ``v_M = (1 + 2 Σ_{k<M} (1 − k/M) ρ_k) / M``. Both are bounded below by their
values for a floor autocorrelation ``ρ_floor`` (that of white noise through the low-pass every
residual has passed): a sum over noisy lags stopped early would otherwise understate them.

:class:`Cusum` is Page's two-sided CUSUM per channel on standardised block means ``z`` (≈ N(0, 1)
while nothing changes)::

    S⁺ ← max(0, S⁺ + z − k),   S⁻ ← max(0, S⁻ − z − k),   alarm when S⁺ or S⁻ > h

with the change time estimated as the last block at which the alarming sum was zero. The
threshold ``h`` comes from the false-alarm rate the user accepts (:func:`cusum_threshold`),
through Siegmund's approximation of the in-control average run length of a one-sided CUSUM of
unit-variance Gaussian increments, ``ARL₀ ≈ (e^{2kb} − 2kb − 1) / (2k²)`` with ``b = h + 1.166``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

__all__ = ["CorrelationTime", "Cusum", "cusum_threshold"]

Array = NDArray[np.float64]


class CorrelationTime:
    """Running autocorrelation of ``C`` channels up to ``lags`` (module docstring).

    Args:
        lags: ``L``, the longest lag measured (samples), ≥ 1.
        forgetting: per-sample factor of the running sums, in ``(0, 1)``.
        floor: ``ρ_floor [L + 1]``, the floor autocorrelation (reported alone until ``lags``
            samples have been seen).
        stride: the products ``e_i e_{i−k}`` are summed for every ``stride``-th sample ``i``
            only (all lags of it): the same expectation at a ``stride``-th of the cost.
    """

    def __init__(self, lags: int, forgetting: float, floor: Array, stride: int = 1) -> None:
        self.stride = int(stride)
        self.lags = int(lags)
        self.forgetting = float(forgetting)
        self.floor = np.asarray(floor, dtype=np.float64).reshape(self.lags + 1)
        self._floor_kappa = 1.0 + 2.0 * float(self.floor[1:].sum())
        self.reset()

    def reset(self) -> None:
        """Forget every sample."""
        self._history: Array | None = None
        self._sums: Array | None = None
        self._seen = 0
        self._rho: Array | None = None

    def add(self, e: Array) -> None:
        """Add the whitened residuals ``e [B, C]`` (time order)."""
        if e.shape[0] == 0:
            return
        past = self._history if self._history is not None else np.zeros((self.lags, e.shape[1]))
        joined = np.concatenate((past, e), axis=0)
        windows = sliding_window_view(joined, self.lags + 1, axis=0)  # [B, C, L+1], oldest first
        index = np.arange(e.shape[0]) + self._seen  # the samples' running numbers
        rows = np.flatnonzero(index % self.stride == 0)
        w = self.forgetting ** (e.shape[0] - 1 - rows).astype(np.float64)
        # lags reaching before the first sample count nothing
        w = np.where(np.arange(self.lags + 1)[None, :] <= index[rows, None], w[:, None], 0.0)
        # lag k at row k: Σ_b w_bk e_bc e_(b-k)c
        sums = np.einsum("bk,bck->kc", w, e[rows, :, None] * windows[rows, :, ::-1])
        decay = self.forgetting ** e.shape[0]
        self._sums = sums if self._sums is None else decay * self._sums + sums
        self._history = joined[-self.lags :]
        self._seen += e.shape[0]
        self._rho = self._measured_rho()

    def rho(self) -> Array | None:
        """``ρ_k [L + 1, C]`` (``ρ_0 = 1``) up to the first negative lag of each channel (zero
        beyond it), or ``None`` before ``lags`` samples."""
        return self._rho

    def _measured_rho(self) -> Array | None:
        if self._sums is None or self._seen < self.lags or not (self._sums[0] > 0.0).all():
            return None
        rho = self._sums / self._sums[0]
        return np.where(np.cumprod(rho >= 0.0, axis=0).astype(bool), rho, 0.0)

    def kappa(self) -> Array | float:
        """``κ [C]`` (samples), at least the floor's (the floor's alone before enough
        samples)."""
        rho = self.rho()
        if rho is None:
            return self._floor_kappa
        return np.maximum(self._floor_kappa, 1.0 + 2.0 * rho[1:].sum(axis=0))

    def mean_variance(self, m: int) -> Array | float:
        """``v_M [C]``: the variance of a mean of ``m`` consecutive unit-variance samples, at
        least the floor's."""
        k = np.arange(1, min(m, self.lags + 1))
        weights = 1.0 - k / m
        floor = (1.0 + 2.0 * float(weights @ self.floor[k])) / m
        rho = self.rho()
        if rho is None:
            return floor
        return np.maximum(floor, (1.0 + 2.0 * (weights[:, None] * rho[k]).sum(0)) / m)


def cusum_threshold(drift: float, arl: float) -> float:
    """``h`` at which one one-sided CUSUM of reference ``drift`` (``k`` > 0) has an in-control
    average run length of ``arl`` blocks (Siegmund's approximation, module docstring)."""
    lo, hi = 0.0, 300.0 / drift
    for _ in range(200):
        h = 0.5 * (lo + hi)
        x = 2.0 * drift * (h + 1.166)
        if (math.expm1(x) - x) / (2.0 * drift**2) < arl:
            lo = h
        else:
            hi = h
    return hi


class Cusum:
    """Two-sided CUSUM on ``C`` channels (module docstring).

    Args:
        channels: ``C``.
        drift: ``k``, half the smallest shift (in σ of a block mean) it is meant to catch.
        threshold: ``h``.
    """

    def __init__(self, channels: int, drift: float, threshold: float) -> None:
        self.drift = float(drift)
        self.threshold = float(threshold)
        self.channels = int(channels)
        self.reset(-math.inf)

    def reset(self, time: float) -> None:
        """Zero the sums at ``time`` (s)."""
        self.upper = np.zeros(self.channels)
        self.lower = np.zeros(self.channels)
        self._zero_upper = np.full(self.channels, float(time))
        self._zero_lower = np.full(self.channels, float(time))

    def add(self, z: Array, time: float) -> tuple[int, float, float] | None:
        """Add one block's ``z [C]`` ending at ``time`` (s); on an alarm the channel, the change
        time (the end of the last block at which its sum was zero) and the statistic."""
        self.upper = np.maximum(0.0, self.upper + z - self.drift)
        self.lower = np.maximum(0.0, self.lower - z - self.drift)
        for sums, zero in ((self.upper, self._zero_upper), (self.lower, self._zero_lower)):
            over = np.flatnonzero(sums > self.threshold)
            if over.size:
                c = int(over[np.argmax(sums[over])])
                return c, float(zero[c]), float(sums[c])
            zero[sums == 0.0] = time
        return None
