"""A partly invalid bag is never fitted silently: ``dynid fit`` prints what the reader read, used
and skipped per topic, keeps it in ``posterior.yaml`` and the report, and refuses a recording
that lost more than ``data.max_skipped_percent`` (``--max-skipped-percent``, default 5 %) of one
topic's messages in one line naming the topic and the counts."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Writer
from test_cli_fixtures import pendulum_dataset, write_pendulum_problem

from dynid.cli import main
from dynid.data import StorageFormat
from dynid.data import messages as m

T0 = 1_700_000_000_000_000_000
STEP = 10_000_000  # the pendulum data's 100 Hz
BAG_DATA = {"source": "bag", "joint_states": {"topic": "/joint_states"}, "dt": 0.01}

Edit = Callable[[int, int, np.ndarray], tuple[int, np.ndarray] | None]


def pendulum_bag(
    path: Path,
    edit: Edit | None = None,
    steps: int = 60,
    storage: StorageFormat = StorageFormat.MCAP,
) -> Path:
    """The pendulum recording as ``/joint_states`` messages in ``storage``;
    ``edit(k, stamp, position)`` returns the ``(stamp, position)`` written for message ``k``
    (``None``: the message is left out)."""
    (traj,) = pendulum_dataset(steps)
    store = m.make_typestore()
    types = store.types
    writer = Writer(path, version=9, storage_plugin=storage.plugin)
    writer.open()
    conn = writer.add_connection("/joint_states", m.JOINT_STATE, typestore=store)
    for k in range(traj.num_samples):
        stamp, position = T0 + k * STEP, traj.q[k].copy()
        if edit is not None:
            edited = edit(k, stamp, position)
            if edited is None:
                continue
            stamp, position = edited
        time = types["builtin_interfaces/msg/Time"](sec=stamp // 10**9, nanosec=stamp % 10**9)
        msg = types[m.JOINT_STATE](
            header=types["std_msgs/msg/Header"](stamp=time, frame_id=""),
            name=list(traj.joint_names),
            position=np.asarray(position, dtype=np.float64),
            velocity=traj.dq[k].copy(),
            effort=np.zeros(0),
        )
        writer.write(conn, T0 + k * STEP, store.serialize_cdr(msg, m.JOINT_STATE))
    writer.close()
    return path


def nan_every_tenth(k: int, stamp: int, position: np.ndarray) -> tuple[int, np.ndarray]:
    """Messages 5, 15, 25, ...: a NaN position (6 of 61 messages, 9.8 %)."""
    if k % 10 == 5:
        position[0] = np.nan
    return stamp, position


def _fit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["fit", "--no-progress", "--iterations", "2", "--particles", "2", *argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_a_topic_that_lost_more_than_five_percent_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10 % NaN joint states were fitted with exit 0 and no word."""
    bag = pendulum_bag(tmp_path / "run", nan_every_tenth)
    problem = write_pendulum_problem(tmp_path, steps=5, data=BAG_DATA)
    status, out, err = _fit(capsys, "--problem", str(problem), "--bag", str(bag),
                            "-o", str(tmp_path / "out"))  # fmt: skip
    assert status == 2
    assert err.splitlines() == [
        f"dynid fit: error: {bag}: topic '/joint_states': 6 of 61 messages skipped (9.8 %, more "
        "than the 5 % allowed): position: non-finite value: 6; data.max_skipped_percent of "
        f"{problem} (or dynid fit --max-skipped-percent) allows more"
    ]
    assert f"read {bag} (mcap): 61 messages" in out  # the summary is printed all the same
    assert "/joint_states (sensor_msgs/msg/JointState): 61 read, 55 used, 6 skipped" in out
    assert not (tmp_path / "out").exists()


