"""The exciter's motion (``dynid_ros.excitation_motion``): reading ``trajectory.csv`` as ``dynid
excite`` writes it, time scaling, thinning, the start check and the move to the start."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.excite import FourierMotion
from dynid.excite.output import csv_header
from dynid_ros.excitation_motion import MotionError, approach, read_csv

JOINTS = ["j1", "j2"]


def fourier_csv(path, rate=1000.0):
    """A seeded two-joint rest-to-rest Fourier motion of 2 s in ``trajectory.csv`` layout; its
    samples."""
    motion = FourierMotion(np.array([0.3, -0.5]), 2.0, 2, 0.5, 0.4)
    c = np.random.default_rng(0).uniform(-1.0, 1.0, motion.num_coefficients)
    t, q, v, a, _ = motion.sample(c, rate)
    rows = [",".join(f"{x:.12g}" for x in row) for row in np.column_stack([t, q, v, a])]
    path.write_text("\n".join([",".join(csv_header(JOINTS)), *rows]) + "\n")
    return q, v, a


def test_the_csv_reads_back_and_scales_as_the_same_path_slower(tmp_path) -> None:
    q, v, a = fourier_csv(tmp_path / "trajectory.csv")
    motion = read_csv(tmp_path / "trajectory.csv")
    assert motion.joint_names == JOINTS
    np.testing.assert_allclose(motion.q, q, atol=1e-11)
    slow = motion.scaled(0.25)
    assert slow.duration == pytest.approx(8.0)
    # the scaled motion is q(s·t): its velocity and acceleration by the chain rule, checked
    # against finite differences of its own positions
    dt = np.diff(slow.t)
    np.testing.assert_allclose(np.diff(slow.q, axis=0) / dt[:, None],
                               0.5 * (slow.v[1:] + slow.v[:-1]), atol=1e-4)  # fmt: skip
    np.testing.assert_allclose(np.diff(slow.v, axis=0) / dt[:, None],
                               0.5 * (slow.a[1:] + slow.a[:-1]), atol=1e-4)  # fmt: skip
    np.testing.assert_allclose(slow.v, v * 0.25)
    np.testing.assert_allclose(slow.a, a * 0.0625)
    thin = slow.thinned(100.0)
    assert thin.t[-1] == slow.t[-1]
    # samples 4 ms apart: every second one is the coarsest grid within 10 ms
    np.testing.assert_allclose(np.diff(thin.t), 0.008, atol=1e-9)
    np.testing.assert_array_equal(thin.q, slow.q[::2])
    with pytest.raises(MotionError, match="speed_scale must be > 0"):
        motion.scaled(0.0)


def test_the_start_check_names_the_joint_and_missing_joints(tmp_path) -> None:
    fourier_csv(tmp_path / "trajectory.csv")
    motion = read_csv(tmp_path / "trajectory.csv")
    error, joint = motion.start_error({"j1": 0.3, "j2": -0.8, "other": 1.0})
    assert joint == "j2"
    assert error == pytest.approx(0.3)
    with pytest.raises(MotionError, match=r"joints \['j2'\] of the trajectory are not in"):
        motion.start_error({"j1": 0.3})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,j1,j1/velocity\n0,0,0\n0.1,0,0\n", "expected time, one column per joint"),
        ("time,j1,j1/velocity,j1/acceleration\n0,0,0,0\n0.1,0,x,0\n", "could not convert"),
        ("time,j1,j1/velocity,j1/acceleration\n0,0,0,0\n0,0,0,0\n", "increase strictly"),
        ("time,j1,j1/velocity,j1/acceleration\n0,0,0,0\n0.1,0,nan,0\n", "finite values"),
        ("time,j1,j1/velocity,j1/acceleration\n0,0,0,0\n", "at least two samples"),
    ],
)
def test_a_bad_trajectory_file_is_refused_with_the_file_named(tmp_path, text, message) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(MotionError, match=message) as info:
        read_csv(path)
    assert str(info.value).startswith(str(path))
    with pytest.raises(MotionError, match="cannot read the trajectory"):
        read_csv(tmp_path / "missing.csv")


def test_the_move_to_start_is_rest_to_rest_within_the_speed() -> None:
    q0, q1 = np.array([0.0, 1.0]), np.array([0.5, 0.2])
    move = approach(JOINTS, q0, q1, max_speed=0.2, rate_hz=100.0)
    np.testing.assert_allclose(move.q[0], q0)
    np.testing.assert_allclose(move.q[-1], q1, atol=1e-12)
    np.testing.assert_allclose(move.v[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(move.a[[0, -1]], 0.0, atol=1e-9)
    assert move.duration == pytest.approx(1.875 * 0.8 / 0.2)
    assert np.max(np.abs(move.v)) <= 0.2 + 1e-9
    assert np.max(np.abs(move.v)) >= 0.199  # the slowest move that keeps the limit
