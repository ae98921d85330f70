"""Problem files: valid files build a Problem; invalid ones fail with one line naming the key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from test_cli_fixtures import TRUTH, pendulum_config, pendulum_dataset, write_pendulum_problem

from dynid.data.bag_write import write_bag
from dynid.data.trajectory import Dataset, Trajectory
from dynid.model.dynamics import TorchDynamics
from dynid.model.observe import FramePointObservation
from dynid.model.params import nominal_parameters
from dynid.problem_file import (
    Observation,
    ProblemFileError,
    Unactuated,
    load_problem,
    read_problem_file,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config" / "problems"


def _write(directory: Path, config: dict) -> Path:
    path = directory / "problem.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _error(directory: Path, config: dict) -> str:
    with pytest.raises(ProblemFileError) as info:
        load_problem(_write(directory, config))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_valid_file_builds_the_problem(tmp_path: Path) -> None:
    problem, pf = load_problem(write_pendulum_problem(tmp_path))
    assert pf.name == "dp_test"
    assert problem.spec.names == list(TRUTH)
    assert problem.truth == TRUTH
    assert problem.dt == pytest.approx(0.01)
    assert problem.obs_names == [
        "joint1/position",
        "joint2/position",
        "joint1/velocity",
        "joint2/velocity",
    ]
    assert problem.likelihood.windows == 3
    assert pf.estimator.name == "csvgd"
    assert pf.estimator.settings == {"num_particles": 4, "max_iterations": 2}
    assert isinstance(problem.control, Unactuated)
    assert problem.controls(problem.dataset[0]).shape == (31, 0)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (
            {"parameters": [{"name": "link9/mass", "lower": 0.0, "upper": 1.0}]},
            "parameters[0].name",
        ),
        ({"parameters": [{"name": "joint1/damping", "lower": 1.0, "upper": 0.0}]}, "lower"),
        ({"parameters": [{"name": "joint1/damping", "lower": 0, "upper": 1, "foo": 1}]}, "foo"),
        ({"robot": {"name": "no_such_robot"}}, "robot.name"),
        ({"robot": {"name": "double_pendulum", "locked_joints": {"elbow": 0.0}}}, "elbow"),
        ({"observe": {"joints": ["joint1", "wrist"]}}, "observe.joints"),
        ({"control": {"type": "torque", "actuated": ["wrist"]}}, "control.actuated"),
        ({"control": {"type": "magic"}}, "control.type"),
        ({"control": {"type": "current", "torque_constant": 1.0}}, "control.inputs"),
        ({"control": {"type": "torque", "inputs": ["a", "b", "c"]}}, "control.inputs"),
        ({"control": {"type": "prescribed"}}, "control.actuated"),
        (
            {
                "control": {
                    "type": "prescribed",
                    "actuated": ["joint1"],
                    "inputs": ["joint1/position"],
                }
            },
            "control.inputs",
        ),
        ({"control": {"type": "prescribed", "actuated": ["joint1", "joint2"]}}, "passive"),
        ({"control": {"type": "prescribed", "actuated": ["joint1"], "kp": 1.0}}, "kp"),
        ({"estimator": {"name": "no_such_estimator"}}, "estimator.name"),
        ({"estimator": {"name": "csvgd", "settings": {"wings": 2}}}, "estimator.settings"),
        ({"likelihood": {"obs_std": 0.1, "shots": 3}}, "likelihood"),
        ({"likelihood": {"obs_std": -1.0}}, "likelihood"),
        ({"attachments": [{"type": "balloon"}]}, "attachments[0].type"),
        (
            {
                "attachments": [
                    {
                        "type": "payload",
                        "link": "link2",
                        "mass": 1,
                        "com": [0, 0, 0],
                        "colour": "red",
                    }
                ]
            },
            "colour",
        ),
        ({"truth": {"joint3/damping": 0.1}}, "truth"),
        ({"data": {"source": "tape"}}, "data.source"),
        ({"data": {"source": "npz", "path": "missing.npz"}}, "data.path"),
        ({"data": {"source": "npz", "path": "dp.npz", "window": [2.0, 1.0]}}, "data.window"),
        ({"wat": 1}, "top level"),
        (
            {
                "data": {
                    "source": "npz",
                    "path": "dp.npz",
                    "passive_joints": {"joints": ["elbow"], "frame": "tip"},
                }
            },
            "data.passive_joints",
        ),
        (
            {"data": {"source": "npz", "path": "dp.npz", "passive_joints": {"frame": "tip"}}},
            "data.passive_joints",
        ),
    ],
)
def test_invalid_files_name_the_key(tmp_path: Path, change: dict, key: str) -> None:
    pendulum_dataset().save_npz(tmp_path / "dp.npz")
    message = _error(tmp_path, pendulum_config(**change))
    assert str(tmp_path / "problem.yaml") in message
    assert key in message


def test_missing_file_a_directory_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ProblemFileError, match="does not exist"):
        read_problem_file(tmp_path / "nope.yaml")
    with pytest.raises(ProblemFileError) as raised:
        read_problem_file(tmp_path)
    assert str(raised.value) == f"problem file {tmp_path} is a directory, not a YAML file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: [unclosed\n")
    with pytest.raises(ProblemFileError, match="invalid YAML"):
        read_problem_file(bad)


def test_bag_without_the_named_topics_names_the_topic(tmp_path: Path) -> None:
    bag = write_bag(pendulum_dataset(), tmp_path / "rec")
    config = pendulum_config(
        data={"source": "bag", "mocap": [{"body": "tip", "topic": "/vicon/tip/tip"}]}
    )
    with pytest.raises(ProblemFileError, match="/vicon/tip/tip"):
        load_problem(_write(tmp_path, config), bag=bag)
    config = pendulum_config(data={"source": "bag", "joint_states": {"topic": "/arm/js"}})
    with pytest.raises(ProblemFileError, match="/arm/js"):
        load_problem(_write(tmp_path, config), bag=bag)


def test_bag_source_reads_the_recording(tmp_path: Path) -> None:
    bag = write_bag(pendulum_dataset(), tmp_path / "rec")
    config = pendulum_config(data={"source": "bag"})
    problem, _ = load_problem(_write(tmp_path, config), bag=bag)
    np.testing.assert_allclose(problem.dataset[0].q, pendulum_dataset()[0].q, atol=1e-12)


def test_a_relative_bag_is_relative_to_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    """As in the README: `dynid fit --bag build/x.mcap --problem config/problems/p.yaml` run from
    the repository root reads build/x.mcap, not config/problems/build/x.mcap."""
    (tmp_path / "build").mkdir()
    (tmp_path / "config" / "problems").mkdir(parents=True)
    write_bag(pendulum_dataset(), tmp_path / "build" / "x")
    problem_path = _write(tmp_path / "config" / "problems", pendulum_config(data={"source": "bag"}))
    monkeypatch.chdir(tmp_path)
    problem, _ = load_problem(problem_path.relative_to(tmp_path), bag=Path("build") / "x")
    np.testing.assert_allclose(problem.dataset[0].q, pendulum_dataset()[0].q, atol=1e-12)


def test_a_recording_given_to_a_problem_without_a_bag_source_is_refused(tmp_path: Path) -> None:
    bag = write_bag(pendulum_dataset(), tmp_path / "rec")
    problem = write_pendulum_problem(tmp_path, data={"source": "npz", "path": "dp.npz"})
    load_problem(problem)  # its own data load
    with pytest.raises(ProblemFileError, match=r"data\.source: is 'npz'.*rec' would be ignored"):
        load_problem(problem, bag=bag)
    pathless = write_pendulum_problem(tmp_path, data={"source": "npz"})
    with pytest.raises(
        ProblemFileError, match=r"data\.path: no data file given \(set data\.path\)"
    ):
        load_problem(pathless)


def test_preprocessing_window_split_and_selection(tmp_path: Path) -> None:
    data = {"source": "npz", "path": "dp.npz", "window": [0.0, 0.2], "dt": 0.02,
            "velocities": "central", "split": 0.1, "trajectories": [0]}  # fmt: skip
    problem, _ = load_problem(write_pendulum_problem(tmp_path, data=data))
    traj = problem.dataset[0]
    assert len(problem.dataset) == 1
    assert problem.dt == pytest.approx(0.02)
    assert traj.t[-1] - traj.t[0] <= 0.1 + 1e-9
    full = pendulum_dataset()[0]
    i = int(np.argmin(np.abs(full.t - traj.t[1])))
    np.testing.assert_allclose(traj.q[1], full.q[i], atol=1e-3)


def test_observation_concatenates_parts() -> None:
    from dynid.model.robot import load_robot

    robot = load_robot("double_pendulum")
    dyn = TorchDynamics(robot)
    p = nominal_parameters(robot)
    pts = FramePointObservation("tip", [[0.0, 0.0, 0.0]])
    obs = Observation([pts, pts])
    q = torch.tensor([[0.3, -0.2]], dtype=torch.float64)
    y = obs(dyn, p, q, torch.zeros_like(q))
    assert obs.names == pts.names * 2
    torch.testing.assert_close(y[..., :3], y[..., 3:])
    assert Unactuated().input_size(2) == 0
    assert not Unactuated()(p, q, q, q[..., :0]).any()


def test_frame_points_are_derived_from_mocap_poses(tmp_path: Path) -> None:
    """Points 1 m along the tip axes, computed from a recorded tip pose, match the model's."""
    from dynid.model.robot import load_robot

    robot = load_robot("double_pendulum")
    dyn = TorchDynamics(robot)
    p = nominal_parameters(robot)
    base = pendulum_dataset()[0]
    q = torch.as_tensor(base.q).unsqueeze(0)
    R, t = dyn.frame_placement(p, q, ["tip"])
    from dynid.data.quaternion import from_matrix

    quat = from_matrix(R[0, :, 0].numpy())
    obs = np.concatenate([t[0, :, 0].numpy(), quat], axis=1)
    names = [f"tip_body/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    traj = base.replace(obs=obs, obs_names=names)
    Dataset([traj]).save_npz(tmp_path / "dp.npz")
    config = pendulum_config(
        observe={"joints": "none", "frame_points": [{"frame": "tip", "body": "tip_body"}]}
    )
    problem, _ = load_problem(_write(tmp_path, config))
    expected = FramePointObservation("tip")(dyn, p, q, q)[0].numpy()
    np.testing.assert_allclose(problem.targets(problem.dataset[0]).numpy(), expected, atol=1e-9)


def test_missing_pose_for_frame_points_names_the_body(tmp_path: Path) -> None:
    pendulum_dataset().save_npz(tmp_path / "dp.npz")
    config = pendulum_config(observe={"joints": "none", "frame_points": [{"frame": "tip"}]})
    message = _error(tmp_path, config)
    assert "observe.frame_points" in message
    assert "'tip'" in message


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_problem_files_validate(path: Path) -> None:
    pf = read_problem_file(path)
    assert pf.spec.dim > 0
    assert pf.estimator.name


def test_prescribed_control_feeds_the_recorded_motion(tmp_path: Path) -> None:
    """joint1 follows the recording: its position, velocity and the forward difference of the
    velocity (the mean acceleration over each sample) are the inputs."""
    from dynid.model.integrate import PrescribedMotion

    path = write_pendulum_problem(tmp_path, control={"type": "prescribed", "actuated": ["joint1"]})
    problem, _ = load_problem(path)
    assert isinstance(problem.control, PrescribedMotion)
    assert problem.control_names == [
        "joint1/position", "joint1/velocity", "joint1/acceleration"
    ]  # fmt: skip
    traj = problem.dataset[0]
    u = problem.controls(traj).numpy()
    np.testing.assert_array_equal(u[:, 0], traj.q[:, 0])
    np.testing.assert_array_equal(u[:, 1], traj.dq[:, 0])
    expected = (traj.dq[1:, 0] - traj.dq[:-1, 0]) / np.diff(traj.t)
    np.testing.assert_allclose(u[:-1, 2], expected, rtol=1e-12)
    assert u[-1, 2] == u[-2, 2]


def test_demo_problem_matches_the_panda_box_file() -> None:
    """The embedded demo and config/problems/panda_box.yaml describe the same model."""
    from dynid.demo import DEMO_PROBLEM

    shipped = yaml.safe_load((CONFIG_DIR / "panda_box.yaml").read_text())
    for key in ("robot", "attachments", "parameters", "control", "observe"):
        assert shipped[key] == DEMO_PROBLEM[key], key


def test_trajectory_validation_error_is_wrapped(tmp_path: Path) -> None:
    traj = pendulum_dataset()[0]
    other = Trajectory(t=traj.t, q=traj.q, dq=traj.dq, joint_names=["a", "b"])
    Dataset([other]).save_npz(tmp_path / "dp.npz")
    message = _error(tmp_path, pendulum_config())
    assert "joint1" in message


def test_passive_joint_is_solved_from_the_mocap_pose() -> None:
    """joint2 of the double pendulum, removed from the recording, is recovered from the tip pose."""
    from dynid.data.pipeline import solve_passive_joints
    from dynid.data.quaternion import from_matrix
    from dynid.model.robot import load_robot

    robot = load_robot("double_pendulum")
    full = pendulum_dataset(steps=30)[0]
    q = torch.as_tensor(full.q).unsqueeze(0)
    R, t = TorchDynamics(robot).frame_placement(nominal_parameters(robot), q, ["tip"])
    obs = np.concatenate([t[0, :, 0].numpy(), from_matrix(R[0, :, 0].numpy())], axis=1)
    recording = Trajectory(
        t=full.t,
        q=full.q[:, :1],
        dq=full.dq[:, :1],
        joint_names=["joint1"],
        obs=obs,
        obs_names=[f"tip_body/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
    )
    out = solve_passive_joints(robot, recording, ["joint2"], "tip", "tip_body")
    assert out.joint_names == ["joint1", "joint2"]
    np.testing.assert_allclose(out.q[:, 1], full.q[:, 1], atol=1e-9)
    np.testing.assert_allclose(out.dq[3:-3, 1], full.dq[3:-3, 1], atol=0.05)


def test_scenario_source_brings_its_truth() -> None:
    config = pendulum_config(
        parameters=[{"name": f"link{i}/length", "lower": 0.5, "upper": 3.0} for i in (1, 2)],
        truth=None,
        data={"source": "scenario", "scenario": "double_pendulum",
              "settings": {"trajectories": 1, "steps": 10}},
    )  # fmt: skip
    del config["truth"]
    problem, _ = load_problem(config)
    assert set(problem.truth) == {"link1/length", "link2/length"}
    assert 0.5 < problem.truth["link1/length"] < 3.0
    assert len(problem.dataset) == 1


def test_scalar_values_keeps_single_valued_entries() -> None:
    from dynid.problem_file import scalar_values

    values = {"a/mass": 1.0, "b/mass": [2.0, 2.0], "c/mass": [1.0, 3.0]}
    assert scalar_values(values) == {"a/mass": 1.0, "b/mass": 2.0}
