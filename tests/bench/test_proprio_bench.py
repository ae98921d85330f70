"""Smoke run of the ``proprio`` benchmark with few iterations (rigid cases only)."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import proprio


@pytest.mark.bench
def test_proprio_benchmark_quick(tmp_path) -> None:
    args = argparse.Namespace(
        iterations=15,
        seed=0,
        skip=["container", "block"],
        quick=True,
        device="cpu",
        out_dir=str(tmp_path),
    )
    records = proprio.run(args)
    by_key = {(r.case, r.metric): r for r in records}
    for obj in proprio.TABLE_I:
        err = by_key[(f"sim/{obj}", "mass_abs_err_kg")]
        assert err.value <= 0.006, obj
        assert (f"sim/{obj}", "wall_s") in by_key
    assert ("real/heavy_ball", "mass_kg") in by_key
    assert ("sim/initial_guess=4.772", "mass_kg") in by_key
    assert ("sim/adam_vs_cma/cma", "mass_kg") in by_key
    assert (tmp_path / "proprio_real_heavy_ball.png").is_file()
