"""Smoke run of the ``lm`` benchmark (``--quick``) and its pendulum data."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from dynid.report import History
from dynid_bench import lm


def _args(tmp_path, scenarios: str) -> argparse.Namespace:
    return argparse.Namespace(
        seed=0,
        scenarios=scenarios,
        quick=True,
        device="cpu",
        out_dir=str(tmp_path),
    )


@pytest.mark.bench
def test_lm_benchmark_quick(tmp_path, capsys) -> None:
    records = lm.run(_args(tmp_path, ",".join(lm.SCENARIOS)))
    by_key = {(r.case, r.metric): r.value for r in records}
    printed = capsys.readouterr().out
    assert "paper Table 3 format" in printed
    assert "paper Table 4 format" in printed
    # every method of every scenario is there, in the same run
    cases = {r.case for r in records}
    for friction in lm.FRICTION_MODELS:
        assert {f"pendulum/{friction}/lm", f"pendulum/{friction}/regressor_lsq"} <= cases
    assert "pendulum/dry/sim_error_lsq" in cases
    assert {"furuta/lm", "furuta/regressor_lsq", "furuta/release/lm"} <= cases
    assert {f"panda_payload/{m}" for m in ("lm", "regressor_lsq", "csvgd")} <= cases
    # LM identifies the pendulum's inertia from two short series within a few per cent
    assert by_key[("pendulum/dry/lm", "rel_err_pendulum/ixx")] < 0.03
    assert math.isfinite(by_key[("pendulum/dry/lm", "cv_cost")])
    assert by_key[("furuta/lm", "iterations")] >= 1
    assert by_key[("panda_payload/lm", "mass_rel_err")] < 0.05
    assert by_key[("panda_payload/regressor_lsq", "mass_rel_err")] < 0.01
    assert any(r.paper is not None for r in records if r.case == "pendulum/stribeck/lm")


def test_pendulum_series_is_released_near_upright_and_quantised() -> None:
    traj, true_q = lm.pendulum_series(0.1, seed=0, duration=2.0)
    assert traj.joint_names == ["pendulum_joint"]
    assert traj.q.shape == (201, 1)
    assert true_q[0] == pytest.approx(math.pi - 0.1)
    step = 2.0 * math.pi / lm.TICKS
    np.testing.assert_allclose(traj.q[:, 0] / step, np.round(traj.q[:, 0] / step), atol=1e-9)
    assert np.abs(traj.q[:, 0] - true_q).max() < 5e-3
    assert true_q.min() < 0.0  # it falls through the bottom within two seconds


def test_unknown_scenario_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown"):
        lm.run(_args(tmp_path, "cartpole"))


def test_iterations_to_the_final_cost_read_the_fits_loss_history() -> None:
    history = History(iterations=[1, 2, 3, 4], loss=[10.0, 2.0, 1.0 + 1e-9, 1.0])
    assert lm._iterations_to(history) == 3.0  # within 1e-6 of the final cost from iteration 3
    assert lm._iterations_to(History(iterations=[1], loss=[5.0])) == 1.0
    assert math.isnan(lm._iterations_to(None))  # a failed fit
