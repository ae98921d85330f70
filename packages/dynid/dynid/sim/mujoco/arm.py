"""What the MuJoCo arm scenarios share: the arm, its Fourier excitation, the run and the record.

A scenario names an :class:`Arm` (URDF, joints, home pose, gains), draws the excitation of
:mod:`dynid.sim.panda_payload` (5 harmonics, ω_f = 0.15 π rad/s, scaled to the URDF's position
and velocity limits and the arm's acceleration limits), runs it on MuJoCo
(:func:`dynid.sim.mujoco.engine.track`) and records ``joint_states`` (measured q, q̇, τ) and the
desired positions and velocities on the scenario's command topic, like the dynid-engine
scenarios.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element

import numpy as np

from dynid.data import Trajectory
from dynid.sim.common import SIM_T0_NS, Array, SimulationError, check_positive, time_grid
from dynid.sim.mujoco import engine
from dynid.sim.panda_payload import (
    BASE_FREQUENCY,
    HARMONICS,
    JointLimits,
    excitation_coefficients,
    fourier_trajectory,
)


@dataclass(frozen=True)
class Arm:
    """A robot arm the MuJoCo scenarios drive.

    ``robot``: dynid's name of the robot (``truth["robot"]``); ``urdf``: its URDF file;
    ``joints``: the driven joints in recording order; ``locked``: joints welded at zero;
    ``home [n]`` (rad): the excitation's centre; ``kp [n]`` (N·m/rad), ``kd [n]`` (N·m·s/rad):
    the impedance gains; ``acceleration [n]`` (rad/s²): the limits the excitation is scaled to.
    """

    robot: str
    urdf: Path
    joints: tuple[str, ...]
    locked: tuple[str, ...]
    home: tuple[float, ...]
    kp: tuple[float, ...]
    kd: tuple[float, ...]
    acceleration: tuple[float, ...]


@dataclass(frozen=True)
class Excitation:
    """The desired motion: Fourier ``a, b [n, L]`` (rad/s) about ``q0 [n]`` (rad) at
    ``base_frequency`` (rad/s), and its positions ``q [T, n]`` and velocities ``v [T, n]`` at
    the control rate; ``acc [T, n]`` (rad/s²), when given, is fed forward by the controller
    (:func:`dynid.sim.mujoco.engine.track`)."""

    q0: Array
    a: Array
    b: Array
    base_frequency: float
    q: Array
    v: Array
    acc: Array | None = None

    def truth(self) -> dict[str, Any]:
        """The ``excitation`` mapping of a truth file."""
        return {
            "form": "fourier",
            "base_frequency": self.base_frequency,
            "harmonics": int(self.a.shape[1]),
            "q0": self.q0,
            "a": self.a,
            "b": self.b,
        }


def excitation(
    rng: np.random.Generator,
    arm: Arm,
    urdf: Element,
    duration: float,
    *,
    harmonics: int = HARMONICS,
    base_frequency: float = BASE_FREQUENCY,
    max_amplitude: float = 1.0,
    position_margin: float = 0.2,
    velocity_scaling: float = 0.5,
    acceleration_scaling: float = 0.5,
) -> Excitation:
    """Draw the excitation of ``duration`` (s) for ``arm`` from ``rng`` (see the module
    docstring); the settings are those of :func:`dynid.sim.panda_payload.simulate`.

    Raises:
        SimulationError: a setting is out of range.
    """
    duration = check_positive("duration", duration)
    base_frequency = check_positive("base_frequency", base_frequency)
    if int(harmonics) != harmonics or harmonics < 1:
        raise SimulationError(f"setting 'harmonics' must be a positive integer, got {harmonics!r}")
    for name, value in (("velocity_scaling", velocity_scaling),
                        ("acceleration_scaling", acceleration_scaling)):  # fmt: skip
        if not 0.0 < value <= 1.0:
            raise SimulationError(f"setting {name!r} must be in (0, 1], got {value!r}")
    lower, upper, velocity, _ = engine.urdf_joint_limits(urdf, arm.joints)
    limits = JointLimits(lower, upper, velocity, np.asarray(arm.acceleration))
    a, b = excitation_coefficients(
        rng, limits, duration, q0=arm.home, harmonics=int(harmonics), omega=base_frequency,
        max_amplitude=check_positive("max_amplitude", max_amplitude),
        position_margin=position_margin, velocity_scaling=velocity_scaling,
        acceleration_scaling=acceleration_scaling,
    )  # fmt: skip
    t = time_grid(round(duration / engine.CONTROL_PERIOD) + 1, engine.CONTROL_PERIOD)
    q0 = np.asarray(arm.home, dtype=np.float64)
    q, v, _ = fourier_trajectory(t, q0, a, b, base_frequency)
    return Excitation(q0, a, b, base_frequency, q, v)


@dataclass
class PayloadSchedule:
    """When the welded payload is carried: from ``grasp_time`` (s, ``None``: from the start) until
    ``release_time`` (s, ``None``: to the end). Outside that interval the payload body weighs
    nothing (its mass and inertia are zero), so the arm moves as without it."""

    grasp_time: float | None
    release_time: float | None
    _carried: tuple[float, Array] | None = field(default=None, init=False, repr=False)

    @classmethod
    def checked(
        cls, grasp_time: float | None, release_time: float | None, duration: float
    ) -> PayloadSchedule | None:
        """The schedule of the scenario settings, ``None`` when neither time is given.

        Raises:
            SimulationError: a time outside ``(0, duration)`` or a release before the grasp.
        """
        if grasp_time is None and release_time is None:
            return None
        for name, value in (("grasp_time", grasp_time), ("release_time", release_time)):
            if value is not None and not (np.isfinite(value) and 0.0 < value < duration):
                raise SimulationError(
                    f"setting {name!r} must be inside the recording (0, {duration}) s, got "
                    f"{value!r}"
                )
        if grasp_time is not None and release_time is not None and release_time <= grasp_time:
            raise SimulationError(
                f"setting 'release_time' ({release_time}) must be after 'grasp_time' ({grasp_time})"
            )
        return cls(grasp_time, release_time)

    def held(self, t: float) -> bool:
        """Whether the payload is carried at time ``t`` (s)."""
        after_grasp = self.grasp_time is None or t >= self.grasp_time - 1e-9
        before_release = self.release_time is None or t < self.release_time - 1e-9
        return after_grasp and before_release

    def changes(self) -> list[dict[str, Any]]:
        """``[{time, kind}]`` (s, ``grasp`` or ``release``) for the truth file: the time of the
        first sample taken with the new load (the control period's grid)."""
        out = []
        for kind, time in (("grasp", self.grasp_time), ("release", self.release_time)):
            if time is not None:
                k = int(np.ceil(time / engine.CONTROL_PERIOD - 1e-9))
                out.append({"time": k * engine.CONTROL_PERIOD, "kind": kind})
        return out

    def before_sample(self, k: int, model: Any) -> None:
        """:func:`dynid.sim.mujoco.engine.track`'s hook: the payload body's mass and inertia as
        held or not at sample ``k``."""
        body = model.body("payload")
        if self._carried is None:
            self._carried = (float(body.mass[0]), np.array(body.inertia))
        mass, inertia = self._carried
        held = self.held(k * engine.CONTROL_PERIOD)
        body.mass[0] = mass if held else 0.0
        body.inertia[:] = inertia if held else 0.0


def torque_offsets(rng: np.random.Generator, n: int, bound: float) -> Array:
    """``[n]`` torque-sensor offsets (N·m) drawn uniform in ``[−bound, bound]``."""
    if not (np.isfinite(bound) and bound >= 0.0):
        raise SimulationError(f"setting 'torque_offset' must be finite and ≥ 0, got {bound!r}")
    return rng.uniform(-bound, bound, size=n)


def run(
    arm: Arm,
    urdf: Element,
    motion: Excitation,
    sensors: engine.Sensors,
    rng: np.random.Generator,
    *,
    payload: engine.Payload | None = None,
    inertials: Mapping[str, engine.Inertial] | None = None,
    friction: Mapping[str, engine.JointFriction] | None = None,
    payload_held: PayloadSchedule | None = None,
) -> engine.Recording:
    """Compile ``arm`` (its URDF with ``inertials`` and ``friction`` written in, ``payload``
    welded on) and track ``motion`` with a controller whose model is the URDF's arm as given
    (without payload or perturbation: what the arm's maker ships). With ``payload_held`` the
    payload is carried only while the schedule holds it (grasped and released mid-motion).

    Raises:
        SimulationError: the model does not compile as the URDF says, the run diverges, leaves
            the position limits or exceeds an effort limit.
    """
    simulated = engine.prepared_urdf(urdf, locked=arm.locked, inertials=inertials,
                                     friction=friction)  # fmt: skip
    model = engine.compile_arm(simulated, payload)
    controlled = engine.compile_arm(engine.prepared_urdf(urdf, locked=arm.locked))
    lower, upper, _, effort = engine.urdf_joint_limits(urdf, arm.joints)
    recording = engine.track(
        model, controlled, arm.joints, motion.q, motion.v, arm.kp, arm.kd, sensors, effort, rng,
        before_sample=None if payload_held is None else payload_held.before_sample,
        a_d=motion.acc,
    )  # fmt: skip
    if np.any(recording.q < lower) or np.any(recording.q > upper):
        raise SimulationError("the arm left its position limits; lower max_amplitude")
    return recording


def trajectory(
    recording: engine.Recording,
    arm: Arm,
    motion: Excitation,
    scenario: str,
    command: str | None = None,
) -> Trajectory:
    """The recorded trajectory: measured q, q̇, τ of ``arm.joints``, and when ``command`` is
    given the desired positions and velocities as commands ``<command>/<joint>/position|velocity``.
    """
    names = [f"{command}/{j}/{f}" for f in ("position", "velocity") for j in arm.joints]
    return Trajectory(
        t=recording.t,
        q=recording.q_measured,
        joint_names=list(arm.joints),
        dq=recording.v_measured,
        effort=recording.tau_measured,
        command=None if command is None else np.concatenate([motion.q, motion.v], axis=1),
        command_names=[] if command is None else names,
        meta={"robot": arm.robot, "scenario": scenario, "t0_ns": SIM_T0_NS},
    )


def generators(
    seed: int, robot_seed: int | None
) -> tuple[np.random.Generator, np.random.Generator]:
    """``(rng, robot_rng)`` of a scenario: ``rng`` (of ``seed``) draws the motion and the sensor
    noise, ``robot_rng`` (of ``robot_seed``, default ``seed``) the robot's own draws (a drawn
    payload, a perturbation, friction, the torque offsets) on a generator of its own, so that
    recordings of different ``seed`` and one ``robot_seed`` share one robot, and a recording made
    without ``robot_seed`` is of the robot its truth file names (``robot_seed: seed``)."""
    return np.random.default_rng(seed), np.random.default_rng(
        seed if robot_seed is None else robot_seed
    )


def truth(
    scenario: str,
    seed: int,
    robot_seed: int | None,
    arm: Arm,
    recording: engine.Recording,
    motion: Excitation,
    sensors: engine.Sensors,
    *,
    parameters: Mapping[str, float],
    settings: Mapping[str, Any],
    attachments: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The truth mapping of a recording of ``arm``: the scenario and its seeds, the robot and the
    engine, the attachments (if any), ``parameters`` with the torque offsets appended
    (:func:`offset_parameters`), the initial state, the controller, the excitation, the scenario's
    ``settings`` and the sensor noise."""
    out: dict[str, Any] = {
        "scenario": scenario,
        "seed": seed,
        "robot_seed": seed if robot_seed is None else robot_seed,
        "robot": arm.robot,
        "engine": engine.engine_info(),
    }
    if attachments is not None:
        out["attachments"] = dict(attachments)
    out.update({
        "parameters": {**parameters, **offset_parameters(arm.joints, sensors.torque_offset)},
        "initial_state": {"joints": list(arm.joints), "q": recording.q[0], "v": recording.v[0]},
        "control": control_truth(arm),
        "excitation": motion.truth(),
        "settings": dict(settings),
        "noise": noise_truth(sensors),
    })  # fmt: skip
    return out


def offset_parameters(joints: Sequence[str], offsets: Array) -> dict[str, float]:
    """``{<joint>/torque_offset: N·m}`` for the truth file."""
    return {f"{j}/torque_offset": float(o) for j, o in zip(joints, offsets, strict=True)}


def control_truth(arm: Arm) -> dict[str, Any]:
    """The ``control`` mapping of a truth file."""
    return {"kind": "joint_impedance", "kp": arm.kp, "kd": arm.kd, "joints": list(arm.joints),
            "rate_hz": 1.0 / engine.CONTROL_PERIOD,
            "compensation": "MuJoCo's gravity and Coriolis torques of the URDF's arm (no "
                            "payload, no perturbation) at the measured state"}  # fmt: skip


def noise_truth(sensors: engine.Sensors) -> dict[str, Any]:
    """The ``noise`` mapping of a truth file."""
    return {"encoder_ticks_per_rev": sensors.encoder_ticks,
            "joint_velocity_std": sensors.velocity_std, "torque_std": sensors.torque_std,
            "torque_offset": sensors.torque_offset, "torque_side": sensors.torque_side}  # fmt: skip


def body_parameters(prefix: str, inertial: engine.Inertial) -> dict[str, float]:
    """``{<prefix>/mass|com_x|com_y|com_z|ixx|ixy|iyy|ixz|iyz|izz: value}`` (kg, m, kg·m²), the
    rigid-body parameter names of dynid's problem files."""
    i = inertial.inertia
    values = (inertial.mass, *inertial.com, i[0, 0], i[0, 1], i[1, 1], i[0, 2], i[1, 2], i[2, 2])
    fields = ("mass", "com_x", "com_y", "com_z", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")
    return {f"{prefix}/{f}": float(v) for f, v in zip(fields, values, strict=True)}
