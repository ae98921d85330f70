"""The loop on the robot (issue 58) on robot_sim over real DDS: from launch to the applied load.

Each run starts, as ``panda_sim.launch.py`` does, robot_sim (a MuJoCo Panda carrying a payload
only this benchmark knows), the recorder, the estimator (``lm`` on the launch files' default
problem ``config/problems/panda_payload_loop.yaml``: payload mass and centre of mass and the
joint-torque sensors' offsets, the last fifth of the motion held out for the gates), the
payload_applier (``apply: franka``,
gated on the exciter's run) and the exciter (``autostart``, full speed, a move to the start when
the arm is off it), each the installed executable in its own process, on a private DDS domain
(localhost only). The motion is a seeded rest-to-rest Fourier motion from the Panda's home pose
(:func:`dynid_bench.robot_loop.write_motion`, ``--duration`` s), not an optimised ``dynid
excite`` design: planning one takes minutes on a loaded CPU. robot_sim runs in real time with
its defaults, as the launch file starts it: torque-sensor offsets within ±0.2 N·m and sensor
noise drawn from the run's seed, the Panda's dry joint friction as Gaz et al. 2019 identified it
on a real arm (0.15–0.64 N·m, :data:`dynid.sim.mujoco.panda_payload.JOINT_COULOMB`) and the
URDF's viscous 0.003 N·m·s/rad, its torques sensed on the link side as a Panda's ``tau_J`` (so
the friction, which the payload problem does not model, is not in them).

Cases: three payloads (:data:`PAYLOADS`: mass, centre of mass in ``panda_link8``, inertia) ×
``--seeds`` (seed ``s``: robot_sim's noise and the motion), and one gate-fail case, the 0.85 kg
payload with an applier told the robot's rated payload is 0.5 kg, where no load may be applied.

Metrics per run (``<payload>/seed<s>``, ``gate_fail/rated_0.5kg``): seconds from the launch of the
processes to the load robot_sim's SetLoad received (``launch_to_load_s``) and from the end of the
motion to it (``motion_end_to_load_s``); the error of the mass (%) and of the centre of mass (mm,
Euclidean) SetLoad received (the gate-fail case: of what the applier would have sent); the
posterior's σ of the mass (g) and the largest σ of a centre-of-mass coordinate (mm);
``load_applied`` (1/0); and the timeline, seconds from launch: ``t_motion_start_s`` (the
exciter's ``moving``), ``t_motion_end_s`` (its ``stopping_recorder``), ``t_fit_done_s`` (the
estimator's CONVERGED), ``t_load_applied_s`` (robot_sim's ``~/received_loads``) or
``t_decision_s`` (the applier's refusal). ``summary/all`` holds the worst of each over the runs.
Times are wall times on the machine as it is (a loaded 2-core machine slows every process).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import rclpy
import yaml
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from dynid.posterior import Posterior
from dynid.records import Record
from dynid.resources import repo_root
from dynid.sim.mujoco.panda_payload import JOINT_COULOMB
from dynid_bench.robot_loop import JOINTS, executable, interfaces_env, write_motion
from dynid_msgs.msg import EstimatorStatus

PROBLEM = Path("config") / "problems" / "panda_payload_loop.yaml"
FLANGE = "panda_link8"
HOLDOUT = 0.2  # the launch files' holdout_fraction
AMPLITUDE = 0.35  # rad, bound of the motion's Fourier coefficients


@dataclass(frozen=True)
class Payload:
    """A hidden payload: mass (kg), centre of mass (m, flange) and inertia about it (ixx iyy izz
    ixy ixz iyz, kg·m², flange axes)."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, ...]


