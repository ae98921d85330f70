"""The console entry points' shared life cycle: init, construct, spin, close, shut down."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def run_node(
    factory: Callable[[], Node],
    name: str,
    startup_errors: tuple[type[Exception], ...],
    args: list[str] | None = None,
) -> None:
    """Run the node ``factory()`` (a dynid node, which has ``close()``) until Ctrl-C or shutdown.

    A bad configuration (one of ``startup_errors`` while constructing) prints one line naming
    the problem and exits with status 2 instead of a stack trace.
    """
    rclpy.init(args=args if args is not None else sys.argv)
    try:
        node = factory()
    except startup_errors as err:
        print(f"{name}: {err}", file=sys.stderr)
        rclpy.try_shutdown()
        sys.exit(2)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.close()
        node.destroy_node()
        rclpy.try_shutdown()
