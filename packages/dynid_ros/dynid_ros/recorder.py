"""``recorder`` node: joint states, mocap, TF and commands into segments on the model grid.

Every input stream goes through ``conversions`` (validated; bad messages counted on
``/diagnostics`` and skipped) into a bounded ring buffer of stamped samples. A segment, cut by
``~/start`` / ``~/stop`` or automatically by excitation (``segmenter``), is aligned onto the joint
state stamps (or a uniform ``rate_hz`` grid) with ``dynid.data.align``, written to a bag in
``output_dir`` with ``dynid.data.write_bag``, and only then published on ``~/segment``. Writing
happens in a worker thread so the 1 kHz callbacks never wait on the disk. ``~/save`` writes the
whole buffer.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped, TransformStamped
from numpy.typing import NDArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from dynid.data import (
    CommandTopic,
    DataError,
    MocapTopic,
    TfLookup,
    write_bag,
)
from dynid.data import tf as tf_chain
from dynid_msgs.msg import TrajectorySegment
from dynid_ros import conversions as cv
from dynid_ros import qos
from dynid_ros.assemble import Snapshot, assemble
from dynid_ros.diagnostics import Diagnostics
from dynid_ros.errors import BadMessageError, ParameterError
from dynid_ros.recorder_config import read_config
from dynid_ros.ring import RingBuffer
from dynid_ros.run import run_node
from dynid_ros.segmenter import Cut, Segmenter, SegmentMode

_POSE = ("x", "y", "z", "qx", "qy", "qz", "qw")
_MAX_TF_EDGES = 64
_DRAIN = 200  # queued joint-state messages handled per executor callback


class Recorder(Node):
    """The recorder node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("recorder", **kwargs)
        self.config = cfg = read_config(self)
        self.diag = Diagnostics(self.get_fully_qualified_name())
        self.segmenter = Segmenter(cfg.mode, max_duration_s=cfg.max_buffer_s, **cfg.auto)
        age = round(cfg.max_buffer_s * 1e9)
        self._age_ns = age
        layout = cfg.layout
        self.js_topic = layout.joint_states.topic
        joints = layout.joint_states.joints or ()
        scale = [layout.joint_states.effort_scale.get(j, 1.0) for j in joints]
        self.js_conv = cv.JointStateConverter(joints, scale)
        self.js_buffer: RingBuffer | None = None
        self._last_q: NDArray[np.float64] | None = None
        self._last_js_ns: int | None = None
        self.pose_buffers = {m.topic: RingBuffer(7, cfg.capacity, age) for m in layout.mocap}
        self.cmd_convs = {c.topic: cv.CommandConverter(c) for c in layout.commands}
        self.cmd_buffers: dict[str, RingBuffer] = {}
        self.tf_edges: dict[tuple[str, str], RingBuffer] = {}
        self.tf_static: dict[tuple[str, str], tuple[float, ...]] = {}
        self._count = 0
        self._failed = 0  # segments the writer could not write
        self._truncated = 0  # segments whose start the ring buffer had overwritten
        # age of each joint-state stamp when its callback ran (ms), over the last 1000 messages:
        # the callback latency of a live stream whose stamps are wall-clock times
        self._ages = np.zeros(1000)
        self._age_index = 0
        self._jobs: queue.Queue[Snapshot | None] = queue.Queue()
        self.segment_pub = self.create_publisher(TrajectorySegment, "~/segment", qos.reliable(10))
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.reliable(10))
        # joint states: best effort, deep queue (1 kHz bursts); matches reliable publishers too
        self._js_sub = self.create_subscription(
            JointState, self.js_topic, self._on_joint_states, qos.sensor(1000)
        )
        for spec in layout.mocap:
            kind = PoseStamped if spec.msgtype == cv.POSE_STAMPED else TransformStamped
            # mocap bridges publish reliable (vicon) or best effort (vrpn): best effort takes both
            self.create_subscription(kind, spec.topic, self._pose_callback(spec), qos.sensor(100))
        if layout.tf:
            self._subscribe_tf()
        for spec in layout.commands:
            # commands: best effort, deep queue (controller rates up to 1 kHz)
            self.create_subscription(_command_type(spec.msgtype), spec.topic,
                                     self._command_callback(spec), qos.sensor(1000))  # fmt: skip
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_service(Trigger, "~/save", self._on_save)
        # wall-clock timers: they keep running when a replayed /clock stops
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics, clock=steady)
        self._last_arrival = time.monotonic()
        self.create_timer(0.1, self._check_stall, clock=steady)
        self._writer = threading.Thread(target=self._write_loop, name="segment-writer", daemon=True)
        self._writer.start()
        cfg.output_dir.mkdir(parents=True, exist_ok=True)
        self.get_logger().info(
            f"recording {self.js_topic} ({cfg.mode.value} segments, buffer "
            f"{cfg.max_buffer_s:g} s = {cfg.capacity} samples) into {cfg.output_dir}"
        )

    # ------------------------------------------------------------------ input callbacks
    def _reject(self, topic: str, err: BadMessageError) -> None:
        n = self.diag.rejected(topic, err.key)
        if n in (1, 10, 100, 1000) or n % 10000 == 0:
            self.get_logger().warning(f"{topic}: skipped a message ({err.key}); {n} so far")

    def _on_joint_states(self, msg: Any) -> None:
        """Handle ``msg`` and every message already queued behind it.

        Taking the queued messages here, instead of one executor round each, keeps up with
        1 kHz streams on a busy CPU; at most ``_DRAIN`` messages per call so services still run.
        """
        self._on_joint_state(msg)
        sub = self._js_sub
        for _ in range(_DRAIN):
            with sub.handle:
                taken = sub.handle.take_message(sub.msg_type, sub.raw)
            if taken is None:
                return
            self._on_joint_state(taken[0])

    def _on_joint_state(self, msg: Any) -> None:
        topic = self.js_topic
        self.diag.received(topic)
        try:
            s = self.js_conv(msg)
        except BadMessageError as err:
            self._reject(topic, err)
            return
        parts = [s.position] + [x for x in (s.velocity, s.effort) if x is not None]
        row = np.concatenate(parts) if len(parts) > 1 else s.position
        if self.js_buffer is None:
            self.js_buffer = RingBuffer(row.size, self.config.capacity, self._age_ns)
        if not self.js_buffer.push(s.stamp_ns, row):
            self._reject(topic, BadMessageError("header.stamp", "not after the previous message"))
            return
        self.diag.used(topic)
        self._last_arrival = time.monotonic()
        self._ages[self._age_index % self._ages.size] = (time.time_ns() - s.stamp_ns) * 1e-6
        self._age_index += 1
        speed = None
        if s.velocity is not None:
            speed = float(np.abs(s.velocity).max())
        elif self._last_q is not None and self._last_js_ns is not None:
            dt = (s.stamp_ns - self._last_js_ns) * 1e-9
            speed = float(np.abs(s.position - self._last_q).max() / dt)
        self._last_q, self._last_js_ns = s.position, s.stamp_ns
        for cut in self.segmenter.update(s.stamp_ns, speed):
            self._cut(cut, publish=True)

    def _pose_callback(self, spec: MocapTopic) -> Callable[[Any], None]:
        buffer = self.pose_buffers[spec.topic]
        shift = 0 if spec.stamps_latency_corrected else round(spec.latency * 1e9)

        def callback(msg: Any) -> None:
            self.diag.received(spec.topic)
            try:
                if spec.msgtype == cv.POSE_STAMPED:
                    stamp, row = cv.pose_stamped_sample(msg)
                    frame = msg.header.frame_id
                else:
                    stamp, frame, _, row = cv.transform_stamped_sample(msg)
                cv.check_frame(frame, self.config.world_frame)
            except BadMessageError as err:
                self._reject(spec.topic, err)
                return
            if buffer.push(stamp - shift, row):
                self.diag.used(spec.topic)
            else:
                self._reject(spec.topic, BadMessageError("header.stamp", "not after the previous "
                                                         "message"))  # fmt: skip

        return callback

    def _subscribe_tf(self) -> None:
        try:  # tf2_msgs comes with a system ROS; the Python wheels here lack it
            from tf2_msgs.msg import TFMessage
        except ImportError as err:
            raise ParameterError(
                "parameter 'tf_frames' needs tf2_msgs (TFMessage), which is not importable: "
                f"{err}; source a ROS 2 installation or use mocap_topics"
            ) from err
        tf, static = self.config.layout.tf[0].topic, self.config.layout.tf[0].static_topic
        # /tf: best effort takes reliable broadcasters too; /tf_static: latched
        self.create_subscription(TFMessage, tf, lambda m: self._on_tf(m, tf, False),
                                 qos.sensor(100))  # fmt: skip
        static_qos = qos.latched()
        static_qos.depth = 100
        self.create_subscription(TFMessage, static, lambda m: self._on_tf(m, static, True),
                                 static_qos)  # fmt: skip

    def _on_tf(self, msg: Any, topic: str, static: bool) -> None:
        self.diag.received(topic)
        good, bad = cv.tf_message_samples(msg)
        for err in bad:
            self._reject(topic, err)
        for stamp, parent, child, row in good:
            edge = (parent, child)
            if static:
                self.tf_static[edge] = tuple(row.tolist())
                continue
            buffer = self.tf_edges.get(edge)
            if buffer is None:
                if len(self.tf_edges) >= _MAX_TF_EDGES:
                    self._reject(topic, BadMessageError("transforms", "too many tf edges"))
                    continue
                buffer = self.tf_edges[edge] = RingBuffer(7, self.config.capacity, self._age_ns)
            if not buffer.push(stamp, row):
                self._reject(topic, BadMessageError("transforms.header.stamp", "not after the "
                                                    "previous transform of its edge"))  # fmt: skip
        self.diag.used(topic, len(good))

    def _command_callback(self, spec: CommandTopic) -> Callable[[Any], None]:
        conv = self.cmd_convs[spec.topic]

        def callback(msg: Any) -> None:
            self.diag.received(spec.topic)
            try:
                samples = conv(msg, self.get_clock().now().nanoseconds)
            except BadMessageError as err:
                self._reject(spec.topic, err)
                return
            buffer = self.cmd_buffers.get(spec.topic)
            if buffer is None:
                buffer = RingBuffer(samples[0][1].size, self.config.capacity, self._age_ns)
                self.cmd_buffers[spec.topic] = buffer
            for stamp, row in samples:
                if spec.msgtype == cv.JOINT_TRAJECTORY:  # later plans replace the tail
                    buffer.truncate_after(stamp)
                if not buffer.push(stamp, row):
                    self._reject(spec.topic, BadMessageError("header.stamp", "not after the "
                                                             "previous message"))  # fmt: skip
                    return
            self.diag.used(spec.topic)

        return callback

    def _check_stall(self) -> None:
        """Close an automatic segment when the joint states stop (robot off, bag finished)."""
        quiet = self.segmenter.quiet_ns * 1e-9
        if (
            self.config.mode is SegmentMode.AUTO
            and self.segmenter.active
            and time.monotonic() - self._last_arrival > quiet
        ):
            stamp = self._now_stamp()
            cut = None if stamp is None else self.segmenter.stop(stamp, "joint states stopped")
            if cut is not None and cut.end_ns - cut.start_ns >= self.segmenter.min_ns:
                self._cut(cut, publish=True)

    # ------------------------------------------------------------------ services
    def _now_stamp(self) -> int | None:
        return None if self.js_buffer is None else self.js_buffer.last_stamp

    def _on_start(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        if stamp is None:
            res.success, res.message = False, f"no valid message on {self.js_topic} yet"
        elif not self.segmenter.start(stamp):
            res.success, res.message = False, "a segment is being recorded already"
        else:
            res.success, res.message = True, f"segment started at {stamp} ns"
        return res

    def _on_stop(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        cut = None if stamp is None else self.segmenter.stop(stamp)
        if cut is None:
            res.success, res.message = False, "no segment is being recorded"
            return res
        path = self._cut(cut, publish=True)
        res.success, res.message = path is not None, str(path or "segment is empty")
        return res

    def _on_save(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        if stamp is None:
            res.success, res.message = False, f"no valid message on {self.js_topic} yet"
            return res
        path = self._cut(Cut(0, stamp, "save requested"), publish=False, name="buffer")
        res.success, res.message = path is not None, str(path or "buffer is empty")
        return res

    # ------------------------------------------------------------------ segments
    def _cut(self, cut: Cut, *, publish: bool, name: str = "segment") -> Path | None:
        """Copy the buffers over ``cut`` and queue them for writing; returns the bag path."""
        if self.js_buffer is None or self.js_conv.has_velocity is None:
            return None
        js = self.js_buffer.window(cut.start_ns, cut.end_ns)
        if js[0].size < 2:
            self.get_logger().warning(f"{name} [{cut.start_ns}, {cut.end_ns}] ns: < 2 samples")
            return None
        lost = self.js_buffer.last_overwritten_ns
        if cut.start_ns > 0 and lost is not None and lost >= cut.start_ns:  # not ~/save's buffer
            self._truncated += 1
            self.get_logger().warning(
                f"{name} [{cut.start_ns}, {cut.end_ns}] ns: its samples up to {lost} ns were "
                f"pushed out of the ring buffer before the cut; {self.js_topic} comes faster than "
                f"max_input_rate_hz ({self.config.max_input_rate_hz:g}) allows"
            )
        channels = []
        layout = self.config.layout
        for spec in layout.mocap:
            stamps, rows = self.pose_buffers[spec.topic].window(cut.start_ns, cut.end_ns)
            channels.append((spec.topic, [f"{spec.body}/{c}" for c in _POSE], stamps, rows, False))
        for lookup in layout.tf:
            dynamic = {e: b.window(cut.start_ns, cut.end_ns) for e, b in self.tf_edges.items()}
            stamps, rows = self._tf_lookup(lookup, {e: w for e, w in dynamic.items() if w[0].size})
            names = [f"{lookup.body}/{c}" for c in _POSE]
            channels.append((_tf_channel(lookup), names, stamps, rows, False))
        for spec in layout.commands:
            buffer = self.cmd_buffers.get(spec.topic)
            stamps, rows = (np.zeros(0, np.int64), np.zeros((0, 1))) if buffer is None else (
                buffer.window(cut.start_ns, cut.end_ns))  # fmt: skip
            channels.append((spec.topic, self.cmd_convs[spec.topic].channels, stamps, rows, True))
        self._count += 1
        snap = Snapshot(
            name=f"{name}_{self._count:04d}_{int(js[0][0])}",
            joints=self.js_conv.joints,
            has_velocity=bool(self.js_conv.has_velocity),
            has_effort=bool(self.js_conv.has_effort),
            js=js,
            channels=channels,
            publish=publish,
            reason=cut.reason,
        )
        self._jobs.put(snap)
        return self.config.output_dir / snap.name

    def _tf_lookup(
        self, lookup: TfLookup, dynamic: dict[tuple[str, str], Any]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        try:
            stamps, poses = tf_chain.lookup(
                lookup.parent,
                lookup.child,
                dynamic,
                self.tf_static,
                where=f"tf {lookup.parent!r} -> {lookup.child!r}",
            )
        except DataError as err:
            self.get_logger().warning(str(err))
            return np.zeros(0, np.int64), np.zeros((0, 7))
        if stamps is None:  # a static chain: constant over the segment
            return np.zeros(0, np.int64), poses
        return stamps, poses

    def _write_loop(self) -> None:
        """Write the queued snapshots until ``None``; one segment's failure (a full disk, an
        unwritable folder, streams without a common span) is logged and the loop goes on."""
        while True:
            snap = self._jobs.get()
            if snap is None:
                return
            try:
                self._write(snap)
            except Exception as err:  # the writer must outlive any one segment
                self._failed += 1
                self.get_logger().error(f"{snap.name}: not written: {type(err).__name__}: {err}")

    def _write(self, snap: Snapshot) -> None:
        """Assemble ``snap``, write its bag, then publish it (when asked).

        A configured mocap, TF or command stream without a sample in the segment is left out of
        the bag with a warning naming it: the joint states are written all the same.
        """
        layout = self.config.layout
        empty = snap.empty_topics()
        if empty:
            self.get_logger().warning(
                f"{snap.name}: topics {empty} have no sample in the segment; written without them"
            )
            snap = snap.without(empty)
            layout = dataclasses.replace(
                layout,
                mocap=tuple(x for x in layout.mocap if x.topic not in empty),
                tf=tuple(x for x in layout.tf if _tf_channel(x) not in empty),
                commands=tuple(x for x in layout.commands if x.topic not in empty),
            )
        traj = assemble(snap, self.config.rate_hz)
        path = self.config.output_dir / snap.name
        source = f"live:{self.get_fully_qualified_name()}"
        write_bag(traj, path, layout, storage=self.config.storage,
                  segment_topic=self.segment_pub.topic_name, source=source)  # fmt: skip
        self.get_logger().info(
            f"{snap.name}: {traj.num_samples} samples, {traj.duration:.3f} s "
            f"({snap.reason}) -> {path}"
        )
        if snap.publish and self.context.ok():
            msg = cv.trajectory_to_segment(traj, source=str(path),
                                           frame_id=self.config.world_frame)  # fmt: skip
            self.segment_pub.publish(msg)

    def _publish_diagnostics(self) -> None:
        extra = {
            "segment_open": str(self.segmenter.active),
            "segments_cut": str(self._count),
            "segments_failed": str(self._failed),
            "segments_truncated": str(self._truncated),
            "buffer_samples": str(0 if self.js_buffer is None else len(self.js_buffer)),
            "buffer_bytes": str(self.buffer_bytes()),
        }
        n = min(self._age_index, self._ages.size)
        if n:
            p50, p99 = np.percentile(self._ages[:n], [50, 99])
            extra.update(stamp_age_ms_p50=f"{p50:.3f}", stamp_age_ms_p99=f"{p99:.3f}")
        self.diag_pub.publish(self.diag.to_msg(self.get_clock().now().to_msg(), extra))

    def _buffers(self) -> list[RingBuffer]:
        """Every ring buffer of the node."""
        buffers = [self.js_buffer, *self.pose_buffers.values(), *self.cmd_buffers.values(),
                   *self.tf_edges.values()]  # fmt: skip
        return [b for b in buffers if b is not None]

    def buffer_bytes(self) -> int:
        """Bytes held by all ring buffers (bounded by the configuration)."""
        return sum(b.nbytes for b in self._buffers())

    def close(self) -> None:
        """Cut the open segment (reason "shutdown"), then finish writing the queued segments."""
        stamp = self._now_stamp()
        if self.segmenter.active and stamp is not None:
            cut = self.segmenter.stop(stamp, "shutdown")
            if cut is not None:
                self._cut(cut, publish=False)
        self._jobs.put(None)
        self._writer.join(timeout=60.0)


def _tf_channel(lookup: TfLookup) -> str:
    """The channel name of a TF lookup in a snapshot: ``<tf topic>:<child frame>``."""
    return f"{lookup.topic}:{lookup.child}"


def _command_type(msgtype: str) -> type:
    return {cv.JOINT_STATE: JointState, cv.FLOAT64_MULTI_ARRAY: Float64MultiArray,
            cv.JOINT_TRAJECTORY: JointTrajectory}[msgtype]  # fmt: skip


def main(args: list[str] | None = None) -> None:
    """Console entry point ``recorder``."""
    run_node(Recorder, "recorder", (ParameterError, DataError), args)


if __name__ == "__main__":
    main()
