"""Observation functions: what a sensor would measure of a simulated state.

Joint encoders give joint positions and velocities; motion capture gives world positions of points
fixed on a body (csvgd App. II-E tracks the box lid centre and three points 1 m along the box
axes) or full body poses (position + quaternion ``x, y, z, qx, qy, qz, qw``). World frame is the
robot's base frame (REP-103, z up). Every function is batched: states ``[N, *B, nv]``, parameters
with leading dim ``N`` broadcast over ``*B``; outputs keep ``[N, *B, ...]`` and are differentiable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import torch

from dynid.model.errors import StateError, UnknownJointError

if TYPE_CHECKING:
    from dynid.model.params import DynamicParameters
    from dynid.model.robot import RobotModel

__all__ = [
    "AXIS_POINTS",
    "FrameKinematics",
    "FramePointObservation",
    "FramePoseObservation",
    "JointObservation",
    "Observation",
    "ObservationModel",
    "frame_points",
    "frame_poses",
    "joint_positions",
    "joint_velocities",
    "rotation_to_quaternion",
]

AXIS_POINTS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0.0),
    (1.0, 0.0, 0.0),
    (0.0, 1.0, 0.0),
    (0.0, 0.0, 1.0),
)
"""A frame's origin and the points 1 m along its x, y and z axes (csvgd App. II-E), in m."""

POSE_FIELDS: tuple[str, ...] = ("x", "y", "z", "qx", "qy", "qz", "qw")


