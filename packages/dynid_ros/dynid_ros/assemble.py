"""A recorded segment on the model grid: buffer snapshots aligned with ``dynid.data.align``."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from dynid.data import DataError, Trajectory
from dynid.data.align import Channel, align_streams, interp_linear, uniform_grid


@dataclass
class Snapshot:
    """Copies of the buffers over one time range, handed to the writer thread."""

    name: str
    joints: tuple[str, ...]
    has_velocity: bool
    has_effort: bool
    js: tuple[NDArray[np.int64], NDArray[np.float64]]
    #: (topic, channel names, stamps [n] (ns; empty: one constant row), rows [n, k], command?)
    channels: list[Channel]
    publish: bool
    reason: str
    #: what was left out of the segment and why (see :func:`fit_spans`)
    notes: list[str] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        """Bytes held by the copied samples."""
        arrays = [*self.js] + [a for ch in self.channels for a in ch[2:4]]
        return int(sum(a.nbytes for a in arrays))

    def empty_topics(self) -> list[str]:
        """Topics of the streams with no sample in the segment (a constant row counts)."""
        return [topic for topic, _, s, values, _ in self.channels
                if s is not None and s.size == 0 and values.shape[0] != 1]  # fmt: skip

    def span(self) -> tuple[int, int]:
        """``(lo, hi)`` ns: the span the joint states and every stream with samples cover, what
        :func:`assemble` writes (``lo >= hi``: they share none)."""
        stamps = self.js[0]
        lo, hi = int(stamps[0]), int(stamps[-1])
        for _, _, s, _, _ in self.channels:
            if s.size:
                lo, hi = max(lo, int(s[0])), min(hi, int(s[-1]))
        return lo, hi

    def without(self, topics: Collection[str]) -> Snapshot:
        """The snapshot without the streams of ``topics``."""
        kept = [ch for ch in self.channels if ch[0] not in topics]
        return dataclasses.replace(self, channels=kept)


def _inside(stamps: NDArray[np.int64], lo: int, hi: int) -> int:
    """How many of the sorted ``stamps`` lie in ``[lo, hi]``."""
    return int(np.searchsorted(stamps, hi, "right") - np.searchsorted(stamps, lo, "left"))


def fit_spans(snap: Snapshot, *, tail_carried: bool = False) -> Snapshot:
    """The snapshot with the streams it cannot align left out, and ``notes`` saying what was lost.

    A stream without a sample in the segment, or whose samples overlap fewer than two joint
    states, is left out (the joint states are written without it). When the remaining streams
    share no span of two joint states, the stream whose removal keeps the most joint states is
    left out, until they do. The segment is then cut to the span every kept stream covers (no
    extrapolation); joint states outside it are counted in a note, except those after it when
    ``tail_carried`` (the next segment starts where this one's span ends:
    ``Segmenter.continues``), which are not lost.
    """
    stamps = snap.js[0]
    a, b = int(stamps[0]), int(stamps[-1])
    notes: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    for topic, _, s, values, _ in snap.channels:
        if s.size == 0:
            if values.shape[0] != 1:  # a constant row (a static TF chain) covers everything
                notes.append(f"{topic} left out: no sample in the segment")
            continue
        if _inside(stamps, max(a, int(s[0])), min(b, int(s[-1]))) < 2:
            notes.append(
                f"{topic} left out: its samples [{int(s[0])}, {int(s[-1])}] ns do not overlap "
                f"the joint states [{a}, {b}] ns"
            )
            continue
        spans[topic] = (int(s[0]), int(s[-1]))

    def kept(topics: Collection[str]) -> int:
        lo = max([a, *(spans[t][0] for t in topics)])
        hi = min([b, *(spans[t][1] for t in topics)])
        return _inside(stamps, lo, hi)

    while len(spans) > 1 and kept(spans) < 2:
        worst = max(reversed(list(spans)), key=lambda t: kept([u for u in spans if u != t]))
        del spans[worst]
        notes.append(f"{worst} left out: it shares no time span with {sorted(spans)}")
    lo = max([a, *(v[0] for v in spans.values())])
    hi = min([b, *(v[1] for v in spans.values())])
    before, after = _inside(stamps, a, lo - 1), _inside(stamps, hi + 1, b)
    left_out, left_out_s = before, (lo - a) * 1e-9
    if not tail_carried:
        left_out, left_out_s = left_out + after, left_out_s + (b - hi) * 1e-9
    if left_out:
        notes.append(
            f"{left_out} of {stamps.size} joint states ({left_out_s:.3f} s) "
            f"outside the span of {sorted(spans)} [{lo}, {hi}] ns left out"
        )
    keep = set(spans) | {ch[0] for ch in snap.channels if ch[2].size == 0 and ch[3].shape[0] == 1}
    dropped = [ch[0] for ch in snap.channels if ch[0] not in keep]
    return dataclasses.replace(snap.without(dropped), notes=[*snap.notes, *notes])


def assemble(snap: Snapshot, rate_hz: float) -> Trajectory:
    """The segment as a ``Trajectory`` on the model grid.

    The grid is the joint-state stamps, or ``t0 + k / rate_hz`` when ``rate_hz > 0``, restricted
    to the span every stream covers (no extrapolation). Other streams are interpolated onto it
    (linear; slerp for quaternions). ``t`` starts at 0 s; ``meta["t0_ns"]`` is the absolute start.

    Raises:
        DataError: a stream has no sample in the segment or the streams share no time span.
    """
    stamps, rows = snap.js
    for topic, _, s, values, _ in snap.channels:
        if s.size == 0 and values.shape[0] != 1:
            raise DataError(f"{snap.name}: topic {topic!r} has no sample in the segment")
    lo, hi = snap.span()
    if lo >= hi:
        raise DataError(f"{snap.name}: the streams share no time span")
    origin = lo
    t_js = (stamps - origin) * 1e-9
    if rate_hz > 0:
        t = uniform_grid(0.0, (hi - origin) * 1e-9, 1.0 / rate_hz)
        rows = interp_linear(t_js, rows, t, what=f"{snap.name} joint states")
    else:
        keep = (stamps >= lo) & (stamps <= hi)
        t, rows = t_js[keep], rows[keep]
    n = len(snap.joints)
    q, col = rows[:, :n], n
    dq = effort = None
    if snap.has_velocity:
        dq, col = rows[:, col : col + n], col + n
    if snap.has_effort:
        effort = rows[:, col : col + n]
    command, cmd_names, obs, obs_names = align_streams(snap.channels, t, origin)
    return Trajectory(
        t=t,
        q=q,
        joint_names=list(snap.joints),
        dq=dq,
        effort=effort,
        command=command,
        command_names=cmd_names,
        obs=obs,
        obs_names=obs_names,
        meta={"t0_ns": origin, "reason": snap.reason},
    )
