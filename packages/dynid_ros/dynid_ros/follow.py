"""Executing a ``control_msgs/action/FollowJointTrajectory`` goal as ros2_control's
joint_trajectory_controller does, for a simulated arm (:mod:`dynid_ros.robot_sim`).

:func:`plan_goal` checks a goal against the arm's joints and limits and turns it into a
:class:`Plan`, or raises :class:`GoalError` naming the result code the failure corresponds to
(joint_trajectory_controller rejects such goals at goal time, before any result exists:
``INVALID_JOINTS`` for joint names that are not the controller's, ``INVALID_GOAL`` for a malformed
trajectory, ``OLD_HEADER_TIMESTAMP`` for one that ends in the past). A plan starts at the state
the controller commands when it is accepted and interpolates between points as the controller
does: linearly for positions only, by cubic Hermite segments with velocities, by quintic ones
with velocities and accelerations. :meth:`Plan.check` applies the tolerances each control tick:
a path tolerance violated while moving aborts with ``PATH_TOLERANCE_VIOLATED``; past the last
point the goal succeeds once every joint is within its goal tolerance, and aborts with
``GOAL_TOLERANCE_VIOLATED`` when ``goal_time_tolerance`` (> 0) has passed first (0: wait, as the
controller does). Tolerances follow ``control_msgs/JointTolerance``: 0 takes the default, −1
erases it (no check); positions and velocities are checked (accelerations are not measured).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5
CODE_NAMES = {
    SUCCESSFUL: "SUCCESSFUL",
    INVALID_GOAL: "INVALID_GOAL",
    INVALID_JOINTS: "INVALID_JOINTS",
    OLD_HEADER_TIMESTAMP: "OLD_HEADER_TIMESTAMP",
    PATH_TOLERANCE_VIOLATED: "PATH_TOLERANCE_VIOLATED",
    GOAL_TOLERANCE_VIOLATED: "GOAL_TOLERANCE_VIOLATED",
}
"""``control_msgs/action/FollowJointTrajectory`` result codes by value (the same constants)."""


class GoalError(Exception):
    """A goal the controller rejects: ``code`` (a result code) and ``reason`` (one line)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{CODE_NAMES[code]}: {reason}")
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Tolerances:
    """Per joint ``[n]`` position (rad) and velocity (rad/s) tolerances, ``inf`` unchecked."""

    position: Array
    velocity: Array

    @staticmethod
    def unchecked(n: int) -> Tolerances:
        """No check on any of ``n`` joints."""
        return Tolerances(np.full(n, np.inf), np.full(n, np.inf))


@dataclass(frozen=True)
class Verdict:
    """What a tick decided: ``done`` (the goal ended), ``code`` (its result code) and
    ``message`` (the result's ``error_string``)."""

    done: bool
    code: int = SUCCESSFUL
    message: str = ""


@dataclass(frozen=True)
class Plan:
    """A goal's trajectory in the arm's joint order, from the state at acceptance.

    Attributes:
        start_s: when the trajectory starts, on the node's clock (s).
        t: ``[P]`` knot times after ``start_s`` (s); knot 0 is the state at acceptance, at 0.
        q, v, a: ``[P, n]`` knot positions (rad), velocities (rad/s) and accelerations (rad/s²).
        order: ``1`` linear, ``3`` cubic, ``5`` quintic interpolation.
        prepended: whether knot 0 is the state at acceptance rather than the goal's first point.
        path, goal: the tolerances while moving and at the end.
        goal_time_tolerance: s after the last point the goal may take (0: unbounded).
    """

    start_s: float
    t: Array
    q: Array
    v: Array
    a: Array
    order: int
    prepended: bool
    path: Tolerances
    goal: Tolerances
    goal_time_tolerance: float

    @property
    def end_s(self) -> float:
        """When the last point is due, on the node's clock (s)."""
        return self.start_s + float(self.t[-1])

    def sample(self, now_s: float) -> tuple[Array, Array, int]:
        """The desired positions and velocities ``[n]`` at ``now_s`` and the index of the goal's
        point being approached (0-based, as the controller's feedback ``index``)."""
        tau = now_s - self.start_s
        last = len(self.t) - 1 - int(self.prepended)
        if tau <= 0.0:
            return self.q[0].copy(), self.v[0].copy(), 0
        if tau >= self.t[-1]:
            return self.q[-1].copy(), self.v[-1].copy(), last
        i = int(np.searchsorted(self.t, tau, side="right")) - 1
        q, v = _segment(self, i, tau - self.t[i])
        return q, v, min(i + 1 - int(self.prepended), last)

    def check(self, now_s: float, q_d: Array, v_d: Array, q: Array, v: Array,
              joints: Sequence[str]) -> Verdict:  # fmt: skip
        """The verdict at ``now_s`` for the desired ``q_d, v_d`` and measured ``q, v [n]``."""
        if now_s < self.end_s:
            bad = _violations(q_d - q, v_d - v, self.path, joints)
            if bad:
                return Verdict(True, PATH_TOLERANCE_VIOLATED, f"path tolerance violated: {bad}")
            return Verdict(False)
        bad = _violations(q_d - q, v_d - v, self.goal, joints)
        if not bad:
            return Verdict(True, SUCCESSFUL, "Goal successfully reached!")
        late = now_s - self.end_s
        if self.goal_time_tolerance > 0.0 and late > self.goal_time_tolerance:
            return Verdict(
                True,
                GOAL_TOLERANCE_VIOLATED,
                f"goal tolerance violated {late:.3f} s after the trajectory's end "
                f"(goal_time_tolerance {self.goal_time_tolerance:g} s): {bad}",
            )
        return Verdict(False)


