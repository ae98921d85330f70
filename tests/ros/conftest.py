"""Fixtures for tests over real rclpy and DDS.

Every test session gets its own ROS_DOMAIN_ID and localhost-only discovery, so parallel runs on
one machine (or CI jobs on one host) do not see each other's topics. Child processes started by
the tests inherit the same environment.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Set before rclpy initialises anything, in this process and for every child process.
os.environ["ROS_DOMAIN_ID"] = str(10 + os.getpid() % 90)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from ros_helpers import HERE, stop

from dynid_bench.robot_loop import interfaces_env


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything in tests/ros is marked ``ros``."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.ros)


@pytest.fixture
def ros_context() -> Iterator[Context]:
    """An initialised rclpy context of its own, shut down after the test."""
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


@pytest.fixture
def test_node(ros_context: Context) -> Iterator[Node]:
    """A node in this process for publishing and subscribing from the test."""
    node = Node(f"dynid_test_{os.getpid()}", context=ros_context)
    try:
        yield node
    finally:
        node.destroy_node()


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """Start processes (nodes) that are terminated, then killed, at the end of the test."""
    procs: list[subprocess.Popen] = []

    def _spawn(*args: str, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(
            [*args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs
        )
        procs.append(proc)
        return proc

    yield _spawn
    for proc in procs:
        stop(proc)


@pytest.fixture(scope="module")
def stand_in_env() -> dict[str, str]:
    """Environment for child processes that use ``tf2_msgs``, ``control_msgs``, ``franka_msgs``
    or ``ur_msgs`` (:func:`dynid_bench.robot_loop.interfaces_env`)."""
    return interfaces_env()
