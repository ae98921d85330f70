"""Benchmark fits through the fit driver (:mod:`dynid_bench.fitting`): the clock, the CPU budget
and its checkpoints, failures and torch threads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dynid.errors import EstimatorError
from dynid.estimators.base import Estimator, StepInfo
from dynid.estimators.registry import ResolvedEstimator
from dynid.posterior import Posterior
from dynid_bench import fitting
from dynid_bench.fitting import Budget, Clock, run_fit

PROBLEM = SimpleNamespace(name="toy")  # the driver reads only the name of a problem it is given


class _Busy(Estimator):
    """Spends about 2 ms of CPU per iteration; the posterior is the iteration count."""

    kind = "svgd"

    def init(self, problem: object, warm_start: Posterior | None = None) -> None:
        self.iteration = 0

    def step(self, iterations: int = 1) -> StepInfo:
        for _ in range(iterations):
            start = time.process_time()
            while time.process_time() - start < 2e-3:
                pass
            self.iteration += 1
        return StepInfo(iteration=self.iteration, loss=0.0, wall_s=0.0)

    def posterior(self) -> Posterior:
        return Posterior(particles=np.array([[float(self.iteration)]]), names=["x"], units=[""],
                         iteration=self.iteration)  # fmt: skip


def _resolved(estimator: Estimator) -> ResolvedEstimator:
    return ResolvedEstimator(estimator.kind, {}, estimator)


def _iteration(est: Estimator) -> dict[str, float]:
    return {"x": float(est.posterior().particles[0, 0])}


def test_a_cpu_budget_stops_the_run_and_samples_a_curve_evenly_in_cpu_time() -> None:
    busy = _Busy(max_iterations=1_000_000)
    budget = Budget(0.1, _iteration, points=4)
    result = run_fit(_resolved(busy), PROBLEM, hooks=budget)
    budget.final_checkpoint(busy)
    assert 0.1 <= budget.fit_cpu < 1.0
    assert result.interrupted  # the budget's stop is a stop request
    assert 10 <= result.posterior.iteration < 1_000_000
    its = [p["iteration"] for p in budget.curve]
    assert len(its) >= 4
    assert its == sorted(its)
    assert its[-1] == result.posterior.iteration
    assert [p["x"] for p in budget.curve] == its
    cpu = [p["cpu_s"] for p in budget.curve]
    assert cpu == sorted(cpu)
    assert cpu[0] >= 0.1 / 4


def test_without_a_budget_the_curve_is_sampled_evenly_in_iterations() -> None:
    busy = _Busy(max_iterations=200)
    budget = Budget(0.0, _iteration, points=4, iterations=200)
    result = run_fit(_resolved(busy), PROBLEM, hooks=budget)
    budget.final_checkpoint(busy)  # the last checkpoint was at the end already
    assert result.posterior.iteration == 200
    assert not result.interrupted
    assert [p["iteration"] for p in budget.curve] == [50.0, 100.0, 150.0, 200.0]


class _FakeTime:
    """``time.perf_counter`` and ``time.process_time`` that move only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Ticking(Estimator):
    """Every step takes one second of the fake time."""

    kind = "svgd"

    def __init__(self, clock: _FakeTime, **kw) -> None:
        super().__init__(**kw)
        self.clock = clock

    def init(self, problem: object, warm_start: Posterior | None = None) -> None:
        self.iteration = 0

    def step(self, iterations: int = 1) -> StepInfo:
        self.clock.now += 1.0
        self.iteration += 1
        return StepInfo(iteration=self.iteration, loss=1.0, wall_s=0.0)

    def posterior(self) -> Posterior:
        return Posterior(particles=np.zeros((1, 1)), names=["x"], units=[""])


class _Evaluating(Clock):
    """Spends ten seconds of the fake time in an evaluation after every step."""

    def __init__(self, clock: _FakeTime) -> None:
        self.clock = clock
        super().__init__()

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        super().on_step(info, estimator)
        with self.paused():
            self.clock.now += 10.0


def test_the_clock_times_every_step_and_leaves_out_the_evaluations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeTime()
    monkeypatch.setattr(fitting.time, "perf_counter", fake)
    monkeypatch.setattr(fitting.time, "process_time", fake)
    clock = _Evaluating(fake)
    run_fit(_resolved(_Ticking(fake, max_iterations=3)), PROBLEM, hooks=clock)
    assert clock.step_wall == pytest.approx([1.0, 1.0, 1.0], abs=1e-12)
    assert clock.fit_wall == pytest.approx(3.0, abs=1e-12)
    assert clock.fit_cpu == pytest.approx(3.0, abs=1e-12)


class _Diverging(_Busy):
    def step(self, iterations: int = 1) -> StepInfo:
        info = super().step(iterations)
        info.loss = float("nan") if info.iteration == 2 else 1.0
        return info


@pytest.fixture
def two_threads() -> Iterator[None]:
    """Two torch threads during the test, the threads before it after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("two_threads")
def test_a_run_that_fails_part_way_raises_naming_the_estimator_problem_and_failure() -> None:
    with pytest.raises(EstimatorError, match=r"^svgd on toy: non-finite loss \(nan\) at iter"):
        run_fit(_resolved(_Diverging(max_iterations=5)), PROBLEM, threads=1)
    assert torch.get_num_threads() == 2  # restored after the run


def test_the_run_has_the_threads_asked_for() -> None:
    seen: list[int] = []

    class Threads(Clock):
        def on_step(self, info: StepInfo, estimator: Estimator) -> None:
            seen.append(torch.get_num_threads())

    run_fit(_resolved(_Busy(max_iterations=2)), PROBLEM, hooks=Threads(), threads=1)
    assert seen == [1, 1]