PAYLOADS = {
    "m0.50kg": Payload(0.5, (0.0, 0.03, 0.04), (1e-3, 1e-3, 8e-4, 0.0, 0.0, 0.0)),
    "m0.85kg": Payload(0.85, (0.025, -0.015, 0.07), (2e-3, 2.5e-3, 1.5e-3, 0.0, 0.0, 0.0)),
    "m1.50kg": Payload(1.5, (-0.02, 0.01, 0.1), (4e-3, 4e-3, 3e-3, 0.0, 0.0, 0.0)),
}
GATE_FAIL = ("gate_fail/rated_0.5kg", "m0.85kg", 0.5)  # case, payload, rated payload told (kg)
FINAL = ("applied", "gates_failed", "rejected_by_robot", "unavailable", "error")
ROBOT_SIM = (
    f"robot_sim's link-side torques, dry joint friction {min(JOINT_COULOMB):.2f}–"
    f"{max(JOINT_COULOMB):.2f} N·m (Gaz et al. 2019)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own options."""
    parser.add_argument("--seeds", type=int, default=3, help="runs per payload (default 3)")
    parser.add_argument("--duration", type=float, default=6.0,
                        help="s of motion at full speed (default 6)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="s from launch to the decision (default 300)")  # fmt: skip


@dataclass
class Watch:
    """What the benchmark's node saw of one run: ``(seconds since launch, message)`` per topic."""

    start: float
    exciter: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    fits: list[tuple[float, int, str]] = field(default_factory=list)
    results: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    loads: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.start

    def first(self, predicate: Callable[[dict[str, Any]], bool]) -> float:
        """Seconds since launch of the first exciter status matching ``predicate`` (NaN: none)."""
        return next((t for t, s in self.exciter if predicate(s)), math.nan)

    def decision(self) -> dict[str, Any] | None:
        """The applier's final report, if it made one."""
        return next((r for _, r in self.results if r.get("outcome") in FINAL), None)

    def ended(self) -> str:
        """Why the run is over ('' while it goes on)."""
        decision = self.decision()
        if decision is not None and (decision["outcome"] != "applied" or self.loads):
            return decision["outcome"]
        if any(s["state"] in ("aborted", "refused") for _, s in self.exciter):
            return f"the exciter's run ended: {self.exciter[-1][1].get('message', '')}"
        if any(state == EstimatorStatus.FAILED for _, state, _ in self.fits):
            return f"the fit failed: {self.fits[-1][2]}"
        return ""


def _history() -> QoSProfile:
    """Latched topics, every message kept (a burst before the first spin is not lost)."""
    return QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)  # fmt: skip


def _arguments(settings: dict[str, Any]) -> list[str]:
    """``--ros-args -p name:=value`` for ``settings`` (values in YAML flow style)."""
    out = ["--ros-args"]
    for key, value in settings.items():
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        out += ["-p", f"{key}:={text}"]
    return out


def _commands(folder: Path, payload: Payload, seed: int, motion: Path,
              rated_kg: float) -> dict[str, list[str]]:  # fmt: skip
    """The loop's processes as ``panda_sim.launch.py`` configures them (see the module
    docstring); ``rated_kg`` > 0 tells the applier that rated payload."""
    problem = str(repo_root() / PROBLEM)
    identified = str(folder / "identified")
    applier: dict[str, Any] = {
        "problem": problem, "posterior_dir": identified, "apply": "franka",
        "flange_frame": FLANGE, "exciter_status_topic": "/exciter/status",
    }  # fmt: skip
    if rated_kg > 0:
        applier["rated_payload_kg"] = rated_kg
    settings: dict[str, tuple[dict[str, Any], list[str]]] = {
        "robot_sim": ({
            "payload_mass": payload.mass, "payload_com": list(payload.com),
            "payload_inertia": list(payload.inertia), "seed": seed}, []),
        "recorder": ({"joints": JOINTS, "segment_mode": "service",
                      "output_dir": str(folder / "segments")}, []),
        "estimator": ({"estimator": "lm", "problem": problem, "holdout_fraction": HOLDOUT,
                       "output_dir": identified, "max_segments": 1, "auto_run": True},
                      ["-r", "segment:=/recorder/segment"]),
        "payload_applier": (applier, []),
        "exciter": ({"trajectory_file": str(motion), "speed_scale": 1.0, "move_to_start": True,
                     "autostart": True, "wait_for_subscribers": ["/recorder/segment"],
                     "recorder": "/recorder"}, []),
    }  # fmt: skip
    return {name: [executable(name), *_arguments(p), *extra] for name, (p, extra) in
            settings.items()}  # fmt: skip


def _stop(procs: dict[str, subprocess.Popen]) -> None:
    """SIGINT every process (their clean stop), SIGKILL what is left after 30 s, reap all."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 30.0
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_once(folder: Path, payload: Payload, seed: int, duration: float, timeout_s: float,
             rated_kg: float = 0.0) -> Watch:  # fmt: skip
    """One run of the loop in ``folder`` (logs ``<process>.log``); what was seen of it."""
    folder.mkdir(parents=True, exist_ok=True)
    motion = write_motion(folder / "trajectory.csv", 10 + seed, duration, AMPLITUDE)
    env = interfaces_env()
    context = Context()
    rclpy.init(context=context)
    node = Node("loop_bench", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    procs: dict[str, subprocess.Popen] = {}
    watch = Watch(time.monotonic())

    def keep(into: list, parse: Callable[[Any], Any]) -> Callable[[Any], None]:
        return lambda msg: into.append((watch.now(), *parse(msg)))

    node.create_subscription(
        String,
        "/exciter/status",
        keep(watch.exciter, lambda m: (yaml.safe_load(m.data),)),
        _history(),
    )
    node.create_subscription(
        EstimatorStatus,
        "/estimator/status",
        keep(watch.fits, lambda m: (m.state, m.message)),
        _history(),
    )
    node.create_subscription(
        String,
        "/payload_applier/result",
        keep(watch.results, lambda m: (yaml.safe_load(m.data),)),
        _history(),
    )
    node.create_subscription(
        String,
        "/robot_sim/received_loads",
        keep(watch.loads, lambda m: (yaml.safe_load(m.data),)),
        _history(),
    )
    try:
        watch.start = time.monotonic()
        for name, command in _commands(folder, payload, seed, motion, rated_kg).items():
            log = (folder / f"{name}.log").open("w")
            procs[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                           env=env, cwd=folder)  # fmt: skip
        while not watch.ended() and watch.now() < timeout_s:
            executor.spin_once(timeout_sec=0.05)
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited; see {folder}/<name>.log")
    finally:
        _stop(procs)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    return watch


def _records(case: str, watch: Watch, payload: Payload, folder: Path, gate_fail: bool,
             duration: float) -> list[Record]:  # fmt: skip
    """The run's records (see the module docstring)."""
    decision = watch.decision() or {}
    outcome = decision.get("outcome") or watch.ended() or "timed out"
    failing = [f"{g['name']}: {g['detail']}" for g in decision.get("gates", []) if not g["passed"]]
    note = (f"{payload.mass} kg at {list(payload.com)} m; {duration:g} s motion; {ROBOT_SIM}; "
            f"outcome {outcome}")  # fmt: skip
    notes = note + (f"; failing gates: {'; '.join(failing)}" if failing else "")
    sent = watch.loads[-1][1]["request"] if watch.loads else decision.get("would_send")
    t_end = watch.first(lambda s: s["state"] == "stopping_recorder")
    t_load = watch.loads[0][0] if watch.loads else math.nan
    t_fit = next((t for t, state, _ in watch.fits if state == EstimatorStatus.CONVERGED),
                 math.nan)  # fmt: skip
    # metric: value, unit, target, better
    values: dict[str, tuple[float, str, float | None, Literal["lower", "higher"]]] = {}
    if not gate_fail:
        values["launch_to_load_s"] = (t_load, "s", None, "lower")
        values["motion_end_to_load_s"] = (t_load - t_end, "s", 30.0, "lower")
    if sent:
        mass_error = 100.0 * abs(sent["mass"] - payload.mass) / payload.mass
        com = sent.get("center_of_mass")
        com_error = 1e3 * float(np.linalg.norm(np.subtract(com, payload.com)))
        values["mass_error_pct"] = (mass_error, "%", None if gate_fail else 1.0, "lower")
        values["com_error_mm"] = (com_error, "mm", None if gate_fail else 5.0, "lower")
    summary = folder / "identified" / "posterior.yaml"
    if summary.is_file():
        post = Posterior.from_summary(summary)
        std = dict(zip(post.names, post.std(), strict=True))
        values["mass_std_g"] = (1e3 * std["payload/mass"], "g", None, "lower")
        com_std = max(std[f"payload/com_{a}"] for a in "xyz")
        values["com_std_mm"] = (1e3 * com_std, "mm", None, "lower")
    applied = float(bool(watch.loads))
    values["load_applied"] = (applied, "", 0.0 if gate_fail else 1.0,
                              "lower" if gate_fail else "higher")  # fmt: skip
    values["t_motion_start_s"] = (watch.first(lambda s: s["state"] == "moving"), "s", None, "lower")
    values["t_motion_end_s"] = (t_end, "s", None, "lower")
    values["t_fit_done_s"] = (t_fit, "s", None, "lower")
    if gate_fail:
        t_decision = next((t for t, r in watch.results if r.get("outcome") in FINAL), math.nan)
        values["t_decision_s"] = (t_decision, "s", None, "lower")
    else:
        values["t_load_applied_s"] = (t_load, "s", None, "lower")
    return [
        Record(case, metric, float(value), unit, target=target, better=better, notes=notes)
        for metric, (value, unit, target, better) in values.items()
    ]


def _summary(records: list[Record]) -> list[Record]:
    """``summary/all``: the worst mass and centre-of-mass error and time from the motion's end to
    the load over the runs that should apply, the runs that applied, the loads applied when a
    gate failed."""
    loaded = [r for r in records if not r.case.startswith("gate_fail/")]

    def worst(metric: str) -> float:
        values = [r.value for r in loaded if r.metric == metric]
        return max(values) if values else math.nan

    applied = [r.value for r in loaded if r.metric == "load_applied"]
    refused = [r.value for r in records if r.case.startswith("gate_fail/")
               and r.metric == "load_applied"]  # fmt: skip
    note = f"worst over {len(applied)} runs"
    return [
        Record("summary/all", "max_mass_error_pct", worst("mass_error_pct"), "%", 1.0, notes=note),
        Record("summary/all", "max_com_error_mm", worst("com_error_mm"), "mm", 5.0, notes=note),
        Record("summary/all", "max_motion_end_to_load_s", worst("motion_end_to_load_s"), "s",
               30.0, notes=note),
        Record("summary/all", "runs_applied", float(sum(applied)), "", float(len(applied)),
               better="higher", notes=note),
        Record("summary/all", "loads_applied_when_a_gate_failed", float(sum(refused)), "", 0.0,
               notes=note),
    ]  # fmt: skip


def run(args: argparse.Namespace) -> list[Record]:
    """Every run (``--quick``: one payload, one seed, and the gate-fail case); their records."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    seeds = range(1, 2 if args.quick else args.seeds + 1)
    names = ["m0.85kg"] if args.quick else list(PAYLOADS)
    cases = [(f"{n}/seed{s}", n, s, 0.0) for n in names for s in seeds]
    case, name, rated = GATE_FAIL
    cases.append((case, name, 1, rated))
    records: list[Record] = []
    with tempfile.TemporaryDirectory(prefix="dynid_loop_bench_") as tmp:
        for case, name, seed, rated in cases:
            folder = Path(tmp) / case.replace("/", "_")
            payload = PAYLOADS[name]
            watch = run_once(folder, payload, seed, args.duration, args.timeout, rated)
            got = _records(case, watch, payload, folder, rated > 0, args.duration)
            records += got
            shown = {r.metric: round(r.value, 3) for r in got}
            print(f"{case}: {shown}", flush=True)
    return records + _summary(records)
