"""Per-topic sample collection with ordering checks and the read summary that reports them.

A ``TopicStream`` stores fixed-width rows of float64 values with integer-nanosecond stamps in
preallocated numpy buffers (no per-message Python objects are kept), so reading a bag costs the
output arrays plus a constant. Duplicated, out-of-order and invalid messages are counted, never
silently merged.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dynid.data.errors import BagReadError
from dynid.data.topics import OutOfOrder


@dataclass
class TopicSummary:
    """What happened to the messages of one topic (or one TF edge).

    Attributes:
        topic: topic name (TF edges: ``"/tf:<parent>-><child>"``).
        msgtype: ROS message type.
        received: messages seen.
        used: samples kept.
        duplicated: messages with the same stamp as the previous kept one (dropped).
        out_of_order: messages stamped earlier than the previous kept one.
        invalid: messages skipped because a field was bad; reasons in ``invalid_reasons``.
        dropped: samples estimated missing from gaps larger than 1.5 median periods.
        invalid_reasons: ``"<field>: <reason>" -> count``.
        first_stamp_ns, last_stamp_ns: stamp range of the kept samples (ns).
        period_ns: median step between kept samples within one segment (ns).
        first_backwards: ``(stamp, previous)`` (ns) of the first message stamped earlier than the
            one kept before it, or ``None``.
    """

    topic: str
    msgtype: str
    received: int = 0
    used: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    invalid: int = 0
    dropped: int = 0
    invalid_reasons: Counter[str] = field(default_factory=Counter)
    first_stamp_ns: int | None = None
    last_stamp_ns: int | None = None

    period_ns: float | None = None
    first_backwards: tuple[int, int] | None = None

    @property
    def rate_hz(self) -> float | None:
        """Nominal rate (Hz): inverse median step of the kept samples within segments."""
        return None if not self.period_ns else 1e9 / self.period_ns

    @property
    def skipped(self) -> int:
        """Messages read but not used (duplicated or earlier stamps, invalid fields)."""
        return max(self.received - self.used, 0)

    @property
    def skipped_percent(self) -> float:
        """``skipped`` as a percentage of ``received`` (0 when nothing was received)."""
        return 100.0 * self.skipped / self.received if self.received else 0.0

    def skipped_reasons(self) -> dict[str, int]:
        """``reason -> count`` of the skipped messages (stamps first, then the invalid fields)."""
        out: dict[str, int] = {}
        if self.out_of_order:
            text = "header.stamp earlier than the previous message"
            if self.first_backwards is not None:
                stamp, previous = self.first_backwards
                text += f" (first {_seconds(stamp)} s after {_seconds(previous)} s)"
            out[text] = self.out_of_order
        if self.duplicated:
            out["header.stamp equal to the previous message"] = self.duplicated
        out.update(self.invalid_reasons)
        other = self.skipped - sum(out.values())
        if other > 0:  # a TF edge: its invalid transforms count on the TF topic's summary
            out["invalid (see the topic's own summary)"] = other
        return out

    def describe(self) -> str:
        """One line: read, used, skipped by reason, missing samples, rate."""
        text = f"{self.topic} ({self.msgtype}): {self.received} read, {self.used} used"
        if self.skipped:
            reasons = "; ".join(f"{reason}: {n}" for reason, n in self.skipped_reasons().items())
            text += f", {self.skipped} skipped ({self.skipped_percent:.1f} %: {reasons})"
        if self.dropped:
            text += f", about {self.dropped} missing in gaps"
        if self.rate_hz is not None:
            text += f", {self.rate_hz:.1f} Hz"
        return text

    def as_dict(self) -> dict[str, Any]:
        """YAML-ready counts (``skipped_reasons`` as a plain mapping)."""
        out: dict[str, Any] = {
            "msgtype": self.msgtype,
            "received": self.received,
            "used": self.used,
            "skipped": self.skipped,
            "skipped_reasons": self.skipped_reasons(),
            "missing_in_gaps": self.dropped,
        }
        if self.rate_hz is not None:
            out["rate_hz"] = round(self.rate_hz, 3)
        return out


def _seconds(ns: int) -> str:
    """Integer nanoseconds as exact seconds ``"<s>.<9 digits>"``."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


