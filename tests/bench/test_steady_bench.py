"""Smoke run of the ``steady`` benchmark (``--quick``): every method, every metric, one run."""

from __future__ import annotations

import argparse
import math

import pytest

from dynid.benchmarks import steady


@pytest.mark.bench
def test_steady_benchmark_quick(tmp_path, capsys) -> None:
    args = argparse.Namespace(
        seed=0, datasets="hov", particles=100, iterations=40, learning_rate=1e-2, anneal=10,
        validation_every=20, patience=5, eval_particles=300, eval_traces=50, tv_alpha=0.05,
        sweep="100", quick=True, device="cpu", out_dir=str(tmp_path),
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