def _violations(dq: Array, dv: Array, tol: Tolerances, joints: Sequence[str]) -> str:
    out = [f"{j} position error {e:+.4f} rad beyond {t:g}"
           for j, e, t in zip(joints, dq, tol.position, strict=True) if abs(e) > t]  # fmt: skip
    out += [f"{j} velocity error {e:+.4f} rad/s beyond {t:g}"
            for j, e, t in zip(joints, dv, tol.velocity, strict=True) if abs(e) > t]  # fmt: skip
    return "; ".join(out)


def _segment(plan: Plan, i: int, s: float) -> tuple[Array, Array]:
    """Position and velocity ``s`` seconds into segment ``i`` of ``plan``."""
    h = plan.t[i + 1] - plan.t[i]
    q0, q1, v0, v1 = plan.q[i], plan.q[i + 1], plan.v[i], plan.v[i + 1]
    if plan.order == 1:
        slope = (q1 - q0) / h
        return q0 + slope * s, slope
    a0, a1 = (plan.a[i], plan.a[i + 1]) if plan.order == 5 else (None, None)
    if a0 is None:  # cubic Hermite
        c2 = (3 * (q1 - q0) - (2 * v0 + v1) * h) / h**2
        c3 = (2 * (q0 - q1) + (v0 + v1) * h) / h**3
        return q0 + v0 * s + c2 * s**2 + c3 * s**3, v0 + 2 * c2 * s + 3 * c3 * s**2
    d = q1 - q0
    c3 = (20 * d - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h**2) / (2 * h**3)
    c4 = (-30 * d + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h**2) / (2 * h**4)
    c5 = (12 * d - 6 * (v1 + v0) * h + (a1 - a0) * h**2) / (2 * h**5)
    q = q0 + v0 * s + a0 / 2 * s**2 + c3 * s**3 + c4 * s**4 + c5 * s**5
    v = v0 + a0 * s + 3 * c3 * s**2 + 4 * c4 * s**3 + 5 * c5 * s**4
    return q, v


def _tolerances(given: Sequence[Any], default: Tolerances, joints: Sequence[str],
                what: str) -> Tolerances:  # fmt: skip
    """``control_msgs/JointTolerance[]`` over ``default``: 0 keeps it, −1 erases it."""
    position, velocity = default.position.copy(), default.velocity.copy()
    index = {j: k for k, j in enumerate(joints)}
    for tol in given:
        if tol.name not in index:
            raise GoalError(INVALID_JOINTS, f"{what} names joint {tol.name!r}, not one of "
                               f"{list(joints)}")  # fmt: skip
        k = index[tol.name]
        for field, out in (("position", position), ("velocity", velocity)):
            value = float(getattr(tol, field))
            if not math.isfinite(value) or (value < 0 and value != -1.0):
                raise GoalError(INVALID_GOAL, f"{what} {tol.name} {field} {value!r}: expected "
                                   "> 0, 0 (default) or -1 (no check)")  # fmt: skip
            if value == -1.0:
                out[k] = np.inf
            elif value > 0:
                out[k] = value
    return Tolerances(position, velocity)


