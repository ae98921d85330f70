"""Smoke run of the ``excite`` benchmark on the payload problem (one start, few iterations,
three MuJoCo draws)."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import excite


@pytest.mark.bench
def test_excite_benchmark_payload_quick(tmp_path) -> None:
    args = argparse.Namespace(problems="panda_payload", random=2, seed=0, mujoco_draws=3,
                              quick=True, device="cpu", out_dir=str(tmp_path))  # fmt: skip
    records = excite.run(args)
    by_key = {(r.case, r.metric): r.value for r in records}
    assert (
        by_key[("panda_payload/designed", "log_det")]
        > by_key[("panda_payload/random/0", "log_det")]
    )
    assert by_key[("panda_payload/designed", "planning_s")] > 0
    assert ("panda_payload/gaz2019", "cond") in by_key
    ratio = by_key[("panda_payload/designed/mujoco", "spread_over_sigma_mass")]
    assert 0 < ratio < 10
