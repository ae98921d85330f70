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

import os
import re
import signal
import sys
import tempfile
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

    A bad configuration prints one line naming the problem and exits with status 2 instead of a
    stack trace: ROS arguments that rcl cannot parse (``-p name:=[1``, a malformed
    ``--params-file``; :func:`_init`), and one of ``startup_errors`` while constructing (a
    parameter of the wrong type is a ``ParameterError``, :func:`dynid_ros.params.declare`).
    """
    stop = threading.Event()
    signals: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        signals.append(signal.Signals(signum).name)
        if stop.is_set():
            print(f"{name}: {signals[-1]}: stopping already, finishing the shutdown",
                  file=sys.stderr, flush=True)  # fmt: skip
        stop.set()

    _init(name, args if args is not None else sys.argv)
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


_SOURCE = re.compile(r",? at [\w./-]+:\d+")
"""The position in rcl's C sources that rcl appends to its error messages."""


def _init(name: str, args: list[str]) -> None:
    """``rclpy.init(args)``; when rcl refuses (arguments it cannot parse), print one line naming
    the argument and exit with status 2.

    rcl logs lines of its own to stderr before it raises; they are held back in a temporary
    file, dropped on failure (the one line says it all) and passed on after a successful start.
    """
    sys.stderr.flush()
    stderr = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
        except RuntimeError as err:  # rclpy's RCLError
            failure: str | None = " ".join(_SOURCE.sub("", str(err)).split())
        else:
            failure = None
        finally:
            os.dup2(stderr, 2)
            os.close(stderr)
        if failure is None:
            held.seek(0)
            os.write(2, held.read())
            return
    print(f"{name}: {failure}", file=sys.stderr)
    sys.exit(2)
