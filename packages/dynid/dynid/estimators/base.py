"""The estimator interface: every method is a sampler or optimiser over one ``Problem``.

An estimator is driven in small pieces so that a ROS node can run a few iterations, publish the
current particles, and go on::

    est = resolve_estimator("csvgd", problem_file.estimator, {"seed": 0}).estimator
    est.init(problem)                  # or est.init(problem, warm_start=last_posterior)
    while not info.converged:
        info = est.step(10)            # 10 iterations
        publish(est.posterior())

``fit`` runs that loop to the end (budget, convergence, a callback asking to stop, a ``stop``
event, or a ``KeyboardInterrupt`` inside a step, in which case the posterior so far is returned);
:class:`dynid.fit.Fit` is the driver around it that the CLI and the nodes share.

Which estimators exist (the entry points of group ``dynid.estimators``, :mod:`dynid.plugins`),
their default settings and how a name, a problem file and overrides become a configured estimator
is :mod:`dynid.estimators.registry` (``make_estimator`` and ``available_estimators`` are
re-exported here for the estimator modules).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from dynid.estimators.errors import EstimatorError, UnknownEstimatorError
from dynid.estimators.registry import available_estimators, make_estimator

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from dynid.posterior import Posterior
    from dynid.problem import Problem

__all__ = [
    "Callback",
    "Estimator",
    "EstimatorError",
    "StepInfo",
    "UnknownEstimatorError",
    "available_estimators",
    "make_estimator",
]


@dataclass
class StepInfo:
    """Progress after a call to ``Estimator.step``.

    Attributes:
        iteration: iterations done since ``init``.
        loss: current objective (negative log posterior up to a constant, or the fit loss).
        wall_s: wall time since ``init`` (s).
        converged: the estimator's own stopping test passed.
        metrics: extra per-iteration figures (e.g. ``{"max_defect": 1e-4, "nan_particles": 2}``).
    """

    iteration: int
    loss: float
    wall_s: float
    converged: bool = False
    metrics: dict[str, float] = field(default_factory=dict)


Callback = Callable[[StepInfo, "Estimator"], bool | None]
"""Called after every ``step`` inside ``fit``; returning ``True`` stops the run."""


class Estimator(ABC):
    """Base class of dynid's estimators.

    Subclasses set ``kind`` and implement ``init``, ``step`` and ``posterior``. Settings are
    constructor keyword arguments (documented by each subclass); ``max_iterations`` is the
    default budget of ``fit``.

    Attributes:
        kind: the name the estimator is registered under (its entry point in group
            ``dynid.estimators``); posteriors record it.
        defaults_file: the estimator's own default settings, a YAML file ``name: <kind>``,
            ``settings: {...}`` shipped with its package (e.g.
            ``importlib.resources.files("my_package") / "my_method.yaml"``); ``None``: the
            constructor's defaults.
    """

    kind: ClassVar[str]
    defaults_file: ClassVar[Traversable | None] = None

    def __init__(self, *, max_iterations: int = 1000, seed: int = 0) -> None:
        if max_iterations < 1:
            raise EstimatorError(f"max_iterations must be ≥ 1, got {max_iterations}")
        self.max_iterations = max_iterations
        self.seed = seed

    @abstractmethod
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Prepare a run on ``problem``; start from ``warm_start``'s particles when given."""

    @abstractmethod
    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` iterations (fewer if converged) and report progress."""

    @abstractmethod
    def posterior(self) -> Posterior:
        """The current posterior (callable at any time after ``init``)."""

    def fit(
        self,
        problem: Problem,
        callback: Callback | None = None,
        *,
        warm_start: Posterior | None = None,
        iterations_per_step: int = 1,
        stop: threading.Event | None = None,
    ) -> Posterior:
        """Run until convergence, ``max_iterations``, a callback returning True, ``stop`` set, or
        a ``KeyboardInterrupt`` raised inside a step.

        Returns the posterior reached; after ``stop`` or a ``KeyboardInterrupt`` it carries
        ``meta["interrupted"] = True``. No signal handler is installed here: an application that
        wants Ctrl-C to end the run after its current step sets ``stop`` from its handler
        (:mod:`dynid.fit` is the driver that ``dynid fit`` and the nodes use).
        """
        start = time.perf_counter()
        self.init(problem, warm_start=warm_start)
        interrupted = False
        try:
            done = 0
            while done < self.max_iterations and not (stop is not None and stop.is_set()):
                info = self.step(min(iterations_per_step, self.max_iterations - done))
                done = info.iteration
                if callback is not None and callback(info, self):
                    break
                if info.converged:
                    break
        except KeyboardInterrupt:
            interrupted = True
        post = self.posterior()
        post.meta.setdefault("wall_s", time.perf_counter() - start)
        post.meta.setdefault("seed", self.seed)
        if interrupted or (stop is not None and stop.is_set()):
            post.meta["interrupted"] = True
        return post
