"""Trajectory / Dataset validation, slicing, resampling, NPZ round trips."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.data import Dataset, Trajectory, TrajectoryError


def _traj(T: int = 20, seed: int = 0) -> Trajectory:
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=(T, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    return Trajectory(
        t=0.5 + 0.01 * np.arange(T),
        q=rng.normal(size=(T, 2)),
        joint_names=["j1", "j2"],
        dq=rng.normal(size=(T, 2)),
        effort=rng.normal(size=(T, 2)),
        command=rng.normal(size=(T, 1)),
        command_names=["j1/position"],
        obs=np.concatenate([rng.normal(size=(T, 3)), quat], axis=1),
        obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
        meta={"robot": "test", "t0_ns": 123},
    )


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"t": [0.0, 0.1, 0.1]}, r"Trajectory\.t: .*strictly increasing.*t\[1\]"),
        ({"t": [0.0, 0.2, 0.1]}, r"strictly increasing"),
        ({"t": [0.0, np.nan, 0.3]}, r"Trajectory\.t: 1 non-finite"),
        ({"q": np.zeros((3, 3))}, r"Trajectory\.q: expected shape \[3, 2\]"),
        ({"q": [[0, 0], [0, np.inf], [0, 0]]}, r"Trajectory\.q: .*sample 1 channel 'b'"),
        ({"joint_names": ["a", "a"]}, r"joint_names: names must be unique.*'a'"),
        ({"dq": np.zeros((2, 2))}, r"Trajectory\.dq: expected shape \[3, 2\]"),
        ({"command_names": ["u"]}, r"command_names: 1 names given but command is None"),
        ({"obs": np.zeros((3, 1)), "obs_names": ["x"], "effort": [[0, 0]] * 2}, r"effort"),
    ],
)
def test_validation_names_the_field(change: dict, match: str) -> None:
    kwargs = {"t": [0.0, 0.1, 0.2], "q": np.zeros((3, 2)), "joint_names": ["a", "b"]}
    kwargs.update(change)
    with pytest.raises(TrajectoryError, match=match):
        Trajectory(**kwargs)


def test_slice_keeps_time_origin_and_bounds() -> None:
    traj = _traj()
    part = traj.slice(0.55, 0.6)
    np.testing.assert_array_equal(part.t, traj.t[5:11])
    np.testing.assert_array_equal(part.obs, traj.obs[5:11])
    with pytest.raises(TrajectoryError, match="no sample in"):
        traj.slice(2.0, 3.0)


def test_resample_is_exact_on_linear_signals_and_keeps_unit_quaternions() -> None:
    t = np.sort(np.random.default_rng(1).uniform(0.0, 1.0, size=40))
    t[0], t[-1] = 0.0, 1.0
    a, b = np.array([0.3, -2.0]), np.array([1.5, 0.25])
    angle = 0.7 * t  # rotation about z, linear in time
    quat = np.stack([0 * t, 0 * t, np.sin(angle / 2), np.cos(angle / 2)], axis=1)
    traj = Trajectory(
        t=t,
        q=a + np.outer(t, b),
        joint_names=["j1", "j2"],
        obs=quat,
        obs_names=["b/qx", "b/qy", "b/qz", "b/qw"],
    )
    out = traj.resample(0.01)
    np.testing.assert_allclose(out.t, 0.01 * np.arange(101), atol=1e-15)
    np.testing.assert_allclose(out.q, a + np.outer(out.t, b), rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(out.obs, axis=1), 1.0, atol=1e-15)
    # slerp of a constant-rate rotation is the rotation at the interpolated time
    np.testing.assert_allclose(out.obs[:, 2], np.sin(0.35 * out.t), atol=1e-12)


def test_npz_round_trip_is_bit_identical(tmp_path) -> None:
    traj = _traj()
    loaded = Trajectory.load_npz(traj.save_npz(tmp_path / "a.npz"))
    assert loaded.same_data(traj)
    assert loaded.meta == traj.meta
    ds = Dataset([traj, _traj(seed=3).replace(dq=None, command=None, command_names=[])])
    back = Dataset.load_npz(ds.save_npz(tmp_path / "d.npz"))
    assert back.same_data(ds)
    assert back[1].dq is None
    assert not back.same_data(Dataset([traj, traj]))


def test_dataset_requires_same_joints() -> None:
    traj = _traj()
    other = traj.replace(joint_names=["j2", "j1"])
    with pytest.raises(TrajectoryError, match=r"trajectories\[1\]\.joint_names"):
        Dataset([traj, other])
    assert len(Dataset([traj, traj])[1:]) == 1


def test_meta_must_be_json(tmp_path) -> None:
    traj = _traj().replace(meta={"bad": object()})
    with pytest.raises(TrajectoryError, match="JSON"):
        traj.save_npz(tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()
