"""The recorder under test, the streams fed to it, and what of them is on disk.

``Motion`` is the robot: 7 joints resting, then moving, then resting again, as a pure function of
the sample index, so what was published can be recomputed from the index alone. ``Feed``
publishes it from its own rclpy context: ``sensor_msgs/JointState`` at 1 kHz and a Vicon-style
``geometry_msgs/TransformStamped`` at 200 Hz (every fifth tick). Sample ``k`` is stamped
``t0 + k`` ms (its capture time), and a mocap sample shares the stamp of the joint state of its
tick, so every published sample has one exact stamp to look for on disk. ``RecorderProcess``
runs ``python -m dynid_ros.recorder`` with a parameter file, its log in a file. ``read_disk``
reads every segment bag and leftover spool in an output folder.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import TransformStamped
from numpy.typing import NDArray
from rclpy.context import Context
from rclpy.node import Node
from sensor_msgs.msg import JointState

from dynid.data import (
    BagLayout,
    BagReadError,
    DataError,
    JointStateTopic,
    MocapTopic,
    bag_messages,
    open_bag,
    read_bag,
)
from dynid.data import messages as m
from dynid_ros import qos
from dynid_ros import spool as sp
from dynid_ros.benchmark import JOINTS, _rss_mib, _Spinner
from dynid_ros.conversions import ns_to_stamp

HZ = 1000  # joint states per second
MOCAP_EVERY = 5  # a mocap sample every fifth joint state: 200 Hz
TICK_NS = 1_000_000_000 // HZ
JS_TOPIC = "/reliability/franka/joint_states"
MOCAP_TOPIC = "/reliability/vicon/box/box"
_STAMP = struct.Struct("<iI")  # header.stamp right after the 4-byte CDR encapsulation header


@dataclass(frozen=True)
class Motion:
    """Rest ``rest_s``, then sinusoids for ``move_s``, repeated; sample ``k`` is at ``k / HZ`` s.

    Joint ``i`` moves as ``amplitude · (sin(ω τ + φ_i) − sin φ_i)`` with ``φ_i = i π / 7`` and
    ``τ`` the time since the motion began; ``move_s · frequency_hz`` is an integer, so every joint
    is back at 0 rad when the motion ends. The largest joint speed while moving is at least
    ``amplitude · ω · cos(π/14)`` (about 1.5 rad/s with the defaults), far above the recorder's
    motion threshold; at rest every speed is 0.
    """

    rest_s: float = 3.0
    move_s: float = 25.0
    amplitude: float = 0.25  # rad
    frequency_hz: float = 1.0

    @property
    def period(self) -> int:
        """Samples per rest + motion cycle."""
        return round((self.rest_s + self.move_s) * HZ)

    def _tau(self, k: NDArray[np.int64]) -> NDArray[np.float64]:
        """Seconds since the motion began (negative at rest)."""
        return ((k % self.period) - round(self.rest_s * HZ)) / HZ

    def moving(self, k: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether sample ``k`` is in motion (the recorder must keep it in a segment)."""
        return self._tau(np.asarray(k)) >= 0

    def states(self, k: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Positions (rad) and velocities (rad/s), ``[n, 7]`` each, of the samples ``k [n]``."""
        tau = self._tau(np.asarray(k, dtype=np.int64).reshape(-1))[:, None]
        w = 2 * np.pi * self.frequency_hz
        phases = np.arange(7) * np.pi / 7
        q = self.amplitude * (np.sin(w * tau + phases) - np.sin(phases))
        dq = self.amplitude * w * np.cos(w * tau + phases)
        rest = tau < 0
        return np.where(rest, 0.0, q), np.where(rest, 0.0, dq)

    def mocap(self, k: int) -> tuple[float, float, float]:
        """Position (m) of the box at sample ``k`` (its orientation stays the identity)."""
        q = self.states(np.asarray([k]))[0][0]
        return 0.5 + 0.1 * float(q[0]), 0.1 * float(q[1]), 0.3 + 0.1 * float(q[2])

    def settled(self, k: int, quiet_s: float) -> int:
        """The first sample index ``≥ k`` after which the joints have rested ``2 quiet_s + 0.5``
        s: a recorder with ``auto_quiet_s = quiet_s`` has closed every segment by then (a
        segment reaching ``max_buffer_s`` up to ``quiet_s`` into the rest opens the next one,
        which closes ``quiet_s`` later)."""
        need = round((2 * quiet_s + 0.5) * HZ)
        rest = round(self.rest_s * HZ)
        if need >= rest:
            raise ValueError(f"rest_s {self.rest_s} s is too short for a quiet time of {quiet_s} s")
        phase = k % self.period
        if need <= phase < rest:
            return k
        if phase < need:
            return k + need - phase
        return k + self.period - phase + need


class Feed:
    """Publishes ``motion`` on :data:`JS_TOPIC` (reliable, 1 kHz) and :data:`MOCAP_TOPIC`
    (reliable, 200 Hz) from its own context; listens to ``/diagnostics``.

    ``start()`` sets a new time origin (sample 0 = now); ``run`` publishes the samples due until
    a given time, paced by the wall clock (late samples are published at once, in order, with
    their own stamps). ``published`` is the number of samples published since ``start()``.
    """

    def __init__(self, motion: Motion) -> None:
        self.motion = motion
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("reliability_feed", context=self.context)
        self.spin = _Spinner(self.node)
        self.js_pub = self.node.create_publisher(JointState, JS_TOPIC, qos.reliable(1000))
        self.mocap_pub = self.node.create_publisher(
            TransformStamped, MOCAP_TOPIC, qos.reliable(1000)
        )
        self.diagnostics: list[DiagnosticArray] = []
        self.node.create_subscription(
            DiagnosticArray, "/diagnostics", self.diagnostics.append, qos.reliable(100)
        )
        self.t0_ns = 0
        self.published = 0
        self._t0_mono = 0.0
        self._js = JointState(name=list(JOINTS))
        self._tf = TransformStamped(child_frame_id="box")
        self._tf.header.frame_id = "world"
        self._tf.transform.rotation.w = 1.0

    def close(self) -> None:
        """Destroy the node and shut its context down."""
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def start(self) -> None:
        """Sample 0 is now."""
        self.t0_ns, self._t0_mono, self.published = time.time_ns(), time.monotonic(), 0

    def stamp(self, k: int | NDArray[np.int64]) -> Any:
        """The stamp (ns) of sample ``k``."""
        return self.t0_ns + np.asarray(k, dtype=np.int64) * TICK_NS

    def _publish(self, k: int) -> None:
        stamp = ns_to_stamp(self.t0_ns + k * TICK_NS)
        q, dq = self.motion.states(np.asarray([k]))
        self._js.header.stamp = stamp
        self._js.position, self._js.velocity = q[0].tolist(), dq[0].tolist()
        self.js_pub.publish(self._js)
        if k % MOCAP_EVERY == 0:
            t = self._tf.transform.translation
            t.x, t.y, t.z = self.motion.mocap(k)
            self._tf.header.stamp = stamp
            self.mocap_pub.publish(self._tf)

    def run(self, until: int, every: Callable[[], bool] | None = None) -> int:
        """Publish the samples up to (without) index ``until``; ``every()`` is called about ten
        times a second and ends the run early when it returns ``False``. Returns ``published``."""
        next_call = time.monotonic()
        while self.published < until:
            due = min(until, int((time.monotonic() - self._t0_mono) * HZ) + 1)
            while self.published < due:
                self._publish(self.published)
                self.published += 1
            now = time.monotonic()
            if now >= next_call:
                for _ in range(5):  # /diagnostics and other callbacks waiting
                    self.spin.executor.spin_once(timeout_sec=0.0)
                next_call = now + 0.1
                if every is not None and not every():
                    break
            time.sleep(max(0.0, self._t0_mono + self.published / HZ - time.monotonic()))
        return self.published

    def status(self, suffix: str, since: int = 0) -> dict[str, str]:
        """The values of the latest ``/diagnostics`` status whose name ends with ``suffix``
        (``": node"``, or ``": <topic>"`` for a stream), among the arrays received after the
        first ``since`` (``{}`` when none)."""
        for array in reversed(self.diagnostics[since:]):
            for status in array.status:
                if status.name.endswith(suffix):
                    return {kv.key: kv.value for kv in status.values}
        return {}


def recorder_parameters(output_dir: Path, max_buffer_s: float) -> dict[str, Any]:
    """The recorder's parameters: ``config/nodes/panda_recorder.yaml`` (Franka joint states,
    Vicon TransformStamped with corrected stamps, automatic segments) with the bench's topics,
    ``max_buffer_s`` as given, no command topic, and ``rate_hz = 0`` (the segment grid is the
    joint-state stamps, so every written sample is a published one and can be counted exactly);
    ``/diagnostics`` twice a second."""
    return {
        "joint_state_topic": JS_TOPIC,
        "joints": list(JOINTS),
        "mocap_topics": [MOCAP_TOPIC],
        "mocap_types": ["TransformStamped"],
        "mocap_bodies": ["box"],
        "stamps_latency_corrected": True,
        "world_frame": "world",
        "rate_hz": 0.0,
        "max_buffer_s": max_buffer_s,
        "max_input_rate_hz": 1200.0,
        "segment_mode": "auto",
        "auto_speed_threshold": 0.02,
        "auto_quiet_s": 1.0,
        "auto_pre_s": 0.5,
        "auto_min_duration_s": 1.0,
        "diagnostics_period_s": 0.5,
        "output_dir": str(output_dir),
    }


class RecorderProcess:
    """``python -m dynid_ros.recorder`` with ``params`` (a parameter file beside ``log``), its
    standard output and error in ``log``."""

    def __init__(self, params: dict[str, Any], log: Path) -> None:
        self.log = log
        param_file = log.with_suffix(".params.yaml")
        param_file.write_text(yaml.safe_dump({"recorder": {"ros__parameters": params}}))
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dynid_ros.recorder",
                "--ros-args",
                "--params-file",
                str(param_file),
            ],
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        """The recorder's process id."""
        return self.proc.pid

    def rss_mib(self) -> float:
        """Resident memory of the recorder (MiB)."""
        return _rss_mib(self.proc.pid)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no handler runs, nothing is closed."""
        self.proc.kill()
        self.proc.wait()
        self._out.close()

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGINT (Ctrl-C: the open segment is written) and wait; returns the exit status
        (``RuntimeError`` naming the log when it does not exit in ``timeout_s``)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired as err:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(
                    f"the recorder ignored SIGINT for {timeout_s:g} s; see {self.log}"
                ) from err
        self._out.close()
        return self.proc.returncode

    def output(self) -> str:
        """What the recorder wrote to its log so far."""
        return self.log.read_text(errors="replace")


def wait_until(
    feed: Feed,
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    recorder: RecorderProcess,
) -> None:
    """Spin ``feed`` until ``predicate()``; ``RuntimeError`` (with the log's tail) when the
    recorder dies or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if not recorder.alive() or time.monotonic() > deadline:
            state = "exited" if not recorder.alive() else f"no {what} after {timeout_s:g} s"
            raise RuntimeError(f"recorder {state}: {recorder.output()[-2000:]}")
        feed.spin.until(lambda: False, 0.05)


@dataclass
class Disk:
    """What an output folder holds.

    Attributes:
        js: stamps (ns) of the joint states in the segment bags, sorted (repeats kept).
        js_q: their positions, one row per stamp of ``js`` (rad).
        mocap: stamps (ns) of the mocap samples in the segment bags, sorted.
        bags: the segment bags found.
        unreadable: ``"<bag name>: <error>"`` for each bag ``read_bag`` refuses, and each spool
            file still in ``spool/`` (a segment that was not turned into a bag); paths relative
            to the folder.
    """

    js: NDArray[np.int64]
    js_q: NDArray[np.float64]
    mocap: NDArray[np.int64]
    bags: list[Path] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def read_disk(folder: Path) -> Disk:
    """Read every segment bag of ``folder`` the way ``dynid fit`` does (``read_bag``, CRCs
    checked; the mocap topic when the bag has it: the recorder leaves out a stream with no
    sample in a segment, and says so) and collect the header stamps of every joint-state and
    mocap message stored."""
    js: list[int] = []
    rows: list[tuple[float, ...]] = []
    mocap: list[int] = []
    bags = sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith("segment_"))
    unreadable = [f"spool/{p.name}: not recovered" for p in sp.leftover_spools(folder / "spool")]
    for bag in bags:
        try:
            with open_bag(bag, notes=[]) as reader:
                decoder = m.JointStateDecoder(m.make_typestore())
                conns = [c for c in reader.connections if c.topic in (JS_TOPIC, MOCAP_TOPIC)]
                for conn, _, raw in bag_messages(reader, bag, conns):
                    if conn.topic == JS_TOPIC:
                        stamp, _, position, _, _ = decoder.decode(raw)
                        js.append(stamp)
                        rows.append(position)
                    else:
                        sec, nsec = _STAMP.unpack_from(raw, 4)
                        mocap.append(m.checked_ns(sec, nsec))
            has_mocap = any(c.topic == MOCAP_TOPIC for c in conns)
            mocap_topics = (MocapTopic("box", MOCAP_TOPIC, msgtype=m.TRANSFORM_STAMPED),)
            layout = BagLayout(
                JointStateTopic(JS_TOPIC, joints=tuple(JOINTS)),
                mocap=mocap_topics if has_mocap else (),
            )
            read_bag(bag, layout)
        except (BagReadError, DataError) as err:
            unreadable.append(f"{bag.name}: {str(err).replace(f'{folder}/', '')}")
    order = np.argsort(np.asarray(js, dtype=np.int64), kind="stable")
    return Disk(
        js=np.asarray(js, dtype=np.int64)[order],
        js_q=np.asarray(rows, dtype=np.float64).reshape(-1, len(JOINTS))[order],
        mocap=np.sort(np.asarray(mocap, dtype=np.int64)),
        bags=bags,
        unreadable=unreadable,
    )


def missing(published: NDArray[np.int64], on_disk: NDArray[np.int64]) -> NDArray[np.bool_]:
    """For each published stamp, whether it is absent from the sorted ``on_disk`` stamps."""
    if on_disk.size == 0:
        return np.ones(published.shape, dtype=bool)
    i = np.clip(np.searchsorted(on_disk, published), 0, on_disk.size - 1)
    return on_disk[i] != published


def longest_run(flags: NDArray[np.bool_]) -> tuple[int, int]:
    """``(start, length)`` of the longest run of ``True`` in ``flags`` (``(0, 0)``: none)."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    if edges.size == 0:
        return 0, 0
    starts, ends = edges[::2], edges[1::2]
    j = int(np.argmax(ends - starts))
    return int(starts[j]), int(ends[j] - starts[j])


def environment() -> None:
    """A private ROS domain, discovery on this host only (unless the caller set them)."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
