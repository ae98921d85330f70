"""The recorder's two runs: a long feed with automatic segments, and kill -9 at random moments.

A published sample counts as one the recorder must keep when it was published while the joints
moved (``Motion.moving``): an automatic segment opens ``auto_pre_s`` before the motion and closes
``auto_quiet_s`` after it, so samples at rest far from any motion are not recorded by design.
A kept sample is on disk when a segment bag holds a message with its exact stamp (and, for the
joint states, its published positions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from dynid.records import Record
from dynid_ros.reliability.feed import (
    HZ,
    JS_TOPIC,
    MOCAP_EVERY,
    Feed,
    RecorderProcess,
    longest_run,
    missing,
    read_disk,
    recorder_parameters,
    wait_until,
)

_START_TIMEOUT_S = 120.0  # a recorder's start on a busy machine (Python imports, DDS discovery)
_RECOVERY_TIMEOUT_S = 120.0


def _started(feed: Feed, recorder: RecorderProcess) -> None:
    """Wait until ``recorder`` publishes on ``/diagnostics`` (its subscriptions exist then)."""
    since = len(feed.diagnostics)
    wait_until(
        feed, lambda: len(feed.diagnostics) > since, _START_TIMEOUT_S, "/diagnostics", recorder
    )


def _unreadable_record(case: str, unreadable: list[str]) -> Record:
    """``segments_unreadable`` (target 0), the first of their errors in the notes."""
    return Record(case, "segments_unreadable", float(len(unreadable)), "", target=0.0,
                  notes="; ".join(unreadable)[:500])  # fmt: skip


@dataclass
class Count:
    """Kept samples missing on disk, over the samples ``[0, published)`` of one feed."""

    kept_js: int
    kept_mocap: int
    js_missing: NDArray[np.bool_]
    mocap_missing: NDArray[np.bool_]
    altered: int

    @property
    def lost(self) -> int:
        """Joint-state and mocap samples missing."""
        return int(self.js_missing.sum() + self.mocap_missing.sum())

    def longest_gap_s(self) -> float:
        """The longest run of consecutive kept samples missing, in s of published data."""
        _, js = longest_run(self.js_missing)
        _, mocap = longest_run(self.mocap_missing)
        return max(js / HZ, mocap * MOCAP_EVERY / HZ)


def count(feed: Feed, folder: Path) -> tuple[Count, list[str], int]:
    """Compare what ``feed`` published since its ``start()`` with the bags in ``folder``;
    returns the count, the unreadable segments and the number of bags."""
    disk = read_disk(folder)
    k = np.arange(feed.published, dtype=np.int64)
    kept = k[feed.motion.moving(k)]
    kept_mocap = kept[kept % MOCAP_EVERY == 0]
    stamps = feed.stamp(kept)
    js_missing = missing(stamps, disk.js)
    present = ~js_missing
    altered = 0
    if present.any():
        rows = disk.js_q[np.searchsorted(disk.js, stamps[present])]
        expected, _ = feed.motion.states(kept[present])
        altered = int((~np.isclose(rows, expected, rtol=0.0, atol=1e-12).all(axis=1)).sum())
    result = Count(
        kept.size, kept_mocap.size, js_missing, missing(feed.stamp(kept_mocap), disk.mocap), altered
    )
    return result, disk.unreadable, len(disk.bags)


def endurance(
    feed: Feed, out: Path, duration_s: float, max_buffer_s: float, warmup_s: float
) -> list[Record]:
    """Feed the recorder for ``duration_s`` (then until its last segment has closed) and count
    what is on disk; the recorder's RSS is taken from ``warmup_s`` to the end of the feed."""
    folder = out / "endurance"
    params = recorder_parameters(folder, max_buffer_s)
    recorder = RecorderProcess(params, out / "endurance.log")
    rss: list[tuple[float, float]] = []

    def sample() -> bool:
        rss.append((feed.published / HZ, recorder.rss_mib()))
        return recorder.alive()

    try:
        _started(feed, recorder)
        feed.start()
        end = feed.motion.settled(round(duration_s * HZ), params["auto_quiet_s"])
        wall = time.monotonic()
        feed.run(end, every=sample)
        wall = time.monotonic() - wall
        if not recorder.alive():
            raise RuntimeError(f"the recorder died: {recorder.output()[-2000:]}")
        since = len(feed.diagnostics)  # reports sent after the feed ended: final counts
        wait_until(feed, lambda: len(feed.diagnostics) > since + 1, 30.0, "/diagnostics", recorder)
        node = feed.status(": node", since)
        stream = feed.status(f": {JS_TOPIC}", since)
    finally:
        status = recorder.stop()
    result, unreadable, bags = count(feed, folder)
    warm = [mib for t, mib in rss if t >= warmup_s] or [mib for _, mib in rss]
    received = int(stream.get("received", "0"))
    case = f"endurance/1 kHz JointState + 200 Hz TransformStamped/auto/{duration_s:g} s"
    where = (
        f"{result.kept_js} joint states and {result.kept_mocap} mocap samples published "
        f"in motion; {int(result.js_missing.sum())} joint states and "
        f"{int(result.mocap_missing.sum())} mocap samples missing"
    )
    return [
        Record(case, "samples_lost", float(result.lost), "samples", target=0.0, notes=where),
        Record(
            case,
            "samples_altered",
            float(result.altered),
            "samples",
            target=0.0,
            notes="on disk with the published stamp but other positions",
        ),
        Record(
            case,
            "joint_states_not_received",
            float(feed.published - received),
            "samples",
            notes=f"published {feed.published} (at rest too) minus received per the "
            "recorder's /diagnostics (best-effort subscription, depth 1000)",
        ),
        Record(
            case,
            "rss_growth_mb",
            warm[-1] - warm[0],
            "MiB",
            target=5.0,
            notes=f"recorder RSS {warm[0]:.1f} MiB at {warmup_s:g} s, {warm[-1]:.1f} MiB at "
            f"the end, peak {max(m for _, m in rss):.1f} MiB",
        ),
        Record(
            case,
            "segments_written",
            float(bags),
            notes=f"max_buffer_s={max_buffer_s:g}; segments cut "
            f"{node.get('segments_cut', '?')}, with loss {node.get('segments_with_loss', '?')}"
            f", failed {node.get('segments_failed', '?')}, truncated "
            f"{node.get('segments_truncated', '?')}; recorder exit status {status}",
        ),
        _unreadable_record(case, unreadable),
        Record(
            case,
            "feed_wall",
            wall,
            "s",
            notes=f"{feed.published} joint states in {wall:.1f} s wall",
        ),
    ]


