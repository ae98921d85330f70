"""When to cut segments: on request (``~/start`` / ``~/stop``) or automatically by excitation.

The automatic mode opens a segment when the largest joint speed exceeds ``threshold`` (rad/s
or m/s) and closes it after ``quiet_s`` below it; segments shorter than ``min_duration_s`` are
discarded. A segment opened by ``start`` (``~/start``) is manual in either mode: neither rest nor
a stall closes it, only ``stop`` (``~/stop``) does. Either mode closes a segment that reaches
``max_duration_s`` (the ring buffer's span) and opens the next one at once, so a long
recording becomes consecutive segments, none lost: when the closed segment was written shorter
than cut (its mocap ends before the cut, see ``dynid_ros.assemble.fit_spans``), ``written`` moves
the next one's start back to where the written span ended, so the two share that instant and no
joint state falls between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

CONTINUED = "segment reached max_buffer_s"
"""The reason of a cut that closes a segment at ``max_duration_s`` and opens the next one."""


class SegmentMode(Enum):
    """How segments are cut."""

    SERVICE = "service"  #: ``~/start`` and ``~/stop``
    AUTO = "auto"  #: by joint speed


@dataclass
class Cut:
    """A closed segment ``[start_ns, end_ns]`` and why it was closed."""

    start_ns: int
    end_ns: int
    reason: str


class Segmenter:
    """State machine over joint samples; ``update`` returns the segments it closed.

    Args:
        mode: service or auto.
        threshold: joint speed (rad/s or m/s) that counts as motion (auto mode).
        quiet_s: time below ``threshold`` that ends a segment (auto mode).
        pre_s: time before the first motion included in an automatic segment.
        min_duration_s: shorter automatic segments are dropped.
        max_duration_s: a segment reaching this length is closed and a new one opened.
    """

    def __init__(
        self,
        mode: SegmentMode,
        *,
        threshold: float,
        quiet_s: float,
        pre_s: float,
        min_duration_s: float,
        max_duration_s: float,
    ) -> None:
        self.mode = mode
        self.threshold = threshold
        self.quiet_ns = round(quiet_s * 1e9)
        self.pre_ns = round(pre_s * 1e9)
        self.min_ns = round(min_duration_s * 1e9)
        self.max_ns = round(max_duration_s * 1e9)
        self.start_ns: int | None = None
        self.manual = False  #: the open segment was opened by ``start``: only ``stop`` ends it
        self._last_motion_ns: int | None = None

    @property
    def active(self) -> bool:
        """Whether a segment is open."""
        return self.start_ns is not None

    def start(self, stamp_ns: int) -> bool:
        """Open a manual segment at ``stamp_ns``; ``False`` when one is open already."""
        if self.active:
            return False
        self.start_ns = stamp_ns
        self.manual = True
        return True

    def stop(self, stamp_ns: int, reason: str = "stop requested") -> Cut | None:
        """Close the open segment at ``stamp_ns`` (``None`` when none is open)."""
        if self.start_ns is None:
            return None
        cut = Cut(self.start_ns, stamp_ns, reason)
        self.start_ns = self._last_motion_ns = None
        self.manual = False
        return cut

    def update(self, stamp_ns: int, speed: float | None) -> list[Cut]:
        """Feed one joint sample (``speed``: max |joint velocity|, ``None`` if unknown)."""
        cuts: list[Cut] = []
        if self.start_ns is not None and stamp_ns - self.start_ns >= self.max_ns:
            manual = self.manual
            cut = self.stop(stamp_ns, CONTINUED)
            assert cut is not None
            cuts.append(cut)
            self.start_ns, self.manual = stamp_ns, manual
            self._last_motion_ns = stamp_ns
        if self.mode is not SegmentMode.AUTO or speed is None or self.manual:
            return cuts
        moving = speed > self.threshold
        if moving:
            if self.start_ns is None:
                self.start_ns = stamp_ns - self.pre_ns
            self._last_motion_ns = stamp_ns
        elif (
            self.start_ns is not None
            and self._last_motion_ns is not None
            and stamp_ns - self._last_motion_ns >= self.quiet_ns
        ):
            cut = self.stop(stamp_ns, "joints at rest")
            if cut is not None and cut.end_ns - cut.start_ns >= self.min_ns:
                cuts.append(cut)
        return cuts

    def continues(self, cut: Cut) -> bool:
        """Whether the segment open now began where ``cut`` ended (a :data:`CONTINUED` cut):
        joint states after what ``cut`` writes are then the open segment's, not lost."""
        return cut.reason == CONTINUED and self.start_ns == cut.end_ns

    def written(self, cut: Cut, end_ns: int) -> None:
        """Tell the segmenter that ``cut`` was written up to ``end_ns`` (``Snapshot.span``).

        After a :data:`CONTINUED` cut the segment opened at ``cut.end_ns`` starts at ``end_ns``
        instead, when that is earlier: the joint states after the written span are in the next
        segment, with the sample at ``end_ns`` in both.
        """
        if self.continues(cut) and end_ns < cut.end_ns:
            self.start_ns = end_ns
