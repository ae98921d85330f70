"""Smoke run of the ``steady`` benchmark (``--quick``): every method and metric of the
hovercraft tables, the particle sweep, the noise-only check, the likelihood scan of the std and
the robot case, from one run; one method alone."""

from __future__ import annotations

import argparse
import math

import pytest

from dynid.sim import hovercraft as hov
from dynid_bench import steady


def _args(tmp_path, *options: str) -> argparse.Namespace:
    """The benchmark's options as its command line parses them, for a ``--quick`` run."""
    parser = argparse.ArgumentParser()
    steady.add_arguments(parser)
    args = parser.parse_args(
        ["--datasets", "hov", "--particles", "100", "--iterations", "40", "--anneal", "10",
         "--svi-iterations", "20", "--svi-batch", "4", "--svi-anneal", "10",
         "--validation-every", "20", "--patience", "5", "--eval-particles", "300",
         "--eval-traces", "50", *options]
    )  # fmt: skip
    args.quick, args.device, args.out_dir = True, "cpu", str(tmp_path)
    return args


@pytest.mark.bench
def test_steady_benchmark_quick(tmp_path, capsys) -> None:
    args = _args(
        tmp_path, "--sweep", "100", "--noise-em", "100", "--noise-em-iterations", "20",
        "--std-scan", "1,10", "--robot-particles", "32", "--robot-iterations", "8",
        "--restarts", "2",
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
    # STEADY keeps the restart of the best validation (its calibrated likelihood)
    restarts = [by[(f"hov/steady/restart{r}", "valid_log_likelihood")].value for r in (0, 1)]
    kept = int(by[("hov/steady", "restart")].value)
    assert restarts[kept] == max(restarts) == by[("hov/steady", "valid_log_likelihood")].value
    # STEADY's std calibration: a factor of the grid (or 1) per component, a validation
    # likelihood no lower than before it, and the model before it scored beside it
    scales = [by[("hov/steady", f"std_scale_{name}")].value for name, _ in steady.COMPONENTS]
    grid = (*steady.std_scales(args), 1.0)
    assert all(any(s == pytest.approx(f, rel=1e-6) for f in grid) for s in scales)  # float32
    before, after = (by[(f"hov/{case}", "valid_log_likelihood")].value
                     for case in ("steady_uncalibrated", "steady"))  # fmt: skip
    assert after >= before
    assert all(("hov/steady_uncalibrated", m) in by for m in steady.METRICS)
    # the true model (Hand differs only by drag) tracks the state far better than chance
    assert by[("hov/hand", "state_loc_rmse")].value < 2.0
    assert ("hov/steady/N=100", "best_valid_log_likelihood") in by
    assert "noise-only EM" in printed
    for c, (name, _) in enumerate(steady.COMPONENTS):
        record = by[("hov/noise_em/N=100", f"std_{name}")]
        assert record.paper == hov.TRUE_STD[c]
        assert 0.0 < record.value < 1.0
    # at 1 Hz a tenfold disturbance std explains the validation runs' bearings worse than the
    # true one (at 10 Hz a 100-particle filter loses the narrow model's particles and favours
    # the wide one)
    true, wide = (by[(f"hov/true_std_scale/x{f}", "valid_log_likelihood_1hz")].value
                  for f in (1, 10))  # fmt: skip
    assert true > wide
    assert ("hov/true_std_scale/x10", "valid_log_likelihood_10hz") in by
    # the robot case: every method's parameter and prediction errors, targets on STEADY's
    for method in ("hand", "fithand", *steady.ROBOT_RESIDUALS):
        for metric in ("payload_mass_abs_err", "armature_abs_err", "forward_angle_rmse"):
            assert math.isfinite(by[(f"omx_payload/{method}", metric)].value)
    for method in steady.ROBOT_RESIDUALS:
        assert by[(f"omx_payload/{method}", "payload_mass_abs_err")].target is not None
        assert by[(f"omx_payload/{method}", "valid_log_likelihood")].better == "higher"
    # Hand keeps the nominal payload (0.03 kg against 0.1 kg) and armature (0.005 kg·m²)
    assert by[("omx_payload/hand", "payload_mass_abs_err")].value == pytest.approx(0.07)
    assert by[("omx_payload/hand", "armature_abs_err")].value == pytest.approx(0.005)


@pytest.mark.bench
def test_steady_benchmark_runs_one_method_alone(tmp_path) -> None:
    args = _args(tmp_path, "--methods", "svi", "--no-robot")
    records = steady.run(args)
    assert {r.case for r in records} == {"hov/svi"}
    uncalibrated = steady.run(
        _args(tmp_path, "--methods", "steady", "--no-robot", "--std-scales", "", "--restarts", "1")
    )
    assert {r.case for r in uncalibrated} == {"hov/steady"}
    diagnostic = {f"accel_{kind}_{name}" for kind in ("std", "mean_err")
                  for name, _ in steady.COMPONENTS}  # fmt: skip
    assert {r.metric for r in records} == {*steady.METRICS, "wall_s", *diagnostic}
    with pytest.raises(SystemExit, match="unknown"):
        steady.run(argparse.Namespace(**{**vars(args), "methods": "svi,nope"}))
