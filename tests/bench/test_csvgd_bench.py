"""The csvgd benchmark runs end to end at smoke-test sizes and writes well-formed records."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dynid.estimators.base import Estimator, StepInfo
from dynid.estimators.mdmm import DefectForm
from dynid.estimators.registry import ResolvedEstimator
from dynid.metrics import mmd
from dynid.posterior import Posterior
from dynid_bench import csvgd


@pytest.mark.bench
def test_csvgd_benchmark_quick(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    csvgd.add_arguments(parser)
    args = parser.parse_args(
        ["--scenarios", "ibm,ibm_check,synthetic,timing", "--methods", "csvgd,svgd,cem"]
    )
    args.quick, args.device, args.out_dir = True, "cpu", str(tmp_path)
    records = csvgd.run(args)
    curves = json.loads((tmp_path / "csvgd_synthetic_curves.json").read_text())
    assert set(curves) == {"csvgd", "svgd", "cem"}
    assert curves["csvgd"][-1]["iteration"] == 3
    assert math.isfinite(curves["csvgd"][-1]["param_mmd"])
    assert (tmp_path / "csvgd_synthetic_curves.png").stat().st_size > 0
    cases = {r.case for r in records}
    assert {"ibm_double_pendulum/ms/csvgd", "ibm_double_pendulum/ss/svgd"} <= cases
    assert {"ibm_double_pendulum/ss/cem", "ibm_double_pendulum/ms/cem"} <= cases
    by = {(r.case, r.metric): r for r in records}
    row = by[("ibm_double_pendulum/ms/csvgd", "kl_real_sim")]
    assert row.paper == pytest.approx(5204.5336)
    assert math.isfinite(by[("ibm_double_pendulum/ms/csvgd", "mmd")].value)
    assert by[("ibm_double_pendulum/N=16/csvgd/cpu", "iteration_s")].value > 0
    reference = by[("synthetic_double_pendulum/reference_truth_draws", "param_mmd")]
    assert math.isfinite(reference.value)
    assert "no fit" in reference.notes
    check = by[("ibm_double_pendulum/equation_error/free_gravity", "gravity_scale")]
    assert check.value > 0
    assert "at a limit" in check.notes


def test_synthetic_reference_sets_are_the_generating_gaussian_and_the_training_lengths() -> None:
    from dynid.problem_file import load_problem

    cfg = csvgd._config("double_pendulum")
    cfg["data"]["settings"].update(steps=5, seed=3, mean=[1.2, 2.2], correlation=-0.5)
    problem = load_problem(cfg)[0]
    args = argparse.Namespace(seed=3, particles=4000)
    sets = csvgd._reference_sets(problem, cfg["data"]["settings"], args)
    train = np.array([[t.meta["truth"][n] for n in problem.spec.names] for t in problem.dataset])
    assert sets["training_lengths"].shape == (4000, 2)
    np.testing.assert_array_equal(sets["training_lengths"][:10], train)
    np.testing.assert_array_equal(sets["training_lengths"][10:20], train)
    draws = sets["truth_draws"]
    np.testing.assert_allclose(draws.mean(0), [1.2, 2.2], atol=0.01)  # the settings' Gaussian
    np.testing.assert_allclose(draws.std(0), [0.15, 0.15], atol=0.01)
    assert np.corrcoef(draws.T)[0, 1] == pytest.approx(-0.5, abs=0.03)


def test_panda_support_distance_is_swap_invariant() -> None:
    names = list(csvgd.PANDA_WEIGHTS)
    truth = dict(zip(names, [0.10, -0.05, -0.02, 0.03], strict=True))
    swapped = np.array([[-0.02, 0.03, 0.10, -0.05], [0.0, 0.0, 0.0, 0.0]])
    post = Posterior(particles=swapped, names=names, units=["m"] * 4)
    assert csvgd._support_distance(post, truth) == pytest.approx(0.0)
    shifted = Posterior(
        particles=swapped + np.array([0.03, 0.04, 0.0, 0.0]), names=names, units=["m"] * 4
    )
    assert csvgd._support_distance(shifted, truth) == pytest.approx(0.05)


@pytest.mark.bench
def test_csvgd_benchmark_panda_box_tiny() -> None:
    parser = argparse.ArgumentParser()
    csvgd.add_arguments(parser)
    args = parser.parse_args(["--scenarios", "panda_box", "--panda-methods", "csvgd,cem"])
    args.quick, args.device = True, "cpu"
    records = csvgd.run(args)
    by = {(r.case, r.metric): r for r in records}
    assert by[("panda_box/csvgd", "log_likelihood")].paper == pytest.approx(-15.17)
    for method in ("csvgd", "cem"):
        assert math.isfinite(by[(f"panda_box/{method}", "log_likelihood")].value)
        assert by[(f"panda_box/{method}", "truth_in_support")].value in (0.0, 1.0)
        assert 0.0 <= by[(f"panda_box/{method}", "centroid_err_m")].value < 0.3


def test_observation_normalisation_makes_metrics_unit_free() -> None:
    rng = np.random.default_rng(3)
    real = rng.normal(size=(6, 5, 2))
    sim = real[rng.integers(0, 6, size=12)] + 0.3 * rng.normal(size=(12, 5, 2))
    real_n, sim_n = csvgd.normalise_observations(real, sim)
    assert np.allclose(real_n.reshape(-1, 2).std(0), 1.0)
    # expressing the second dimension in other units (×1000) changes nothing after normalising
    unit = np.array([1.0, 1000.0])
    real_u, sim_u = csvgd.normalise_observations(real * unit, sim * unit)
    assert np.allclose(real_u, real_n)
    assert np.allclose(sim_u, sim_n)
    assert mmd(real_u, sim_u) == pytest.approx(mmd(real_n, sim_n))


class _Counting(Estimator):
    """The posterior is the iteration count."""

    kind = "svgd"

    def init(self, problem: object, warm_start: Posterior | None = None) -> None:
        self.iteration = 0

    def step(self, iterations: int = 1) -> StepInfo:
        self.iteration += iterations
        return StepInfo(iteration=self.iteration, loss=0.0, wall_s=0.0)

    def posterior(self) -> Posterior:
        return Posterior(
            particles=np.array([[float(self.iteration)]]), names=["x"], units=[""],
            iteration=self.iteration,
        )  # fmt: skip


def test_the_fit_samples_the_curve_on_the_posterior_along_the_run() -> None:
    """The fit runs under the driver with a budget (:mod:`dynid_bench.fitting`, whose tests
    cover the CPU budget); the probe sees the posterior at every checkpoint."""
    args = argparse.Namespace(budget_s=0.0, curve_points=4, iterations=200, particles=1)
    resolved = ResolvedEstimator("svgd", {}, _Counting(max_iterations=200))
    problem = SimpleNamespace(name="busy")
    post, run = csvgd._fit(resolved, problem, args, probe=lambda p: {"x": float(p.particles[0, 0])})
    assert post.iteration == 200
    assert [p["iteration"] for p in run.curve] == [50.0, 100.0, 150.0, 200.0]
    assert [p["x"] for p in run.curve] == [50.0, 100.0, 150.0, 200.0]


def test_trajectory_metrics_count_the_clamped_entries() -> None:
    cfg = csvgd._config("ibm_double_pendulum")
    cfg["data"]["max_samples"] = 21
    problem = csvgd.load_problem(cfg)[0]
    spec = problem.spec
    at_limits = np.stack([np.asarray(spec.lower), np.asarray(spec.upper)])
    clamped = {spec.names[0]: 2, spec.names[3]: 1}
    post = Posterior(
        particles=at_limits, names=spec.names, units=spec.units, meta={"clamped_particles": clamped}
    )
    metrics = csvgd._trajectory_metrics(problem, post)
    assert metrics["clamped_entries"] == 3.0
    assert metrics["unstable_particles"] == 0.0
    assert math.isfinite(metrics["log_likelihood"])
    records = csvgd._records("case", {**metrics, "wall_s": 1.0}, None, "")
    assert {r.metric: r.value for r in records}["clamped_entries"] == 3.0


def test_csvgd_settings_come_from_the_command_line_else_the_problem_file() -> None:
    parser = argparse.ArgumentParser()
    csvgd.add_arguments(parser)
    ibm, synthetic = csvgd._config("ibm_double_pendulum"), csvgd._config("double_pendulum")
    est = csvgd._estimator("csvgd", "multiple", parser.parse_args([]), ibm).estimator
    assert est.defect_form == DefectForm.BOUNDED  # the IBM problem file's settings
    assert (est.bandwidth, est.learning_rate_decay) == (0.01, 0.998)
    notes = csvgd._csvgd_notes(est)
    assert "defects bounded, σ_def the problem's" in notes
    assert "step × 0.998 per iteration, kernel bandwidth h = 0.01" in notes
    est = csvgd._estimator("csvgd", "multiple", parser.parse_args([]), synthetic).estimator
    assert est.defect_form == DefectForm.SQUARED_NORM  # CSVGD's defaults
    assert (est.bandwidth, est.learning_rate_decay) == (None, 1.0)
    assert "step ×" not in csvgd._csvgd_notes(est)
    assert "bandwidth" not in csvgd._csvgd_notes(est)
    args = parser.parse_args(["--defect-form", "squared_norm", "--defect-std", "0.03",
                              "--multiplier-lr", "0.01", "--learning-rate-decay", "1",
                              "--bandwidth", "0.02"])  # fmt: skip
    est = csvgd._estimator("csvgd", "multiple", args, ibm).estimator
    assert (est.defect_form, est.defect_std) == (DefectForm.SQUARED_NORM, 0.03)
    assert est.mdmm.multiplier_lr == est.limits.multiplier_lr == 0.01
    assert (est.bandwidth, est.learning_rate_decay) == (0.02, 1.0)
    assert "step ×" not in csvgd._csvgd_notes(est)
    assert "kernel bandwidth h = 0.02" in csvgd._csvgd_notes(est)
    assert csvgd._csvgd_notes(csvgd._estimator("svgd", "single", args, ibm).estimator) == ""
    median = parser.parse_args(["--bandwidth", "median"])
    est = csvgd._estimator("csvgd", "multiple", median, ibm).estimator
    assert est.bandwidth is None  # the median heuristic, over the problem file's fixed h
    assert "bandwidth" not in csvgd._csvgd_notes(est)
    for bad in ("0", "-0.01", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--bandwidth", bad])


def test_limits_option_replaces_the_problem_files_ranges() -> None:
    cfg = csvgd._config("ibm_double_pendulum", None, "link2/iyy=0.0002:1.0, joint1/damping=0:1")
    ranges = {p["name"]: (p["lower"], p["upper"]) for p in cfg["parameters"]}
    assert ranges["link2/iyy"] == (0.0002, 1.0)
    assert ranges["joint1/damping"] == (0.0, 1.0)
    assert ranges["link1/iyy"] == (0.002, 1.0)  # the others keep the appendix ranges
    with pytest.raises(ValueError, match=r"link3/iyy.*NAME=LOWER:UPPER"):
        csvgd._config("ibm_double_pendulum", None, "link3/iyy=0:1")
    with pytest.raises(ValueError, match="NAME=LOWER:UPPER"):
        csvgd._config("ibm_double_pendulum", None, "link2/iyy=0.1")


def test_every_method_is_scored_on_its_last_n_guesses() -> None:
    names, units = ["a", "b"], ["m", "kg"]
    particles = np.arange(20.0).reshape(10, 2)
    log_density = np.arange(10.0)
    walkers = Posterior(particles=particles, names=names, units=units, log_density=log_density)
    kept = csvgd.last_guesses(walkers, 4)
    np.testing.assert_array_equal(kept.particles, particles[6:])
    np.testing.assert_array_equal(kept.log_density, log_density[6:])
    np.testing.assert_allclose(kept.weights, 0.25)
    assert kept.meta["scored"] == "last 4 of 10"
    assert "scored" not in walkers.meta
    assert csvgd.last_guesses(walkers, 10) is walkers
    assert csvgd.last_guesses(walkers, 12) is walkers
