"""The robot of a problem file: loaded, its attachments applied, and the sections that name its
parameters and joints checked against it, in dependency order (parameters, then the truth
about them, then the observed joints)."""

from __future__ import annotations

from dynid.model.errors import ModelError, UnknownJointError
from dynid.model.params import ParameterSpec
from dynid.model.robot import RobotModel, load_robot
from dynid.objective.impact import PlanarImpactSimulation
from dynid.objective.simulation import SoftBlockSimulation
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.schema import ProblemConfig, RobotSection

__all__ = ["build_robot", "build_spec"]

# the parameters each simulation model owns (not quantities of the robot)
_OWNED = {"soft_block": SoftBlockSimulation.names, "planar_impact": PlanarImpactSimulation.names}


def build_robot(config: ProblemConfig) -> RobotModel:
    """The robot of ``config`` with its attachments.

    Raises:
        ProblemFileError: unknown robot, joint or URDF element; an attachment that does not fit;
            a parameter the robot does not have (except those the simulation model owns: the soft
            block's ``block/mu`` and ``block/lambda``, the planar impact's ``dice/friction`` and
            ``dice/restitution``); bounds the robot rejects; truth about
            names that are not parameters; observed joints the robot does not have.
    """
    robot = _load(config.robot, config.origin)
    for k, attachment in enumerate(config.attachments):
        try:
            robot = attachment.attach(robot, **attachment.arguments)
        except (TypeError, ValueError, ModelError) as exc:
            key = f"attachments[{k}] ({attachment.type})"
            raise ProblemFileError.at(config.origin, key, exc) from None
    _check_parameters(config, robot)
    unknown = sorted(set(config.truth or ()) - set(build_spec(config, robot).names))
    if unknown:
        raise ProblemFileError.at(
            config.origin, "truth", f"names {unknown} are not among the parameters"
        )
    joints = config.observe.joints
    if isinstance(joints, tuple):
        unknown = [j for j in joints if j not in robot.joint_names]
        if unknown:
            raise ProblemFileError.at(
                config.origin,
                "observe.joints",
                f"{unknown} are not movable joints of robot {robot.name!r} "
                f"(has {robot.joint_names})",
            )
    return robot


def build_spec(config: ProblemConfig, robot: RobotModel) -> ParameterSpec:
    """The free parameters of ``config`` on ``robot``: the entries of ``parameters``, then its
    groups expanded (:class:`dynid.model.params.InertialGroup`, ``JointGroup``).

    Raises:
        ProblemFileError: a group that does not fit the robot, or a name given twice.
    """
    if not config.parameter_groups:
        return config.parameters
    parameters = list(config.parameters.parameters)
    for group in config.parameter_groups:
        try:
            parameters += group.parameters(robot)
        except ModelError as exc:
            raise ProblemFileError.at(config.origin, "parameters", exc) from None
    try:
        spec = ParameterSpec(parameters)
        spec.apply(robot, spec.nominal_theta(robot).unsqueeze(0))
    except ModelError as exc:
        raise ProblemFileError.at(config.origin, "parameters", exc) from None
    return spec


def _load(section: RobotSection, origin: str) -> RobotModel:
    kwargs: dict[str, object] = {}
    if section.locked_joints:
        kwargs["locked_joints"] = dict(section.locked_joints)
    if section.gravity is not None:
        kwargs["gravity"] = section.gravity
    try:
        if section.name is not None:
            return load_robot(section.name, **kwargs)
        assert section.urdf is not None
        return RobotModel.from_urdf(section.urdf, **kwargs)
    except UnknownJointError as exc:
        raise ProblemFileError.at(origin, "robot.locked_joints", exc) from None
    except ModelError as exc:
        key = "robot.name" if section.name is not None else "robot.urdf"
        raise ProblemFileError.at(origin, key, exc) from None


def _check_parameters(config: ProblemConfig, robot: RobotModel) -> None:
    """Every parameter names a quantity of ``robot`` (or of the simulation model), and the robot
    accepts the lower bounds."""
    owned = _OWNED.get(config.simulation.model, ())
    spec = config.parameters
    for k, parameter in enumerate(spec.parameters):
        if parameter.name in owned:
            continue
        try:
            ParameterSpec([parameter]).nominal_theta(robot)
        except ModelError:
            prefixes = sorted({*robot.body_names, *robot.joint_names, *robot.resolvers, "gravity"})
            raise ProblemFileError.at(
                config.origin,
                f"parameters[{k}].name",
                f"{parameter.name!r} is not a parameter of robot {robot.name!r} "
                f"(prefixes: {prefixes})",
            ) from None
    robot_spec = ParameterSpec([p for p in spec.parameters if p.name not in owned])
    try:
        if robot_spec.dim:
            robot_spec.apply(robot, robot_spec.lower.unsqueeze(0))
    except ModelError as exc:
        raise ProblemFileError.at(config.origin, "parameters", exc) from None
