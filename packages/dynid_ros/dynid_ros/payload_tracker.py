"""The ``payload_tracker`` node: the payload's inertial parameters live from ``/joint_states``.

It runs :class:`dynid.online.PayloadTracker` (causal filtering, recursive Bayesian update,
consistency projection, change detection; see that module) on the joint-state stream.

Subscribes ``joint_state_topic`` (``sensor_msgs/JointState``, best effort, any rate; the robot's
joints by name, positions and efforts required, velocities used when ``use_velocity``). The
stream's sample period is ``sample_rate`` or, when that is 0, the median step of the first
:data:`RATE_WINDOW` stamps. Each message is checked (names, lengths, finiteness, stamps moving
forward); a bad one is counted on ``/diagnostics`` and skipped, never fatal.

Publishes, every ``1 / rate`` s when samples arrived (stamped with the last sample's time):

- ``~/estimate`` (``dynid_msgs/ParameterEstimate``): the payload's ten parameters in the flange
  frame (mass, centre of mass, inertia about it) and the torque offsets, with σ and covariance
  (``map`` holds the same values as ``mean``: the estimate is a point with a Gaussian around it);
- ``~/inertia`` (``geometry_msgs/InertiaStamped``, ``frame_id`` the payload's link): mass,
  centre of mass and inertia about the centre of mass;
- ``~/markers`` (``visualization_msgs/MarkerArray``): a sphere at the centre of mass (its
  volume the mass's at 1000 kg/m³) and a text with mass and σ;
- ``~/events`` (``diagnostic_msgs/DiagnosticStatus``, reliable): one when a change is detected
  (``kind: detected``: ``change_time``, ``detect_time``, ``joint``, ``statistic``, the
  ``before/<parameter>`` values) and one ``settle_s`` later (``kind: settled``, with the
  ``after/<parameter>`` values). The existing message fits a report of named values; no new
  interface is needed;
- ``/diagnostics`` (1 Hz): the stream's counters (received, used, rejected by reason), and the
  node's ``latency_ms`` (the last update's processing time), ``samples_dropped``,
  ``excitation_nats`` (information gained over the prior), ``unexcited`` and ``kappa``.

Nothing is sent to a robot.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import InertiaStamped
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from sensor_msgs.msg import JointState
from visualization_msgs.msg import Marker, MarkerArray

from dynid.errors import DynidError
from dynid.model.attachments import Payload
from dynid.online import (
    ChangeEvent,
    PayloadEstimate,
    PayloadTracker,
    SampleError,
    TrackerSettings,
)
from dynid.problem_file import ProblemFileError, read_problem_file
from dynid_msgs.msg import ParameterEstimate
from dynid_ros import conversions as cv
from dynid_ros import params, qos
from dynid_ros.diagnostics import Diagnostics
from dynid_ros.errors import BadMessageError, ParameterError
from dynid_ros.estimator_node import resolve_problem
from dynid_ros.run import run_node

#: Samples whose stamps set the sample period when ``sample_rate`` is 0.
RATE_WINDOW = 50
#: Density (kg/m³) that sizes the centre-of-mass sphere.
MARKER_DENSITY = 1000.0


class PayloadTrackerNode(Node):
    """The payload tracker node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("payload_tracker", **kwargs)
        d = params.declare
        self.problem_path = resolve_problem(
            d(self, "problem", "panda_payload_track",
              "problem YAML path or name in config/problems (one payload attachment)")
        )  # fmt: skip
        try:
            self.problem_file = read_problem_file(self.problem_path)
        except ProblemFileError as err:
            raise ParameterError(f"parameter 'problem': {err}") from err
        self.topic = d(self, "joint_state_topic", "/joint_states", "sensor_msgs/JointState input")
        self.rate = params.positive("rate", d(self, "rate", 50.0, "updates published per s"))
        self.sample_rate = params.positive(
            "sample_rate",
            d(self, "sample_rate", 0.0, "joint-state rate (Hz); 0: measured from the stamps"),
            allow_zero=True,
        )
        self.use_velocity = d(
            self, "use_velocity", False, "use measured velocities, not differentiated positions"
        )
        settings = {
            "change_rate": d(self, "change_rate", 0.01, "expected payload changes per s"),
            "false_alarms_per_hour": d(
                self, "false_alarms_per_hour", 0.01, "designed false alarms per hour (detector)"
            ),
            "settle_s": d(self, "settle_s", 2.0, "s after a change for the 'after' estimate"),
        }
        cutoff = d(self, "cutoff_hz", 0.0, "low-pass cut-off (Hz); 0: the problem file's")
        try:
            self.settings = TrackerSettings(cutoff_hz=cutoff or None, **settings)
            # built once here so that a problem the tracker cannot run stops the node now
            PayloadTracker.from_problem(self.problem_file, 1e-3, self.settings)
        except DynidError as err:
            raise ParameterError(f"payload tracker: {err}") from err
        payload_link = next(
            a.link for a in getattr(self.problem_file.robot, "attachments", ())
            if isinstance(a, Payload)
        )  # fmt: skip
        self.frame_id = d(self, "frame_id", payload_link, "frame of the estimate (the flange)")
        self.joints = list(self.problem_file.robot.joint_names)
        self.converter = cv.JointStateConverter(self.joints)
        self.diag = Diagnostics(self.get_fully_qualified_name())
        self.tracker: PayloadTracker | None = None
        self._first: list[tuple[int, np.ndarray, np.ndarray, np.ndarray | None]] = []
        self._t0_ns: int | None = None
        self._new = 0
        self._latency_ms = math.nan
        self._stamp_ns = 0

        self.estimate_pub = self.create_publisher(ParameterEstimate, "~/estimate",
                                                  qos.reliable(10))  # fmt: skip
        self.inertia_pub = self.create_publisher(InertiaStamped, "~/inertia", qos.reliable(10))
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", qos.reliable(5))
        self.events_pub = self.create_publisher(DiagnosticStatus, "~/events", qos.reliable(50))
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.reliable(10))
        self.create_subscription(JointState, self.topic, self._on_joint_state, qos.sensor())
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / self.rate, self._update, clock=steady)
        self.create_timer(1.0, self._publish_diagnostics, clock=steady)
        self.get_logger().info(
            f"tracking the payload of {self.problem_path} on {self.topic}, publishing at "
            f"{self.rate:g} Hz in frame {self.frame_id!r}"
        )

    # ------------------------------------------------------------------------------- input
    def _on_joint_state(self, msg: JointState) -> None:
        self.diag.received(self.topic)
        try:
            sample = self.converter(msg)
            if sample.effort is None:
                raise BadMessageError("effort", "missing (the tracker needs joint torques)")
            if self.use_velocity and sample.velocity is None:
                raise BadMessageError("velocity", "missing (use_velocity is set)")
            velocity = sample.velocity if self.use_velocity else None
            if self.tracker is None:
                self._collect(sample.stamp_ns, sample.position, sample.effort, velocity)
                return
            self._push(sample.stamp_ns, sample.position, sample.effort, velocity)
        except BadMessageError as err:
            self._reject(err.key)
        except SampleError:  # the converter checked lengths and values: the stamp went back
            self._reject("header.stamp: not after the previous message")

    def _reject(self, key: str) -> None:
        if self.diag.rejected(self.topic, key) == 1:
            self.get_logger().warning(f"{self.topic}: skipped a message ({key})")

    def _collect(
        self, stamp_ns: int, q: np.ndarray, tau: np.ndarray, dq: np.ndarray | None
    ) -> None:
        """Hold the first samples until the sample period is known, then start the tracker."""
        if self._first and stamp_ns <= self._first[-1][0]:
            raise BadMessageError("header.stamp", "not after the previous message")
        self._first.append((stamp_ns, q, tau, dq))
        if self.sample_rate == 0.0 and len(self._first) < RATE_WINDOW:
            return
        if self.sample_rate > 0.0:
            dt = 1.0 / self.sample_rate
        else:
            dt = float(np.median(np.diff([s[0] for s in self._first]))) * 1e-9
        self.tracker = PayloadTracker.from_problem(self.problem_file, dt, self.settings)
        self._t0_ns = self._first[0][0]
        first, self._first = self._first, []
        for stamp, q_, tau_, dq_ in first:
            self._push(stamp, q_, tau_, dq_)
        self.get_logger().info(f"sample period {dt * 1e3:.3g} ms; tracking")

    def _push(self, stamp_ns: int, q: np.ndarray, tau: np.ndarray, dq: np.ndarray | None) -> None:
        assert self.tracker is not None
        assert self._t0_ns is not None
        self.tracker.push((stamp_ns - self._t0_ns) * 1e-9, q, tau, dq)
        self._stamp_ns = stamp_ns
        self._new += 1
        self.diag.used(self.topic)

    # ------------------------------------------------------------------------------ output
    def _update(self) -> None:
        if self.tracker is None or self._new == 0:
            return
        start = time.perf_counter()
        update = self.tracker.update()
        self._new = 0
        stamp = cv.ns_to_stamp(self._stamp_ns)
        for event in update.detected:
            self.events_pub.publish(self._event(event, "detected"))
            self.get_logger().info(
                f"payload change at {self._seconds(event.change_time):.3f} s (detected "
                f"{self._seconds(event.detect_time):.3f} s on {event.joint})"
            )
        for event in update.completed:
            self.events_pub.publish(self._event(event, "settled"))
        estimate = update.estimate
        self.estimate_pub.publish(self._estimate_msg(estimate, stamp))
        self.inertia_pub.publish(self._inertia_msg(estimate, stamp))
        self.markers_pub.publish(self._markers(estimate, stamp))
        self._latency_ms = (time.perf_counter() - start) * 1e3

    def _seconds(self, t: float) -> float:
        """Tracker time → stamp seconds."""
        return (self._t0_ns or 0) * 1e-9 + t

    def _estimate_msg(self, e: PayloadEstimate, stamp: Any) -> ParameterEstimate:
        msg = ParameterEstimate()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        msg.names = list(e.names)
        msg.mean = e.values.tolist()
        msg.std = e.std.tolist()
        msg.covariance = e.covariance.ravel().tolist()
        msg.map = e.values.tolist()
        return msg

    def _inertia_msg(self, e: PayloadEstimate, stamp: Any) -> InertiaStamped:
        msg = InertiaStamped()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        msg.inertia.m = e.mass
        msg.inertia.com.x, msg.inertia.com.y, msg.inertia.com.z = (float(c) for c in e.com)
        i = e.inertia
        msg.inertia.ixx, msg.inertia.ixy, msg.inertia.ixz = (float(x) for x in i[0])
        msg.inertia.iyy, msg.inertia.iyz, msg.inertia.izz = (
            float(x) for x in (i[1, 1], i[1, 2], i[2, 2])
        )
        return msg

    def _markers(self, e: PayloadEstimate, stamp: Any) -> MarkerArray:
        sphere = Marker(type=Marker.SPHERE, action=Marker.ADD, ns="payload_com", id=0)
        text = Marker(type=Marker.TEXT_VIEW_FACING, action=Marker.ADD, ns="payload_com", id=1)
        diameter = 2.0 * (3.0 * max(e.mass, 0.0) / (4.0 * math.pi * MARKER_DENSITY)) ** (1 / 3)
        for m in (sphere, text):
            m.header.stamp = stamp
            m.header.frame_id = self.frame_id
            m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(c) for c in e.com)
            m.pose.orientation.w = 1.0
        sphere.scale.x = sphere.scale.y = sphere.scale.z = max(diameter, 0.01)
        sphere.color.r, sphere.color.g, sphere.color.b, sphere.color.a = 0.9, 0.5, 0.1, 0.8
        text.scale.z = 0.03
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        text.text = f"{e.mass:.3f} ± {e.std[0]:.3f} kg"
        return MarkerArray(markers=[sphere, text])

    def _event(self, event: ChangeEvent, kind: str) -> DiagnosticStatus:
        status = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: payload change",
                                  hardware_id=self.get_fully_qualified_name())  # fmt: skip
        status.level = DiagnosticStatus.WARN if kind == "detected" else DiagnosticStatus.OK
        status.message = (
            f"payload change at {self._seconds(event.change_time):.3f} s, detected "
            f"{self._seconds(event.detect_time):.3f} s ({kind})"
        )
        values = {
            "kind": kind,
            "change_time": repr(self._seconds(event.change_time)),
            "detect_time": repr(self._seconds(event.detect_time)),
            "joint": event.joint,
            "statistic": repr(event.statistic),
        }
        for label, estimate in (("before", event.before), ("after", event.after)):
            if estimate is not None:
                values |= {
                    f"{label}/{n}": repr(float(v))
                    for n, v in zip(estimate.names, estimate.values, strict=True)
                }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        return status

    def _publish_diagnostics(self) -> None:
        counts = self.diag.stream(self.topic)
        extra = {
            "latency_ms": f"{self._latency_ms:.3f}",
            "samples_dropped": str(counts.rejected_total),
        }
        problem = "" if self.tracker is not None else "waiting for joint states"
        if self.tracker is not None:
            e = self.tracker.estimate
            extra |= {
                "excitation_nats": f"{e.excitation:.3f}",
                "unexcited": ";".join(e.unexcited),
                "kappa": " ".join(f"{k:.1f}" for k in e.kappa),
                "mass_kg": f"{e.mass:.5g}",
            }
        stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(self.diag.to_msg(stamp, extra, problem))

    def close(self) -> None:
        """Nothing to save: the estimate lives on the topics."""


def main(args: list[str] | None = None) -> None:
    """Console entry point ``payload_tracker``."""
    run_node(PayloadTrackerNode, "payload_tracker", (ParameterError,), args)


if __name__ == "__main__":
    main()
