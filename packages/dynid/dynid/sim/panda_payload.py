"""Panda carrying a rigid payload through a Fourier excitation trajectory (payload identification).

The payload is welded to the flange ``panda_link8`` (Franka's flange frame F, the frame in which
``franka_msgs/SetLoad`` takes the load's centre of mass and inertia). By default it is a 1.2 kg
cuboid 10 × 6 × 12 cm, tilted in the flange, whose centre of mass lies a few centimetres off the
flange axis; with ``draw_payload`` mass, centre of mass and inertia are drawn from the seed
within :data:`DRAWN_RANGES`.

Motion: every joint follows a 5-harmonic Fourier series (Swevers et al. 1997; Gaz et al. 2019,
Table II) about the home pose ``q0``::

    q_i(t) = q0_i + Σ_l a_il / (ω_f l) sin(ω_f l t) − b_il / (ω_f l) cos(ω_f l t)

with ω_f = 0.15 π rad/s (Gaz et al.). The coefficients are drawn from the seed, projected so that
the trajectory starts at rest with zero acceleration, and scaled per joint so that the whole
recording stays within ``position_margin`` of the Panda's position limits (and within
``max_amplitude`` of ``q0``) and within ``velocity_scaling`` / ``acceleration_scaling`` of its
velocity and acceleration limits.

Control: a joint torque controller as a Franka user writes it, ``τ = τ_ff(q_d, q̇_d, q̈_d) +
K_p (q_d − q) + K_d (q̇_d − q̇)``, with the computed-torque feed-forward ``τ_ff`` from the nominal
Panda model *without* the payload (inverse dynamics and the URDF's joint damping), the joint
stiffness of franka_ros2's example controller and a lower damping (:data:`KD`); the payload shows
up as tracking error and as extra torque. Arm and payload are simulated with Pinocchio
(semi-implicit Euler, dynid's ``rollout``) at ``sim_dt`` = 1 ms; the controller runs at the same
1 kHz and holds its torque over a step.

Recording, at 1 kHz like franka_ros2's joint_state_broadcaster: ``/franka/joint_states``
(positions with encoder noise, velocities with noise, ``effort`` = the applied joint torque plus
torque-sensor noise) and ``/franka/desired_joint_states`` (q_d, q̇_d). The truth file holds the
payload's mass (kg), centre of mass (m, flange frame) and inertia about the centre of mass
(kg·m², flange axes), as ``payload/*`` parameters and as the SetLoad-style mapping
``attachments.payload``. No joint friction beyond the URDF's viscous damping is simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import BagLayout, CommandTopic, Dataset, JointStateTopic, StorageFormat, Trajectory
from dynid.model.attachments import attach_payload
from dynid.model.integrate import PDControl
from dynid.model.params import DynamicParameters, nominal_parameters
from dynid.model.pinocchio_backend import PinocchioDynamics
from dynid.model.robot import RobotModel, load_robot
from dynid.sim.common import (
    SIM_T0_NS,
    SimulationError,
    check_positive,
    finish,
    simulate_rollout,
    time_grid,
)
from dynid.sim.panda_box import ACCELERATION_LIMITS, ARM, HOME

SCENARIO = "panda_payload"
PAYLOAD_LINK = "panda_link8"
#: Base angular frequency of the excitation (rad/s), Gaz et al. 2019 Table II: 0.15 π.
BASE_FREQUENCY = 0.15 * np.pi
HARMONICS = 5
#: Joint stiffness (N·m/rad) of franka_ros2's example joint impedance controller, and damping
#: (N·m·s/rad) below its (50, 50, 50, 50, 30, 25, 15): on the URDF's rigid-body model, which has
#: no rotor inertia, those make the 1 kHz loop unstable near configurations where joints 1 and 3
#: align; these keep every closed-loop pole of the sampled loop inside |z| < 1 with little ringing.
KP = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
KD = (20.0, 20.0, 20.0, 20.0, 8.0, 6.0, 3.0)


def cuboid_inertia(mass: float, size: Sequence[float], rotation: np.ndarray) -> np.ndarray:
    """``[3, 3]`` inertia (kg·m²) about the centre of a solid cuboid of ``size`` (m) whose axes
    are the columns of ``rotation`` in the frame the result is expressed in."""
    sx, sy, sz = np.square(np.asarray(size, dtype=np.float64))
    body = mass / 12.0 * np.diag([sy + sz, sx + sz, sx + sy])
    turned = rotation @ body @ rotation.T
    return 0.5 * (turned + turned.T)


def _rotation_xyz(angles: Sequence[float]) -> np.ndarray:
    """Rotation matrix of successive rotations about x, y then z by ``angles`` (rad)."""
    out = np.eye(3)
    for axis, angle in enumerate(angles):
        c, s = np.cos(angle), np.sin(angle)
        i, j = [k for k in range(3) if k != axis]
        r = np.eye(3)
        r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
        out = r @ out
    return out


#: Default payload: mass (kg), centre of mass in the flange frame (m), and its inertia about the
#: centre of mass (kg·m², flange axes): a 10 × 6 × 12 cm cuboid turned 20° about x, −15° about y
#: and 35° about z, so the inertia has off-diagonal terms.
PAYLOAD_MASS = 1.2
PAYLOAD_COM = (0.03, -0.02, 0.06)
PAYLOAD_SIZE = (0.10, 0.06, 0.12)
PAYLOAD_INERTIA = cuboid_inertia(
    PAYLOAD_MASS, PAYLOAD_SIZE, _rotation_xyz(np.deg2rad([20.0, -15.0, 35.0]))
)
#: Ranges of a drawn payload (``draw_payload=True``), uniform: mass (kg), centre of mass per
#: flange axis (m), cuboid side lengths (m); the cuboid's orientation is uniform on SO(3).
DRAWN_RANGES = {
    "mass": (1.0, 1.5),
    "com_x": (-0.05, 0.05),
    "com_y": (-0.05, 0.05),
    "com_z": (0.03, 0.10),
    "size": (0.04, 0.15),
}
JOINT_STATES = JointStateTopic("/franka/joint_states", joints=ARM)
LAYOUT = BagLayout(
    joint_states=JOINT_STATES,
    commands=(
        CommandTopic(
            "/franka/desired_joint_states", label="desired", fields=("position", "velocity")
        ),
    ),
)


class FeedforwardPDControl:
    """PD tracking plus a feed-forward torque: ``τ = τ_ff + k_p (q_d − q) + k_d (q̇_d − q̇)``.

    ``u`` holds ``[q_d, q̇_d, τ_ff]`` of all dofs (``nu = 3 nv``; rad, rad/s, N·m); the gains are
    those of :class:`dynid.model.integrate.PDControl` (N·m/rad, N·m·s/rad).
    """

    def __init__(self, kp: Sequence[float], kd: Sequence[float]) -> None:
        self.pd = PDControl(kp, kd)

    def input_size(self, nv: int) -> int:
        """``nu = 3 nv``: desired positions, desired velocities, feed-forward torques."""
        return self.pd.input_size(nv) // 2 * 3

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """``u [N|1, *B, 3 nv]`` → generalised forces ``[N, *B, nv]`` (N·m)."""
        nv = q.shape[-1]
        if u.shape[-1] != self.input_size(nv):
            raise SimulationError(
                f"control u must have {self.input_size(nv)} columns (desired positions, "
                f"velocities, feed-forward torques), got shape {tuple(u.shape)}"
            )
        return self.pd(p, q, v, u[..., : 2 * nv]) + u[..., 2 * nv :]


def drawn_payload(rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass (kg), centre of mass ``[3]`` (m) and inertia ``[3, 3]`` (kg·m²) of a payload drawn
    within :data:`DRAWN_RANGES` (a solid cuboid of random sides and orientation)."""
    r = DRAWN_RANGES
    mass = float(rng.uniform(*r["mass"]))
    com = np.array([rng.uniform(*r[f"com_{a}"]) for a in "xyz"])
    size = rng.uniform(*r["size"], size=3)
    quat = rng.standard_normal(4)
    x, y, z, w = quat / np.linalg.norm(quat)
    rotation = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip
    return mass, com, cuboid_inertia(mass, size, rotation)


