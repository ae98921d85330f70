"""Smoke run of the ``reliability`` benchmark (``python -m dynid_ros.reliability --quick``) and
its counting helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest


@pytest.mark.bench
def test_counting_helpers() -> None:
    pytest.importorskip("rclpy", reason="needs the ROS environment (source scripts/env.sh)")
    from dynid_ros.reliability.feed import HZ, Motion, longest_run, missing

    flags = np.array([0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    assert longest_run(flags) == (4, 3)
    assert longest_run(np.zeros(4, dtype=bool)) == (0, 0)
    disk = np.array([10, 20, 20, 40])
    assert missing(np.array([10, 20, 30, 40, 50]), disk).tolist() == [0, 0, 1, 0, 1]
    assert missing(np.array([1, 2]), np.zeros(0, dtype=np.int64)).all()
    motion = Motion(rest_s=3.0, move_s=5.0)
    k = np.arange(2 * motion.period)
    moving = motion.moving(k)
    assert moving.sum() == 2 * 5 * HZ
    assert not moving[: 3 * HZ].any()
    assert moving[3 * HZ : 8 * HZ].all()
    q, dq = motion.states(k)
    assert np.abs(dq[moving]).max(axis=1).min() > 1.0  # far above the motion threshold
    assert not q[~moving].any()
    assert not dq[~moving].any()
    end = motion.settled(4 * HZ, quiet_s=1.0)  # in motion: the next rest, 2.5 s into it
    assert end == motion.period + 2500
    assert not motion.moving(np.arange(end - 2500, end)).any()


@pytest.mark.bench
def test_reliability_benchmark_quick_run_writes_records(tmp_path) -> None:
    pytest.importorskip("rclpy", reason="needs the ROS environment (source scripts/env.sh)")
    done = subprocess.run(
        [sys.executable, "-m", "dynid_ros.reliability", "--quick", "--trials", "2",
         "--out-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = json.loads((tmp_path / "reliability.json").read_text())
    value = {(r["case"].split("/")[0], r["metric"]): r["value"] for r in records}
    target = {(r["case"].split("/")[0], r["metric"]): r["target"] for r in records}
    assert target[("kill -9", "max_lost_s")] == 1.0
    assert target[("damaged-bag corpus", "fitted_silently")] == 0.0
    assert value[("kill -9", "max_lost_s")] <= 1.0
    assert value[("kill -9", "segments_unreadable")] == 0
    assert value[("kill -9", "spools_recovered")] >= 1  # 0 only if both kills hit a bag's end
    assert value[("endurance", "segments_unreadable")] == 0
    assert value[("endurance", "samples_altered")] == 0
    assert value[("endurance", "segments_written")] >= 4
    # 15 000 joint states and 3 000 mocap samples kept: at most a few per segment boundary
    assert value[("endurance", "samples_lost")] <= 0.005 * 18_000
    assert value[("endurance", "rss_growth_mb")] < 20.0
    assert value[("damaged-bag corpus", "fitted_silently")] == 0
    assert value[("damaged-bag corpus", "tracebacks")] == 0
    assert value[("damaged-bag corpus", "refused")] >= 20
    assert "| case | metric |" in done.stdout
    assert "| kill -9 | max_lost_s |" in done.stdout  # the metric, value, target, met table
