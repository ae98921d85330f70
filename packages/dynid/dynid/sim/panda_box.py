"""Panda shaking a box hung from a universal joint with two 500 g weights (csvgd V-C, App. II-E).

The arm tracks joint-space targets with a PD controller: after a hold at the home pose, joint 6
moves by +0.1 rad and then joint 7 by −0.1 rad, each with a trapezoidal velocity profile at 10 %
of the joint's velocity and acceleration limits (the paper's MoveIt velocity scaling 0.1). The
box (0.920 kg, csvgd Tab. IV) hangs from the flange ``panda_link8`` through a passive, damped
universal joint; two 0.5 kg weights lie on its floor at positions drawn from the seed within the
paper's phase-II ranges. Vicon-like observations: the box pose (lid centre, box axes) with
millimetre and sub-degree noise, from which the paper's four points (origin and 1 m along x, y,
z) follow (``vicon_points``).

Recording: ``/franka/joint_states`` (positions, velocities, measured torques) and
``/franka/desired_joint_states`` (PD targets) at ``rate`` Hz (100 Hz by default instead of the
robot's 1 kHz, to keep bags small), ``/vicon/box/box`` (``TransformStamped``, latency-corrected
stamps like ros2-vicon-bridge) at the same rate. The simulator steps at ``sim_dt`` (1 ms). The
PD law has no gravity feed-forward (dynid's ``PDControl``), so the arm holds its pose with a
static offset; a settling phase before the recording starts lets arm and box come to rest.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import (
    BagLayout,
    CommandTopic,
    Dataset,
    JointStateTopic,
    MocapTopic,
    StorageFormat,
    Trajectory,
)
from dynid.data import messages as msgs
from dynid.data.quaternion import multiply, rotate
from dynid.model.attachments import attach_universal_box
from dynid.model.dynamics import TorchDynamics
from dynid.model.integrate import PDControl
from dynid.model.observe import frame_poses
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

SCENARIO = "panda_box"
ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
HOME = (0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4)
#: Joint impedance gains of franka_ros2's example controller (N·m/rad, N·m·s/rad).
KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
KD = (50.0, 50.0, 50.0, 50.0, 30.0, 25.0, 15.0)
#: Panda joint velocity (rad/s) and acceleration (rad/s²) limits from Franka's datasheet.
VELOCITY_LIMITS = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
ACCELERATION_LIMITS = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)
#: Phase-II weight position ranges (csvgd Tab. IVb), m.
WEIGHT_RANGE = (0.14, 0.08)
#: Vicon reference points in the box frame (csvgd App. II-E): origin and 1 m along x, y, z.
VICON_POINTS = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
#: Mocap bridges: ros2-vicon-bridge (TransformStamped, latency-corrected stamps) or vrpn_mocap
#: (PoseStamped stamped on receipt, ``VRPN_LATENCY`` s after capture).
MOCAP = {
    "vicon": MocapTopic("box", "/vicon/box/box", msgtype=msgs.TRANSFORM_STAMPED),
    "vrpn": MocapTopic("box", "/vrpn_mocap/box/pose", msgtype=msgs.POSE_STAMPED,
                       stamps_latency_corrected=False, latency=0.008),
}  # fmt: skip


def layout(mocap: str = "vicon") -> BagLayout:
    """The topics of the recording with the given mocap bridge (``"vicon"`` or ``"vrpn"``)."""
    if mocap not in MOCAP:
        raise SimulationError(f"setting 'mocap' must be one of {sorted(MOCAP)}, got {mocap!r}")
    return BagLayout(
        joint_states=JointStateTopic("/franka/joint_states", joints=ARM),
        mocap=(MOCAP[mocap],),
        commands=(
            CommandTopic(
                "/franka/desired_joint_states", label="desired", fields=("position", "velocity")
            ),
        ),
    )


LAYOUT = layout()


def trapezoid(distance: float, v_max: float, a_max: float, dt: float) -> tuple[np.ndarray, ...]:
    """Position and velocity ``[n]`` of a rest-to-rest move over ``distance`` (rad) sampled every
    ``dt`` s, with a trapezoidal (or triangular) velocity profile within ``v_max``, ``a_max``."""
    d = abs(distance)
    t_acc = min(v_max / a_max, np.sqrt(d / a_max))
    v_peak = a_max * t_acc
    t_flat = (d - a_max * t_acc**2) / v_peak if v_peak > 0 else 0.0
    total = 2 * t_acc + t_flat
    t = np.arange(int(np.ceil(total / dt)) + 1) * dt
    t = np.minimum(t, total)
    acc = np.minimum(t, t_acc)
    flat = np.clip(t - t_acc, 0.0, t_flat)
    dec = np.clip(t - t_acc - t_flat, 0.0, t_acc)
    pos = 0.5 * a_max * acc**2 + v_peak * flat + v_peak * dec - 0.5 * a_max * dec**2
    vel = np.where(t < t_acc, a_max * t, np.where(t < t_acc + t_flat, v_peak, v_peak - a_max * dec))
    sign = np.sign(distance)
    return sign * pos, sign * np.maximum(vel, 0.0)


def offset_plan(
    dt: float,
    *,
    moves: tuple[tuple[int, float], ...] = ((5, 0.1), (6, -0.1)),
    velocity_scaling: float = 0.1,
    hold: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """PD targets ``q_d, q̇_d [T, 7]`` (rad, rad/s): hold, then each (joint index, offset) move in
    sequence, each followed by a hold of ``hold`` s (csvgd App. II-E)."""
    n_hold = round(hold / dt)
    current = np.array(HOME)
    q_parts = [np.tile(current, (n_hold, 1))]
    v_parts = [np.zeros((n_hold, 7))]
    for joint, offset in moves:
        pos, vel = trapezoid(
            offset,
            velocity_scaling * VELOCITY_LIMITS[joint],
            velocity_scaling * ACCELERATION_LIMITS[joint],
            dt,
        )
        q_move = np.tile(current, (pos.size, 1))
        q_move[:, joint] += pos
        v_move = np.zeros((pos.size, 7))
        v_move[:, joint] = vel
        current = q_move[-1].copy()
        q_parts += [q_move, np.tile(current, (n_hold, 1))]
        v_parts += [v_move, np.zeros((n_hold, 7))]
    return np.concatenate(q_parts), np.concatenate(v_parts)


def _moves(moves: Any) -> tuple[tuple[int, float], ...]:
    """``(joint index, offset)`` of ``(joint name, offset rad)`` pairs, checked."""
    plan = []
    for entry in moves:
        if len(entry) != 2 or entry[0] not in ARM or not np.isfinite(float(entry[1])):
            raise SimulationError(
                f"setting 'moves': expected (joint, offset rad) pairs with joints of {list(ARM)}, "
                f"got {entry!r}"
            )
        plan.append((ARM.index(entry[0]), float(entry[1])))
    if not plan:
        raise SimulationError("setting 'moves': at least one move is needed")
    return tuple(plan)


def vicon_points(traj: Trajectory, body: str = "box") -> np.ndarray:
    """The csvgd observation ``[T, 12]`` (m): origin and the points 1 m along the body's x, y, z
    axes, in the world frame, from the body's mocap pose channels."""
    pos, quat = traj.pose(body)
    points = pos[:, None, :] + rotate(quat[:, None, :], VICON_POINTS[None, :, :])
    return points.reshape(pos.shape[0], -1)


