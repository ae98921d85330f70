"""Every conversion between ROS messages and dynid's core types, with validation at the edge.

Incoming messages (joint states, mocap poses, TF, commands, segments, particle sets) are checked
for lengths, finiteness and names; a bad one raises ``BadMessageError`` naming the field, so the
node can count it and go on. Outgoing messages are built from ``Trajectory`` and ``Posterior``.
Stamps are integer nanoseconds inside dynid; poses are rows ``(x, y, z, qx, qy, qz, qw)`` (m and
a unit quaternion, ROS order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, PoseWithCovarianceStamped
from numpy.typing import NDArray
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from dynid.data import CommandTopic, Trajectory
from dynid.data.errors import SegmentError
from dynid.data.messages import segment_to_trajectory as core_segment_to_trajectory
from dynid.posterior import Posterior, PosteriorError
from dynid_msgs.msg import EstimatorStatus, ParameterEstimate, ParticleSet, TrajectorySegment
from dynid_ros.errors import BadMessageError

Array = NDArray[np.float64]

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
TRANSFORM_STAMPED = "geometry_msgs/msg/TransformStamped"
#: Short names accepted in node parameters for the message types above.
SHORT_TYPES = {
    "JointState": JOINT_STATE,
    "Float64MultiArray": FLOAT64_MULTI_ARRAY,
    "JointTrajectory": JOINT_TRAJECTORY,
    "PoseStamped": POSE_STAMPED,
    "TransformStamped": TRANSFORM_STAMPED,
}
_QUAT_TOL = 1e-3  # |‖q‖ − 1| above this is not a unit quaternion (same tolerance as dynid.data)
_POINT_ATTRS = {"position": "positions", "velocity": "velocities",
                "acceleration": "accelerations", "effort": "effort"}  # fmt: skip


# ----------------------------------------------------------------------------------- time
def stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time`` as integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def checked_stamp_ns(stamp: Any, field: str = "header.stamp") -> int:
    """``stamp`` (``builtin_interfaces/Time`` or ``Duration``) as ns, validated.

    Raises:
        BadMessageError: ``nanosec`` is not below 1e9 or ``sec`` is negative (``field`` named).
    """
    if not 0 <= int(stamp.nanosec) < 1_000_000_000:
        raise BadMessageError(field, "nanosec not below 1e9")
    if int(stamp.sec) < 0:
        raise BadMessageError(field, "negative sec")
    return stamp_ns(stamp)


def ns_to_stamp(ns: int) -> Time:
    """Integer nanoseconds as ``builtin_interfaces/Time`` (non-negative)."""
    ns = max(int(ns), 0)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _vector(
    values: Any,
    n: int,
    field: str,
    *,
    optional: bool = False,
    names: Sequence[str] | None = None,
    index: Sequence[int] | None = None,
) -> Array | None:
    """``values`` as a float64 ``[n]`` array (``None`` when empty and ``optional``).

    The entries read must be finite: all of them, or with ``index`` only those (the joints
    recorded among the message's ``names``). A message may name joints that are not recorded,
    e.g. a gripper whose driver reports NaN for an interface it lacks; those are not checked.
    The error names the first non-finite joint when ``names`` are given.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0 and optional:
        return None
    if arr.shape != (n,):
        raise BadMessageError(field, f"expected {n} values (one per name), got {arr.size}")
    read = np.arange(n) if index is None else np.asarray(index, dtype=np.intp)
    bad = read[~np.isfinite(arr[read])]
    if bad.size:
        joint = "" if names is None else f" for joint {names[int(bad[0])]!r}"
        raise BadMessageError(field, f"non-finite value{joint}")
    return arr


# ----------------------------------------------------------------------------- joint states
@dataclass
class JointSample:
    """One validated joint-state measurement in the recorder's joint order.

    Attributes:
        stamp_ns: ``header.stamp`` (ns).
        position: ``[n]`` (rad or m).
        velocity: ``[n]`` (rad/s or m/s) or ``None`` when the stream carries none.
        effort: ``[n]`` (N·m or N, after the effort scale) or ``None``.
    """

    stamp_ns: int
    position: Array
    velocity: Array | None
    effort: Array | None


class JointStateConverter:
    """Validate ``sensor_msgs/JointState`` messages and select ``joints`` in their order.

    The first accepted message fixes which of velocity/effort the stream carries; later messages
    must carry the same. Messages may name more joints than requested (e.g. a gripper).

    Args:
        joints: joint names in column order; empty takes the first valid message's names.
        effort_scale: per-joint factors from the raw ``effort`` field to N·m (or N), one per
            joint in ``joints`` order, or empty for 1.
    """

    def __init__(self, joints: Sequence[str], effort_scale: Sequence[float] = ()) -> None:
        self.joints: tuple[str, ...] = tuple(joints)
        self._scale = np.asarray(effort_scale, dtype=np.float64) if len(effort_scale) else None
        self._names: tuple[str, ...] | None = None
        self._index: NDArray[np.intp] | None = None
        self.has_velocity: bool | None = None
        self.has_effort: bool | None = None

    def _select(self, names: tuple[str, ...]) -> NDArray[np.intp]:
        if names == self._names and self._index is not None:
            return self._index
        if not names or len(set(names)) != len(names):
            raise BadMessageError("name", "empty or repeated joint names")
        if not self.joints:
            self.joints = names
        missing = [j for j in self.joints if j not in names]
        if missing:
            raise BadMessageError("name", f"joints {missing} missing")
        self._names = names
        self._index = np.array([names.index(j) for j in self.joints], dtype=np.intp)
        return self._index

    def __call__(self, msg: Any) -> JointSample:
        """Validate ``msg`` (``sensor_msgs/JointState``); raises ``BadMessageError``."""
        names = tuple(msg.name)
        index = self._select(names)
        n = len(names)
        pos = _vector(msg.position, n, "position", names=names, index=index)
        vel = _vector(msg.velocity, n, "velocity", optional=True, names=names, index=index)
        eff = _vector(msg.effort, n, "effort", optional=True, names=names, index=index)
        if self.has_velocity is None:
            self.has_velocity, self.has_effort = vel is not None, eff is not None
        if self.has_velocity and vel is None:
            raise BadMessageError("velocity", "missing (earlier messages carried it)")
        if self.has_effort and eff is None:
            raise BadMessageError("effort", "missing (earlier messages carried it)")
        assert pos is not None
        effort = None
        if self.has_effort and eff is not None:
            effort = eff[index] if self._scale is None else eff[index] * self._scale
        return JointSample(
            checked_stamp_ns(msg.header.stamp),
            pos[index],
            vel[index] if self.has_velocity and vel is not None else None,
            effort,
        )


# ---------------------------------------------------------------------------------- poses
def pose_row(p: Any, o: Any, fields: tuple[str, str]) -> Array:
    """``[7]`` row from a position/translation ``p`` and quaternion ``o`` (normalised).

    Raises ``BadMessageError`` for non-finite values or a quaternion that is not unit length.
    """
    row = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w], dtype=np.float64)
    if not np.isfinite(row[:3]).all():
        raise BadMessageError(fields[0], "non-finite value")
    norm = float(np.linalg.norm(row[3:]))
    if not math.isfinite(norm) or abs(norm - 1.0) > _QUAT_TOL:
        raise BadMessageError(fields[1], "not a unit quaternion")
    row[3:] /= norm
    return row


