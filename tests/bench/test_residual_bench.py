"""Smoke run of the ``residual`` benchmark (Fig. 4 of the residual-contact paper)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from dynid.records import write_records
from dynid_bench import residual


@pytest.mark.bench
def test_residual_quick(tmp_path: Path, shared_recording) -> None:
    shared_recording("planar-dice")
    parser = argparse.ArgumentParser()
    residual.add_arguments(parser)
    args = parser.parse_args([])
    args.quick, args.device, args.out_dir = True, "cpu", str(tmp_path)
    records = residual.run(args)
    by = {(r.case, r.metric): r for r in records}
    for method in residual.METHODS:
        assert (f"real_dice/{method}/n=1", "rmse") in by
    for method in ("residual", "residual_wrench", "residual_adam", "residual_gp"):
        metrics = ("coverage_50", "coverage_90", "observation_std", "belief_coverage_90")
        assert {(f"real_dice/{method}/n=2", m) for m in metrics} <= set(by)
    assert " score (" in by[("real_dice/residual/n=2", "rmse")].notes  # the chosen training score
    assert by[("real_dice/pybullet", "rmse")].paper == pytest.approx(0.055)
    assert 0.02 < by[("real_dice/pybullet", "rmse")].value < 0.2
    assert (tmp_path / "residual" / "residual_n2.pt").is_file()
    assert (tmp_path / "residual" / "residual_adam_n2.pt").is_file()
    assert (tmp_path / "residual" / "residual_wrench_n2.pt").is_file()
    assert "wrench residual" in by[("real_dice/residual_wrench/n=2", "rmse")].notes
    assert (tmp_path / "residual" / "residual_gp_n2.pt").is_file()
    assert (tmp_path / "residual_belief.html").stat().st_size > 1000
    path = write_records("residual", records, tmp_path)
    assert len(json.loads(path.read_text())) == len(records)
