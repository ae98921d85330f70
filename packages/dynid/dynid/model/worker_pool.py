"""Threads that run pieces of a batch side by side, each with one torch intra-op thread.

A replayed program (:mod:`dynid.model.op_replay`) runs as one TorchScript function, which holds
the GIL only while it starts, so programs on pieces of a batch run in parallel on Python
threads. Most kernels of such a piece are below torch's parallel grain (32768 elements) and run
on one core anyway; the few above it would start an OpenMP team of ``torch.get_num_threads()``
in every worker and oversubscribe the cores, so each worker runs with one intra-op thread.

Torch sets the intra-op thread count per thread (OpenMP's per-thread setting) but also stores
it as the default for threads created later; a worker's setting is therefore made once, when it
starts, and the caller's count is restored as that default before the pool is used.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["WorkerPool", "shared_pool"]


class WorkerPool:
    """``size`` daemon threads; :meth:`map` runs one task on each of the first ones and waits.

    Tasks run under the caller's grad mode and inference mode (both are per thread in torch).
    Calls from several threads are served one after the other.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one thread, got size={size}")
        self.size = size
        self._inboxes: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(size)]
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        threads = torch.get_num_threads()
        for i in range(size):
            name = f"dynid-worker-{i}"
            threading.Thread(target=self._serve, args=(i,), name=name, daemon=True).start()
        for _ in range(size):
            self._results.get()  # each worker has set its own intra-op thread count
        torch.set_num_threads(threads)  # the default for new threads, which the workers changed

    def _serve(self, i: int) -> None:
        torch.get_num_threads()  # torch's lazy per-thread initialisation, before the override
        torch.set_num_threads(1)
        self._results.put(None)
        while True:
            task, grad, inference = self._inboxes[i].get()
            try:
                with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                    outcome: tuple[bool, Any] = (True, task())
            except BaseException as error:  # handed to the caller, who re-raises it
                outcome = (False, error)
            self._results.put((i, outcome))

    def map(self, tasks: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run ``tasks[i]`` on worker ``i`` (at most ``size`` tasks); their results in order.

        The first exception a task raised is raised here once all tasks have ended.
        """
        if len(tasks) > self.size:
            raise ValueError(f"{len(tasks)} tasks for a pool of {self.size} threads")
        grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()
        with self._lock:
            for inbox, task in zip(self._inboxes, tasks, strict=False):
                inbox.put((task, grad, inference))
            outcomes: list[tuple[bool, Any]] = [(True, None)] * len(tasks)
            for _ in tasks:
                i, outcome = self._results.get()
                outcomes[i] = outcome
        for ok, value in outcomes:
            if not ok:
                raise value
        return [value for _, value in outcomes]


_POOLS: dict[int, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(size: int) -> WorkerPool:
    """The process's pool of ``size`` workers, started on first use."""
    with _POOLS_LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = _POOLS[size] = WorkerPool(size)
        return pool