def check_frame(frame_id: str, world: str) -> None:
    """Accept a mocap pose's ``header.frame_id`` only in the ``world`` frame.

    A leading ``/`` is ignored, and an empty ``frame_id`` (a driver that leaves it unset) is
    taken as ``world``. A pose in another frame (``map``, a camera) would be recorded as if it
    were in ``world``, so it is refused.

    Raises:
        BadMessageError: ``frame_id`` names another frame.
    """
    frame = frame_id.lstrip("/")
    if frame and frame != world.lstrip("/"):
        raise BadMessageError("header.frame_id", f"expected {world!r} (world_frame), got {frame!r}")


def pose_stamped_sample(msg: Any) -> tuple[int, Array]:
    """``(stamp_ns, row [7])`` of a ``geometry_msgs/PoseStamped``."""
    row = pose_row(msg.pose.position, msg.pose.orientation, ("pose.position", "pose.orientation"))
    return checked_stamp_ns(msg.header.stamp), row


def transform_stamped_sample(msg: Any) -> tuple[int, str, str, Array]:
    """``(stamp_ns, parent, child, row [7])`` of a ``geometry_msgs/TransformStamped``."""
    tr = msg.transform
    row = pose_row(tr.translation, tr.rotation, ("transform.translation", "transform.rotation"))
    parent, child = msg.header.frame_id.lstrip("/"), msg.child_frame_id.lstrip("/")
    if not parent or not child:
        raise BadMessageError("header.frame_id/child_frame_id", "empty frame name")
    return checked_stamp_ns(msg.header.stamp), parent, child, row


