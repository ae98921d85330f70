"""Smoke run of the ``steady`` benchmark (``--quick``): every method and metric of the
hovercraft tables, the particle sweep and the robot case, from one run; one method alone."""

from __future__ import annotations

import argparse
import math

import pytest

from dynid.benchmarks import steady
from dynid.sim import hovercraft as hov


@pytest.mark.bench
def test_steady_benchmark_quick(tmp_path, capsys) -> None:
    args = argparse.Namespace(
        seed=0, datasets="hov", methods=",".join(steady.METHODS), particles=100, iterations=40,
        learning_rate=1e-2, anneal=10, svi_iterations=20, svi_learning_rate=3e-3, svi_batch=4,
        svi_anneal=10, validation_every=20, patience=5, eval_particles=300, eval_traces=50,
        tv_alpha=None, sweep="100", noise_em="100", noise_em_iterations=20,
        robot=True, robot_particles=32, robot_iterations=8, quick=True,
        device="cpu", out_dir=str(tmp_path),
    )  # fmt: skip
    records = steady.run(args)
    printed = capsys.readouterr().out
    assert "Table I (state estimation RMSE)" in printed
    assert "fig. 5 format" in printed
    by = {(r.case, r.metric): r for r in records}
    for method in steady.METHODS:
        for metric in (*steady.METRICS, "wall_s"):
            assert (f"hov/{method}", metric) in by
        assert by[(f"hov/{method}", "state_loc_rmse")].paper is not None
        assert all(math.isfinite(by[(f"hov/{method}", m)].value) for m in steady.METRICS)
    # the true model (Hand differs only by drag) tracks the state far better than chance
    assert by[("hov/hand", "state_loc_rmse")].value < 2.0
    assert ("hov/steady/N=100", "best_valid_log_likelihood") in by
    assert "noise-only EM" in printed
    for c, (name, _) in enumerate(steady.COMPONENTS):
        record = by[("hov/noise_em/N=100", f"std_{name}")]
        assert record.paper == hov.TRUE_STD[c]
        assert 0.0 < record.value < 1.0
    # the robot case: every method's payload mass and prediction error, targets on STEADY
    for method in ("hand", "fithand", "steady"):
        assert (f"omx_payload/{method}", "payload_mass_abs_err") in by
    assert by[("omx_payload/steady", "payload_mass_abs_err")].target is not None
    # Hand keeps the nominal payload (0.03 kg against 0.1 kg)
    assert by[("omx_payload/hand", "payload_mass_abs_err")].value == pytest.approx(0.07)


@pytest.mark.bench
def test_steady_benchmark_runs_one_method_alone(tmp_path) -> None:
    args = argparse.Namespace(
        seed=0, datasets="hov", methods="svi", particles=100, iterations=40, learning_rate=1e-2,
        anneal=10, svi_iterations=20, svi_learning_rate=3e-3, svi_batch=4, svi_anneal=10,
        validation_every=20, patience=5, eval_particles=300, eval_traces=50, tv_alpha=None,
        sweep="", noise_em="", robot=False, quick=True, device="cpu", out_dir=str(tmp_path),
    )  # fmt: skip
    records = steady.run(args)
    assert {r.case for r in records} == {"hov/svi"}
    diagnostic = {f"accel_{kind}_{name}" for kind in ("std", "mean_err")
                  for name, _ in steady.COMPONENTS}  # fmt: skip
    assert {r.metric for r in records} == {*steady.METRICS, "wall_s", *diagnostic}
    with pytest.raises(SystemExit, match="unknown"):
        steady.run(argparse.Namespace(**{**vars(args), "methods": "svi,nope"}))
