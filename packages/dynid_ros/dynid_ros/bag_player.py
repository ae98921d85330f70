"""``bag_player`` node: replay a ROS 2 bag (mcap or sqlite3) through ``rosbags`` with its timing.

For machines without the ``ros2 bag`` CLI, and for tests; with a system ROS 2,
``ros2 bag play --clock`` does the same. Messages are published as the serialized bytes stored
in the bag (no decoding), at their recorded times scaled by ``rate``, from ``start_offset``
seconds into the bag, optionally looping, with topic selection and remapping, ``/clock``
publishing, and a paused start released by ``~/resume`` (``~/pause`` pauses again).

``/clock`` goes out at ``clock_rate_hz`` while playing, and keeps going with the time held
while paused and after the last message, until the node stops: a ``use_sim_time`` node whose
subscription matches late (DDS discovery takes its time on a loaded machine) still learns the
bag's time instead of stamping its outputs with time 0.
"""

from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.publisher import Publisher
from rosgraph_msgs.msg import Clock
from std_srvs.srv import Trigger

from dynid.data import DataError, bag_messages, open_bag
from dynid_ros import params, qos
from dynid_ros.conversions import ns_to_stamp
from dynid_ros.errors import ParameterError
from dynid_ros.run import run_node


def message_class(msgtype: str) -> type | None:
    """The Python class of ``"pkg/msg/Name"``, or ``None`` when the package is not importable."""
    pkg, _, name = msgtype.rpartition("/")
    try:
        module = importlib.import_module(pkg.replace("/", "."))
    except ImportError:
        return None
    return getattr(module, name, None)


def parse_remaps(entries: list[str]) -> dict[str, str]:
    """``["/a:=/b", ...]`` as ``{"/a": "/b"}``; raises ``ParameterError`` on a bad entry."""
    out = {}
    for entry in entries:
        src, sep, dst = entry.partition(":=")
        if not sep or not src or not dst:
            raise ParameterError(f"parameter 'remap': entry {entry!r} is not 'from:=to'")
        out[src] = dst
    return out


