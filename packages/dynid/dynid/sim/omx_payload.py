"""OpenManipulator-X lifting payloads under constant current steps (proprio paper, V-A).

As in the paper's fixed-joint experiment, only the elbow (ROBOTIS ``joint3``, the paper's
"joint-2") moves; the other joints are locked. Each trajectory carries a different payload
welded to ``end_effector_link``. The elbow starts at rest at ``q0`` (forearm 57° below the
horizontal) held by the static current ``g(q0) / k_t``; after ``pre`` s a current step of
``step_current`` A (negative lifts) is added for ``step_duration`` s (0.6 s in the paper), then the
holding current alone remains and the payload swings back.

Sensors like the ROBOTIS driver: ``/joint_states`` at 40 Hz for all five joints, positions on the
12-bit encoder grid (4096 ticks/rev), velocities on the 0.229 rev/min grid, and ``effort`` as raw
Dynamixel present-current counts (2.69 mA) with current noise; the reading layout converts counts
to N·m with ``effort_scale`` = 2.69 mA × k_t. The goal current is published on
``/current_controller/commands`` (``Float64MultiArray``, A). Locked joints report the holding
torques the rigid-body model needs there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import BagLayout, CommandTopic, Dataset, JointStateTopic, StorageFormat, Trajectory
from dynid.data import messages as msgs
from dynid.model.attachments import attach_payload
from dynid.model.dynamics import TorchDynamics
from dynid.model.dynamixel import XM430_W350
from dynid.model.integrate import CurrentControl
from dynid.model.params import nominal_parameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import load_robot
from dynid.sim.common import (
    SIM_T0_NS,
    SimulationError,
    check_positive,
    finish,
    simulate_rollout,
    time_grid,
)

SCENARIO = "omx_payload"
FREE = "joint3"
ALL_JOINTS = ("joint1", "joint2", "joint3", "joint4", "gripper_left_joint")
LOCKED = {"joint1": 0.0, "joint2": 0.0, "joint4": 0.0, "gripper_left_joint": 0.0}
PAYLOAD_LINK = "end_effector_link"
#: N·m per present-current count of the XM430-W350 (2.69 mA × torque constant).
COUNT_TO_TORQUE = XM430_W350.current_unit * XM430_W350.torque_constant
#: Dynamixel present-velocity unit: 0.229 rev/min in rad/s.
VELOCITY_UNIT = 0.229 * 2.0 * np.pi / 60.0
COMMAND = CommandTopic(
    "/current_controller/commands", msgtype=msgs.FLOAT64_MULTI_ARRAY, names=(f"{FREE}/current",)
)
LAYOUT = BagLayout(
    joint_states=JointStateTopic(
        "/joint_states", joints=(FREE,), effort_scale=dict.fromkeys(ALL_JOINTS, COUNT_TO_TORQUE)
    ),
    commands=(COMMAND,),
)
_WRITE_LAYOUT = BagLayout(
    joint_states=JointStateTopic(
        "/joint_states", joints=ALL_JOINTS, effort_scale=dict.fromkeys(ALL_JOINTS, COUNT_TO_TORQUE)
    ),
    commands=(COMMAND,),
)


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    payload_masses: Sequence[float] = (0.05, 0.1, 0.2),
    payload_com: Sequence[float] = (0.0, 0.0, 0.0),
    q0: float = 1.0,
    step_current: float = -0.1,
    pre: float = 0.2,
    step_duration: float = 0.6,
    duration: float = 2.5,
    rate: float = 40.0,
    substeps: int = 5,
    damping: float = 0.05,
    coulomb: float = 0.02,
    armature: float = 0.01,
    current_noise: float = 5e-3,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate one current-step trajectory per payload mass.

    Args:
        seed: seeds the current noise.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        payload_masses: kg, one trajectory each; payload_com: m in ``end_effector_link``.
        q0: elbow start angle (rad), held statically; the stable side of the gravity curve.
        step_current, pre, step_duration, duration: current step (A) and timing (s).
        rate: control and recording rate (Hz); the simulator takes ``substeps`` steps per sample.
        damping, coulomb, armature: true elbow friction (N·m·s/rad, N·m) and armature (kg·m²).
        current_noise: σ of the measured current (A) before rounding to counts.
        storage: bag storage format.

    Returns:
        The dataset of the elbow only (as read with ``truth["layout"]``) and the truth mapping;
        ``parameters["payload/mass"]`` lists the mass per trajectory.
    """
    rate = check_positive("rate", rate)
    if not (pre > 0.0 and pre + step_duration < duration):
        raise SimulationError(
            f"settings need 0 < pre < pre + step_duration < duration, got {pre}, "
            f"{step_duration}, {duration}"
        )
    rng = np.random.default_rng(seed)
    dt = 1.0 / rate
    T = round(duration * rate)
    k_t = XM430_W350.torque_constant
    t = time_grid(T + 1, dt)
    gap_ns = round((t[-1] + 1.0) * 1e9)
    returned, recorded = [], []
    for i, mass in enumerate(payload_masses):
        robot = attach_payload(
            load_robot("open_manipulator_x", locked_joints=LOCKED), PAYLOAD_LINK,
            mass=check_positive("payload_masses", mass), com=payload_com,
        )  # fmt: skip
        base = nominal_parameters(robot)
        params = dataclasses.replace(
            base,
            damping=torch.full_like(base.damping, damping),
            coulomb=torch.full_like(base.coulomb, coulomb),
            armature=torch.full_like(base.armature, armature),
            motor_gain=torch.full_like(base.motor_gain, k_t),
        )
        zero = torch.zeros(1, 1, dtype=torch.float64)
        with torch.no_grad():
            hold_torque = TorchDynamics(robot).rnea(params, zero + q0, zero, zero).item()
        current = np.full((T, 1), hold_torque / k_t)
        steps = (np.arange(T) * dt >= pre - 1e-9) & (np.arange(T) * dt < pre + step_duration - 1e-9)
        current[steps, 0] += step_current
        q, v = simulate_rollout(
            PinocchioDynamics(robot), params, np.array([[q0]]), np.zeros((1, 1)),
            current[None], dt, CurrentControl(), substeps,
        )  # fmt: skip
        q3, v3 = q[0, :, 0], v[0, :, 0]
        cmd = np.concatenate([current[:, 0], current[-1:, 0]])  # the last sample holds
        full = _full_state(q3, v3, t)
        with torch.no_grad():
            elbow = TorchDynamics(robot).friction_torque(params, torch.as_tensor(v3)[None, :, None])
        elbow = elbow[0, :, 0].numpy() + armature * full[2, :, 2]
        efforts = _arm_torques(mass, payload_com, full)
        efforts[:, 2] += elbow
        counts = np.round(efforts / COUNT_TO_TORQUE)
        measured = cmd + current_noise * rng.standard_normal(cmd.shape)
        counts[:, 2] = np.round(measured / XM430_W350.current_unit)
        pos = XM430_W350.quantize(full[0])
        vel = np.round(full[1] / VELOCITY_UNIT) * VELOCITY_UNIT
        meta = {
            "robot": "open_manipulator_x",
            "scenario": SCENARIO,
            "t0_ns": SIM_T0_NS + i * gap_ns,
            "truth": {"payload/mass": float(mass)},
        }
        command = {"command": cmd[:, None], "command_names": [COMMAND.channel(f"{FREE}/current")]}
        recorded.append(
            Trajectory(
                t=t, q=pos, joint_names=list(ALL_JOINTS), dq=vel,
                effort=counts * COUNT_TO_TORQUE, meta=meta, **command,
            )
        )  # fmt: skip
        returned.append(
            Trajectory(
                t=t, q=pos[:, 2:3], joint_names=[FREE], dq=vel[:, 2:3],
                effort=counts[:, 2:3] * COUNT_TO_TORQUE, meta=dict(meta), **command,
            )
        )  # fmt: skip
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": "open_manipulator_x",
        "locked_joints": LOCKED,
        "attachments": {"payload": {"link": PAYLOAD_LINK, "com": list(payload_com)}},
        "parameters": {
            "payload/mass": list(payload_masses),
            **{f"payload/com_{a}": c for a, c in zip("xyz", payload_com, strict=True)},
            f"{FREE}/damping": damping,
            f"{FREE}/coulomb": coulomb,
            f"{FREE}/armature": armature,
            f"{FREE}/motor_gain": k_t,
        },
        "initial_state": {"q": [q0], "v": [0.0]},
        "control": {"kind": "current", "torque_constant": k_t, "unit": "A"},
        "settings": {"q0": q0, "step_current": step_current, "pre": pre,
                     "step_duration": step_duration, "duration": duration, "rate": rate,
                     "substeps": substeps, "encoder_ticks_per_rev": XM430_W350.ticks_per_rev},
        "noise": {"current_std": current_noise, "position": "12-bit quantisation",
                  "velocity": "0.229 rev/min quantisation"},
    }  # fmt: skip
    return finish(
        Dataset(returned, {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage,
        recorded=Dataset(recorded, {"scenario": SCENARIO}), write_layout=_WRITE_LAYOUT,
    )  # fmt: skip


def _full_state(q3: np.ndarray, v3: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``[3, T, 5]`` positions, velocities, accelerations of all joints (locked ones constant)."""
    out = np.zeros((3, q3.size, len(ALL_JOINTS)))
    out[0] = [LOCKED.get(j, 0.0) for j in ALL_JOINTS]
    out[0, :, 2], out[1, :, 2] = q3, v3
    out[2, :, 2] = np.gradient(v3, t)
    return out


def _arm_torques(mass: float, com: Sequence[float], full: np.ndarray) -> np.ndarray:
    """``[T, 5]`` rigid-body joint torques (N·m) of the unlocked arm carrying the payload."""
    robot = attach_payload(load_robot("open_manipulator_x"), PAYLOAD_LINK, mass=mass, com=com)
    q, v, a = (torch.as_tensor(x)[None] for x in full)
    with torch.no_grad():
        return TorchDynamics(robot).rnea(nominal_parameters(robot), q, v, a)[0].numpy()