def test_an_allowed_share_is_fitted_and_the_summary_kept_in_the_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = pendulum_bag(tmp_path / "run", nan_every_tenth)
    problem = write_pendulum_problem(tmp_path, steps=5, data=BAG_DATA)
    out_dir = tmp_path / "out"
    status, out, err = _fit(capsys, "--problem", str(problem), "--bag", str(bag),
                            "--max-skipped-percent", "10", "-o", str(out_dir))  # fmt: skip
    assert status == 0, err
    assert "61 read, 55 used, 6 skipped (9.8 %: position: non-finite value: 6)" in out
    assert "note: " in out  # the reader's note: rosbags wrote no CRC, so none was verified
    meta = yaml.safe_load((out_dir / "posterior.yaml").read_text())["meta"]
    (record,) = meta["recordings"]
    assert record["path"] == str(bag)
    counts = record["topics"]["/joint_states"]
    assert (counts["received"], counts["used"], counts["skipped"]) == (61, 55, 6)
    assert counts["skipped_reasons"] == {"position: non-finite value": 6}
    assert any("CRC" in note for note in record["notes"])
    assert meta["max_skipped_percent"] == 10.0
    report = (out_dir / "report.html").read_text()
    assert "<table id='recordings'>" in report
    assert "position: non-finite value: 6" in report


def test_the_problem_file_sets_the_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = pendulum_bag(tmp_path / "run", nan_every_tenth)
    generous_data = {**BAG_DATA, "max_skipped_percent": 12.5}
    generous = write_pendulum_problem(tmp_path, steps=5, data=generous_data)
    status, _, err = _fit(capsys, "--problem", str(generous), "--bag", str(bag),
                          "-o", str(tmp_path / "out"))  # fmt: skip
    assert status == 0, err
    strict = write_pendulum_problem(tmp_path, steps=5, data={**BAG_DATA, "max_skipped_percent": 0})
    status, _, err = _fit(capsys, "--problem", str(strict), "--bag", str(bag),
                          "-o", str(tmp_path / "out2"))  # fmt: skip
    assert status == 2
    assert "(9.8 %, more than the 0 % allowed)" in err


@pytest.mark.parametrize(
    ("data", "flag", "message"),
    [
        ({**BAG_DATA, "max_skipped_percent": 150}, [],
         "data.max_skipped_percent: expected a percentage in [0, 100], got 150"),
        ({**BAG_DATA, "max_skipped_percent": "lots"}, [],
         "data.max_skipped_percent: expected a percentage in [0, 100], got 'lots'"),
        (BAG_DATA, ["--max-skipped-percent", "-1"],
         "--max-skipped-percent: expected a percentage in [0, 100], got -1"),
        ({"source": "npz", "path": "dp.npz"}, ["--max-skipped-percent", "10"],
         "--max-skipped-percent: "),
    ],
    ids=["key_above_100", "key_word", "flag_negative", "flag_without_bag"],
)  # fmt: skip
def test_a_bad_share_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: dict, flag: list, message: str
) -> None:
    bag = pendulum_bag(tmp_path / "run")
    problem = write_pendulum_problem(tmp_path, steps=5, data=data)
    bag_flag = ["--bag", str(bag)] if data.get("source") == "bag" else []
    status, _, err = _fit(capsys, "--problem", str(problem), *bag_flag, *flag,
                          "-o", str(tmp_path / "out"))  # fmt: skip
    assert status == 2
    (line,) = err.splitlines()
    assert message in line


def test_messages_the_metadata_announces_but_the_storage_lost_are_counted_against_the_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sqlite3 rows under a topic id the bag does not declare are never read: 6 of the 61
    announced joint states (9.8 %) missing were fitted with only a TRUNCATED line."""
    bag = pendulum_bag(tmp_path / "run", storage=StorageFormat.SQLITE3)
    (db,) = bag.glob("*.db3")
    with sqlite3.connect(db) as sql:
        sql.execute("UPDATE messages SET topic_id = 99 WHERE id % 10 = 5")
    problem = write_pendulum_problem(tmp_path, steps=5, data=BAG_DATA)
    status, out, err = _fit(capsys, "--problem", str(problem), "--bag", str(bag),
                            "-o", str(tmp_path / "out"))  # fmt: skip
    assert status == 2
    assert err.splitlines() == [
        f"dynid fit: error: {bag}: 6 of the 61 messages its metadata announces for the topics "
        "read are missing (9.8 %, more than the 5 % allowed): the bag is truncated or damaged; "
        f"data.max_skipped_percent of {problem} (or dynid fit --max-skipped-percent) allows more"
    ]
    assert "TRUNCATED: 55 of 61 announced messages" in out
    assert not (tmp_path / "out").exists()
    status, out, err = _fit(capsys, "--problem", str(problem), "--bag", str(bag),
                            "--max-skipped-percent", "10", "-o", str(tmp_path / "out"))  # fmt: skip
    assert status == 0, err
