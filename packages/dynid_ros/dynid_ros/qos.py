"""QoS profiles of dynid's streams, one per kind of stream, chosen where each is used.

* sensor streams (joint states at up to 1 kHz, mocap, commands): best effort, keep last. A
  best-effort subscription matches reliable and best-effort publishers alike.
* segments and estimator outputs: reliable, so a segment that took seconds to record is never
  dropped, with enough depth for bursts.
* descriptions (``robot_description``): reliable + transient local, depth 1 (latched), as
  robot_state_publisher offers them.
* ``/clock``: reliable, depth 1 (as rosbag2 publishes it).
"""

from __future__ import annotations

from rclpy.qos import (
    QoSDurabilityPolicy,
    QoSHistoryPolicy,
    QoSProfile,
    QoSReliabilityPolicy,
)


def sensor(depth: int = 1000) -> QoSProfile:
    """Best-effort, volatile, keep-last ``depth`` (deep enough for 1 kHz bursts)."""
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=QoSReliabilityPolicy.BEST_EFFORT,
        durability=QoSDurabilityPolicy.VOLATILE,
    )


def reliable(depth: int = 10) -> QoSProfile:
    """Reliable, volatile, keep-last ``depth``."""
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.VOLATILE,
    )


def latched() -> QoSProfile:
    """Reliable, transient-local, depth 1: late subscribers get the last message."""
    return QoSProfile(
        history=QoSHistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=QoSReliabilityPolicy.RELIABLE,
        durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
    )


def clock() -> QoSProfile:
    """``/clock``: reliable, volatile, depth 1."""
    return reliable(1)
