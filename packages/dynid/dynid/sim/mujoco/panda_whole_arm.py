"""A whole Panda whose links and joint friction differ from its URDF, on MuJoCo (whole-arm
identification, the problem ``config/problems/panda_whole_arm.yaml``).

The Panda of example-robot-data (fingers locked) is compiled by MuJoCo with the inertials of
:data:`PERTURBED_LINKS` changed and friction on every joint, both drawn from the seed: each such
link's mass is scaled by a factor uniform in ``1 ± mass_scale``, its inertia about the centre of
mass by the same factor, and its centre of mass shifted by up to ``com_shift`` per axis; each
joint gets viscous damping uniform in ``damping_range`` and dry friction (MuJoCo's
``frictionloss``) uniform in ``coulomb_range``. Without a payload, the arm tracks the Fourier
excitation of :mod:`dynid.sim.mujoco.arm` under the joint impedance controller of
:mod:`dynid.sim.mujoco.engine`, which compensates gravity and Coriolis torques of the *URDF's*
Panda (the controller's model is the nominal one) and knows no friction. The bag holds the
topics of :mod:`dynid.sim.panda_payload`.

Truth, in the problem file's names: ``<link>/log_cholesky_0..9`` of the body each arm joint
carries (``panda_link7`` with hand and fingers merged, in the joint frame, as dynid builds it;
converted from the perturbed URDF by Pinocchio and :mod:`dynid.model.spatial` after the run),
the perturbed links' ``<link>/mass|com_*|i**``, and ``<joint>/damping``, ``<joint>/coulomb``
and ``<joint>/torque_offset``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element, tostring

import numpy as np
import pinocchio as pin
import torch

from dynid.data import Dataset, StorageFormat
from dynid.model.spatial import log_cholesky_from_dynamic_params
from dynid.sim.common import SimulationError, finish
from dynid.sim.mujoco import arm, engine
from dynid.sim.mujoco.panda_payload import FINGERS, panda
from dynid.sim.panda_box import ARM
from dynid.sim.panda_payload import LAYOUT

SCENARIO = "panda_whole_arm"
#: Links whose inertials are perturbed: none carries a fixed child, so each is one body.
PERTURBED_LINKS = ("panda_link2", "panda_link3", "panda_link4", "panda_link6")


def _range(name: str, value: Sequence[float]) -> tuple[float, float]:
    low, high = (float(v) for v in value)
    if not (np.isfinite(low) and np.isfinite(high) and 0.0 <= low <= high):
        raise SimulationError(f"setting {name!r} must be [low, high] with 0 ≤ low ≤ high")
    return low, high


def perturbed_inertials(
    rng: np.random.Generator, urdf: Element, mass_scale: float, com_shift: float
) -> dict[str, engine.Inertial]:
    """The inertials of :data:`PERTURBED_LINKS` drawn about the URDF's (see the module
    docstring)."""
    if not 0.0 <= mass_scale < 1.0:
        raise SimulationError(f"setting 'mass_scale' must be in [0, 1), got {mass_scale!r}")
    if not (np.isfinite(com_shift) and com_shift >= 0.0):
        raise SimulationError(f"setting 'com_shift' must be finite and ≥ 0, got {com_shift!r}")
    nominal = engine.urdf_inertials(urdf)
    out = {}
    for link in PERTURBED_LINKS:
        factor = rng.uniform(1.0 - mass_scale, 1.0 + mass_scale)
        shift = rng.uniform(-com_shift, com_shift, size=3)
        body = nominal[link]
        out[link] = engine.Inertial(body.mass * factor, body.com + shift, body.inertia * factor)
    return out


def log_cholesky_truth(urdf: Element) -> dict[str, float]:
    """``<link>/log_cholesky_0..9`` of the body of each arm joint of the Panda ``urdf`` (the
    link with its fixed children, fingers locked), in the joint frame."""
    full = pin.buildModelFromXML(tostring(urdf, encoding="unicode"))
    model = pin.buildReducedModel(full, [full.getJointId(j) for j in FINGERS], pin.neutral(full))
    out = {}
    for joint in ARM:
        jid = model.getJointId(joint)
        link = next(
            f.name for f in model.frames if f.parentJoint == jid and f.type == pin.FrameType.BODY
        )
        pi = torch.as_tensor(np.asarray(model.inertias[jid].toDynamicParameters()))
        theta = log_cholesky_from_dynamic_params(pi).numpy()
        out.update({f"{link}/log_cholesky_{k}": float(v) for k, v in enumerate(theta)})
    return out


@dataclass(frozen=True)
class PerturbedPanda:
    """One drawn robot of the scenario: the URDF's Panda with :data:`PERTURBED_LINKS`' inertials
    changed, friction on every arm joint and a torque-sensor offset per joint (N·m).

    Attributes:
        urdf: the URDF's XML as read (unperturbed; the controller's model).
        inertials: the perturbed links' inertials.
        friction: per arm joint, viscous damping (N·m·s/rad) and dry friction (N·m).
        torque_offset: ``[7]`` the torque sensors' offsets (N·m), in :data:`ARM` order.
    """

    urdf: Element
    inertials: dict[str, engine.Inertial]
    friction: dict[str, engine.JointFriction]
    torque_offset: np.ndarray

    def sensors(
        self,
        encoder_ticks: int,
        velocity_std: float,
        torque_std: float,
        torque_side: str = "motor",
    ) -> engine.Sensors:
        """The sensors of a recording of this robot: the encoder resolution (ticks per
        revolution), velocity and torque noise σ (rad/s, N·m), this robot's offsets and the
        torque sensors' side (:class:`dynid.sim.mujoco.engine.Sensors`)."""
        return engine.Sensors(
            encoder_ticks, velocity_std, torque_std, self.torque_offset, torque_side
        )

    def run(
        self, motion: arm.Excitation, sensors: engine.Sensors, rng: np.random.Generator
    ) -> engine.Recording:
        """Track ``motion`` on MuJoCo with this robot (:func:`dynid.sim.mujoco.arm.run`).

        Raises:
            SimulationError: the controller exceeded an effort limit, the run diverged or left
                the position limits.
        """
        return arm.run(panda(), self.urdf, motion, sensors, rng, inertials=self.inertials,
                       friction=self.friction)  # fmt: skip

    def parameters(self) -> dict[str, float]:
        """The truth in the problem file's names (module notes), the torque offsets excepted
        (:func:`dynid.sim.mujoco.arm.truth` appends them)."""
        perturbed = engine.prepared_urdf(self.urdf, inertials=self.inertials)
        out = log_cholesky_truth(perturbed)
        for link, inertial in self.inertials.items():
            out.update(arm.body_parameters(link, inertial))
        for name in ("damping", "coulomb"):
            out.update({f"{j}/{name}": float(getattr(f, name)) for j, f in self.friction.items()})
        return out


