"""The soft block is a simulation backend chosen in the problem file (``simulation.model``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from dynid.data.open_manipulator_ball import load_heavy_ball
from dynid.estimators.base import EstimatorError
from dynid.model.dynamixel import XM430_W350
from dynid.objective import SoftBlockSimulation
from dynid.problem_file import ProblemFileError, load_problem
from dynid_bench.proprio import BLOCK_SUBSTEPS, GRIPPER_TRANSMISSION, block_problem


def _config(**simulation: object) -> dict:
    rec = load_heavy_ball()
    locked = {**rec.locked_joints, "joint3": rec.start_angle}
    locked.pop("gripper_left_joint")
    block = {"joint": "gripper_left_joint", "size": [0.03, 0.03, 0.03], "cells": [1, 2, 1],
             "density": 370.0, "mass_scaling": 100.0}  # fmt: skip
    return {
        "name": "soft_block",
        "robot": {"name": "open_manipulator_x", "locked_joints": locked},
        "parameters": [
            {"name": "block/mu", "lower": 1.0e4, "upper": 2.0e6, "unit": "Pa"},
            {"name": "block/lambda", "lower": 1.0e4, "upper": 2.0e6, "unit": "Pa"},
        ],
        "data": {"source": "npz", "path": "unused.npz", "velocities": "central"},
        "control": {
            "type": "current",
            "actuated": ["gripper_left_joint"],
            "inputs": ["gripper_left_joint/current"],
            "torque_constant": XM430_W350.torque_constant / GRIPPER_TRANSMISSION,
        },
        "observe": {"joints": ["gripper_left_joint"]},
        "likelihood": {"obs_std": 1e-4, "shooting": "single"},
        "simulation": {
            "model": "soft_block",
            "substeps": BLOCK_SUBSTEPS,
            "soft_block": block,
            **simulation,
        },
    }


@pytest.fixture(scope="module")
def benchmark_problem():
    return block_problem("soft_block", duration=0.1)


@pytest.fixture(scope="module")
def recording(benchmark_problem):
    return benchmark_problem.dataset


def test_the_soft_block_from_yaml_simulates_like_the_benchmark(benchmark_problem) -> None:
    problem, _ = load_problem(_config(), dataset=benchmark_problem.dataset)
    assert isinstance(problem.simulator, SoftBlockSimulation)
    assert problem.simulator.squeeze.mesh.num_nodes == 2 * 3 * 2
    # the benchmark's robot carries the servo's reflected armature, which YAML does not set
    problem = replace(problem, robot=benchmark_problem.robot)
    theta = torch.tensor([[5e4, 5e4], [8e5, 8e5]], dtype=torch.float64)
    traj = problem.dataset[0]
    with torch.no_grad():
        q = problem.objective.simulate(theta, traj)[:, :, 0]
        expected = benchmark_problem.objective.simulate(theta, traj)[:, :, 0]
        ll = problem.objective.log_likelihood(theta)
    torch.testing.assert_close(q, expected, rtol=0.0, atol=1e-12)
    # closing is the negative direction: the softer block lets the finger travel further
    assert float(q[0, -1]) < float(q[1, -1])
    assert torch.isfinite(ll).all()
    with pytest.raises(EstimatorError, match="shooting: single"):
        problem.objective.likelihood(shooting="multiple", windows=2)
    with pytest.raises(EstimatorError, match="soft_block"):
        problem.objective.transition(theta, torch.zeros(2, 2), torch.zeros(1, 1))


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"model": "fem"}, "simulation.model"),
        (
            {"soft_block": {"joint": "gripper_left_joint", "stiffness": 1.0}},
            "simulation.soft_block",
        ),
        ({"soft_block": {"joint": "joint9"}}, "simulation.soft_block"),
        ({"soft_block": {"size": [0.03, 0.03, 0.03]}}, "simulation.soft_block.joint"),
    ],
)
def test_bad_soft_block_entries_name_the_key(recording, change: dict, key: str) -> None:
    with pytest.raises(ProblemFileError, match=key.replace(".", r"\.")):
        load_problem(_config(**change), dataset=recording)


def test_the_soft_block_needs_its_lame_parameters(recording) -> None:
    config = _config()
    config["parameters"] = config["parameters"][:1]
    with pytest.raises(ProblemFileError, match=r"parameters.*block/lambda"):
        load_problem(config, dataset=recording)
