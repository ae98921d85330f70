"""Equation-error check of a problem's model class on recorded, unactuated motion.

The parameters are fitted so that the model's forward dynamics reproduce the joint accelerations
of the recording: positions low-passed without phase lag, velocities and accelerations by central
differences (:mod:`dynid.data.preprocess`). This is the one-step counterpart of the shooting
likelihoods, cheap enough to fit on seconds of data, and it tells whether *any* parameter set
within the problem's limits explains the motion.

A free gravity scale ``s`` (``g → s g``) exposes a length-scale conflict. The motion of an
unactuated chain fixes only ``g / L``: scaling every length by ``λ`` and every inertia and
viscous damping coefficient by ``λ²`` (masses unchanged) leaves the joint accelerations under
``g`` equal to those of the unscaled chain under ``g / λ``. So the fit with ``s`` free, rescaled
with ``λ = 1 / s`` (:func:`rescale_lengths`), is a chain under the true gravity that explains the
recording as well; the entries it puts beyond the problem's limits are what the limits rule out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import qmc

from dynid.data.preprocess import accelerations, with_velocities
from dynid.data.trajectory import Trajectory

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["EquationErrorFit", "equation_error", "fit_equation_error", "rescale_lengths"]

#: Power of the length scale ``λ`` each parameter unit carries in :func:`rescale_lengths`.
LENGTH_POWER = {"kg": 0, "m": 1, "kg*m^2": 2, "N*m*s/rad": 2}


@dataclass(frozen=True)
class EquationErrorFit:
    """Result of :func:`fit_equation_error`.

    Attributes:
        theta: ``[M]`` fitted SI parameters (within the problem's limits).
        gravity_scale: fitted factor on gravity (1 when it was held fixed).
        residual_rms: ``[nv]`` RMS of recorded minus modelled joint acceleration (rad/s²).
        accel_rms: ``[nv]`` RMS of the recorded joint accelerations (rad/s²).
        normalised_mse: mean squared residual, each joint divided by its ``accel_rms``.
        at_limit: names of the parameters fitted onto a limit.
    """

    theta: np.ndarray
    gravity_scale: float
    residual_rms: np.ndarray
    accel_rms: np.ndarray
    normalised_mse: float
    at_limit: list[str]


def _samples(
    trajectories: list[Trajectory], cutoff_hz: float, trim: int
) -> tuple[torch.Tensor, ...]:
    """``q, v, a [S, nv]`` pooled over the trajectories, ``trim`` samples cut at each end
    (where the zero-phase filter and the one-sided differences are least accurate)."""
    qs, vs, accs = [], [], []
    for traj in trajectories:
        smooth = with_velocities(traj, cutoff_hz=cutoff_hz)
        keep = slice(trim, smooth.num_samples - trim)
        qs.append(smooth.q[keep])
        vs.append(smooth.dq[keep])
        accs.append(accelerations(smooth, cutoff_hz=cutoff_hz)[keep])
    return tuple(torch.as_tensor(np.concatenate(x)) for x in (qs, vs, accs))


def _residual(
    problem: Problem,
    theta: torch.Tensor,
    gravity_scale: torch.Tensor,
    q: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
) -> torch.Tensor:
    """``[P, S, nv]`` recorded minus modelled joint accelerations (rad/s²) for SI parameters
    ``theta [P, M]`` under gravity times ``gravity_scale [P, 1]``, at states ``q, v [S, nv]``
    with zero joint torque."""
    P, (S, nv) = theta.shape[0], a.shape
    p = problem.parameters(theta.repeat_interleave(S, 0))
    p = replace(p, gravity=p.gravity * gravity_scale.repeat_interleave(S, 0))
    torque = torch.zeros(P * S, nv, dtype=a.dtype, device=a.device)
    modelled = problem.dynamics.forward_dynamics(p, q.repeat(P, 1), v.repeat(P, 1), torque)
    return a - modelled.reshape(P, S, nv)


def equation_error(
    problem: Problem,
    trajectories: list[Trajectory],
    theta: np.ndarray,
    *,
    cutoff_hz: float = 40.0,
    trim: int = 20,
) -> tuple[np.ndarray, float]:
    """``(residual_rms [nv] in rad/s², normalised_mse)`` of SI parameters ``theta [M]`` (not
    clamped to the limits) under the true gravity; samples as in :func:`fit_equation_error`."""
    q, v, a = (x.to(problem.dtype) for x in _samples(trajectories, cutoff_hz, trim))
    theta_t = torch.as_tensor(np.asarray(theta)[None], dtype=problem.dtype)
    one = torch.ones(1, 1, dtype=problem.dtype)
    with torch.no_grad():
        r = _residual(problem, theta_t, one, q, v, a)[0]
    scale = a.pow(2).mean(0).sqrt()
    return r.pow(2).mean(0).sqrt().cpu().numpy(), float((r / scale).pow(2).mean())


def fit_equation_error(
    problem: Problem,
    trajectories: list[Trajectory],
    *,
    free_gravity: bool = False,
    cutoff_hz: float = 40.0,
    starts: int = 16,
    iterations: int = 600,
    learning_rate: float = 0.02,
    seed: int = 0,
    trim: int = 20,
) -> EquationErrorFit:
    """Fit ``problem``'s parameters to the joint accelerations of unactuated ``trajectories``.

    Adam on the normalised parameters (clamped to the limits after every step) from ``starts``
    scrambled-Sobol points, all in one batched forward-dynamics call per step; the loss is the
    mean squared acceleration residual with each joint divided by its recorded RMS. With
    ``free_gravity`` a log gravity factor per start is fitted alongside.

    Args:
        problem: its model, parameter spec and dtype; zero joint torque is assumed (no control).
        trajectories: recordings with ``q`` on a uniform time grid (rad or m).
        cutoff_hz: zero-phase low-pass applied to ``q`` and to the velocities (Hz).
        trim: samples dropped at each end of every trajectory.

    Returns:
        The best start's :class:`EquationErrorFit`.
    """
    if problem.control_names:
        raise ValueError(
            f"fit_equation_error: problem {problem.name!r} is driven by {problem.control_names}; "
            "the check assumes unactuated motion (zero joint torque)"
        )
    q, v, a = (x.to(problem.dtype) for x in _samples(trajectories, cutoff_hz, trim))
    scale = a.pow(2).mean(0).sqrt()
    generator = qmc.Sobol(problem.spec.dim, scramble=True, seed=seed)
    u = torch.as_tensor(generator.random(starts), dtype=problem.dtype).requires_grad_(True)
    log_g = torch.zeros(starts, 1, dtype=problem.dtype, requires_grad=free_gravity)
    optimiser = torch.optim.Adam([u, log_g] if free_gravity else [u], lr=learning_rate)

    def residual() -> torch.Tensor:  # [starts, S, nv], normalised
        theta = problem.spec.from_unit(u)
        return _residual(problem, theta, log_g.exp(), q, v, a) / scale

    for _ in range(iterations):
        loss = residual().pow(2).mean((1, 2))
        optimiser.zero_grad()
        loss.sum().backward()
        optimiser.step()
        with torch.no_grad():
            u.clamp_(0.0, 1.0)
    with torch.no_grad():
        r = residual()
        loss = r.pow(2).mean((1, 2))
        best = int(loss.argmin())
        ub = u[best]
        theta = problem.spec.from_unit(ub[None])[0]
    on_limit = ((ub <= 1e-9) | (ub >= 1.0 - 1e-9)).tolist()
    return EquationErrorFit(
        theta=theta.cpu().numpy(),
        gravity_scale=float(log_g[best].detach().exp()),
        residual_rms=(r[best] * scale).pow(2).mean(0).sqrt().cpu().numpy(),
        accel_rms=scale.cpu().numpy(),
        normalised_mse=float(loss[best]),
        at_limit=[n for n, hit in zip(problem.spec.names, on_limit, strict=True) if hit],
    )


def rescale_lengths(problem: Problem, theta: np.ndarray, factor: float) -> np.ndarray:
    """``theta [M]`` with every length times ``factor`` and every inertia and viscous damping
    coefficient times ``factor²`` (masses unchanged): the chain whose unactuated motion under
    gravity ``g`` is that of ``theta`` under ``g / factor`` (module docstring).

    Raises:
        ValueError: a parameter's unit is not among :data:`LENGTH_POWER`.
    """
    powers = []
    for name, unit in zip(problem.spec.names, problem.spec.units, strict=True):
        if unit not in LENGTH_POWER:
            raise ValueError(
                f"rescale_lengths: parameter {name!r} has unit {unit!r}; known units "
                f"{sorted(LENGTH_POWER)}"
            )
        powers.append(LENGTH_POWER[unit])
    return np.asarray(theta, dtype=np.float64) * float(factor) ** np.asarray(powers)
