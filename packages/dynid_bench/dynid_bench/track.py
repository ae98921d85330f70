"""Live payload tracking (issue 57): the payload tracker on MuJoCo streams with a grasp and a
release mid-motion, beside a recursive least squares with forgetting as the anchors run it.

Streams (``dynid simulate panda_payload --engine mujoco``, 1 kHz, the Panda's Fourier excitation;
payload: the scenario's 1.2 kg for seed 0, drawn for the others), per seed ``s`` of ``--seeds``:

- ``release``: carried from the start, released at ``--release-s`` (of ``--duration``);
- ``grasp``: grasped at ``--grasp-s`` (of ``--duration``), carried to the end;
- ``steady`` (once, seed 100): ``--steady-s`` of motion with a drawn payload and no change.

The tracker runs as ``dynid track`` does (``config/problems/panda_payload_track.yaml``, 50 Hz
updates). Metrics, per case ``<stream>/<method>`` (mean over the seeds, ``_max`` the worst):

- ``converge_start_s`` (release streams): the time after the start after which every update has
  the mass within 1 % and the centre of mass within 5 mm (every axis) of the truth;
  ``converge_change_s``: the same after the change (grasp: of the grasped payload; release: the
  mass within 1 % of the carried mass of zero, the centre of mass of nothing being undefined);
- ``delay_s``: detection delay after the change (tracker only); ``false_alarms``: detections
  other than the one of each change; ``false_alarms_per_h`` on the steady stream;
- ``coverage_pct``: share of updates (2 s after the start or a detection until the next change;
  mass and centre of mass while a payload is carried) whose 95 % interval covers the truth;
- ``cost_us``: CPU time per sample of the whole tracking (filter, regressor, update, detector,
  50 Hz publication), one core.

The anchor (``rls``, Payload_Estimator_RLS as its README describes it): recursive least squares
on mass and first moments ``(m, m c)`` (inertia not estimated), forgetting λ = 0.997 per sample
at 1 kHz, Huber weights (k = 1.345 σ, σ the problem file's torque σ) on each joint's residual,
and P reset to its initial value when cond(P) > 1e8. It runs on the tracker's own filtered rows
(:meth:`dynid.online.PayloadTracker.regression`) with the true torque offsets subtracted (the
anchors assume calibrated sensors), so only the estimator differs. It has no change detector:
its convergence after a change is its forgetting's.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dynid.online import PayloadTracker
from dynid.problem_file import ProblemFile, read_problem_file
from dynid.records import Record
from dynid.resources import repo_root
from dynid.sim.mujoco import panda_payload

PROBLEM = Path("config") / "problems" / "panda_payload_track.yaml"
PERIOD = 0.02  # s: 50 Hz updates
SETTLE_S = 2.0  # s after a start or a detection before coverage is scored
RLS_LAMBDA = 0.997
RLS_P0 = 1e2
HUBER_K = 1.345
RLS_COND = 1e8
STEADY_SEED = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own options."""
    parser.add_argument("--seeds", type=int, default=3, help="streams of each kind (default 3)")
    parser.add_argument("--duration", type=float, default=24.0, help="s per stream (default 24)")
    parser.add_argument("--release-s", type=float, default=12.0, help="release time (s)")
    parser.add_argument("--grasp-s", type=float, default=8.0, help="grasp time (s)")
    parser.add_argument(
        "--steady-s", type=float, default=600.0, help="s of steady motion (default 600)"
    )


@dataclass(frozen=True)
class Run:
    """One method on one stream: update times, mass and centre of mass ``[U, 4]`` with σ,
    detections ``[(change_time, detect_time)]``, CPU seconds and samples."""

    times: np.ndarray
    values: np.ndarray
    std: np.ndarray | None
    detections: list[tuple[float, float]]
    cpu_s: float
    samples: int


def _stream(seed: int, duration: float, **change: float) -> tuple:
    dataset, truth = panda_payload.simulate(seed, duration=duration, draw_payload=seed > 0,
                                            **change)  # fmt: skip
    return dataset.trajectories[0], truth


