"""Shared builders of small synthetic problems for the CLI, problem-file and report tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from dynid.data.trajectory import Dataset, Trajectory
from dynid.model.dynamics import TorchDynamics
from dynid.model.integrate import rollout
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.problem_file import Unactuated

TRUTH = {"joint1/damping": 0.3, "joint2/damping": 0.1}
DT = 0.01


def pendulum_dataset(steps: int = 30) -> Dataset:
    """A free double pendulum released from q = (90°, 0°), damping ``TRUTH``, ``steps`` steps."""
    robot = load_robot("double_pendulum")
    spec = ParameterSpec([Parameter(name, 0.0, 1.0) for name in TRUTH])
    p = spec.apply(robot, torch.tensor([list(TRUTH.values())], dtype=torch.float64))
    q0 = torch.tensor([[np.pi / 2, 0.0]], dtype=torch.float64)
    u = torch.zeros(1, steps, 0, dtype=torch.float64)
    q, v = rollout(TorchDynamics(robot), p, q0, torch.zeros_like(q0), u, DT, Unactuated())
    traj = Trajectory(
        t=np.arange(steps + 1) * DT,
        q=q[0].numpy(),
        dq=v[0].numpy(),
        joint_names=list(robot.joint_names),
        meta={"source": "pendulum_sim"},
    )
    return Dataset([traj])


def pendulum_config(data_path: str = "dp.npz", **changes: Any) -> dict[str, Any]:
    """A valid problem mapping for :func:`pendulum_dataset` saved as ``data_path``."""
    config: dict[str, Any] = {
        "name": "dp_test",
        "robot": {"name": "double_pendulum"},
        "parameters": [{"name": name, "lower": 0.0, "upper": 1.0} for name in TRUTH],
        "truth": dict(TRUTH),
        "data": {"source": "npz", "path": data_path},
        "control": {"type": "none"},
        "observe": {"joints": "all", "velocities": True},
        "likelihood": {"obs_std": 0.05, "shooting": "multiple", "windows": 3},
        "estimator": {"name": "csvgd", "settings": {"num_particles": 4, "max_iterations": 2}},
    }
    config.update(changes)
    return config


def write_pendulum_problem(directory: Path, steps: int = 30, **changes: Any) -> Path:
    """Write ``dp.npz`` and ``dp.yaml`` (with ``changes`` to the top-level sections)."""
    pendulum_dataset(steps).save_npz(directory / "dp.npz")
    path = directory / "dp.yaml"
    path.write_text(yaml.safe_dump(pendulum_config(**changes), sort_keys=False))
    return path
