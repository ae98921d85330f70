"""The models a problem file's sections describe, built on its robot: what is observed, how the
recorded inputs drive the robot, and which simulation runs."""

from __future__ import annotations

from collections.abc import Sequence

from dynid.model.errors import ModelError
from dynid.model.integrate import (
    ControlModel,
    CurrentControl,
    PDControl,
    PrescribedMotion,
    TorqueControl,
    Unactuated,
)
from dynid.model.observe import (
    FramePoseObservation,
    JointObservation,
    Observation,
    ObservationModel,
)
from dynid.model.robot import RobotModel
from dynid.model.soft_block import GripperSqueeze, TetMesh
from dynid.objective.impact import PlanarImpactSimulation
from dynid.objective.simulation import RigidSimulation, Simulator, SoftBlockSimulation
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.schema import ControlSection, ObserveSection, SimulationSection

__all__ = ["control_model", "observation_model", "simulator"]


def observation_model(section: ObserveSection, robot: RobotModel, origin: str) -> Observation:
    """The ``observe`` section as one observation model.

    Raises:
        ProblemFileError: ``observe``: an unknown frame, or nothing observed.
    """
    parts: list[ObservationModel] = []
    try:
        if section.joints != "none":
            selected = None if section.joints == "all" else list(section.joints)
            parts.append(JointObservation(robot, selected, velocities=section.velocities))
        for entry in section.frame_points:
            robot.frame_id(entry.frame)
            parts.append(entry.observation())
        for frame in section.frame_poses:
            robot.frame_id(frame)
        if section.frame_poses:
            parts.append(FramePoseObservation(section.frame_poses))
    except ModelError as exc:
        raise ProblemFileError.at(origin, "observe", exc) from None
    if not parts:
        raise ProblemFileError.at(
            origin, "observe", "nothing is observed (joints: none and no frames)"
        )
    return Observation(parts)


def control_model(
    section: ControlSection, robot: RobotModel, origin: str
) -> tuple[ControlModel, list[str]]:
    """``(control model, control_names)`` of the ``control`` section.

    Raises:
        ProblemFileError: ``control.actuated`` names a joint the robot does not have, the gains
            do not fit, or ``control.inputs`` has the wrong number of channels.
    """
    kind = section.type
    if kind == "none":
        return Unactuated(), []
    actuated = None
    if section.actuated is not None:
        unknown = [j for j in section.actuated if j not in robot.joint_names]
        if unknown:
            raise ProblemFileError.at(
                origin,
                "control.actuated",
                f"joints {unknown} are not movable joints of robot {robot.name!r} "
                f"(has {robot.joint_names})",
            )
        actuated = [robot.joint_index(j) for j in section.actuated]
    inputs = None if section.inputs is None else list(section.inputs)
    try:
        if kind == "torque":
            model: ControlModel = TorqueControl(actuated)
            names = ["effort"] if inputs is None else inputs
        elif kind == "current":
            model = CurrentControl(section.torque_constant, actuated)
            names = inputs or []
        elif kind == "prescribed":
            model = PrescribedMotion(actuated or [])
            names = _prescribed_inputs(section.actuated or (), inputs)
        else:
            model = PDControl(section.kp, section.kd, actuated)
            names = inputs or []
        nu = model.input_size(robot.nv)
    except ModelError as exc:
        raise ProblemFileError.at(origin, "control", exc) from None
    if names != ["effort"] and len(names) != nu:
        raise ProblemFileError.at(
            origin, "control.inputs", f"{len(names)} channels given, the {kind} control needs {nu}"
        )
    return model, names


def _prescribed_inputs(actuated: Sequence[str], inputs: list[str] | None) -> list[str]:
    """Input channels of a prescribed control: ``inputs``, or by default the actuated joints'
    recorded positions, velocities and (differenced) accelerations, block by block."""
    if inputs is not None:
        return inputs
    return [f"{j}/{kind}" for kind in ("position", "velocity", "acceleration") for j in actuated]


def simulator(section: SimulationSection, robot: RobotModel, origin: str, dt: float) -> Simulator:
    """The ``simulation.model``: the rigid robot, the soft block squeezed by a gripper, or the
    planar square dropped on the ground (stepped at the data's ``dt``, s).

    Raises:
        ProblemFileError: ``simulation.soft_block``: an unknown joint or a block that cannot be
            meshed or squeezed; ``simulation.model`` planar_impact on a robot that is not a
            planar square with joints ``x, z, theta``.
    """
    if section.model == "planar_impact":
        try:
            return PlanarImpactSimulation.for_robot(robot, dt)
        except (ModelError, ValueError) as exc:
            raise ProblemFileError.at(origin, "simulation.model", exc) from None
    block = section.soft_block
    if block is None:
        return RigidSimulation()
    try:
        squeeze = GripperSqueeze(
            mesh=TetMesh.box(block.size, block.cells),
            joint=robot.joint_index(block.joint),
            **block.squeeze,
        )
    except (ModelError, ValueError, TypeError) as exc:
        raise ProblemFileError.at(origin, "simulation.soft_block", exc) from None
    return SoftBlockSimulation(squeeze)