def tf_message_samples(
    msg: Any,
) -> tuple[list[tuple[int, str, str, Array]], list[BadMessageError]]:
    """The valid transforms of a ``tf2_msgs/TFMessage`` and the rejections of the others."""
    good, bad = [], []
    for tf in msg.transforms:
        try:
            good.append(transform_stamped_sample(tf))
        except BadMessageError as err:
            bad.append(BadMessageError(f"transforms.{err.field}", err.reason))
    return good, bad


# -------------------------------------------------------------------------------- commands
class CommandConverter:
    """Control signals of one command topic as rows of named channels.

    Channel names follow ``dynid.data.topics.CommandTopic.channel``: ``"[<label>/]<joint>/<field>"``
    for ``JointState`` / ``JointTrajectory`` and ``"[<label>/]<name>"`` for ``Float64MultiArray``.
    """

    def __init__(self, spec: CommandTopic) -> None:
        self.spec = spec
        self.joints: tuple[str, ...] | None = None if spec.names is None else tuple(spec.names)

    @property
    def channels(self) -> list[str]:
        """Column names (known after the first valid message for joint-based types)."""
        if self.spec.msgtype == FLOAT64_MULTI_ARRAY:
            return [self.spec.channel(n) for n in self.spec.names or ()]
        return [self.spec.channel(j, f) for f in self.spec.fields for j in self.joints or ()]

    def _joint_row(self, names: Sequence[str], getter: Any) -> Array:
        names = tuple(names)
        if not names or len(set(names)) != len(names):
            raise BadMessageError("name", "empty or repeated joint names")
        if self.joints is None:
            self.joints = names
        missing = [j for j in self.joints if j not in names]
        if missing:
            raise BadMessageError("name", f"joints {missing} missing")
        index = [names.index(j) for j in self.joints]
        parts = []
        for fld in self.spec.fields:
            values = _vector(getter(fld), len(names), fld, names=names, index=index)
            assert values is not None
            parts.append(values[index])
        return np.concatenate(parts)

    def __call__(self, msg: Any, receive_ns: int) -> list[tuple[int, Array]]:
        """``[(stamp_ns, row)]`` samples of ``msg``; ``receive_ns`` stamps header-less types."""
        kind = self.spec.msgtype
        if kind == FLOAT64_MULTI_ARRAY:
            names = self.spec.names or ()
            values = _vector(msg.data, len(names), "data")
            assert values is not None
            return [(receive_ns, values)]
        if kind == JOINT_STATE:
            row = self._joint_row(msg.name, lambda f: getattr(msg, f))
            return [(checked_stamp_ns(msg.header.stamp), row)]
        start = checked_stamp_ns(msg.header.stamp) or receive_ns  # zero stamp: "start now"
        out = []
        for point in msg.points:
            row = self._joint_row(
                msg.joint_names, lambda f, p=point: getattr(p, _POINT_ATTRS[f], ())
            )
            offset = checked_stamp_ns(point.time_from_start, "points.time_from_start")
            out.append((start + offset, row))
        if not out:
            raise BadMessageError("points", "empty trajectory")
        return out


# -------------------------------------------------------------------------------- segments
def _flat(x: Array | None) -> list[float]:
    return [] if x is None else np.ascontiguousarray(x, dtype=np.float64).ravel().tolist()


def trajectory_to_segment(traj: Trajectory, *, source: str, frame_id: str) -> TrajectorySegment:
    """A ``dynid_msgs/TrajectorySegment`` of ``traj``.

    ``header.stamp`` is the absolute time of the first sample (``meta["t0_ns"] + t[0]``), and
    ``time`` is relative to it (s); matrices are row-major ``[T, columns]``.
    """
    t0_ns = int(traj.meta.get("t0_ns", 0)) + round(float(traj.t[0]) * 1e9)
    msg = TrajectorySegment()
    msg.header.stamp = ns_to_stamp(t0_ns)
    msg.header.frame_id = frame_id
    msg.joint_names = list(traj.joint_names)
    msg.time = (traj.t - traj.t[0]).tolist()
    msg.position = _flat(traj.q)
    msg.velocity = _flat(traj.dq)
    msg.effort = _flat(traj.effort)
    msg.command_names = list(traj.command_names)
    msg.command = _flat(traj.command)
    msg.observation_names = list(traj.obs_names)
    msg.observation = _flat(traj.obs)
    msg.source = source
    return msg


