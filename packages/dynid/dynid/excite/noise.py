"""The covariance a fit's estimate will have under the sensors' noise, propagated through the
problem's own preprocessing.

The Cramér–Rao σ of :meth:`~dynid.excite.information.InformationModel.cramer_rao` takes the
scored residuals as independent with the problem file's ``likelihood.torque_std``. What a fit
sees is the noise of the recorded channels after the likelihood has low-passed, differentiated,
trimmed and thinned them (:class:`~dynid.objective.torque.TorqueSamples`), carried into the
residuals by the torque model: its level is set by the sensors and the filter, and neighbouring
scored samples stay correlated. Given the sensors' noise (:class:`SensorNoise`: white noise of
the stated standard deviation on every sample of each recorded channel; an encoder of
resolution ``r`` reads with ``r/√12``), to first order in the noise the weighted least-squares
estimate of the coordinates moves by

    δβ = F⁻¹ Σ_s J_sᵀ Σ⁻¹ e_s,

with ``F`` the information under the fit's weights ``Σ = diag(torque_std²)`` (plus a prior's),
``J_s`` the Jacobian of the coordinates at scored sample ``s`` and ``e_s`` the change the noise
makes to the scored residual. Its covariance, the sandwich ``F⁻¹ (S + F_prior) F⁻¹`` with ``S =
Cov(Σ_s J_sᵀ Σ⁻¹ e_s)`` (a prior's score taken as white), is estimated from ``draws`` seeded noise
realisations of the recording along the motion, each passed through the problem's likelihood:
Monte Carlo, with a relative error of each σ of about ``1/√(2 draws)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from dynid.data.trajectory import Dataset, Trajectory
from dynid.excite.errors import ExcitationError
from dynid.excite.information import InformationModel
from dynid.objective.torque import InverseDynamicsLikelihood
from dynid.problem_file import ProblemFile

__all__ = ["SensorNoise", "propagated_covariance"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class SensorNoise:
    """White noise on every sample of the recorded channels (per-sample standard deviations).

    Attributes:
        position: rad (m for prismatic joints) on the positions.
        velocity: rad/s on the recorded velocities, or ``None`` when the recording carries
            none (the likelihood differentiates the positions).
        effort: N·m (N) on the measured efforts.
    """

    position: float
    velocity: float | None
    effort: float

    def __post_init__(self) -> None:
        for name in ("position", "velocity", "effort"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value >= 0):
                raise ExcitationError(f"excitation.sensor_noise.{name}: expected ≥ 0, got {value}")


def propagated_covariance(
    pf: ProblemFile,
    info: InformationModel,
    recording: tuple[Array, Array, Array, Array],
    prior: Array,
    sensors: SensorNoise,
    *,
    draws: int = 100,
    seed: int = 0,
) -> Array:
    """``[r, r]`` covariance of the coordinates' estimate under ``sensors`` (module notes).

    Args:
        pf: the problem file (its likelihood's filter, trim and stride; its control model).
        info: the information model of the problem (its coordinates and weights).
        recording: ``(t [T], q, q̇, τ [T, nv])`` the noise-free recording along the motion at
            its rate (s, rad, rad/s, the efforts the model needs in N·m).
        prior: ``[r, r]`` information of recordings already made (zeros: none).
        sensors: the noise of the recorded channels.
        draws: noise realisations.
        seed: seeds their generator.
    """
    t, q, v, tau = recording
    names = list(info.problem.robot.joint_names)
    rng = np.random.default_rng(seed)

    def traj(noisy: bool) -> Trajectory:
        def noise(std: float | None) -> Array | float:
            return std * rng.standard_normal(q.shape) if noisy and std else 0.0

        dq = None if sensors.velocity is None else v + noise(sensors.velocity)
        return Trajectory(t=t, q=q + noise(sensors.position), dq=dq,
                          effort=tau + noise(sensors.effort), joint_names=names)  # fmt: skip

    problem = pf.build(Dataset([traj(False)] + [traj(True) for _ in range(draws)]), device="cpu")
    likelihood = InverseDynamicsLikelihood(problem)
    theta0 = problem.tensor(info.theta0.numpy())[None]
    with torch.no_grad():
        errors = [e[0] for e in likelihood.errors(theta0)]  # [S, nv] each
        base = likelihood.samples[0]
        J, _ = info.regressor(base.q, base.v, base.a, base.direction)  # [S nv, r], whitened
    whiten = torch.as_tensor(1.0 / info.torque_std, dtype=J.dtype)
    scores = np.stack(
        [(J.T @ ((e - errors[0]) * whiten).reshape(-1)).numpy() for e in errors[1:]]
    )  # [draws, r]: Jᵀ Σ^{-1/2} times the whitened change of the residuals
    S = scores.T @ scores / draws
    F = (J.T @ J).numpy() + prior
    F_inv = np.linalg.inv(F)
    return F_inv @ (S + prior) @ F_inv
