"""One fit of one problem: the driver ``dynid fit``, ``dynid demo``, the estimator node and the
benchmarks share.

A :class:`Fit` runs a configured estimator on a built problem and owns everything around the
estimator's ``init`` / ``step`` / ``posterior`` loop:

- **progress and publishing**: :class:`FitHooks` is told of every step (a progress bar, a status
  topic) and is handed the posterior after the first step, every ``publish_every`` steps and
  after the last (a node publishes it);
- **the NaN policy**: a non-finite loss ends the run; it is a failed run (``FitResult.error``)
  whose posterior is the one the estimator had then, marked ``meta["error"]``;
- **errors part-way**: a :class:`~dynid.errors.DynidError` (a diverging simulation, a
  refused step) after the first step ends the run the same way; one in the first step is raised;
- **interruption**: ``stop`` (a :class:`threading.Event` the application sets: the CLI on
  Ctrl-C or SIGTERM, the node on its shutdown) or :meth:`FitHooks.stop_requested` ends the run
  after the current step, and a ``KeyboardInterrupt`` raised inside a step ends it at once;
  either way the posterior reached comes back with ``meta["interrupted"] = True``. The library
  installs no signal handler;
- **held-out validation** on the problem file's ``validation`` data (into ``meta["validation"]``;
  none for a problem built in code, without a problem file);
- **the output folder**, the same files whoever runs the fit (:data:`OUTPUT_FILES`).

Typical use::

    fit = Fit(problem_file, problem, resolved, meta={"device": "cpu"})
    result = fit.run(hooks=my_hooks, stop=stop_event)
    files = fit.write(result, Path("build/fit"))
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynid.atomic import atomic_write_text
from dynid.errors import DynidError, EstimatorError
from dynid.problem_file.errors import one_line
from dynid.report import History, rollout_mmd, rollout_observations, trajectory_mmd, write_report
from dynid.validation import ValidationReport, validate

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.estimators.base import Estimator, StepInfo
    from dynid.estimators.registry import ResolvedEstimator
    from dynid.posterior import Posterior
    from dynid.problem import Problem
    from dynid.problem_file import ProblemFile

__all__ = ["OUTPUT_FILES", "Fit", "FitHooks", "FitResult", "HeldOut", "output_names"]

OUTPUT_FILES = {
    "posterior": "posterior.yaml",
    "particles": "particles.npz",
    "urdf": "{robot}_identified.urdf",
    "report": "report.html",
    "history": "history.json",
}
"""The output folder of every fit: label → file name (``{robot}``: the robot model's name)."""


class FitHooks:
    """What the caller of :meth:`Fit.run` does along the run; each method may be overridden and
    does nothing here. They run on the thread that runs the fit."""

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        """After every step: progress (``info.iteration``, ``info.loss``, ``info.wall_s``)."""

    def on_posterior(self, posterior: Posterior, info: StepInfo) -> None:
        """The current posterior, after the first step, every ``publish_every`` steps and after
        the last step of a run that was not interrupted or failed.

        The run forms these posteriors only for hooks that override this method: forming one
        can cost as much as a step (e.g. a linearised covariance)."""

    def stop_requested(self) -> bool:
        """Checked after every step: ``True`` ends the run as an interruption."""
        return False


@dataclass
class FitResult:
    """What one run of a :class:`Fit` produced.

    Attributes:
        posterior: the posterior reached (the last one when interrupted or failed part-way).
        history: per-step loss and trajectory MMD.
        wall_s: wall time of the estimation (s), from ``init`` to the last step.
        interrupted: ``stop`` or the hooks ended the run, or a ``KeyboardInterrupt`` did.
        converged: the estimator's own stopping test passed.
        error: one-line reason when the run failed part-way (non-finite loss, a
            :class:`~dynid.errors.DynidError`), else ``None``.
        validation: the held-out scores, when the problem file names held-out data and they
            could be scored (:meth:`Fit.validate`).
    """

    posterior: Posterior
    history: History
    wall_s: float
    interrupted: bool = False
    converged: bool = False
    error: str | None = None
    validation: ValidationReport | None = None


@dataclass
class HeldOut:
    """Held-out trajectories and the names they are reported under (read once, reused)."""

    trajectories: list[Trajectory]
    names: list[str] = field(default_factory=list)


class Fit:
    """One problem, one configured estimator, one output folder (see the module docstring).

    Args:
        problem_file: the problem file the problem was built from (its validation data, source
            URDF and the mapping recorded in ``posterior.yaml``); ``None`` for a problem built in
            code: no held-out validation unless ``heldout`` is given, no problem file in the
            provenance, and :meth:`write` writes a URDF only when given ``nominal_urdf``.
        problem: the built problem (data on its device).
        resolved: the estimator and its settings (:func:`dynid.estimators.registry.
            resolve_estimator`); every :meth:`run` builds a fresh estimator from it.
        meta: provenance recorded in ``posterior.yaml`` and the report (``device``, the command,
            the recordings read); the fit adds the estimator, its settings, the seed and the
            problem file.
        publish_every: hand the posterior to :meth:`FitHooks.on_posterior` every this many
            steps (0: only after the first and the last).
        mmd_every: evaluate the trajectory MMD every this many steps (0: only at the end); a
            torque (inverse-dynamics) problem is never rolled out and has none.
        heldout: held-out data already read (a node passes those of its previous run); default:
            read from the problem file on first use (:meth:`heldout`).
    """

    def __init__(
        self,
        problem_file: ProblemFile | None,
        problem: Problem,
        resolved: ResolvedEstimator,
        *,
        meta: Mapping[str, Any] | None = None,
        publish_every: int = 0,
        mmd_every: int = 0,
        heldout: HeldOut | None = None,
    ) -> None:
        if publish_every < 0 or mmd_every < 0:
            raise ValueError(f"publish_every and mmd_every must be ≥ 0, got "
                             f"{publish_every} and {mmd_every}")  # fmt: skip
        self.problem_file = problem_file
        self.problem = problem
        self.resolved = resolved
        self.publish_every = publish_every
        self.mmd_every = mmd_every
        self._heldout = heldout
        self._heldout_read = heldout is not None
        self.meta: dict[str, Any] = {
            **(meta or {}),
            "estimator_name": resolved.name,
            "estimator_settings": dict(resolved.settings),
            "seed": resolved.settings.get("seed", 0),
        }
        if problem_file is not None:
            self.meta["problem_file"] = problem_file.model_mapping()
        if problem_file is not None and problem_file.read_summaries:  # read, used, skipped
            self.meta["recordings"] = [s.as_dict() for s in problem_file.read_summaries]
            limit = problem_file.max_skipped_percent
            if limit is None:
                limit = getattr(problem_file.config.data.source, "max_skipped_percent", None)
            self.meta["max_skipped_percent"] = limit

    # ------------------------------------------------------------------------------ the loop
    def run(
        self,
        *,
        warm_start: Posterior | None = None,
        hooks: FitHooks | None = None,
        stop: threading.Event | None = None,
        estimator: Estimator | None = None,
    ) -> FitResult:
        """Run a fresh estimator to convergence, its budget, a stop, a failure or a non-finite
        loss, then score the result on the held-out data.

        Args:
            warm_start: start from this posterior's particles (ignored when it lacks one of the
                problem's parameters).
            hooks: progress, publishing and stop requests (default: none).
            stop: set by the application to end the run after the current step.
            estimator: run this estimator (configured as ``resolved`` says) instead of a fresh
                one built from ``resolved``.

        Raises:
            DynidError: the estimator failed in its first step (nothing to keep).
            EstimatorError: the run failed part-way and the estimator can form no posterior
                (the message starts with the run's failure).
        """
        hooks = hooks or FitHooks()
        stop = stop or threading.Event()
        if warm_start is not None and set(self.problem.spec.names) - set(warm_start.names):
            warm_start = None
        estimator = estimator if estimator is not None else self.resolved.build()
        publishing = type(hooks).on_posterior is not FitHooks.on_posterior
        history = History()
        failure: list[str] = []
        last: list[StepInfo] = []
        rolled_out = bool(self.mmd_every) and self.problem.likelihood.kind != "inverse_dynamics"

        def callback(info: StepInfo, est: Estimator) -> bool:
            history.record(info)
            last[:] = [info]
            hooks.on_step(info, est)
            if not math.isfinite(info.loss):
                failure.append(f"non-finite loss ({info.loss}) at iteration {info.iteration}")
                return True
            if rolled_out and info.iteration % self.mmd_every == 0:
                history.record_mmd(info.iteration, trajectory_mmd(self.problem, est.posterior()))
            ending = info.converged or info.iteration >= est.max_iterations
            if publishing and (
                info.iteration == 1
                or ending
                or (self.publish_every and info.iteration % self.publish_every == 0)
            ):
                hooks.on_posterior(est.posterior(), info)
            return hooks.stop_requested()

        start = time.perf_counter()
        try:
            posterior = estimator.fit(self.problem, callback, warm_start=warm_start, stop=stop)
        except DynidError as exc:
            if not history.iterations:
                raise
            failure.append(one_line(exc))
            try:
                posterior = estimator.posterior()
            except DynidError as again:  # e.g. no finite particle after a non-finite loss
                raise EstimatorError(
                    f"{failure[0]}; no posterior to keep: {one_line(again)}"
                ) from again
        wall = time.perf_counter() - start
        error = failure[0] if failure else None
        if error is not None:
            posterior.meta["error"] = error
        interrupted = error is None and (
            bool(posterior.meta.get("interrupted")) or stop.is_set() or hooks.stop_requested()
        )
        if interrupted:
            posterior.meta["interrupted"] = True
        posterior.meta["wall_s"] = round(wall, 3)
        converged = bool(last and last[0].converged)
        result = FitResult(posterior, history, wall, interrupted, converged, error)
        result.validation = self.validate(posterior)
        return result

    # ------------------------------------------------------------------------- validation
    def heldout(self) -> HeldOut | None:
        """The problem file's held-out data (``validation``: its bags, its ``data`` or the held-out
        tails of the recording), read on first use and kept; ``None`` without any (or without a
        problem file)."""
        if not self._heldout_read and self.problem_file is not None:
            held = self.problem_file.load_validation()
            self._heldout_read = True
            if held is not None and len(held):
                section = self.problem_file.config.validation
                if section is not None and section.bags:
                    names = [str(b) for b in section.bags]
                elif section is not None and section.source is not None:
                    names = [f"validation.data of {self.problem_file.origin}"]
                else:
                    names = ["held-out tails"]
                self._heldout = HeldOut(list(held), names)
        return self._heldout

    @property
    def heldout_loaded(self) -> HeldOut | None:
        """The held-out data read so far, without reading (``None`` before :meth:`heldout` read
        any, or when there are none)."""
        return self._heldout

    def validate(self, posterior: Posterior) -> ValidationReport | None:
        """Score ``posterior`` on :meth:`heldout` into ``posterior.meta["validation"]``; a
        scoring that fails is recorded as ``meta["validation_error"]`` and gives ``None``."""
        try:
            held = self.heldout()
            if held is None:
                return None
            report = validate(self.problem, posterior, held.trajectories, data=held.names)
        except DynidError as exc:
            posterior.meta["validation_error"] = one_line(f"{type(exc).__name__}: {exc}")
            return None
        posterior.meta["validation"] = report.as_dict()
        return report

    # ---------------------------------------------------------------------------- outputs
    def write(
        self,
        result: FitResult,
        out_dir: Path,
        *,
        nominal_urdf: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Path]:
        """Write :data:`OUTPUT_FILES` of ``result`` into ``out_dir`` (created), atomically.

        Args:
            result: a result of :meth:`run`.
            out_dir: the output folder.
            nominal_urdf: the URDF the identified values are written into (default: the
                problem file's source URDF); without one no URDF is written.
            meta: further provenance for this write (e.g. the node's problem path).

        Returns:
            label → path of each file written (labels of :data:`OUTPUT_FILES`).

        Raises:
            EstimatorError: ``result`` is a failed run whose posterior cannot be written (e.g.
                no finite particle); the message starts with the run's failure.
            UrdfWriteError: the identified values do not fit the nominal URDF.
            OSError: a file could not be written.
        """
        try:
            return self._write(result, out_dir, nominal_urdf, meta)
        except DynidError as exc:
            if result.error is None:
                raise
            raise EstimatorError(
                f"{result.error}; the posterior reached could not be written: {one_line(exc)}"
            ) from exc

    def _write(
        self,
        result: FitResult,
        out_dir: Path,
        nominal_urdf: str | None,
        meta: Mapping[str, Any] | None,
    ) -> dict[str, Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        posterior = result.posterior
        extra = {**self.meta, **(meta or {})}
        posterior.meta.update({k: v for k, v in extra.items() if k not in posterior.meta})
        files = {
            "posterior": posterior.to_yaml(out_dir / OUTPUT_FILES["posterior"]),
            "particles": posterior.save_npz(out_dir / OUTPUT_FILES["particles"]),
        }
        urdf = nominal_urdf
        if urdf is None and self.problem_file is not None:
            urdf = self.problem_file.source_urdf()
        if urdf is not None:
            xml = posterior.to_urdf(urdf, robot=self.problem.robot)
            name = OUTPUT_FILES["urdf"].format(robot=self.problem.robot.name)
            files["urdf"] = atomic_write_text(out_dir / name, xml)
        history = result.history
        rollouts = None
        if self.problem.likelihood.kind != "inverse_dynamics":  # no rollouts of a torque fit
            rollouts = rollout_observations(self.problem, posterior)
            if not history.mmd_iterations or history.mmd_iterations[-1] != posterior.iteration:
                history.record_mmd(posterior.iteration, rollout_mmd(self.problem, *rollouts[:2]))
        files["report"] = write_report(
            out_dir / OUTPUT_FILES["report"],
            posterior,
            problem=self.problem,
            history=history,
            title=f"dynid: {self.problem.name} ({posterior.estimator})",
            rollouts=rollouts,
            heldout=result.validation,
        )
        files["history"] = atomic_write_text(
            out_dir / OUTPUT_FILES["history"], json.dumps(history.as_dict(), indent=1) + "\n"
        )
        return files


def output_names(robot: str) -> list[str]:
    """The file names of a fit's output folder for robot model ``robot``."""
    return [name.format(robot=robot) for name in OUTPUT_FILES.values()]
