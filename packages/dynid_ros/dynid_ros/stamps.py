"""One bad stamp is one bad message: a guard that keeps a stream's time line.

A message stamped far ahead (an hour in the future, a jump far beyond the stream's own period)
would, once stored, make every later message "not after the previous one" and block the
stream. The ``StampGuard`` of a stream holds such a message back instead of storing it:

* when the stream goes on along its old time line, the held message was the bad one: it is
  rejected (counted with its reason) and the stream goes on;
* when ``confirm`` messages in a row follow the held one (the stream really jumped: a driver
  restarted, a replay resumed, a clock that runs ahead of the node's), they are all accepted.

So a good message is at most delayed by ``confirm - 1`` messages, never lost, and a bad one is
rejected without evicting or blocking anything. The guard decides only about stamps ahead of
the stream; a stamp at or before the previous one is left to the buffer, which refuses it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")

AHEAD_OF_CLOCK = "header.stamp: far ahead of the node clock"
JUMP_AHEAD = "header.stamp: jumps far ahead of the stream"


@dataclass
class Held(Generic[T]):
    """A message held back: its stamp, the caller's payload and why it is suspect."""

    stamp: int
    item: T
    reason: str
    detail: str


class StampGuard(Generic[T]):
    """Admits the messages of one stream in stamp order (see the module docstring).

    Args:
        future_ns: a first message stamped more than this ahead of the node clock is suspect.
        min_jump_ns: a step ahead of the stream larger than this and than ``periods`` median
            periods is suspect.
        periods: how many median periods a step may span.
        confirm: messages in a row on a new time line that make the line accepted.
    """

    def __init__(
        self,
        *,
        future_ns: int = 60_000_000_000,
        min_jump_ns: int = 100_000_000,
        periods: float = 50.0,
        confirm: int = 3,
    ) -> None:
        self.future_ns = future_ns
        self.min_jump_ns = min_jump_ns
        self.periods = periods
        self.confirm = max(int(confirm), 1)
        self.last: int | None = None  # newest admitted stamp
        self._steps: deque[int] = deque(maxlen=32)
        self._held: list[Held[T]] = []

    @property
    def held(self) -> int:
        """Messages held back now."""
        return len(self._held)

    def jump_ns(self) -> int:
        """The largest step ahead of the stream taken without holding the message."""
        if not self._steps:
            return self.min_jump_ns
        return max(self.min_jump_ns, int(self.periods * float(np.median(self._steps))))

    def _suspect(self, stamp: int, now_ns: int) -> tuple[str, str] | None:
        if self.last is None:
            ahead = stamp - now_ns
            if now_ns > 0 and ahead > self.future_ns:
                return AHEAD_OF_CLOCK, f"{ahead * 1e-9:.6g} s ahead of the node clock"
            return None
        step = stamp - self.last
        if step > self.min_jump_ns and step > self.jump_ns():
            return JUMP_AHEAD, (
                f"{step * 1e-9:.6g} s after the previous message (the stream's steps are "
                f"about {float(np.median(self._steps)) * 1e-9 if self._steps else 0.0:.3g} s)"
            )
        return None

    def _admit(self, stamp: int) -> None:
        if self.last is not None and stamp > self.last:
            self._steps.append(stamp - self.last)
        if self.last is None or stamp > self.last:
            self.last = stamp

    def admit(
        self, stamp: int, item: T, now_ns: int = 0
    ) -> tuple[list[tuple[int, T]], list[Held[T]]]:
        """Decide about one message stamped ``stamp`` (``now_ns``: the node clock, 0: unknown).

        Returns the messages to store now, in order (the held ones of a confirmed jump, or this
        one), and the held messages rejected now.
        """
        rejected: list[Held[T]] = []
        if self._held:
            newest = self._held[-1].stamp
            if newest < stamp <= newest + self.jump_ns():  # goes on along the held line
                first = self._held[0]
                detail = f"follows a held message: {first.detail}"
                self._held.append(Held(stamp, item, first.reason, detail))
                if len(self._held) < self.confirm:
                    return [], []
                out = [(h.stamp, h.item) for h in self._held]
                self._held = []
                for s, _ in out:
                    self._admit(s)
                return out, []
            rejected, self._held = self._held, []
        suspect = self._suspect(stamp, now_ns)
        if suspect is not None:
            self._held = [Held(stamp, item, *suspect)]
            return [], rejected
        self._admit(stamp)
        return [(stamp, item)], rejected

    def reset(self) -> None:
        """Forget the time line (the stream's buffer was cleared)."""
        self.last = None
        self._steps.clear()
        self._held = []