@dataclass
class ReadSummary:
    """Everything a bag read counted: per-topic summaries and notes on decisions taken.

    Attributes:
        path: the bag.
        storage: ``"mcap"`` or ``"sqlite3"``.
        topics: per topic (and TF edge) summaries.
        expected_messages: message count the bag's metadata announces for the topics read.
        notes: human-readable decisions (grid trimming, receive-time stamps, ...).
    """

    path: str
    storage: str
    topics: dict[str, TopicSummary] = field(default_factory=dict)
    expected_messages: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def received(self) -> int:
        """Messages seen over all topics read (TF edges excluded)."""
        return sum(s.received for k, s in self.topics.items() if ":" not in k)

    @property
    def truncated(self) -> bool:
        """Whether fewer messages were found than the bag's metadata announces."""
        return self.received < self.expected_messages

    def problems(self) -> int:
        """Total duplicated + out-of-order + invalid + dropped samples."""
        return sum(
            s.duplicated + s.out_of_order + s.invalid + s.dropped for s in self.topics.values()
        )

    def check_skipped(self, max_percent: float, hint: str = "") -> None:
        """Refuse the read when a topic had more than ``max_percent`` % of its messages skipped,
        or when more than ``max_percent`` % of the messages the bag's metadata announces for the
        topics read were never found (a truncated bag, rows the storage cannot attribute to a
        topic).

        Args:
            max_percent: the share of a topic's messages that may be skipped (0..100).
            hint: appended to the message (how to allow more).

        Raises:
            BagReadError: one line naming the bag, the first such topic, its counts and the
                reasons (with the first stamp going backwards), or the announced and found
                message counts.
        """
        if self.truncated:
            missing = self.expected_messages - self.received
            percent = 100.0 * missing / self.expected_messages
            if percent > max_percent:
                raise BagReadError(
                    f"{self.path}: {missing} of the {self.expected_messages} messages its "
                    f"metadata announces for the topics read are missing ({percent:.1f} %, more "
                    f"than the {max_percent:g} % allowed): the bag is truncated or damaged{hint}"
                )
        for s in self.topics.values():
            if s.skipped and s.skipped_percent > max_percent:
                reasons = "; ".join(f"{reason}: {n}" for reason, n in s.skipped_reasons().items())
                raise BagReadError(
                    f"{self.path}: topic {s.topic!r}: {s.skipped} of {s.received} messages "
                    f"skipped ({s.skipped_percent:.1f} %, more than the {max_percent:g} % "
                    f"allowed): {reasons}{hint}"
                )

    def as_dict(self) -> dict[str, Any]:
        """YAML-ready: the bag, its storage, per-topic counts and the notes."""
        out: dict[str, Any] = {
            "path": self.path,
            "storage": self.storage,
            "topics": {topic: s.as_dict() for topic, s in self.topics.items()},
            "notes": list(self.notes),
        }
        if self.truncated:
            out["announced_messages"] = self.expected_messages
        return out

    def __str__(self) -> str:
        lines = [f"read {self.path} ({self.storage}): {self.received} messages"]
        lines.extend(f"  {s.describe()}" for s in self.topics.values())
        if self.truncated:
            lines.append(
                f"  TRUNCATED: {self.received} of {self.expected_messages} announced messages"
            )
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


class TopicStream:
    """Growable ``[n, width]`` float64 sample buffer with int64 stamps and ordering checks."""

    def __init__(
        self,
        summary: TopicSummary,
        width: int,
        *,
        capacity: int = 1024,
        policy: OutOfOrder = OutOfOrder.SKIP,
        path: str = "",
    ) -> None:
        self.summary = summary
        self.width = width
        self.policy = policy
        self._path = path
        self._stamps = np.empty(max(capacity, 16), dtype=np.int64)
        self._values = np.empty((max(capacity, 16), width), dtype=np.float64)
        self._n = 0
        self._drained = 0
        self._last = -(2**63)
        self._sorted = True

    def __len__(self) -> int:
        return self._n

    def add(self, stamp: int, row: tuple[float, ...] | NDArray[np.float64]) -> bool:
        """Append one sample; returns whether it was kept."""
        if stamp <= self._last:
            if stamp == self._last:
                self.summary.duplicated += 1
                return False
            self.summary.out_of_order += 1
            if self.summary.first_backwards is None:
                self.summary.first_backwards = (int(stamp), int(self._last))
            if self.policy is OutOfOrder.RAISE:
                raise BagReadError(
                    f"{self._path}: topic {self.summary.topic!r} field 'header.stamp' goes "
                    f"backwards: {stamp} ns after {self._last} ns"
                )
            if self.policy is OutOfOrder.SKIP:
                return False
            self._sorted = False
        else:
            self._last = stamp
        if self._n == self._stamps.size:
            new = 2 * self._n
            self._stamps = np.resize(self._stamps, new)
            values = np.empty((new, self.width), dtype=np.float64)
            values[: self._n] = self._values[: self._n]
            self._values = values
        self._stamps[self._n] = stamp
        self._values[self._n] = row
        self._n += 1
        return True

    def drain(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Copies of the samples kept since the last drain, then empty the buffer (streaming).

        Only for ``OutOfOrder.SKIP`` / ``RAISE``: ordering is still checked across drains.
        """
        if not self._sorted:
            raise BagReadError(f"{self._path}: topic {self.summary.topic!r}: cannot sort a stream")
        n = self._n
        out = self._stamps[:n].copy(), self._values[:n].copy()
        self._drained += n
        self.summary.used = self._drained
        if n:
            self.summary.first_stamp_ns = self.summary.first_stamp_ns or int(out[0][0])
            self.summary.last_stamp_ns = int(out[0][-1])
        self._n = 0
        return out

    def finish(
        self, starts_ns: NDArray[np.int64] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Kept stamps ``[n]`` (ns) and rows ``[n, width]``, sorted; fills the summary.

        ``starts_ns`` (sorted segment start stamps) keeps the gaps between recorded segments out
        of the dropped-sample estimate.
        """
        stamps, values = self._stamps[: self._n], self._values[: self._n]
        if not self._sorted:
            order = np.argsort(stamps, kind="stable")
            stamps, values = stamps[order], values[order]
            keep = np.concatenate([[True], np.diff(stamps) > 0])
            self.summary.duplicated += int((~keep).sum())
            stamps, values = stamps[keep], values[keep]
        s = self.summary
        s.used = self._drained + int(stamps.size)
        if self._drained:  # streaming: the gap statistics need all stamps; not estimated
            if stamps.size:
                s.last_stamp_ns = int(stamps[-1])
            return stamps, values
        if stamps.size:
            s.first_stamp_ns, s.last_stamp_ns = int(stamps[0]), int(stamps[-1])
        if stamps.size > 2:
            steps = np.diff(stamps)
            if starts_ns is not None and len(starts_ns) > 1:
                segment = np.searchsorted(starts_ns, stamps, side="right")
                steps = steps[segment[1:] == segment[:-1]]
            period = float(np.median(steps)) if steps.size else 0.0
            s.period_ns = period
            gaps = steps[steps > 1.5 * period]
            s.dropped = int(np.round(gaps / period).sum() - gaps.size)
        return stamps, values
