"""A UR5 carrying a rigid payload on ``tool0`` through a Fourier excitation, on MuJoCo.

The arm is example-robot-data's ``ur5_robot.urdf`` (the robot of the UR5 walkthrough in the
user guide) compiled by MuJoCo with a 2 kg payload welded to the tool flange ``tool0`` (by
default the walkthrough's: centre of mass (0.01, −0.02, 0.08) m, inertia diag(4, 5, 3)·10⁻³
kg·m² in ``tool0`` axes). The excitation is that of :mod:`dynid.sim.mujoco.arm` about
:data:`HOME`, scaled to the URDF's position and velocity limits and to :data:`ACCELERATION`;
the joint impedance controller (:data:`KP`, :data:`KD`) compensates the UR5's gravity and
Coriolis torques without the payload.

Recorded at 1 kHz on ``/joint_states`` (``sensor_msgs/msg/JointState``: encoder-quantised
positions, noisy velocities, joint torques with noise and an offset per joint), the topic the
walkthrough's problem file reads. The truth file holds the payload as ``payload/*`` parameters
and ``attachments.payload``, and the offsets as ``<joint>/torque_offset``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dynid.data import BagLayout, Dataset, JointStateTopic, StorageFormat
from dynid.model.robot import example_robot_data_urdf
from dynid.sim.common import finish
from dynid.sim.mujoco import arm, engine

SCENARIO = "ur5_payload"
PAYLOAD_LINK = "tool0"
JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
#: Centre of the excitation (rad): the walkthrough's pose, forearm level and tool pointing down.
HOME = (0.0, -1.2, 1.4, -1.6, -1.57, 0.0)
#: Joint stiffness (N·m/rad) and damping (N·m·s/rad) of the impedance controller: shoulder and
#: elbow stiff, the wrist softer; every sampled-loop pole stays inside |z| < 1 at 1 kHz.
KP = (800.0, 800.0, 600.0, 150.0, 100.0, 50.0)
KD = (40.0, 40.0, 30.0, 6.0, 4.0, 2.0)
#: Acceleration limits (rad/s²) the excitation is scaled to (the URDF states none).
ACCELERATION = (4.0, 4.0, 4.0, 8.0, 8.0, 8.0)
PAYLOAD_MASS = 2.0
PAYLOAD_COM = (0.01, -0.02, 0.08)
PAYLOAD_INERTIA = ((4.0e-3, 0.0, 0.0), (0.0, 5.0e-3, 0.0), (0.0, 0.0, 3.0e-3))
LAYOUT = BagLayout(joint_states=JointStateTopic("/joint_states", joints=JOINTS))


def ur5() -> arm.Arm:
    """The UR5 of example-robot-data with this scenario's home pose, gains and limits."""
    return arm.Arm(robot="ur5", urdf=example_robot_data_urdf("ur_description/urdf/ur5_robot.urdf"),
                   joints=JOINTS, locked=(), home=HOME, kp=KP, kd=KD,
                   acceleration=ACCELERATION)  # fmt: skip


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    robot_seed: int | None = None,
    duration: float = 10.0,
    payload_mass: float = PAYLOAD_MASS,
    payload_com: Sequence[float] = PAYLOAD_COM,
    payload_inertia: Sequence[Sequence[float]] | np.ndarray = PAYLOAD_INERTIA,
    max_amplitude: float = 0.6,
    velocity_scaling: float = 0.5,
    acceleration_scaling: float = 0.5,
    encoder_ticks: int = engine.ENCODER_TICKS,
    joint_velocity_noise: float = 1e-3,
    torque_noise: float = 0.1,
    torque_offset: float = 0.3,
    torque_side: str = "motor",
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the UR5 carrying the payload through the excitation on MuJoCo and record it.

    Args:
        seed: seeds the excitation and all sensor noise.
        robot_seed: seeds the robot's draw (the torque offsets) on its own generator, default
            ``seed``: recordings of different ``seed`` (other motion and noise, e.g. held-out
            data) and one ``robot_seed`` share one robot.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        duration: recorded time (s).
        payload_mass, payload_com, payload_inertia: the payload's mass (kg), centre of mass
            ``[3]`` (m, ``tool0`` frame) and inertia ``[3, 3]`` (kg·m², about the centre of
            mass, ``tool0`` axes).
        max_amplitude: largest excursion of a joint from :data:`HOME` (rad).
        velocity_scaling, acceleration_scaling: fractions of the velocity and acceleration
            limits the desired motion may reach.
        encoder_ticks: encoder resolution (ticks per revolution).
        joint_velocity_noise, torque_noise: σ of the Gaussian sensor noise (rad/s, N·m).
        torque_offset: bound (N·m) of the torque-sensor offsets, drawn uniform per joint.
        torque_side: the side of the joint the torques are sensed on, ``motor`` (the applied
            torque, friction included) or ``link`` (without the joint's friction), as in
            :class:`dynid.sim.mujoco.engine.Sensors`.
        storage: bag storage format.

    Returns:
        The dataset (one trajectory, the 6 joints) and the truth mapping.

    Raises:
        SimulationError: a setting is out of range, ``mujoco`` is missing, or the run fails.
    """
    rng, robot_rng = arm.generators(seed, robot_seed)
    robot = ur5()
    urdf = engine.read_urdf(robot.urdf)
    motion = arm.excitation(
        rng, robot, urdf, duration, max_amplitude=max_amplitude,
        velocity_scaling=velocity_scaling, acceleration_scaling=acceleration_scaling,
    )  # fmt: skip
    inertial = engine.Inertial(float(payload_mass), np.asarray(payload_com, dtype=np.float64),
                               np.asarray(payload_inertia, dtype=np.float64))  # fmt: skip
    sensors = engine.Sensors(int(encoder_ticks), joint_velocity_noise, torque_noise,
                             arm.torque_offsets(robot_rng, len(JOINTS), torque_offset),
                             torque_side)  # fmt: skip
    recording = arm.run(robot, urdf, motion, sensors, rng,
                        payload=engine.Payload(PAYLOAD_LINK, inertial))  # fmt: skip
    traj = arm.trajectory(recording, robot, motion, SCENARIO)
    truth = arm.truth(
        SCENARIO, seed, robot_seed, robot, recording, motion, sensors,
        parameters=arm.body_parameters("payload", inertial),
        attachments={"payload": {"link": PAYLOAD_LINK, "mass": inertial.mass,
                                 "com": inertial.com, "inertia": inertial.inertia}},
        settings={"duration": duration, "max_amplitude": max_amplitude,
                  "velocity_scaling": velocity_scaling,
                  "acceleration_scaling": acceleration_scaling},
    )  # fmt: skip
    return finish(Dataset([traj], {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