def plan_goal(
    goal: Any,
    joints: Sequence[str],
    lower: Array,
    upper: Array,
    now_s: float,
    q_now: Array,
    v_now: Array,
    path_default: Tolerances,
    goal_default: Tolerances,
    goal_time_default: float,
) -> Plan:
    """The plan of a ``FollowJointTrajectory.Goal`` for an arm with ``joints`` (position limits
    ``lower, upper [n]``, rad) whose controller commands ``q_now, v_now`` at ``now_s`` (s on the
    node's clock; a header stamp of 0 starts now).

    Raises:
        GoalError: naming the result code and what is wrong.
    """
    traj = goal.trajectory
    n = len(joints)
    names = list(traj.joint_names)
    if len(goal.multi_dof_trajectory.points) or len(goal.multi_dof_trajectory.joint_names):
        raise GoalError(INVALID_GOAL, "multi_dof_trajectory is not supported (one-dof joints)")
    if len(goal.component_path_tolerance) or len(goal.component_goal_tolerance):
        raise GoalError(INVALID_GOAL, "component tolerances are for multi-dof joints")
    if sorted(names) != sorted(joints) or len(set(names)) != len(names):
        raise GoalError(INVALID_JOINTS, f"joint_names {names}: expected each of "
                           f"{list(joints)} once")  # fmt: skip
    if not traj.points:
        raise GoalError(INVALID_GOAL, "the trajectory has no points")
    column = [names.index(j) for j in joints]
    times, q, v, a = [], [], [], []
    has_v = all(len(p.velocities) for p in traj.points)
    has_a = has_v and all(len(p.accelerations) for p in traj.points)
    for k, point in enumerate(traj.points):
        t = point.time_from_start.sec + 1e-9 * point.time_from_start.nanosec
        if (times and t <= times[-1]) or (not times and t < 0):
            raise GoalError(INVALID_GOAL, f"points[{k}].time_from_start {t:g} s does not "
                               "increase strictly")  # fmt: skip
        rows = []
        for field, wanted in (("positions", True), ("velocities", has_v),
                              ("accelerations", has_a)):  # fmt: skip
            values = np.asarray(getattr(point, field), dtype=np.float64)
            if not wanted:
                if values.size not in (0, n):
                    raise GoalError(INVALID_GOAL, f"points[{k}].{field} has {values.size} "
                                       f"values for {n} joints")  # fmt: skip
                continue
            if values.size != n or not np.isfinite(values).all():
                raise GoalError(INVALID_GOAL, f"points[{k}].{field}: expected {n} finite "
                                   f"values, got {values.tolist()}")  # fmt: skip
            rows.append(values[column])
        if np.any(rows[0] < lower) or np.any(rows[0] > upper):
            raise GoalError(INVALID_GOAL, f"points[{k}].positions outside the joint limits")
        times.append(t)
        q.append(rows[0])
        v.append(rows[1] if has_v else np.zeros(n))
        a.append(rows[2] if has_a else np.zeros(n))
    stamp = traj.header.stamp.sec + 1e-9 * traj.header.stamp.nanosec
    start = now_s if stamp == 0.0 else stamp
    if start + times[-1] < now_s:
        raise GoalError(OLD_HEADER_TIMESTAMP, f"the trajectory starting at {start:.3f} s ends "
                           f"{now_s - start - times[-1]:.3f} s in the past")  # fmt: skip
    gtt = goal.goal_time_tolerance.sec + 1e-9 * goal.goal_time_tolerance.nanosec
    prepended = times[0] > 0.0
    if prepended:  # from the commanded state to the first point, as the controller does
        times.insert(0, 0.0)
        q.insert(0, np.asarray(q_now, dtype=np.float64))
        v.insert(0, np.asarray(v_now, dtype=np.float64) if has_v else np.zeros(n))
        a.insert(0, np.zeros(n))
    return Plan(
        start_s=start,
        t=np.array(times),
        q=np.array(q),
        v=np.array(v),
        a=np.array(a),
        order=5 if has_a else 3 if has_v else 1,
        prepended=prepended,
        path=_tolerances(goal.path_tolerance, path_default, joints, "path_tolerance"),
        goal=_tolerances(goal.goal_tolerance, goal_default, joints, "goal_tolerance"),
        goal_time_tolerance=gtt if gtt > 0 else goal_time_default,
    )