def perturbed_panda(
    robot_rng: np.random.Generator,
    urdf: Element,
    *,
    mass_scale: float = 0.2,
    com_shift: float = 0.02,
    damping_range: Sequence[float] = (0.05, 0.5),
    coulomb_range: Sequence[float] = (0.1, 0.6),
    torque_offset: float = 0.2,
) -> PerturbedPanda:
    """Draw the robot of :func:`simulate` from ``robot_rng`` (the settings are its own): the
    inertials, then each joint's damping, its dry friction, and the torque offsets.

    Raises:
        SimulationError: a setting is out of range.
    """
    inertials = perturbed_inertials(robot_rng, urdf, mass_scale, com_shift)
    damping = robot_rng.uniform(*_range("damping_range", damping_range), size=len(ARM))
    coulomb = robot_rng.uniform(*_range("coulomb_range", coulomb_range), size=len(ARM))
    friction = {
        j: engine.JointFriction(d, c) for j, d, c in zip(ARM, damping, coulomb, strict=True)
    }
    offsets = arm.torque_offsets(robot_rng, len(ARM), torque_offset)
    return PerturbedPanda(urdf, inertials, friction, offsets)


def simulate(
    seed: int,
    out_path: str | Path | None = None,
    *,
    robot_seed: int | None = None,
    duration: float = 10.0,
    mass_scale: float = 0.2,
    com_shift: float = 0.02,
    damping_range: Sequence[float] = (0.05, 0.5),
    coulomb_range: Sequence[float] = (0.1, 0.6),
    max_amplitude: float = 1.0,
    velocity_scaling: float = 0.5,
    acceleration_scaling: float = 0.5,
    encoder_ticks: int = engine.ENCODER_TICKS,
    joint_velocity_noise: float = 1e-3,
    torque_noise: float = 0.05,
    torque_offset: float = 0.2,
    torque_side: str = "motor",
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """Simulate the perturbed Panda through the excitation on MuJoCo and record it.

    Args:
        seed: seeds the excitation and all sensor noise.
        robot_seed: seeds the robot's draws (the perturbation, the friction, the torque
            offsets) on their own generator, default ``seed``: recordings of different ``seed``
            (other motion and noise, e.g. held-out data) and one ``robot_seed`` share one robot.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        duration: recorded time (s).
        mass_scale: largest relative change of a perturbed link's mass (and inertia).
        com_shift: largest shift (m) of a perturbed link's centre of mass per axis.
        damping_range, coulomb_range: ``[low, high]`` of each joint's viscous damping
            (N·m·s/rad) and dry friction (N·m).
        max_amplitude, velocity_scaling, acceleration_scaling: the excitation, as in
            :func:`dynid.sim.panda_payload.simulate`.
        encoder_ticks: encoder resolution (ticks per revolution).
        joint_velocity_noise, torque_noise: σ of the Gaussian sensor noise (rad/s, N·m).
        torque_offset: bound (N·m) of the torque-sensor offsets, drawn uniform per joint.
        torque_side: the side of the joint the torques are sensed on, ``motor`` (the applied
            torque, friction included) or ``link`` (without the joint's friction), as in
            :class:`dynid.sim.mujoco.engine.Sensors`.
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
        rng, robot, urdf, duration, max_amplitude=max_amplitude,
        velocity_scaling=velocity_scaling, acceleration_scaling=acceleration_scaling,
    )  # fmt: skip
    perturbed = perturbed_panda(
        robot_rng, urdf, mass_scale=mass_scale, com_shift=com_shift,
        damping_range=damping_range, coulomb_range=coulomb_range, torque_offset=torque_offset,
    )  # fmt: skip
    sensors = perturbed.sensors(int(encoder_ticks), joint_velocity_noise, torque_noise, torque_side)
    recording = perturbed.run(motion, sensors, rng)
    traj = arm.trajectory(recording, robot, motion, SCENARIO, "desired")
    parameters = perturbed.parameters()
    truth = arm.truth(
        SCENARIO, seed, robot_seed, robot, recording, motion, sensors, parameters=parameters,
        settings={"duration": duration, "mass_scale": mass_scale, "com_shift": com_shift,
                  "damping_range": list(damping_range), "coulomb_range": list(coulomb_range),
                  "max_amplitude": max_amplitude, "velocity_scaling": velocity_scaling,
                  "acceleration_scaling": acceleration_scaling},
    )  # fmt: skip
    return finish(Dataset([traj], {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
