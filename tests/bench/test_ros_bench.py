"""Smoke run of the ``ros`` benchmark (``python -m dynid_ros.benchmark --quick``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.bench
def test_ros_benchmark_quick_run_writes_records(tmp_path) -> None:
    pytest.importorskip("rclpy", reason="needs the ROS environment (source scripts/env.sh)")
    done = subprocess.run(
        [sys.executable, "-m", "dynid_ros.benchmark", "--quick", "--duration", "3",
         "--iterations", "4", "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = json.loads((tmp_path / "ros.json").read_text())
    metrics = {(r["case"].split("/")[0], r["metric"]): r["value"] for r in records}
    assert metrics[("recorder", "lost_fraction")] <= 0.05
    assert metrics[("recorder", "cpu_per_wall_s")] > 0
    assert metrics[("estimator", "publish_interval_mean")] > 0
    assert "| case | metric |" in done.stdout
