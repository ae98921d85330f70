"""The schema of problem files: every section, its keys and types, parsed once into dataclasses.

A :class:`ProblemConfig` holds one dataclass per section; :mod:`dynid.problem_file.parse` reads
the YAML (``yaml.safe_load`` only) and builds it in one pass that checks every key and type, and
the rest of :mod:`dynid.problem_file` reads only the typed sections. Every error is a
:class:`~dynid.problem_file.errors.ProblemFileError` whose one-line message names the file and the
key (``robot.urdf``, ``parameters[2].name``, ``data.window``, ``simulation.soft_block.joint``,
``estimator.name`` ...). Relative paths are relative to the problem file's directory. What needs
the robot (parameter names, observed joints, frames) is checked when it is built
(:mod:`dynid.problem_file.model`, :mod:`dynid.problem_file.build`).

The user's reference, every key with its type, default and unit, is
``docs/guide/problem-file.md``; ``tests/unit/test_docs.py`` checks it against the parser.

Schema (top-level keys; only ``robot``, ``parameters`` and ``data`` are required)::

    name: panda_box                    # short name for reports and files (default: file stem)
    description: free text             # optional

    robot:                             # exactly one of name / urdf
      name: panda                      # dynid.model.robot.load_robot name: panda,
                                       #   open_manipulator_x, double_pendulum, furuta,
                                       #   planar_dice
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
      # groups, expanded on the robot (dynid.model.params.InertialGroup, JointGroup):
      # - group: inertials             # <link>/log_cholesky_0..9 of every listed link, with
      #   links: all                   #   Gaussian priors about the URDF's values
      #   log_std: 0.5                 # σ of α = ½ ln m and ln d1..d3
      #   length_std: 0.05             # m: σ of s12, s23, s13 and the centre of mass
      #   width: 6                     # bounds at the prior mean ± width σ
      # - group: joints                # the same fields on every listed joint
      #   joints: all
      #   fields:                      # field: a parameter entry without its name
      #     damping: {lower: 0.0, upper: 5.0}
      #     torque_offset: {lower: -5.0, upper: 5.0, prior: gaussian, mean: 0.0, std: 1.0}

    truth: {box/weight1_x: -0.08}      # optional known values (synthetic data), shown in reports

    data:
      source: bag                      # bag (default) | npz | ibm_pendulum | scenario |
                                       #   planar_dice
      # --- source: bag (path from `dynid fit --bag`, else data.path) ---------------------
      path: ../../build/panda_box.mcap # optional default bag, or a list of bags; a path
                                       #   "shared:<dir>" is in the shared recordings
                                       #   (dynid.resources.shared_data_dir, DYNID_DATA_DIR)
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
      max_skipped_percent: 5           # refuse the recording when the reader skipped more than
                                       #   this share of one topic's messages (invalid fields,
                                       #   stamps going backwards or repeated); the read summary
                                       #   is printed by dynid fit and kept in posterior.yaml
                                       #   and the report (dynid fit --max-skipped-percent)
      # --- source: npz -------------------------------------------------------------------
      # path: recording.npz            # dynid.data.Dataset.save_npz file
      # --- source: ibm_pendulum (the real IBM double-pendulum recordings) ----------------
      # runs: [0]                      # run numbers; start: 0; max_samples: 400
      # --- source: planar_dice (the real planar dice drops, residual-contact paper) -------
      # drops: 1-30                    # drop numbers: a list, or an inclusive range "a-b"
      # path: shared:planar-dice       # directory holding real/ (default: the shared one)
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
      # effort_delay: 0.0              # inverse_dynamics: s after its stamp at which an effort
                                       #   acts (a torque held over a period Δt: Δt/2)
      # process_std: 1.0e-3            # one-step transition noise (filters): scalar or 2 nv

    simulation:
      substeps: 1                      # integrator substeps per data step
      backend: torch                   # torch | pinocchio
      device: cpu                      # torch device (dynid fit --device overrides)
      model: rigid                     # rigid | soft_block (dynid.objective.simulation) |
                                       #   planar_impact: the square of robot planar_dice
                                       #   dropped on the ground, dice/friction and
                                       #   dice/restitution free (dynid.objective.impact)
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

    validation:                        # held-out data every fit is scored on (dynid.validation)
      bags: [shared:panda-gaz2019/repeat]   # held-out recordings read like data (bag sources);
                                       #   relative to the file or "shared:"
      fraction: 0.2                    # without bags: the last fraction of each trajectory is
                                       #   held out of the fit (default 0.2)
      # data: {drops: 401-450}         # or other data of a non-bag source: its keys replaced
                                       #   (drops, runs, path, settings ...); one of the three

    estimator:                         # the estimator `dynid fit` and the node run by default
      name: csvgd                      # dynid.estimators.registry.available_estimators()
      settings: {num_particles: 32, max_iterations: 300, learning_rate: 0.01, seed: 0}
                                       # over the estimator's own defaults (its class's
                                       #   defaults_file), only when `name` is the one
                                       #   run; CLI flags and node parameters override them
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dynid.data.pipeline import FramePoints, Preprocessing
from dynid.estimators.registry import EstimatorDefaults
from dynid.model.params import InertialGroup, JointGroup, ParameterSpec
from dynid.model.robot import RobotModel
from dynid.problem import LikelihoodSettings
from dynid.problem_file.sources import DataSource

__all__ = [
    "AttachmentSection",
    "ControlKind",
    "ControlSection",
    "DataSection",
    "ExcitationSection",
    "Gains",
    "ObserveSection",
    "ProblemConfig",
    "RobotSection",
    "SimulationSection",
    "SoftBlockSection",
    "ValidationSection",
    "file_origin",
]

ControlKind = Literal["torque", "current", "pd", "prescribed", "none"]
Gains = float | tuple[float, ...]


@dataclass(frozen=True)
class RobotSection:
    """``robot``: a robot by name or from a URDF file.

    Attributes:
        name: a :func:`dynid.model.robot.load_robot` name, or ``None``.
        urdf: the URDF file (it exists), or ``None``; exactly one of ``name`` and ``urdf`` is set.
        locked_joints: joint -> fixed position (rad or m).
        gravity: m/s² in the world frame, or ``None`` for the robot's default.
        limits: joint limits the URDF lacks or that replace its own, for excitation design:
            ``{"acceleration"|"jerk"|"velocity"|"effort": one value or one per joint}``
            (rad/s², rad/s³, rad/s, N·m; m for prismatic joints).
    """

    name: str | None
    urdf: Path | None
    locked_joints: dict[str, float]
    gravity: tuple[float, float, float] | None
    limits: dict[str, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ExcitationSection:
    """``excitation``: what an excitation motion must keep clear of (``dynid excite``).

    Attributes:
        position_margin: kept from the URDF position limits (rad or m).
        effort_fraction: share of the URDF effort limits the planned torques may use, leaving
            room for a wrong payload guess and the controller's feedback.
        min_distance: least distance between checked collision geometries (m).
        table_z: height of a table top in the world frame (m), or ``None``.
        boxes: ``(centre [3], size [3])`` of axis-aligned boxes in the world frame (m).
        workspace_frame: the frame kept inside ``workspace_lower..upper``, or ``None``.
        workspace_lower, workspace_upper: ``[3]`` world-frame corners of its box (m).
        sensor_noise: ``{"position": rad, "velocity": rad/s or None, "effort": N·m}`` white
            noise per sample of the recorded channels (velocity ``None``: not recorded); given,
            the predicted σ propagate it through the likelihood's preprocessing
            (:mod:`dynid.excite.noise`); ``None``: Cramér–Rao with ``likelihood.torque_std``.
    """

    position_margin: float = 0.05
    effort_fraction: float = 0.8
    min_distance: float = 0.01
    table_z: float | None = None
    boxes: tuple[tuple[tuple[float, float, float], tuple[float, float, float]], ...] = ()
    workspace_frame: str | None = None
    workspace_lower: tuple[float, float, float] | None = None
    workspace_upper: tuple[float, float, float] | None = None
    sensor_noise: dict[str, float | None] | None = None


@dataclass(frozen=True)
class AttachmentSection:
    """An ``attachments`` entry: ``attach(robot, **arguments)``, keys checked against it.

    Attributes:
        type: the attachment's name, an entry point of group ``dynid.attachments``
            (dynid's own: ``payload``, ``universal_box``, ``sphere_in_container``).
        attach: the function registered under that name.
        arguments: its keyword arguments after the robot.
    """

    type: str
    attach: Callable[..., RobotModel]
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ControlSection:
    """``control``: how the recorded inputs drive the simulation.

    Attributes:
        type: ``torque``, ``current``, ``pd``, ``prescribed`` or ``none``.
        actuated: joints driven, in input order (``None``: all joints; required by
            ``prescribed``).
        inputs: input channels (required by ``pd`` and ``current``; ``None``: the type's default).
        kp, kd: PD gains (N·m/rad, N·m·s/rad), scalar or per actuated joint (``pd`` only).
        torque_constant: N·m per current unit, scalar or per actuated joint (``current``;
            ``None``: the ``<joint>/motor_gain`` parameters).
    """

    type: ControlKind = "torque"
    actuated: tuple[str, ...] | None = None
    inputs: tuple[str, ...] | None = None
    kp: Gains | None = None
    kd: Gains | None = None
    torque_constant: Gains | None = None


@dataclass(frozen=True)
class ObserveSection:
    """``observe``: the channels the likelihood compares.

    Attributes:
        joints: ``"all"``, ``"none"`` or the joints whose positions are observed.
        velocities: also the joint velocities.
        frame_points: mocap points fixed on frames.
        frame_poses: frames observed as poses.
    """

    joints: Literal["all", "none"] | tuple[str, ...] = "all"
    velocities: bool = False
    frame_points: tuple[FramePoints, ...] = ()
    frame_poses: tuple[str, ...] = ()


@dataclass(frozen=True)
class SoftBlockSection:
    """``simulation.soft_block``: the FEM block squeezed by a gripper.

    Attributes:
        joint: the gripper's prismatic joint.
        size: block size (m).
        cells: hexahedra per axis (five tetrahedra each).
        squeeze: the other keyword arguments of :class:`~dynid.model.soft_block.GripperSqueeze`
            given (``material``, ``axis``, ``direction``, ``density`` kg/m³, ``damping`` 1/s,
            ``mass_scaling``), of their types; those not given keep its defaults.
    """

    joint: str
    size: tuple[float, ...] = (0.03, 0.03, 0.03)
    cells: tuple[int, ...] = (1, 1, 1)
    squeeze: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulationSection:
    """``simulation``: the simulator of the objective.

    Attributes:
        substeps: integrator substeps per data step.
        backend: ``torch`` or ``pinocchio``.
        device: torch device.
        model: ``rigid``, ``soft_block`` or ``planar_impact``.
        soft_block: the block (set exactly when ``model`` is ``soft_block``).
    """

    substeps: int = 1
    backend: Literal["torch", "pinocchio"] = "torch"
    device: str = "cpu"
    model: Literal["rigid", "soft_block", "planar_impact"] = "rigid"
    soft_block: SoftBlockSection | None = None


@dataclass(frozen=True)
class DataSection:
    """``data``: where the trajectories come from and how they are preprocessed.

    Attributes:
        source: the source of kind ``data.source`` (:mod:`dynid.problem_file.sources`).
        preprocessing: what is done to every trajectory after reading.
    """

    source: DataSource
    preprocessing: Preprocessing = field(default_factory=Preprocessing)


@dataclass(frozen=True)
class ValidationSection:
    """``validation``: the held-out data a fit is scored on.

    Attributes:
        bags: held-out recordings, read with the data section's topics (bag sources).
        fraction: without bags, the last ``fraction`` of each trajectory is held out of the fit.
        source: other data of the data section's (non-bag) source, its keys replaced by
            ``validation.data`` (``drops``, ``runs``, ``path``, ``settings`` ...); ``None``:
            bags or fraction. Exactly one of ``bags``, ``fraction`` and ``source`` is given.
    """

    bags: tuple[Path, ...] = ()
    fraction: float | None = 0.2
    source: DataSource | None = None


@dataclass(frozen=True)
class ProblemConfig:
    """A problem file parsed: every section checked and typed; nothing is built yet.

    Attributes:
        path: the file (``None`` for a mapping).
        name: problem name (default: the file stem).
        description: free text.
        robot, attachments: the robot and the objects attached to it, in order.
        parameters: the free parameters (names not yet checked against the robot).
        truth: known true values ``{name: value}``, or ``None`` (names checked against
            ``parameters`` with the robot, :func:`dynid.problem_file.model.build_robot`).
        data, control, observe, likelihood, simulation: the sections of those names.
        estimator: the estimator defaults (its settings resolved once to check them).
        parameter_groups: groups of parameters expanded on the robot after ``parameters``.
        validation: the held-out data, or ``None`` (no ``validation`` section).
        excitation: limits and obstacles of excitation design (defaults without the section).
    """

    path: Path | None
    name: str
    description: str
    robot: RobotSection
    attachments: tuple[AttachmentSection, ...]
    parameters: ParameterSpec
    truth: dict[str, float] | None
    data: DataSection
    control: ControlSection
    observe: ObserveSection
    likelihood: LikelihoodSettings
    simulation: SimulationSection
    estimator: EstimatorDefaults
    parameter_groups: tuple[InertialGroup | JointGroup, ...] = ()
    validation: ValidationSection | None = None
    excitation: ExcitationSection = field(default_factory=ExcitationSection)

    @property
    def origin(self) -> str:
        """How messages refer to the file: its path, else ``problem '<name>'``."""
        return file_origin(self.path, self.name)


def file_origin(path: Path | None, name: str) -> str:
    """How messages refer to a problem file: its path, else ``problem '<name>'``."""
    return str(path) if path is not None else f"problem {name!r}"
