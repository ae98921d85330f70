"""The state estimates behind the steady paper's supervised baselines (Sec. IV-A.2).

- FitHand: :func:`filter_paths` — trajectories traced from the particle filter run with the
  hand-written model.
- FitTV: :func:`poses_from_bearings` — the most likely pose at each step from the bearings alone
  (no motion model) with its Gauss–Newton std, then :func:`tv_states` — velocities by
  total-variation regularised differentiation (Rudin–Osher–Fatemi on the derivative, Chartrand
  2011) weighted by that std, robust to poses in a wrong minimum, the weight chosen by the
  discrepancy principle, and the poses the integral of those velocities. The paper leaves these
  choices open; with one fixed weight and equal weights the pose noise, which grows from
  centimetres to metres with the distance to the landmarks, leaks into the velocities.

The supervised fit itself is :func:`dynid.estimators.steady.em.fit_supervised`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import least_squares

from dynid.errors import EstimatorError
from dynid.estimators.steady.em import Sequences
from dynid.estimators.steady.filter import particle_filter, trace_trajectories
from dynid.estimators.steady.observation import ObservationModel
from dynid.model.kinodynamics import Kinodynamics

HUBER_K = 1.345
"""Huber threshold (in noise std) of :func:`tv_derivative`'s data term."""
DISCREPANCY_TAU = 1.1
"""Morozov's τ: :func:`tv_derivative` keeps fits whose robust residual scale is ≤ τ σ."""

__all__ = [
    "DISCREPANCY_TAU",
    "HUBER_K",
    "filter_paths",
    "poses_from_bearings",
    "tv_derivative",
    "tv_states",
]


def filter_paths(
    model: Kinodynamics,
    observation: ObservationModel,
    sequences: Sequences,
    *,
    num_particles: int,
    num_trajectories: int,
    seed: int = 0,
) -> torch.Tensor:
    """``[K · M, T + 1, D]``: ``M = num_trajectories`` trajectories traced from a particle filter
    with ``model`` on each of the ``K`` sequences (all observations, untempered)."""
    gen = torch.Generator().manual_seed(int(seed))
    paths = []
    for k in range(len(sequences)):
        result = particle_filter(
            model, observation, sequences.initial(k, num_particles, gen),
            sequences.controls[k], sequences.observations[k], sequences.dt, generator=gen,
        )  # fmt: skip
        paths.append(trace_trajectories(result, num_trajectories, gen))
    return torch.cat(paths)


