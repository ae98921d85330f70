"""Synthetic double pendulum with link lengths drawn from a 2-D Gaussian (csvgd paper, V-A).

Each trajectory starts at rest at ``q = (90°, 0°)`` and swings freely for ``steps`` steps of
``dt`` (300 × 0.01 s in the paper), simulated with semi-implicit Euler. The two link lengths of
each trajectory are drawn from a Gaussian around (1.5 m, 2.0 m) with correlation ≈ −0.94 (read
off the paper's Fig. 3; the paper gives no numeric covariance, the standard deviations here are
this module's choice). Joint positions and velocities are published on ``/joint_states`` with
optional Gaussian encoder noise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import BagLayout, Dataset, JointStateTopic, StorageFormat, Trajectory
from dynid.model.dynamics import TorchDynamics
from dynid.model.integrate import TorqueControl
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.sim.common import (
    SIM_T0_NS,
    SimulationError,
    check_positive,
    finish,
    simulate_rollout,
    time_grid,
)

SCENARIO = "double_pendulum"
JOINTS = ("joint1", "joint2")
PARAMETERS = ("link1/length", "link2/length")
LAYOUT = BagLayout(joint_states=JointStateTopic("/joint_states", joints=JOINTS))
LENGTH_MEAN = (1.5, 2.0)  # m
LENGTH_STD = (0.15, 0.15)  # m
LENGTH_CORRELATION = -0.94


def length_covariance(std: tuple[float, float], correlation: float) -> np.ndarray:
    """``[2, 2]`` covariance (m²) of the link lengths from standard deviations and correlation."""
    if not -1.0 < correlation < 1.0:
        raise SimulationError(f"setting 'correlation' must lie in (-1, 1), got {correlation}")
    s = np.array([check_positive("std[0]", std[0]), check_positive("std[1]", std[1])])
    return np.array([[1.0, correlation], [correlation, 1.0]]) * np.outer(s, s)


def draw_lengths(
    rng: np.random.Generator, n: int, mean: tuple[float, float], cov: np.ndarray
) -> np.ndarray:
    """``[n, 2]`` link lengths (m) from the Gaussian, redrawing the rare samples below 0.2 m."""
    out = np.empty((0, 2))
    while out.shape[0] < n:
        draw = rng.multivariate_normal(np.asarray(mean, dtype=np.float64), cov, size=n)
        out = np.concatenate([out, draw[(draw > 0.2).all(axis=1)]])
    return out[:n]


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    trajectories: int = 10,
    steps: int = 300,
    dt: float = 0.01,
    mean: tuple[float, float] = LENGTH_MEAN,
    std: tuple[float, float] = LENGTH_STD,
    correlation: float = LENGTH_CORRELATION,
    position_noise: float = 1e-3,
    velocity_noise: float = 1e-2,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate ``trajectories`` free swings, one link-length draw each.

    Args:
        seed: seeds the link-length draws and the sensor noise.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        trajectories, steps, dt: dataset size; ``dt`` (s) is both the simulator step and the
            ``/joint_states`` period.
        mean, std, correlation: the link-length Gaussian (m, m, unitless).
        position_noise, velocity_noise: σ of additive Gaussian noise (rad, rad/s).
        storage: bag storage format.

    Returns:
        The dataset (as recorded, noise included) and the truth mapping; ``parameters`` holds the
        per-trajectory link lengths (lists, one entry per trajectory) and ``distribution`` the
        Gaussian.
    """
    if trajectories < 1 or steps < 2:
        raise SimulationError(f"need trajectories >= 1 and steps >= 2, got {trajectories}, {steps}")
    dt = check_positive("dt", dt)
    rng = np.random.default_rng(seed)
    cov = length_covariance(std, correlation)
    lengths = draw_lengths(rng, trajectories, mean, cov)
    robot = load_robot("double_pendulum")
    spec = ParameterSpec([Parameter(name, 0.2, 10.0, "m") for name in PARAMETERS])
    params = spec.apply(robot, torch.as_tensor(lengths))
    q0 = np.array([[np.pi / 2, 0.0]])
    u = np.zeros((1, steps, 2))
    q, v = simulate_rollout(
        TorchDynamics(robot, check_inputs=False), params, q0, np.zeros_like(q0), u, dt,
        TorqueControl(),
    )  # fmt: skip
    t = time_grid(steps + 1, dt)
    gap_ns = round((t[-1] + 1.0) * 1e9)
    trajs = []
    for i in range(trajectories):
        q_meas = q[i] + position_noise * rng.standard_normal(q[i].shape)
        v_meas = v[i] + velocity_noise * rng.standard_normal(v[i].shape)
        truth_i = dict(zip(PARAMETERS, lengths[i].tolist(), strict=True))
        trajs.append(
            Trajectory(t=t, q=q_meas, joint_names=list(JOINTS), dq=v_meas,
                       meta={"robot": "double_pendulum", "scenario": SCENARIO,
                             "t0_ns": SIM_T0_NS + i * gap_ns, "truth": truth_i})
        )  # fmt: skip
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": "double_pendulum",
        "parameters": {name: lengths[:, k] for k, name in enumerate(PARAMETERS)},
        "distribution": {"mean": list(mean), "covariance": cov, "correlation": correlation},
        "initial_state": {"q": q0[0], "v": [0.0, 0.0]},
        "settings": {"trajectories": trajectories, "steps": steps, "dt": dt,
                     "integrator": "semi-implicit Euler (csvgd eq. 12)"},
        "noise": {"position_std": position_noise, "velocity_std": velocity_noise},
    }  # fmt: skip
    return finish(Dataset(trajs, {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
