"""The real OpenManipulator-X heavy-ball recording of the proprio paper (Sec. V-A).

Files (``open-manipulator-ball/`` under :func:`dynid.resources.shared_data_dir`):

- ``real_joint_q.json``: ``joint_q``, 61 angles (rad) of the one actuated joint, relative to its
  start, while the arm holds the heavy ball (0.050 kg) under a constant torque step;
- ``initial_state.json``: ``joint_q``, the five servo positions at the start (rad; joint1..joint4
  then the gripper servo) and ``torque_q``.

The recording states neither its sampling interval nor its torque in N·m. The published setup
that goes with it simulates ROBOTIS ``joint3`` (the paper's 0-based "joint-2") free, every other
joint fixed at its start angle, a constant torque of −0.49 N·m, 1/60 s frames, and maps the servo
angles to the URDF by subtracting 90° from joint3. :func:`load_heavy_ball` takes those as defaults
and lets a caller change each of them (sensitivity study).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dynid.data.errors import DataError, TrajectoryError
from dynid.data.trajectory import Trajectory
from dynid.resources import shared_data_dir

__all__ = [
    "BALL_RADIUS",
    "HEAVY_BALL_MASS",
    "SOURCE_FRAME_DT",
    "SOURCE_TORQUE",
    "BallRecording",
    "load_heavy_ball",
]

HEAVY_BALL_MASS = 0.050
"""Measured mass of the heavy ball (kg), proprio Table I."""
BALL_RADIUS = 0.0225
"""Ball radius (m) of the published setup."""
SOURCE_TORQUE = -0.49
"""Constant joint torque (N·m) of the published setup (the paper reports 300 mA)."""
SOURCE_FRAME_DT = 1.0 / 60.0
"""Frame period (s) of the published simulation, assumed to be the recording's interval."""

_DIRECTORY = "open-manipulator-ball"
_SERVO_JOINTS = ("joint1", "joint2", "joint3", "joint4")
_JOINT3_OFFSET = -math.pi / 2.0  # servo angle → URDF angle of joint3 in the published setup


@dataclass(frozen=True)
class BallRecording:
    """The recording as a trajectory plus the configuration of the joints held fixed.

    Attributes:
        trajectory: ``q [T, 1]`` absolute URDF angle of the free joint (rad),
            ``command [T, 1]`` its torque (N·m), named ``"<joint>/torque"``.
        locked_joints: URDF angles (rad) of the other arm joints and the gripper (m), for
            ``load_robot(..., locked_joints=...)``.
        joint: name of the free joint.
        start_angle: URDF angle of the free joint at the first sample (rad).
    """

    trajectory: Trajectory
    locked_joints: dict[str, float]
    joint: str
    start_angle: float


def _read_json(path: Path, key: str, length: int | None) -> np.ndarray:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or key not in data:
        raise DataError(f"{path}: expected a JSON object with a {key!r} list")
    try:
        values = np.asarray(data[key], dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{path}: field {key!r} is not a list of numbers: {exc}") from exc
    if length is not None and values.shape[0] != length:
        raise DataError(f"{path}: field {key!r} has {values.shape[0]} values, expected {length}")
    if not np.isfinite(values).all():
        raise DataError(f"{path}: field {key!r} has non-finite values")
    return values


def load_heavy_ball(
    directory: str | Path | None = None,
    *,
    dt: float = SOURCE_FRAME_DT,
    torque: float = SOURCE_TORQUE,
    joint: str = "joint3",
) -> BallRecording:
    """Load the heavy-ball run as a :class:`BallRecording`.

    Args:
        directory: the ``open-manipulator-ball`` directory; defaults to the shared data.
        dt: sampling interval assumed for the 61 samples (s).
        torque: constant torque assumed on the free joint (N·m).
        joint: the free joint (ROBOTIS name); the other arm joints are locked at their start.

    Raises:
        DataError: missing or malformed files, an unknown joint, or a non-positive ``dt``.
    """
    if not (math.isfinite(dt) and dt > 0.0):
        raise DataError(f"heavy-ball recording: sampling interval dt must be > 0 s, got {dt!r}")
    if joint not in _SERVO_JOINTS:
        raise DataError(f"heavy-ball recording: free joint must be one of {_SERVO_JOINTS}")
    root = Path(directory) if directory is not None else shared_data_dir() / _DIRECTORY
    relative = _read_json(root / "real_joint_q.json", "joint_q", None)
    servo = _read_json(root / "initial_state.json", "joint_q", 5)
    urdf = dict(zip(_SERVO_JOINTS, servo[:4].tolist(), strict=True))
    urdf["joint3"] += _JOINT3_OFFSET
    start = urdf.pop(joint)
    locked = {**urdf, "gripper_left_joint": 0.0}
    T = relative.shape[0]
    try:
        trajectory = Trajectory(
            t=np.arange(T, dtype=np.float64) * dt,
            q=(start + relative).reshape(T, 1),
            joint_names=[joint],
            command=np.full((T, 1), float(torque)),
            command_names=[f"{joint}/torque"],
            meta={
                "robot": "open_manipulator_x",
                "source": str(root / "real_joint_q.json"),
                "object": "heavy_ball",
                "object_mass_kg": HEAVY_BALL_MASS,
                "assumed_dt_s": dt,
                "assumed_torque_nm": float(torque),
            },
        )
    except TrajectoryError as exc:
        raise DataError(f"{root}: recording does not form a valid trajectory: {exc}") from exc
    return BallRecording(
        trajectory=trajectory, locked_joints=locked, joint=joint, start_angle=start
    )