def tv_derivative(
    f: np.ndarray,
    dt: float,
    alpha: float | None = None,
    *,
    std: np.ndarray | None = None,
    iterations: int = 50,
    epsilon: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """Derivative of the samples ``f [n]`` (step ``dt``) regularised by its total variation.

    Minimises ``α Σ |u_{i+1} − u_i| + Σ_i ρ((A u + c − f)_i / σ_i)`` over the derivative ``u``
    and the offset ``c``, with ``A`` the trapezoidal antiderivative and ``ρ`` Huber's loss at
    :data:`HUBER_K` (a pose that landed in a wrong minimum does not bend the derivative), by
    lagged-diffusivity iterations with reweighted data terms (Chartrand, "Numerical
    differentiation of noisy, nonsmooth data", 2011; ``|·|`` smoothed by ``epsilon``). The
    offset is free, so noise on the first sample does not tilt the whole derivative. NaN
    samples carry no weight.

    Args:
        f: ``[n]`` samples; NaN where missing.
        dt: sample step (s).
        alpha: the regularisation weight; ``None`` chooses it by Morozov's discrepancy
            principle: the largest ``α`` on a logarithmic grid (1e-3 … 1e3, 13 values) whose
            normalised residual ``(A u + c − f) / σ`` has a robust scale (median absolute value
            / 0.6745) ≤ :data:`DISCREPANCY_TAU`; the smallest ``α`` when none does.
        std: ``[n]`` the noise std of each sample (units of ``f``); ``None``: 1.

    Returns:
        ``(u [n], A u + c [n])``: the derivative at the samples (units of ``f`` per second) and
        the samples it integrates to (units of ``f``; defined where ``f`` is missing too).

    Raises:
        EstimatorError: fewer than 3 valid samples, ``alpha`` ≤ 0, or ``std`` not positive where
            ``f`` is valid.
    """
    f = np.asarray(f, dtype=float)
    n = f.size
    sigma = np.ones(n) if std is None else np.asarray(std, dtype=float)
    valid = np.isfinite(f)
    if valid.sum() < 3 or (alpha is not None and alpha <= 0) or sigma.shape != f.shape:
        raise EstimatorError(
            f"tv_derivative: need ≥ 3 valid samples, alpha > 0 and std of shape {f.shape}, got "
            f"{int(valid.sum())}, {alpha}, {sigma.shape}"
        )
    if not (np.isfinite(sigma[valid]).all() and (sigma[valid] > 0).all()):
        raise EstimatorError("tv_derivative: std must be finite and > 0 where f is valid")
    weight = np.where(valid, 1.0 / np.where(valid, sigma, 1.0) ** 2, 0.0)
    target = np.where(valid, f, 0.0)
    # [A | 1] (u, c): trapezoidal integral of u from the first sample, plus the offset.
    A = np.tril(np.ones((n, n))) * dt
    A[:, 0] -= 0.5 * dt
    A[np.arange(n), np.arange(n)] -= 0.5 * dt
    A[0, :] = 0.0
    B = np.concatenate([A, np.ones((n, 1))], axis=1)
    D = np.concatenate([(np.eye(n, k=1) - np.eye(n))[:-1] / dt, np.zeros((n - 1, 1))], axis=1)
    filled = np.interp(np.arange(n), np.flatnonzero(valid), f[valid])
    start = np.append(np.gradient(filled, dt), filled[0])

    def solve(a: float) -> np.ndarray:
        x = start
        for _ in range(iterations):
            z = (B @ x - target) * np.sqrt(weight)
            w = weight * np.minimum(1.0, HUBER_K / np.maximum(np.abs(z), 1e-12))
            weights = 1.0 / np.sqrt((D @ x) ** 2 + epsilon)
            H = a * dt * D.T @ (weights[:, None] * D) + B.T @ (w[:, None] * B)
            x = np.linalg.solve(H + 1e-12 * np.eye(n + 1), B.T @ (w * target))
        return x

    def scale(x: np.ndarray) -> float:  # robust std of the normalised residuals (MAD)
        return float(np.median(np.abs((B @ x - target)[valid] / sigma[valid])) / 0.6745)

    if alpha is not None:
        chosen = solve(alpha)
    else:  # Morozov: the largest α whose fit stays within τ = DISCREPANCY_TAU of the noise
        fits = [solve(a) for a in np.logspace(-3, 3, 13)]
        within = [x for x in fits if scale(x) <= DISCREPANCY_TAU]
        chosen = within[-1] if within else fits[0]
    return chosen[:n], B @ chosen


def poses_from_bearings(
    bearings: np.ndarray, landmarks: np.ndarray, std: float, *, grid: int = 9, extent: float = 12.0
) -> tuple[np.ndarray, np.ndarray]:
    """The most likely ``(p_x, p_y, θ)`` at each step from bearings ``[T, L]`` (rad) to
    ``landmarks [L, 2]`` alone, and its standard deviation.

    Each step: a ``grid × grid`` search over positions within ``extent`` m of the origin, the
    heading given a position in closed form (circular mean of ``atan2 − y``), then
    ``scipy.optimize.least_squares`` on the wrapped bearing errors (std ``std`` rad) from the
    best start; the std is the square root of the diagonal of ``(JᵀJ)⁻¹`` at the solution (the
    Gauss–Newton covariance, which grows where the bearings are nearly parallel).
    Missing (NaN) bearings are skipped; a step with fewer than 3 is NaN.

    Returns:
        ``(poses [T, 3], std [T, 3])`` in m, m, rad.
    """
    bearings = np.asarray(bearings, dtype=float)
    landmarks = np.asarray(landmarks, dtype=float)
    axis = np.linspace(-extent, extent, grid)
    gx, gy = (a.ravel() for a in np.meshgrid(axis, axis))
    out = np.full((bearings.shape[0], 3), np.nan)
    spread = np.full((bearings.shape[0], 3), np.nan)
    for t, y in enumerate(bearings):
        seen = ~np.isnan(y)
        if seen.sum() < 3:
            continue
        lm, yt = landmarks[seen], y[seen]
        absolute = np.arctan2(lm[:, 1] - gy[:, None], lm[:, 0] - gx[:, None])
        heading = np.angle(np.exp(1j * (absolute - yt)).sum(-1))
        err = np.angle(np.exp(1j * (absolute - heading[:, None] - yt)))
        best = int(np.argmin((err**2).sum(-1)))

        def residual(p: np.ndarray, lm: np.ndarray = lm, yt: np.ndarray = yt) -> np.ndarray:
            pred = np.arctan2(lm[:, 1] - p[1], lm[:, 0] - p[0]) - p[2]
            return np.angle(np.exp(1j * (pred - yt))) / std

        fit = least_squares(residual, np.array([gx[best], gy[best], heading[best]]))
        out[t] = [fit.x[0], fit.x[1], math.remainder(fit.x[2], 2 * math.pi)]
        spread[t] = np.sqrt(np.diag(np.linalg.pinv(fit.jac.T @ fit.jac)))
    return out, spread


def tv_states(
    poses: np.ndarray, std: np.ndarray, dt: float, alpha: float | None = None
) -> np.ndarray:
    """``[T, 6]`` states ``(p, θ, v, ω)`` from ``poses [T, 3]`` with std ``[T, 3]``
    (:func:`poses_from_bearings`), NaN rows missing: each pose channel (the heading unwrapped)
    through :func:`tv_derivative` (``alpha`` ``None``: chosen per channel by the discrepancy
    principle), the pose the integral of its velocity, so the two agree."""
    valid = np.isfinite(poses).all(-1)
    unwrapped = poses.copy()
    unwrapped[valid, 2] = np.unwrap(poses[valid, 2])
    channels = [tv_derivative(unwrapped[:, c], dt, alpha, std=std[:, c]) for c in range(3)]
    return np.stack([fit for _, fit in channels] + [u for u, _ in channels], axis=-1)
