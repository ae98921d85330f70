"""The payload tracker over a recording: the updates it would have published live, and the CSV
files ``dynid track`` writes.

``track.csv``: one row per published update: ``time`` (s, the recording's clock), each estimated
parameter (:attr:`dynid.online.PayloadEstimate.names`: the payload's mass, centre of mass and
inertia in the flange frame, then the torque offsets), each ``<parameter>/std``, ``projected``
(1 when the consistency projection moved the estimate) and ``unexcited`` (the parameters the
motion has not determined, ``;``-separated). ``events.csv``: one row per detected change:
``change_time``, ``detect_time`` (s), ``joint``, ``statistic``, then ``before/<parameter>`` and
``after/<parameter>`` (empty when the recording ended before the change settled).
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynid.atomic import atomic_write_text
from dynid.data.trajectory import Trajectory
from dynid.online.tracker import (
    ChangeEvent,
    PayloadTracker,
    TrackerError,
    TrackerSettings,
    TrackerUpdate,
)
from dynid.problem_file import ProblemFile

__all__ = ["TrackRun", "track_trajectory", "write_events_csv", "write_track_csv"]


@dataclass(frozen=True)
class TrackRun:
    """What the tracker made of one recording.

    Attributes:
        names: the estimated parameters.
        updates: one per published update, in time order.
        events: the detected changes (``after`` set where the recording lasted long enough).
        samples: joint-state samples processed.
        duration_s: the recording's duration (s).
        wall_s: wall-clock time the tracking took (s).
        cpu_s: CPU time of this process during the tracking (s): the cost on one core, whatever
            else the machine runs.
    """

    names: tuple[str, ...]
    updates: list[TrackerUpdate]
    events: list[ChangeEvent]
    samples: int
    duration_s: float
    wall_s: float
    cpu_s: float


def track_trajectory(
    problem: ProblemFile,
    traj: Trajectory,
    *,
    rate_hz: float = 50.0,
    settings: TrackerSettings | None = None,
    use_velocity: bool = False,
) -> TrackRun:
    """Run :class:`PayloadTracker` over ``traj`` (its joints matched to the problem's robot by
    name), publishing at ``rate_hz`` of recording time; the sample period is the median step
    of ``traj.t``. ``use_velocity`` feeds the recorded velocities instead of differentiating
    the positions.

    Raises:
        TrackerError: a joint of the robot missing from the recording, no efforts, fewer than
            two samples, a rate that is not > 0, or no velocities when ``use_velocity``.
    """
    if not (np.isfinite(rate_hz) and rate_hz > 0):
        raise TrackerError(f"update rate must be > 0 Hz, got {rate_hz!r}")
    if traj.effort is None or len(traj.t) < 2:
        raise TrackerError("the recording needs joint efforts and at least two samples")
    dt = float(np.median(np.diff(traj.t)))
    tracker = PayloadTracker.from_problem(problem, dt, settings)
    missing = [j for j in tracker.joint_names if j not in traj.joint_names]
    if missing:
        raise TrackerError(
            f"the recording has no joint {missing} of robot {problem.robot.name!r} (it has "
            f"{list(traj.joint_names)})"
        )
    cols = [list(traj.joint_names).index(j) for j in tracker.joint_names]
    if use_velocity and traj.dq is None:
        raise TrackerError("the recording has no joint velocities to use")
    dq = traj.dq[:, cols] if use_velocity and traj.dq is not None else None
    start, cpu = time.perf_counter(), time.process_time()
    updates = tracker.track(traj.t, traj.q[:, cols], traj.effort[:, cols], dq, period=1 / rate_hz)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    completed = {(e.change_time, e.detect_time): e for e in tracker.events}
    detected = [e for u in updates for e in u.detected]
    events = [completed.get((e.change_time, e.detect_time), e) for e in detected]
    duration = float(traj.t[-1] - traj.t[0])
    return TrackRun(tracker.names, updates, events, len(traj.t), duration, wall, cpu)


def _csv(rows: list[list[object]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def write_track_csv(path: str | Path, run: TrackRun) -> Path:
    """Write ``track.csv`` (module docstring) atomically; returns its path."""
    header = ["time", *run.names, *(f"{n}/std" for n in run.names), "projected", "unexcited"]
    rows: list[list[object]] = [header]
    for u in run.updates:
        e = u.estimate
        rows.append([repr(e.time), *map(repr, e.values.tolist()), *map(repr, e.std.tolist()),
                     int(e.projected), ";".join(e.unexcited)])  # fmt: skip
    return atomic_write_text(path, _csv(rows))


def write_events_csv(path: str | Path, run: TrackRun) -> Path:
    """Write ``events.csv`` (module docstring) atomically; returns its path."""
    header = ["change_time", "detect_time", "joint", "statistic",
              *(f"before/{n}" for n in run.names), *(f"after/{n}" for n in run.names)]  # fmt: skip
    rows: list[list[object]] = [header]
    for e in run.events:
        after = [""] * len(run.names) if e.after is None else list(map(repr, e.after.values))
        rows.append([repr(e.change_time), repr(e.detect_time), e.joint, repr(e.statistic),
                     *map(repr, e.before.values.tolist()), *after])  # fmt: skip
    return atomic_write_text(path, _csv(rows))
