"""Consistency metrics between sample sets: MMD, kNN KL divergence, trajectory log-likelihood, RMSE.

Inputs are sample sets ``[n, d]`` (parameter particles) or trajectory sets ``[n, T, k]``, which
are flattened to ``d = T·k`` as in the csvgd paper (Sec. IV-F, App. I-D). Everything is float64
numpy; nothing here needs a model.

kNN KL convention (csvgd eq. 11, Wang, Kulkarni and Verdú 2009, eq. (17))::

    D̂(P‖Q) = (d/n) Σ_i log(ν_k(i) / ρ_l(i)) + (1/n) Σ_i [ψ(l) − ψ(k)] + log(m / (n − 1))

with ``X_1..X_n ~ P`` (the first argument), ``Y_1..Y_m ~ Q``, ``ν_k(i)`` the distance from
``X_i`` to its ``k``-th nearest neighbour among the ``Y`` and ``ρ_l(i)`` the distance from
``X_i`` to its ``l``-th nearest neighbour among the other ``X``. Eq. 11 of the paper is the same
formula; only its superscripts are swapped (it calls the distance into ``D^q`` "KNN^p").
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import digamma, logsumexp

from dynid.errors import DynidError

__all__ = [
    "MetricError",
    "gaussian_mmd_bandwidth",
    "knn_kl_divergence",
    "mmd",
    "rmse",
    "trajectory_log_likelihood",
]


def _cdist(a: np.ndarray, b: np.ndarray, metric: str = "euclidean") -> np.ndarray:
    """``scipy.spatial.distance.cdist``, imported on the first call, so that a program computing
    no distance does not load ``scipy.spatial``."""
    from scipy.spatial.distance import cdist

    return cdist(a, b, metric)


class MetricError(DynidError, ValueError):
    """A metric was asked for on sample sets of the wrong shape or size."""


def _as_samples(x: np.ndarray, name: str) -> np.ndarray:
    """``x [n, d]`` or ``[n, T, k]`` → float64 ``[n, d]``; checks finiteness."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim < 2:
        raise MetricError(f"{name} must be a sample set [n, d] or [n, T, k], got {arr.shape}")
    arr = arr.reshape(arr.shape[0], -1)
    if not np.isfinite(arr).all():
        raise MetricError(f"{name} contains NaN or infinite values")
    return arr


def _pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = _as_samples(x, "x"), _as_samples(y, "y")
    if a.shape[1] != b.shape[1]:
        raise MetricError(f"x and y have different dimensions: {a.shape[1]} vs {b.shape[1]}")
    return a, b


def gaussian_mmd_bandwidth(x: np.ndarray, y: np.ndarray) -> float:
    """Median heuristic ``σ = median ‖z_i − z_j‖`` over the pooled samples (``i < j``)."""
    a, b = _pair(x, y)
    z = np.concatenate([a, b])
    dist = _cdist(z, z)
    off = dist[np.triu_indices(z.shape[0], k=1)]
    sigma = float(np.median(off)) if off.size else 1.0
    return sigma if sigma > 0 else 1.0


