"""FollowJointTrajectory goals as joint_trajectory_controller takes them: checks and result
codes, interpolation by order, tolerances (``dynid_ros.follow``; messages as plain objects with
the same fields)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

from dynid_ros import follow

JOINTS = ("a", "b")
LOWER, UPPER = np.array([-2.0, -2.0]), np.array([2.0, 2.0])
UNCHECKED = follow.Tolerances.unchecked(2)


def stamp(seconds: float) -> NS:
    return NS(sec=int(seconds), nanosec=round((seconds - int(seconds)) * 1e9))


def point(t: float, q, v=(), a=()) -> NS:
    return NS(time_from_start=stamp(t), positions=list(q), velocities=list(v),
              accelerations=list(a))  # fmt: skip


def goal(points, names=JOINTS, header_s=0.0, path=(), goal_tol=(), goal_time=0.0) -> NS:
    return NS(
        trajectory=NS(joint_names=list(names), points=list(points),
                      header=NS(stamp=stamp(header_s))),
        multi_dof_trajectory=NS(joint_names=[], points=[]),
        path_tolerance=list(path), goal_tolerance=list(goal_tol),
        component_path_tolerance=[], component_goal_tolerance=[],
        goal_time_tolerance=stamp(goal_time),
    )  # fmt: skip


def plan(g, now=10.0, q_now=(0.0, 0.0), v_now=(0.0, 0.0)) -> follow.Plan:
    return follow.plan_goal(g, JOINTS, LOWER, UPPER, now, np.array(q_now), np.array(v_now),
                            UNCHECKED, UNCHECKED, 0.0)  # fmt: skip


def test_the_trajectory_starts_at_the_commanded_state_and_is_reordered_to_the_arms_joints():
    p = plan(goal([point(1.0, [0.3, -0.5])], names=("b", "a")), q_now=(0.1, 0.2))
    assert p.prepended
    assert p.order == 1
    assert p.start_s == 10.0
    np.testing.assert_allclose(p.sample(10.0)[0], [0.1, 0.2])
    np.testing.assert_allclose(p.sample(11.0)[0], [-0.5, 0.3])
    q, v, index = p.sample(10.5)  # linear: halfway, constant slope
    np.testing.assert_allclose(q, [-0.2, 0.25])
    np.testing.assert_allclose(v, [-0.6, 0.1])
    assert index == 0
    np.testing.assert_allclose(p.sample(20.0)[0], [-0.5, 0.3])  # held after the end


@pytest.mark.parametrize("with_acc", [False, True])
def test_cubic_and_quintic_segments_meet_the_points_positions_velocities_accelerations(with_acc):
    a = ([1.0, -2.0], [0.5, 0.0]) if with_acc else ((), ())
    g = goal([point(0.0, [0.0, 0.0], [0.0, 0.0], a[0]),
              point(0.8, [0.4, -0.3], [0.2, -0.1], a[1])])  # fmt: skip
    p = plan(g)
    assert not p.prepended
    assert p.order == (5 if with_acc else 3)
    h = 1e-5
    for t, q, v in ((10.0 + 1e-9, [0.0, 0.0], [0.0, 0.0]), (10.8 - 1e-9, [0.4, -0.3], [0.2, -0.1])):
        qs, vs, _ = p.sample(t)
        np.testing.assert_allclose(qs, q, atol=1e-7)
        np.testing.assert_allclose(vs, v, atol=1e-6)
    # the velocity is the derivative of the position
    q1, q2 = p.sample(10.3 - h)[0], p.sample(10.3 + h)[0]
    np.testing.assert_allclose((q2 - q1) / (2 * h), p.sample(10.3)[1], atol=1e-6)
    if with_acc:  # accelerations at the ends from the velocity's derivative
        for t, acc in ((10.0 + 2 * h, a[0]), (10.8 - 2 * h, a[1])):
            dv = (p.sample(t + h)[1] - p.sample(t - h)[1]) / (2 * h)
            np.testing.assert_allclose(dv, acc, atol=1e-3)


@pytest.mark.parametrize(
    ("g", "code", "needle"),
    [
        (goal([point(1.0, [0.0, 0.0])], names=("a", "c")), follow.INVALID_JOINTS, "'c'"),
        (goal([point(1.0, [0.0, 0.0, 0.0])], names=("a", "b", "b")), follow.INVALID_JOINTS,
         "once"),
        (goal([]), follow.INVALID_GOAL, "no points"),
        (goal([point(1.0, [0.0, 0.0]), point(1.0, [0.1, 0.0])]), follow.INVALID_GOAL,
         "increase"),
        (goal([point(1.0, [0.0])]), follow.INVALID_GOAL, "positions"),
        (goal([point(1.0, [0.0, float("nan")])]), follow.INVALID_GOAL, "finite"),
        (goal([point(1.0, [3.0, 0.0])]), follow.INVALID_GOAL, "joint limits"),
        (goal([point(1.0, [0.0, 0.0])], header_s=5.0), follow.OLD_HEADER_TIMESTAMP, "past"),
        (goal([point(1.0, [0.0, 0.0])], path=[NS(name="z", position=0.1, velocity=0.0)]),
         follow.INVALID_JOINTS, "'z'"),
        (goal([point(1.0, [0.0, 0.0])], path=[NS(name="a", position=-2.0, velocity=0.0)]),
         follow.INVALID_GOAL, "-1"),
    ],
)  # fmt: skip
def test_goals_the_controller_rejects_name_the_result_code(g, code, needle) -> None:
    with pytest.raises(follow.GoalError) as err:
        plan(g)
    assert err.value.code == code
    assert needle in str(err.value)
    assert follow.CODE_NAMES[code] in str(err.value)


def test_tolerances_path_goal_and_goal_time() -> None:
    tol = [NS(name="a", position=0.05, velocity=0.0), NS(name="b", position=-1.0, velocity=0.0)]
    g = goal([point(1.0, [0.5, 0.5])], path=tol, goal_tol=tol, goal_time=0.2)
    p = plan(g)
    assert p.path.position.tolist() == [0.05, np.inf]  # -1 erases, 0 keeps the default
    z = np.zeros(2)
    moving = p.check(10.5, np.array([0.25, 0.25]), z, np.array([0.19, 0.0]), z, JOINTS)
    assert moving.done
    assert moving.code == follow.PATH_TOLERANCE_VIOLATED
    assert "a position" in moving.message
    assert not p.check(10.5, np.array([0.25, 0.25]), z, np.array([0.24, 0.0]), z, JOINTS).done
    end = np.array([0.5, 0.5])
    assert not p.check(11.1, end, z, np.array([0.4, 0.5]), z, JOINTS).done  # still in time
    late = p.check(11.3, end, z, np.array([0.4, 0.5]), z, JOINTS)
    assert late.code == follow.GOAL_TOLERANCE_VIOLATED
    assert "goal_time_tolerance" in late.message
    ok = p.check(11.0, end, z, np.array([0.48, -1.0]), z, JOINTS)
    assert ok.done
    assert ok.code == follow.SUCCESSFUL
