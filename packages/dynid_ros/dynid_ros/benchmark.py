"""The ``ros`` benchmark: recorder load at 1 kHz, estimator responsiveness during a CSVGD run.

``python -m dynid_ros.benchmark [--quick] [--duration S]`` (from a shell with
``source scripts/env.sh``) prints the table and writes ``build/bench/ros.json``
(``dynid.records``). The core ``dynid`` package imports no ROS, so this benchmark lives
here. Nodes run as the installed executables in their own processes, over real DDS on a private
domain, localhost only.

1. Recorder: a publisher sends ``sensor_msgs/JointState`` (7 joints, position/velocity/effort)
   at 1 kHz for ``--duration`` s (60 s by default) stamped with the wall clock. Measured: the
   recorder's CPU time per wall second, the age of each message's stamp when its callback ran
   (p50/p99, the recorder's ``/diagnostics``), messages lost, resident memory growth after the
   first segment (a bag every ``max_buffer_s``) is written, and the ring buffer size.
2. Estimator: a CSVGD run on a small double-pendulum problem publishing every iteration.
   Measured: interval between ``~/particles`` messages, their latency (receive time minus header
   stamp), and the round trip of a service call (``~/get_parameters``) while the run is busy.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.srv import GetParameters
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from dynid.data import Trajectory
from dynid.records import Record, format_table, write_records
from dynid_msgs.msg import EstimatorStatus, ParticleSet, TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import ns_to_stamp, stamp_ns, trajectory_to_segment

JOINTS = [f"fr3_joint{i}" for i in range(1, 8)]
_HZ = 1000.0


def _executable(name: str) -> str:
    """The console script installed by colcon (``ros2_ws/install/dynid_ros/lib/dynid_ros``)."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        path = Path(prefix) / "lib" / "dynid_ros" / name
        if path.is_file():
            return str(path)
    raise FileNotFoundError(f"dynid_ros executable {name!r} not found; source scripts/env.sh")


