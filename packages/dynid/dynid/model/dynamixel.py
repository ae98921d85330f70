"""DYNAMIXEL XM430-W350 actuation: current units, torque constant, encoder quantisation, steps.

The OpenManipulator-X is driven by five XM430-W350-T servos (proprio paper App. VI-A) run in
current-control mode (Sec. V). Numbers are from the ROBOTIS e-Manual page of the XM430-W350-T/R
(specification table and control table):

- stall torque 3.8 N·m at 11.1 V / 2.1 A, 4.1 N·m at 12.0 V / 2.3 A, 4.8 N·m at 14.8 V / 2.7 A;
  the 12.0 V (recommended supply) point gives the torque constant 4.1 / 2.3 = 1.783 N·m/A;
- ``Goal Current`` (address 102) and ``Present Current`` (address 126) count in 2.69 mA units,
  ``Current Limit`` (address 38) defaults to 1193 units (3.209 A);
- contactless absolute encoder, 12 bit: 4096 ticks per output revolution
  (``Present Position`` unit 0.088°); gear ratio 353.5 : 1.

The torque constant and the current unit are model *parameters*, not hidden constants: the
torque–current curve of the e-Manual's performance graph is only approximately proportional, so
an estimator may free ``"<joint>/motor_gain"`` (N·m/A) around :attr:`DynamixelSpec.torque_constant`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from dynid.model.errors import StateError

__all__ = [
    "PAPER_STEPS",
    "XM430_W350",
    "CurrentStep",
    "DynamixelSpec",
]

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)


@dataclass(frozen=True)
class DynamixelSpec:
    """Datasheet numbers of one DYNAMIXEL model.

    Attributes:
        model: product name.
        stall_torque: N·m at ``stall_current`` and ``voltage``.
        stall_current: A.
        voltage: V of the stall point used for the torque constant.
        current_unit: A per ``Goal/Present Current`` count.
        current_limit_units: default ``Current Limit`` in counts.
        ticks_per_rev: encoder ticks per output revolution.
        gear_ratio: motor turns per output turn.
    """

    model: str
    stall_torque: float
    stall_current: float
    voltage: float
    current_unit: float
    current_limit_units: int
    ticks_per_rev: int
    gear_ratio: float

    @property
    def torque_constant(self) -> float:
        """Output torque per motor current (N·m/A), stall torque over stall current."""
        return self.stall_torque / self.stall_current

    @property
    def current_limit(self) -> float:
        """Default current limit in A."""
        return self.current_limit_units * self.current_unit

    @property
    def position_resolution(self) -> float:
        """One encoder tick in rad."""
        return 2.0 * math.pi / self.ticks_per_rev

    def units_to_amps(self, units: ArrayT) -> ArrayT:
        """``Present/Goal Current`` counts → A (same array type and shape)."""
        return units * self.current_unit

    def amps_to_units(self, amps: ArrayT) -> ArrayT:
        """A → current counts, rounded to the integer register value (as float)."""
        counts = amps / self.current_unit
        return counts.round() if isinstance(counts, torch.Tensor) else np.round(counts)

    def current_to_torque(
        self, amps: ArrayT, torque_constant: float | torch.Tensor | None = None
    ) -> ArrayT:
        """Motor current (A) → output torque (N·m): ``τ = k_t i``.

        Args:
            amps: currents, any shape.
            torque_constant: N·m/A; defaults to :attr:`torque_constant`. A tensor (e.g. the
                per-particle ``motor_gain``) broadcasts against ``amps``.
        """
        k = self.torque_constant if torque_constant is None else torque_constant
        return amps * k

    def ticks_to_rad(self, ticks: ArrayT) -> ArrayT:
        """Encoder ticks → joint angle (rad), with tick 0 at angle 0."""
        return ticks * self.position_resolution

    def quantize(self, q: ArrayT) -> ArrayT:
        """Round joint angles (rad) to the encoder grid of ``2π / ticks_per_rev``.

        This is what the servo reports for a true angle ``q``; use it to make simulated
        recordings look like real ones (Table I on simulated data).
        """
        ticks = q / self.position_resolution
        ticks = ticks.round() if isinstance(ticks, torch.Tensor) else np.round(ticks)
        return ticks * self.position_resolution


XM430_W350 = DynamixelSpec(
    model="XM430-W350",
    stall_torque=4.1,
    stall_current=2.3,
    voltage=12.0,
    current_unit=2.69e-3,
    current_limit_units=1193,
    ticks_per_rev=4096,
    gear_ratio=353.5,
)
"""The OpenManipulator-X servo (all five joints), 12.0 V operating point."""


@dataclass(frozen=True)
class CurrentStep:
    """A constant-current step on one joint, the excitation of proprio Sec. V-A … V-C.

    Attributes:
        joint: joint name in the robot model (``"joint3"`` is the paper's 0-based "joint-2").
        current: A, signed in the joint's positive direction.
        duration: s the current is held; afterwards the command is zero.
    """

    joint: str
    current: float
    duration: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.current) and math.isfinite(self.duration)):
            raise StateError(
                f"current step on {self.joint!r}: current {self.current!r} A and duration "
                f"{self.duration!r} s must be finite"
            )
        if self.duration <= 0.0:
            raise StateError(
                f"current step on {self.joint!r}: duration must be > 0 s, got {self.duration!r}"
            )

    def samples(self, dt: float) -> int:
        """Number of control samples of period ``dt`` (s) covering the step."""
        if not (math.isfinite(dt) and dt > 0.0):
            raise StateError(f"control period dt must be a positive number of s, got {dt!r}")
        return round(self.duration / dt)

    def command(self, dt: float, total: int | None = None) -> np.ndarray:
        """Current command ``[T, 1]`` (A) at period ``dt``: ``current`` then zero.

        Args:
            dt: control period in s.
            total: number of samples ``T``; defaults to the step length (no trailing zeros).
        """
        n = self.samples(dt)
        T = n if total is None else int(total)
        if T < 1:
            raise StateError(f"current step on {self.joint!r}: needs at least one sample, got {T}")
        u = np.zeros((T, 1), dtype=np.float64)
        u[: min(n, T), 0] = self.current
        return u


PAPER_STEPS: dict[str, CurrentStep] = {
    "fixed_joint": CurrentStep(joint="joint3", current=0.300, duration=0.6),
    "container": CurrentStep(joint="joint4", current=0.100, duration=0.6),
    "soft_block": CurrentStep(joint="gripper_left_joint", current=0.300, duration=1.0),
}
"""Excitations of proprio Sec. V-A (300 mA at joint-2 for 0.6 s), V-B (100 mA at joint-3 for
0.6 s) and V-C (300 mA at joint-4, the gripper, for 1.0 s). The paper numbers joints from 0
(joint-0 is the base yaw), so its joint-2 is ROBOTIS ``joint3`` (elbow), joint-3 is ``joint4``
(wrist) and joint-4 is the gripper servo (``gripper_left_joint``)."""
