"""The csvgd benchmark runs end to end at smoke-test sizes and writes well-formed records."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from dynid.benchmarks import csvgd
from dynid.posterior import Posterior


@pytest.mark.bench
def test_csvgd_benchmark_quick() -> None:
    parser = argparse.ArgumentParser()
    csvgd.add_arguments(parser)
    args = parser.parse_args(["--scenarios", "ibm,timing", "--methods", "csvgd,svgd,cem"])
    args.quick, args.device = True, "cpu"
    records = csvgd.run(args)
    cases = {r.case for r in records}
    assert {"ibm_double_pendulum/ms/csvgd", "ibm_double_pendulum/ss/svgd"} <= cases
    assert {"ibm_double_pendulum/ss/cem", "ibm_double_pendulum/ms/cem"} <= cases
    by = {(r.case, r.metric): r for r in records}
    row = by[("ibm_double_pendulum/ms/csvgd", "kl_real_sim")]
    assert row.paper == pytest.approx(5204.5336)
    assert math.isfinite(by[("ibm_double_pendulum/ms/csvgd", "mmd")].value)
    assert by[("ibm_double_pendulum/N=16/csvgd/cpu", "iteration_s")].value > 0


def test_panda_support_distance_is_swap_invariant() -> None:
    names = list(csvgd.PANDA_WEIGHTS)
    truth = dict(zip(names, [0.10, -0.05, -0.02, 0.03], strict=True))
    swapped = np.array([[-0.02, 0.03, 0.10, -0.05], [0.0, 0.0, 0.0, 0.0]])
    post = Posterior(particles=swapped, names=names, units=["m"] * 4)
    assert csvgd._support_distance(post, truth) == pytest.approx(0.0)
    shifted = Posterior(
        particles=swapped + np.array([0.03, 0.04, 0.0, 0.0]), names=names, units=["m"] * 4
    )
    assert csvgd._support_distance(shifted, truth) == pytest.approx(0.05)


@pytest.mark.bench
def test_csvgd_benchmark_panda_box_tiny() -> None:
    parser = argparse.ArgumentParser()
    csvgd.add_arguments(parser)
    args = parser.parse_args(["--scenarios", "panda_box", "--panda-methods", "csvgd,cem"])
    args.quick, args.device = True, "cpu"
    records = csvgd.run(args)
    by = {(r.case, r.metric): r for r in records}
    assert by[("panda_box/csvgd", "log_likelihood")].paper == pytest.approx(-15.17)
    for method in ("csvgd", "cem"):
        assert math.isfinite(by[(f"panda_box/{method}", "log_likelihood")].value)
        assert by[(f"panda_box/{method}", "truth_in_support")].value in (0.0, 1.0)
        assert 0.0 <= by[(f"panda_box/{method}", "centroid_err_m")].value < 0.3
