"""The planar dice drops of the residual-contact paper (``planar-dice/`` of the shared recordings).

Each drop ``real/traj_<i>.csv`` (``i = 1 … 450``) holds the columns ``x, z, th, vx, vz, vth``
sampled at 250 Hz: the centre of mass in the vertical plane (m, ``z`` up, ground at ``z = 0``),
the orientation (rad) and their rates. ``pybullet/trajSim_<i>.csv`` are the authors' PyBullet
rollouts of the same drops from the same first sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dynid.data.errors import DataError
from dynid.data.trajectory import Trajectory
from dynid.resources import shared_data_dir

__all__ = ["COLUMNS", "JOINTS", "RATE_HZ", "dice_dir", "load_dice_states", "load_dice_trajectories"]

COLUMNS = ("x", "z", "th", "vx", "vz", "vth")
"""Columns of every drop file."""

JOINTS = ("x", "z", "theta")
"""Joint names of the planar dice model (``dynid/model/urdf/planar_dice.urdf``)."""

RATE_HZ = 250.0
"""Sample rate of the drops (Hz)."""


def dice_dir() -> Path:
    """``planar-dice/`` of the shared recordings (:func:`dynid.resources.shared_data_dir`)."""
    return shared_data_dir() / "planar-dice"


def _read(path: Path) -> np.ndarray:
    try:
        with path.open(encoding="utf-8") as handle:
            header = handle.readline().strip().split(",")
            data = np.loadtxt(handle, delimiter=",", ndmin=2)
    except FileNotFoundError:
        raise DataError(f"{path}: no such planar dice drop") from None
    except ValueError as exc:
        raise DataError(f"{path}: not a table of numbers: {exc}") from None
    if tuple(header) != COLUMNS or data.shape[1] != len(COLUMNS):
        raise DataError(f"{path}: expected the columns {','.join(COLUMNS)}, got {header}")
    if not np.isfinite(data).all():
        raise DataError(f"{path}: non-finite values")
    return data


def load_dice_states(
    indices: Sequence[int], *, source: str = "real", root: Path | None = None
) -> list[np.ndarray]:
    """States ``[T, 6]`` (``x, z, θ, ẋ, ż, θ̇``) of drops ``indices`` (1-based file numbers).

    Args:
        indices: drop numbers (``traj_<i>.csv``).
        source: ``"real"`` (motion capture) or ``"pybullet"`` (the authors' rollouts).
        root: directory holding ``real/`` and ``pybullet/``; default :func:`dice_dir`.

    Raises:
        DataError: an unknown source, a missing file, or a file not in the documented format.
    """
    if source not in ("real", "pybullet"):
        raise DataError(f"planar dice source must be real or pybullet, got {source!r}")
    base = (root or dice_dir()) / source
    stem = "traj" if source == "real" else "trajSim"
    return [_read(base / f"{stem}_{int(i)}.csv") for i in indices]


def load_dice_trajectories(indices: Sequence[int], *, root: Path | None = None) -> list[Trajectory]:
    """The real drops ``indices`` as :class:`Trajectory` objects of the planar dice joints
    ``(x, z, theta)`` with velocities, ``t`` from 0 at 250 Hz."""
    out = []
    for i, data in zip(indices, load_dice_states(indices, root=root), strict=True):
        t = np.arange(data.shape[0]) / RATE_HZ
        out.append(
            Trajectory(
                t=t,
                q=data[:, :3],
                dq=data[:, 3:],
                joint_names=list(JOINTS),
                meta={"source": f"planar-dice/real/traj_{int(i)}.csv"},
            )
        )
    return out
