"""Joint limits an excitation must respect, from the URDF, the problem file and robot defaults.

Position, velocity and effort limits come from the URDF (``<limit lower upper velocity
effort>``). Acceleration and jerk limits are not in a URDF: they come from the problem file's
``robot.limits`` and, for the Franka Emika Panda, default to Franka's documented joint limits
(Franka Control Interface documentation, "Robot and interface specifications", limits for the
Panda; :data:`PANDA_LIMITS`)::

    q̈_max = (15, 7.5, 10, 12.5, 15, 20, 20) rad/s²
    q⃛_max = (7500, 3750, 5000, 6250, 7500, 10000, 10000) rad/s³

A robot with neither gets no acceleration or jerk limit (infinite) and the report says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dynid.excite.errors import ExcitationError
from dynid.model.robot import RobotModel

__all__ = ["PANDA_LIMITS", "JointLimits"]

Array = NDArray[np.float64]

PANDA_LIMITS: dict[str, tuple[float, ...]] = {
    "acceleration": (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0),
    "jerk": (7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0),
}
"""Franka's documented Panda joint acceleration (rad/s²) and jerk (rad/s³) limits, joints 1-7."""

_DEFAULTS = {"panda": PANDA_LIMITS}


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits in the robot's joint order (rad, rad/s, rad/s², rad/s³, N·m; m for
    prismatic joints). ``lower``/``upper`` already include the position margin.

    Attributes:
        names: joint names.
        lower, upper: ``[nv]`` usable position range (URDF range shrunk by ``margin``).
        velocity, acceleration, jerk, effort: ``[nv]`` magnitudes (``inf``: none).
        margin: position margin in rad (or m) kept from the URDF limits.
        sources: where each kind of limit came from (for the report).
    """

    names: tuple[str, ...]
    lower: Array
    upper: Array
    velocity: Array
    acceleration: Array
    jerk: Array
    effort: Array
    margin: float
    sources: dict[str, str]

    @classmethod
    def of(
        cls,
        robot: RobotModel,
        overrides: Mapping[str, Sequence[float] | float] | None = None,
        *,
        margin: float = 0.05,
        scale: float = 1.0,
    ) -> JointLimits:
        """The limits of ``robot``.

        Args:
            robot: gives the URDF limits and the joint names.
            overrides: ``{"acceleration"|"jerk"|"velocity"|"effort": one value or one per
                joint}`` from the problem file's ``robot.limits``.
            margin: kept from the URDF position limits (rad or m).
            scale: ``--speed-scale`` in (0, 1]: velocity, acceleration and jerk limits are
                multiplied by it (a first run at reduced speed).

        Raises:
            ExcitationError: a limit of the wrong length or not positive, a position range
                that the margin leaves empty, or a joint without URDF limits (named).
        """
        model, nv = robot.model, robot.nv
        names = tuple(robot.joint_names)
        lo = np.array(model.lowerPositionLimit, dtype=float)
        hi = np.array(model.upperPositionLimit, dtype=float)
        values = {
            "velocity": np.array(model.velocityLimit, dtype=float),
            "effort": np.array(model.effortLimit, dtype=float),
            "acceleration": np.full(nv, np.inf),
            "jerk": np.full(nv, np.inf),
        }
        sources = {"position": "URDF", "velocity": "URDF", "effort": "URDF",
                   "acceleration": "none", "jerk": "none"}  # fmt: skip
        for kind, default in _DEFAULTS.get(robot.name, {}).items():
            if len(default) == nv:
                values[kind] = np.array(default, dtype=float)
                sources[kind] = f"{robot.name} default (Franka documentation)"
        for kind, value in (overrides or {}).items():
            if kind not in values:
                raise ExcitationError(
                    f"robot.limits.{kind}: unknown limit; expected one of {sorted(values)}"
                )
            arr = np.broadcast_to(np.atleast_1d(np.asarray(value, dtype=float)), (nv,))
            if np.atleast_1d(value).size not in (1, nv) or not np.all(arr > 0):
                raise ExcitationError(
                    f"robot.limits.{kind}: expected one positive number or {nv} ({list(names)})"
                )
            values[kind] = arr.copy()
            sources[kind] = "problem file"
        for j, name in enumerate(names):
            if not (np.isfinite(lo[j]) and np.isfinite(hi[j]) and hi[j] > lo[j]):
                raise ExcitationError(f"joint {name}: the URDF gives no position limits")
            if hi[j] - lo[j] <= 2 * margin:
                raise ExcitationError(
                    f"joint {name}: position range [{lo[j]:.4g}, {hi[j]:.4g}] is not wider than "
                    f"twice the margin {margin:g}"
                )
            for kind in ("velocity", "effort"):
                if not values[kind][j] > 0:
                    raise ExcitationError(f"joint {name}: the URDF gives no {kind} limit")
        if not 0.0 < scale <= 1.0:
            raise ExcitationError(f"--speed-scale must be in (0, 1], got {scale:g}")
        for kind in ("velocity", "acceleration", "jerk"):
            values[kind] = values[kind] * scale
        return cls(
            names=names,
            lower=lo + margin,
            upper=hi - margin,
            velocity=values["velocity"],
            acceleration=values["acceleration"],
            jerk=values["jerk"],
            effort=values["effort"],
            margin=float(margin),
            sources=sources,
        )

    def check_start(self, start: Array) -> None:
        """Raise :class:`ExcitationError` naming the joint if ``start`` is outside the range."""
        for j, name in enumerate(self.names):
            if not self.lower[j] <= start[j] <= self.upper[j]:
                raise ExcitationError(
                    f"--start: joint {name} at {start[j]:.4g} is outside its limits "
                    f"[{self.lower[j]:.4g}, {self.upper[j]:.4g}] (URDF range less the margin "
                    f"{self.margin:g})"
                )

    def as_dict(self) -> dict[str, object]:
        """The limits as plain lists per joint (for ``excitation.yaml``)."""

        def listed(x: Array) -> list[float | None]:
            return [None if not np.isfinite(v) else float(v) for v in x]

        return {
            "joints": list(self.names),
            "position_lower": listed(self.lower),
            "position_upper": listed(self.upper),
            "position_margin": self.margin,
            "velocity": listed(self.velocity),
            "acceleration": listed(self.acceleration),
            "jerk": listed(self.jerk),
            "effort": listed(self.effort),
            "sources": dict(self.sources),
        }