@dataclass
class Trial:
    """One kill -9: when, what was left, what was lost."""

    kill_s: float
    spools: int
    recovered: bool
    lost_s: float
    unreadable: list[str]


def kill_trial(feed: Feed, folder: Path, kill_s: float, max_buffer_s: float) -> Trial:
    """Feed a recorder, SIGKILL it ``kill_s`` after the feed began, start a new recorder on
    the same folder, let it recover the spool, stop it, and count what is on disk."""
    folder.mkdir(parents=True)
    params = recorder_parameters(folder / "bags", max_buffer_s)
    first = RecorderProcess(params, folder / "recorder.log")
    try:
        _started(feed, first)
        feed.start()
        feed.run(round(kill_s * HZ), every=first.alive)
    finally:
        first.kill()
    spool_dir = folder / "bags" / "spool"
    spools = len(list(spool_dir.glob("*.mcap")))
    second = RecorderProcess(params, folder / "recorder_restarted.log")
    try:
        _started(feed, second)
        since = len(feed.diagnostics)

        def done() -> bool:
            kept = int(feed.status(": node", since).get("spools_kept", "0"))
            return len(list(spool_dir.glob("*.mcap"))) <= kept

        wait_until(feed, done, _RECOVERY_TIMEOUT_S, "spool recovery", second)
    finally:
        second.stop()
    result, unreadable, _ = count(feed, folder / "bags")
    recovered = any(p.name.startswith("segment_recovered_") for p in (folder / "bags").iterdir())
    return Trial(kill_s, spools, recovered, result.longest_gap_s(), unreadable)


def kill_trials(
    feed: Feed,
    out: Path,
    trials: int,
    seed: int,
    window_s: tuple[float, float],
    max_buffer_s: float,
) -> list[Record]:
    """``trials`` kill trials at moments drawn uniformly from ``window_s`` (s after the feed
    began; seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    moments = rng.uniform(*window_s, size=trials)
    results = [
        kill_trial(feed, out / f"kill_{i:02d}", float(t), max_buffer_s)
        for i, t in enumerate(moments)
    ]
    lost = np.array([r.lost_s for r in results])
    worst = results[int(np.argmax(lost))]
    unreadable = [u for r in results for u in r.unreadable]
    case = f"kill -9/{trials} trials/seed {seed}/at {window_s[0]:g}-{window_s[1]:g} s"
    per_trial = ", ".join(f"{r.kill_s:.2f}s:{r.lost_s:.3f}" for r in results)
    return [
        Record(
            case,
            "max_lost_s",
            float(lost.max()),
            "s",
            target=1.0,
            notes=f"worst: killed at {worst.kill_s:.2f} s; kill moment:lost s per trial "
            f"{per_trial}",
        ),
        Record(case, "mean_lost_s", float(lost.mean()), "s"),
        _unreadable_record(case, unreadable),
        Record(
            case,
            "spools_recovered",
            float(sum(r.recovered for r in results)),
            "trials",
            notes=f"trials leaving a spool: {sum(r.spools > 0 for r in results)}",
        ),
    ]
