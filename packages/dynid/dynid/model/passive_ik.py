"""Inverse kinematics of passive joints: the angles that put a frame at measured placements.

A passive joint (the universal joint between a robot's flange and a swinging box) has no
encoder; motion capture sees the body it carries. Given the other joints' positions and the
measured placement of one frame per sample, the passive joints' positions follow by batched
Gauss–Newton on the pose error.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from dynid.model.dynamics import TorchDynamics
from dynid.model.params import nominal_parameters
from dynid.model.robot import RobotModel

__all__ = ["passive_joint_positions"]


def _vee_skew(E: torch.Tensor) -> torch.Tensor:
    """``[..., 3]`` axial vector of the skew part of ``E [..., 3, 3]`` (≈ rotation vector of a
    rotation ``E`` close to the identity)."""
    S = 0.5 * (E - E.transpose(-1, -2))
    return torch.stack([S[..., 2, 1], S[..., 0, 2], S[..., 1, 0]], dim=-1)


def passive_joint_positions(
    robot: RobotModel,
    q: torch.Tensor,
    joints: Sequence[str],
    frame: str,
    rotation: torch.Tensor,
    translation: torch.Tensor,
    *,
    iterations: int = 30,
) -> torch.Tensor:
    """Positions of ``joints`` that put ``frame`` at the measured placements, sample by sample.

    The positions minimise the pose error between the model's frame ``frame`` (nominal
    parameters, the other joints at ``q``) and the measured placement: the position error (m)
    and the rotation vector of ``rotationᵀ R_model`` (rad), by batched Gauss–Newton from zero.

    Args:
        robot: the model (with attachments).
        q: ``[T, nv]`` joint positions (rad or m); the entries of ``joints`` are ignored.
        joints: the passive joints.
        frame: the model frame whose placement is measured.
        rotation: ``[T, 3, 3]`` measured world rotation of ``frame``.
        translation: ``[T, 3]`` measured world position of ``frame`` (m).
        iterations: Gauss–Newton iterations (stops earlier when the step is below 1e-12).

    Returns:
        ``[T, len(joints)]`` positions (rad or m), float64.

    Raises:
        UnknownJointError: a joint is not a movable joint of ``robot``.
        UnknownFrameError: ``frame`` is not a frame of ``robot``.
    """
    T = q.shape[0]
    solved = torch.tensor([robot.joint_index(j) for j in joints])
    q = q.to(torch.float64)
    dyn = TorchDynamics(robot)
    params = nominal_parameters(robot)
    x = torch.zeros(T, len(joints), dtype=torch.float64)
    for _ in range(iterations):
        x.requires_grad_(True)
        qx = q.index_put((torch.arange(T)[:, None], solved[None, :]), x)
        R, t = dyn.frame_placement(params, qx.unsqueeze(0), [frame])
        R, t = R[0, :, 0], t[0, :, 0]
        r = torch.cat([t - translation, _vee_skew(rotation.transpose(-1, -2) @ R)], dim=-1)
        J = torch.stack(
            [torch.autograd.grad(r[:, k].sum(), x, retain_graph=k < 5)[0] for k in range(6)],
            dim=1,
        )
        r = r.detach()
        JtJ = J.transpose(1, 2) @ J + 1e-12 * torch.eye(len(joints), dtype=torch.float64)
        step = torch.linalg.solve(JtJ, -(J.transpose(1, 2) @ r.unsqueeze(-1))).squeeze(-1)
        x = (x.detach() + step).detach()
        if float(step.abs().max()) < 1e-12:
            break
    return x