class BagPlayer(Node):
    """The bag player node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("bag_player", **kwargs)
        d = params.declare
        self.bag = Path(d(self, "bag", "", "bag directory (or .mcap / .db3 file) to replay"))
        if not str(self.bag) or not self.bag.exists():
            raise ParameterError(f"parameter 'bag': {str(self.bag)!r} does not exist")
        self.rate = params.positive("rate", d(self, "rate", 1.0, "playback speed factor"))
        offset = d(self, "start_offset", 0.0, "s skipped at the start of the bag")
        self.offset_s = params.positive("start_offset", offset, allow_zero=True)
        self.loop = d(self, "loop", False, "start over at the end")
        selected = d(self, "topics", [], "topics to play; empty: all", item=str)
        self.remaps = parse_remaps(d(self, "remap", [], "topic remappings 'from:=to'", item=str))
        latched = set(d(self, "latched_topics", ["/robot_description", "/tf_static"],
                        "topics published transient-local (latched)", item=str))  # fmt: skip
        self.publish_clock = d(self, "clock", False, "publish the bag time on /clock")
        self.clock_period = 1.0 / params.positive(
            "clock_rate_hz", d(self, "clock_rate_hz", 100.0, "/clock rate between messages (Hz)")
        )
        delay = d(self, "delay", 0.0, "s waited before playing (lets subscribers connect)")
        self.delay_s = params.positive("delay", delay, allow_zero=True)
        self._running = threading.Event()
        if not d(self, "start_paused", False, "wait for ~/resume before playing"):
            self._running.set()
        self._stop = threading.Event()
        self.publishers_by_topic: dict[str, Publisher] = {}
        with open_bag(self.bag) as reader:
            connections = list(reader.connections)
        missing = sorted(set(selected) - {c.topic for c in connections})
        if missing:
            raise ParameterError(f"parameter 'topics': {missing} not in bag {self.bag}")
        for conn in connections:
            if (selected and conn.topic not in selected) or conn.topic in self.publishers_by_topic:
                continue
            cls = message_class(conn.msgtype)
            if cls is None:
                self.get_logger().warning(
                    f"{conn.topic}: message type {conn.msgtype} is not importable; not played"
                )
                continue
            topic = self.remaps.get(conn.topic, conn.topic)
            # recorded latched topics stay latched; everything else reliable with a deep queue
            profile = qos.latched() if conn.topic in latched else qos.reliable(1000)
            self.publishers_by_topic[conn.topic] = self.create_publisher(cls, topic, profile)
        if not self.publishers_by_topic:
            raise ParameterError(f"parameter 'topics': nothing playable in bag {self.bag}")
        self.clock_pub = self.create_publisher(Clock, "/clock", qos.clock())
        self.create_service(Trigger, "~/resume", self._on_resume)
        self.create_service(Trigger, "~/pause", self._on_pause)
        self.played = 0
        self._clock_ns: int | None = None  # the bag time last published on /clock
        self._thread = threading.Thread(target=self._play, name="bag-playback", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"playing {self.bag} ({len(self.publishers_by_topic)} topics, rate {self.rate:g}"
            f"{', paused' if not self._running.is_set() else ''})"
        )

    def _on_resume(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = not self._running.is_set(), "resumed"
        self._running.set()
        return res

    def _on_pause(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self._running.is_set(), "paused"
        self._running.clear()
        return res

    def _tick(self, bag_ns: int) -> None:
        if self.publish_clock:
            self._clock_ns = bag_ns
            self.clock_pub.publish(Clock(clock=ns_to_stamp(bag_ns)))

    def _hold_clock(self, until: threading.Event) -> None:
        """Publish the held bag time every clock period until ``until`` is set (or shutdown);
        without ``/clock`` publishing just wait for ``until``."""
        if not self.publish_clock:
            until.wait()
            return
        while not until.wait(self.clock_period) and self.context.ok():
            if self._clock_ns is not None:
                self._tick(self._clock_ns)

    def _play(self) -> None:
        self._running.wait()
        if self._stop.wait(self.delay_s):
            return
        try:
            while not self._stop.is_set():
                self._play_once()
                if not self.loop:
                    break
        except DataError as err:
            self.get_logger().error(f"playback stopped: {err}")
            return
        if not self._stop.is_set():
            self.get_logger().info(f"finished {self.bag}: {self.played} messages")
            self._hold_clock(self._stop)

    def _play_once(self) -> None:
        with open_bag(self.bag) as reader:
            conns = [c for c in reader.connections if c.topic in self.publishers_by_topic]
            begin = reader.start_time + round(self.offset_s * 1e9)
            wall0, bag0 = time.monotonic(), begin
            for conn, stamp, raw in bag_messages(reader, self.bag, conns, begin):
                while True:  # wait for the message's time, publishing /clock meanwhile
                    if not self._running.is_set():
                        paused_at = time.monotonic()
                        self._hold_clock(self._running)
                        wall0 += time.monotonic() - paused_at
                    if self._stop.is_set() or not self.context.ok():
                        return
                    now = time.monotonic()
                    due = wall0 + (stamp - bag0) * 1e-9 / self.rate
                    if now >= due:
                        break
                    self._tick(bag0 + round((now - wall0) * self.rate * 1e9))
                    time.sleep(min(due - now, self.clock_period))
                self._tick(stamp)
                self.publishers_by_topic[conn.topic].publish(bytes(raw))
                self.played += 1

    def close(self) -> None:
        """Stop playback."""
        self._stop.set()
        self._running.set()
        self._thread.join(timeout=5.0)


def main(args: list[str] | None = None) -> None:
    """Console entry point ``bag_player``."""
    run_node(BagPlayer, "bag_player", (ParameterError, DataError), args)


if __name__ == "__main__":
    main()