def _cpu_s(pid: int) -> float:
    """User + system CPU time (s) of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return math.nan


class _Spinner:
    """Spins one node of its own context until a predicate holds."""

    def __init__(self, node: Node) -> None:
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)

    def until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=0.02)
        return predicate()

    def call(self, client: Any, request: Any, timeout_s: float = 30.0) -> tuple[Any, float]:
        """Call a service; returns the response and the round trip (s)."""
        if not self.until(client.service_is_ready, timeout_s):
            raise RuntimeError(f"service {client.srv_name} not available")
        start = time.perf_counter()
        future = client.call_async(request)
        if not self.until(future.done, timeout_s):
            raise RuntimeError(f"service {client.srv_name} did not answer")
        return future.result(), time.perf_counter() - start


def _start(name: str, params: dict[str, Any]) -> subprocess.Popen:
    args = [_executable(name), "--ros-args"]
    for key, value in params.items():
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        args += ["-p", f"{key}:={text}"]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench_recorder(duration_s: float, out_dir: Path) -> list[Record]:
    """Recorder under a 1 kHz joint-state stream (see the module docstring)."""
    buffer_s = min(10.0, duration_s / 2)
    settings = {"joint_state_topic": "/bench/joint_states", "joints": JOINTS,
                "output_dir": str(out_dir), "max_buffer_s": buffer_s,
                "max_input_rate_hz": 1100.0, "diagnostics_period_s": 0.5}  # fmt: skip
    proc = _start("recorder", settings)
    context = Context()
    rclpy.init(context=context)
    node = Node("dynid_bench_publisher", context=context)
    spin = _Spinner(node)
    diags: list[DiagnosticArray] = []
    node.create_subscription(DiagnosticArray, "/diagnostics", diags.append, qos.reliable(10))
    pub = node.create_publisher(JointState, "/bench/joint_states", qos.reliable(1000))
    try:
        if not spin.until(lambda: pub.get_subscription_count() > 0, 120.0):
            raise RuntimeError("the recorder did not subscribe")
        start_client = node.create_client(Trigger, "/recorder/start")
        msg = JointState(name=JOINTS, position=[0.0] * 7, velocity=[0.0] * 7, effort=[0.0] * 7)
        warmup = 0
        while True:  # until the recorder has data and a segment is open
            msg.header.stamp = ns_to_stamp(time.time_ns())
            pub.publish(msg)
            warmup += 1
            spin.until(lambda: False, 0.05)
            if spin.call(start_client, Trigger.Request())[0].success:
                break
        n = int(duration_s * _HZ)
        cpu0, rss, t0 = _cpu_s(proc.pid), [], time.perf_counter()
        for k in range(n):
            t = k / _HZ
            msg.header.stamp = ns_to_stamp(time.time_ns())
            msg.position = [0.3 * math.sin(t + i) for i in range(7)]
            msg.velocity = [0.3 * math.cos(t + i) for i in range(7)]
            msg.effort = [float(i) for i in range(7)]
            pub.publish(msg)
            if k % 10 == 9:  # paced in 10 ms bursts, sleeping in between
                time.sleep(max(0.0, t0 + (k + 1) / _HZ - time.perf_counter()))
            if k % 1000 == 999:
                rss.append(_rss_mib(proc.pid))
        wall = time.perf_counter() - t0
        cpu = _cpu_s(proc.pid) - cpu0
        spin.until(lambda: False, 1.5)  # the queued reports, then fresh ones after the stream
        values: dict[str, str] = {}
        for status in diags[-1].status if diags else []:
            values.update({kv.key: kv.value for kv in status.values})
        received = float(values.get("received", "nan")) - warmup
        # from the first segment written (its bag write takes the allocator to its plateau)
        full = rss[2 * math.ceil(buffer_s) :] or rss
        note = f"{os.cpu_count()}-core CPU shared with other work, Python rclpy, {duration_s:g} s"
        case = f"recorder/JointState 7 joints/1 kHz/{duration_s:g} s"
        return [
            Record(case, "cpu_per_wall_s", 100.0 * cpu / wall, "%", notes=note),
            Record(case, "callback_stamp_age_p50", float(values.get("stamp_age_ms_p50", "nan")),
                   "ms", notes="last 1000 messages"),
            Record(case, "callback_stamp_age_p99", float(values.get("stamp_age_ms_p99", "nan")),
                   "ms", notes="last 1000 messages"),
            Record(case, "lost_fraction", 1.0 - received / n, "", target=0.01,
                   notes="best-effort subscription, depth 1000"),
            Record(case, "rss_growth_after_first_segment", full[-1] - full[0], "MiB", target=5.0,
                   notes=f"RSS {rss[0]:.0f} MiB at 1 s, {max(rss):.0f} MiB peak"),
            Record(case, "ring_buffer", float(values.get("buffer_bytes", "nan")) / 2**20, "MiB",
                   notes=f"max_buffer_s={buffer_s:g}, bounded"),
        ]  # fmt: skip
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
        _stop(proc)


def _problem(path: Path, iterations: int) -> Path:
    config = {
        "name": "bench_double_pendulum",
        "robot": {"name": "double_pendulum"},
        "parameters": [{"name": f"link{i}/length", "lower": 1.0, "upper": 2.5, "unit": "m"}
                       for i in (1, 2)],
        "data": {"source": "bag", "dt": 0.01},
        "control": {"type": "none"},
        "observe": {"joints": "all"},
        "likelihood": {"obs_std": 0.01, "shooting": "multiple", "windows": 4},
        "estimator": {"name": "csvgd", "settings": {"num_particles": 32,
                      "max_iterations": iterations, "learning_rate": 0.05, "seed": 0}},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config))
    return path


def _segment() -> TrajectorySegment:
    t = np.arange(100) * 0.01
    q = np.stack([np.pi / 2 * np.cos(3 * t), 0.2 * np.sin(5 * t)], axis=1)
    dq = np.stack([-3 * np.pi / 2 * np.sin(3 * t), np.cos(5 * t)], axis=1)
    traj = Trajectory(t=t, q=q, joint_names=["joint1", "joint2"], dq=dq,
                      meta={"t0_ns": time.time_ns()})  # fmt: skip
    return trajectory_to_segment(traj, source="bench:synthetic", frame_id="world")


def bench_estimator(iterations: int, out_dir: Path) -> list[Record]:
    """Estimator outputs while CSVGD runs (see the module docstring)."""
    problem = _problem(out_dir / "problem.yaml", iterations)
    proc = _start("estimator", {"problem": str(problem), "publish_every": 1,
                                "output_dir": str(out_dir / "identified")})  # fmt: skip
    context = Context()
    rclpy.init(context=context)
    node = Node("dynid_bench_listener", context=context)
    spin = _Spinner(node)
    arrivals: list[tuple[float, int]] = []
    statuses: list[EstimatorStatus] = []
    node.create_subscription(
        ParticleSet, "/estimator/particles",
        lambda m: arrivals.append((time.time(), stamp_ns(m.header.stamp))), qos.reliable(10),
    )  # fmt: skip
    node.create_subscription(EstimatorStatus, "/estimator/status", statuses.append, qos.latched())
    seg_pub = node.create_publisher(TrajectorySegment, "/segment", qos.reliable(10))
    params = node.create_client(GetParameters, "/estimator/get_parameters")
    try:
        if not spin.until(lambda: seg_pub.get_subscription_count() > 0, 180.0):
            raise RuntimeError("the estimator did not subscribe")
        seg_pub.publish(_segment())
        if not spin.until(lambda: len(arrivals) >= 2, 300.0):
            raise RuntimeError("no particles from the estimator")
        rtts = []
        while statuses[-1].state == EstimatorStatus.RUNNING and len(rtts) < 200:
            _, rtt = spin.call(params, GetParameters.Request(names=["publish_every"]))
            rtts.append(rtt * 1e3)
            spin.until(lambda: False, 0.05)
        spin.until(lambda: statuses[-1].state != EstimatorStatus.RUNNING, 600.0)
        recv = np.array([a for a, _ in arrivals])
        latency = np.array([(a - s * 1e-9) * 1e3 for a, s in arrivals])
        intervals = np.diff(recv)
        final = statuses[-1]
        per_iter = final.elapsed_s / max(final.iteration, 1)
        case = f"estimator/csvgd/double_pendulum N=32, {iterations} it, publish_every=1"
        note = f"{os.cpu_count()}-core CPU, {per_iter:.2f} s per iteration"
        return [
            Record(case, "publish_interval_mean", float(intervals.mean()), "s", notes=note),
            Record(case, "publish_interval_max", float(intervals.max()), "s", notes=note),
            Record(case, "particles_latency_p50", float(np.percentile(latency, 50)), "ms"),
            Record(case, "particles_latency_p99", float(np.percentile(latency, 99)), "ms"),
            Record(case, "service_rtt_while_busy_p50", float(np.percentile(rtts, 50)), "ms",
                   notes=f"{len(rtts)} get_parameters calls during the run"),
            Record(case, "service_rtt_while_busy_p99", float(np.percentile(rtts, 99)), "ms"),
        ]  # fmt: skip
    finally:
        node.destroy_node()
        rclpy.shutdown(context=context)
        _stop(proc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the ``ros`` benchmark."""
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="s of 1 kHz joint states (default 60, --quick 5)",
    )
    parser.add_argument("--iterations", type=int, default=None,
                        help="CSVGD iterations of the run (default 30, --quick 8)")  # fmt: skip


def run(args: argparse.Namespace) -> list[Record]:
    """Both parts of the benchmark; returns their records."""
    duration = args.duration or (5.0 if args.quick else 60.0)
    iterations = args.iterations or (8 if args.quick else 30)
    os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    with tempfile.TemporaryDirectory(prefix="dynid_ros_bench_") as tmp:
        records = bench_recorder(duration, Path(tmp) / "recorder")
        records += bench_estimator(iterations, Path(tmp))
    return records


def main(argv: list[str] | None = None) -> int:
    """``python -m dynid_ros.benchmark``: run, print the table, write ``<out-dir>/ros.json``."""
    parser = argparse.ArgumentParser(prog="python -m dynid_ros.benchmark", description=__doc__)
    parser.add_argument("--out-dir", default="build/bench", help="where ros.json goes")
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    add_arguments(parser)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    records = run(args)
    print(format_table(records, title=f"ros ({time.perf_counter() - start:.1f} s wall)"))
    print(f"wrote {write_records('ros', records, args.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