class FrameKinematics(Protocol):
    """Anything with world placements of named frames (both dynamics backends)."""

    def frame_placement(
        self, p: DynamicParameters, q: torch.Tensor, frames: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(R [N, *B, F, 3, 3], t [N, *B, F, 3])``: world rotation and translation (m)."""
        ...


class ObservationModel(Protocol):
    """Maps simulated states to observation vectors with named columns."""

    names: list[str]

    def __call__(
        self, dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """Observations ``[N, *B, k]`` with ``k == len(names)``."""
        ...


def _select(x: torch.Tensor, indices: Sequence[int] | None, what: str) -> torch.Tensor:
    if indices is None:
        return x
    nv = x.shape[-1]
    bad = [i for i in indices if not 0 <= i < nv]
    if bad:
        raise StateError(f"{what} indices {bad} are out of range for {nv} dofs")
    return x[..., list(indices)]


def joint_positions(q: torch.Tensor, indices: Sequence[int] | None = None) -> torch.Tensor:
    """Encoder readings ``[N, *B, k]`` (rad or m): columns ``indices`` of ``q`` (all if None)."""
    return _select(q, indices, "joint position")


def joint_velocities(v: torch.Tensor, indices: Sequence[int] | None = None) -> torch.Tensor:
    """Joint velocities ``[N, *B, k]`` (rad/s or m/s): the columns ``indices`` of ``v``."""
    return _select(v, indices, "joint velocity")


def _points_tensor(points_local: torch.Tensor | Sequence[Sequence[float]], like: torch.Tensor):
    points = torch.as_tensor(points_local, dtype=like.dtype, device=like.device)
    if points.dim() != 2 or points.shape[-1] != 3:
        raise StateError(f"points_local must have shape [P, 3], got {tuple(points.shape)}")
    return points


def frame_points(
    dyn: FrameKinematics,
    p: DynamicParameters,
    q: torch.Tensor,
    frame: str,
    points_local: torch.Tensor | Sequence[Sequence[float]],
) -> torch.Tensor:
    """World positions ``[N, *B, P, 3]`` (m) of points fixed in ``frame``.

    Args:
        dyn: frame kinematics of the (possibly extended) robot.
        p: per-particle parameters (placements may be per particle).
        q: positions ``[N, *B, nv]``.
        frame: frame name (link, joint or operational frame of the model).
        points_local: ``[P, 3]`` coordinates in ``frame`` (m).
    """
    R, t = dyn.frame_placement(p, q, [frame])
    points = _points_tensor(points_local, t)
    return torch.einsum("...ij,pj->...pi", R[..., 0, :, :], points) + t[..., 0, None, :]


def rotation_to_quaternion(R: torch.Tensor) -> torch.Tensor:
    """Unit quaternions ``[..., 4]`` ``(qx, qy, qz, qw)``, ``qw ≥ 0``, of rotations ``[..., 3, 3]``.

    Shepperd's method: of the four candidate formulas the one with the largest pivot is used per
    element, so the result is accurate and differentiable for every rotation.
    """
    m00, m01, m02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    m10, m11, m12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    m20, m21, m22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    trace = m00 + m11 + m22
    pivots = torch.stack([trace, m00, m11, m22], dim=-1)
    best = pivots.argmax(dim=-1, keepdim=True)
    # Four candidates, each (qx, qy, qz, qw) scaled by 4 q_pivot; the squared pivot is 1 + 2 p − tr.
    s = torch.sqrt(torch.clamp(1.0 + 2.0 * pivots - trace[..., None], min=1e-30))
    candidates = torch.stack(
        [
            torch.stack([m21 - m12, m02 - m20, m10 - m01, s[..., 0] ** 2], dim=-1),
            torch.stack([s[..., 1] ** 2, m01 + m10, m02 + m20, m21 - m12], dim=-1),
            torch.stack([m01 + m10, s[..., 2] ** 2, m12 + m21, m02 - m20], dim=-1),
            torch.stack([m02 + m20, m12 + m21, s[..., 3] ** 2, m10 - m01], dim=-1),
        ],
        dim=-2,
    ) / (2.0 * s[..., :, None])
    quat = candidates.gather(-2, best[..., None].expand(*best.shape[:-1], 1, 4)).squeeze(-2)
    return torch.where(quat[..., 3:4] < 0, -quat, quat)


def frame_poses(
    dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, frames: Sequence[str]
) -> torch.Tensor:
    """World poses ``[N, *B, F, 7]``: position (m), quaternion ``(qx, qy, qz, qw)``, ``qw ≥ 0``."""
    R, t = dyn.frame_placement(p, q, list(frames))
    return torch.cat([t, rotation_to_quaternion(R)], dim=-1)


def _dof_indices(robot: RobotModel, joints: Sequence[str] | None) -> list[int]:
    if joints is None:
        return list(range(robot.nv))
    unknown = [j for j in joints if j not in robot.joint_names]
    if unknown:
        raise UnknownJointError(
            f"joints {unknown} are not movable joints of robot {robot.name!r} "
            f"(has {robot.joint_names})"
        )
    return [robot.joint_index(j) for j in joints]


class JointObservation:
    """Encoder observation: positions (and optionally velocities) of named joints.

    Column names are ``"<joint>/position"`` then ``"<joint>/velocity"`` (rad, rad/s or m, m/s).
    """

    def __init__(
        self, robot: RobotModel, joints: Sequence[str] | None = None, velocities: bool = False
    ) -> None:
        self.indices = _dof_indices(robot, joints)
        selected = [robot.joint_names[i] for i in self.indices]
        self.velocities = velocities
        self.names = [f"{j}/position" for j in selected]
        if velocities:
            self.names += [f"{j}/velocity" for j in selected]

    def __call__(
        self, dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, k]`` joint positions (then velocities)."""
        positions = joint_positions(q, self.indices)
        if not self.velocities:
            return positions
        return torch.cat([positions, joint_velocities(v, self.indices)], dim=-1)


class FramePointObservation:
    """Motion-capture points fixed on a frame, flattened to ``[N, *B, 3P]``.

    The default points are :data:`AXIS_POINTS` (frame origin and 1 m along each axis, csvgd
    App. II-E). Column names are ``"<frame>/<point>/x|y|z"`` with point names ``p0, p1, ...`` or
    ``origin, x_axis, y_axis, z_axis`` for the default points.
    """

    def __init__(
        self,
        frame: str,
        points_local: Sequence[Sequence[float]] = AXIS_POINTS,
        point_names: Sequence[str] | None = None,
    ) -> None:
        self.frame = frame
        self.points = torch.as_tensor(points_local, dtype=torch.float64)
        if self.points.dim() != 2 or self.points.shape[-1] != 3:
            raise StateError(
                f"points on frame {frame!r} must have shape [P, 3], got {tuple(self.points.shape)}"
            )
        if point_names is None:
            default = tuple(tuple(float(c) for c in row) for row in points_local) == AXIS_POINTS
            point_names = (
                ["origin", "x_axis", "y_axis", "z_axis"]
                if default
                else [f"p{i}" for i in range(self.points.shape[0])]
            )
        if len(point_names) != self.points.shape[0]:
            raise StateError(
                f"{len(point_names)} point names for {self.points.shape[0]} points on {frame!r}"
            )
        self.names = [f"{frame}/{n}/{axis}" for n in point_names for axis in "xyz"]

    def __call__(
        self, dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, 3P]`` world coordinates (m), point-major."""
        points = frame_points(dyn, p, q, self.frame, self.points.to(q.device))
        return points.flatten(-2)


class FramePoseObservation:
    """Poses of named frames, flattened to ``[N, *B, 7F]`` with names ``"<frame>/x|…|qw"``.

    Quaternions have ``qw ≥ 0``; compare recorded quaternions after the same sign convention.
    """

    def __init__(self, frames: Sequence[str]) -> None:
        self.frames = list(frames)
        if not self.frames:
            raise StateError("FramePoseObservation needs at least one frame name")
        self.names = [f"{f}/{field}" for f in self.frames for field in POSE_FIELDS]

    def __call__(
        self, dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, 7F]`` poses, frame-major."""
        return frame_poses(dyn, p, q, self.frames).flatten(-2)


class Observation:
    """Several observation models side by side: ``y = [y_1, y_2, ...]`` with concatenated names.

    Attributes:
        parts: the observation models (each has ``names`` and is called as ``f(dyn, p, q, v)``).
        names: ``k`` channel names, in output column order.
    """

    def __init__(self, parts: Sequence[ObservationModel]) -> None:
        self.parts = list(parts)
        self.names = [n for part in self.parts for n in part.names]

    def __call__(
        self, dyn: FrameKinematics, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, k]`` observations of states ``q, v [N, *B, nv]``."""
        return torch.cat([part(dyn, p, q, v) for part in self.parts], dim=-1)
