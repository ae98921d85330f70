"""Smoke runs of the ``payload`` benchmark: the regressor fit, and CSVGD with few iterations."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import payload


def _args(tmp_path, methods: str) -> argparse.Namespace:
    return argparse.Namespace(
        seed=0,
        methods=methods,
        duration=None,
        particles=None,
        iterations=None,
        quick=True,
        device="cpu",
        out_dir=str(tmp_path),
    )


@pytest.mark.bench
def test_payload_benchmark_regressor(tmp_path) -> None:
    records = payload.run(_args(tmp_path, "regressor_ls"))
    by_key = {(r.case, r.metric): r.value for r in records}
    case = "panda_payload/regressor_ls"
    assert by_key[(case, "mass_rel_err")] < 0.01
    assert by_key[(case, "com_err_m")] < 2e-3
    assert by_key[(case, "wall_s")] > 0.0
    assert {r.case for r in records} == {case}


@pytest.mark.bench
def test_payload_benchmark_csvgd_quick(tmp_path) -> None:
    records = payload.run(_args(tmp_path, "csvgd"))
    by_key = {(r.case, r.metric): r.value for r in records}
    case = "panda_payload/csvgd"
    assert by_key[(case, "in_95")] in (0.0, 1.0)
    assert by_key[(case, "iterations")] == 20
    assert by_key[(case, "mass_rel_err")] < 0.2
    assert by_key[(case, "com_err_m")] < 0.05


def test_unknown_method_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown"):
        payload.run(_args(tmp_path, "lmi_sdp"))
