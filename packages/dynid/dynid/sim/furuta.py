"""Furuta pendulum release, swing-up and pulse experiments with noisy encoders (lm paper, 4.6–4.7).

The motor drives the arm with torque ``motor_gain × u`` (``u`` the control signal sent to the
amplifier); the pendulum is passive. Both hinges have viscous, Coulomb and Stribeck friction
(lm eq. 4.1, dynid's smooth form) and the stand is tilted (``gravity/tilt_x|y``). Experiments
(lm G.2):

* ``release``: from rest near upright (pendulum at π − ``release_offset``), no control;
* ``swing_up``: from rest hanging, an energy-shaping controller pumps the pendulum towards the
  upright energy and stops pushing near the top (no balancing); the recorded control signal is
  what identification replays open loop, as in the paper;
* ``pulse``: from rest hanging, a one-second pulse of ``pulse_amplitude`` after ``pulse_start``.

Sensors: 4096-pulse encoders on both joints plus Gaussian angle noise (lm 4.7), published on
``/joint_states`` (positions only) at ``rate`` Hz; the control signal on
``/motor_controller/commands`` (``Float64MultiArray``). The paper's sampling frequency and
Table 5 values did not survive in the available text: rates, friction and gain here are this
module's choices of the same order as the paper's Table 4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import BagLayout, CommandTopic, Dataset, JointStateTopic, StorageFormat, Trajectory
from dynid.data import messages as msgs
from dynid.model.integrate import CurrentControl, step
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import load_robot
from dynid.sim.common import (
    SIM_T0_NS,
    SimulationError,
    check_positive,
    finish,
    quantize,
    time_grid,
)

SCENARIO = "furuta"
JOINTS = ("arm_joint", "pendulum_joint")
EXPERIMENTS = ("release", "swing_up", "pulse")
ENCODER_TICKS = 4096
COMMAND = CommandTopic(
    "/motor_controller/commands", msgtype=msgs.FLOAT64_MULTI_ARRAY, names=("arm_joint/control",)
)
LAYOUT = BagLayout(
    joint_states=JointStateTopic("/joint_states", joints=JOINTS), commands=(COMMAND,)
)
#: True parameters (SI): friction of both hinges, motor gain (N·m per control unit), stand tilt.
TRUE_PARAMETERS: dict[str, float] = {
    "arm_joint/damping": 2.4e-3,
    "arm_joint/coulomb": 9.0e-4,
    "arm_joint/stribeck_delta": 3.0e-4,
    "arm_joint/stribeck_rate": 5.0,
    "pendulum_joint/damping": 1.0e-4,
    "pendulum_joint/coulomb": 2.2e-4,
    "arm_joint/motor_gain": 0.05,
    "gravity/tilt_x": 0.01,
    "gravity/tilt_y": -0.02,
}

Policy = Callable[[int, np.ndarray, np.ndarray], float]


def _energy_shaping(robot: Any, gain: float, limit: float, stop: float) -> Policy:
    """Åström–Furuta energy pumping: ``u = −k (E* − E) sign(θ̇ cos θ)``, saturated at ``limit``.

    ``E`` is the pendulum's energy about its hinge with the nominal model (θ = 0 hanging);
    pushing stops within ``stop`` rad of upright. The sign follows from the arm acceleration
    moving the hinge sideways: the pendulum gains energy when ``α θ̇ cos θ < 0``.
    """
    inertia = robot.model.inertias[2]
    com = float(np.linalg.norm(inertia.lever))
    mgl = inertia.mass * 9.81 * com
    j_hinge = float(inertia.inertia[0, 0]) + inertia.mass * com**2
    target = 2.0 * mgl

    def policy(_: int, q: np.ndarray, v: np.ndarray) -> float:
        theta, omega = q[1], v[1]
        if abs(abs(np.mod(theta, 2 * np.pi) - np.pi)) < stop:
            return 0.0
        energy = 0.5 * j_hinge * omega**2 + mgl * (1.0 - np.cos(theta))
        push = -gain * (target - energy) * np.sign(omega * np.cos(theta) or 1.0)
        return float(np.clip(push, -limit, limit))

    return policy


def _closed_loop(
    dyn: PinocchioDynamics, params: Any, q0: Sequence[float], policy: Policy,
    T: int, dt: float, substeps: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """States ``q, v [T+1, 2]`` and controls ``u [T]`` with ``u_k = policy(k, q_k, v_k)``."""
    control = CurrentControl(actuated=[0])
    q = torch.tensor([q0], dtype=torch.float64)
    v = torch.zeros_like(q)
    qs, vs, us = [q[0].numpy().copy()], [v[0].numpy().copy()], []
    with torch.no_grad():
        for k in range(T):
            u = policy(k, qs[-1], vs[-1])
            q, v = step(dyn, params, q, v, torch.tensor([[u]], dtype=torch.float64), dt,
                        control, substeps)  # fmt: skip
            qs.append(q[0].numpy().copy())
            vs.append(v[0].numpy().copy())
            us.append(u)
    q_np, v_np = np.array(qs), np.array(vs)
    if not (np.isfinite(q_np).all() and np.isfinite(v_np).all()):
        raise SimulationError("the Furuta rollout diverged (non-finite state); reduce the step")
    return q_np, v_np, np.array(us)


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    experiments: Sequence[str] = EXPERIMENTS,
    duration: float = 3.0,
    rate: float = 100.0,
    substeps: int = 2,
    release_offset: float = 0.1,
    pulse_start: float = 0.5,
    pulse_amplitude: float = 0.5,
    swing_gain: float = 40.0,
    control_limit: float = 2.0,
    angle_noise: float = 1e-3,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the chosen experiments, one trajectory each, with the true parameters.

    Args:
        seed: seeds the encoder noise.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        experiments: any of ``release``, ``swing_up``, ``pulse``.
        duration: s per experiment; rate: control and recording rate (Hz), ``substeps``
            simulator steps per sample.
        release_offset: rad below upright the release starts from.
        pulse_start, pulse_amplitude: the one-second pulse (s, control units).
        swing_gain, control_limit: energy-shaping gain (1/J) and saturation (control units).
        angle_noise: σ of the Gaussian encoder-angle noise (rad), added before quantisation.
        storage: bag storage format.
    """
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown or not experiments:
        raise SimulationError(
            f"setting 'experiments': unknown {unknown}; choose from {EXPERIMENTS}"
        )
    rate = check_positive("rate", rate)
    dt = 1.0 / rate
    T = round(check_positive("duration", duration) * rate)
    rng = np.random.default_rng(seed)
    robot = load_robot("furuta")
    names = list(TRUE_PARAMETERS)
    spec = ParameterSpec([Parameter(n, -10.0, 10.0, "") for n in names])
    params = spec.apply(
        robot, torch.tensor([[TRUE_PARAMETERS[n] for n in names]], dtype=torch.float64)
    )
    dyn = PinocchioDynamics(robot)
    starts = {"release": (0.0, np.pi - release_offset), "swing_up": (0.0, 0.0), "pulse": (0.0, 0.0)}

    def pulse(k: int, _q: np.ndarray, _v: np.ndarray) -> float:
        return pulse_amplitude if pulse_start <= k * dt < pulse_start + 1.0 else 0.0

    policies: dict[str, Policy] = {
        "release": lambda _k, _q, _v: 0.0,
        "swing_up": _energy_shaping(robot, swing_gain, control_limit, stop=0.3),
        "pulse": pulse,
    }
    t = time_grid(T + 1, dt)
    gap_ns = round((t[-1] + 1.0) * 1e9)
    trajs = []
    for i, name in enumerate(experiments):
        q, _, u = _closed_loop(dyn, params, starts[name], policies[name], T, dt, substeps)
        measured = quantize(q + angle_noise * rng.standard_normal(q.shape), ENCODER_TICKS)
        trajs.append(
            Trajectory(
                t=t, q=measured, joint_names=list(JOINTS),
                command=np.concatenate([u, [0.0]])[:, None],
                command_names=[COMMAND.channel("arm_joint/control")],
                meta={"robot": "furuta", "scenario": SCENARIO, "experiment": name,
                      "t0_ns": SIM_T0_NS + i * gap_ns},
            )
        )  # fmt: skip
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": "furuta",
        "parameters": TRUE_PARAMETERS,
        "experiments": list(experiments),
        "initial_states": {n: {"q": list(starts[n]), "v": [0.0, 0.0]} for n in experiments},
        "control": {"kind": "motor_gain", "actuated": ["arm_joint"], "unit": "control signal"},
        "settings": {"duration": duration, "rate": rate, "substeps": substeps,
                     "release_offset": release_offset, "pulse_start": pulse_start,
                     "pulse_amplitude": pulse_amplitude, "swing_gain": swing_gain,
                     "control_limit": control_limit, "encoder_ticks_per_rev": ENCODER_TICKS},
        "noise": {"angle_std": angle_noise, "quantisation": "4096 pulses/rev"},
    }  # fmt: skip
    return finish(Dataset(trajs, {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
