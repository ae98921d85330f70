"""The estimator loop: budget, callbacks, the stop event and Ctrl-C (the registry:
test_registry.py)."""

import os
import signal
import threading
import weakref

import numpy as np
import pytest

from dynid.estimators.base import (
    Estimator,
    StepInfo,
    UnknownEstimatorError,
    make_estimator,
)
from dynid.posterior import Posterior


class _Counter(Estimator):
    """Moves one particle toward 3.0 by halving the distance each iteration."""

    kind = "csvgd"

    def __init__(self, interrupt_at: int | None = None, **kw) -> None:
        super().__init__(**kw)
        self.interrupt_at = interrupt_at

    def init(self, problem, warm_start=None) -> None:
        self.x = 0.0 if warm_start is None else float(warm_start.mean()[0])
        self.k = 0

    def step(self, iterations: int = 1) -> StepInfo:
        for _ in range(iterations):
            if self.k == self.interrupt_at:
                raise KeyboardInterrupt
            self.x += 0.5 * (3.0 - self.x)
            self.k += 1
        return StepInfo(self.k, abs(3.0 - self.x), 0.0, converged=abs(3.0 - self.x) < 1e-3)

    def posterior(self) -> Posterior:
        return Posterior(np.array([[self.x]]), ["a"], ["kg"], iteration=self.k)


def test_fit_stops_at_convergence_before_budget() -> None:
    post = _Counter(max_iterations=100).fit(problem=None)
    assert post.iteration == 12  # 3 * 2**-12 < 1e-3 <= 3 * 2**-11
    assert post.meta["seed"] == 0


def test_fit_respects_budget_and_callback() -> None:
    assert _Counter(max_iterations=3).fit(None).iteration == 3
    seen = []
    post = _Counter(max_iterations=50).fit(
        None, callback=lambda i, e: seen.append(i) or i.iteration >= 5
    )
    assert post.iteration == 5
    assert [i.iteration for i in seen] == [1, 2, 3, 4, 5]


def test_ctrl_c_returns_posterior_so_far() -> None:
    post = _Counter(interrupt_at=4, max_iterations=50).fit(None)
    assert post.iteration == 4
    assert post.meta["interrupted"] is True


class _Signalled(_Counter):
    """Sends itself SIGINT from inside a finalizer in iteration ``at`` (``twice``: then a second
    one from the iteration itself, which therefore does not finish)."""

    def __init__(self, at: int, twice: bool = False, **kw) -> None:
        super().__init__(**kw)
        self.at, self.twice = at, twice

    def step(self, iterations: int = 1) -> StepInfo:
        if self.k == self.at:
            tape = type("Tape", (), {})()
            weakref.finalize(tape, os.kill, os.getpid(), signal.SIGINT)
            del tape
            sum(range(10_000))  # bytecode runs: a pending signal is handled by now
            if self.twice:
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(10_000))
        return super().step(iterations)


def test_the_stop_event_ends_the_fit_after_the_current_iteration() -> None:
    stop = threading.Event()
    post = _Counter(max_iterations=50).fit(
        None, callback=lambda info, est: stop.set() if info.iteration == 3 else None, stop=stop
    )
    assert post.iteration == 3
    assert post.meta["interrupted"] is True


def test_the_library_installs_no_signal_handler() -> None:
    """Ctrl-C is the application's: a fit leaves SIGINT's handler as it found it."""
    seen = []
    _Counter(max_iterations=3).fit(None, callback=lambda i, e: seen.append(signal.getsignal(2)))
    assert seen == [signal.default_int_handler] * 3


def test_ctrl_c_in_a_finalizer_still_stops_the_cli_fit() -> None:
    """Under the CLI's handler, a SIGINT that arrives while a finalizer runs (Python prints and
    drops a KeyboardInterrupt raised there; the recycled tapes free theirs through
    ``weakref.finalize``) still ends the fit after the current iteration; a second SIGINT
    interrupts the iteration itself; the handler is restored."""
    from dynid.cli import _ctrl_c_sets

    before = signal.getsignal(signal.SIGINT)
    for twice, iteration in ((False, 3), (True, 2)):  # the second SIGINT cuts iteration 3 short
        stop = threading.Event()
        with _ctrl_c_sets(stop):
            post = _Signalled(at=2, twice=twice, max_iterations=50).fit(None, stop=stop)
        assert post.iteration == iteration
        assert post.meta["interrupted"] is True
        assert signal.getsignal(signal.SIGINT) is before


def test_warm_start_continues() -> None:
    first = _Counter(max_iterations=2).fit(None)
    second = _Counter(max_iterations=1).fit(None, warm_start=first)
    assert second.mean()[0] == pytest.approx(3.0 - 3.0 / 8.0)


def test_unknown_estimator_names_the_choices() -> None:
    with pytest.raises(
        UnknownEstimatorError, match=r"unknown estimator 'magic'; available: .*csvgd"
    ):
        make_estimator("magic")


def test_bad_budget() -> None:
    with pytest.raises(ValueError, match="max_iterations must be ≥ 1"):
        _Counter(max_iterations=0)


def test_every_registered_estimator_is_importable_with_its_kind() -> None:
    from dynid.estimators.registry import available_estimators

    for name in available_estimators():
        est = make_estimator(name, max_iterations=1)
        assert est.kind == name
