"""The IBM "double pendulum chaotic" recordings (csvgd paper Sec. V-B, App. II-B) as trajectories.

Each CSV file of the recording holds one run at 400 Hz, one row per video frame with the pixel
coordinates ``x0, y0, x1, y1, x2, y2`` of the pivot, the elbow and the tip (image ``y`` grows
downwards). Joint angles come from the vertex geometry and velocities from central finite
differences (App. II-B), in the convention of dynid's ``double_pendulum`` model: both joints rotate
about the world ``y`` axis and ``q = (0, 0)`` hangs straight down.

The camera is turned a quarter turn: gravity points along image ``+x``, not image ``+y``. Every
run ends swinging gently about the elbow pointing along image ``+x`` (the circular mean of the
first link's image angle over the last 10 % of runs 0 … 17 lies within 0.035 rad of it). So image
``−x`` is world ``z`` and image ``−y`` is world ``x`` (a quarter-turn rotation of the former
upright reading, world ``(x, z)`` = image ``(x, −y)``), and a link pointing along image
``(dx, dy)`` has absolute angle ``atan2(dy, dx)``. ``q1`` is the absolute angle of the first link,
``q2`` the angle of the second link relative to the first; both are unwrapped over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dynid.data.errors import DataError
from dynid.data.trajectory import Dataset, Trajectory
from dynid.resources import shared_data_dir

__all__ = [
    "IBM_RATE_HZ",
    "IbmPendulumError",
    "angles_from_pixels",
    "ibm_pendulum_dir",
    "load_ibm_pendulum",
    "load_ibm_pendulum_runs",
]

IBM_RATE_HZ = 400.0
"""Frame rate of the recordings (Hz)."""

_JOINTS = ("joint1", "joint2")


class IbmPendulumError(DataError):
    """An IBM double-pendulum file is missing or malformed."""


def ibm_pendulum_dir() -> Path:
    """Directory of the recordings: ``<shared data>/ibm-double-pendulum``."""
    return shared_data_dir() / "ibm-double-pendulum"


def angles_from_pixels(pixels: np.ndarray) -> np.ndarray:
    """Joint angles ``[T, 2]`` (rad, unwrapped) from vertex pixels ``[T, 6]`` (x0 y0 x1 y1 x2 y2).

    ``q1`` is the absolute angle of pivot→elbow, ``q2`` that of elbow→tip minus ``q1``; zero is
    hanging straight down (image ``+x``, see the module docstring), and a link at angle ``a``
    points along world ``(x, z) = (−sin a, −cos a)``, i.e. image ``(x, y) ∝ (cos a, sin a)``.
    """
    p = np.asarray(pixels, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 6:
        raise IbmPendulumError(f"pixel array must be [T, 6] (x0 y0 x1 y1 x2 y2), got {p.shape}")
    # world x = −image y, world z = −image x; absolute angle atan2(−x, −z) = atan2(dy, dx)
    a1 = np.unwrap(np.arctan2(p[:, 3] - p[:, 1], p[:, 2] - p[:, 0]))
    a2 = np.unwrap(np.arctan2(p[:, 5] - p[:, 3], p[:, 4] - p[:, 2]))
    return np.stack([a1, np.unwrap(a2 - a1)], axis=1)


def load_ibm_pendulum(
    run: int | str | Path, *, max_samples: int | None = None, start: int = 0
) -> Trajectory:
    """One run as a ``Trajectory`` with ``q``, ``dq`` (central differences) on a 400 Hz grid.

    Args:
        run: run number (``0`` … ``17``, read from :func:`ibm_pendulum_dir`) or a CSV path.
        max_samples: keep at most this many samples after ``start`` (``None``: all).
        start: first frame to keep.

    Returns:
        Trajectory with joints ``joint1, joint2`` (rad, rad/s), ``t`` from 0 s in steps of
        1/400 s, and ``meta`` naming the robot, source file and frame range.
    """
    path = ibm_pendulum_dir() / f"{run}.csv" if isinstance(run, int) else Path(run)
    if not path.is_file():
        raise IbmPendulumError(f"IBM double-pendulum run not found: {path}")
    try:
        pixels = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise IbmPendulumError(f"{path}: not a CSV of numbers ({exc})") from exc
    if pixels.shape[1] != 6:
        raise IbmPendulumError(
            f"{path}: expected 6 columns x0,y0,x1,y1,x2,y2, got {pixels.shape[1]}"
        )
    if start < 0 or start >= pixels.shape[0] - 2:
        raise IbmPendulumError(f"{path}: start frame {start} outside 0…{pixels.shape[0] - 3}")
    dt = 1.0 / IBM_RATE_HZ
    q = angles_from_pixels(pixels)
    dq = np.gradient(q, dt, axis=0)
    stop = pixels.shape[0] if max_samples is None else min(pixels.shape[0], start + max_samples)
    q, dq = q[start:stop], dq[start:stop]
    return Trajectory(
        t=np.arange(q.shape[0]) * dt,
        q=q,
        joint_names=list(_JOINTS),
        dq=dq,
        meta={
            "robot": "double_pendulum",
            "source": str(path.name),
            "rate_hz": IBM_RATE_HZ,
            "frames": [int(start), int(stop)],
        },
    )


def load_ibm_pendulum_runs(
    runs: Sequence[int], *, max_samples: int | None = None, start: int = 0
) -> Dataset:
    """Several runs (see :func:`load_ibm_pendulum`) as a ``Dataset``."""
    return Dataset([load_ibm_pendulum(r, max_samples=max_samples, start=start) for r in runs])
