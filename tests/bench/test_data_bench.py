"""Smoke run of the ``data`` benchmark with a small bag."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import data


@pytest.mark.bench
def test_data_benchmark_quick(tmp_path) -> None:
    args = argparse.Namespace(
        messages=5000, keep=False, quick=True, device="cpu", out_dir=str(tmp_path)
    )
    records = data.run(args)
    cases = {(r.case, r.metric) for r in records}
    for storage in ("mcap", "sqlite3"):
        for kind in ("rosbags_raw", "iter_joint_states", "read_bag"):
            assert (f"{storage}/n=5000/{kind}", "throughput") in cases
    assert all(r.value > 0 for r in records if r.metric == "throughput")
