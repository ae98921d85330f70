"""The state estimates behind the steady paper's supervised baselines (Sec. IV-A.2).

- FitHand: :func:`filter_paths` — trajectories traced from the particle filter run with the
  hand-written model.
- FitTV: :func:`poses_from_bearings` — the most likely pose at each step from the bearings alone
  (no motion model), then :func:`tv_derivative` — velocities by total-variation regularised
  differentiation (Rudin–Osher–Fatemi on the derivative, Chartrand 2011).

The supervised fit itself is :func:`dynid.estimators.steady.em.fit_supervised`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import least_squares

from dynid.estimators.errors import EstimatorError
from dynid.estimators.steady.em import Sequences
from dynid.estimators.steady.filter import particle_filter, trace_trajectories
from dynid.estimators.steady.kinodynamics import Kinodynamics
from dynid.estimators.steady.observation import ObservationModel

__all__ = ["filter_paths", "poses_from_bearings", "tv_derivative", "tv_states"]


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
    f: np.ndarray, dt: float, alpha: float, *, iterations: int = 50, epsilon: float = 1e-6
) -> np.ndarray:
    """Derivative of the samples ``f [n]`` (step ``dt``) regularised by its total variation.

    Minimises ``α Σ |u_{i+1} − u_i| + ½ ‖A u − (f − f_0)‖²`` with ``A`` the trapezoidal
    antiderivative, by lagged-diffusivity iterations (Chartrand, "Numerical differentiation of
    noisy, nonsmooth data", 2011; ``|·|`` smoothed by ``epsilon``).

    Returns:
        ``[n]`` the derivative at the samples (units of ``f`` per second).

    Raises:
        EstimatorError: fewer than 3 samples or ``alpha`` ≤ 0.
    """
    f = np.asarray(f, dtype=float)
    n = f.size
    if n < 3 or alpha <= 0:
        raise EstimatorError(f"tv_derivative: need ≥ 3 samples and alpha > 0, got {n}, {alpha}")
    # A u: trapezoidal integral of u from the first sample to each sample.
    A = np.tril(np.ones((n, n))) * dt
    A[:, 0] -= 0.5 * dt
    A[np.arange(n), np.arange(n)] -= 0.5 * dt
    A[0, :] = 0.0
    D = (np.eye(n, k=1) - np.eye(n))[:-1] / dt
    AtA = A.T @ A
    Atb = A.T @ (f - f[0])
    u = np.gradient(f, dt)
    for _ in range(iterations):
        weights = 1.0 / np.sqrt((D @ u) ** 2 + epsilon)
        L = dt * D.T @ (weights[:, None] * D)
        gradient = AtA @ u - Atb + alpha * L @ u
        H = alpha * L + AtA
        u = u - np.linalg.solve(H + 1e-12 * np.eye(n), gradient)
    return u


def poses_from_bearings(
    bearings: np.ndarray, landmarks: np.ndarray, std: float, *, grid: int = 9, extent: float = 12.0
) -> np.ndarray:
    """``[T, 3]`` the most likely ``(p_x, p_y, θ)`` at each step from bearings ``[T, L]`` (rad)
    to ``landmarks [L, 2]`` alone.

    Each step: a ``grid × grid`` search over positions within ``extent`` m of the origin, the
    heading given a position in closed form (circular mean of ``atan2 − y``), then
    ``scipy.optimize.least_squares`` on the wrapped bearing errors from the best start.
    Missing (NaN) bearings are skipped; a step with fewer than 3 is NaN.
    """
    bearings = np.asarray(bearings, dtype=float)
    landmarks = np.asarray(landmarks, dtype=float)
    axis = np.linspace(-extent, extent, grid)
    gx, gy = (a.ravel() for a in np.meshgrid(axis, axis))
    out = np.full((bearings.shape[0], 3), np.nan)
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
    return out


def tv_states(poses: np.ndarray, dt: float, alpha: float) -> np.ndarray:
    """``[T, 6]`` states ``(p, θ, v, ω)`` from ``poses [T, 3]``: the heading unwrapped, the
    velocities by :func:`tv_derivative` of each pose channel."""
    p = poses.copy()
    p[:, 2] = np.unwrap(p[:, 2])
    v = np.stack([tv_derivative(p[:, c], dt, alpha) for c in range(3)], axis=-1)
    return np.concatenate([p, v], axis=-1)
