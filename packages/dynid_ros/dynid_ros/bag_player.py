"""``bag_player`` node: replay a ROS 2 bag (mcap or sqlite3) through ``rosbags`` with its timing.

For machines without the ``ros2 bag`` CLI, and for tests; with a system ROS 2,
``ros2 bag play --clock`` does the same. Messages are published as the serialized bytes stored
in the bag (no decoding), at their recorded times scaled by ``rate``, from ``start_offset``
seconds into the bag, optionally looping, with topic selection and remapping, ``/clock``
publishing, and a paused start released by ``~/resume`` (``~/pause`` pauses again) or held until
each topic of ``wait_for_subscribers`` has a subscriber (a launch file waits for the estimator,
which takes seconds to start, so that no segment is cut before anyone listens).

``/clock`` goes out at ``clock_rate_hz`` while playing, and keeps going with the time held
while paused and after the last message, until the node stops: a ``use_sim_time`` node whose
subscription matches late (DDS discovery takes its time on a loaded machine) still learns the
bag's time instead of stamping its outputs with time 0. Nothing is published once the node
stops (a publish that meets a context shut down meanwhile ends playback quietly).

What cannot be played is said, at start and in the last line, instead of "finished": messages
whose storage type differs from the type ``metadata.yaml`` declares for their topic (``rosbags``
skips them), messages under a topic id no topic record names, messages of a type that is not
importable, and messages without data. A playback cut short by the shutdown says so.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Collection
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


def _same(declared: Any, stored: Any) -> bool:
    """Whether ``rosbags`` plays the stored connection under the declared one (its own test)."""
    if (declared.topic, declared.msgtype, declared.ext) != (stored.topic, stored.msgtype,
                                                            stored.ext):  # fmt: skip
        return False
    return not stored.digest or not declared.digest or declared.digest == stored.digest


def unplayable(reader: Any, topics: Collection[str]) -> list[tuple[int, str]]:
    """Messages of the open bag ``reader`` that playback of ``topics`` would skip without a
    word, as ``(count, why)``, read from the storage files themselves.

    ``rosbags`` plays a stored message only under a ``metadata.yaml`` topic of the same name,
    type, serialization and type hash, and only when its topic id (sqlite3) or channel id (mcap)
    names a topic record of the file.
    """
    out: list[tuple[int, str]] = []
    storage = reader.storage
    declared = list(reader.connections)
    storages = getattr(storage, "storages", None) or [storage]
    for st in storages:
        conns = list(getattr(st, "connections", ()))
        total = int(getattr(getattr(st, "metadata", None), "message_count", 0) or 0)
        orphans = total - sum(int(c.msgcount) for c in conns)
        if orphans > 0:
            name = Path(str(getattr(st, "path", ""))).name
            out.append((orphans, f"{name}: stored under a topic id that no topic record names"))
        if st is storage:  # a bare storage file: its connections are the declared ones
            continue
        for c in conns:
            if not c.msgcount or c.topic not in topics or any(_same(d, c) for d in declared):
                continue
            types = sorted({d.msgtype for d in declared if d.topic == c.topic})
            if not types:
                why = "not in metadata.yaml"
            elif c.msgtype not in types:
                why = f"metadata.yaml declares {' or '.join(types)}, the storage {c.msgtype}"
            else:
                why = "serialization, QoS or type hash in metadata.yaml differ from the storage's"
            out.append((int(c.msgcount), f"{c.topic}: {why}"))
    return out


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
        self.wait_topics = d(self, "wait_for_subscribers", [], "topics that must each have a "
                             "subscriber before playing (after delay), e.g. the estimator's "
                             "/recorder/segment", item=str)  # fmt: skip
        self._running = threading.Event()
        if not d(self, "start_paused", False, "wait for ~/resume before playing"):
            self._running.set()
        self._stop = threading.Event()
        self._publishing = threading.Lock()  # held while publishing; see _publish
        self.publishers_by_topic: dict[str, Publisher] = {}
        with open_bag(self.bag) as reader:
            connections = list(reader.connections)
            wanted = set(selected) if selected else {c.topic for c in connections}
            #: (count, why) of the messages playback skips, said at start and at the end
            self.unplayable = unplayable(reader, wanted)
        missing = sorted(set(selected) - {c.topic for c in connections})
        if missing:
            raise ParameterError(f"parameter 'topics': {missing} not in bag {self.bag}")
        for conn in connections:
            if (selected and conn.topic not in selected) or conn.topic in self.publishers_by_topic:
                continue
            cls = message_class(conn.msgtype)
            if cls is None:
                self.unplayable.append((int(conn.msgcount), f"{conn.topic}: message type "
                                        f"{conn.msgtype} is not importable"))  # fmt: skip
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
        self.empty = 0  # messages without data (skipped)
        self._clock_ns: int | None = None  # the bag time last published on /clock
        self._thread = threading.Thread(target=self._play, name="bag-playback", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"playing {self.bag} ({len(self.publishers_by_topic)} topics, rate {self.rate:g}"
            f"{', paused' if not self._running.is_set() else ''})"
        )
        if self.unplayable:
            self.get_logger().warning(f"{self.bag}: {self._not_played()} will not be played")

    def _on_resume(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success = not self._running.is_set()
        res.message = "resumed" if res.success else "not paused: playing already"
        self._running.set()
        return res

    def _on_pause(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success = self._running.is_set()
        res.message = "paused" if res.success else "not playing: paused already"
        self._running.clear()
        return res

    def _not_played(self) -> str:
        """``"<n> messages: <count> <why>; ..."`` of what playback skips."""
        items = [*self.unplayable, *([(self.empty, "without data")] if self.empty else [])]
        total = sum(n for n, _ in items)
        return f"{total} messages ({'; '.join(f'{n}: {why}' for n, why in items)})"

    def _publish(self, publisher: Publisher, msg: Any) -> bool:
        """Publish unless the node stops; ``False`` (nothing published) once it does.

        The check and the publish are not atomic against a shutdown from another thread (a
        signal shuts the context down while the playback thread runs), so a publish that fails
        because the context went down meanwhile counts as the stop, not as an error.
        """
        with self._publishing:
            if self._stop.is_set() or not self.context.ok():
                return False
            try:
                publisher.publish(msg)
            except Exception:
                if self._stop.is_set() or not self.context.ok():
                    return False
                raise
        return True

    def _tick(self, bag_ns: int) -> bool:
        if not self.publish_clock:
            return not self._stop.is_set() and self.context.ok()
        self._clock_ns = bag_ns
        return self._publish(self.clock_pub, Clock(clock=ns_to_stamp(bag_ns)))

    def _hold_clock(self, until: threading.Event) -> bool:
        """Publish the held bag time every clock period until ``until`` is set; without
        ``/clock`` publishing just wait for ``until``. ``False`` when the node stopped."""
        if not self.publish_clock:
            while not until.wait(0.5):
                if self._stop.is_set() or not self.context.ok():
                    return False
            return not self._stop.is_set()
        while not until.wait(self.clock_period):
            if self._clock_ns is not None and not self._tick(self._clock_ns):
                return False
            if self._stop.is_set() or not self.context.ok():
                return False
        return not self._stop.is_set()

    def _wait_for_subscribers(self) -> bool:
        """Wait until each topic of ``wait_for_subscribers`` has a subscriber (said once in the
        log); ``False`` when the node stopped meanwhile."""
        waiting = [t for t in self.wait_topics if not self.count_subscribers(t)]
        if waiting:
            self.get_logger().info(f"waiting for a subscriber on {waiting} before playing")
        while waiting:
            if self._stop.wait(0.1) or not self.context.ok():
                return False
            waiting = [t for t in waiting if not self.count_subscribers(t)]
        return True

    def _play(self) -> None:
        self._running.wait()
        if self._stop.wait(self.delay_s) or not self._wait_for_subscribers():
            return
        try:
            while True:
                if not self._play_once():
                    self.get_logger().info(
                        f"playback of {self.bag} stopped by the shutdown after {self.played} "
                        "messages"
                    )
                    return
                if not self.loop:
                    break
        except DataError as err:
            self.get_logger().error(f"playback stopped: {err}")
            return
        if self.unplayable or self.empty:
            self.get_logger().warning(
                f"finished {self.bag}: {self.played} messages played; not played: "
                f"{self._not_played()}"
            )
        else:
            self.get_logger().info(f"finished {self.bag}: {self.played} messages played")
        self._hold_clock(self._stop)

    def _play_once(self) -> bool:
        """Play the bag once; ``False`` when the node stopped before the end."""
        with open_bag(self.bag) as reader:
            conns = [c for c in reader.connections if c.topic in self.publishers_by_topic]
            begin = reader.start_time + round(self.offset_s * 1e9)
            wall0, bag0 = time.monotonic(), begin
            for conn, stamp, raw in bag_messages(reader, self.bag, conns, begin):
                while True:  # wait for the message's time, publishing /clock meanwhile
                    if not self._running.is_set():
                        paused_at = time.monotonic()
                        if not self._hold_clock(self._running):
                            return False
                        wall0 += time.monotonic() - paused_at
                    if self._stop.is_set() or not self.context.ok():
                        return False
                    now = time.monotonic()
                    due = wall0 + (stamp - bag0) * 1e-9 / self.rate
                    if now >= due:
                        break
                    if not self._tick(bag0 + round((now - wall0) * self.rate * 1e9)):
                        return False
                    time.sleep(min(due - now, self.clock_period))
                if not raw:  # a row without data (sqlite3 NULL): nothing to publish
                    self.empty += 1
                    continue
                if not self._tick(stamp):
                    return False
                if not self._publish(self.publishers_by_topic[conn.topic], bytes(raw)):
                    return False
                self.played += 1
        return True

    def close(self) -> None:
        """Stop playback; nothing is published after this returns."""
        self._stop.set()
        self._running.set()
        with self._publishing:  # waits for a publish under way
            pass
        self._thread.join(timeout=5.0)


def main(args: list[str] | None = None) -> None:
    """Console entry point ``bag_player``."""
    run_node(BagPlayer, "bag_player", (ParameterError, DataError), args)


if __name__ == "__main__":
    main()
