"""The csvgd benchmark runs end to end at smoke-test sizes and writes well-formed records."""

from __future__ import annotations

import argparse
import math

import pytest

from dynid.benchmarks import csvgd


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
