"""Which bag topics hold what: one ``BagLayout`` drives both reading and writing of a bag.

Channel names produced from topics:

* joint states: columns of ``Trajectory.q/dq/effort`` in ``JointStateTopic.joints`` order;
* mocap (``MocapTopic``, ``TfLookup``): ``"<body>/x|y|z"`` (m) and ``"<body>/qx|qy|qz|qw"``;
* commands (``CommandTopic``): ``"[<label>/]<joint>/<field>"`` for ``JointState`` and
  ``JointTrajectory`` topics (field ``position|velocity|acceleration|effort``) and for
  ``JointTrajectoryControllerState`` (field ``<point>_<quantity>``, e.g. ``reference_position``);
  ``"[<label>/]<name>"`` for the entries of ``Float64MultiArray`` (``names`` required).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from dynid.data import messages as m
from dynid.data.errors import DataError

JOINT_FIELDS = ("position", "velocity", "acceleration", "effort")
#: The message types a mocap topic may have (reading takes the bag's, writing ``msgtype``).
MOCAP_TYPES = (m.POSE_STAMPED, m.TRANSFORM_STAMPED)
#: The message types a command topic may have.
COMMAND_TYPES = (m.JOINT_STATE, m.FLOAT64_MULTI_ARRAY, m.JOINT_TRAJECTORY, m.CONTROLLER_STATE)
CONTROLLER_POINTS = ("reference", "feedback", "error", "output")


class StampSource(Enum):
    """Which time a message is filed under."""

    HEADER = "header"  #: ``header.stamp`` (the sensor's or driver's time)
    RECEIVE = "receive"  #: the bag's receive/log time


class OutOfOrder(Enum):
    """What to do with a message whose stamp is earlier than the last accepted one of its topic."""

    SKIP = "skip"  #: count it in the summary and drop it
    SORT = "sort"  #: keep it and sort the topic's samples by stamp
    RAISE = "raise"  #: raise ``BagReadError`` naming topic and field


@dataclass(frozen=True)
class JointStateTopic:
    """A ``sensor_msgs/JointState`` topic with the measured joint signals.

    Attributes:
        topic: e.g. ``"/joint_states"`` or ``"/franka/joint_states"``.
        joints: joints to read, in column order; ``None`` takes the first message's names.
        effort_scale: per-joint factor from the raw ``effort`` field to N·m (or N); e.g. the
            OpenManipulator-X reports Dynamixel present-current counts. Unlisted joints: 1.
        read_velocity: read ``velocity`` when messages carry it.
        read_effort: read ``effort`` when messages carry it.
    """

    topic: str = "/joint_states"
    joints: tuple[str, ...] | None = None
    effort_scale: Mapping[str, float] = field(default_factory=dict)
    read_velocity: bool = True
    read_effort: bool = True


@dataclass(frozen=True)
class MocapTopic:
    """A mocap rigid body on a ``PoseStamped`` or ``TransformStamped`` topic.

    Attributes:
        body: name of the observation channels ``"<body>/x"`` ...
        topic: e.g. ``"/vicon/box/box"`` (ros2-vicon-bridge) or ``"/vrpn_mocap/box/pose"``.
        msgtype: type written by ``write_bag`` (one of ``MOCAP_TYPES``; any other is refused);
            reading accepts either pose type.
        stamps_latency_corrected: whether header stamps already are the capture time
            (ros2-vicon-bridge) or the receive time (ros2-vicon-receiver, vrpn_mocap).
        latency: s subtracted from the stamps when they are not latency-corrected.
    """

    body: str
    topic: str
    msgtype: str = m.POSE_STAMPED
    stamps_latency_corrected: bool = True
    latency: float = 0.0


@dataclass(frozen=True)
class TfLookup:
    """Pose of frame ``child`` relative to ``parent`` from ``tf2_msgs/TFMessage`` topics.

    The chain ``parent -> ... -> child`` is composed from the edges seen on ``topic`` and
    ``static_topic``; each edge is interpolated onto the chain's finest time base.
    """

    body: str
    parent: str
    child: str
    topic: str = "/tf"
    static_topic: str = "/tf_static"


@dataclass(frozen=True)
class CommandTopic:
    """A control-signal topic.

    Attributes:
        topic: e.g. ``"/franka/desired_joint_states"`` or
            ``"/joint_group_effort_controller/commands"``.
        msgtype: type written by ``write_bag`` (one of ``COMMAND_TYPES``); reading takes the
            bag's type.
        label: optional channel-name prefix, needed when two topics carry the same joints.
        fields: joint fields read (see module docstring).
        names: ``Float64MultiArray`` entry names (required there); for the joint-based types a
            joint selection (``None``: the first message's joints).
    """

    topic: str
    msgtype: str = m.JOINT_STATE
    label: str = ""
    fields: tuple[str, ...] = ("position",)
    names: tuple[str, ...] | None = None

    def channel(self, name: str, fld: str | None = None) -> str:
        """Channel name of joint/entry ``name`` and field ``fld``."""
        return "/".join(p for p in (self.label, name, fld) if p)

    def parse_channel(self, channel: str) -> tuple[str, str | None] | None:
        """Inverse of ``channel``: ``(name, field)`` or ``None`` when it is not this topic's."""
        rest = channel
        if self.label:
            if not channel.startswith(self.label + "/"):
                return None
            rest = channel[len(self.label) + 1 :]
        if self.msgtype == m.FLOAT64_MULTI_ARRAY:
            return (rest, None) if self.names and rest in self.names else None
        name, _, fld = rest.rpartition("/")
        if not name or fld not in self.fields:
            return None
        if self.names is not None and name not in self.names:
            return None
        return name, fld


@dataclass(frozen=True)
class BagLayout:
    """Topics of one recording setup; ``read_bag`` and ``write_bag`` share it."""

    joint_states: JointStateTopic = field(default_factory=JointStateTopic)
    mocap: tuple[MocapTopic, ...] = ()
    tf: tuple[TfLookup, ...] = ()
    commands: tuple[CommandTopic, ...] = ()
    stamps: StampSource = StampSource.HEADER

    def __post_init__(self) -> None:
        bodies = [x.body for x in self.mocap] + [x.body for x in self.tf]
        if len(set(bodies)) != len(bodies):
            raise DataError(f"BagLayout: mocap/tf body names must be unique, got {bodies}")
        for k, mocap in enumerate(self.mocap):
            if mocap.msgtype not in MOCAP_TYPES:
                raise DataError(
                    f"BagLayout: mocap[{k}].msgtype: {mocap.msgtype!r} (topic {mocap.topic!r}) is "
                    f"not one of {list(MOCAP_TYPES)}"
                )
        for k, cmd in enumerate(self.commands):
            if cmd.msgtype not in COMMAND_TYPES:
                raise DataError(
                    f"BagLayout: commands[{k}].msgtype: {cmd.msgtype!r} (topic {cmd.topic!r}) is "
                    f"not one of {list(COMMAND_TYPES)}"
                )
        for cmd in self.commands:
            allowed = _allowed_fields(cmd.msgtype)
            bad = [f for f in cmd.fields if allowed is not None and f not in allowed]
            if bad:
                raise DataError(
                    f"BagLayout: command topic {cmd.topic!r} ({cmd.msgtype}): unknown fields "
                    f"{bad}; expected some of {list(allowed or ())}"
                )
            if cmd.msgtype == m.FLOAT64_MULTI_ARRAY and not cmd.names:
                raise DataError(
                    f"BagLayout: command topic {cmd.topic!r} is a Float64MultiArray; give the "
                    "entry names (CommandTopic.names)"
                )

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> BagLayout:
        """Build a layout from a YAML-style mapping (``joint_states``, ``mocap``, ``tf``,
        ``commands`` and ``stamps`` keys; lists become tuples)."""

        def tup(v: Sequence[str] | None) -> tuple[str, ...] | None:
            return None if v is None else tuple(v)

        js = dict(config.get("joint_states", {}))
        if "joints" in js:
            js["joints"] = tup(js["joints"])
        commands = []
        for c in config.get("commands", []):
            c = dict(c)
            for key in ("fields", "names"):
                if key in c:
                    c[key] = tup(c[key])
            commands.append(CommandTopic(**c))
        return cls(
            joint_states=JointStateTopic(**js),
            mocap=tuple(MocapTopic(**x) for x in config.get("mocap", [])),
            tf=tuple(TfLookup(**x) for x in config.get("tf", [])),
            commands=tuple(commands),
            stamps=StampSource(config.get("stamps", "header")),
        )


def _allowed_fields(msgtype: str) -> tuple[str, ...] | None:
    if msgtype == m.JOINT_STATE:
        return ("position", "velocity", "effort")
    if msgtype == m.JOINT_TRAJECTORY:
        return JOINT_FIELDS
    if msgtype == m.CONTROLLER_STATE:
        return tuple(f"{p}_{f}" for p in CONTROLLER_POINTS for f in JOINT_FIELDS)
    return None