def fourier_trajectory(
    t: np.ndarray, q0: np.ndarray, a: np.ndarray, b: np.ndarray, omega: float = BASE_FREQUENCY
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, velocities and accelerations ``[T, n]`` (rad, rad/s, rad/s²) of the Fourier
    series with offsets ``q0 [n]`` and coefficients ``a, b [n, L]`` (rad/s) at times ``t [T]``
    (s), base frequency ``omega`` (rad/s); see the module docstring."""
    t = np.asarray(t, dtype=np.float64)
    harmonics = np.arange(1, a.shape[1] + 1)
    phase = omega * harmonics[None, :] * t[:, None]  # [T, L]
    sin, cos = np.sin(phase), np.cos(phase)
    scale = 1.0 / (omega * harmonics)
    q = q0 + sin @ (a * scale).T - cos @ (b * scale).T
    v = cos @ a.T + sin @ b.T
    acc = -(sin * omega * harmonics) @ a.T + (cos * omega * harmonics) @ b.T
    return q, v, acc


def fit_fourier_coefficients(
    t: np.ndarray, q: np.ndarray, harmonics: int = HARMONICS, omega: float = BASE_FREQUENCY
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Offsets ``q0 [n]`` and coefficients ``a, b [n, harmonics]`` (rad/s) of the Fourier series
    closest in least squares to the positions ``q [T, n]`` (rad) at times ``t [T]`` (s): the
    inverse of :func:`fourier_trajectory`, for a recorded excitation (time measured from the
    series' origin)."""
    t = np.asarray(t, dtype=np.float64)
    harmonic = np.arange(1, harmonics + 1)
    phase = omega * harmonic[None, :] * t[:, None]  # [T, L]
    scale = 1.0 / (omega * harmonic)
    basis = np.hstack([np.ones((t.size, 1)), np.sin(phase) * scale, -np.cos(phase) * scale])
    coef, *_ = np.linalg.lstsq(basis, np.asarray(q, dtype=np.float64), rcond=None)
    return coef[0], coef[1 : harmonics + 1].T, coef[harmonics + 1 :].T


@dataclass(frozen=True)
class JointLimits:
    """Per-joint limits ``[n]`` an excitation is scaled to: positions ``lower`` and ``upper``
    (rad), ``velocity`` (rad/s) and ``acceleration`` (rad/s²)."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray


def panda_limits(robot: RobotModel) -> JointLimits:
    """The limits of the Panda's 7 arm joints: its model's position and velocity limits and
    :data:`dynid.sim.panda_box.ACCELERATION_LIMITS`."""
    n = len(ARM)
    model = robot.model
    return JointLimits(
        lower=np.asarray(model.lowerPositionLimit)[:n],
        upper=np.asarray(model.upperPositionLimit)[:n],
        velocity=np.asarray(model.velocityLimit)[:n],
        acceleration=np.asarray(ACCELERATION_LIMITS),
    )


def excitation_coefficients(
    rng: np.random.Generator,
    limits: JointLimits,
    duration: float,
    *,
    q0: Sequence[float] = HOME,
    harmonics: int = HARMONICS,
    omega: float = BASE_FREQUENCY,
    max_amplitude: float = 1.0,
    position_margin: float = 0.2,
    velocity_scaling: float = 0.5,
    acceleration_scaling: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients ``a, b [n, harmonics]`` (rad/s) drawn from ``rng`` and scaled to ``limits``,
    ``n = len(q0)``.

    Each row is drawn standard normal, then projected so that ``q̇(0) = Σ_l a_l = 0`` and
    ``q̈(0) = ω Σ_l l b_l = 0`` (the motion starts at rest), then scaled so that over ``[0,
    duration]`` the joint stays within ``position_margin`` (rad) of its position limits and
    within ``max_amplitude`` (rad) of ``q0``, and below ``velocity_scaling`` and
    ``acceleration_scaling`` times its velocity and acceleration limits.

    Raises:
        SimulationError: ``q0`` is not more than ``position_margin`` inside the limits.
    """
    q0 = np.asarray(q0, dtype=np.float64)
    n = q0.size
    a = rng.standard_normal((n, harmonics))
    b = rng.standard_normal((n, harmonics))
    a -= a.mean(axis=1, keepdims=True)
    weights = np.arange(1, harmonics + 1, dtype=np.float64)
    b -= (b @ weights)[:, None] / (weights @ weights) * weights[None, :]
    t = np.linspace(0.0, duration, max(2, int(duration * 200) + 1))
    q, v, acc = fourier_trajectory(t, q0, a, b, omega)
    lower = np.asarray(limits.lower) + position_margin
    upper = np.asarray(limits.upper) - position_margin
    if np.any(q0 <= lower) or np.any(q0 >= upper):
        raise SimulationError(
            f"setting 'q0' {q0.tolist()} must lie more than position_margin {position_margin} rad "
            "inside the joint limits"
        )
    room = np.minimum(np.minimum(q0 - lower, upper - q0), max_amplitude)
    velocity = velocity_scaling * np.asarray(limits.velocity)
    acceleration = acceleration_scaling * np.asarray(limits.acceleration)
    scale = np.min(
        np.stack([
            room / np.abs(q - q0).max(axis=0),
            velocity / np.abs(v).max(axis=0),
            acceleration / np.abs(acc).max(axis=0),
        ]),
        axis=0,
    )  # fmt: skip
    return a * scale[:, None], b * scale[:, None]


def payload_inertial(
    rng: np.random.Generator,
    draw: bool,
    mass: float | None,
    com: Sequence[float] | None,
    inertia: Sequence[Sequence[float]] | np.ndarray | None,
) -> tuple[float, np.ndarray, np.ndarray]:
    """The true payload: drawn or the defaults, each part overridden where given."""
    drawn = drawn_payload(rng) if draw else (PAYLOAD_MASS, np.array(PAYLOAD_COM), PAYLOAD_INERTIA)
    return (
        check_positive("payload_mass", drawn[0] if mass is None else mass),
        np.asarray(drawn[1] if com is None else com, dtype=np.float64),
        np.asarray(drawn[2] if inertia is None else inertia, dtype=np.float64),
    )


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    duration: float = 10.0,
    sim_dt: float = 1e-3,
    substeps: int = 1,
    draw_payload: bool = False,
    payload_mass: float | None = None,
    payload_com: Sequence[float] | None = None,
    payload_inertia: Sequence[Sequence[float]] | np.ndarray | None = None,
    harmonics: int = HARMONICS,
    base_frequency: float = BASE_FREQUENCY,
    max_amplitude: float = 1.0,
    position_margin: float = 0.2,
    velocity_scaling: float = 0.5,
    acceleration_scaling: float = 0.5,
    joint_position_noise: float = 1e-4,
    joint_velocity_noise: float = 1e-3,
    torque_noise: float = 0.05,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the Panda carrying the payload through the excitation and record it.

    Args:
        seed: seeds the excitation coefficients, the drawn payload and all sensor noise.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        duration: recorded time (s).
        sim_dt: control and recording step (s), 1 ms like the Franka control loop.
        substeps: integrator sub-steps per step. With 1 (default) the 1 kHz controller holds
            its torque over the step; with more, the PD term is evaluated at every sub-step and
            the recorded effort is the torque at the sample.
        draw_payload: draw the payload within :data:`DRAWN_RANGES` instead of the default one.
        payload_mass, payload_com, payload_inertia: override the payload's mass (kg), centre of
            mass ``[3]`` (m, flange frame) or inertia ``[3, 3]`` (kg·m² about the centre of mass,
            flange axes).
        harmonics, base_frequency: number of harmonics and ω_f (rad/s) of the excitation.
        max_amplitude, position_margin: largest excursion from the home pose and smallest
            distance to the position limits (rad) of the desired motion.
        velocity_scaling, acceleration_scaling: fractions of the Panda's velocity and
            acceleration limits the desired motion may reach.
        joint_position_noise, joint_velocity_noise, torque_noise: σ of the Gaussian sensor noise
            (rad, rad/s, N·m); zeros record the exact simulated values.
        storage: bag storage format.

    Returns:
        The dataset (one trajectory, the 7 arm joints) and the truth mapping.
    """
    duration = check_positive("duration", duration)
    sim_dt = check_positive("sim_dt", sim_dt)
    base_frequency = check_positive("base_frequency", base_frequency)
    if int(substeps) != substeps or substeps < 1:
        raise SimulationError(f"setting 'substeps' must be a positive integer, got {substeps!r}")
    if int(harmonics) != harmonics or harmonics < 1:
        raise SimulationError(f"setting 'harmonics' must be a positive integer, got {harmonics!r}")
    for name, value in (("velocity_scaling", velocity_scaling),
                        ("acceleration_scaling", acceleration_scaling)):  # fmt: skip
        if not 0.0 < value <= 1.0:
            raise SimulationError(f"setting {name!r} must be in (0, 1], got {value!r}")
    rng = np.random.default_rng(seed)
    nominal_robot = load_robot("panda")
    a, b = excitation_coefficients(
        rng, panda_limits(nominal_robot), duration, harmonics=int(harmonics), omega=base_frequency,
        max_amplitude=check_positive("max_amplitude", max_amplitude),
        position_margin=position_margin, velocity_scaling=velocity_scaling,
        acceleration_scaling=acceleration_scaling,
    )  # fmt: skip
    mass, com, inertia = payload_inertial(
        rng, draw_payload, payload_mass, payload_com, payload_inertia
    )
    try:
        robot = attach_payload(nominal_robot, PAYLOAD_LINK, mass=mass, com=com, inertia=inertia)
    except ValueError as exc:
        raise SimulationError(f"payload: {exc}") from None
    steps = round(duration / sim_dt)
    t = time_grid(steps + 1, sim_dt)
    q0 = np.asarray(HOME)
    q_d, v_d, a_d = fourier_trajectory(t, q0, a, b, base_frequency)
    nominal = nominal_parameters(nominal_robot)
    with torch.no_grad():
        ff_dyn = PinocchioDynamics(nominal_robot)
        qt, vt, at = (torch.as_tensor(x)[None] for x in (q_d, v_d, a_d))
        tau_ff = (ff_dyn.rnea(nominal, qt, vt, at) + ff_dyn.friction_torque(nominal, vt))[0]
    u = np.concatenate([q_d, v_d, tau_ff.numpy()], axis=1)
    control = FeedforwardPDControl(KP, KD)
    params = nominal_parameters(robot)
    q, v = simulate_rollout(
        PinocchioDynamics(robot), params, q_d[:1], np.zeros((1, 7)), u[None, :-1], sim_dt,
        control, int(substeps),
    )  # fmt: skip
    q, v = q[0], v[0]
    with torch.no_grad():
        tau = control(params, torch.as_tensor(q)[None], torch.as_tensor(v)[None],
                      torch.as_tensor(u)[None])[0].numpy()  # fmt: skip
    model = robot.model
    if np.any(q < model.lowerPositionLimit) or np.any(q > model.upperPositionLimit):
        raise SimulationError("the arm left its position limits; lower max_amplitude")
    traj = Trajectory(
        t=t,
        q=q + joint_position_noise * rng.standard_normal(q.shape),
        joint_names=list(ARM),
        dq=v + joint_velocity_noise * rng.standard_normal(v.shape),
        effort=tau + torque_noise * rng.standard_normal(tau.shape),
        command=u[:, :14],
        command_names=[f"desired/{j}/{f}" for f in ("position", "velocity") for j in ARM],
        meta={"robot": "panda", "scenario": SCENARIO, "t0_ns": SIM_T0_NS},
    )
    payload = robot.attachment("payload")
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": "panda",
        "attachments": {
            "payload": {"link": PAYLOAD_LINK, "mass": mass, "com": com, "inertia": inertia}
        },
        "parameters": payload.nominal_values(),
        "initial_state": {"joints": list(ARM), "q": q[0], "v": v[0]},
        "control": {"kind": "feedforward_pd", "kp": KP, "kd": KD, "joints": list(ARM),
                    "feedforward": "inverse dynamics and joint damping of the nominal Panda "
                                   "without the payload"},
        "excitation": {"form": "fourier", "base_frequency": base_frequency,
                       "harmonics": int(harmonics), "q0": q0, "a": a, "b": b},
        "settings": {"duration": duration, "sim_dt": sim_dt, "substeps": int(substeps),
                     "draw_payload": draw_payload, "max_amplitude": max_amplitude,
                     "position_margin": position_margin, "velocity_scaling": velocity_scaling,
                     "acceleration_scaling": acceleration_scaling},
        "noise": {"joint_position_std": joint_position_noise,
                  "joint_velocity_std": joint_velocity_noise, "torque_std": torque_noise},
    }  # fmt: skip
    return finish(Dataset([traj], {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
