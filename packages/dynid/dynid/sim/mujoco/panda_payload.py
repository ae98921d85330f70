"""The Panda payload scenario on MuJoCo: :mod:`dynid.sim.panda_payload`'s recording, simulated by
another engine.

The same seed draws the same excitation as the dynid-engine scenario (and carries its payload;
a drawn one comes from ``robot_seed``'s generator); the Panda of
example-robot-data (fingers locked) is compiled by MuJoCo with the payload welded to
``panda_link8`` and tracks the excitation under the joint impedance controller of
:mod:`dynid.sim.mujoco.engine` (the stiffness and damping of :data:`dynid.sim.panda_payload.KP`
and ``KD``, MuJoCo's gravity and Coriolis compensation of the Panda without the payload). The bag
holds the topics of the dynid-engine scenario (``/franka/joint_states`` at 1 kHz: encoder-
quantised positions, noisy velocities, torque-sensor readings with noise and an offset per joint;
``/franka/desired_joint_states``) and the truth file the same keys, plus ``engine`` and the
torque offsets as ``<joint>/torque_offset`` parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dynid.data import Dataset, StorageFormat
from dynid.model.robot import robot_urdf
from dynid.sim.common import finish
from dynid.sim.mujoco import arm, engine
from dynid.sim.panda_box import ACCELERATION_LIMITS, ARM, HOME
from dynid.sim.panda_payload import (
    BASE_FREQUENCY,
    HARMONICS,
    KD,
    KP,
    LAYOUT,
    PAYLOAD_LINK,
    SCENARIO,
    payload_inertial,
)

FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
#: The Panda's joint friction as Gaz et al. 2019 identified it on a real arm (RA-L 4(4), "Dynamic
#: identification of the Franka Emika Panda robot with retrieval of feasible parameters using
#: penalty-based optimization", Table I): per joint the sigmoid ``τ_f = φ1 / (1 + e^{−φ2 (q̇ +
#: φ3)}) − φ1 / (1 + e^{−φ2 φ3})`` with φ1 (N·m) as here, a step of φ1 across zero velocity
#: about 1/φ2 = 0.06–0.2 rad/s wide, without a viscous term.
GAZ2019_PHI1 = (0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489)
#: Dry friction per joint (N·m) of that model as MuJoCo's ``frictionloss`` takes it: half the
#: step, the level the sigmoid approaches on either side of zero velocity (its offset φ3 shifts
#: the two levels by at most 0.08 N·m).
JOINT_COULOMB = tuple(phi1 / 2 for phi1 in GAZ2019_PHI1)


def panda() -> arm.Arm:
    """The Panda's 7 arm joints with the dynid-engine scenario's gains and limits."""
    return arm.Arm(robot="panda", urdf=robot_urdf("panda"), joints=ARM, locked=FINGERS,
                   home=HOME, kp=KP, kd=KD, acceleration=ACCELERATION_LIMITS)  # fmt: skip


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    robot_seed: int | None = None,
    duration: float = 10.0,
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
    encoder_ticks: int = engine.ENCODER_TICKS,
    joint_velocity_noise: float = 1e-3,
    torque_noise: float = 0.05,
    torque_offset: float = 0.2,
    torque_side: str = "motor",
    grasp_time: float | None = None,
    release_time: float | None = None,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the Panda carrying the payload through the excitation on MuJoCo and record it.

    Args:
        seed: seeds the excitation and all sensor noise.
        robot_seed: seeds the robot's draws (the drawn payload, the torque offsets) on their
            own generator, default ``seed``: recordings of different ``seed`` (other motion and
            noise, e.g. held-out data) and one ``robot_seed`` share one robot.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        duration: recorded time (s).
        draw_payload, payload_mass, payload_com, payload_inertia: the payload, as in
            :func:`dynid.sim.panda_payload.simulate`.
        harmonics, base_frequency, max_amplitude, position_margin, velocity_scaling,
            acceleration_scaling: the excitation, as in :func:`dynid.sim.panda_payload.simulate`.
        encoder_ticks: encoder resolution (ticks per revolution).
        joint_velocity_noise, torque_noise: σ of the Gaussian sensor noise (rad/s, N·m).
        torque_offset: bound (N·m) of the torque-sensor offsets, drawn uniform per joint.
        torque_side: the side of the joint the torques are sensed on, ``motor`` (the applied
            torque, friction included) or ``link`` (without the joint's friction), as in
            :class:`dynid.sim.mujoco.engine.Sensors`.
        grasp_time, release_time: when given, the payload is carried only from ``grasp_time``
            (s; ``None``: from the start) until ``release_time`` (s; ``None``: to the end), a
            grasp and a release mid-motion; the truth file then lists them under
            ``payload_changes`` (time of the first sample with the new load, and kind).
        storage: bag storage format.

    Returns:
        The dataset (one trajectory, the 7 arm joints) and the truth mapping.

    Raises:
        SimulationError: a setting is out of range, ``mujoco`` is missing, or the run fails.
    """
    rng, robot_rng = arm.generators(seed, robot_seed)
    robot = panda()
    urdf = engine.read_urdf(robot.urdf)
    motion = arm.excitation(
        rng, robot, urdf, duration, harmonics=harmonics, base_frequency=base_frequency,
        max_amplitude=max_amplitude, position_margin=position_margin,
        velocity_scaling=velocity_scaling, acceleration_scaling=acceleration_scaling,
    )  # fmt: skip
    mass, com, inertia = payload_inertial(
        robot_rng, draw_payload, payload_mass, payload_com, payload_inertia
    )
    payload = engine.Payload(PAYLOAD_LINK, engine.Inertial(mass, com, inertia))
    sensors = engine.Sensors(int(encoder_ticks), joint_velocity_noise, torque_noise,
                             arm.torque_offsets(robot_rng, len(ARM), torque_offset),
                             torque_side)  # fmt: skip
    schedule = arm.PayloadSchedule.checked(grasp_time, release_time, duration)
    recording = arm.run(robot, urdf, motion, sensors, rng, payload=payload, payload_held=schedule)
    traj = arm.trajectory(recording, robot, motion, SCENARIO, "desired")
    truth = arm.truth(
        SCENARIO, seed, robot_seed, robot, recording, motion, sensors,
        parameters=arm.body_parameters("payload", payload.inertial),
        attachments={
            "payload": {"link": PAYLOAD_LINK, "mass": mass, "com": com, "inertia": inertia}
        },
        settings={"duration": duration, "draw_payload": draw_payload,
                  "max_amplitude": max_amplitude, "position_margin": position_margin,
                  "velocity_scaling": velocity_scaling,
                  "acceleration_scaling": acceleration_scaling},
    )  # fmt: skip
    if schedule is not None:
        truth["payload_changes"] = schedule.changes()
        truth["settings"].update({"grasp_time": grasp_time, "release_time": release_time})
    return finish(Dataset([traj], {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
