"""``recorder`` node: joint states, mocap, TF and commands into segments on the model grid.

Every input stream goes through ``conversions`` (validated; bad messages counted on
``/diagnostics`` and skipped) and a ``StampGuard`` (a message stamped far ahead of its stream
is held back and rejected unless the stream follows it) into a bounded ring buffer of stamped
samples (``buffers``). A segment, cut by ``~/start`` / ``~/stop`` or automatically by excitation
(``segmenter``), is aligned onto the joint state stamps (or a uniform ``rate_hz`` grid) with
``dynid.data.align``, written to a bag in ``output_dir`` with ``dynid.data.write_bag``, and only
then published on ``~/segment``. Writing happens in a worker thread so the 1 kHz callbacks never
wait on the disk. ``~/save`` writes the whole buffer.

Nothing received is lost without a word:

* while a segment is open, its samples go to a spool file in ``output_dir/spool`` as they
  arrive (``spool``); a recorder killed mid-segment loses at most half a second, and the next
  recorder started on the same folder writes the spool's segment (or keeps the spool and says
  why it could not);
* a segment the disk refuses (full, not writable) stays in memory (up to ``max_unwritten_mb``)
  and is written again until it succeeds, with the error on ``/diagnostics``;
* a stream that cannot be aligned with the joint states (no sample, or samples that do not
  overlap) is left out of its segment, and the joint states outside the span every kept stream
  covers are cut, each loss stated in ``~/stop``'s answer, the log and ``/diagnostics``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import shutil
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped, TransformStamped
from numpy.typing import NDArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from dynid.data import BagLayout, DataError, StorageFormat, write_bag
from dynid.data.errors import BagWriteError
from dynid_msgs.msg import TrajectorySegment
from dynid_ros import conversions as cv
from dynid_ros import qos
from dynid_ros import spool as sp
from dynid_ros.assemble import Snapshot, assemble, fit_spans
from dynid_ros.buffers import Key, StreamBuffers, tf_channel
from dynid_ros.diagnostics import Diagnostics
from dynid_ros.errors import BadMessageError, ParameterError
from dynid_ros.recorder_config import read_config
from dynid_ros.run import run_node
from dynid_ros.segmenter import Cut, Segmenter, SegmentMode
from dynid_ros.stamps import StampGuard

_DRAIN = 200  # queued joint-state messages handled per executor callback
_RETRY_S = (0.5, 8.0)  # first and longest wait before writing a refused segment again
_SPOOL_RETRY_S = 1.0  # wait before a new spool after a write error
_STOP_RETRY_S = 10.0  # how long a stopping node still tries to write refused segments
_BAG_TEMP = re.compile(r"\.(segment|buffer)_.+\.[A-Za-z0-9_]+")  # write_bag's unfinished folders


class _RetryLaterError(Exception):
    """The disk refused a write (full, not writable): the same job is tried again later."""


@dataclass
class _Job:
    """A segment for the writer thread, and the spool files holding the same samples."""

    snap: Snapshot
    layout: BagLayout
    rate_hz: float
    storage: StorageFormat
    source: str
    spools: list[Path] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return self.snap.nbytes


class Recorder(Node):
    """The recorder node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("recorder", **kwargs)
        self.config = cfg = read_config(self)
        self.diag = Diagnostics(self.get_fully_qualified_name())
        self.segmenter = Segmenter(cfg.mode, max_duration_s=cfg.max_buffer_s, **cfg.auto)
        self._age_ns = round(cfg.max_buffer_s * 1e9)
        layout = cfg.layout
        self.js_topic = layout.joint_states.topic
        self.streams = StreamBuffers(layout, cfg.world_frame, cfg.capacity, self._age_ns)
        self._stamp_guards: dict[Key, StampGuard[NDArray[np.float64]]] = {}
        self._last_q: NDArray[np.float64] | None = None
        # last receipt stamp of each header-less command stream (``_receipt_stamp``)
        self._headerless: dict[str, int | None] = {
            c.topic: None for c in layout.commands if c.msgtype == cv.FLOAT64_MULTI_ARRAY
        }
        self._last_js_ns: int | None = None
        self._count = 0
        self._failed = 0  # segments given up: never written
        self._truncated = 0  # segments whose start the ring buffer had overwritten
        self._lossy = 0  # segments written with streams or joint states left out
        self._last_note = ""
        self._write_errors = 0
        self._last_write_error = ""
        self._spool_errors = 0
        self._last_spool_error = ""
        self._recovered = 0
        self._kept_spools = 0
        # age of each joint-state stamp when its callback ran (ms), over the last 1000 messages:
        # the callback latency of a live stream whose stamps are wall-clock times
        self._ages = np.zeros(1000)
        self._age_index = 0
        # segments waiting for the writer thread (the head is the one being written)
        self._cond = threading.Condition()
        self._queue: deque[_Job | Path] = deque()
        self._unwritten_bytes = 0
        self._stop_by: float | None = None  # set when the node stops
        # the spool of the open segment
        self._spool_dir = cfg.output_dir / "spool"
        self._builder = sp.MessageBuilder(layout, cfg.world_frame)
        self._spool: sp.SpoolWriter | None = None
        self._spool_start: int | None = None  # start of the segment the spool files belong to
        self._spool_files: list[Path] = []
        self._spool_retry = 0.0
        leftovers = self._prepare_output_dir()

        self.segment_pub = self.create_publisher(TrajectorySegment, "~/segment", qos.reliable(10))
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.reliable(10))
        # joint states: best effort, deep queue (1 kHz bursts); matches reliable publishers too
        self._js_sub = self.create_subscription(
            JointState, self.js_topic, self._on_joint_states, qos.sensor(1000)
        )
        for spec in layout.mocap:
            kind = PoseStamped if spec.msgtype == cv.POSE_STAMPED else TransformStamped
            # mocap bridges publish reliable (vicon) or best effort (vrpn): best effort takes both
            self.create_subscription(kind, spec.topic, partial(self._ingest, spec.topic),
                                     qos.sensor(100))  # fmt: skip
        if layout.tf:
            self._subscribe_tf()
        for spec in layout.commands:
            # commands: best effort, deep queue (controller rates up to 1 kHz)
            kind = _command_type(spec.msgtype)
            self.create_subscription(kind, spec.topic, partial(self._ingest, spec.topic),
                                     qos.sensor(1000))  # fmt: skip
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/stop", self._on_stop)
        self.create_service(Trigger, "~/save", self._on_save)
        # wall-clock timers: they keep running when a replayed /clock stops
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics, clock=steady)
        self._last_arrival = time.monotonic()
        self.create_timer(0.1, self._check_stall, clock=steady)
        self.create_timer(sp.FLUSH_S / 2, self._spool_tick, clock=steady)
        self._queue.extend(leftovers)  # recovered first, by the writer thread
        self._writer = threading.Thread(target=self._write_loop, name="segment-writer", daemon=True)
        self._writer.start()
        recovering = (
            f"; recovering {len(leftovers)} spool(s) left by a recorder that stopped without "
            "closing them"
            if leftovers
            else ""
        )
        self.get_logger().info(
            f"recording {self.js_topic} ({cfg.mode.value} segments, buffer "
            f"{cfg.max_buffer_s:g} s = {cfg.capacity} samples) into {cfg.output_dir}{recovering}"
        )

    def _prepare_output_dir(self) -> list[Path]:
        """Create ``output_dir`` (``ParameterError`` when it cannot be written), remove the
        folders of bag writes cut short, and return the spools left by an earlier recorder."""
        out = self.config.output_dir
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ParameterError(f"parameter 'output_dir': cannot create {out}: {err}") from err
        if not os.access(out, os.W_OK | os.X_OK):
            raise ParameterError(f"parameter 'output_dir': {out} is not writable")
        for tmp in sorted(out.iterdir()):
            if tmp.is_dir() and _BAG_TEMP.fullmatch(tmp.name):
                # a bag appears by renaming a finished temporary folder: this one never finished,
                # and the segment's samples are still in its spool
                shutil.rmtree(tmp, ignore_errors=True)
                self.get_logger().warning(f"removed {tmp}: a bag write that never finished")
        return sp.leftover_spools(self._spool_dir)

    # ------------------------------------------------------------------ input callbacks
    def _reject(self, topic: str, err: BadMessageError, detail: str = "") -> None:
        n = self.diag.rejected(topic, err.key)
        if n in (1, 10, 100, 1000) or n % 10000 == 0:
            more = f" ({detail})" if detail else ""
            self.get_logger().warning(f"{topic}: skipped a message ({err.key}{more}); "
                                      f"{n} so far")  # fmt: skip

    def _on_joint_states(self, msg: Any) -> None:
        """Handle ``msg`` and every message already queued behind it.

        Taking the queued messages here, instead of one executor round each, keeps up with
        1 kHz streams on a busy CPU; at most ``_DRAIN`` messages per call so services still run.
        """
        self._ingest(self.js_topic, msg)
        sub = self._js_sub
        for _ in range(_DRAIN):
            with sub.handle:
                taken = sub.handle.take_message(sub.msg_type, sub.raw)
            if taken is None:
                return
            self._ingest(self.js_topic, taken[0])

    def _guard(self, key: Key) -> StampGuard[NDArray[np.float64]] | None:
        """The stamp guard of a buffer; ``None`` for static TF and for commands stamped on
        receipt or by a plan (a JointTrajectory replaces its own tail)."""
        if key[0] == "tf_static" or (
            key[0] == "cmd" and self.streams.commands[key[1]].msgtype != cv.JOINT_STATE
        ):
            return None
        guard = self._stamp_guards.get(key)
        if guard is None:
            future = round(self.config.max_stamp_ahead_s * 1e9)
            guard = self._stamp_guards[key] = StampGuard(future_ns=future)
        return guard

    def _ingest(self, topic: str, msg: Any) -> None:
        """Validate ``msg`` of ``topic``, store its samples, spool them, cut segments."""
        self.diag.received(topic)
        now = self._receipt_stamp(topic)
        try:
            samples, bad = self.streams.convert(topic, msg, now)
        except BadMessageError as err:
            self._reject(topic, err)
            return
        for err in bad:
            self._reject(topic, err)
        used = 0
        for key, stamp, row in samples:
            guard = self._guard(key)
            admitted, dropped = ([(stamp, row)], []) if guard is None else (
                guard.admit(stamp, row, now))  # fmt: skip
            for held in dropped:
                name, _, reason = held.reason.partition(": ")
                self._reject(topic, BadMessageError(name, reason), held.detail)
            for s, r in admitted:
                refused = self.streams.push(key, s, r)
                if refused is not None:
                    self._reject(topic, refused)
                    if key[0] == "cmd":  # one count per message
                        break
                    continue
                used += 1
                self._spooled(key, s, r)
                if key[0] == "js":
                    self._after_joint_state(s, r)
        if used:
            plan = topic in self.streams.commands and (
                self.streams.commands[topic].msgtype == cv.JOINT_TRAJECTORY)  # fmt: skip
            self.diag.used(topic, 1 if plan else used)

    def _receipt_stamp(self, topic: str) -> int:
        """The node clock's time (ns), the stamp of a header-less message on ``topic``.

        Under ``use_sim_time`` the clock stands still between two ``/clock`` messages, so the
        messages of a header-less stream received in between are stamped 1 ns apart in their
        order of arrival instead of alike: none is refused as "not after the previous message".
        """
        now = self.get_clock().now().nanoseconds
        if topic not in self._headerless:
            return now
        last = self._headerless[topic]
        if last is not None and now <= last:
            now = last + 1
        self._headerless[topic] = now
        return now

    def _after_joint_state(self, stamp: int, row: NDArray[np.float64]) -> None:
        self._last_arrival = time.monotonic()
        self._ages[self._age_index % self._ages.size] = (time.time_ns() - stamp) * 1e-6
        self._age_index += 1
        n = len(self.streams.js_conv.joints)
        position = row[:n]
        speed = None
        if self.streams.js_conv.has_velocity:
            speed = float(np.abs(row[n : 2 * n]).max())
        elif self._last_q is not None and self._last_js_ns is not None:
            dt = (stamp - self._last_js_ns) * 1e-9
            speed = float(np.abs(position - self._last_q).max() / dt)
        self._last_q, self._last_js_ns = position, stamp
        for cut in self.segmenter.update(stamp, speed):
            self._cut(cut, publish=True)
        self._sync_spool()

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
        self.create_subscription(TFMessage, tf, partial(self._ingest, tf), qos.sensor(100))
        static_qos = qos.latched()
        static_qos.depth = 100
        self.create_subscription(TFMessage, static, partial(self._ingest, static), static_qos)

    def _check_stall(self) -> None:
        """Close an automatic segment when the joint states stop (robot off, bag finished); a
        segment opened by ``~/start`` stays open until ``~/stop``."""
        quiet = self.segmenter.quiet_ns * 1e-9
        if (
            self.config.mode is SegmentMode.AUTO
            and self.segmenter.active
            and not self.segmenter.manual
            and time.monotonic() - self._last_arrival > quiet
        ):
            stamp = self._now_stamp()
            cut = None if stamp is None else self.segmenter.stop(stamp, "joint states stopped")
            if cut is not None and cut.end_ns - cut.start_ns >= self.segmenter.min_ns:
                self._cut(cut, publish=True)
            self._sync_spool()

    # ------------------------------------------------------------------ spool
    def _spool_error(self, what: str, err: OSError) -> None:
        self._spool_errors += 1
        self._last_spool_error = f"{what}: {err}"
        self._spool_retry = time.monotonic() + _SPOOL_RETRY_S
        if self._spool is not None:
            self._spool.abandon()
            self._spool = None
        if self._spool_errors in (1, 10, 100) or self._spool_errors % 1000 == 0:
            self.get_logger().error(
                f"spool {what}: {err}; the open segment is kept in memory and spooled again "
                f"when the disk takes it ({self._spool_errors} spool errors so far)"
            )

    def _sync_spool(self) -> None:
        """Open a spool for the open segment, or drop the spool of a segment that ended
        without being cut (an automatic segment too short to keep)."""
        active, start = self.segmenter.active, self.segmenter.start_ns
        if self._spool_start is not None and (not active or start != self._spool_start):
            for path in self._take_spool():
                sp.remove(path)
        if not (active and self.config.spool) or start is None:
            return
        if self._spool_start is None or (
            self._spool is None and time.monotonic() >= self._spool_retry
        ):
            self._open_spool(start)

    def _open_spool(self, start: int) -> None:
        """A new spool for the segment opened at ``start``, holding what the buffers have of
        it; spool files of the segment cut short by an earlier write error are removed once
        the new one holds everything."""
        self._spool_start = start
        path = self._spool_dir / f"segment_{start}{sp.SUFFIX}"
        k = 0
        while path.exists() or path in self._spool_files:
            k += 1
            path = self._spool_dir / f"segment_{start}_{k}{sp.SUFFIX}"
        b, streams = self._builder, self.streams
        b.joints = streams.js_conv.joints
        b.has_velocity, b.has_effort = bool(streams.js_conv.has_velocity), bool(
            streams.js_conv.has_effort)  # fmt: skip
        b.command_joints = {t: c.joints for t, c in streams.cmd_convs.items() if c.joints}
        meta = {
            "version": 1,
            "start_ns": start,
            "layout": sp.layout_to_json(self.config.layout),
            "joints": list(b.joints),
            "world_frame": self.config.world_frame,
            "rate_hz": self.config.rate_hz,
            "storage": self.config.storage.value,
            "source": f"live:{self.get_fully_qualified_name()}",
            "segment_topic": self.segment_pub.topic_name,
        }
        try:
            self._spool = sp.SpoolWriter(path, meta)
            self._spool_files.append(path)
            for key, stamp, row in streams.samples(start):
                self._spool_add(key, stamp, row)
            self._spool.flush()
        except OSError as err:
            if path.exists() and path not in self._spool_files:
                self._spool_files.append(path)
            self._spool_error(f"{path}", err)
            return
        for old in self._spool_files[:-1]:  # the new spool holds all they held
            sp.remove(old)
        self._spool_files = [path]

    def _spool_add(self, key: Key, stamp: int, row: NDArray[np.float64]) -> None:
        assert self._spool is not None
        if key[0] == "cmd" and key[1] not in self._builder.command_joints:
            joints = self.streams.cmd_convs[key[1]].joints
            if joints:
                self._builder.command_joints[key[1]] = joints
        topic, msgtype = self._builder.topic(key)
        self._spool.add(topic, msgtype, self._builder.build(key, stamp, row), stamp)

    def _spooled(self, key: Key, stamp: int, row: NDArray[np.float64]) -> None:
        """Append a stored sample to the open segment's spool."""
        if self._spool is None or self._spool_start is None or stamp < self._spool_start:
            return
        try:
            self._spool_add(key, stamp, row)
        except OSError as err:
            self._spool_error(f"{self._spool.path if self._spool else ''}", err)

    def _spool_tick(self) -> None:
        """Flush the spool (at least every ``FLUSH_S``), and spool again after an error."""
        if self._spool is not None:
            try:
                self._spool.flush()
            except OSError as err:
                self._spool_error(str(self._spool.path), err)
        self._sync_spool()

    def _take_spool(self) -> list[Path]:
        """Close the spool and hand over its files (the segment was cut)."""
        if self._spool is not None:
            try:
                self._spool.close()
            except OSError as err:
                self._spool_error(str(self._spool.path), err)
        files, self._spool_files = self._spool_files, []
        self._spool, self._spool_start = None, None
        return files

    # ------------------------------------------------------------------ services
    def _now_stamp(self) -> int | None:
        js = self.streams.js
        return None if js is None else js.last_stamp

    def _on_start(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        if stamp is None:
            res.success, res.message = False, f"no valid message on {self.js_topic} yet"
        elif not self.segmenter.start(stamp):
            res.success, res.message = False, "a segment is being recorded already"
        else:
            res.success, res.message = True, f"segment started at {stamp} ns"
            self._sync_spool()
        return res

    def _on_stop(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        cut = None if stamp is None else self.segmenter.stop(stamp)
        if cut is None:
            res.success, res.message = False, "no segment is being recorded"
            return res
        snap = self._cut(cut, publish=True)
        self._sync_spool()
        res.success = snap is not None
        res.message = _answer(self.config.output_dir, snap, "segment is empty")
        return res

    def _on_save(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        stamp = self._now_stamp()
        if stamp is None:
            res.success, res.message = False, f"no valid message on {self.js_topic} yet"
            return res
        snap = self._cut(Cut(0, stamp, "save requested"), publish=False, name="buffer")
        res.success = snap is not None
        res.message = _answer(self.config.output_dir, snap, "buffer is empty")
        return res

    # ------------------------------------------------------------------ segments
    def _cut(self, cut: Cut, *, publish: bool, name: str = "segment") -> Snapshot | None:
        """Copy the buffers over ``cut``, decide what can be aligned, and queue the segment for
        writing; returns it (``None``: fewer than two joint states)."""
        spools = self._take_spool() if name == "segment" and cut.start_ns == self._spool_start \
            else []  # fmt: skip
        snap, warnings = self.streams.snapshot(cut.start_ns, cut.end_ns, name=name,
                                               publish=publish, reason=cut.reason)  # fmt: skip
        for warning in warnings:
            self.get_logger().warning(warning)
        if snap is None:
            self.get_logger().warning(f"{name} [{cut.start_ns}, {cut.end_ns}] ns: < 2 samples")
            for path in spools:  # nothing worth a bag
                sp.remove(path)
            return None
        js = self.streams.js
        lost = None if js is None else js.last_overwritten_ns
        if cut.start_ns > 0 and lost is not None and lost >= cut.start_ns:  # not ~/save's buffer
            self._truncated += 1
            self.get_logger().warning(
                f"{name} [{cut.start_ns}, {cut.end_ns}] ns: its samples up to {lost} ns were "
                f"pushed out of the ring buffer before the cut; {self.js_topic} comes faster than "
                f"max_input_rate_hz ({self.config.max_input_rate_hz:g}) allows"
            )
        self._count += 1
        full_name = f"{name}_{self._count:04d}_{int(snap.js[0][0])}"
        snap = fit_spans(dataclasses.replace(snap, name=full_name),
                         tail_carried=self.segmenter.continues(cut))  # fmt: skip
        self.segmenter.written(cut, snap.span()[1])
        self._noted(snap)
        cfg = self.config
        self._enqueue(_Job(snap, cfg.layout, cfg.rate_hz, cfg.storage,
                           f"live:{self.get_fully_qualified_name()}", spools))  # fmt: skip
        return snap

    def _noted(self, snap: Snapshot) -> None:
        if snap.notes:
            self._lossy += 1
            self._last_note = f"{snap.name}: {'; '.join(snap.notes)}"
            self.get_logger().warning(self._last_note)

    def _enqueue(self, job: _Job) -> None:
        """Queue ``job``; beyond ``max_unwritten_mb`` the oldest waiting segment is given up."""
        limit = self.config.max_unwritten_mb * 2**20
        with self._cond:
            self._queue.append(job)
            self._unwritten_bytes += job.nbytes
            while self._unwritten_bytes > limit and len(self._queue) > 2:
                old = self._queue[1]  # [0] is being written; never the one just queued
                del self._queue[1]
                if isinstance(old, _Job):
                    self._unwritten_bytes -= old.nbytes
                    self._failed += 1
                    kept = f"; its spool {[str(p) for p in old.spools]} is kept" if old.spools \
                        else ""  # fmt: skip
                    self.get_logger().error(
                        f"{old.snap.name}: given up: the segments waiting for the disk exceed "
                        f"max_unwritten_mb ({self.config.max_unwritten_mb:g}){kept}"
                    )
                else:
                    self._queue.append(old)  # a spool to recover: on disk, costs no memory
            self._cond.notify()

    def _write_loop(self) -> None:
        """Write the queued segments and recover the queued spools, in order, until the node
        stops; a job the disk refuses is tried again (waits growing to ``_RETRY_S[1]``), any
        other failure is logged and counted and the loop goes on."""
        delay = _RETRY_S[0]
        while True:
            with self._cond:
                while not self._queue and self._stop_by is None:
                    self._cond.wait()
                if not self._queue:
                    return
                job = self._queue[0]
            try:
                if isinstance(job, Path):
                    self._recover(job)
                else:
                    self._write(job)
            except _RetryLaterError as err:
                self._write_errors += 1
                self._last_write_error = str(err)
                name = job.name if isinstance(job, Path) else job.snap.name
                stopping = self._stop_by is not None and time.monotonic() > self._stop_by
                if self._write_errors in (1, 10, 100) or self._write_errors % 1000 == 0 or stopping:
                    then = f"kept in memory, written again in {delay:g} s"
                    if stopping:
                        spools = job.spools if isinstance(job, _Job) else [job]
                        then = "the node stops: lost"
                        if spools:
                            kept = [str(p) for p in spools]
                            then = f"the node stops: its spool {kept} is kept for the next start"
                    self.get_logger().error(f"{name}: not written: {err}; {then}")
                if not stopping:
                    with self._cond:
                        self._cond.wait(delay)
                    delay = min(2 * delay, _RETRY_S[1])
                    continue
                self._failed += 1
            except Exception as err:  # the writer must outlive any one segment
                self._failed += 1
                name = job.name if isinstance(job, Path) else job.snap.name
                kept = f"; its spool {[str(p) for p in job.spools]} is kept" if (
                    isinstance(job, _Job) and job.spools) else ""  # fmt: skip
                self.get_logger().error(f"{name}: not written: {type(err).__name__}: {err}{kept}")
            delay = _RETRY_S[0]
            with self._cond:
                self._queue.popleft()
                if isinstance(job, _Job):
                    self._unwritten_bytes -= job.nbytes

    def _write(self, job: _Job) -> Path:
        """Assemble the job's segment, write its bag, delete its spool, then publish it (when
        asked). ``_RetryLaterError`` when the disk refuses."""
        snap = job.snap
        topics = {ch[0] for ch in snap.channels}
        layout = dataclasses.replace(
            job.layout,
            mocap=tuple(x for x in job.layout.mocap if x.topic in topics),
            tf=tuple(x for x in job.layout.tf if tf_channel(x) in topics),
            commands=tuple(x for x in job.layout.commands if x.topic in topics),
        )
        traj = assemble(snap, job.rate_hz)
        path = self.config.output_dir / snap.name
        try:
            write_bag(traj, path, layout, storage=job.storage,
                      segment_topic=self.segment_pub.topic_name, source=job.source)  # fmt: skip
        except BagWriteError as err:
            if isinstance(err.__cause__, OSError):
                raise _RetryLaterError(str(err)) from err
            raise
        for spool in job.spools:
            sp.remove(spool)
        self.get_logger().info(
            f"{snap.name}: {traj.num_samples} samples, {traj.duration:.3f} s "
            f"({snap.reason}) -> {path}"
        )
        if snap.publish and self.context.ok():
            msg = cv.trajectory_to_segment(traj, source=str(path),
                                           frame_id=self.config.world_frame)  # fmt: skip
            self.segment_pub.publish(msg)
        return path

    def _recover(self, path: Path) -> None:
        """Write the segment of a spool left by a recorder that died; keep the spool (an
        error names it) when that is impossible."""
        try:
            lock = path.open("rb")
        except FileNotFoundError:
            return
        try:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another recorder recovers or writes it
            job, contents = self._recovery_job(path)
            if job is None:
                return
            bag = self._write(job)
            self._recovered += 1
            state = "closed"
            if not contents.complete:
                state = "cut off" + (
                    f"; {contents.unread_bytes} bytes of a last partial record ignored"
                    if contents.unread_bytes else "")  # fmt: skip
            self.get_logger().warning(
                f"recovered {path} ({len(contents.messages)} messages, {state}) into {bag}"
            )
        except _RetryLaterError:
            raise
        except (sp.SpoolError, DataError, BadMessageError, KeyError, TypeError, ValueError,
                OSError) as err:  # fmt: skip
            self._kept_spools += 1
            self.get_logger().error(
                f"spool {path} not recovered ({type(err).__name__}: {err}); it is kept"
            )
        finally:
            lock.close()

    def _recovery_job(self, path: Path) -> tuple[_Job | None, sp.SpoolContents]:
        """The segment of spool ``path`` as a writer job (``None``: nothing to write)."""
        contents = sp.read_spool(path)
        meta = contents.meta
        layout = sp.layout_from_json(meta["layout"])
        joints = tuple(meta["joints"])
        reading = dataclasses.replace(
            layout, joint_states=dataclasses.replace(layout.joint_states, joints=joints)
        )
        per_topic = Counter(topic for topic, *_ in contents.messages)
        capacity = max(per_topic.values(), default=0) + 16
        streams = StreamBuffers(reading, meta["world_frame"], capacity, 2**62,
                                scale_effort=False, correct_latency=False)  # fmt: skip
        refused: Counter[str] = Counter()
        for topic, msgtype, _, stamp, data in contents.messages:
            msg = deserialize_message(data, sp.message_type(msgtype))
            try:
                samples, bad = streams.convert(topic, msg, stamp)
            except BadMessageError as err:
                refused[err.key] += 1
                continue
            refused.update(e.key for e in bad)
            for key, s, r in samples:
                err = streams.push(key, s, r)
                if err is not None:
                    refused[err.key] += 1
        if refused:
            self.get_logger().warning(f"spool {path}: samples not taken: {dict(refused)}")
        end = None if streams.js is None else streams.js.last_stamp
        if end is None:
            raise sp.SpoolError(f"{path}: no joint state")
        reason = "recovered from the spool of a recorder that stopped without closing it"
        snap, warnings = streams.snapshot(int(meta["start_ns"]), end, name="segment_recovered",
                                          publish=False, reason=reason)  # fmt: skip
        for warning in warnings:
            self.get_logger().warning(f"spool {path}: {warning}")
        if snap is None:
            raise sp.SpoolError(f"{path}: fewer than two joint states")
        first = int(snap.js[0][0])
        done = sorted(self.config.output_dir.glob(f"segment_*_{first}"))
        if done:  # written before the recorder died, the spool not deleted yet
            self.get_logger().warning(f"spool {path}: its segment is {done[0]} already; removed")
            sp.remove(path)
            return None, contents
        snap = fit_spans(dataclasses.replace(snap, name=f"segment_recovered_{first}"))
        self._noted(snap)
        job = _Job(snap, layout, float(meta["rate_hz"]), StorageFormat(meta["storage"]),
                   str(meta["source"]), [path])  # fmt: skip
        return job, contents

    def _publish_diagnostics(self) -> None:
        with self._cond:
            waiting = sum(isinstance(j, _Job) for j in self._queue)
            unwritten = self._unwritten_bytes
        extra = {
            "segment_open": str(self.segmenter.active),
            "segments_cut": str(self._count),
            "segments_failed": str(self._failed),
            "segments_truncated": str(self._truncated),
            "segments_with_loss": str(self._lossy),
            "last_segment_note": self._last_note,
            "segments_unwritten": str(waiting),
            "unwritten_bytes": str(unwritten),
            "write_errors": str(self._write_errors),
            "last_write_error": self._last_write_error,
            "spooling": str(self._spool is not None),
            "spool_errors": str(self._spool_errors),
            "last_spool_error": self._last_spool_error,
            "spools_recovered": str(self._recovered),
            "spools_kept": str(self._kept_spools),
            "stamps_held": str(sum(g.held for g in self._stamp_guards.values())),
            "buffer_samples": str(0 if self.streams.js is None else len(self.streams.js)),
            "buffer_bytes": str(self.buffer_bytes()),
        }
        n = min(self._age_index, self._ages.size)
        if n:
            p50, p99 = np.percentile(self._ages[:n], [50, 99])
            extra.update(stamp_age_ms_p50=f"{p50:.3f}", stamp_age_ms_p99=f"{p99:.3f}")
        problem = ""
        if waiting and self._write_errors:
            problem = f"{waiting} segment(s) wait for the disk: {self._last_write_error}"
        elif self.segmenter.active and self.config.spool and self._spool is None:
            problem = f"the open segment is not spooled: {self._last_spool_error}"
        elif self._kept_spools:
            problem = f"{self._kept_spools} spool(s) could not be recovered (see the log)"
        self.diag_pub.publish(self.diag.to_msg(self.get_clock().now().to_msg(), extra, problem))

    def buffer_bytes(self) -> int:
        """Bytes held by all ring buffers (bounded by the configuration)."""
        return sum(b.nbytes for b in self.streams.buffers())

    def close(self) -> None:
        """Cut the open segment (reason "shutdown"), then finish writing the queued segments
        (segments the disk still refuses after ``_STOP_RETRY_S`` keep their spools)."""
        stamp = self._now_stamp()
        if self.segmenter.active and stamp is not None:
            cut = self.segmenter.stop(stamp, "shutdown")
            if cut is not None:
                self._cut(cut, publish=False)
        self._sync_spool()
        with self._cond:
            self._stop_by = time.monotonic() + _STOP_RETRY_S
            self._cond.notify()
        self._writer.join(timeout=60.0)


def _answer(folder: Path, snap: Snapshot | None, empty: str) -> str:
    """A service answer: the bag's path, with what was left out of it."""
    if snap is None:
        return empty
    path = str(folder / snap.name)
    return f"{path} ({'; '.join(snap.notes)})" if snap.notes else path


def _command_type(msgtype: str) -> type:
    return {cv.JOINT_STATE: JointState, cv.FLOAT64_MULTI_ARRAY: Float64MultiArray,
            cv.JOINT_TRAJECTORY: JointTrajectory}[msgtype]  # fmt: skip


def main(args: list[str] | None = None) -> None:
    """Console entry point ``recorder``."""
    run_node(Recorder, "recorder", (ParameterError, DataError), args)


if __name__ == "__main__":
    main()
