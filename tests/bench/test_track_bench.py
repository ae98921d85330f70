"""Smoke run of the ``track`` benchmark: one short stream of each kind, both methods scored."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import track


@pytest.mark.bench
def test_track_benchmark_quick(tmp_path) -> None:
    args = argparse.Namespace(seeds=1, duration=12.0, release_s=6.0, grasp_s=4.0, steady_s=60.0,
                              quick=True, device="cpu", out_dir=str(tmp_path))  # fmt: skip
    by_key = {(r.case, r.metric): r.value for r in track.run(args)}
    assert by_key[("release/tracker", "delay_s")] <= 0.5
    assert by_key[("grasp/tracker", "delay_s")] <= 0.5
    assert by_key[("release/tracker", "converge_start_s")] <= 5.0
    assert by_key[("steady/tracker", "false_alarms")] == 0
    assert by_key[("release/tracker", "coverage_pct")] >= 90.0
    assert ("release/rls", "converge_start_s") in by_key
