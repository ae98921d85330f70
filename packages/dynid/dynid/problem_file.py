"""Problem files: one YAML file describes an identification problem end to end.

``load_problem(path, bag=...)`` reads a problem file, checks every key and returns a
:class:`dynid.problem.Problem` plus the estimator defaults. Every error is a
:class:`ProblemFileError` whose one-line message names the file and the key (``robot.urdf``,
``parameters[2].name``, ``data.joint_states.topic``, ``estimator.name`` ...). YAML is read with
``yaml.safe_load`` only; relative paths are relative to the problem file's directory.

Schema (top-level keys; only ``robot``, ``parameters`` and ``data`` are required)::

    name: panda_box                    # short name for reports and files (default: file stem)
    description: free text             # optional

    robot:                             # exactly one of name / urdf
      name: panda                      # dynid.model.robot.load_robot name: panda,
                                       #   open_manipulator_x, double_pendulum, furuta
      # urdf: ../robots/my_robot.urdf  # or a URDF file
      locked_joints: {}                # joint -> fixed position (rad or m)
      gravity: [0.0, 0.0, -9.81]       # m/s², world frame

    attachments:                       # optional, applied in order (dynid.model.attachments)
      - type: universal_box            # attach_universal_box(robot, flange_frame, ...)
        flange_frame: panda_link8
        box_mass: 0.920                # kg
        size: [0.30, 0.18, 0.30]       # m
        weights: 2
        weight_mass: 0.5               # kg
        weight_positions: [[-0.05, 0.0], [0.05, 0.0]]   # m, nominal (x, y) on the floor
        damping: 0.0                   # N·m·s/rad, scalar or [2]
        name: box                      # parameter prefix: box/weight1_x, box/com_z, ...
      # - type: payload                # attach_payload(robot, link, mass, com, inertia, name)
      #   link: end_effector_link
      #   mass: 0.05                   # kg
      #   com: [0.0, 0.0, 0.0]         # m, link frame
      #   inertia: [[1e-5, 0, 0], [0, 1e-5, 0], [0, 0, 1e-5]]   # kg·m², optional
      # - type: sphere_in_container    # sphere_in_container(robot, container_frame, ...)
      #   container_frame: link5
      #   inner_size: [0.1, 0.1, 0.1]  # m
      #   radius: 0.0225               # m
      #   mass: 0.05                   # kg
      #   stiffness: 1.0e4             # N/m
      #   damping: 10.0                # N·s/m
      #   friction_stiffness: 10.0     # N·s/m
      #   friction: 0.5
      #   axes: xz                     # optional: cavity_center, rolling, name

    parameters:                        # dynid.model.params.ParameterSpec.from_yaml entries;
      - {name: box/weight1_x, lower: -0.14, upper: 0.14, unit: m}   # names are checked
      - {name: box/weight1_y, lower: -0.08, upper: 0.08, unit: m}   # against the robot and
      - {name: box/weight2_x, lower: -0.14, upper: 0.14, unit: m}   # its attachments
      - {name: box/weight2_y, lower: -0.08, upper: 0.08, unit: m,
         prior: gaussian, mean: 0.0, std: 0.05}

    truth: {box/weight1_x: -0.08}      # optional known values (synthetic data), shown in reports

    data:
      source: bag                      # bag (default) | npz | ibm_pendulum | scenario
      # --- source: bag (path from `dynid fit --bag`, else data.path) ---------------------
      path: ../../build/panda_box.mcap # optional default bag
      joint_states:                    # dynid.data.JointStateTopic
        topic: /joint_states
        joints: [panda_joint1, panda_joint2]   # default: every joint of the robot
        effort_scale: {}               # joint -> factor from raw effort to N·m
      mocap:                           # dynid.data.MocapTopic: channels <body>/x|y|z|qx|qy|qz|qw
        - {body: box, topic: /vicon/box/box, msgtype: geometry_msgs/msg/PoseStamped}
      tf: []                           # dynid.data.TfLookup: {body, parent, child, topic}
      commands:                        # dynid.data.CommandTopic
        - {topic: /desired_joint_states, msgtype: sensor_msgs/msg/JointState,
           label: desired, fields: [position, velocity]}
      stamps: header                   # header | receive
      rate: null                       # Hz: resample onto a uniform grid while reading
      # --- source: npz -------------------------------------------------------------------
      # path: recording.npz            # dynid.data.Dataset.save_npz file
      # --- source: ibm_pendulum (the real IBM double-pendulum recordings) ----------------
      # runs: [0]                      # run numbers; start: 0; max_samples: 400
      # --- source: scenario (simulate on the fly with dynid.sim) -------------------------
      # scenario: panda_box            # dynid.sim scenario (module dynid.sim.<name>)
      # settings: {seed: 0}            # keyword arguments of its simulate(seed, ...)
      # --- preprocessing (every source), applied in this order ---------------------------
      window: [0.0, 4.0]               # s: keep this time range of each trajectory
      lowpass_hz: null                 # zero-phase Butterworth (dynid.data.preprocess)
      velocities: measured             # measured | central | backward | forward: fill or
                                       #   recompute dq by finite differences
      passive_joints:                  # joints the recording lacks (a passive universal
        joints: [box_joint_x, box_joint_y]   # joint), solved per sample so that frame `frame`
        frame: box                     #   matches the mocap pose of `body` (default: frame);
        body: box                      #   velocities by central differences
      dt: 0.01                         # s: simulator step; data are downsampled onto it
      split: null                      # s: cut each trajectory into pieces of this length
      trajectories: null               # indices of the trajectories to keep (after split)

    control:                           # how the recorded inputs drive the simulation
      type: pd                         # torque | current | pd | prescribed | none
      actuated: [panda_joint1, ...]    # joints driven, in input order (default: all joints)
      inputs: [desired/panda_joint1/position, ..., desired/panda_joint1/velocity, ...]
                                       # command channels fed as u; required for pd and
                                       #   current; torque default: [effort] (measured efforts)
      kp: [600, 600, 600, 600, 250, 150, 50]   # pd: N·m/rad, scalar or per actuated joint
      kd: [50, 50, 50, 20, 20, 20, 10]         # pd: N·m·s/rad
      # torque_constant: 1.0           # current: N·m per unit (omit: <joint>/motor_gain)
                                       # prescribed: the actuated joints follow the recording
                                       #   (hybrid dynamics, dynid.model.integrate
                                       #   .PrescribedMotion); 'actuated' is required, 'inputs'
                                       #   defaults to <joint>/position, .../velocity and
                                       #   .../acceleration (the velocity differenced)

    observe:                           # which channels the likelihood compares
      joints: all                      # all | [names] | none: "<joint>/position"
      velocities: false                # also "<joint>/velocity"
      frame_points:                    # mocap points fixed on frames, "<frame>/<point>/x|y|z";
        - frame: box                   #   computed from the pose of mocap body `body`
          body: box                    #   (default: the frame name) when the data lack them
          points: [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]   # m, frame coords (default)
      frame_poses: []                  # frames observed as poses "<frame>/x|y|z|qx|qy|qz|qw"

    likelihood:                        # dynid.problem.LikelihoodSettings (dynid.objective)
      kind: shooting                   # shooting: simulated vs recorded observations |
                                       #   inverse_dynamics: measured efforts vs ID(q, q̇, q̈; θ)
      obs_std: 0.01                    # scalar or one per observed channel (channel units)
      shooting: multiple               # single | multiple
      windows: 10
      defect_std: 0.1
      aggregate: sum                   # sum | product
      # torque_std: 0.1                # inverse_dynamics: N·m (or N), scalar or one per joint
      # cutoff_hz: 20.0                # inverse_dynamics: zero-phase low-pass before
                                       #   differentiating positions and velocities
      # stride: 1                      # inverse_dynamics: score every stride-th sample
      # trim_s: 0.1                    # inverse_dynamics: s cut at both ends of each trajectory
      # process_std: 1.0e-3            # one-step transition noise (filters): scalar or 2 nv

    simulation:
      substeps: 1                      # integrator substeps per data step
      backend: torch                   # torch | pinocchio
      device: cpu                      # torch device (dynid fit --device overrides)
      model: rigid                     # rigid | soft_block (dynid.objective.simulation)
      # soft_block:                    # model: soft_block, the FEM block squeezed by a gripper
      #   joint: gripper_left_joint    #   (dynid.model.soft_block.GripperSqueeze); parameters
      #   size: [0.03, 0.03, 0.03]     #   block/mu and block/lambda (Pa) must be free
      #   cells: [1, 2, 1]             # hexahedra per axis (5 tetrahedra each)
      #   material: neo_hookean        # neo_hookean | linear
      #   axis: 1                      # squeeze axis of the block frame
      #   direction: 1.0               # +1: a positive joint motion opens the gripper
      #   density: 370.0               # kg/m³
      #   damping: 50.0                # 1/s, mass-proportional
      #   mass_scaling: 100.0          # ≥ 1, explicit-FEM mass scaling

    estimator:                         # the estimator `dynid fit` and the node run by default
      name: csvgd                      # dynid.estimators.registry.available_estimators()
      settings: {num_particles: 32, max_iterations: 300, learning_rate: 0.01, seed: 0}
                                       # over the estimator's own defaults (dynid/estimators/
                                       #   defaults/<name>.yaml), only when `name` is the one
                                       #   run; CLI flags and node parameters override them
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from dynid.data import preprocess
from dynid.data.align import uniform_grid
from dynid.data.errors import DataError
from dynid.data.quaternion import rotate, to_matrix
from dynid.data.topics import BagLayout
from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.registry import (
    EstimatorDefaults,
    EstimatorError,
    UnknownEstimatorError,
    resolve_estimator,
)
from dynid.model import attachments as attach
from dynid.model.errors import ModelError, UnknownJointError
from dynid.model.integrate import (
    CurrentControl,
    PDControl,
    PrescribedMotion,
    TorqueControl,
    Unactuated,
)
from dynid.model.observe import (
    AXIS_POINTS,
    FramePointObservation,
    FramePoseObservation,
    JointObservation,
    Observation,
)
from dynid.model.params import ParameterSpec
from dynid.model.passive_ik import passive_joint_positions
from dynid.model.robot import RobotModel, load_robot, robot_urdf
from dynid.model.soft_block import GripperSqueeze, Material, TetMesh
from dynid.objective.simulation import RigidSimulation, Simulator, SoftBlockSimulation
from dynid.problem import LikelihoodSettings, Problem, ProblemError

__all__ = [
    "EstimatorDefaults",
    "Observation",
    "ProblemFile",
    "ProblemFileError",
    "Unactuated",
    "available_scenarios",
    "check_estimator",
    "load_problem",
    "read_problem_file",
    "scalar_values",
    "scenario_module",
]

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
}
_ROBOT_KEYS = {"name", "urdf", "locked_joints", "gravity"}
_ATTACHMENTS: dict[str, Callable[..., RobotModel]] = {
    "payload": attach.attach_payload,
    "universal_box": attach.attach_universal_box,
    "sphere_in_container": attach.sphere_in_container,
}
_SOURCES = ("bag", "npz", "ibm_pendulum", "scenario")
_SOURCE_KEYS = {
    "bag": {"path", "joint_states", "mocap", "tf", "commands", "stamps", "rate"},
    "npz": {"path"},
    "ibm_pendulum": {"runs", "start", "max_samples"},
    "scenario": {"scenario", "settings"},
}
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
_CONTROL_KEYS = {
    "torque": {"type", "actuated", "inputs"},
    "current": {"type", "actuated", "inputs", "torque_constant"},
    "pd": {"type", "actuated", "inputs", "kp", "kd"},
    "prescribed": {"type", "actuated", "inputs"},
    "none": {"type"},
}
_OBSERVE_KEYS = {"joints", "velocities", "frame_points", "frame_poses"}
_FRAME_POINT_KEYS = {"frame", "body", "points", "point_names"}
_SIMULATION_KEYS = {"substeps", "backend", "device", "model", "soft_block"}
_SOFT_BLOCK_KEYS = {
    "joint",
    "size",
    "cells",
    "material",
    "axis",
    "direction",
    "density",
    "damping",
    "mass_scaling",
}
_ESTIMATOR_KEYS = {"name", "settings"}
_NOT_SCENARIOS = {"common"}


class ProblemFileError(ValueError):
    """A problem file is unreadable or invalid; the message names the file and the key."""


@dataclass
class ProblemFile:
    """A validated problem file: the robot and parameters are built, the data not yet read.

    Attributes:
        path: the file (``None`` for a mapping).
        name: problem name.
        config: the parsed YAML mapping.
        robot: the robot with its attachments.
        spec: the free parameters (names checked against ``robot``).
        truth: known true values ``{name: value}`` or ``None`` (for a scenario source, filled
            from the scenario's truth when the file gives none).
        estimator: the estimator defaults.
    """

    path: Path | None
    name: str
    config: dict[str, Any]
    robot: RobotModel
    spec: ParameterSpec
    truth: dict[str, float] | None
    estimator: EstimatorDefaults

    @property
    def origin(self) -> str:
        """How messages refer to the file."""
        return str(self.path) if self.path is not None else f"problem {self.name!r}"

    def error(self, key: str, message: str) -> ProblemFileError:
        """A one-line error naming this file and ``key``."""
        return ProblemFileError(f"{self.origin}: {key}: {_one_line(message)}")

    def resolve(self, value: str | Path) -> Path:
        """``value`` as a path, relative to the problem file's directory."""
        path = Path(value).expanduser()
        if not path.is_absolute() and self.path is not None:
            path = self.path.parent / path
        return path

    def source_urdf(self) -> str | None:
        """The URDF text the problem's robot was built from (``None`` when it cannot be found)."""
        robot = self.config["robot"]
        if "urdf" in robot:
            return self.resolve(robot["urdf"]).read_text(encoding="utf-8")
        try:
            return robot_urdf(str(robot["name"])).read_text(encoding="utf-8")
        except ModelError:
            return None

    # ------------------------------------------------------------------------------ data
    @property
    def data_source(self) -> str:
        """``data.source``: bag, npz, ibm_pendulum or scenario."""
        return str(self.config["data"].get("source", "bag"))

    def bag_layout(self) -> BagLayout:
        """The topics of ``data`` (bag sources) as a :class:`dynid.data.BagLayout`."""
        data = self.config["data"]
        section = {k: data[k] for k in ("joint_states", "mocap", "tf", "commands", "stamps")
                   if k in data}  # fmt: skip
        try:
            return BagLayout.from_mapping(section)
        except (TypeError, ValueError, DataError) as exc:
            raise self.error("data", f"invalid topic description: {exc}") from None

    def load_dataset(self, bag: str | Path | None = None) -> Dataset:
        """Read and preprocess the data (``bag`` overrides ``data.path`` for bag sources).

        Raises:
            ProblemFileError: missing file, missing topic or channel, bad preprocessing, or a
                ``bag`` given to a problem whose data come from elsewhere (it would be ignored).
        """
        data = self.config["data"]
        source = self.data_source
        if bag is not None and source != "bag":
            raise self.error(
                "data.source",
                f"is {source!r}, so the recording {str(bag)!r} would be ignored; a recording "
                "is read only by problems with data.source 'bag'",
            )
        try:
            if source == "bag":
                dataset = self._read_bag(bag)
            elif source == "npz":
                dataset = Dataset.load_npz(self._data_path(data.get("path"), "data.path"))
            elif source == "ibm_pendulum":
                from dynid.data.ibm_pendulum import load_ibm_pendulum_runs

                dataset = load_ibm_pendulum_runs(
                    list(data.get("runs", [0])),
                    start=int(data.get("start", 0)),
                    max_samples=data.get("max_samples"),
                )
            else:
                dataset = self._simulate(data)
        except DataError as exc:
            raise self.error(f"data ({source})", str(exc)) from None
        return self.preprocess(dataset)

    def _data_path(self, value: Any, key: str) -> Path:
        if value is None:
            hint = "pass --bag or set data.path" if self.data_source == "bag" else "set data.path"
            raise self.error(key, f"no data file given ({hint})")
        path = self.resolve(value)
        if not path.exists():
            raise self.error(key, f"data file {path} does not exist")
        return path

    def _read_bag(self, bag: str | Path | None) -> Dataset:
        from dynid.data.bag import read_bag

        key = "--bag" if bag is not None else "data.path"
        path = self._data_path(bag if bag is not None else self.config["data"].get("path"), key)
        rate = self.config["data"].get("rate")
        dataset, _ = read_bag(path, self.bag_layout(), rate=None if rate is None else float(rate))
        return dataset

    def _simulate(self, data: Mapping[str, Any]) -> Dataset:
        module = scenario_module(str(data.get("scenario")), f"{self.origin}: data.scenario")
        settings = dict(data.get("settings") or {})
        settings.setdefault("seed", 0)
        try:
            dataset, truth = module.simulate(**settings)
        except TypeError as exc:
            raise self.error("data.settings", str(exc)) from None
        except ValueError as exc:
            raise self.error("data.settings", str(exc)) from None
        if self.truth is None:
            values = scalar_values(truth.get("parameters", {}))
            self.truth = {k: v for k, v in values.items() if k in self.spec.names} or None
        return dataset

    def preprocess(self, dataset: Dataset) -> Dataset:
        """Apply ``data``'s window, low-pass, velocities, step, split and selection."""
        data = self.config["data"]
        trajectories = list(dataset)
        try:
            if data.get("window") is not None:
                t0, t1 = (float(x) for x in data["window"])
                trajectories = [tr.slice(tr.t[0] + t0, tr.t[0] + t1) for tr in trajectories]
            if data.get("lowpass_hz") is not None:
                cut = float(data["lowpass_hz"])
                trajectories = [
                    preprocess.filter_trajectory(_uniform(tr, _grid_step(tr)), cut)
                    for tr in trajectories
                ]
            if data.get("passive_joints") is not None:
                trajectories = [self._solve_passive(tr) for tr in trajectories]
            method = str(data.get("velocities", "measured"))
            if method != "measured":
                trajectories = [
                    preprocess.with_velocities(tr, method=method) for tr in trajectories
                ]
            if data.get("dt") is not None:
                dt = float(data["dt"])
                trajectories = [_on_grid(tr, dt) for tr in trajectories]
            if data.get("split") is not None:
                length = float(data["split"])
                trajectories = [
                    piece for tr in trajectories for piece in preprocess.split_windows(tr, length)
                ]
        except DataError as exc:
            raise self.error("data", f"preprocessing failed: {exc}") from None
        for k, tr in enumerate(trajectories):
            if tr.dq is None:
                raise self.error(
                    "data.velocities",
                    f"trajectory {k} has no measured velocities; set data.velocities: central",
                )
        selected = data.get("trajectories")
        if selected is not None:
            bad = [i for i in selected if not 0 <= int(i) < len(trajectories)]
            if bad:
                raise self.error(
                    "data.trajectories", f"indices {bad} out of range 0..{len(trajectories) - 1}"
                )
            trajectories = [trajectories[int(i)] for i in selected]
        return Dataset(trajectories)

    def _solve_passive(self, traj: Trajectory) -> Trajectory:
        section = self.config["data"]["passive_joints"]
        frame = str(section["frame"])
        body = str(section.get("body", frame))
        try:
            return solve_passive_joints(self.robot, traj, list(section["joints"]), frame, body)
        except (ModelError, DataError) as exc:
            raise self.error("data.passive_joints", str(exc)) from None

    # --------------------------------------------------------------------------- problem
    def observation(self) -> Observation:
        """The ``observe`` section as one observation model."""
        section = self.config.get("observe") or {}
        joints = section.get("joints", "all")
        velocities = bool(section.get("velocities", False))
        parts: list[Any] = []
        try:
            if joints != "none":
                selected = None if joints == "all" else list(joints)
                parts.append(JointObservation(self.robot, selected, velocities=velocities))
            for entry in section.get("frame_points") or []:
                self.robot.frame_id(str(entry["frame"]))
                parts.append(
                    FramePointObservation(
                        str(entry["frame"]),
                        entry.get("points", AXIS_POINTS),
                        entry.get("point_names"),
                    )
                )
            frames = list(section.get("frame_poses") or [])
            for frame in frames:
                self.robot.frame_id(str(frame))
            if frames:
                parts.append(FramePoseObservation(frames))
        except ModelError as exc:
            raise self.error("observe", str(exc)) from None
        if not parts:
            raise self.error("observe", "nothing is observed (joints: none and no frames)")
        return Observation(parts)

    def control(self) -> tuple[Any, list[str]]:
        """``(control model, control_names)`` of the ``control`` section."""
        section = self.config.get("control") or {"type": "torque"}
        kind = section.get("type", "torque")
        if kind == "none":
            return Unactuated(), []
        actuated_names = section.get("actuated")
        actuated = None
        if actuated_names is not None:
            unknown = [j for j in actuated_names if j not in self.robot.joint_names]
            if unknown:
                raise self.error(
                    "control.actuated",
                    f"joints {unknown} are not movable joints of robot {self.robot.name!r} "
                    f"(has {self.robot.joint_names})",
                )
            actuated = [self.robot.joint_index(j) for j in actuated_names]
        inputs = section.get("inputs")
        try:
            if kind == "torque":
                model: Any = TorqueControl(actuated)
                names = ["effort"] if inputs is None else [str(x) for x in inputs]
            elif kind == "current":
                model = CurrentControl(section.get("torque_constant"), actuated)
                names = [str(x) for x in inputs]
            elif kind == "prescribed":
                model = PrescribedMotion(actuated or [])
                names = _prescribed_inputs(actuated_names, inputs)
            else:
                model = PDControl(section["kp"], section["kd"], actuated)
                names = [str(x) for x in inputs]
            nu = model.input_size(self.robot.nv)
        except ModelError as exc:
            raise self.error("control", str(exc)) from None
        if names != ["effort"] and len(names) != nu:
            raise self.error(
                "control.inputs", f"{len(names)} channels given, the {kind} control needs {nu}"
            )
        return model, names

    def likelihood(self) -> LikelihoodSettings:
        """The ``likelihood`` section."""
        section = dict(self.config.get("likelihood") or {})
        for key in ("obs_std", "torque_std", "process_std"):
            if isinstance(section.get(key), list):
                section[key] = tuple(float(x) for x in section[key])
        try:
            return LikelihoodSettings(**section)
        except ProblemError as exc:
            raise self.error("likelihood", str(exc)) from None

    def build(
        self, dataset: Dataset, *, device: str | None = None, backend: str | None = None
    ) -> Problem:
        """The :class:`Problem` on ``dataset`` (already preprocessed).

        Raises:
            ProblemFileError: the data lack a joint, observed channel or control channel, or are
                not on one uniform time grid.
        """
        sim = self.config.get("simulation") or {}
        observe = self.observation()
        dataset = Dataset([self._derive_points(tr) for tr in dataset])
        control, control_names = self.control()
        try:
            steps = {round(preprocess.uniform_step(tr.t, what="data"), 12) for tr in dataset}
        except DataError as exc:
            raise self.error("data.dt", str(exc)) from None
        if len(steps) != 1:
            raise self.error("data.dt", f"trajectories have different steps {sorted(steps)} s")
        try:
            return Problem(
                robot=self.robot,
                spec=self.spec,
                dataset=dataset,
                dt=steps.pop(),
                control=control,
                control_names=control_names,
                observe=observe,
                obs_names=observe.names,
                likelihood=self.likelihood(),
                substeps=int(sim.get("substeps", 1)),
                backend=backend or sim.get("backend", "torch"),
                device=device or sim.get("device", "cpu"),
                name=self.name,
                truth=self.truth,
                simulator=self.simulator(),
            )
        except ProblemError as exc:
            raise self.error("data", str(exc)) from None

    def simulator(self) -> Simulator:
        """The ``simulation.model``: the rigid robot, or the soft block squeezed by a gripper.

        Raises:
            ProblemFileError: an unknown model, a bad ``soft_block`` entry, or soft-block
                parameters missing from ``parameters``.
        """
        sim = self.config.get("simulation") or {}
        model = sim.get("model", "rigid")
        if model == "rigid":
            if "soft_block" in sim:
                raise self.error("simulation.soft_block", "needs simulation.model: soft_block")
            return RigidSimulation()
        block = _mapping(sim.get("soft_block"), "simulation.soft_block", self.origin)
        _check_keys(block, _SOFT_BLOCK_KEYS, "simulation.soft_block", self.origin)
        missing = [n for n in SoftBlockSimulation.names if n not in self.spec.names]
        if missing:
            raise self.error("parameters", f"simulation.model soft_block needs {missing} (Pa)")
        if "joint" not in block:
            raise self.error("simulation.soft_block.joint", "the gripper joint is required")
        try:
            squeeze = GripperSqueeze(
                mesh=TetMesh.box(
                    block.get("size", (0.03, 0.03, 0.03)), block.get("cells", (1, 1, 1))
                ),
                joint=self.robot.joint_index(str(block["joint"])),
                material=Material(block.get("material", "neo_hookean")),
                axis=int(block.get("axis", 1)),
                direction=float(block.get("direction", 1.0)),
                density=float(block.get("density", 500.0)),
                damping=float(block.get("damping", 50.0)),
                mass_scaling=float(block.get("mass_scaling", 1.0)),
            )
        except (ModelError, ValueError, TypeError) as exc:
            raise self.error("simulation.soft_block", _one_line(str(exc))) from None
        return SoftBlockSimulation(squeeze)

    def _derive_points(self, traj: Trajectory) -> Trajectory:
        """Add ``<frame>/<point>/x|y|z`` channels computed from mocap poses when missing."""
        section = self.config.get("observe") or {}
        new_names: list[str] = []
        new_cols: list[np.ndarray] = []
        for entry in section.get("frame_points") or []:
            part = FramePointObservation(
                str(entry["frame"]), entry.get("points", AXIS_POINTS), entry.get("point_names")
            )
            if all(n in traj.obs_names for n in part.names):
                continue
            body = str(entry.get("body", entry["frame"]))
            try:
                position, quat = traj.pose(body)
            except DataError:
                raise self.error(
                    "observe.frame_points",
                    f"trajectory {traj.meta.get('source', '')!r} has neither the channels "
                    f"{part.names[0]}... nor the mocap pose of body {body!r} "
                    f"(observations: {traj.obs_names})",
                ) from None
            points = part.points.numpy()
            world = position[:, None, :] + rotate(quat[:, None, :], points[None, :, :])
            new_names += part.names
            new_cols.append(world.reshape(world.shape[0], -1))
        if not new_names:
            return traj
        extra = np.concatenate(new_cols, axis=1)
        obs = extra if traj.obs is None else np.concatenate([traj.obs, extra], axis=1)
        return traj.replace(obs=obs, obs_names=[*traj.obs_names, *new_names])


def solve_passive_joints(
    robot: RobotModel,
    traj: Trajectory,
    joints: Sequence[str],
    frame: str,
    body: str,
    *,
    iterations: int = 30,
) -> Trajectory:
    """``traj`` extended by the positions and velocities of unmeasured ``joints``.

    For every sample, the unmeasured joint angles put the model's frame ``frame`` (measured
    joints at their recorded values) at the mocap pose of ``body``
    (:func:`dynid.model.passive_ik.passive_joint_positions`). The mocap body frame must coincide
    with the model frame. Velocities of the solved joints are central differences; their effort
    (if any) is zero.

    Args:
        robot: the model (with attachments).
        traj: recording with every other movable joint and the ``body`` pose channels.
        joints: the unmeasured joints (rad or m).
        frame: model frame observed by the mocap.
        body: mocap body name (channels ``<body>/x|y|z|qx|qy|qz|qw``).
        iterations: Gauss–Newton iterations (stops earlier when the step is below 1e-12).
    """
    unknown = [j for j in joints if j not in robot.joint_names]
    if unknown:
        raise DataError(f"joints {unknown} are not movable joints of robot {robot.name!r}")
    measured = [j for j in robot.joint_names if j not in joints]
    missing = [j for j in measured if j not in traj.joint_names]
    if missing:
        raise DataError(f"the recording lacks joints {missing} (has {traj.joint_names})")
    robot.frame_id(frame)
    position, quat = traj.pose(body)
    q = torch.zeros(traj.t.size, robot.nv, dtype=torch.float64)
    cols = [traj.joint_names.index(j) for j in measured]
    q[:, [robot.joint_index(j) for j in measured]] = torch.as_tensor(traj.q[:, cols])
    R, t = torch.as_tensor(to_matrix(quat)), torch.as_tensor(position)
    angles = passive_joint_positions(robot, q, joints, frame, R, t, iterations=iterations).numpy()
    rates = preprocess.differentiate(angles, traj.t, "central")
    names = [*traj.joint_names, *joints]
    dq = None if traj.dq is None else np.concatenate([traj.dq, rates], axis=1)
    effort = None
    if traj.effort is not None:
        effort = np.concatenate([traj.effort, np.zeros_like(angles)], axis=1)
    return traj.replace(
        q=np.concatenate([traj.q, angles], axis=1), dq=dq, effort=effort, joint_names=names
    )


def _prescribed_inputs(actuated: Sequence[str], inputs: Sequence[Any] | None) -> list[str]:
    """Input channels of a prescribed control: ``inputs``, or by default the actuated joints'
    recorded positions, velocities and (differenced) accelerations, block by block."""
    if inputs is not None:
        return [str(x) for x in inputs]
    return [f"{j}/{kind}" for kind in ("position", "velocity", "acceleration") for j in actuated]


def _grid_step(traj: Trajectory) -> float:
    """Median sample step (s) of ``traj``."""
    return float(np.median(np.diff(traj.t)))


def _on_grid(traj: Trajectory, dt: float) -> Trajectory:
    """``traj`` on the uniform grid of step ``dt`` (s): unchanged, resampled or downsampled.

    Downsampling first low-passes at 0.8 × the new Nyquist frequency (``0.4 / dt``), as
    :func:`dynid.data.preprocess.downsample` does.
    """
    if np.allclose(np.diff(traj.t), dt, rtol=1e-6, atol=1e-9):
        return traj
    src = _grid_step(traj)
    if src < dt:
        traj = preprocess.filter_trajectory(_uniform(traj, src), 0.4 / dt)
    return _uniform(traj, dt)


def _uniform(traj: Trajectory, dt: float) -> Trajectory:
    """``traj`` interpolated onto ``t[0] + k dt``; the last grid time is kept inside the data
    span (the grid may overshoot the last sample by rounding)."""
    if np.allclose(np.diff(traj.t), dt, rtol=1e-9, atol=0.0):
        return traj
    grid = uniform_grid(float(traj.t[0]), float(traj.t[-1]), dt)
    return traj.interpolate(np.minimum(grid, traj.t[-1]))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _mapping(value: Any, key: str, origin: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProblemFileError(f"{origin}: {key}: expected a mapping, got {type(value).__name__}")
    return dict(value)


def _check_keys(section: Mapping[str, Any], allowed: set[str], key: str, origin: str) -> None:
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise ProblemFileError(
            f"{origin}: {key}: unknown keys {unknown}; allowed: {sorted(allowed)}"
        )


def _load_yaml(source: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], Path | None, str]:
    if isinstance(source, Mapping):
        return dict(source), None, "problem mapping"
    path = Path(source)
    if not path.is_file():
        raise ProblemFileError(f"problem file {path} does not exist")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemFileError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProblemFileError(f"{path}: invalid YAML: {_one_line(str(exc))}") from None
    if not isinstance(config, Mapping):
        raise ProblemFileError(f"{path}: expected a mapping of sections at the top level")
    return dict(config), path, str(path)


def _load_robot(section: Mapping[str, Any], base: Path | None, origin: str) -> RobotModel:
    _check_keys(section, _ROBOT_KEYS, "robot", origin)
    if ("name" in section) == ("urdf" in section):
        raise ProblemFileError(f"{origin}: robot: give exactly one of 'name' and 'urdf'")
    kwargs: dict[str, Any] = {}
    if section.get("locked_joints"):
        kwargs["locked_joints"] = {
            str(k): float(v)
            for k, v in _mapping(section["locked_joints"], "robot.locked_joints", origin).items()
        }
    if "gravity" in section:
        gravity = np.asarray(section["gravity"], dtype=np.float64)
        if gravity.shape != (3,) or not np.isfinite(gravity).all():
            raise ProblemFileError(f"{origin}: robot.gravity: expected 3 finite numbers (m/s²)")
        kwargs["gravity"] = tuple(gravity.tolist())
    key = "robot.name" if "name" in section else "robot.urdf"
    try:
        if "name" in section:
            return load_robot(str(section["name"]), **kwargs)
        urdf = Path(str(section["urdf"])).expanduser()
        if not urdf.is_absolute() and base is not None:
            urdf = base / urdf
        if not urdf.is_file():
            raise ProblemFileError(f"{origin}: robot.urdf: URDF file {urdf} does not exist")
        return RobotModel.from_urdf(urdf, **kwargs)
    except UnknownJointError as exc:
        raise ProblemFileError(f"{origin}: robot.locked_joints: {_one_line(str(exc))}") from None
    except ModelError as exc:
        raise ProblemFileError(f"{origin}: {key}: {_one_line(str(exc))}") from None


def _attach(robot: RobotModel, entries: Any, origin: str) -> RobotModel:
    if entries is None:
        return robot
    if not isinstance(entries, list):
        raise ProblemFileError(f"{origin}: attachments: expected a list")
    for k, entry in enumerate(entries):
        key = f"attachments[{k}]"
        entry = _mapping(entry, key, origin)
        kind = entry.pop("type", None)
        if kind not in _ATTACHMENTS:
            raise ProblemFileError(
                f"{origin}: {key}.type: {kind!r} is not one of {sorted(_ATTACHMENTS)}"
            )
        function = _ATTACHMENTS[kind]
        allowed = set(list(inspect.signature(function).parameters)[1:])
        _check_keys(entry, allowed, f"{key} ({kind})", origin)
        try:
            robot = function(robot, **entry)
        except TypeError as exc:
            raise ProblemFileError(f"{origin}: {key} ({kind}): {_one_line(str(exc))}") from None
        except ModelError as exc:
            raise ProblemFileError(f"{origin}: {key} ({kind}): {_one_line(str(exc))}") from None
    return robot


def _load_spec(
    entries: Any, robot: RobotModel, origin: str, simulation: Mapping[str, Any]
) -> ParameterSpec:
    """The ``parameters`` section, each name checked against the robot, except those the
    simulation model owns (``block/mu`` and ``block/lambda`` of the soft block)."""
    if not isinstance(entries, list) or not entries:
        raise ProblemFileError(f"{origin}: parameters: expected a non-empty list of parameters")
    try:
        spec = ParameterSpec.from_yaml({"parameters": entries})
    except ModelError as exc:
        message = _one_line(str(exc)).removeprefix("mapping: ")
        raise ProblemFileError(f"{origin}: parameters: {message}") from None
    model = simulation.get("model", "rigid")
    if model not in ("rigid", "soft_block"):
        raise ProblemFileError(
            f"{origin}: simulation.model: expected rigid or soft_block, got {model!r}"
        )
    owned = SoftBlockSimulation.names if model == "soft_block" else ()
    for k, parameter in enumerate(spec.parameters):
        if parameter.name in owned:
            continue
        try:
            ParameterSpec([parameter]).nominal_theta(robot)
        except ModelError:
            prefixes = sorted({*robot.body_names, *robot.joint_names, *robot.resolvers, "gravity"})
            raise ProblemFileError(
                f"{origin}: parameters[{k}].name: {parameter.name!r} is not a parameter of robot "
                f"{robot.name!r} (prefixes: {prefixes})"
            ) from None
    robot_spec = ParameterSpec([p for p in spec.parameters if p.name not in owned])
    try:
        if robot_spec.dim:
            robot_spec.apply(robot, robot_spec.lower.unsqueeze(0))
    except ModelError as exc:
        raise ProblemFileError(f"{origin}: parameters: {_one_line(str(exc))}") from None
    return spec


def _load_truth(section: Any, spec: ParameterSpec, origin: str) -> dict[str, float] | None:
    if section is None:
        return None
    truth = _mapping(section, "truth", origin)
    unknown = sorted(set(truth) - set(spec.names))
    if unknown:
        raise ProblemFileError(f"{origin}: truth: names {unknown} are not among the parameters")
    values = {str(k): float(v) for k, v in truth.items()}
    bad = [k for k, v in values.items() if not math.isfinite(v)]
    if bad:
        raise ProblemFileError(f"{origin}: truth: values of {bad} are not finite")
    return values


def _check_data(section: Any, origin: str) -> dict[str, Any]:
    data = _mapping(section, "data", origin)
    source = data.get("source", "bag")
    if source not in _SOURCES:
        raise ProblemFileError(f"{origin}: data.source: {source!r} is not one of {list(_SOURCES)}")
    _check_keys(data, {"source", *_SOURCE_KEYS[source], *_PREPROCESS_KEYS}, "data", origin)
    if data.get("velocities", "measured") not in _VELOCITY_METHODS:
        raise ProblemFileError(
            f"{origin}: data.velocities: {data['velocities']!r} is not one of "
            f"{list(_VELOCITY_METHODS)}"
        )
    for key in ("dt", "lowpass_hz", "split", "rate"):
        value = data.get(key)
        if value is not None and not (isinstance(value, int | float) and value > 0):
            raise ProblemFileError(
                f"{origin}: data.{key}: expected a positive number, got {value!r}"
            )
    passive = data.get("passive_joints")
    if passive is not None:
        passive = _mapping(passive, "data.passive_joints", origin)
        _check_keys(passive, _PASSIVE_KEYS, "data.passive_joints", origin)
        if not isinstance(passive.get("joints"), list) or "frame" not in passive:
            raise ProblemFileError(
                f"{origin}: data.passive_joints: needs 'joints' (a list) and 'frame'"
            )
    window = data.get("window")
    if window is not None and (
        not isinstance(window, list) or len(window) != 2 or not float(window[0]) < float(window[1])
    ):
        raise ProblemFileError(f"{origin}: data.window: expected [t0, t1] with t0 < t1 (s)")
    if source == "scenario":
        scenario_module(str(data.get("scenario")), f"{origin}: data.scenario")
    return data


def _check_sections(config: Mapping[str, Any], robot: RobotModel, origin: str) -> None:
    control = _mapping(config.get("control"), "control", origin)
    kind = control.get("type", "torque")
    if kind not in _CONTROL_KEYS:
        raise ProblemFileError(
            f"{origin}: control.type: {kind!r} is not one of {sorted(_CONTROL_KEYS)}"
        )
    _check_keys(control, _CONTROL_KEYS[kind], f"control ({kind})", origin)
    if kind == "pd" and not {"kp", "kd"} <= set(control):
        raise ProblemFileError(f"{origin}: control: a pd control needs 'kp' and 'kd'")
    if kind == "prescribed" and not isinstance(control.get("actuated"), list):
        raise ProblemFileError(
            f"{origin}: control.actuated: a prescribed control needs the list of joints that "
            "follow the recording (the others are simulated)"
        )
    if kind in ("pd", "current") and not isinstance(control.get("inputs"), list):
        raise ProblemFileError(
            f"{origin}: control.inputs: a {kind} control needs the list of its input channels"
        )
    observe = _mapping(config.get("observe"), "observe", origin)
    _check_keys(observe, _OBSERVE_KEYS, "observe", origin)
    joints = observe.get("joints", "all")
    if isinstance(joints, list):
        unknown = [j for j in joints if j not in robot.joint_names]
        if unknown:
            raise ProblemFileError(
                f"{origin}: observe.joints: {unknown} are not movable joints of robot "
                f"{robot.name!r} (has {robot.joint_names})"
            )
    elif joints not in ("all", "none"):
        raise ProblemFileError(f"{origin}: observe.joints: expected all, none or a list of joints")
    for k, entry in enumerate(observe.get("frame_points") or []):
        entry = _mapping(entry, f"observe.frame_points[{k}]", origin)
        _check_keys(entry, _FRAME_POINT_KEYS, f"observe.frame_points[{k}]", origin)
        if "frame" not in entry:
            raise ProblemFileError(f"{origin}: observe.frame_points[{k}]: 'frame' is required")
    likelihood = _mapping(config.get("likelihood"), "likelihood", origin)
    _check_keys(likelihood, {f.name for f in fields(LikelihoodSettings)}, "likelihood", origin)
    simulation = _mapping(config.get("simulation"), "simulation", origin)
    _check_keys(simulation, _SIMULATION_KEYS, "simulation", origin)
    if simulation.get("backend", "torch") not in ("torch", "pinocchio"):
        raise ProblemFileError(f"{origin}: simulation.backend: expected torch or pinocchio")


def _load_estimator(section: Any, origin: str) -> EstimatorDefaults:
    estimator = _mapping(section, "estimator", origin)
    _check_keys(estimator, _ESTIMATOR_KEYS, "estimator", origin)
    defaults = EstimatorDefaults(
        name=str(estimator.get("name", "csvgd")),
        settings=_mapping(estimator.get("settings"), "estimator.settings", origin),
    )
    check_estimator(defaults.name, defaults.settings, f"{origin}: estimator")
    return defaults


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
        raise ProblemFileError(f"{where}.name: {_one_line(str(exc))}") from None
    except EstimatorError as exc:
        raise ProblemFileError(f"{where}.settings: {_one_line(str(exc))}") from None


def scalar_values(values: Mapping[str, Any]) -> dict[str, float]:
    """``{name: value}`` of the entries that hold one number.

    Per-trajectory values (lists, e.g. link lengths drawn per trajectory of a scenario) are kept
    only when all entries are equal.
    """
    out = {}
    for name, value in values.items():
        unique = np.unique(np.asarray(value, dtype=np.float64).reshape(-1))
        if unique.size == 1:
            out[str(name)] = float(unique[0])
    return out


def available_scenarios() -> list[str]:
    """Names of the synthetic scenarios in :mod:`dynid.sim`."""
    import dynid.sim

    return sorted(
        m.name for m in pkgutil.iter_modules(dynid.sim.__path__) if m.name not in _NOT_SCENARIOS
    )


def scenario_module(name: str, where: str) -> Any:
    """The :mod:`dynid.sim` module of scenario ``name`` (it offers ``simulate(seed, ...)``).

    Raises:
        ProblemFileError: ``name`` is not a scenario; ``where`` prefixes the message.
    """
    known = available_scenarios()
    if name not in known:
        raise ProblemFileError(f"{where}: unknown scenario {name!r}; available: {known}")
    return importlib.import_module(f"dynid.sim.{name}")


def read_problem_file(source: str | Path | Mapping[str, Any]) -> ProblemFile:
    """Read and validate a problem file (everything except the data, which come later).

    Args:
        source: path of the YAML file, or the parsed mapping.

    Raises:
        ProblemFileError: unknown keys, unknown robot, URDF or joint, invalid attachment,
            unknown parameter names, reversed bounds, unknown estimator (one line each).
    """
    config, path, origin = _load_yaml(source)
    _check_keys(config, _TOP_KEYS, "top level", origin)
    for required in ("robot", "parameters", "data"):
        if required not in config:
            raise ProblemFileError(f"{origin}: {required}: section is missing")
    base = path.parent if path is not None else None
    robot = _load_robot(_mapping(config["robot"], "robot", origin), base, origin)
    robot = _attach(robot, config.get("attachments"), origin)
    spec = _load_spec(
        config["parameters"],
        robot,
        origin,
        _mapping(config.get("simulation"), "simulation", origin),
    )
    truth = _load_truth(config.get("truth"), spec, origin)
    config["data"] = _check_data(config["data"], origin)
    _check_sections(config, robot, origin)
    estimator = _load_estimator(config.get("estimator"), origin)
    name = str(config.get("name") or (path.stem if path is not None else "problem"))
    return ProblemFile(
        path=path,
        name=name,
        config=config,
        robot=robot,
        spec=spec,
        truth=truth,
        estimator=estimator,
    )


def load_problem(
    source: str | Path | Mapping[str, Any],
    *,
    bag: str | Path | None = None,
    dataset: Dataset | None = None,
    device: str | None = None,
) -> tuple[Problem, ProblemFile]:
    """Read a problem file, load its data and build the :class:`Problem`.

    Args:
        source: problem file path or mapping.
        bag: recording to read instead of ``data.path`` (bag sources).
        dataset: already loaded trajectories (skips reading; still preprocessed).
        device: torch device overriding ``simulation.device``.

    Returns:
        ``(problem, problem_file)``; ``problem_file.estimator`` holds the estimator defaults.
    """
    pf = read_problem_file(source)
    data = pf.preprocess(dataset) if dataset is not None else pf.load_dataset(bag)
    return pf.build(data, device=device), pf
