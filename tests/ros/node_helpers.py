"""Helpers of the node tests: start dynid_ros executables, call their services, collect topics."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from rclpy.client import Client
from rclpy.node import Node
from rclpy.qos import QoSProfile
from ros_helpers import spin_until, stop
from std_srvs.srv import Trigger

from dynid_bench.robot_loop import executable
from dynid_msgs.msg import EstimatorStatus, TrajectorySegment
from dynid_ros.qos import latched, reliable

ROOT = Path(__file__).resolve().parents[2]
STARTUP_S = 120.0  # importing torch and Pinocchio takes long on a loaded 2-core machine


def ros_args(node_params: dict[str, Any], *extra: str) -> list[str]:
    """``--ros-args -p name:=value ...`` for ``node_params`` (lists in YAML flow style)."""
    out = ["--ros-args"]
    for key, value in node_params.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | tuple):
            text = "[" + ", ".join(_scalar(v) for v in value) + "]"
        else:
            text = _scalar(value)
        out += ["-p", f"{key}:={text}"]
    return [*out, *extra]


def _scalar(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def call_service(node: Node, srv_type: type, service: str, request: Any,
                 timeout_s: float = 20.0, proc: subprocess.Popen | None = None) -> Any:  # fmt: skip
    """Call ``service`` (of type ``srv_type``) with ``request`` and return its response.

    The client is created once per node, type and service and kept: a fresh client is matched
    with the server's request reader before its own response reader is matched with the server's
    response writer, and a server that answers in that window drops the response (Fast DDS waits
    only briefly for the match). A new client therefore spins ``_SETTLE_S`` seconds once the
    service is ready. ``proc``, the server's process, puts its output in the failure message.
    """
    clients = _clients.setdefault(node, {})
    client = clients.get((srv_type, service))
    if client is None:
        client = node.create_client(srv_type, service)
        if proc is None:
            assert spin_until(node, client.service_is_ready, timeout_s), f"{service} not available"
        else:
            wait_for(node, client.service_is_ready, service, proc, timeout_s)
        spin_until(node, lambda: False, _SETTLE_S)
        clients[(srv_type, service)] = client
    future = client.call_async(request)
    assert spin_until(node, future.done, timeout_s), f"{service} did not answer"
    return future.result()


def call_trigger(node: Node, service: str, timeout_s: float = 20.0) -> Trigger.Response:
    """Call a ``std_srvs/Trigger`` service and return its response (see :func:`call_service`)."""
    return call_service(node, Trigger, service, Trigger.Request(), timeout_s)


_SETTLE_S = 0.5
_clients: WeakKeyDictionary[Node, dict[tuple[type, str], Client]] = WeakKeyDictionary()


def latched_history(depth: int = 1000) -> QoSProfile:
    """A subscription to a latched topic that keeps ``depth`` messages: the last one published
    before it matched, then every one after. A depth-1 subscription (the publisher's profile)
    loses messages published in a burst before the test spins (a run's last RUNNING status and
    its CONVERGED one)."""
    profile = latched()
    profile.depth = depth
    return profile


def collect(node: Node, msg_type: type, topic: str, qos: Any) -> list[Any]:
    """Subscribe ``topic`` and return the list the messages are appended to."""
    received: list[Any] = []
    node.create_subscription(msg_type, topic, received.append, qos)
    return received


def output_of(proc: subprocess.Popen) -> str:
    """Everything a finished (or terminated) child process printed."""
    stop(proc)
    return proc.stdout.read() if proc.stdout else ""


def wait_for(node: Node, predicate: Callable[[], bool], what: str, proc: subprocess.Popen,
             timeout_s: float = 30.0) -> None:  # fmt: skip
    """Spin until ``predicate``; fail with the child's output when it does not hold."""
    if not spin_until(node, predicate, timeout_s):
        raise AssertionError(f"timed out waiting for {what}; node output:\n{output_of(proc)}")


def start_estimator(
    test_node: Node,
    spawn: Callable[..., subprocess.Popen],
    problem_file: Path,
    out: Path,
    **parameters: Any,
) -> tuple[subprocess.Popen, Any, list]:
    """Start an estimator on ``problem_file`` (outputs under ``out``, ``parameters`` on top) and
    wait until it subscribes: the process, a ``/segment`` publisher and the list its
    ``~/status`` messages collect into (every one, ``latched_history``)."""
    proc = spawn(
        executable("estimator"),
        *ros_args({"problem": str(problem_file), "output_dir": str(out), **parameters}),
    )
    seg_pub = test_node.create_publisher(TrajectorySegment, "/segment", reliable(10))
    statuses = collect(test_node, EstimatorStatus, "/estimator/status", latched_history())
    wait_for(test_node, lambda: seg_pub.get_subscription_count() > 0, "estimator", proc,
             STARTUP_S)  # fmt: skip
    return proc, seg_pub, statuses
