"""The worker pool: one task per thread, one intra-op thread each, the caller's modes, errors."""

from __future__ import annotations

import threading

import pytest
import torch

from dynid.model.worker_pool import WorkerPool


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _where() -> tuple[str, int, bool, bool]:
    return (
        threading.current_thread().name,
        torch.get_num_threads(),
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
    )


def test_tasks_run_on_their_own_threads_with_one_intra_op_thread_and_the_callers_modes(
    two_threads,
):
    pool = WorkerPool(2)
    assert torch.get_num_threads() == 2  # the caller's count is untouched
    later: list[int] = []
    thread = threading.Thread(target=lambda: later.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert later == [2]  # and so is the default of threads started afterwards
    with torch.no_grad():
        (name_a, threads_a, grad_a, inf_a), (name_b, *_) = pool.map([_where, _where])
    assert {name_a, name_b} == {"dynid-worker-0", "dynid-worker-1"}
    assert threading.current_thread().name not in (name_a, name_b)
    assert (threads_a, grad_a, inf_a) == (1, False, False)
    with torch.inference_mode():
        [(_, _, _, inference)] = pool.map([_where])
    assert inference
    [(_, _, grad, _)] = pool.map([_where])
    assert grad


def test_a_failing_task_raises_in_the_caller_once_every_task_has_ended():
    pool = WorkerPool(2)
    finished = threading.Event()

    def fails() -> None:
        raise ValueError("bad piece")

    def slow() -> int:
        finished.wait(0.05)
        finished.set()
        return 3

    with pytest.raises(ValueError, match="bad piece"):
        pool.map([fails, slow])
    assert finished.is_set()
    assert pool.map([lambda: 1, lambda: 2]) == [1, 2]  # the pool still serves


def test_more_tasks_than_threads_are_refused():
    with pytest.raises(ValueError, match="3 tasks for a pool of 2 threads"):
        WorkerPool(2).map([lambda: 0] * 3)
    with pytest.raises(ValueError, match="at least one thread"):
        WorkerPool(0)
