"""Smoke run of the ``loop`` benchmark: one payload and the gate-fail case over real DDS."""

from __future__ import annotations

import argparse

import pytest


@pytest.mark.bench
def test_loop_benchmark_quick_applies_the_load_and_refuses_the_gate_fail() -> None:
    pytest.importorskip("rclpy", reason="needs the ROS environment (source scripts/env.sh)")
    from dynid_bench import loop

    args = argparse.Namespace(seeds=1, duration=4.0, timeout=300.0, quick=True, device="cpu")
    by_key = {(r.case, r.metric): r.value for r in loop.run(args)}
    assert by_key[("m0.85kg/seed1", "load_applied")] == 1.0
    assert by_key[("m0.85kg/seed1", "mass_error_pct")] <= 1.0
    assert by_key[("m0.85kg/seed1", "com_error_mm")] <= 5.0
    assert by_key[("gate_fail/rated_0.5kg", "load_applied")] == 0.0
    assert by_key[("m0.85kg/seed1", "t_motion_end_s")] < by_key[("m0.85kg/seed1", "t_fit_done_s")]
