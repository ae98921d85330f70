"""Helpers of the node tests: start dynid_ros executables, call their services, collect topics."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from rclpy.client import Client
from rclpy.node import Node
from rclpy.qos import QoSProfile
from ros_helpers import spin_until, stop
from std_srvs.srv import Trigger

from dynid_msgs.msg import EstimatorStatus, TrajectorySegment
from dynid_ros.qos import latched, reliable

ROOT = Path(__file__).resolve().parents[2]
INSTALL_LIB = ROOT / "ros2_ws" / "install" / "dynid_ros" / "lib" / "dynid_ros"
INTERFACES = ROOT / "tests" / "ros" / "interfaces"
STARTUP_S = 120.0  # importing torch and Pinocchio takes long on a loaded 2-core machine


STAND_INS = ("control_msgs", "franka_msgs", "tf2_msgs", "ur_msgs")
"""Interface packages with a test-only stand-in under ``tests/ros/interfaces``."""


def interfaces_env() -> dict[str, str]:
    """An environment for child processes in which every package of :data:`STAND_INS` imports.

    These come with a system ROS 2 (or a robot's driver) but not with the Python wheels used
    here. Each one that is not importable is taken from ``tests/ros/interfaces/<package>`` (only
    the interfaces dynid speaks, with the real definitions, hence the same wire types); all of
    those are built with colcon into one overlay, ``build/ros_test_interfaces/<digest>``, once
    per content, and the environment is that overlay's. Where every real package is importable
    the environment is this process's own.
    """
    env = dict(os.environ)
    missing = [name for name in STAND_INS if importlib.util.find_spec(name) is None]
    if not missing:
        return env
    sources = sorted(p for name in missing for p in (INTERFACES / name).rglob("*") if p.is_file())
    digest = hashlib.sha256(
        b"".join(str(p.relative_to(INTERFACES)).encode() + p.read_bytes() for p in sources)
    ).hexdigest()[:12]
    base = ROOT / "build" / "ros_test_interfaces" / digest
    setup = base / "install" / "local_setup.bash"
    if not setup.is_file():
        venv = os.environ.get("VIRTUAL_ENV", sys.prefix)
        done = subprocess.run(
            ["colcon", "--log-base", str(base / "log"), "build", "--base-paths", str(INTERFACES),
             "--packages-select", *missing,
             "--build-base", str(base / "build"), "--install-base", str(base / "install"),
             "--event-handlers", "console_cohesion-", "--cmake-args",
             f"-DPython3_EXECUTABLE={sys.executable}", f"-DCMAKE_PREFIX_PATH={venv}",
             "-DBUILD_TESTING=OFF"],
            capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (
            f"building the test interfaces {missing} failed:\n{done.stdout[-3000:]}"
        )
    dump = subprocess.run(
        ["bash", "-c", f"source {setup} && env -0"],
        capture_output=True, timeout=60, check=True, env=env,
    )  # fmt: skip
    pairs = (item.split("=", 1) for item in dump.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def executable(name: str) -> str:
    """Path of a dynid_ros console script installed by ``colcon build``."""
    path = INSTALL_LIB / name
    assert path.is_file(), f"{path} not built; run scripts/setup"
    assert os.access(path, os.X_OK), f"{path} is not executable"
    return str(path)


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
