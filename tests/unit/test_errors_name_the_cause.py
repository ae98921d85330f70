"""Errors that end a fit name the cause — the topic, its stamps and how many samples are needed —
instead of the step that tripped over it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cli_fixtures import pendulum_config, pendulum_dataset, write_pendulum_problem
from test_fit_partly_invalid_bag import BAG_DATA, STEP, T0, pendulum_bag

from dynid.cli import main
from dynid.estimators.base import EstimatorError
from dynid.objective.shooting import ShootingLikelihood
from dynid.problem_file import load_problem


def test_too_few_samples_for_the_shooting_windows_names_them() -> None:
    """'1 steps cannot be cut into 25 shooting windows' named neither the trajectory nor what
    the windows need."""
    config = pendulum_config(likelihood={"obs_std": 0.05, "shooting": "multiple", "windows": 25})
    dataset = pendulum_dataset(steps=3)
    traj = dataset[0]
    traj.meta.update(source="run.mcap", joint_states_topic="/joint_states",
                     t0_ns=1_700_000_000_000_000_000)  # fmt: skip
    problem, _ = load_problem(config, dataset=dataset)
    with pytest.raises(EstimatorError) as info:
        ShootingLikelihood(problem)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "problem 'dp_test': 25 shooting windows need at least 26 samples per trajectory (25 steps "
        "of 0.01 s), but the trajectories have 4 (run.mcap /joint_states: 4 samples, stamps "
        "1700000000.000000000 .. 1700000000.030000000 s); record longer, or lower "
        "likelihood.windows"
    )
    assert np.isclose(traj.t[-1], 0.03)


def _fit(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of ``dynid fit argv`` (exit status 2)."""
    status = main(["fit", "--no-progress", "--iterations", "2", "--particles", "2", *argv])
    err = capsys.readouterr().err
    assert status == 2, err
    (line,) = err.splitlines()
    return line


def test_stamps_going_backwards_are_named_with_the_stamps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From message 20 on the stamps restart 0.185 s earlier: the 19 messages stamped before
    message 19 are skipped, and the refusal says so with the first pair of stamps."""

    def back(k: int, stamp: int, position: np.ndarray) -> tuple[int, np.ndarray]:
        return (stamp - 195_000_000 if k >= 20 else stamp), position

    bag = pendulum_bag(tmp_path / "run", back)
    problem = write_pendulum_problem(tmp_path, steps=5, data=BAG_DATA)
    line = _fit(capsys, "--problem", str(problem), "--bag", str(bag), "-o", str(tmp_path / "o"))
    assert line.startswith(
        f"dynid fit: error: {bag}: topic '/joint_states': 19 of 61 messages skipped (31.1 %, more "
        "than the 5 % allowed): header.stamp earlier than the previous message (first "
        "1700000000.005000000 s after 1700000000.190000000 s): 19"
    )


def test_a_preprocessing_failure_names_the_trajectory_and_the_skipped_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shuffled stamps, allowed through: 'lowpass: cut-off 20 Hz must lie in (0, ...) Hz' alone
    hid the cause; the error names the key, the trajectory left (samples, stamps) and the
    messages the reader skipped, with the stamps going backwards."""
    order = np.random.default_rng(0).permutation(61)

    def shuffled(k: int, stamp: int, position: np.ndarray) -> tuple[int, np.ndarray]:
        return T0 + int(order[k]) * STEP, position

    bag = pendulum_bag(tmp_path / "run", shuffled)
    data = {**BAG_DATA, "lowpass_hz": 20.0}
    problem = write_pendulum_problem(tmp_path, steps=5, data=data)
    line = _fit(capsys, "--problem", str(problem), "--bag", str(bag),
                "--max-skipped-percent", "100", "-o", str(tmp_path / "o"))  # fmt: skip
    assert line.startswith(f"dynid fit: error: {problem}: data.lowpass_hz: lowpass: cut-off 20")
    assert f"(trajectory 0, {bag} /joint_states: " in line
    assert (
        f"the bag reader skipped messages: {bag}: /joint_states (sensor_msgs/msg/JointState): "
        in line
    )
    assert "header.stamp earlier than the previous message (first " in line


def test_two_messages_name_the_samples_the_windows_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two messages ended in '1 steps cannot be cut into 3 shooting windows'."""
    bag = pendulum_bag(tmp_path / "run", lambda k, stamp, q: (stamp, q) if k < 2 else None)
    problem = write_pendulum_problem(tmp_path, steps=5, data=BAG_DATA)
    line = _fit(capsys, "--problem", str(problem), "--bag", str(bag), "-o", str(tmp_path / "o"))
    assert line == (
        "dynid fit: error: problem 'dp_test': 3 shooting windows need at least 4 samples per "
        "trajectory (3 steps of 0.01 s), but the trajectories have 2 "
        f"({bag} /joint_states: 2 samples, stamps 1700000000.000000000 .. 1700000000.010000000 "
        "s); record longer, or lower likelihood.windows"
    )
