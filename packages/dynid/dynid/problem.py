"""``Problem``: the objective every estimator works on — model, free parameters, data, likelihood.

A ``Problem`` ties together the robot model (with attachments), the ``ParameterSpec`` of the
free parameters, a ``Dataset`` of recorded trajectories, how controls become joint torques,
what is observed, and the likelihood settings. It is immutable: built once, its trajectories
checked and converted once to tensors on its device (:attr:`Problem.data`); a problem on other
data or with other likelihood settings is derived by :meth:`Problem.with_dataset` and
:meth:`Problem.with_likelihood`, which keep what stays valid (the built dynamics with their
recorded replay programs, the converted data).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from dynid import plugins
from dynid.errors import ProblemError

if TYPE_CHECKING:
    from dynid.data.trajectory import Dataset, Trajectory
    from dynid.model.params import DynamicParameters, ParameterSpec
    from dynid.model.robot import RobotModel
    from dynid.objective import Objective, Simulator

__all__ = ["LikelihoodSettings", "Observe", "Problem", "ProblemError", "TrajectoryTensors"]

Observe = Callable[[Any, "DynamicParameters", torch.Tensor, torch.Tensor], torch.Tensor]
"""``observe(dynamics, params, q [N, *B, nv], v [N, *B, nv]) -> y [N, *B, k]``."""


@dataclass(frozen=True)
class LikelihoodSettings:
    """How a parameter vector is scored against the data (:mod:`dynid.objective`).

    The likelihood is the entry point ``kind`` of group ``dynid.likelihoods``
    (:mod:`dynid.plugins`); dynid registers two:

    - ``"shooting"``: simulated observations against the recorded ones (csvgd paper, Sec. IV),
      with single or multiple shooting;
    - ``"inverse_dynamics"``: measured joint efforts against the torques the model needs for the
      recorded motion, ``τ = ID(q, q̇, q̈; θ)`` (the equation-error form of classical
      identification; lm paper eq. 3.10), with ``q̇, q̈`` from zero-phase filtered encoders.

    Attributes:
        kind: a registered likelihood: ``"shooting"``, ``"inverse_dynamics"`` or a plug-in's.
        obs_std: standard deviation of the Gaussian observation noise, one value for all
            channels or one per channel (units of each channel), eq. 2.
        shooting: ``"single"`` (eq. 3) or ``"multiple"`` shooting (eqs. 5–6).
        windows: number of shooting windows per trajectory (multiple shooting).
        defect_std: standard deviation of the defect terms when defects enter the likelihood
            instead of being constraints (the MCMC baselines; σ²_def ≈ 1e-2 in the paper).
        aggregate: ``"sum"`` of Gaussians over trajectories (eq. 9) or ``"product"`` (eq. 10).
        torque_std: standard deviation of the joint-effort noise of the inverse-dynamics
            likelihood (N·m or N), one value for all joints or one per joint.
        cutoff_hz: cut-off (Hz) of the zero-phase Butterworth low-pass applied to positions,
            velocities and efforts before differentiating (inverse-dynamics likelihood).
        stride: the inverse-dynamics likelihood scores every ``stride``-th filtered sample.
        trim_s: seconds cut at both ends of each trajectory before scoring (inverse dynamics),
            where the zero-phase filter and one-sided differences are least accurate.
        effort_delay: seconds after its stamp at which a recorded effort (and command) acts on
            the motion (inverse dynamics): the motion at ``t`` is scored against the efforts
            interpolated at ``t − effort_delay``. A torque held over a control period ``Δt``
            (a zero-order hold: a simulator's step, a drive's current loop) acts on average
            ``Δt/2`` after its stamp; torque sensors read at the stamp need 0. At most
            ``trim_s`` in magnitude; torque and current control only (a PD law's torque is
            computed from states and targets).
        process_std: standard deviation of the one-step process noise of
            :meth:`dynid.objective.Objective.transition`, one value or ``2 nv`` values (positions
            in rad or m, then velocities in rad/s or m/s).
    """

    kind: str = "shooting"
    obs_std: float | tuple[float, ...] = 0.01
    shooting: Literal["single", "multiple"] = "multiple"
    windows: int = 10
    defect_std: float = 0.1
    aggregate: Literal["sum", "product"] = "sum"
    torque_std: float | tuple[float, ...] = 0.1
    cutoff_hz: float = 20.0
    stride: int = 1
    trim_s: float = 0.1
    effort_delay: float = 0.0
    process_std: float | tuple[float, ...] = 1e-3

    def __post_init__(self) -> None:
        known = plugins.LIKELIHOODS.names()
        if self.kind not in known:
            raise ProblemError(
                f"likelihood.kind must be one of {'|'.join(known)}, got {self.kind!r}"
            )
        for key in ("obs_std", "torque_std", "process_std"):
            value = getattr(self, key)
            stds = np.atleast_1d(np.asarray(value, dtype=float))
            if stds.size == 0 or not (stds > 0).all() or not np.isfinite(stds).all():
                raise ProblemError(f"likelihood.{key} must be finite and > 0, got {value}")
        if not (math.isfinite(self.cutoff_hz) and self.cutoff_hz > 0):
            raise ProblemError(f"likelihood.cutoff_hz must be > 0 Hz, got {self.cutoff_hz}")
        if int(self.stride) != self.stride or self.stride < 1:
            raise ProblemError(f"likelihood.stride must be an integer ≥ 1, got {self.stride}")
        if not (math.isfinite(self.trim_s) and self.trim_s >= 0):
            raise ProblemError(f"likelihood.trim_s must be ≥ 0 s, got {self.trim_s}")
        if not (math.isfinite(self.effort_delay) and abs(self.effort_delay) <= self.trim_s):
            raise ProblemError(
                f"likelihood.effort_delay must be finite and at most trim_s = {self.trim_s} s in "
                f"magnitude, got {self.effort_delay}"
            )
        if self.shooting not in ("single", "multiple"):
            raise ProblemError(
                f"likelihood.shooting must be single|multiple, got {self.shooting!r}"
            )
        if self.aggregate not in ("sum", "product"):
            raise ProblemError(f"likelihood.aggregate must be sum|product, got {self.aggregate!r}")
        if self.windows < 1:
            raise ProblemError(f"likelihood.windows must be ≥ 1, got {self.windows}")
        if self.defect_std <= 0:
            raise ProblemError(f"likelihood.defect_std must be > 0, got {self.defect_std}")


@dataclass(frozen=True, eq=False)
class _JointMotion:
    """The joint motion of :class:`TrajectoryTensors` (``source``, ``q``, ``v``, as documented
    there) and what is read from it; what a trajectory outside a problem's data set is converted
    to for its states."""

    source: str
    q: torch.Tensor
    v: torch.Tensor | None

    @property
    def num_samples(self) -> int:
        """``T``."""
        return int(self.q.shape[0])

    def initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q0 [nv], v0 [nv])``: the first sample (zero velocity when there is none)."""
        q0 = self.q[0]
        return q0, self.v[0] if self.v is not None else torch.zeros_like(q0)

    def states(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q [T, nv], v [T, nv])``.

        Raises:
            ProblemError: the trajectory has no velocities (differentiate it first).
        """
        if self.v is None:
            raise ProblemError(
                f"trajectory {self.source} has no velocities; "
                "use dynid.data.preprocess to differentiate positions first"
            )
        return self.q, self.v


@dataclass(frozen=True, eq=False)
class TrajectoryTensors(_JointMotion):
    """One recorded trajectory as tensors of its problem's dtype and device, joints in the robot's
    order.

    Attributes:
        source: the trajectory's ``meta["source"]`` (``"unnamed"`` if none), for messages.
        q: ``[T, nv]`` joint positions (rad or m).
        v: ``[T, nv]`` joint velocities (rad/s or m/s); ``None`` when the recording has none.
        controls: ``[T, nu]`` control inputs (the problem's ``control_names``).
        targets: ``[T, k]`` measured values of the problem's ``obs_names``.
        effort: ``[T, nv]`` measured joint efforts (N·m or N); ``None`` when the recording has
            none.
    """

    controls: torch.Tensor
    targets: torch.Tensor
    effort: torch.Tensor | None


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything an estimator needs to score a parameter vector against recorded data.

    Attributes:
        robot: the robot model, attachments included.
        spec: the free parameters (names, bounds, prior, mapping to dynamic parameters).
        dataset: recorded trajectories, all on the simulator grid (``dt``).
        dt: simulator time step (s); the data grid step.
        control: control model ``control(params, q, v, u) -> tau`` or prescribed actuated
            motion (``dynid.model.integrate``).
        control_names: columns of each trajectory's ``command`` fed to ``control`` as ``u``;
            the single name ``"effort"`` means the measured joint efforts; names
            ``"<joint>/position|velocity|acceleration"`` absent from the commands are the joint's
            recorded state (acceleration by differencing the velocity).
        observe: observation function (see ``Observe``).
        obs_names: names of the observed channels, ``k`` of them; each is a column of the
            trajectories' ``obs`` or ``"<joint>/position"`` / ``"<joint>/velocity"``.
        likelihood: scoring settings.
        substeps: integrator substeps per data step.
        backend: ``"torch"`` (batched per-particle, any device) or ``"pinocchio"`` (C++ CPU).
        device: torch device of the simulation.
        dtype: torch dtype of the simulation (float64 for identification).
        name: short name used in reports and file names.
        truth: true parameter values when known (synthetic data), ``{name: value}``.
        simulator: the forward simulation of one trajectory
            (:class:`dynid.objective.RigidSimulation` by default, or the soft block).
        data: the ``dataset``'s trajectories as tensors (:class:`TrajectoryTensors`), in order;
            built with the problem.

    The tensors of :attr:`data` are shared by every reader: nobody writes into them.
    """

    robot: RobotModel
    spec: ParameterSpec
    dataset: Dataset
    dt: float
    control: Any
    control_names: list[str]
    observe: Observe
    obs_names: list[str]
    likelihood: LikelihoodSettings = field(default_factory=LikelihoodSettings)
    substeps: int = 1
    backend: Literal["torch", "pinocchio"] = "torch"
    device: str = "cpu"
    dtype: torch.dtype = torch.float64
    name: str = "problem"
    truth: dict[str, float] | None = None
    simulator: Simulator = field(default_factory=lambda: _rigid_simulation())
    data: tuple[TrajectoryTensors, ...] = field(init=False, repr=False)
    _rows: dict[int, int] = field(init=False, repr=False)  # id of a dataset trajectory → row

    def __post_init__(self) -> None:
        self._check_settings()
        data = tuple(self._convert(i, traj) for i, traj in enumerate(self.dataset))
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "_rows", {id(traj): k for k, traj in enumerate(self.dataset)})

    def _check_settings(self) -> None:
        if self.dt <= 0:
            raise ProblemError(f"dt must be > 0 s, got {self.dt}")
        if self.substeps < 1:
            raise ProblemError(f"substeps must be ≥ 1, got {self.substeps}")
        if len(self.dataset) == 0:
            raise ProblemError(f"problem {self.name!r} has no trajectories")
        stds = np.atleast_1d(np.asarray(self.likelihood.obs_std, dtype=float))
        if stds.size not in (1, len(self.obs_names)):
            raise ProblemError(
                f"likelihood.obs_std has {stds.size} values for {len(self.obs_names)} observed "
                f"channels {self.obs_names}"
            )
        nv = self.robot.nv
        for key, sizes in (("torque_std", (1, nv)), ("process_std", (1, 2 * nv))):
            count = np.atleast_1d(np.asarray(getattr(self.likelihood, key), dtype=float)).size
            if count not in sizes:
                raise ProblemError(
                    f"likelihood.{key} has {count} values; expected one of {sorted(set(sizes))} "
                    f"for joints {self.robot.joint_names}"
                )
        if self.truth is not None:
            unknown = sorted(set(self.truth) - set(self.spec.names))
            if unknown:
                raise ProblemError(f"truth names parameters not in the spec: {unknown}")

    def _convert(self, index: int, traj: Trajectory) -> TrajectoryTensors:
        """``traj`` checked against the problem and converted (errors name the trajectory)."""
        where = f"trajectory {index} ({traj.meta.get('source', 'unnamed')})"
        missing_joints = [j for j in self.robot.joint_names if j not in traj.joint_names]
        if missing_joints:
            raise ProblemError(f"{where} lacks joints of robot {self.robot.name}: {missing_joints}")
        steps = np.diff(traj.t)
        if not np.allclose(steps, self.dt, rtol=1e-6, atol=1e-9):
            raise ProblemError(
                f"{where} is not on the simulator grid dt={self.dt} s "
                f"(steps {steps.min():.6g}…{steps.max():.6g} s); resample it first"
            )
        return self._tensors(traj)  # raises naming a missing observation or control channel

    # ------------------------------------------------------------------ objective
    @cached_property
    def objective(self) -> Objective:
        """The objective every estimator scores parameters through (:mod:`dynid.objective`)."""
        from dynid.objective import Objective

        return Objective(self)

    # ------------------------------------------------------------------ model access
    @cached_property
    def dynamics(self) -> Any:
        """The dynamics backend (``TorchDynamics`` or ``PinocchioDynamics``) of ``robot``.

        Without the per-call state check: the recorded data are validated when the problem is
        built, and a particle whose simulation diverges must turn NaN on its own (the
        estimators report and drop it) instead of aborting the batched call for all particles.
        """
        if self.backend == "torch":
            from dynid.model.dynamics import TorchDynamics

            return TorchDynamics(
                self.robot, dtype=self.dtype, device=self.device, check_inputs=False
            )
        if self.backend == "pinocchio":
            from dynid.model.pinocchio_backend import PinocchioDynamics

            return PinocchioDynamics(self.robot, dtype=self.dtype, check_inputs=False)
        raise ProblemError(f"backend must be torch|pinocchio, got {self.backend!r}")

    def parameters(self, theta: torch.Tensor) -> DynamicParameters:
        """Per-particle dynamic parameters for ``theta [N, M]`` (SI units)."""
        return self.spec.apply(self.robot, theta)

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        """``array`` as a tensor of this problem's dtype and device."""
        return torch.as_tensor(np.asarray(array), dtype=self.dtype, device=self.device)

    @property
    def obs_std(self) -> torch.Tensor:
        """``[k]`` observation noise standard deviations."""
        stds = np.atleast_1d(np.asarray(self.likelihood.obs_std, dtype=float))
        return self.tensor(np.broadcast_to(stds, (len(self.obs_names),)).copy())

    # ------------------------------------------------------------------ data access
    def _joint_columns(self, traj: Trajectory) -> list[int]:
        return [traj.joint_names.index(j) for j in self.robot.joint_names]

    def _built(self, traj: Trajectory) -> TrajectoryTensors | None:
        """The tensors of ``traj`` if it is one of ``dataset``'s trajectories, else ``None``."""
        row = self._rows.get(id(traj))
        return self.data[row] if row is not None and self.dataset[row] is traj else None

    def tensors(self, traj: Trajectory) -> TrajectoryTensors:
        """``traj`` as tensors: those of :attr:`data` for a trajectory of ``dataset``, else
        converted now (not kept).

        Raises:
            ProblemError: ``traj`` lacks an observed or control channel (named).
        """
        built = self._built(traj)
        return built if built is not None else self._tensors(traj)

    def _tensors(self, traj: Trajectory) -> TrajectoryTensors:
        targets = self._targets(traj)  # a missing observed channel is named before a control
        controls = self._controls(traj)
        motion = self._joint_motion(traj)
        cols = self._joint_columns(traj)
        return TrajectoryTensors(
            source=motion.source,
            q=motion.q,
            v=motion.v,
            controls=controls,
            targets=targets,
            effort=self.tensor(traj.effort[:, cols]) if traj.effort is not None else None,
        )

    def _motion(self, traj: Trajectory) -> _JointMotion:
        """The joint motion of ``traj``: that of :attr:`data` for a trajectory of ``dataset``,
        else converted now (not kept)."""
        built = self._built(traj)
        return built if built is not None else self._joint_motion(traj)

    def _joint_motion(self, traj: Trajectory) -> _JointMotion:
        cols = self._joint_columns(traj)
        return _JointMotion(
            source=str(traj.meta.get("source", "unnamed")),
            q=self.tensor(traj.q[:, cols]),
            v=self.tensor(traj.dq[:, cols]) if traj.dq is not None else None,
        )

    def initial_state(self, traj: Trajectory) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q0 [nv], v0 [nv])`` of ``traj`` in the robot's joint order (zero v0 if absent)."""
        return self._motion(traj).initial_state()

    def states(self, traj: Trajectory) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q [T, nv], v [T, nv])`` of ``traj`` in the robot's joint order.

        Raises:
            ProblemError: the trajectory has no velocities (differentiate it first).
        """
        return self._motion(traj).states()

    def targets(self, traj: Trajectory) -> torch.Tensor:
        """``[T, k]`` measured values of ``obs_names`` in ``traj``."""
        built = self._built(traj)
        return built.targets if built is not None else self._targets(traj)

    def controls(self, traj: Trajectory) -> torch.Tensor:
        """``[T, nu]`` control inputs of ``traj`` (``control_names`` columns)."""
        built = self._built(traj)
        return built.controls if built is not None else self._controls(traj)

    def _targets(self, traj: Trajectory) -> torch.Tensor:
        return self.tensor(np.stack([self._channel(traj, n) for n in self.obs_names], axis=-1))

    def _controls(self, traj: Trajectory) -> torch.Tensor:
        if list(self.control_names) == ["effort"]:
            if traj.effort is None:
                raise ProblemError(
                    f"trajectory {traj.meta.get('source', 'unnamed')} has no effort column, "
                    "but the problem is torque-driven (control_names: [effort])"
                )
            return self.tensor(traj.effort[:, self._joint_columns(traj)])
        if not self.control_names:
            return self.tensor(np.zeros((len(traj.t), 0)))
        return self.tensor(np.stack([self._command(traj, n) for n in self.control_names], axis=-1))

    def _command(self, traj: Trajectory, name: str) -> np.ndarray:
        """Command channel ``name``; else, for prescribed motion, the joint's recorded
        ``"<joint>/position"`` or ``"<joint>/velocity"``, or ``"<joint>/acceleration"`` as the
        forward difference ``(q̇_{k+1} − q̇_k) / dt`` of its velocity (the mean acceleration over
        sample ``k``; the last sample repeats the one before)."""
        if traj.command is not None and name in traj.command_names:
            return traj.command[:, traj.command_names.index(name)]
        joint, _, quantity = name.rpartition("/")
        if joint in traj.joint_names and quantity in ("position", "velocity", "acceleration"):
            if quantity != "acceleration":
                return self._channel(traj, name)
            velocity = self._channel(traj, f"{joint}/velocity")
            if velocity.size < 2:
                raise ProblemError(
                    f"trajectory {traj.meta.get('source', 'unnamed')}: {name!r} needs at least "
                    "two samples to difference the velocity"
                )
            rate = np.diff(velocity) / np.diff(traj.t)
            return np.append(rate, rate[-1])
        raise ProblemError(
            f"trajectory {traj.meta.get('source', 'unnamed')} has no command channel "
            f"{name!r} (has {list(traj.command_names)}; joints {list(traj.joint_names)} give "
            "'<joint>/position|velocity|acceleration')"
        )

    def _channel(self, traj: Trajectory, name: str) -> np.ndarray:
        joint, _, quantity = name.rpartition("/")
        if quantity in ("position", "velocity") and joint in traj.joint_names:
            col = traj.joint_names.index(joint)
            if quantity == "position":
                return traj.q[:, col]
            if traj.dq is not None:
                return traj.dq[:, col]
        if traj.obs is not None and name in traj.obs_names:
            return traj.obs[:, traj.obs_names.index(name)]
        raise ProblemError(
            f"trajectory {traj.meta.get('source', 'unnamed')} has no observed channel {name!r} "
            f"(observations: {list(traj.obs_names)}, joints: {list(traj.joint_names)})"
        )

    # ------------------------------------------------------------------ derived problems
    def with_dataset(self, trajectories: Sequence[Trajectory]) -> Problem:
        """The same problem on other trajectories (e.g. held-out test runs).

        The new trajectories are checked and converted; the built dynamics (with their recorded
        replay programs) carry over.

        Raises:
            ProblemError: a trajectory does not fit the problem (named).
        """
        from dynid.data.trajectory import Dataset

        derived = replace(self, dataset=Dataset(list(trajectories)))
        if "dynamics" in self.__dict__:  # built, for the same robot, backend, device and dtype
            derived.__dict__["dynamics"] = self.__dict__["dynamics"]
        return derived

    def with_likelihood(self, **settings: Any) -> Problem:
        """The same problem and data scored with other likelihood settings, e.g.
        ``with_likelihood(stride=1)`` to score every filtered sample.

        The converted data and the built dynamics carry over; the objective is built anew.

        Args:
            settings: fields of :class:`LikelihoodSettings` to change.

        Raises:
            ProblemError: a setting is unknown or invalid.
        """
        unknown = sorted(set(settings) - set(LikelihoodSettings.__dataclass_fields__))
        if unknown:
            raise ProblemError(
                f"with_likelihood: unknown likelihood settings {unknown}; "
                f"known: {sorted(LikelihoodSettings.__dataclass_fields__)}"
            )
        derived = copy.copy(self)
        object.__setattr__(derived, "likelihood", replace(self.likelihood, **settings))
        derived.__dict__.pop("objective", None)
        derived._check_settings()
        return derived


def _rigid_simulation() -> Simulator:
    from dynid.objective.simulation import RigidSimulation

    return RigidSimulation()