def segment_to_trajectory(msg: Any) -> Trajectory:
    """A validated ``Trajectory`` of a ``TrajectorySegment`` (``t`` from 0 s, ``meta["t0_ns"]``).

    Raises ``BadMessageError`` naming the field whose length, values or names are wrong.
    """
    try:
        return core_segment_to_trajectory(msg, {"source": msg.source})
    except SegmentError as err:
        raise BadMessageError(err.field, err.reason) from err


# ------------------------------------------------------------------------------- posteriors
def posterior_to_particle_set(post: Posterior, *, stamp: Time, frame_id: str) -> ParticleSet:
    """A ``dynid_msgs/ParticleSet`` of ``post`` (values row-major ``[N, M]``)."""
    msg = ParticleSet()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.estimator = post.estimator
    msg.parameter_names = list(post.names)
    msg.units = list(post.units)
    msg.num_particles = post.num_particles
    msg.values = _flat(post.particles)
    assert post.log_weights is not None
    msg.log_weights = np.asarray(post.log_weights, dtype=np.float64).tolist()
    msg.log_likelihood = _flat(post.log_likelihood)
    msg.iteration = int(post.iteration)
    return msg


def particle_set_to_posterior(msg: Any) -> Posterior:
    """The ``Posterior`` of a ``ParticleSet``; raises ``BadMessageError`` on bad lengths."""
    N, M = int(msg.num_particles), len(msg.parameter_names)
    values = np.asarray(msg.values, dtype=np.float64)
    if N == 0 or M == 0 or values.size != N * M:
        raise BadMessageError("values", f"expected {N} x {M} values, got {values.size}")
    log_w = np.asarray(msg.log_weights, dtype=np.float64)
    if log_w.size != N:
        raise BadMessageError("log_weights", f"expected {N} values, got {log_w.size}")
    log_lik = np.asarray(msg.log_likelihood, dtype=np.float64)
    if log_lik.size not in (0, N):
        raise BadMessageError("log_likelihood", f"expected 0 or {N} values, got {log_lik.size}")
    try:
        return Posterior(
            particles=values.reshape(N, M),
            names=list(msg.parameter_names),
            units=list(msg.units),
            log_weights=log_w,
            log_likelihood=log_lik if log_lik.size else None,
            estimator=msg.estimator,
            iteration=int(msg.iteration),
        )
    except PosteriorError as err:
        raise BadMessageError("parameter_names/units", str(err)) from err


def posterior_to_estimate(post: Posterior, *, stamp: Time, frame_id: str) -> ParameterEstimate:
    """A ``dynid_msgs/ParameterEstimate``: mean, std, row-major covariance ``[M*M]`` and MAP."""
    msg = ParameterEstimate()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.names = list(post.names)
    msg.mean = post.mean().tolist()
    msg.std = post.std().tolist()
    msg.covariance = np.asarray(post.cov(), dtype=np.float64).ravel().tolist()
    msg.map = post.map().tolist()
    return msg


def status_message(
    *,
    stamp: Time,
    estimator: str,
    state: int,
    iteration: int = 0,
    loss: float = math.nan,
    elapsed_s: float = 0.0,
    message: str = "",
) -> EstimatorStatus:
    """A ``dynid_msgs/EstimatorStatus`` (``state`` one of its IDLE/RUNNING/CONVERGED/FAILED)."""
    msg = EstimatorStatus()
    msg.header.stamp = stamp
    msg.estimator = estimator
    msg.state = int(state)
    msg.iteration = int(iteration)
    msg.loss = float(loss)
    msg.elapsed_s = float(elapsed_s)
    msg.message = message
    return msg


# ------------------------------------------------------------------------------- RViz views
@dataclass(frozen=True)
class PointGroup:
    """Parameters that together are a point in a frame, e.g. ``box/weight1_x`` and ``_y``.

    Attributes:
        stem: ``"box/weight1"``; prefix: ``"box"`` (the frame unless mapped otherwise).
        columns: parameter column of x, y, z (``None`` for an axis that is not free: 0 m).
    """

    stem: str
    prefix: str
    columns: tuple[int | None, int | None, int | None]


def point_groups(names: Sequence[str]) -> list[PointGroup]:
    """Groups of ``<stem>_x|_y|_z`` parameters (at least two axes) in order of appearance."""
    stems: dict[str, list[int | None]] = {}
    for j, name in enumerate(names):
        stem, sep, axis = name.rpartition("_")
        if sep and axis in ("x", "y", "z") and "/" in stem:
            stems.setdefault(stem, [None, None, None])["xyz".index(axis)] = j
    groups = []
    for stem, cols in stems.items():
        if sum(c is not None for c in cols) >= 2:
            groups.append(PointGroup(stem, stem.split("/", 1)[0], (cols[0], cols[1], cols[2])))
    return groups


