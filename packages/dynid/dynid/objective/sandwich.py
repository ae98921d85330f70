"""The covariance of a least-squares estimate on residuals that are correlated in time.

A torque (``inverse_dynamics``) problem scores filtered recordings: the low-pass correlates each
joint's residual over neighbouring samples, and what the model does not describe (a friction law
other than the model's, a sensor's dynamics) leaves residuals that are smooth in time and
correlated with the regressors. The Gauss–Newton covariance ``s² (JᵀJ)⁻¹`` takes every scored
sample as independent evidence and is too narrow on such data. The estimators of a torque problem
whose answer is one estimate with a covariance (``lm``, ``consistent_lsq``) take their covariance
from here instead:

- :func:`sample_scores`: each time sample's score ``g_k = J_kᵀ r_k`` (the gradient of its half
  squared whitened residuals at the estimate, summed over the sample's rows: the joints).
- :func:`long_run_covariance`: ``Ŝ = Σ_k g_k g_kᵀ + Σ_{l=1}^{L} (1 − l/(L+1)) Σ_k (g_k g_{k−l}ᵀ +
  g_{k−l} g_kᵀ)`` (Newey and West 1987; Bartlett weights), with cross-products only within one
  trajectory.
- :func:`bandwidth`: ``L`` from the scores themselves, Andrews' (1991) plug-in for the Bartlett
  kernel under an AR(1) fit of each score series, ``L = 1.1447 (α̂ K)^{1/3}``,
  ``α̂ = Σ_a 4 ρ_a² σ_a⁴ / ((1 − ρ_a)⁶ (1 + ρ_a)²) / Σ_a σ_a⁴ / (1 − ρ_a)⁴``: the longer the scores
  stay correlated, the more lags are summed (a fixed rule in ``K`` alone, e.g. Newey and West
  1994, sums a handful of lags whatever the residuals' correlation time).
- :func:`sandwich_covariance`: ``H⁻¹ (Ŝ + P) H⁻¹`` with ``H = JᵀJ + P`` (``P``: a prior's precision,
  which is not data and is not correlated with them). With a prior this is the sampling
  covariance of the penalised estimate; where ``Ŝ`` exceeds ``JᵀJ`` by more than the prior
  allows it can be wider than the prior itself (the Godambe form ``(JᵀJ Ŝ⁻¹ JᵀJ + P)⁻¹`` would
  not be).

:func:`correlation_time` is the integrated autocorrelation ``τ = 1 + 2 Σ ρ_l`` of each joint's
residual: ``S / τ`` is the number of independent samples the ``S`` scored ones are worth.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "bandwidth",
    "correlation_time",
    "long_run_covariance",
    "sample_scores",
    "sandwich_covariance",
    "with_floor",
]

#: Largest |ρ| of a score series' AR(1) fit that :func:`bandwidth` uses: a series that is nearly a
#: random walk gives the plug-in no finite rate, and the bandwidth is capped by the data anyway.
MAX_AR1 = 0.97


def sample_scores(J: np.ndarray, r: np.ndarray, rows: int) -> np.ndarray:
    """``[K, M]`` per-sample scores ``g_k = Σ_{i in sample k} J_i r_i``.

    Args:
        J: ``[R, M]`` Jacobian of the whitened residuals (rows sample-major, ``R = K · rows``).
        r: ``[R]`` whitened residuals.
        rows: residual rows per time sample (the joints).

    Raises:
        ValueError: ``R`` is not a multiple of ``rows`` or the shapes disagree.
    """
    R, M = J.shape
    if r.shape != (R,) or rows < 1 or R % rows:
        raise ValueError(f"scores: J {J.shape} and r {r.shape} are not samples of {rows} rows each")
    return (J * r[:, None]).reshape(-1, rows, M).sum(axis=1)


def _pieces(scores: np.ndarray, segments: Sequence[int] | None) -> list[np.ndarray]:
    """``scores`` split into its trajectories of ``segments`` samples (one piece without)."""
    if segments is None:
        return [scores]
    if sum(segments) != scores.shape[0]:
        raise ValueError(f"segments {list(segments)} do not add up to {scores.shape[0]} samples")
    return [p for p in np.split(scores, np.cumsum(segments)[:-1]) if p.shape[0]]


def bandwidth(scores: np.ndarray, segments: Sequence[int] | None = None) -> int:
    """Lags ``L`` of :func:`long_run_covariance` by Andrews' AR(1) plug-in (module notes),
    between 0 and the longest trajectory's samples − 1.

    Args:
        scores: ``[K, M]`` per-sample scores.
        segments: samples per trajectory (``None``: one trajectory).
    """
    pieces = _pieces(scores, segments)
    longest = max(p.shape[0] for p in pieces)
    if longest < 3:
        return 0
    head = np.concatenate([p[1:] for p in pieces])
    tail = np.concatenate([p[:-1] for p in pieces])
    den = (tail * tail).sum(0)
    ok = den > 0.0
    if not ok.any():
        return 0
    rho = np.clip((head * tail).sum(0)[ok] / den[ok], -MAX_AR1, MAX_AR1)
    s2 = ((head[:, ok] - rho * tail[:, ok]) ** 2).mean(0)
    num = (4.0 * rho**2 * s2**2 / ((1.0 - rho) ** 6 * (1.0 + rho) ** 2)).sum()
    alpha = num / (s2**2 / (1.0 - rho) ** 4).sum()
    lags = int(np.ceil(1.1447 * (alpha * scores.shape[0]) ** (1.0 / 3.0)))
    return int(min(max(lags, 0), longest - 1))


def long_run_covariance(
    scores: np.ndarray, segments: Sequence[int] | None = None, lags: int | None = None
) -> np.ndarray:
    """``[M, M]`` Bartlett-weighted long-run covariance of ``scores [K, M]`` (module notes).

    Args:
        scores: per-sample scores, trajectories one after the other.
        segments: samples per trajectory (``None``: one trajectory); no cross-product spans two.
        lags: ``L``; default :func:`bandwidth`.
    """
    pieces = _pieces(scores, segments)
    L = bandwidth(scores, segments) if lags is None else int(lags)
    S = sum(p.T @ p for p in pieces)
    for lag in range(1, L + 1):
        C = sum(p[lag:].T @ p[:-lag] for p in pieces if p.shape[0] > lag)
        if isinstance(C, np.ndarray):
            S = S + (1.0 - lag / (L + 1.0)) * (C + C.T)
    return np.asarray(S)


def sandwich_covariance(
    J: np.ndarray,
    r: np.ndarray,
    rows: int,
    *,
    segments: Sequence[int] | None = None,
    prior_precision: np.ndarray | None = None,
) -> np.ndarray:
    """``[M, M]`` covariance ``H⁻¹ (Ŝ + P) H⁻¹ · R / (R − M)`` of the least-squares estimate
    with whitened residuals ``r [R]`` and Jacobian ``J [R, M]`` at it (``H = JᵀJ + P``,
    ``Ŝ`` :func:`long_run_covariance` of :func:`sample_scores`), in ``J``'s coordinates.

    Args:
        J, r, rows: as :func:`sample_scores`.
        segments: samples per trajectory (``None``: one trajectory).
        prior_precision: ``[M, M]`` ``P`` (``None``: no prior; ``JᵀJ`` must then be invertible).

    Raises:
        numpy.linalg.LinAlgError: ``H`` is singular.
    """
    R, M = J.shape
    P = np.zeros((M, M)) if prior_precision is None else prior_precision
    H = J.T @ J + P
    d = 1.0 / np.sqrt(np.maximum(np.diag(H), 1e-300))  # Jacobi scaling: parameters of all sizes
    H_inv = np.linalg.inv(H * np.outer(d, d)) * np.outer(d, d)
    S = long_run_covariance(sample_scores(J, r, rows), segments) * R / max(R - M, 1)
    cov = H_inv @ (S + P) @ H_inv
    return 0.5 * (cov + cov.T)


def with_floor(cov: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """``cov [M, M]`` rescaled so that each standard deviation is at least that of ``floor``
    ``[M, M]`` (the model's own covariance, e.g. the Laplace one), keeping ``cov``'s
    correlations; a parameter with zero variance in ``cov`` takes ``floor``'s."""
    var, least = np.clip(np.diag(cov), 0.0, None), np.clip(np.diag(floor), 0.0, None)
    seen = var > 0.0
    scale = np.ones_like(var)
    scale[seen] = np.sqrt(np.maximum(1.0, least[seen] / var[seen]))
    out = cov * np.outer(scale, scale)
    idx = np.flatnonzero(~seen)
    out[idx, idx] = least[idx]
    return out


def correlation_time(residuals: np.ndarray, samples: Sequence[int]) -> np.ndarray:
    """``[nv]`` integrated autocorrelation ``1 + 2 Σ_l ρ_l`` of each joint's residual
    ``[S, nv]`` (trajectories of ``samples`` rows one after the other), summed up to the first
    lag whose autocorrelation is not positive; at least 1."""
    nv = residuals.shape[1]
    tau = np.ones(nv)
    pieces = np.split(residuals, np.cumsum(samples)[:-1])
    for j in range(nv):
        series = [p[:, j] - p[:, j].mean() for p in pieces if p.shape[0] > 2]
        var = sum(float(x @ x) for x in series)
        if var <= 0.0:
            continue
        longest = max(x.size for x in series)
        for k in range(1, longest // 2):
            rho = sum(float(x[:-k] @ x[k:]) for x in series if x.size > k) / var
            if rho <= 0.0:
                break
            tau[j] += 2.0 * rho
    return tau
