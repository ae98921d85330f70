"""The console entry points' shared life cycle: init, construct, spin, close, shut down.

Stopping is the node's, not rclpy's: SIGINT (Ctrl-C, or ``ros2 launch`` stopping its processes)
and SIGTERM (``kill``, ``timeout``, a container stop) both end the spin, then ``close()`` runs
(the recorder writes its open segment, the estimator saves the posterior a run reached) and the
process exits with status 0. A further signal while ``close()`` works says so in one line and
does not cut it short: no ``KeyboardInterrupt`` traceback, no negative exit status. Once the
node is closed both signals are ignored for the rest of the process: the interpreter's own
finalization puts Python-level handlers back to the default, so a second Ctrl-C a moment late
would otherwise kill the process on its way out.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

_SPIN_S = 0.1  # longest wait of the spin loop before it sees a stop request


def run_node(
    factory: Callable[[], Node],
    name: str,
    startup_errors: tuple[type[Exception], ...],
    args: list[str] | None = None,
) -> None:
    """Run the node ``factory()`` (a dynid node, which has ``close()``) until SIGINT, SIGTERM or
    the context's shutdown, then close it and exit with status 0. Meant for a console entry
    point: SIGINT and SIGTERM are handled, then ignored, for the rest of the process's life.

    A bad configuration (one of ``startup_errors`` while constructing) prints one line naming
    the problem and exits with status 2 instead of a stack trace.
    """
    stop = threading.Event()
    signals: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        signals.append(signal.Signals(signum).name)
        if stop.is_set():
            print(f"{name}: {signals[-1]}: stopping already, finishing the shutdown",
                  file=sys.stderr, flush=True)  # fmt: skip
        stop.set()

    rclpy.init(
        args=args if args is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,
    )
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, on_signal)
    try:
        node = factory()
    except startup_errors as err:
        print(f"{name}: {err}", file=sys.stderr)
        rclpy.try_shutdown()
        sys.exit(2)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop.is_set() and rclpy.ok():
            executor.spin_once(timeout_sec=_SPIN_S)
    except ExternalShutdownException:
        pass
    finally:
        if signals:
            node.get_logger().info(f"{signals[0]}: shutting down")
        executor.remove_node(node)
        node.close()
        node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
