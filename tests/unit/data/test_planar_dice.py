"""Reading the planar dice drops: the format, clear errors, and the shared recordings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dynid.data.errors import DataError
from dynid.data.planar_dice import COLUMNS, load_dice_states, load_dice_trajectories


def _write(root: Path, source: str, name: str, text: str) -> None:
    (root / source).mkdir(parents=True, exist_ok=True)
    (root / source / name).write_text(text, encoding="utf-8")


def test_reads_a_drop_as_states_and_trajectory(tmp_path: Path) -> None:
    rows = "\n".join(",".join(str(0.1 * i + j) for j in range(6)) for i in range(4))
    _write(tmp_path, "real", "traj_7.csv", ",".join(COLUMNS) + "\n" + rows + "\n")
    (states,) = load_dice_states([7], root=tmp_path)
    assert states.shape == (4, 6)
    (traj,) = load_dice_trajectories([7], root=tmp_path)
    assert traj.joint_names == ["x", "z", "theta"]
    np.testing.assert_allclose(traj.t, np.arange(4) / 250.0)
    np.testing.assert_array_equal(traj.dq, states[:, 3:])
    assert traj.meta["source"] == "planar-dice/real/traj_7.csv"


def test_errors_name_the_file(tmp_path: Path) -> None:
    _write(tmp_path, "real", "traj_1.csv", "x,z,th\n0,0,0\n")
    with pytest.raises(DataError, match=r"traj_1\.csv: expected the columns x,z,th,vx,vz,vth"):
        load_dice_states([1], root=tmp_path)
    with pytest.raises(DataError, match=r"traj_2\.csv: no such planar dice drop"):
        load_dice_states([2], root=tmp_path)
    _write(tmp_path, "real", "traj_3.csv", ",".join(COLUMNS) + "\n1,2,3,4,5,nan\n")
    with pytest.raises(DataError, match=r"traj_3\.csv: non-finite"):
        load_dice_states([3], root=tmp_path)
    with pytest.raises(DataError, match="real or pybullet"):
        load_dice_states([1], source="mujoco", root=tmp_path)


def test_shared_recordings(shared_recording) -> None:
    shared_recording("planar-dice", "real")
    real, sim = load_dice_states([401])[0], load_dice_states([401], source="pybullet")[0]
    assert real.shape == sim.shape == (200, 6)
    np.testing.assert_allclose(real[0], sim[0])  # PyBullet starts from the recorded state
    assert abs(real[-1, 1] - 0.03) < 5e-3  # about at rest on a face: centre half a side up
