"""The frozen ``Problem``: data converted once, derived problems that keep what stays valid, and
held-out validation keeping the residuals it scored on them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.errors import ProblemError
from dynid.model.integrate import TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.posterior import Posterior
from dynid.problem import LikelihoodSettings, Problem
from dynid.validation import torque_residuals, validate


def _trajectory(phase: float) -> Trajectory:
    robot = load_robot("double_pendulum")
    t = np.arange(21) * 0.01
    return Trajectory(
        t=t,
        q=np.stack([np.sin(t + phase), np.cos(t)], axis=1),
        joint_names=robot.joint_names,
        dq=np.stack([np.cos(t + phase), -np.sin(t)], axis=1),
        effort=np.stack([np.sin(3 * t), np.cos(2 * t)], axis=1),
        meta={"source": f"swing {phase}"},
    )


@pytest.fixture(scope="module")
def problem() -> Problem:
    robot = load_robot("double_pendulum")
    obs = JointObservation(robot, velocities=True)
    return Problem(
        robot=robot,
        spec=ParameterSpec([Parameter("link1/mass", 0.5, 2.0)]),
        dataset=Dataset([_trajectory(0.0), _trajectory(0.5)]),
        dt=0.01,
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=LikelihoodSettings(
            kind="inverse_dynamics", stride=3, cutoff_hz=10.0, trim_s=0.02
        ),
    )


def test_a_problem_cannot_be_changed(problem: Problem) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.truth = {"link1/mass": 1.0}  # type: ignore[misc]


def test_the_data_are_converted_once_in_the_robots_joint_order(problem: Problem) -> None:
    traj = problem.dataset[1]
    assert problem.targets(traj) is problem.data[1].targets
    expected = torch.as_tensor(traj.effort, dtype=torch.float64)
    torch.testing.assert_close(problem.data[1].controls, expected, rtol=0, atol=0)


def test_another_trajectory_is_converted_to_the_same_values(problem: Problem) -> None:
    twin = _trajectory(0.5)
    torch.testing.assert_close(
        problem.tensors(twin).targets, problem.data[1].targets, rtol=0, atol=0
    )


def test_another_trajectorys_states_are_in_the_robots_joint_order(problem: Problem) -> None:
    """Joints recorded in another order, no effort column (not needed for the states); without
    velocities it starts at rest and has no states."""
    twin = _trajectory(0.5)
    swapped = Trajectory(
        t=twin.t,
        q=twin.q[:, ::-1],
        dq=twin.dq[:, ::-1],
        joint_names=twin.joint_names[::-1],
        meta={"source": "swapped"},
    )
    q, v = problem.states(swapped)
    torch.testing.assert_close(q, problem.data[1].q, rtol=0, atol=0)
    torch.testing.assert_close(v, problem.data[1].v, rtol=0, atol=0)
    q0, v0 = problem.initial_state(swapped)
    torch.testing.assert_close(q0, problem.data[1].q[0], rtol=0, atol=0)
    torch.testing.assert_close(v0, problem.data[1].v[0], rtol=0, atol=0)
    still = swapped.replace(dq=None)
    q0, v0 = problem.initial_state(still)
    torch.testing.assert_close(q0, problem.data[1].q[0], rtol=0, atol=0)
    assert v0.tolist() == [0.0, 0.0]
    with pytest.raises(ProblemError, match="trajectory swapped has no velocities"):
        problem.states(still)


def test_with_likelihood_keeps_the_data_and_the_built_dynamics(problem: Problem) -> None:
    dynamics = problem.dynamics
    every = problem.with_likelihood(stride=1)
    assert every.dynamics is dynamics
    assert every.data is problem.data
    assert every.likelihood.stride == 1
    assert problem.likelihood.stride == 3
    assert every.objective.problem is every


def test_with_likelihood_scores_every_filtered_sample(problem: Problem) -> None:
    thinned = problem.objective.residual_std().numel()
    every = problem.with_likelihood(stride=1).objective.residual_std().numel()
    assert every > 2 * thinned


def test_with_likelihood_refuses_an_unknown_setting(problem: Problem) -> None:
    with pytest.raises(ProblemError, match=r"unknown likelihood settings \['strides'\]"):
        problem.with_likelihood(strides=1)


def test_with_likelihood_checks_the_settings_against_the_problem(problem: Problem) -> None:
    with pytest.raises(ProblemError, match="torque_std has 3 values"):
        problem.with_likelihood(torque_std=(0.1, 0.1, 0.1))


def test_with_dataset_converts_the_new_data_and_keeps_the_built_dynamics(
    problem: Problem,
) -> None:
    dynamics = problem.dynamics
    other = problem.with_dataset([_trajectory(1.0)])
    assert other.dynamics is dynamics
    assert len(other.data) == 1
    expected = torch.as_tensor(np.sin(np.arange(21) * 0.01 + 1.0), dtype=torch.float64)
    torch.testing.assert_close(other.data[0].q[:, 0], expected, rtol=0, atol=0)


def test_with_dataset_names_a_trajectory_off_the_grid(problem: Problem) -> None:
    off = _trajectory(0.0).replace(t=np.arange(21) * 0.02)
    with pytest.raises(ProblemError, match=r"trajectory 0 \(swing 0.0\) is not on the simulator"):
        problem.with_dataset([off])


def test_validate_keeps_each_held_out_trajectorys_residuals(problem: Problem) -> None:
    held = [_trajectory(0.2), _trajectory(0.7)]
    posterior = Posterior(particles=np.array([[1.3]]), names=["link1/mass"], units=["kg"])
    identified = validate(problem, posterior, held).scores["identified"]
    assert len(identified.residuals) == 2
    np.testing.assert_allclose(
        identified.residuals[1], torque_residuals(problem, np.array([1.3]), [held[1]]), atol=1e-12
    )
    rms = np.sqrt(np.mean(np.concatenate(identified.residuals) ** 2, axis=0))
    np.testing.assert_allclose(identified.rmse, rms, rtol=1e-12)
