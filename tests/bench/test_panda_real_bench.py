"""Smoke run of the ``panda_real`` benchmark on the shared Gaz et al. recordings."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import panda_real


def _args(tmp_path, methods: str, no_twin: bool) -> argparse.Namespace:
    return argparse.Namespace(methods=methods, no_twin=no_twin, seed=0, quick=True,
                              device="cpu", out_dir=str(tmp_path))  # fmt: skip


@pytest.mark.bench
def test_panda_real_fast_rows(tmp_path, shared_recording) -> None:
    shared_recording("panda-gaz2019")
    methods = "nominal,gaz2019,regressor_lsq,consistent_lsq"
    records = panda_real.run(_args(tmp_path, methods, no_twin=False))
    value = {(r.case, r.metric): r.value for r in records}

    def get(method: str, metric: str) -> float:
        return value[(f"panda_real/{method}", metric)]

    assert 1.7 < get("nominal", "rmse_heldout") < 1.9  # the 1.8 N·m
    assert 0.25 < get("gaz2019", "rmse_heldout") < 0.35  # the 0.30 N·m
    assert get("regressor_lsq", "consistent") == 0.0  # zero masses on links 1-2
    assert get("consistent_lsq", "consistent") == 1.0
    assert get("consistent_lsq", "rmse_heldout") < get("gaz2019", "rmse_heldout")
    assert get("consistent_lsq", "rmse_heldout") < 0.13
    assert get("consistent_lsq", "wall_s_both") < 10.0
    assert 0.7 < get("consistent_lsq", "heldout_over_sigma") < 1.3
    assert value[("panda_twin/consistent_lsq", "coverage_95")] > 0.8
    assert value[("panda_twin/consistent_lsq", "base_rel_err")] < 0.03


@pytest.mark.bench
def test_figaroh_rows_run_in_their_own_environment(tmp_path, shared_recording) -> None:
    """FIGAROH's rows (in build/figaroh-venv, from scripts/setup --figaroh): its OLS predicts like
    the unconstrained regressor (the fitted torques depend on the base parameters only), its
    physically consistent fit keeps every pseudo-inertia positive semidefinite."""
    if not panda_real.FIGAROH_PYTHON.exists():
        pytest.skip("FIGAROH's environment is missing; scripts/setup --figaroh creates it")
    shared_recording("panda-gaz2019")
    methods = "regressor_lsq,figaroh,figaroh_physical"
    records = panda_real.run(_args(tmp_path, methods, no_twin=True))
    value = {(r.case, r.metric): r.value for r in records}

    def get(method: str, metric: str) -> float:
        return value[(f"panda_real/{method}", metric)]

    assert abs(get("figaroh", "rmse_train") - get("regressor_lsq", "rmse_train")) < 0.005
    assert get("figaroh", "consistent") == 0.0
    assert get("figaroh_physical", "consistent") == 1.0
    assert get("figaroh_physical", "rmse_heldout") < 0.13
