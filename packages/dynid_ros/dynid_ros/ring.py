"""Bounded ring buffers of stamped samples: preallocated numpy storage, constant memory.

A ``RingBuffer`` keeps the latest ``capacity`` rows ``[width]`` (float64) with their stamps
(int64 ns), and drops samples older than ``max_age_ns`` behind the newest. Stamps must increase
strictly: a stamp at or before the newest one is refused (the caller counts it).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


class RingBuffer:
    """Latest samples of one stream.

    Args:
        width: values per sample.
        capacity: maximum number of samples kept (memory is ``capacity × (width + 1) × 8`` B).
        max_age_ns: samples older than the newest stamp minus this are dropped on read.
    """

    def __init__(self, width: int, capacity: int, max_age_ns: int) -> None:
        if width < 1 or capacity < 2:
            raise ValueError(f"ring buffer needs width >= 1 and capacity >= 2, got {width}, "
                             f"{capacity}")  # fmt: skip
        self.width = width
        self.capacity = capacity
        self.max_age_ns = max_age_ns
        self._stamps = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros((capacity, width), dtype=np.float64)
        self._head = 0  # index of the next write
        self._size = 0
        self.overwritten = 0  # samples pushed out by capacity (not by age)
        self.last_overwritten_ns: int | None = None  # stamp of the newest of them

    def __len__(self) -> int:
        return self._size

    @property
    def last_stamp(self) -> int | None:
        """Newest stamp (ns), ``None`` when empty."""
        return None if self._size == 0 else int(self._stamps[(self._head - 1) % self.capacity])

    def push(self, stamp: int, row: NDArray[np.float64]) -> bool:
        """Append one sample; ``False`` (not stored) when ``stamp`` does not increase."""
        last = self.last_stamp
        if last is not None and stamp <= last:
            return False
        if self._size == self.capacity:
            self.overwritten += 1
            self.last_overwritten_ns = int(self._stamps[self._head])
        self._stamps[self._head] = stamp
        self._values[self._head] = row
        self._head = (self._head + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)
        return True

    def window(
        self, start_ns: int | None = None, end_ns: int | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Copies of the samples with ``start_ns <= stamp <= end_ns`` not older than the age limit.

        Returns stamps ``[n]`` (ns) and rows ``[n, width]`` in time order.
        """
        n = self._size
        first = (self._head - n) % self.capacity
        order = (first + np.arange(n)) % self.capacity
        stamps = self._stamps[order]
        keep = np.ones(n, dtype=bool)
        if n:
            keep &= stamps >= stamps[-1] - self.max_age_ns
        if start_ns is not None:
            keep &= stamps >= start_ns
        if end_ns is not None:
            keep &= stamps <= end_ns
        sel = order[keep]
        return self._stamps[sel].copy(), self._values[sel].copy()

    def clear(self) -> None:
        """Forget every sample (the stamp order restarts)."""
        self._head = self._size = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage arrays (constant)."""
        return int(self._stamps.nbytes + self._values.nbytes)

    def truncate_after(self, stamp: int) -> int:
        """Drop the newest samples stamped at or after ``stamp``; returns how many."""
        dropped = 0
        while self._size and self._stamps[(self._head - 1) % self.capacity] >= stamp:
            self._head = (self._head - 1) % self.capacity
            self._size -= 1
            dropped += 1
        return dropped
