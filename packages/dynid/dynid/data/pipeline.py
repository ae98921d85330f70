"""The data of a problem once read: preprocessed in a fixed order, put on one time grid.

A problem file's ``data`` section is a source (:mod:`dynid.problem_file.sources` reads it) and
its :class:`Preprocessing`. :func:`preprocess_dataset` applies, in this order, the time window,
the zero-phase low-pass, the passive joints (:func:`solve_passive_joints`), the velocities, the
simulator step, the split and the selection; :func:`derive_frame_points` adds the mocap points
that the observations compare; and :func:`simulator_step` is the one step the trajectories
share. Every error is a
:class:`dynid.data.errors.DataSectionError` naming the problem-file key concerned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from dynid.data import preprocess
from dynid.data.align import uniform_grid
from dynid.data.errors import DataError, DataSectionError
from dynid.data.quaternion import rotate, to_matrix
from dynid.data.trajectory import Dataset, Trajectory
from dynid.model.errors import ModelError
from dynid.model.observe import AXIS_POINTS, FramePointObservation
from dynid.model.passive_ik import passive_joint_positions
from dynid.model.robot import RobotModel

__all__ = [
    "DEFAULT_MAX_SKIPPED_PERCENT",
    "FramePoints",
    "PassiveJoints",
    "Preprocessing",
    "derive_frame_points",
    "preprocess_dataset",
    "simulator_step",
    "solve_passive_joints",
]

Velocities = Literal["measured", "central", "backward", "forward"]
#: ``data.max_skipped_percent``: a recording whose reader skipped more than this share of one
#: topic's messages is refused rather than fitted (dynid fit --max-skipped-percent overrides it).
DEFAULT_MAX_SKIPPED_PERCENT = 5.0


@dataclass(frozen=True)
class PassiveJoints:
    """Joints the recording lacks, solved per sample from the mocap pose of a body.

    Attributes:
        joints: the passive joints.
        frame: the model frame the mocap sees.
        body: the mocap body (channels ``<body>/x|y|z|qx|qy|qz|qw``) whose frame is ``frame``.
    """

    joints: tuple[str, ...]
    frame: str
    body: str


@dataclass(frozen=True)
class Preprocessing:
    """What is done to every trajectory after reading, in this order (``None``: skipped).

    Attributes:
        window: ``(t0, t1)`` s from each trajectory's start: the time range kept.
        lowpass_hz: cut-off of the zero-phase Butterworth low-pass (Hz).
        passive_joints: joints solved from a mocap pose.
        velocities: ``measured`` keeps the recorded ``dq``; ``central``, ``backward`` or
            ``forward`` recompute it by finite differences.
        dt: the simulator step (s): the data are resampled, or low-passed and downsampled, onto
            it.
        split: cut each trajectory into pieces of this length (s).
        trajectories: indices of the trajectories kept (after the split).
    """

    window: tuple[float, float] | None = None
    lowpass_hz: float | None = None
    passive_joints: PassiveJoints | None = None
    velocities: Velocities = "measured"
    dt: float | None = None
    split: float | None = None
    trajectories: tuple[int, ...] | None = None


@dataclass(frozen=True)
class FramePoints:
    """Mocap points fixed on a model frame: observation channels ``<frame>/<point>/x|y|z``.

    Attributes:
        frame: the model frame.
        body: the mocap body whose pose is the frame's (channels ``<body>/x|y|z|qx|qy|qz|qw``),
            from which the points are computed when the data lack them.
        points: ``[P, 3]`` points in frame coordinates (m).
        point_names: ``P`` names, or ``None`` for :class:`FramePointObservation`'s defaults.
    """

    frame: str
    body: str
    points: tuple[tuple[float, ...], ...] = AXIS_POINTS
    point_names: tuple[str, ...] | None = None

    def observation(self) -> FramePointObservation:
        """The observation model of these points."""
        return FramePointObservation(self.frame, self.points, self.point_names)


def preprocess_dataset(dataset: Dataset, settings: Preprocessing, robot: RobotModel) -> Dataset:
    """``dataset`` preprocessed as ``settings`` say, in the order of :class:`Preprocessing`.

    Args:
        dataset: the trajectories as read.
        settings: the preprocessing.
        robot: the model the passive joints are solved on.

    Raises:
        DataSectionError: a step failed, a trajectory has no velocities, or a selected index is
            out of range.
    """
    trajectories = list(dataset)
    if settings.window is not None:
        t0, t1 = settings.window
        trajectories = _each(
            trajectories, "data.window", lambda tr: tr.slice(tr.t[0] + t0, tr.t[0] + t1)
        )
    if settings.lowpass_hz is not None:
        cutoff = settings.lowpass_hz
        trajectories = _each(
            trajectories,
            "data.lowpass_hz",
            lambda tr: preprocess.filter_trajectory(_uniform(tr, _grid_step(tr)), cutoff),
        )
    if settings.passive_joints is not None:
        passive = settings.passive_joints
        trajectories = _each(
            trajectories, "data.passive_joints", lambda tr: _with_passive(robot, tr, passive)
        )
    if settings.velocities != "measured":
        method = settings.velocities
        trajectories = _each(
            trajectories,
            "data.velocities",
            lambda tr: preprocess.with_velocities(tr, method=method),
        )
    if settings.dt is not None:
        dt = settings.dt
        trajectories = _each(trajectories, "data.dt", lambda tr: _on_grid(tr, dt))
    if settings.split is not None:
        split = settings.split
        pieces = _each(trajectories, "data.split", lambda tr: preprocess.split_windows(tr, split))
        trajectories = [piece for group in pieces for piece in group]
    for k, tr in enumerate(trajectories):
        if tr.dq is None:
            raise DataSectionError(
                "data.velocities",
                f"trajectory {k} has no measured velocities; set data.velocities: central",
            )
    selected = settings.trajectories
    if selected is not None:
        bad = [i for i in selected if not 0 <= i < len(trajectories)]
        if bad:
            raise DataSectionError(
                "data.trajectories", f"indices {bad} out of range 0..{len(trajectories) - 1}"
            )
        trajectories = [trajectories[i] for i in selected]
    return Dataset(trajectories)


def _each(trajectories: Sequence[Trajectory], key: str, step: Callable[[Trajectory], Any]) -> list:
    """``step`` applied to every trajectory; a failure names ``key``, the trajectory (source,
    topic, stamps, samples) and what went wrong."""
    out = []
    for k, traj in enumerate(trajectories):
        try:
            out.append(step(traj))
        except DataError as exc:
            reason = exc.reason if isinstance(exc, DataSectionError) else str(exc)
            raise DataSectionError(
                exc.key if isinstance(exc, DataSectionError) else key,
                f"{reason} (trajectory {k}, {traj.describe()})",
            ) from None
    return out


def _with_passive(robot: RobotModel, traj: Trajectory, passive: PassiveJoints) -> Trajectory:
    try:
        return solve_passive_joints(robot, traj, passive.joints, passive.frame, passive.body)
    except (ModelError, DataError) as exc:
        raise DataSectionError("data.passive_joints", str(exc)) from None


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


def derive_frame_points(traj: Trajectory, frame_points: Sequence[FramePoints]) -> Trajectory:
    """``traj`` with the channels of ``frame_points`` computed from mocap poses where missing.

    Raises:
        DataSectionError: ``observe.frame_points``: the trajectory has neither the channels nor
            the pose of the body.
    """
    new_names: list[str] = []
    new_cols: list[np.ndarray] = []
    for entry in frame_points:
        part = entry.observation()
        if all(n in traj.obs_names for n in part.names):
            continue
        try:
            position, quat = traj.pose(entry.body)
        except DataError:
            raise DataSectionError(
                "observe.frame_points",
                f"trajectory {traj.meta.get('source', '')!r} has neither the channels "
                f"{part.names[0]}... nor the mocap pose of body {entry.body!r} "
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


def simulator_step(dataset: Dataset) -> float:
    """The step (s) of the uniform time grid every trajectory of ``dataset`` is on.

    Raises:
        DataSectionError: ``data.dt``: a grid is not uniform, or the steps differ.
    """
    steps = set(_each(dataset, "data.dt", lambda tr: round(preprocess.uniform_step(tr.t), 12)))
    if len(steps) != 1:
        raise DataSectionError("data.dt", f"trajectories have different steps {sorted(steps)} s")
    return steps.pop()


def _grid_step(traj: Trajectory) -> float:
    """Median sample step (s) of ``traj``.

    Raises:
        DataError: fewer than 2 samples.
    """
    if traj.num_samples < 2:
        raise DataError(f"need at least 2 samples, got {traj.num_samples}")
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
