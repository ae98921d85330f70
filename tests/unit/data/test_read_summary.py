"""The read summary says, per topic, what was read, used and skipped and why, and refuses a bag
that lost more than a given share of a topic's messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from test_bag import T0, RawBag

from dynid.data import BagReadError, read_bag

JOINTS = ["a", "b"]
STEP = 10_000_000  # 100 Hz


def _bag(path: Path, n: int = 40, nan: tuple[int, ...] = (3, 7, 9), back: int = 20) -> Path:
    """``n`` joint states at 100 Hz: positions NaN at ``nan``, message ``back`` stamped 125 ms
    before the one preceding it (logged in order)."""
    bag = RawBag(path)
    for k in range(n):
        ns = T0 + k * STEP
        stamp = T0 + (k - 13) * STEP - 5_000_000 if k == back else ns
        position = [np.nan, 0.0] if k in nan else [0.01 * k, -0.01 * k]
        bag.joint_state("/joint_states", stamp, JOINTS, position, [1.0, 1.0], log=ns)
    return bag.close()


def test_summary_counts_the_skipped_messages_by_reason(tmp_path: Path) -> None:
    (traj,), summary = read_bag(_bag(tmp_path / "b"))
    js = summary.topics["/joint_states"]
    assert (js.received, js.used, js.skipped) == (40, 36, 4)
    assert js.skipped_percent == pytest.approx(10.0)
    backwards = "header.stamp earlier than the previous message (first 1700000000.065000000 s "
    backwards += "after 1700000000.190000000 s)"
    assert js.skipped_reasons() == {backwards: 1, "position: non-finite value": 3}
    assert traj.num_samples == 36
    line = js.describe()
    assert line.startswith("/joint_states (sensor_msgs/msg/JointState): 40 read, 36 used, ")
    assert "4 skipped (10.0 %: header.stamp earlier" in line
    text = str(summary)
    assert text.splitlines()[0] == f"read {tmp_path / 'b'} (mcap): 40 messages"
    assert "note: " in text  # rosbags writes no CRC: the reader says it could not verify them
    record = yaml.safe_load(yaml.safe_dump(summary.as_dict()))
    assert record["topics"]["/joint_states"]["skipped"] == 4
    assert record["topics"]["/joint_states"]["skipped_reasons"][backwards] == 1
    assert record["notes"] == summary.notes


def test_a_topic_with_too_many_skipped_messages_is_refused_in_one_line(tmp_path: Path) -> None:
    _, summary = read_bag(_bag(tmp_path / "b"))
    summary.check_skipped(10.0)  # exactly 10 %: allowed
    with pytest.raises(BagReadError) as info:
        summary.check_skipped(5.0, "; allow more with --max-skipped-percent")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        f"{tmp_path / 'b'}: topic '/joint_states': 4 of 40 messages skipped (10.0 %, more than "
        "the 5 % allowed): header.stamp earlier than the previous message (first "
        "1700000000.065000000 s after 1700000000.190000000 s): 1; position: non-finite value: 3"
    )
    assert message.endswith("; allow more with --max-skipped-percent")
    _, clean = read_bag(_bag(tmp_path / "c", nan=(), back=-1))
    clean.check_skipped(0.0)
    assert clean.topics["/joint_states"].skipped_reasons() == {}
