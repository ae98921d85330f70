"""Classical payload identification: inverse-dynamics regressor and linear least squares.

The method of FIGAROH and FloBaRoID (and of Gaz et al. 2019 for the whole Panda), reduced to a
payload on a known arm: from a recording of joint positions and efforts,

1. positions are low-passed with a zero-phase Butterworth filter and differentiated (central
   differences) into velocities, which are low-passed and differentiated again into
   accelerations; the efforts get the same low-pass (:mod:`dynid.data.preprocess`);
2. the nominal arm's torques — inverse dynamics of the model *without* the payload plus its joint
   friction and armature — are subtracted from the filtered efforts;
3. the remainder is fitted by the ten regressor columns of the body the payload is welded to
   (``pinocchio.computeJointTorqueRegressor``, :mod:`dynid.model.regressor`), by linear least
   squares over all joints and samples.

The result is the payload's mass, centre of mass and inertia about it in the payload frame, with
the torque residual. Nothing keeps the inertia physically consistent (no LMI / log-Cholesky
constraint): with weak excitation of the rotational terms it can come out indefinite.
"""

from __future__ import annotations

import numpy as np
import torch

from dynid.data.preprocess import filtered_motion
from dynid.data.trajectory import Trajectory
from dynid.model.params import nominal_parameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.regressor import BodyFit, fit_body_parameters
from dynid.model.robot import RobotModel

__all__ = ["filtered_states", "fit_payload"]


def filtered_states(
    traj: Trajectory, joints: list[str], *, cutoff_hz: float, trim_s: float, stride: int = 1
) -> tuple[np.ndarray, ...]:
    """``q, v, a, τ [S, nv]`` of ``joints`` from ``traj`` by
    :func:`dynid.data.preprocess.filtered_motion` (velocities from the filtered positions, not
    the recorded ones).

    Raises:
        ValueError: joints or efforts missing, or fewer than 10 samples left after the trim.
    """
    missing = [j for j in joints if j not in traj.joint_names]
    if missing or traj.effort is None:
        raise ValueError(
            f"the trajectory must hold positions and efforts of {joints}; "
            f"missing joints {missing}, efforts {'absent' if traj.effort is None else 'present'}"
        )
    cols = [traj.joint_names.index(j) for j in joints]
    traj = traj.replace(q=traj.q[:, cols], dq=None, effort=traj.effort[:, cols],
                        joint_names=list(joints), command=None, command_names=[], obs=None,
                        obs_names=[])  # fmt: skip
    smooth, acc, _ = filtered_motion(
        traj, cutoff_hz, trim_s=trim_s, stride=stride, measured_velocities=False
    )
    if smooth.num_samples < 10:
        raise ValueError(
            f"fit_payload: fewer than 10 samples left after trimming {trim_s} s at each end of a "
            f"{traj.t[-1] - traj.t[0]:.3g} s trajectory"
        )
    return smooth.q, smooth.dq, acc, smooth.effort


def fit_payload(
    robot: RobotModel,
    traj: Trajectory,
    frame: str,
    *,
    cutoff_hz: float = 10.0,
    trim_s: float = 0.25,
    stride: int = 1,
) -> BodyFit:
    """Mass, centre of mass and inertia of a payload welded to ``frame`` from one recording.

    Args:
        robot: the arm *without* the payload (its nominal inertias, friction and armature are
            taken as known).
        traj: a recording with positions and efforts (N·m) of every joint of ``robot`` on a
            uniform time grid; recorded velocities are not used.
        frame: the frame the payload is welded to (e.g. the Panda flange ``panda_link8``); the
            centre of mass (m) and the inertia about it (kg·m²) are returned in it.
        cutoff_hz: zero-phase Butterworth cut-off applied to positions, velocities and efforts.
        trim_s: seconds dropped at both ends.
        stride: use every ``stride``-th sample.

    Returns:
        The :class:`~dynid.model.regressor.BodyFit` of the payload; its ``residual_rmse`` is the
        per-joint torque residual (N·m) after the fit.
    """
    q, v, a, tau = filtered_states(
        traj, robot.joint_names, cutoff_hz=cutoff_hz, trim_s=trim_s, stride=stride
    )
    dyn = PinocchioDynamics(robot)
    p = nominal_parameters(robot)
    with torch.no_grad():
        qt, vt, at = (torch.as_tensor(x)[None] for x in (q, v, a))
        arm = (dyn.rnea(p, qt, vt, at) + dyn.friction_torque(p, vt))[0].numpy()
    return fit_body_parameters(robot, frame, q, v, a, tau - arm)
