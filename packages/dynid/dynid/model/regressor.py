"""Inverse-dynamics regressor: joint torques linear in the bodies' dynamic parameters.

For a rigid-body tree the inverse dynamics is linear in the ten dynamic parameters of every body
(Atkeson, An and Hollerbach 1986; the classical identification of FIGAROH and FloBaRoID)::

    τ(q, q̇, q̈) = Y(q, q̇, q̈) π,    π = [π_1 … π_nv],
    π_b = (m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)

with ``π_b`` in Pinocchio's order, expressed in body ``b``'s joint frame about its origin (kg,
kg·m, kg·m²), and ``Y`` from ``pinocchio.computeJointTorqueRegressor``. Armature and joint
friction are not part of ``Y``. This module evaluates ``Y`` on sampled states and fits the
parameters of one body by linear least squares, e.g. a payload welded to a known arm
(:func:`fit_body_parameters`); shapes use ``S`` samples and ``nv`` joints, SI units throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from dynid.model.errors import StateError
from dynid.model.robot import RobotModel

__all__ = [
    "BodyFit",
    "body_columns",
    "fit_body_parameters",
    "inertial_in_frame",
    "joint_torque_regressor",
]

Array = NDArray[np.float64]


def _states(robot: RobotModel, **arrays: Array) -> list[Array]:
    """The arrays as float64 ``[S, nv]``, checked for shape and finiteness."""
    out = []
    for name, x in arrays.items():
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != robot.nv:
            raise StateError(
                f"{name} must be [S, {robot.nv}] (one column per joint of {robot.name!r}), got "
                f"shape {x.shape}"
            )
        if not np.all(np.isfinite(x)):
            raise StateError(f"{name} has non-finite values")
        out.append(x)
    if len({x.shape[0] for x in out}) != 1:
        raise StateError(f"{list(arrays)} must have the same number of samples")
    return out


def joint_torque_regressor(robot: RobotModel, q: Array, v: Array, a: Array) -> Array:
    """``Y [S, nv, 10 nv]`` with ``τ_s = Y_s π`` at the states ``q, v, a [S, nv]`` (rad, rad/s,
    rad/s² or m, m/s, m/s²); column block ``10 b : 10 b + 10`` belongs to body ``b`` (q/v order).
    Gravity is the robot's."""
    q, v, a = _states(robot, q=q, v=v, a=a)
    model = pin.Model(robot.model)
    data = model.createData()
    out = np.empty((q.shape[0], robot.nv, 10 * robot.nv))
    for s in range(q.shape[0]):
        out[s] = pin.computeJointTorqueRegressor(model, data, q[s], v[s], a[s])
    return out


def body_columns(robot: RobotModel, frame: str) -> slice:
    """Columns of :func:`joint_torque_regressor` of the body that carries ``frame``."""
    body = robot.frame(frame).parent
    if body < 0:
        raise StateError(f"frame {frame!r} of robot {robot.name!r} is fixed to the base")
    return slice(10 * body, 10 * body + 10)


def inertial_in_frame(robot: RobotModel, frame: str, pi: Array) -> tuple[float, Array, Array]:
    """Mass (kg), centre of mass ``[3]`` (m, in ``frame``) and rotational inertia ``[3, 3]``
    (kg·m², about the centre of mass, ``frame`` axes) of the dynamic parameters ``pi [10]`` given
    in the joint frame of the body carrying ``frame``; the inverse of
    :meth:`dynid.model.attachments.Payload.joint_frame_parameters`."""
    info = robot.frame(frame)
    inertia = pin.Inertia.FromDynamicParameters(np.asarray(pi, dtype=np.float64).reshape(10))
    local = pin.SE3(info.rotation, info.translation).actInv(inertia)
    return float(local.mass), np.array(local.lever), np.array(local.inertia)


@dataclass(frozen=True)
class BodyFit:
    """Least-squares dynamic parameters of one body (:func:`fit_body_parameters`).

    Attributes:
        frame: the frame the results are expressed in.
        pi: ``[10]`` dynamic parameters in the body's joint frame (Pinocchio order, SI).
        pi_covariance: ``[10, 10]`` their covariance ``σ̂² (YᵀY)⁻¹`` with ``σ̂²`` the residual
            variance (assumes white, equal noise on every joint).
        mass: kg. com: ``[3]`` centre of mass in ``frame`` (m). inertia: ``[3, 3]`` about the
            centre of mass in ``frame`` axes (kg·m²).
        residual_rmse: ``[nv]`` RMS of the torque residual per joint (N·m or N).
        rmse: RMS of the torque residual over all joints and samples.
        condition_number: of the stacked ``[S nv, 10]`` regressor (columns as given).
        samples: number of states ``S`` used.
    """

    frame: str
    pi: Array
    pi_covariance: Array
    mass: float
    com: Array
    inertia: Array
    residual_rmse: Array
    rmse: float
    condition_number: float
    samples: int


def fit_body_parameters(
    robot: RobotModel, frame: str, q: Array, v: Array, a: Array, tau: Array
) -> BodyFit:
    """Fit the ten dynamic parameters of the body carrying ``frame`` to joint torques.

    Solves ``min_π Σ_s ‖Y_b(q_s, v_s, a_s) π − τ_s‖²`` by linear least squares over every joint
    row of every sample, where ``Y_b`` are the body's ten regressor columns. ``tau`` is the part
    of the measured efforts the body has to explain: for a payload on a known arm, the measured
    efforts minus the nominal arm's inverse dynamics and friction.

    Args:
        robot: the robot whose kinematics and gravity define ``Y``.
        frame: a frame of the body (e.g. the flange ``panda_link8``); the results are given in it.
        q, v, a: ``[S, nv]`` positions, velocities, accelerations (rad, rad/s, rad/s²).
        tau: ``[S, nv]`` torques to explain (N·m).
    """
    q, v, a, tau = _states(robot, q=q, v=v, a=a, tau=tau)
    cols = body_columns(robot, frame)
    Y = joint_torque_regressor(robot, q, v, a)[:, :, cols]
    A = Y.reshape(-1, 10)
    y = tau.reshape(-1)
    pi, *_ = np.linalg.lstsq(A, y, rcond=None)
    residual = (y - A @ pi).reshape(tau.shape)
    dof = max(A.shape[0] - 10, 1)
    sigma2 = float(np.sum(residual**2) / dof)
    singular = np.linalg.svd(A, compute_uv=False)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else float("inf")
    covariance = sigma2 * np.linalg.pinv(A.T @ A)
    mass, com, inertia = inertial_in_frame(robot, frame, pi)
    return BodyFit(
        frame=frame,
        pi=pi,
        pi_covariance=covariance,
        mass=mass,
        com=com,
        inertia=inertia,
        residual_rmse=np.sqrt(np.mean(residual**2, axis=0)),
        rmse=float(np.sqrt(np.mean(residual**2))),
        condition_number=condition,
        samples=int(q.shape[0]),
    )
