"""A joint motion as the ``exciter`` node sends it: read from ``dynid excite``'s
``trajectory.csv`` or taken from a planned :class:`dynid.excite.Excitation`, time-scaled,
thinned to the rate of a trajectory message's points, checked against the current joint state,
and the slow rest-to-rest move to its start.

Units: times in s, positions in rad (m for prismatic joints), velocities rad/s, accelerations
rad/s²; arrays ``[T]`` for times and ``[T, n]`` per joint in ``joint_names`` order.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dynid.excite import Excitation
from dynid.excite.output import csv_header

Array = NDArray[np.float64]


class MotionError(ValueError):
    """A trajectory file or motion that cannot be sent (one line naming the file or joint)."""


@dataclass(frozen=True)
class Motion:
    """Samples of a joint motion.

    Attributes:
        joint_names: the joints, in column order.
        t: ``[T]`` strictly increasing times from 0 (s).
        q, v, a: ``[T, n]`` positions, velocities and accelerations.
    """

    joint_names: list[str]
    t: Array
    q: Array
    v: Array
    a: Array

    @property
    def duration(self) -> float:
        """The time of the last sample (s)."""
        return float(self.t[-1])

    def scaled(self, speed_scale: float) -> Motion:
        """The same path ``speed_scale`` times as fast: times / s, velocities × s,
        accelerations × s² (``0 < speed_scale``)."""
        s = float(speed_scale)
        if not s > 0.0:
            raise MotionError(f"speed_scale must be > 0, got {speed_scale!r}")
        return Motion(list(self.joint_names), self.t / s, self.q, self.v * s, self.a * s * s)

    def thinned(self, rate_hz: float) -> Motion:
        """Every k-th sample, k the largest that keeps them at most ``1 / rate_hz`` s apart (on
        the mean spacing), and the last sample (``rate_hz`` > 0)."""
        if self.t.size < 2:
            return self
        step = max(int(np.floor(1.0 / (rate_hz * float(np.mean(np.diff(self.t)))))), 1)
        keep = np.arange(0, self.t.size, step)
        if keep[-1] != self.t.size - 1:
            keep = np.append(keep, self.t.size - 1)
        return Motion(list(self.joint_names), self.t[keep], self.q[keep], self.v[keep],
                      self.a[keep])  # fmt: skip

    def start_error(self, state: Mapping[str, float]) -> tuple[float, str]:
        """The largest ``|q_start − q_now|`` over the joints and the joint it is on, for
        ``state`` ``{joint: position}``.

        Raises:
            MotionError: a joint of the motion is not in ``state``.
        """
        missing = [j for j in self.joint_names if j not in state]
        if missing:
            raise MotionError(
                f"joints {missing} of the trajectory are not in the joint state "
                f"(it has {sorted(state)})"
            )
        error = np.abs(self.q[0] - np.array([state[j] for j in self.joint_names]))
        k = int(np.argmax(error))
        return float(error[k]), self.joint_names[k]


def read_csv(path: str | Path) -> Motion:
    """The motion in a ``trajectory.csv`` written by ``dynid excite``: ``time``, one position
    column per joint, then ``<joint>/velocity`` and ``<joint>/acceleration`` columns.

    Raises:
        MotionError: the file is unreadable, its header is not that layout, a value is not a
            finite number, or the times do not start at 0 and increase strictly.
    """
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
    except OSError as err:
        raise MotionError(f"{path}: cannot read the trajectory: {err.strerror}") from None
    if len(rows) < 3:
        raise MotionError(f"{path}: expected a header and at least two samples")
    header = [h.strip() for h in rows[0]]
    n, rem = divmod(len(header) - 1, 3)
    names = header[1 : 1 + n]
    if rem or n == 0 or header != csv_header(names):
        raise MotionError(
            f"{path}: header {header[:4]}...: expected time, one column per joint, then "
            "<joint>/velocity and <joint>/acceleration (dynid excite's trajectory.csv)"
        )
    try:
        data = np.array([[float(x) for x in row] for row in rows[1:] if row], dtype=np.float64)
    except ValueError as err:
        raise MotionError(f"{path}: {err}") from None
    if data.ndim != 2 or data.shape[1] != len(header) or not np.isfinite(data).all():
        raise MotionError(f"{path}: every row needs {len(header)} finite values")
    t = data[:, 0]
    if t[0] != 0.0 or np.any(np.diff(t) <= 0.0):
        raise MotionError(f"{path}: column time must start at 0 and increase strictly")
    return Motion(names, t, data[:, 1 : 1 + n], data[:, 1 + n : 1 + 2 * n],
                  data[:, 1 + 2 * n :])  # fmt: skip


def from_excitation(exc: Excitation) -> Motion:
    """The samples of a planned excitation."""
    return Motion(list(exc.joint_names), exc.t.copy(), exc.q.copy(), exc.v.copy(), exc.a.copy())


def approach(
    joint_names: Sequence[str], q_from: Array, q_to: Array, max_speed: float, rate_hz: float
) -> Motion:
    """A rest-to-rest move from ``q_from`` to ``q_to`` ``[n]`` on the quintic
    ``10x³ − 15x⁴ + 6x⁵`` (all joints together), timed so that no joint exceeds ``max_speed``
    (rad/s; the quintic's peak speed is 1.875 × distance / duration), sampled at ``rate_hz``."""
    q_from, q_to = np.asarray(q_from, dtype=np.float64), np.asarray(q_to, dtype=np.float64)
    distance = q_to - q_from
    duration = max(1.875 * float(np.max(np.abs(distance))) / max_speed, 1.0 / rate_hz)
    t = np.linspace(0.0, duration, max(int(np.ceil(duration * rate_hz)), 1) + 1)
    x = (t / duration)[:, None]
    s = 10 * x**3 - 15 * x**4 + 6 * x**5
    ds = (30 * x**2 - 60 * x**3 + 30 * x**4) / duration
    dds = (60 * x - 180 * x**2 + 120 * x**3) / duration**2
    return Motion(list(joint_names), t, q_from + s * distance, ds * distance, dds * distance)
