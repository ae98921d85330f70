"""Helpers shared by the tests over real rclpy (spinning until a condition, stopping child
processes, paths)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable


def spin_until(
    node: Node, predicate: Callable[[], bool], timeout_s: float = 20.0, step_s: float = 0.05
) -> bool:
    """Spin ``node`` until ``predicate()`` holds or ``timeout_s`` passes; return the predicate."""
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + timeout_s
        while not predicate() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=step_s)
        return predicate()
    finally:
        executor.remove_node(node)


def stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGTERM a child process still running, SIGKILL it after ``timeout_s``, and reap it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