def _tracker(problem: ProblemFile, traj) -> Run:
    tracker = PayloadTracker.from_problem(problem, 1e-3)
    cpu = time.process_time()
    updates = tracker.track(traj.t, traj.q, traj.effort, period=PERIOD)
    cpu = time.process_time() - cpu
    detections = [(e.change_time, e.detect_time) for u in updates for e in u.detected]
    times = np.array([u.estimate.time for u in updates])
    values = np.array([u.estimate.values[:4] for u in updates])
    std = np.array([u.estimate.std[:4] for u in updates])
    return Run(times, values, std, detections, cpu, len(traj.t))


def _rls(problem: ProblemFile, traj, offsets: np.ndarray) -> Run:
    """The anchor's recursive least squares (module docstring) on the tracker's rows."""
    t, Y, y = PayloadTracker.from_problem(problem, 1e-3).regression(traj.t, traj.q, traj.effort)
    Y4 = Y[:, :, :4]  # m, m c_x, m c_y, m c_z
    y = y - offsets
    sigma = np.broadcast_to(np.asarray(problem.config.likelihood.torque_std, float), (7,))
    theta, P = np.zeros(4), RLS_P0 * np.eye(4)
    cpu = time.process_time()
    out_t, out_v = [], []
    next_publish = t[0] + PERIOD
    for k in range(len(t)):
        A, r = Y4[k], y[k] - Y4[k] @ theta
        scaled = np.abs(r) / (HUBER_K * sigma)
        w = np.where(scaled <= 1.0, 1.0, 1.0 / np.maximum(scaled, 1e-12)) / sigma**2
        S = RLS_LAMBDA * np.diag(1.0 / w) + A @ P @ A.T
        K = np.linalg.solve(S, A @ P).T
        theta = theta + K @ r
        P = (P - K @ A @ P) / RLS_LAMBDA
        if np.linalg.cond(P) > RLS_COND:
            P = RLS_P0 * np.eye(4)
        if t[k] >= next_publish - 1e-9:
            m = theta[0]
            out_t.append(t[k])
            out_v.append([m, *(theta[1:] / m if abs(m) > 1e-9 else np.zeros(3))])
            next_publish += PERIOD
    cpu = time.process_time() - cpu
    return Run(np.array(out_t), np.array(out_v), None, [], cpu, len(traj.t))


def _truth_at(truth: dict, times: np.ndarray) -> np.ndarray:
    """``[U, 4]`` true mass and centre of mass at ``times`` (zero mass, NaN centre of mass while
    nothing is carried)."""
    p = truth["parameters"]
    carried = np.array([p["payload/mass"], p["payload/com_x"], p["payload/com_y"],
                        p["payload/com_z"]])  # fmt: skip
    held = np.ones(times.size, dtype=bool)
    for change in truth.get("payload_changes", ()):
        if change["kind"] == "grasp":
            held &= times >= change["time"]
        else:
            held &= times < change["time"]
    out = np.tile(carried, (times.size, 1))
    out[~held] = [0.0, np.nan, np.nan, np.nan]
    return out


def _accurate(run: Run, true: np.ndarray, scale: float) -> np.ndarray:
    """Per update: mass within 1 % (of ``scale`` kg) and centre of mass within 5 mm (when
    defined)."""
    mass_ok = np.abs(run.values[:, 0] - true[:, 0]) <= 0.01 * scale
    com_err = np.abs(run.values[:, 1:4] - true[:, 1:4])
    com_ok = np.where(
        np.isnan(true[:, 1]), True, np.nan_to_num(com_err, nan=1.0).max(axis=1) <= 5e-3
    )
    return mass_ok & com_ok


def _converged_after(run: Run, ok: np.ndarray, start: float, end: float) -> float:
    """Seconds after ``start`` from which every update before ``end`` is accurate (NaN:
    never)."""
    window = (run.times >= start) & (run.times < end)
    bad = np.flatnonzero(window & ~ok)
    times = run.times[window]
    if times.size == 0:
        return math.nan
    if bad.size == 0:
        return float(times[0] - start)
    later = run.times[(run.times > run.times[bad[-1]]) & (run.times < end)]
    return float(later[0] - start) if later.size else math.nan


def _coverage(run: Run, true: np.ndarray, scored: np.ndarray) -> float:
    inside = np.abs(run.values - true) <= 1.96 * run.std
    inside = np.where(np.isnan(true), np.nan, inside)[scored]
    return float(np.nanmean(inside) * 100.0)


