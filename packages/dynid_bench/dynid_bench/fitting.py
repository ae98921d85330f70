"""Benchmark fits through the fit driver, and the hooks that measure them.

Every benchmark that runs one of dynid's estimators runs it as ``dynid fit`` does: through
:class:`dynid.fit.Fit` (:func:`run_fit`), with the NaN policy and the failure handling of the
driver. What a benchmark measures along the run is a :class:`~dynid.fit.FitHooks`:

- :class:`Clock`: CPU and wall seconds of fitting, in all and per step, less the time of the
  evaluations made along the run (:meth:`Clock.paused`);
- :class:`Budget`: a clock that ends the run after a CPU budget and evaluates the estimator at
  evenly spaced checkpoints (a metric against time or iterations).

The loss history is the driver's (``FitResult.history``), the wall time of a whole run without
evaluations ``FitResult.wall_s``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from dynid.errors import EstimatorError
from dynid.fit import Fit, FitHooks, FitResult

if TYPE_CHECKING:
    from dynid.estimators.base import Estimator, StepInfo
    from dynid.estimators.registry import ResolvedEstimator
    from dynid.posterior import Posterior
    from dynid.problem import Problem

__all__ = ["Budget", "Clock", "Probe", "run_fit"]

Probe = Callable[["Estimator"], dict[str, float]]
"""Figures of the estimator's current state (e.g. metrics of its posterior), by name."""


def run_fit(
    resolved: ResolvedEstimator,
    problem: Problem,
    *,
    hooks: FitHooks | None = None,
    warm_start: Posterior | None = None,
    threads: int | None = None,
) -> FitResult:
    """Run ``resolved.estimator`` itself on ``problem`` through :class:`dynid.fit.Fit`.

    The estimator run is the resolved one, so that its state can be read after the run. No
    problem file is passed: a benchmark scores on its own held-out data and writes no output
    folder.

    Args:
        resolved: the estimator and its settings
            (:func:`dynid.estimators.registry.resolve_estimator`).
        problem: the problem to fit.
        hooks: the measurements along the run (default: none).
        warm_start: start from this posterior's particles (ignored when it lacks one of the
            problem's parameters).
        threads: torch threads during the run, restored after it (default: as they are).

    Raises:
        DynidError: the estimator failed in its first step.
        EstimatorError: the run failed part-way (a non-finite loss, an error after the first
            step): the message names the estimator, the problem and the failure.
    """
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        result = Fit(None, problem, resolved).run(
            warm_start=warm_start, hooks=hooks, estimator=resolved.estimator
        )
    finally:
        torch.set_num_threads(before)
    if result.error is not None:
        raise EstimatorError(f"{resolved.name} on {problem.name}: {result.error}")
    return result


class Clock(FitHooks):
    """CPU and wall seconds of fitting since the clock was made (make it just before the run),
    less the time spent in :meth:`paused` blocks.

    Attributes:
        step_wall: wall seconds of every step, in order (fitting time between one step's end and
            the next's; the first from the clock's start, so it holds the estimator's ``init``).
    """

    def __init__(self) -> None:
        self._cpu0 = time.process_time()
        self._wall0 = time.perf_counter()
        self._paused_cpu = self._paused_wall = 0.0
        self._last_wall = 0.0
        self.step_wall: list[float] = []

    @property
    def fit_cpu(self) -> float:
        """CPU seconds of this process spent fitting so far (all its threads)."""
        return time.process_time() - self._cpu0 - self._paused_cpu

    @property
    def fit_wall(self) -> float:
        """Wall seconds spent fitting so far."""
        return time.perf_counter() - self._wall0 - self._paused_wall

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not charged to the fit (an evaluation along the run)."""
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            yield
        finally:
            self._paused_cpu += time.process_time() - cpu
            self._paused_wall += time.perf_counter() - wall

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        """Close the step's time."""
        wall = self.fit_wall
        self.step_wall.append(wall - self._last_wall)
        self._last_wall = wall


class Budget(Clock):
    """A :class:`Clock` that ends the run once ``budget_s`` CPU seconds of fitting are spent and
    evaluates the estimator with ``probe`` at ``points`` checkpoints along the run: evenly in
    CPU time under a budget, evenly in iterations up to ``iterations`` without one
    (``budget_s = 0``). Evaluations are not charged to the fit.

    Attributes:
        curve: one entry per checkpoint: ``iteration``, ``cpu_s`` and ``wall_s`` of fitting so
            far, and the probe's figures.
        iterations_done: the iteration of the last step seen.
    """

    def __init__(
        self,
        budget_s: float = 0.0,
        probe: Probe | None = None,
        points: int = 0,
        iterations: int = 0,
    ) -> None:
        super().__init__()
        self.budget_s = float(budget_s)
        self.probe = probe
        span = self.budget_s if self.budget_s > 0 else float(iterations)
        self.every = span / points if probe is not None and points > 0 and span > 0 else math.inf
        self.curve: list[dict[str, float]] = []
        self.iterations_done = 0

    def checkpoint(self, estimator: Estimator) -> None:
        """Evaluate ``estimator`` with the probe (when there is one) into :attr:`curve`."""
        if self.probe is None:
            return
        cpu, wall = self.fit_cpu, self.fit_wall
        with self.paused():
            values = self.probe(estimator)
            self.curve.append({"iteration": float(self.iterations_done), "cpu_s": cpu,
                               "wall_s": wall, **values})  # fmt: skip

    def final_checkpoint(self, estimator: Estimator) -> None:
        """After the run: a checkpoint of the final state unless the last one was taken there."""
        if not self.curve or self.curve[-1]["iteration"] < self.iterations_done:
            self.checkpoint(estimator)

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        """Close the step's time; a checkpoint when one is due."""
        super().on_step(info, estimator)
        self.iterations_done = info.iteration
        progress = self.fit_cpu if self.budget_s > 0 else float(info.iteration)
        if progress >= self.every * (len(self.curve) + 1):
            self.checkpoint(estimator)

    def stop_requested(self) -> bool:
        """``True`` once the CPU budget is spent (never without one)."""
        return self.budget_s > 0 and self.fit_cpu >= self.budget_s
