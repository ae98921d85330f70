"""Problem files parsed: the YAML read, and every key and type checked in one pass into the typed
sections of :mod:`dynid.problem_file.schema`."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dynid import plugins
from dynid.data.pipeline import (
    DEFAULT_MAX_SKIPPED_PERCENT,
    FramePoints,
    PassiveJoints,
    Preprocessing,
)
from dynid.estimators.registry import (
    EstimatorDefaults,
    EstimatorError,
    UnknownEstimatorError,
    resolve_estimator,
)
from dynid.model.errors import ModelError
from dynid.model.observe import AXIS_POINTS
from dynid.model.params import InertialGroup, JointGroup, Parameter, ParameterSpec
from dynid.model.soft_block import Material
from dynid.objective.impact import PlanarImpactSimulation
from dynid.objective.simulation import SoftBlockSimulation
from dynid.problem import LikelihoodSettings
from dynid.problem_file.errors import ProblemFileError, one_line
from dynid.problem_file.schema import (
    AttachmentSection,
    ControlSection,
    DataSection,
    ExcitationSection,
    Gains,
    ObserveSection,
    ProblemConfig,
    RobotSection,
    SimulationSection,
    SoftBlockSection,
    ValidationSection,
    file_origin,
)
from dynid.problem_file.sources import BagSource, DataSource, SourceSection
from dynid.problem_file.values import as_int, as_ints, check_arguments, hashable
from dynid.resources import shared_data_dir

__all__ = ["SHARED_PREFIX", "check_estimator", "parse_problem", "read_yaml", "resolve_path"]

_TOP_KEYS = {
    "name",
    "description",
    "robot",
    "attachments",
    "parameters",
    "truth",
    "data",
    "control",
    "observe",
    "likelihood",
    "simulation",
    "estimator",
    "validation",
    "excitation",
}
_ROBOT_KEYS = {"name", "urdf", "locked_joints", "gravity", "limits"}
_LIMIT_KINDS = {"acceleration", "jerk", "velocity", "effort"}
_EXCITATION_KEYS = {
    "position_margin", "effort_fraction", "min_distance", "table_z", "boxes", "workspace",
    "sensor_noise",
}  # fmt: skip
_WORKSPACE_KEYS = {"frame", "lower", "upper"}
_SENSOR_NOISE_KEYS = {"position", "velocity", "effort"}
_PREPROCESS_KEYS = {
    "window",
    "lowpass_hz",
    "passive_joints",
    "velocities",
    "dt",
    "split",
    "trajectories",
}
_PASSIVE_KEYS = {"joints", "frame", "body"}
_VELOCITY_METHODS = ("measured", "central", "backward", "forward")
_CONTROL_KEYS: dict[str, set[str]] = {
    "torque": {"type", "actuated", "inputs"},
    "current": {"type", "actuated", "inputs", "torque_constant"},
    "pd": {"type", "actuated", "inputs", "kp", "kd"},
    "prescribed": {"type", "actuated", "inputs"},
    "none": {"type"},
}
_OBSERVE_KEYS = {"joints", "velocities", "frame_points", "frame_poses"}
_FRAME_POINT_KEYS = {"frame", "body", "points", "point_names"}
_SIMULATION_KEYS = {"substeps", "backend", "device", "model", "soft_block"}
_SIMULATION_MODELS = ("rigid", "soft_block", "planar_impact")
_ESTIMATOR_KEYS = {"name", "settings"}
_GROUP_KEYS = {
    "inertials": {"group", "links", "log_std", "length_std", "width"},
    "joints": {"group", "joints", "fields"},
}
_VALIDATION_KEYS = {"bags", "fraction", "data"}
SHARED_PREFIX = "shared:"
"""A data path starting with this is relative to :func:`dynid.resources.shared_data_dir`."""


def read_yaml(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], Path | None]:
    """``(mapping, path)`` of a problem file (``path`` is ``None`` for a mapping).

    Raises:
        ProblemFileError: missing or unreadable file, invalid YAML, not a mapping.
    """
    if isinstance(source, Mapping):
        return dict(source), None
    path = Path(source)
    if path.is_dir():
        raise ProblemFileError(f"problem file {path} is a directory, not a YAML file")
    if not path.is_file():
        raise ProblemFileError(f"problem file {path} does not exist")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemFileError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProblemFileError(f"{path}: invalid YAML: {one_line(exc)}") from None
    if not isinstance(config, Mapping):
        raise ProblemFileError(f"{path}: expected a mapping of sections at the top level")
    return dict(config), path


def resolve_path(value: str | Path, base: Path | None) -> Path:
    """``value`` as a path; a relative one is taken relative to ``base`` (when given), one
    starting with ``shared:`` relative to the shared recordings (kept as given when they are not
    found, so that reading it names the setting to fix)."""
    text = str(value)
    if text.startswith(SHARED_PREFIX):
        try:
            return shared_data_dir() / text[len(SHARED_PREFIX) :]
        except FileNotFoundError:
            return Path(text)
    path = Path(value).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return path


def parse_problem(config: Mapping[str, Any], path: Path | None = None) -> ProblemConfig:
    """The typed sections of a problem file's mapping, every key and type checked.

    Args:
        config: the parsed YAML mapping.
        path: the file it was read from (for messages and relative paths), or ``None``.

    Raises:
        ProblemFileError: unknown or missing keys, values of the wrong type, unknown attachment,
            scenario or estimator, reversed bounds (one line naming the file and the key).
    """
    name = str(config.get("name") or (path.stem if path is not None else "problem"))
    return _Parser(name, path).problem(config)


def check_estimator(name: str, settings: Mapping[str, Any], where: str) -> None:
    """Raise :class:`ProblemFileError` unless estimator ``name`` resolves with ``settings`` (over
    its own defaults; :func:`dynid.estimators.registry.resolve_estimator`).

    Args:
        name: estimator name.
        settings: its constructor keyword arguments.
        where: prefix of the error message (file and key).
    """
    try:
        resolve_estimator(name, EstimatorDefaults(name, dict(settings)))
    except UnknownEstimatorError as exc:
        raise ProblemFileError(f"{where}.name: {one_line(exc)}") from None
    except EstimatorError as exc:
        raise ProblemFileError(f"{where}.settings: {one_line(exc)}") from None


class _Parser:
    """Parses the sections of one file; every error names ``origin`` and the key."""

    def __init__(self, name: str, path: Path | None) -> None:
        self.name = name
        self.path = path
        self.origin = file_origin(path, name)
        self.base = path.parent if path is not None else None

    # ------------------------------------------------------------------------ typed values
    def error(self, key: str, message: object) -> ProblemFileError:
        return ProblemFileError.at(self.origin, key, message)

    def mapping(self, value: Any, key: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {type(value).__name__}")
        return dict(value)

    def keys(self, section: Mapping[str, Any], allowed: set[str], key: str) -> None:
        unknown = sorted(set(section) - allowed)
        if unknown:
            raise self.error(key, f"unknown keys {unknown}; allowed: {sorted(allowed)}")

    def convert(self, function: Callable[[Any], Any], value: Any, key: str, expected: str) -> Any:
        try:
            return function(value)
        except (TypeError, ValueError):
            raise self.error(key, f"expected {expected}, got {value!r}") from None

    def strings(self, value: Any, key: str, what: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of {what}")
        return tuple(str(x) for x in value)

    def gains(self, value: Any, key: str) -> Gains | None:
        if value is None:
            return None
        if isinstance(value, list):
            return self.convert(_floats, value, key, "a number or a list of numbers")
        return self.convert(float, value, key, "a number or a list of numbers")

    def percent(self, value: Any, key: str) -> float:
        if value is None:
            return DEFAULT_MAX_SKIPPED_PERCENT
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
            raise self.error(key, f"expected a percentage in [0, 100], got {value!r}")
        return float(value)

    def positive(self, value: Any, key: str) -> float | None:
        if value is not None and not (isinstance(value, int | float) and value > 0):
            raise self.error(key, f"expected a positive number, got {value!r}")
        return None if value is None else float(value)

    # ---------------------------------------------------------------------------- sections
    def problem(self, config: Mapping[str, Any]) -> ProblemConfig:
        self.keys(config, _TOP_KEYS, "top level")
        for required in ("robot", "parameters", "data"):
            if required not in config:
                raise self.error(required, "section is missing")
        robot = self.robot(self.mapping(config["robot"], "robot"))
        attachments = self.attachments(config.get("attachments"))
        parameters, groups = self.parameters(config["parameters"])
        truth = self.truth(config.get("truth"))
        data_mapping = self.mapping(config["data"], "data")
        data = self.data(data_mapping)
        control = self.control(self.mapping(config.get("control"), "control"))
        observe = self.observe(self.mapping(config.get("observe"), "observe"))
        likelihood = self.likelihood(self.mapping(config.get("likelihood"), "likelihood"))
        simulation = self.simulation(
            self.mapping(config.get("simulation"), "simulation"), parameters
        )
        estimator = self.estimator(self.mapping(config.get("estimator"), "estimator"))
        validation = None
        if "validation" in config:
            section = self.mapping(config["validation"], "validation")
            validation = self.validation(section, data_mapping, data)
        excitation = self.excitation(self.mapping(config.get("excitation"), "excitation"))
        return ProblemConfig(
            path=self.path,
            name=self.name,
            description=str(config.get("description") or ""),
            robot=robot,
            attachments=attachments,
            parameters=parameters,
            truth=truth,
            data=data,
            control=control,
            observe=observe,
            likelihood=likelihood,
            simulation=simulation,
            estimator=estimator,
            parameter_groups=groups,
            validation=validation,
            excitation=excitation,
        )

    def robot(self, section: dict[str, Any]) -> RobotSection:
        self.keys(section, _ROBOT_KEYS, "robot")
        if ("name" in section) == ("urdf" in section):
            raise self.error("robot", "give exactly one of 'name' and 'urdf'")
        locked = self.mapping(section.get("locked_joints"), "robot.locked_joints")
        gravity = None
        if "gravity" in section:
            values = _number_list(section["gravity"])
            if len(values) != 3 or not np.isfinite(values).all():
                raise self.error("robot.gravity", "expected 3 finite numbers (m/s²)")
            gravity = values
        urdf = None
        if "urdf" in section:
            urdf = resolve_path(str(section["urdf"]), self.base)
            if urdf.is_dir():
                raise self.error("robot.urdf", f"{urdf} is a directory, not a URDF file")
            if not urdf.is_file():
                raise self.error("robot.urdf", f"URDF file {urdf} does not exist")
        return RobotSection(
            name=str(section["name"]) if "name" in section else None,
            urdf=urdf,
            locked_joints={
                str(k): self.convert(float, v, f"robot.locked_joints.{k}", "a number")
                for k, v in locked.items()
            },
            gravity=gravity,
            limits=self.limits(self.mapping(section.get("limits"), "robot.limits")),
        )

    def limits(self, section: dict[str, Any]) -> dict[str, tuple[float, ...]]:
        self.keys(section, _LIMIT_KINDS, "robot.limits")
        out = {}
        for kind, value in section.items():
            values = _number_list(value if isinstance(value, list) else [value])
            if not values or not all(math.isfinite(x) and x > 0 for x in values):
                raise self.error(
                    f"robot.limits.{kind}", "expected one positive number or one per joint"
                )
            out[str(kind)] = values
        return out

    def excitation(self, section: dict[str, Any]) -> ExcitationSection:
        self.keys(section, _EXCITATION_KEYS, "excitation")
        margin = section.get("position_margin", 0.05)
        if isinstance(margin, bool) or not isinstance(margin, int | float) or margin < 0:
            raise self.error("excitation.position_margin", f"expected ≥ 0 (rad), got {margin!r}")
        min_distance = self.positive(section.get("min_distance", 0.01), "excitation.min_distance")
        fraction = section.get("effort_fraction", 0.8)
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0 < fraction <= 1
        ):
            raise self.error(
                "excitation.effort_fraction", f"expected a number in (0, 1], got {fraction!r}"
            )
        table_z = section.get("table_z")
        if table_z is not None and (
            isinstance(table_z, bool) or not isinstance(table_z, int | float)
        ):
            raise self.error("excitation.table_z", f"expected a height in m, got {table_z!r}")
        boxes = []
        for k, box in enumerate(section.get("boxes") or []):
            key = f"excitation.boxes[{k}]"
            box = self.mapping(box, key)
            self.keys(box, {"center", "size"}, key)
            centre, size = _number_list(box.get("center")), _number_list(box.get("size"))
            if len(centre) != 3 or len(size) != 3 or min(size) <= 0:
                raise self.error(key, "expected center: [x, y, z] and size: [sx, sy, sz] > 0 (m)")
            boxes.append((centre, size))
        frame = lower = upper = None
        if "workspace" in section:
            ws = self.mapping(section["workspace"], "excitation.workspace")
            self.keys(ws, _WORKSPACE_KEYS, "excitation.workspace")
            lower, upper = _number_list(ws.get("lower")), _number_list(ws.get("upper"))
            if "frame" not in ws or len(lower) != 3 or len(upper) != 3:
                raise self.error(
                    "excitation.workspace", "expected frame, lower: [x, y, z], upper: [x, y, z]"
                )
            if not all(lo < hi for lo, hi in zip(lower, upper, strict=True)):
                raise self.error("excitation.workspace", "lower must be below upper")
            frame = str(ws["frame"])
        noise = None
        if "sensor_noise" in section:
            key = "excitation.sensor_noise"
            given = self.mapping(section["sensor_noise"], key)
            self.keys(given, _SENSOR_NOISE_KEYS, key)
            noise = {}
            for name in sorted(_SENSOR_NOISE_KEYS):
                value = given.get(name)
                if value is None and name != "velocity":
                    raise self.error(f"{key}.{name}", "is missing (a standard deviation ≥ 0)")
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int | float) or value < 0
                ):
                    raise self.error(f"{key}.{name}", f"expected a number ≥ 0, got {value!r}")
                noise[name] = None if value is None else float(value)
        return ExcitationSection(
            position_margin=float(margin),
            effort_fraction=float(fraction),
            min_distance=float(min_distance or 0.01),
            table_z=None if table_z is None else float(table_z),
            boxes=tuple(boxes),
            workspace_frame=frame,
            workspace_lower=lower,
            workspace_upper=upper,
            sensor_noise=noise,
        )

    def attachments(self, entries: Any) -> tuple[AttachmentSection, ...]:
        if entries is None:
            return ()
        if not isinstance(entries, list):
            raise self.error("attachments", "expected a list")
        sections = []
        for k, entry in enumerate(entries):
            key = f"attachments[{k}]"
            arguments = self.mapping(entry, key)
            kind = arguments.pop("type", None)
            try:
                function = plugins.ATTACHMENTS.load(kind)
            except plugins.PluginError as exc:
                raise self.error(f"{key}.type", exc) from None
            if not callable(function):
                raise self.error(
                    f"{key}.type", f"attachment {kind!r} is {function!r}, not a function"
                )
            allowed = set(list(inspect.signature(function).parameters)[1:])
            self.keys(arguments, allowed, f"{key} ({kind})")
            arguments, name, problem = check_arguments(function, arguments)
            if name is not None:
                raise self.error(f"{key}.{name}", f"{kind}: {problem}")
            sections.append(AttachmentSection(kind, function, arguments))
        return tuple(sections)

    def parameters(
        self, entries: Any
    ) -> tuple[ParameterSpec, tuple[InertialGroup | JointGroup, ...]]:
        if not isinstance(entries, list) or not entries:
            raise self.error("parameters", "expected a non-empty list of parameters")
        plain = [e for e in entries if not (isinstance(e, Mapping) and "group" in e)]
        groups = tuple(
            self.group(k, e)
            for k, e in enumerate(entries)
            if isinstance(e, Mapping) and "group" in e
        )
        if not plain:
            return ParameterSpec([]), groups
        for k, entry in enumerate(entries):
            if isinstance(entry, Mapping) and "group" not in entry:
                self.fields(Parameter, entry, f"parameters[{k}]")
        try:
            return ParameterSpec.from_yaml({"parameters": plain}), groups
        except ModelError as exc:
            raise self.error("parameters", one_line(exc).removeprefix("mapping: ")) from None

    def group(self, k: int, entry: Mapping[str, Any]) -> InertialGroup | JointGroup:
        key = f"parameters[{k}]"
        kind = entry.get("group")
        if not hashable(kind) or kind not in _GROUP_KEYS:
            raise self.error(f"{key}.group", f"{kind!r} is not one of {sorted(_GROUP_KEYS)}")
        self.keys(dict(entry), _GROUP_KEYS[kind], f"{key} ({kind})")
        names_key = "links" if kind == "inertials" else "joints"
        names = entry.get(names_key, "all")
        if names == "all":
            names = None
        elif isinstance(names, list):
            names = self.strings(names, f"{key}.{names_key}", names_key)
        else:
            raise self.error(f"{key}.{names_key}", f"expected all or a list of {names_key}")
        try:
            if kind == "inertials":
                numbers = {
                    field: self.convert(float, entry[field], f"{key}.{field}", "a number")
                    for field in ("log_std", "length_std", "width")
                    if field in entry
                }
                return InertialGroup(links=names, **numbers)
            fields_ = self.mapping(entry.get("fields"), f"{key}.fields")
            if not fields_:
                raise self.error(f"{key}.fields", "expected a mapping of field: {lower, upper}")
            entries = {
                str(field): self.mapping(value, f"{key}.fields.{field}")
                for field, value in fields_.items()
            }
            return JointGroup(fields=entries, joints=names)
        except ModelError as exc:
            raise self.error(key, exc) from None

    def truth(self, section: Any) -> dict[str, float] | None:
        if section is None:
            return None
        truth = self.mapping(section, "truth")
        values = {
            str(k): self.convert(float, v, f"truth.{k}", "a number") for k, v in truth.items()
        }
        bad = [k for k, v in values.items() if not math.isfinite(v)]
        if bad:
            raise self.error("truth", f"values of {bad} are not finite")
        return values

    def data(self, data: dict[str, Any]) -> DataSection:
        source = self.source_class(data.get("source", "bag"), "data.source")
        self.keys(data, {"source", *source.keys, *_PREPROCESS_KEYS}, "data")
        return DataSection(self.source(source, data), self.preprocessing(data))

    def source_class(self, kind: Any, key: str) -> type[DataSource]:
        """The data source registered as ``kind`` (group ``dynid.data_sources``)."""
        try:
            cls = plugins.DATA_SOURCES.load(kind)
        except plugins.PluginError as exc:
            raise self.error(key, exc) from None
        if not (isinstance(cls, type) and issubclass(cls, DataSource)):
            raise self.error(key, f"data source {kind!r} is {cls!r}, not a DataSource subclass")
        return cls

    def source(
        self, cls: type[DataSource], data: dict[str, Any], section: str = "data"
    ) -> DataSource:
        """The source of kind ``cls`` described by ``data``; errors name ``<section>.<key>``."""
        values = {k: v for k, v in data.items() if k in cls.keys}
        return cls.from_section(SourceSection(values, section, self))

    def resolve(self, value: Any) -> Path:
        """A path of the file: relative to its folder, ``shared:`` (:func:`resolve_path`)."""
        return resolve_path(str(value), self.base)

    def fields(self, cls: Any, entry: Mapping[str, Any], key: str) -> dict[str, Any]:
        """``entry`` checked against the constructor of ``cls`` (a dataclass): known keys, the
        required ones present, values of the annotated types."""
        allowed = set(inspect.signature(cls).parameters)
        self.keys(entry, allowed, key)
        checked, name, problem = check_arguments(cls, entry, skip=0)
        if name is not None:
            raise self.error(f"{key}.{name}", problem)
        return checked

    def validation(
        self, section: dict[str, Any], data_mapping: dict[str, Any], data: DataSection
    ) -> ValidationSection:
        self.keys(section, _VALIDATION_KEYS, "validation")
        given = [key for key in ("bags", "fraction", "data") if key in section]
        if len(given) > 1:
            raise self.error("validation", f"give one of bags, fraction or data, not {given}")
        bags = section.get("bags") or []
        if not isinstance(bags, list):
            raise self.error("validation.bags", "expected a list of recordings")
        if bags and not isinstance(data.source, BagSource):
            raise self.error("validation.bags", "held-out bags need data.source bag")
        if "data" in section:
            cls = type(data.source)
            if isinstance(data.source, BagSource):
                raise self.error("validation.data", "held-out recordings of a bag source: bags")
            override = self.mapping(section["data"], "validation.data")
            self.keys(override, set(cls.keys), "validation.data")
            source = self.source(cls, {**data_mapping, **override}, "validation.data")
            return ValidationSection(fraction=None, source=source)
        fraction = None
        if not bags:
            fraction = self.convert(float, section.get("fraction", 0.2), "validation.fraction",
                                    "a number")  # fmt: skip
            if not 0.0 < fraction < 1.0:
                raise self.error("validation.fraction", f"must lie in (0, 1), got {fraction}")
        return ValidationSection(
            bags=tuple(resolve_path(str(b), self.base) for b in bags), fraction=fraction
        )

    def preprocessing(self, data: dict[str, Any]) -> Preprocessing:
        velocities = data.get("velocities", "measured")
        if velocities not in _VELOCITY_METHODS:
            raise self.error(
                "data.velocities", f"{velocities!r} is not one of {list(_VELOCITY_METHODS)}"
            )
        passive = None
        if data.get("passive_joints") is not None:
            section = self.mapping(data["passive_joints"], "data.passive_joints")
            self.keys(section, _PASSIVE_KEYS, "data.passive_joints")
            if not isinstance(section.get("joints"), list) or "frame" not in section:
                raise self.error("data.passive_joints", "needs 'joints' (a list) and 'frame'")
            frame = str(section["frame"])
            joints = tuple(str(j) for j in section["joints"])
            passive = PassiveJoints(joints, frame, str(section.get("body", frame)))
        window = None
        if data.get("window") is not None:
            window = _number_list(data["window"])
            if len(window) != 2 or not window[0] < window[1]:
                raise self.error("data.window", "expected [t0, t1] with t0 < t1 (s)")
        selected = data.get("trajectories")
        if selected is not None:
            selected = self.convert(as_ints, selected, "data.trajectories", "a list of indices")
        return Preprocessing(
            window=window,
            lowpass_hz=self.positive(data.get("lowpass_hz"), "data.lowpass_hz"),
            passive_joints=passive,
            velocities=velocities,
            dt=self.positive(data.get("dt"), "data.dt"),
            split=self.positive(data.get("split"), "data.split"),
            trajectories=selected,
        )

    def control(self, control: dict[str, Any]) -> ControlSection:
        kind = control.get("type", "torque")
        if not hashable(kind) or kind not in _CONTROL_KEYS:
            raise self.error("control.type", f"{kind!r} is not one of {sorted(_CONTROL_KEYS)}")
        self.keys(control, _CONTROL_KEYS[kind], f"control ({kind})")
        if kind == "pd" and not {"kp", "kd"} <= set(control):
            raise self.error("control", "a pd control needs 'kp' and 'kd'")
        if kind == "prescribed" and not isinstance(control.get("actuated"), list):
            raise self.error(
                "control.actuated",
                "a prescribed control needs the list of joints that follow the recording (the "
                "others are simulated)",
            )
        if kind in ("pd", "current") and not isinstance(control.get("inputs"), list):
            raise self.error(
                "control.inputs", f"a {kind} control needs the list of its input channels"
            )
        actuated, inputs = control.get("actuated"), control.get("inputs")
        return ControlSection(
            type=kind,
            actuated=None
            if actuated is None
            else self.strings(actuated, "control.actuated", "joints"),
            inputs=None if inputs is None else self.strings(inputs, "control.inputs", "channels"),
            kp=self.gains(control.get("kp"), "control.kp"),
            kd=self.gains(control.get("kd"), "control.kd"),
            torque_constant=self.gains(control.get("torque_constant"), "control.torque_constant"),
        )

    def observe(self, observe: dict[str, Any]) -> ObserveSection:
        self.keys(observe, _OBSERVE_KEYS, "observe")
        joints = observe.get("joints", "all")
        if isinstance(joints, list):
            joints = tuple(str(j) for j in joints)
        elif joints not in ("all", "none"):
            raise self.error("observe.joints", "expected all, none or a list of joints")
        entries = observe.get("frame_points") or []
        if not isinstance(entries, list):
            raise self.error("observe.frame_points", "expected a list")
        poses = observe.get("frame_poses") or []
        return ObserveSection(
            joints=joints,
            velocities=bool(observe.get("velocities", False)),
            frame_points=tuple(self.frame_points(k, entry) for k, entry in enumerate(entries)),
            frame_poses=self.strings(poses, "observe.frame_poses", "frames"),
        )

    def frame_points(self, k: int, entry: Any) -> FramePoints:
        key = f"observe.frame_points[{k}]"
        entry = self.mapping(entry, key)
        self.keys(entry, _FRAME_POINT_KEYS, key)
        if "frame" not in entry:
            raise self.error(key, "'frame' is required")
        frame = str(entry["frame"])
        points = entry.get("points", AXIS_POINTS)
        names = entry.get("point_names")
        return FramePoints(
            frame=frame,
            body=str(entry.get("body", frame)),
            points=self.convert(_points, points, f"{key}.points", "a list of [x, y, z] (m)"),
            point_names=None
            if names is None
            else self.strings(names, f"{key}.point_names", "names"),
        )

    def likelihood(self, section: dict[str, Any]) -> LikelihoodSettings:
        self.keys(section, {f.name for f in fields(LikelihoodSettings)}, "likelihood")
        for key in ("obs_std", "torque_std", "process_std"):
            if isinstance(section.get(key), list):
                section[key] = self.convert(_floats, section[key], f"likelihood.{key}", "numbers")
        section = self.fields(LikelihoodSettings, section, "likelihood")
        try:
            return LikelihoodSettings(**section)
        except (TypeError, ValueError) as exc:
            raise self.error("likelihood", exc) from None

    def simulation(self, sim: dict[str, Any], spec: ParameterSpec) -> SimulationSection:
        self.keys(sim, _SIMULATION_KEYS, "simulation")
        model = sim.get("model", "rigid")
        if model not in _SIMULATION_MODELS:
            raise self.error(
                "simulation.model", f"expected one of {_SIMULATION_MODELS}, got {model!r}"
            )
        backend = sim.get("backend", "torch")
        if backend not in ("torch", "pinocchio"):
            raise self.error("simulation.backend", "expected torch or pinocchio")
        if model != "soft_block" and "soft_block" in sim:
            raise self.error("simulation.soft_block", "needs simulation.model: soft_block")
        if model == "planar_impact":
            self.owned_parameters(PlanarImpactSimulation.names, spec, "planar_impact")
            others = [n for n in spec.names if n not in PlanarImpactSimulation.names]
            if others:
                raise self.error(
                    "parameters", f"simulation.model planar_impact frees only μ and ε, not {others}"
                )
        return SimulationSection(
            substeps=self.substeps(sim.get("substeps", 1)),
            backend=backend,
            device=str(sim.get("device", "cpu")),
            model=model,
            soft_block=self.soft_block(sim.get("soft_block"), spec)
            if model == "soft_block"
            else None,
        )

    def substeps(self, value: Any) -> int:
        substeps = self.convert(as_int, value, "simulation.substeps", "an integer ≥ 1")
        if substeps < 1:
            raise self.error("simulation.substeps", f"expected an integer ≥ 1, got {value!r}")
        return substeps

    def owned_parameters(self, names: tuple[str, ...], spec: ParameterSpec, model: str) -> None:
        """The parameters a simulation model owns are all free."""
        missing = [n for n in names if n not in spec.names]
        if missing:
            raise self.error("parameters", f"simulation.model {model} needs {missing} free")

    def soft_block(self, section: Any, spec: ParameterSpec) -> SoftBlockSection:
        key = "simulation.soft_block"
        block = self.mapping(section, key)
        self.keys(block, set(_SOFT_BLOCK_TYPES), key)
        self.owned_parameters(SoftBlockSimulation.names, spec, "soft_block")
        if "joint" not in block:
            raise self.error(f"{key}.joint", "the gripper joint is required")
        try:
            typed = {name: _SOFT_BLOCK_TYPES[name](value) for name, value in block.items()}
        except (TypeError, ValueError) as exc:
            raise self.error(key, exc) from None
        mesh = {name: typed.pop(name) for name in ("joint", "size", "cells") if name in typed}
        return SoftBlockSection(**mesh, squeeze=typed)

    def estimator(self, section: dict[str, Any]) -> EstimatorDefaults:
        self.keys(section, _ESTIMATOR_KEYS, "estimator")
        defaults = EstimatorDefaults(
            name=str(section.get("name", "csvgd")),
            settings=self.mapping(section.get("settings"), "estimator.settings"),
        )
        check_estimator(defaults.name, defaults.settings, f"{self.origin}: estimator")
        return defaults


def _floats(values: Any) -> tuple[float, ...]:
    """A list of numbers as floats (``TypeError`` or ``ValueError`` for anything else)."""
    return tuple(float(x) for x in _list(values))


def _list(values: Any) -> list[Any] | tuple[Any, ...]:
    if not isinstance(values, list | tuple):
        raise TypeError(f"expected a list, got {type(values).__name__}")
    return values


def _number_list(value: Any) -> tuple[float, ...]:
    """``value`` as floats, or ``()`` when it is not a list of numbers."""
    try:
        return _floats(value)
    except (TypeError, ValueError):
        return ()


def _points(values: Any) -> tuple[tuple[float, ...], ...]:
    return tuple(_floats(row) for row in values)


_SOFT_BLOCK_TYPES: dict[str, Callable[[Any], Any]] = {
    "joint": str,
    "size": _floats,
    "cells": as_ints,
    "material": Material,
    "axis": as_int,
    "direction": float,
    "density": float,
    "damping": float,
    "mass_scaling": float,
}