def _weight_colours(post: Posterior) -> list[ColorRGBA]:
    """Per-particle colours: blue (lowest weight) to red (highest)."""
    w = post.weights
    span = float(w.max() - w.min())
    level = (w - w.min()) / span if span > 0 else np.ones_like(w)
    return [ColorRGBA(r=float(a), g=0.2, b=float(1.0 - a), a=0.9) for a in level]


def _sphere_list(
    ns: str, ident: int, frame: str, stamp: Time, points: Array, colours: list[ColorRGBA]
) -> Marker:
    marker = Marker()
    marker.header.stamp = stamp
    marker.header.frame_id = frame
    marker.ns = ns
    marker.id = ident
    marker.type = Marker.SPHERE_LIST
    marker.action = Marker.ADD
    marker.pose.orientation.w = 1.0
    marker.scale.x = marker.scale.y = marker.scale.z = 0.01
    # particles an estimator excluded (weight 0) may be NaN: drawn at the origin, in blue
    points = np.nan_to_num(points, nan=0.0, posinf=0.0, neginf=0.0)
    marker.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]
    marker.colors = colours
    return marker


def posterior_markers(
    post: Posterior,
    *,
    stamp: Time,
    frames: Mapping[str, str],
    scatter_frame: str,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    scatter_spacing: float = 0.05,
    scatter_height: float = 0.5,
) -> MarkerArray:
    """Particles drawn where they live, one point per particle, coloured by weight.

    Point-like parameter groups (``<prefix>/<stem>_x|y|z``, e.g. box weight positions or a
    payload centre of mass) become a ``SPHERE_LIST`` in frame ``frames.get(prefix, prefix)``
    (m). Every other parameter ``j`` becomes a column of the scatter in ``scatter_frame``: at
    ``x = j * scatter_spacing`` (m), height ``scatter_height`` × its value normalised to its
    ``bounds`` (or to the particles' range).
    """
    colours = _weight_colours(post)
    array = MarkerArray()
    used: set[int] = set()
    for ident, group in enumerate(point_groups(post.names)):
        points = np.zeros((post.num_particles, 3))
        for axis, col in enumerate(group.columns):
            if col is not None:
                points[:, axis] = post.particles[:, col]
                used.add(col)
        frame = frames.get(group.prefix, group.prefix)
        array.markers.append(_sphere_list(group.stem, ident, frame, stamp, points, colours))
    rest = [j for j in range(post.dim) if j not in used]
    for k, j in enumerate(rest):
        values = post.particles[:, j]
        lo, hi = (bounds or {}).get(post.names[j], (float(values.min()), float(values.max())))
        scale = (values - lo) / (hi - lo) if hi > lo else np.full_like(values, 0.5)
        points = np.zeros((post.num_particles, 3))
        points[:, 0] = k * scatter_spacing
        points[:, 2] = scatter_height * scale
        array.markers.append(
            _sphere_list(f"scatter/{post.names[j]}", k, scatter_frame, stamp, points, colours)
        )
    return array


def clear_markers(stamp: Time) -> MarkerArray:
    """A ``MarkerArray`` deleting every marker of the publisher (after ``~/reset``)."""
    marker = Marker()
    marker.header.stamp = stamp
    marker.action = Marker.DELETEALL
    return MarkerArray(markers=[marker])


def point_covariance(
    post: Posterior, *, stamp: Time, frames: Mapping[str, str]
) -> PoseWithCovarianceStamped | None:
    """Mean and 3×3 covariance (m²) of the first point group (a COM where one is free).

    The pose's orientation is the identity; the rotational covariance block is zero. ``None``
    when the posterior has no point-like group.
    """
    groups = point_groups(post.names)
    if not groups:
        return None
    group = next((g for g in groups if g.stem.endswith("/com")), groups[0])
    mean, cov = post.mean(), post.cov()
    msg = PoseWithCovarianceStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frames.get(group.prefix, group.prefix)
    position = [0.0, 0.0, 0.0]
    covariance = np.zeros((6, 6))
    for a, ca in enumerate(group.columns):
        if ca is None:
            continue
        position[a] = float(mean[ca])
        for b, cb in enumerate(group.columns):
            if cb is not None:
                covariance[a, b] = cov[ca, cb]
    msg.pose.pose.position = Point(x=position[0], y=position[1], z=position[2])
    msg.pose.pose.orientation.w = 1.0
    msg.pose.covariance = covariance.ravel().tolist()
    return msg