def mmd(
    x: np.ndarray, y: np.ndarray, bandwidth: float | None = None, *, unbiased: bool = False
) -> float:
    """Squared maximum mean discrepancy with the Gaussian kernel (Gretton et al. 2012).

    Kernel ``k(a, b) = exp(−‖a − b‖² / (2σ²))``; ``σ`` is ``bandwidth`` or, when ``None``, the
    median pairwise distance of the pooled samples (:func:`gaussian_mmd_bandwidth`).

    Args:
        x: samples ``[n, d]`` (or trajectories ``[n, T, k]``).
        y: samples ``[m, d]`` (or ``[m, T, k]``).
        bandwidth: ``σ`` in the units of the samples.
        unbiased: U-statistic (drops the diagonal terms; may be negative) instead of the biased
            V-statistic ``‖μ̂_x − μ̂_y‖²_H ≥ 0`` (default).

    Returns:
        ``MMD²`` (dimensionless).
    """
    a, b = _pair(x, y)
    sigma = gaussian_mmd_bandwidth(a, b) if bandwidth is None else float(bandwidth)
    if not sigma > 0:
        raise MetricError(f"MMD bandwidth must be positive, got {bandwidth!r}")
    gamma = 1.0 / (2.0 * sigma * sigma)
    kxx = np.exp(-gamma * _cdist(a, a, "sqeuclidean"))
    kyy = np.exp(-gamma * _cdist(b, b, "sqeuclidean"))
    kxy = np.exp(-gamma * _cdist(a, b, "sqeuclidean"))
    n, m = a.shape[0], b.shape[0]
    if unbiased:
        if n < 2 or m < 2:
            raise MetricError("the unbiased MMD needs at least two samples in each set")
        xx = (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        yy = (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
    else:
        xx, yy = kxx.mean(), kyy.mean()
    return float(xx + yy - 2.0 * kxy.mean())


def knn_kl_divergence(p: np.ndarray, q: np.ndarray, k: int = 3, l: int = 3) -> float:  # noqa: E741 (eq. 11's l)
    """kNN estimate of ``KL(P‖Q)`` from samples (Wang, Kulkarni and Verdú 2009; csvgd eq. 11).

    Args:
        p: samples of ``P`` ``[n, d]`` (or trajectories ``[n, T, k]``), ``n > l``.
        q: samples of ``Q`` ``[m, d]`` (or ``[m, T, k]``), ``m ≥ k``.
        k: neighbour rank into ``q`` (``ν_k``); the paper uses 3.
        l: neighbour rank into ``p`` without the point itself (``ρ_l``); the paper uses 3.

    Returns:
        The estimate in nats. ``nan`` when it is undefined because a ``ρ_l`` or ``ν_k`` is zero
        (duplicated samples, e.g. a collapsed particle set; the paper's "N/A").
    """
    x, y = _pair(p, q)
    n, m, d = x.shape[0], y.shape[0], x.shape[1]
    if k < 1 or l < 1:
        raise MetricError(f"neighbour ranks must be ≥ 1, got k={k}, l={l}")
    if n <= l or m < k:
        raise MetricError(
            f"kNN KL needs more than l={l} samples of p and at least k={k} of q, got n={n}, m={m}"
        )
    dxx = _cdist(x, x)
    np.fill_diagonal(dxx, np.inf)
    rho = np.partition(dxx, l - 1, axis=1)[:, l - 1]
    nu = np.partition(_cdist(x, y), k - 1, axis=1)[:, k - 1]
    if (rho <= 0).any() or (nu <= 0).any():
        return math.nan
    return float(d / n * np.log(nu / rho).sum() + (digamma(l) - digamma(k)) + math.log(m / (n - 1)))


def trajectory_log_likelihood(
    real: np.ndarray, sim: np.ndarray, sigma: float | np.ndarray, weights: np.ndarray | None = None
) -> float:
    """Mean per-step log-likelihood of real trajectories under the simulated ones (eqs. 2 and 9).

    Each real trajectory is scored under the equally weighted (or ``weights``-weighted) mixture
    of Gaussians centred on the simulated trajectories, with per-observation noise ``σ``::

        ℓ = (1/R) Σ_r (1/T) log Σ_s w_s Π_t N(x_t^r | x_t^s, diag σ²)

    Args:
        real: real trajectories ``[R, T, k]``.
        sim: simulated trajectories ``[S, T, k]`` (one per particle).
        sigma: observation standard deviation, scalar or ``[k]`` (units of the observations).
        weights: particle weights ``[S]`` summing to 1; uniform when omitted.

    Returns:
        Log-likelihood per time step (nats).
    """
    r = np.asarray(real, dtype=np.float64)
    s = np.asarray(sim, dtype=np.float64)
    if r.ndim != 3 or s.ndim != 3 or r.shape[1:] != s.shape[1:]:
        raise MetricError(f"real [R, T, k] and sim [S, T, k] must agree, got {r.shape}, {s.shape}")
    sig = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (r.shape[2],))
    if not (sig > 0).all():
        raise MetricError(f"observation sigma must be positive, got {sigma!r}")
    T = r.shape[1]
    z = (r[:, None] - s[None]) / sig  # [R, S, T, k]
    log_n = -0.5 * (z * z).sum((-1, -2)) - T * (
        np.log(sig).sum() + 0.5 * sig.size * math.log(2 * math.pi)
    )
    if weights is None:
        log_w = np.full(s.shape[0], -math.log(s.shape[0]))
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (s.shape[0],) or (w < 0).any():
            raise MetricError(f"weights must be [S] non-negative, got shape {w.shape}")
        with np.errstate(divide="ignore"):
            log_w = np.log(w / w.sum())
    return float(logsumexp(log_n + log_w[None], axis=1).mean() / T)


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Root-mean-square difference over all entries of two arrays of the same shape."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise MetricError(f"rmse needs arrays of equal shape, got {x.shape} and {y.shape}")
    return float(np.sqrt(np.mean((x - y) ** 2)))
