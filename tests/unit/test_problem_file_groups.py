"""Problem files: parameter groups, several and shared recordings, and the validation section."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dynid.data.bag_write import write_bag
from dynid.data.topics import BagLayout, JointStateTopic
from dynid.data.trajectory import Dataset, Trajectory
from dynid.model.robot import load_robot
from dynid.model.spatial import log_cholesky_from_dynamic_params
from dynid.problem_file import ProblemFileError, read_problem_file

JOINTS = ["joint1", "joint2"]


def _config(**extra) -> dict:
    config = {
        "robot": {"name": "double_pendulum"},
        "parameters": [
            {"group": "inertials", "links": ["link2"], "log_std": 0.3, "length_std": 0.02},
            {
                "group": "joints",
                "fields": {
                    "damping": {"lower": 0.0, "upper": 1.0},
                    "torque_offset": {"lower": -1.0, "upper": 1.0, "prior": "gaussian",
                                      "std": 0.5},
                },
            },
        ],
        "data": {"source": "bag", "joint_states": {"topic": "/joint_states", "joints": JOINTS}},
        "control": {"type": "torque"},
        "likelihood": {"kind": "inverse_dynamics"},
    }  # fmt: skip
    config.update(extra)
    return config


def test_groups_expand_on_the_robot_with_priors_about_its_values() -> None:
    pf = read_problem_file(_config())
    robot = load_robot("double_pendulum")
    lc = [f"link2/log_cholesky_{k}" for k in range(10)]
    assert pf.spec.names == [*lc, "joint1/damping", "joint1/torque_offset",
                             "joint2/damping", "joint2/torque_offset"]  # fmt: skip
    nominal = log_cholesky_from_dynamic_params(torch.as_tensor(robot.nominal_inertia()[1]))
    for k, p in enumerate(pf.spec.parameters[:10]):
        assert p.prior == "gaussian"
        assert p.mean == pytest.approx(float(nominal[k]), abs=1e-12)
        assert p.std == (0.3 if k < 4 else 0.02)
        assert p.upper - p.lower == pytest.approx(12.0 * p.std)
    offset = pf.spec.parameters[pf.spec.index("joint2/torque_offset")]
    assert (offset.prior, offset.mean, offset.std) == ("gaussian", 0.0, 0.5)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"group": "inertia"}, r"parameters\[0\].group: 'inertia' is not one of"),
        ({"group": "inertials", "mass": 1}, r"parameters\[0\] \(inertials\).*mass"),
        ({"group": "inertials", "links": ["hand"]}, "'hand'.*not moving links"),
        ({"group": "joints", "fields": {"friction": {"lower": 0, "upper": 1}}}, "friction"),
        ({"group": "inertials", "log_std": -1.0}, "log_std"),
    ],
)
def test_bad_groups_are_one_line_errors(entry: dict, message: str) -> None:
    with pytest.raises(ProblemFileError, match=message):
        read_problem_file(_config(parameters=[entry]))


def _bag(path, seconds: float, offset: float) -> None:
    t = np.arange(round(seconds * 100) + 1) / 100.0
    q = np.stack([np.sin(t + offset), np.cos(t)], axis=1)
    traj = Trajectory(t=t, q=q, joint_names=JOINTS, dq=np.gradient(q, t, axis=0),
                      effort=0.1 * q)  # fmt: skip
    write_bag(Dataset([traj]), path, BagLayout(JointStateTopic("/joint_states", tuple(JOINTS))))


def test_several_shared_recordings_and_held_out_bags(tmp_path, monkeypatch) -> None:
    shared = tmp_path / "shared"
    (shared / "rig").mkdir(parents=True)
    for name, seconds in (("a", 1.0), ("b", 2.0), ("c", 0.5)):
        _bag(shared / "rig" / name, seconds, 0.1)
    monkeypatch.setenv("DYNID_DATA_DIR", str(shared))
    data = {**_config()["data"], "path": ["shared:rig/a", "shared:rig/b"]}
    pf = read_problem_file(_config(data=data, validation={"bags": ["shared:rig/c"]}))
    train = pf.load_dataset()
    assert [len(tr.t) for tr in train] == [101, 201]
    (held,) = pf.load_validation()
    assert len(held.t) == 51

    def missing() -> None:
        raise FileNotFoundError("real recordings not found")

    monkeypatch.setattr("dynid.problem_file.parse.shared_data_dir", missing)
    pf = read_problem_file(_config(data=data))
    with pytest.raises(ProblemFileError, match="DYNID_DATA_DIR"):
        pf.load_dataset()


def test_default_split_holds_out_the_tail_without_overlap(tmp_path) -> None:
    _bag(tmp_path / "run", 2.0, 0.0)
    data = {**_config()["data"], "path": str(tmp_path / "run")}
    pf = read_problem_file(_config(data=data, validation={}))
    (train,) = pf.load_dataset()
    (held,) = pf.load_validation()
    assert len(train.t) + len(held.t) == 201
    assert len(held.t) == pytest.approx(0.2 * 201, abs=1)
    assert train.t[-1] < held.t[0]
    assert read_problem_file(_config(data=data)).load_validation() is None
    with pytest.raises(ProblemFileError, match=r"validation.fraction: must lie in \(0, 1\)"):
        read_problem_file(_config(data=data, validation={"fraction": 1.5}))