def _rotation_noise(rng: np.random.Generator, n: int, sigma: float) -> np.ndarray:
    """``[n, 4]`` unit quaternions of small random rotations, angle σ (rad) per axis."""
    w = sigma * rng.standard_normal((n, 3))
    angle = np.linalg.norm(w, axis=1, keepdims=True)
    axis = w / np.where(angle > 0, angle, 1.0)
    return np.concatenate([axis * np.sin(angle / 2), np.cos(angle / 2)], axis=1)


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    rate: float = 100.0,
    sim_dt: float = 1e-3,
    settle: float = 1.0,
    settle_damping: float | None = None,
    hold: float = 0.5,
    moves: tuple[tuple[str, float], ...] | list[list[Any]] = (
        ("panda_joint6", 0.1),
        ("panda_joint7", -0.1),
    ),
    velocity_scaling: float = 0.1,
    weight_positions: np.ndarray | None = None,
    box_damping: tuple[float, float] = (0.06, 0.04),
    joint_position_noise: float = 1e-4,
    joint_velocity_noise: float = 1e-3,
    torque_noise: float = 0.05,
    vicon_position_noise: float = 5e-4,
    vicon_rotation_noise: float = 3e-3,
    mocap: str = "vicon",
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the box-shaking motion and record it like the real setup.

    Args:
        seed: seeds the weight positions (unless given) and all sensor noise.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        rate: recording rate of joint states, targets and mocap (Hz); must divide ``1/sim_dt``.
        sim_dt: simulator and PD-control step (s).
        settle: s simulated at the home targets before the recording starts.
        settle_damping: viscous damping (N·m·s/rad) of the universal joint during ``settle``
            only, so that the box starts the recording at rest in its equilibrium as in the
            paper's recordings; ``None`` keeps ``box_damping`` (the box, released level, still
            swings when the recording starts).
        hold: s of holding before, between and after the moves.
        moves: ``(joint, offset)`` pairs (rad) moved one after the other from the home pose;
            default the paper's +0.1 rad of joint 6, then −0.1 rad of joint 7 (App. II-E).
        velocity_scaling: fraction of the joints' velocity and acceleration limits of each
            trapezoidal move (the paper's MoveIt scaling 0.1).
        weight_positions: ``[2, 2]`` true (x, y) of the weights on the box floor (m); default
            drawn uniformly within csvgd Tab. IVb.
        box_damping: viscous damping of the universal joint's two dofs (N·m·s/rad).
        joint_position_noise, joint_velocity_noise, torque_noise: σ of the arm's sensors
            (rad, rad/s, N·m).
        vicon_position_noise, vicon_rotation_noise: σ of the box pose (m, rad per axis).
        mocap: ``"vicon"`` (``/vicon/box/box``) or ``"vrpn"`` (``/vrpn_mocap/box/pose``,
            receive-time stamps 8 ms late; the reading layout corrects them).
        storage: bag storage format.
    """
    bag_layout = layout(mocap)
    rate = check_positive("rate", rate)
    sim_dt = check_positive("sim_dt", sim_dt)
    decimation = round(1.0 / (rate * sim_dt))
    if decimation < 1 or abs(decimation * rate * sim_dt - 1.0) > 1e-9:
        raise SimulationError(f"rate {rate} Hz must divide the simulator rate {1 / sim_dt} Hz")
    rng = np.random.default_rng(seed)
    if weight_positions is None:
        weight_positions = rng.uniform(-1.0, 1.0, size=(2, 2)) * np.array(WEIGHT_RANGE)
    weight_positions = np.asarray(weight_positions, dtype=np.float64)
    robot = attach_universal_box(
        load_robot("panda"), "panda_link8", damping=box_damping,
        weight_positions=weight_positions,
    )  # fmt: skip
    box = robot.attachment("box")
    params = nominal_parameters(robot)
    control = PDControl(KP, KD, actuated=list(range(7)))
    plan = _moves(moves)
    if not 0.0 < velocity_scaling <= 1.0:
        raise SimulationError(f"velocity_scaling must be in (0, 1], got {velocity_scaling!r}")
    q_plan, v_plan = offset_plan(sim_dt, moves=plan, velocity_scaling=velocity_scaling, hold=hold)
    n_settle = round(settle / sim_dt)
    q_d = np.concatenate([np.tile(q_plan[0], (n_settle, 1)), q_plan])
    v_d = np.concatenate([np.zeros((n_settle, 7)), v_plan])
    u = np.concatenate([q_d, v_d], axis=1)[None]
    q0 = np.concatenate([HOME, [0.0, 0.0]])[None]
    dyn = PinocchioDynamics(robot)
    settle_params = params
    if settle_damping is not None:
        damping = params.damping.clone()
        damping[:, [robot.joint_index(f"box_joint_{a}") for a in "xy"]] = check_positive(
            "settle_damping", settle_damping
        )
        settle_params = dataclasses.replace(params, damping=damping)
    q_s, v_s = simulate_rollout(
        dyn, settle_params, q0, np.zeros_like(q0), u[:, :n_settle], sim_dt, control
    )
    q, v = simulate_rollout(dyn, params, q_s[:, -1], v_s[:, -1], u[:, n_settle:], sim_dt, control)
    q, v = np.concatenate([q_s[:, :-1], q], axis=1), np.concatenate([v_s[:, :-1], v], axis=1)
    keep = np.arange(n_settle, q.shape[1] - 1, decimation)
    q_rec, v_rec, u_rec = q[0, keep], v[0, keep], u[0, keep]
    T = keep.size
    with torch.no_grad():
        tau = control(params, torch.as_tensor(q_rec)[None], torch.as_tensor(v_rec)[None],
                      torch.as_tensor(u_rec)[None])[0, :, :7].numpy()  # fmt: skip
        pose = frame_poses(TorchDynamics(robot), params, torch.as_tensor(q_rec)[None], ["box"])
    pose = pose[0, :, 0].numpy()
    quat = multiply(pose[:, 3:], _rotation_noise(rng, T, vicon_rotation_noise))
    obs = np.concatenate(
        [pose[:, :3] + vicon_position_noise * rng.standard_normal((T, 3)), quat], axis=1
    )
    traj = Trajectory(
        t=time_grid(T, 1.0 / rate),
        q=q_rec[:, :7] + joint_position_noise * rng.standard_normal((T, 7)),
        joint_names=list(ARM),
        dq=v_rec[:, :7] + joint_velocity_noise * rng.standard_normal((T, 7)),
        effort=tau + torque_noise * rng.standard_normal((T, 7)),
        command=u_rec,
        command_names=[f"desired/{j}/{f}" for f in ("position", "velocity") for j in ARM],
        obs=obs,
        obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
        meta={"robot": "panda", "scenario": SCENARIO, "t0_ns": SIM_T0_NS},
    )
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": "panda",
        "attachments": {
            "universal_box": {"flange_frame": "panda_link8", "box_mass": box.mass,
                              "weight_mass": box.weight_mass, "height": box.height,
                              "weight_positions": weight_positions}
        },
        "parameters": {**box.nominal_values(), "box_joint_x/damping": box_damping[0],
                       "box_joint_y/damping": box_damping[1]},
        "initial_state": {"joints": robot.joint_names, "q": q_rec[0], "v": v_rec[0]},
        "control": {"kind": "pd", "kp": KP, "kd": KD, "joints": list(ARM)},
        "vicon_points": VICON_POINTS,
        "settings": {"rate": rate, "sim_dt": sim_dt, "settle": settle,
                     "settle_damping": settle_damping, "hold": hold,
                     "moves": [[ARM[j], offset] for j, offset in plan],
                     "velocity_scaling": velocity_scaling},
        "noise": {"joint_position_std": joint_position_noise,
                  "joint_velocity_std": joint_velocity_noise, "torque_std": torque_noise,
                  "vicon_position_std": vicon_position_noise,
                  "vicon_rotation_std": vicon_rotation_noise},
    }  # fmt: skip
    return finish(Dataset([traj], {"scenario": SCENARIO}), truth, bag_layout, out_path, storage)
