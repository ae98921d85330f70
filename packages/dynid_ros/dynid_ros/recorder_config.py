"""The recorder's parameters: declared with descriptors, validated, turned into a ``BagLayout``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from rclpy.node import Node

from dynid.data import BagLayout, CommandTopic, JointStateTopic, MocapTopic, StorageFormat, TfLookup
from dynid_ros import conversions as cv
from dynid_ros import params
from dynid_ros.errors import ParameterError
from dynid_ros.segmenter import SegmentMode


@dataclass
class RecorderConfig:
    """The recorder's validated parameters."""

    layout: BagLayout
    rate_hz: float
    max_buffer_s: float
    max_input_rate_hz: float
    mode: SegmentMode
    output_dir: Path
    storage: StorageFormat
    world_frame: str
    auto: dict[str, float] = field(default_factory=dict)
    diagnostics_period_s: float = 1.0
    spool: bool = True
    max_unwritten_mb: float = 1024.0
    max_stamp_ahead_s: float = 10.0

    @property
    def capacity(self) -> int:
        """Ring-buffer length in samples: ``max_buffer_s × max_input_rate_hz``."""
        return max(math.ceil(self.max_buffer_s * self.max_input_rate_hz), 16)


def _split(entry: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in entry.split(",") if x.strip())


def read_config(node: Node) -> RecorderConfig:
    """Declare the recorder's parameters and validate them (``ParameterError`` on bad ones)."""
    d = params.declare
    js_topic = d(
        node,
        "joint_state_topic",
        "/joint_states",
        "sensor_msgs/JointState topic (Franka: /franka/joint_states at 1 kHz)",
    )
    joints = d(
        node,
        "joints",
        [],
        "joints to record in column order; empty: all of the first message",
        item=str,
    )
    scale = d(
        node,
        "effort_scale",
        [],
        "per-joint factor raw effort -> N*m (or N), one per joint or empty",
        item=float,
    )
    if scale and len(scale) != len(joints):
        raise ParameterError(
            f"parameter 'effort_scale' has {len(scale)} entries for {len(joints)} 'joints'"
        )
    m_topics = d(node, "mocap_topics", [], "mocap pose topics", item=str)
    m_types = d(node, "mocap_types", [], "PoseStamped | TransformStamped per mocap topic", item=str)
    m_bodies = d(node, "mocap_bodies", [], "observation name prefix per mocap topic", item=str)
    params.same_length({"mocap_topics": m_topics, "mocap_types": m_types,
                        "mocap_bodies": m_bodies})  # fmt: skip
    for t in m_types:
        params.choice("mocap_types", t, ["PoseStamped", "TransformStamped"])
    corrected = d(
        node,
        "stamps_latency_corrected",
        True,
        "mocap header stamps are capture times (ros2-vicon-bridge: true)",
    )
    latency = params.positive(
        "mocap_latency_s",
        d(node, "mocap_latency_s", 0.0, "s subtracted from uncorrected mocap stamps"),
        allow_zero=True,
    )
    tf_frames = d(
        node, "tf_frames", [], "frames looked up in /tf relative to world_frame", item=str
    )
    world = d(node, "world_frame", "world", "frame of mocap observations")
    c_topics = d(node, "command_topics", [], "control-signal topics", item=str)
    c_types = d(
        node,
        "command_types",
        [],
        "JointState | Float64MultiArray | JointTrajectory per command topic",
        item=str,
    )
    c_fields = d(
        node,
        "command_fields",
        [],
        "comma-separated joint fields per command topic (default position)",
        item=str,
    )
    c_labels = d(node, "command_labels", [], "channel prefix per command topic", item=str)
    c_names = d(
        node,
        "command_names",
        [],
        "comma-separated entry names (Float64MultiArray) or joint selection per command topic",
        item=str,
    )
    params.same_length(
        {"command_topics": c_topics, "command_types": c_types, "command_fields": c_fields,
         "command_labels": c_labels, "command_names": c_names},
        optional=("command_fields", "command_labels", "command_names"),
    )  # fmt: skip
    commands = []
    for i, (topic, short) in enumerate(zip(c_topics, c_types, strict=True)):
        params.choice("command_types", short, ["JointState", "Float64MultiArray",
                                               "JointTrajectory"])  # fmt: skip
        names = _split(c_names[i]) if c_names else ()
        commands.append(CommandTopic(
            topic=topic, msgtype=cv.SHORT_TYPES[short],
            label=c_labels[i] if c_labels else "",
            fields=(_split(c_fields[i]) if c_fields and c_fields[i] else ("position",)),
            names=names or None,
        ))  # fmt: skip
    scales = dict(zip(joints, scale, strict=True)) if scale else {}
    layout = BagLayout(
        joint_states=JointStateTopic(js_topic, tuple(joints) or None, scales),
        mocap=tuple(
            MocapTopic(b, t, cv.SHORT_TYPES[k], corrected, latency)
            for t, k, b in zip(m_topics, m_types, m_bodies, strict=True)
        ),
        tf=tuple(TfLookup(f, world, f) for f in tf_frames),
        commands=tuple(commands),
    )
    mode = SegmentMode(
        params.choice(
            "segment_mode",
            d(node, "segment_mode", "service", "service (~/start, ~/stop) | auto (by excitation)"),
            ["service", "auto"],
        )
    )
    auto = {
        "threshold": params.positive("auto_speed_threshold", d(node, "auto_speed_threshold", 0.05,
                                     "joint speed (rad/s) counting as motion")),
        "quiet_s": params.positive("auto_quiet_s", d(node, "auto_quiet_s", 1.0,
                                   "rest time (s) that ends an automatic segment")),
        "pre_s": params.positive("auto_pre_s", d(node, "auto_pre_s", 0.2,
                                 "time (s) before the motion kept"), allow_zero=True),
        "min_duration_s": params.positive("auto_min_duration_s", d(node, "auto_min_duration_s",
                                          0.5, "shorter automatic segments are dropped (s)")),
    }  # fmt: skip
    return RecorderConfig(
        layout=layout,
        rate_hz=params.positive("rate_hz", d(node, "rate_hz", 0.0, "model grid rate (Hz); 0: "
                                "the joint-state stamps"), allow_zero=True),
        max_buffer_s=params.positive("max_buffer_s", d(node, "max_buffer_s", 60.0,
                                     "ring-buffer span (s)")),
        max_input_rate_hz=params.positive("max_input_rate_hz", d(node, "max_input_rate_hz",
                                          1200.0, "highest stream rate (Hz); sizes the buffers")),
        mode=mode,
        output_dir=Path(d(node, "output_dir", "dynid_recordings", "folder of segment bags"))
        .expanduser(),
        storage=StorageFormat(params.choice("storage", d(node, "storage", "mcap",
                              "bag storage"), ["mcap", "sqlite3"])),
        world_frame=world,
        auto=auto,
        diagnostics_period_s=params.positive("diagnostics_period_s", d(
            node, "diagnostics_period_s", 1.0, "period of /diagnostics (s)")),
        spool=d(node, "spool", True, "write the open segment to output_dir/spool as it arrives "
                "(a crash loses at most 0.5 s)"),
        max_unwritten_mb=params.positive("max_unwritten_mb", d(
            node, "max_unwritten_mb", 1024.0, "memory (MiB) for segments the disk refused, "
            "kept and retried; beyond it the oldest is given up")),
        max_stamp_ahead_s=params.positive("max_stamp_ahead_s", d(
            node, "max_stamp_ahead_s", 10.0, "a stream's first stamp further ahead of the node "
            "clock (s) waits for two more messages confirming it")),
    )  # fmt: skip
