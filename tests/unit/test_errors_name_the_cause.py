"""Errors that end a fit name the cause — the topic, its stamps and how many samples are needed —
instead of the step that tripped over it."""

from __future__ import annotations

import numpy as np
import pytest
from test_cli_fixtures import pendulum_config, pendulum_dataset

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
