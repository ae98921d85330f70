"""Counters of received and rejected messages per input stream, published on ``/diagnostics``.

Each stream (topic) keeps how many messages arrived, how many were used, and how many were
rejected for which reason (``"<field>: <reason>"``). ``to_msg`` turns the counters into a
``diagnostic_msgs/DiagnosticArray`` with one status per stream: OK, or WARN once any message of
the stream was rejected.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue


@dataclass
class StreamCounts:
    """Counts of one input stream."""

    topic: str
    received: int = 0
    used: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    @property
    def rejected_total(self) -> int:
        """Messages (or samples inside messages) rejected, all reasons."""
        return sum(self.rejected.values())


class Diagnostics:
    """Thread-safe per-stream counters of one node."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name
        self._lock = threading.Lock()
        self._streams: dict[str, StreamCounts] = {}

    def stream(self, topic: str) -> StreamCounts:
        """The counters of ``topic`` (created on first use)."""
        with self._lock:
            return self._streams.setdefault(topic, StreamCounts(topic))

    def received(self, topic: str) -> None:
        """Count one arrived message."""
        self.stream(topic).received += 1

    def used(self, topic: str, count: int = 1) -> None:
        """Count ``count`` accepted messages or samples."""
        self.stream(topic).used += count

    def rejected(self, topic: str, reason: str) -> int:
        """Count one rejection of ``reason``; returns how often that reason occurred so far."""
        counts = self.stream(topic)
        with self._lock:
            counts.rejected[reason] += 1
            return counts.rejected[reason]

    def snapshot(self) -> dict[str, StreamCounts]:
        """Copies of all counters."""
        with self._lock:
            return {
                k: StreamCounts(v.topic, v.received, v.used, Counter(v.rejected))
                for k, v in self._streams.items()
            }

    def to_msg(
        self,
        stamp: Time,
        extra: dict[str, str] | None = None,
        problem: str = "",
    ) -> DiagnosticArray:
        """A ``DiagnosticArray`` with one status per stream, plus one for the node with the
        ``extra`` values: OK, or WARN with ``problem`` as its message when one is given."""
        array = DiagnosticArray()
        array.header.stamp = stamp
        for counts in self.snapshot().values():
            status = DiagnosticStatus()
            status.name = f"{self.node_name}: {counts.topic}"
            status.hardware_id = self.node_name
            bad = counts.rejected_total
            status.level = DiagnosticStatus.WARN if bad else DiagnosticStatus.OK
            status.message = f"{bad} rejected" if bad else "ok"
            values = [
                KeyValue(key="received", value=str(counts.received)),
                KeyValue(key="used", value=str(counts.used)),
                KeyValue(key="rejected", value=str(bad)),
            ]
            values += [KeyValue(key=r, value=str(n)) for r, n in sorted(counts.rejected.items())]
            status.values = values
            array.status.append(status)
        if extra:
            status = DiagnosticStatus(name=f"{self.node_name}: node", hardware_id=self.node_name)
            status.level = DiagnosticStatus.WARN if problem else DiagnosticStatus.OK
            status.message = problem or "ok"
            status.values = [KeyValue(key=k, value=v) for k, v in extra.items()]
            array.status.append(status)
        return array
