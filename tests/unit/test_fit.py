"""The fit driver (:mod:`dynid.fit`): hooks, the NaN policy, interruption, the output folder, a
problem without a problem file."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_cli_fixtures import TRUTH, write_pendulum_problem

from dynid.errors import EstimatorError
from dynid.estimators.base import Estimator, StepInfo
from dynid.estimators.registry import resolve_estimator
from dynid.fit import OUTPUT_FILES, Fit, FitHooks, HeldOut, output_names
from dynid.posterior import Posterior, PosteriorError
from dynid.problem_file import load_problem


class _Scripted(Estimator):
    """Losses from a list, one per iteration; the particle value is the iteration number."""

    kind = "csvgd"

    def __init__(self, losses: list[float], **kw) -> None:
        super().__init__(max_iterations=len(losses), **kw)
        self.losses = losses

    def init(self, problem, warm_start=None) -> None:
        self.k = 0

    def step(self, iterations: int = 1) -> StepInfo:
        self.k += 1
        return StepInfo(iteration=self.k, loss=self.losses[self.k - 1], wall_s=0.0)

    def posterior(self) -> Posterior:
        return Posterior(particles=np.full((1, 2), 0.1 * self.k), names=list(TRUTH),
                         units=["", ""], iteration=self.k)  # fmt: skip


class _Recorder(FitHooks):
    def __init__(self, stop_at: int | None = None) -> None:
        self.steps: list[int] = []
        self.published: list[int] = []
        self.stop_at = stop_at

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        self.steps.append(info.iteration)

    def on_posterior(self, posterior: Posterior, info: StepInfo) -> None:
        self.published.append(posterior.iteration)

    def stop_requested(self) -> bool:
        return self.stop_at is not None and self.steps[-1] >= self.stop_at


@pytest.fixture
def fit(tmp_path: Path) -> Fit:
    problem, pf = load_problem(write_pendulum_problem(tmp_path, steps=5))
    return Fit(pf, problem, resolve_estimator("csvgd", pf.estimator), publish_every=4)


def test_hooks_see_every_step_and_the_posterior_first_every_n_and_last(fit: Fit) -> None:
    hooks = _Recorder()
    result = fit.run(hooks=hooks, estimator=_Scripted([1.0] * 10))
    assert hooks.steps == list(range(1, 11))
    assert hooks.published == [1, 4, 8, 10]
    assert result.posterior.iteration == 10
    assert not result.interrupted
    assert result.error is None


class _Counting(_Scripted):
    """Counts the posteriors formed."""

    formed = 0

    def posterior(self) -> Posterior:
        self.formed += 1
        return super().posterior()


def test_posteriors_are_formed_for_the_hooks_only_when_they_take_them(fit: Fit) -> None:
    plain = _Counting([1.0] * 10)
    fit.run(hooks=FitHooks(), estimator=plain)
    assert plain.formed == 1  # the one the estimator's fit returns
    publishing = _Counting([1.0] * 10)
    fit.run(hooks=_Recorder(), estimator=publishing)
    assert publishing.formed == 1 + 4  # and one per publication: iterations 1, 4, 8, 10


def test_a_non_finite_loss_fails_the_run_with_the_posterior_of_that_step(fit: Fit) -> None:
    hooks = _Recorder()
    result = fit.run(hooks=hooks, estimator=_Scripted([3.0, 2.0, float("nan"), 1.0]))
    assert result.error == "non-finite loss (nan) at iteration 3"
    assert result.posterior.meta["error"] == result.error
    assert result.posterior.iteration == 3
    assert hooks.steps == [1, 2, 3]
    assert hooks.published == [1]  # nothing is published from the failed step
    assert not result.interrupted


class _NoPosteriorAfterNaN(_Scripted):
    """Like a particle estimator whose particles all turned non-finite: no posterior."""

    def posterior(self) -> Posterior:
        if math.isnan(self.losses[self.k - 1]):
            raise PosteriorError("all particle log-weights are -inf or NaN")
        return super().posterior()


def test_a_failed_run_without_a_posterior_raises_naming_the_failure(fit: Fit) -> None:
    with pytest.raises(EstimatorError, match=r"^non-finite loss \(nan\) at iteration 2; no "):
        fit.run(estimator=_NoPosteriorAfterNaN([1.0, float("nan")]))


def test_a_stop_request_is_an_interruption(fit: Fit) -> None:
    result = fit.run(hooks=_Recorder(stop_at=2), estimator=_Scripted([1.0] * 10))
    assert result.interrupted
    assert result.posterior.meta["interrupted"] is True
    assert result.posterior.iteration == 2
    stop = threading.Event()
    stop.set()  # set before the run: init only, no step
    result = fit.run(stop=stop, estimator=_Scripted([1.0] * 10))
    assert result.interrupted
    assert result.posterior.iteration == 0


def test_the_output_folder_has_the_files_every_fit_writes(fit: Fit, tmp_path: Path) -> None:
    result = fit.run(estimator=_Scripted([2.0, 1.0]))
    files = fit.write(result, tmp_path / "out")
    assert sorted(p.name for p in files.values()) == sorted(output_names(fit.problem.robot.name))
    assert set(files) == set(OUTPUT_FILES)
    summary = yaml.safe_load(files["posterior"].read_text())
    meta = summary["meta"]
    assert meta["estimator_name"] == "csvgd"
    assert meta["problem_file"] == fit.problem_file.model_mapping()
    assert meta["seed"] == fit.resolved.settings["seed"]


def test_a_problem_without_a_problem_file_runs_and_writes_without_one(
    fit: Fit, tmp_path: Path
) -> None:
    bare = Fit(None, fit.problem, fit.resolved)
    result = bare.run(estimator=_Scripted([2.0, 1.0]))
    assert result.validation is None
    assert "problem_file" not in bare.meta
    files = bare.write(result, tmp_path / "bare")
    assert set(files) == set(OUTPUT_FILES) - {"urdf"}  # no source URDF to write into
    meta = yaml.safe_load(files["posterior"].read_text())["meta"]
    assert meta["estimator_name"] == "csvgd"


def test_a_problem_without_a_problem_file_is_validated_on_the_held_out_data_given(
    fit: Fit,
) -> None:
    held = HeldOut(list(fit.problem.dataset), ["the training swings"])
    result = Fit(None, fit.problem, fit.resolved, heldout=held).run(estimator=_Scripted([1.0]))
    assert result.validation is not None
    assert result.validation.data == ["the training swings"]