def _score(kind: str, run: Run, truth: dict, end: float) -> dict[str, float]:
    change = truth["payload_changes"][0]["time"]
    carried = truth["parameters"]["payload/mass"]
    true = _truth_at(truth, run.times)
    ok = _accurate(run, true, carried)
    out: dict[str, float] = {"cost_us": run.cpu_s / run.samples * 1e6}
    if kind == "release":
        out["converge_start_s"] = _converged_after(run, ok, 0.0, change)
    out["converge_change_s"] = _converged_after(run, ok, change, end)
    if run.std is not None:
        hits = [d for c, d in run.detections if change <= d <= change + 0.5]
        out["delay_s"] = hits[0] - change if hits else math.nan
        out["false_alarms"] = float(len(run.detections) - (1 if hits else 0))
        restarts = np.r_[0.0, [d for _, d in run.detections]]
        since = run.times - restarts[np.searchsorted(restarts, run.times, "right") - 1]
        scored = (since >= SETTLE_S) & ~((run.times >= change) & (run.times < change + 0.5))
        out["coverage_pct"] = _coverage(run, true, scored)
    return out


_UNITS = {
    "converge_start_s": ("s", 5.0),
    "converge_change_s": ("s", 5.0),
    "delay_s": ("s", 0.5),
    "false_alarms": ("", 0.0),
    "coverage_pct": ("%", 90.0),
    "cost_us": ("µs", 1000.0),
}


def _records(case: str, scores: Sequence[dict[str, float]], note: str) -> list[Record]:
    out = []
    for metric, (unit, target) in _UNITS.items():
        values = np.array([s[metric] for s in scores if metric in s], dtype=float)
        if values.size == 0:
            continue
        better = "higher" if metric == "coverage_pct" else "lower"
        worst = np.nanmin(values) if better == "higher" else np.nanmax(values)
        if np.isnan(values).any():
            worst = math.nan  # a stream that never got there
        out.append(Record(case, metric, float(np.nanmean(values)), unit, target,
                          better=better, notes=note))  # fmt: skip
        out.append(Record(case, f"{metric}_max", float(worst), unit, target, better=better,
                          notes=f"worst of {values.size} streams; " + note))  # fmt: skip
    return out


def run(args: argparse.Namespace) -> list[Record]:
    """Simulate the streams, track them with both methods and score them."""
    problem = read_problem_file(repo_root() / PROBLEM)
    seeds = 1 if args.quick else args.seeds
    duration = 12.0 if args.quick else args.duration
    release = min(args.release_s, duration / 2) if args.quick else args.release_s
    grasp = min(args.grasp_s, duration / 3) if args.quick else args.grasp_s
    steady_s = 60.0 if args.quick else args.steady_s
    note = "one core of a shared 2-core CPU, under load; MuJoCo streams at 1 kHz"
    recs: list[Record] = []
    for kind, change in (("release", {"release_time": release}), ("grasp", {"grasp_time": grasp})):
        scores: dict[str, list[dict[str, float]]] = {"tracker": [], "rls": []}
        for seed in range(seeds):
            traj, truth = _stream(seed, duration, **change)
            offsets = np.array(
                [truth["parameters"][f"{j}/torque_offset"] for j in traj.joint_names]
            )
            scores["tracker"].append(_score(kind, _tracker(problem, traj), truth, duration))
            scores["rls"].append(_score(kind, _rls(problem, traj, offsets), truth, duration))
        for method, s in scores.items():
            recs += _records(f"{kind}/{method}", s, f"{seeds} seeds; " + note)
    dataset, _ = panda_payload.simulate(STEADY_SEED, duration=steady_s, draw_payload=True)
    steady = _tracker(problem, dataset.trajectories[0])
    hours = steady_s / 3600.0
    steady_note = f"{steady_s:g} s of steady motion, one stream; " + note
    recs.append(Record("steady/tracker", "false_alarms", float(len(steady.detections)), "",
                       0.0, notes=steady_note))  # fmt: skip
    recs.append(Record("steady/tracker", "false_alarms_per_h", len(steady.detections) / hours,
                       "1/h", 0.0, notes=steady_note))  # fmt: skip
    recs.append(Record("steady/tracker", "cost_us", steady.cpu_s / steady.samples * 1e6, "µs",
                       1000.0, notes=note))  # fmt: skip
    return recs
