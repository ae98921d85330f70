"""``dynid track``: the tracker over a bag writes track.csv, events.csv and the report; bad
input ends with exit status 2 and one line."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from dynid.cli import main
from dynid.sim.mujoco import panda_payload

ROOT = Path(__file__).resolve().parents[3]
PROBLEM = ROOT / "config" / "problems" / "panda_payload_track.yaml"


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("track") / "release.mcap"
    panda_payload.simulate(2, path, duration=6.0, release_time=4.0)
    return path


def test_track_writes_one_row_per_update_and_the_release(bag: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    status = main(["track", "--bag", str(bag), "--problem", str(PROBLEM), "-o", str(out),
                   "--rate", "25"])  # fmt: skip
    assert status == 0
    with (out / "track.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 150  # 6 s at 25 Hz
    assert float(rows[0]["time"]) == pytest.approx(0.04)
    assert {"payload/mass", "payload/mass/std", "payload/izz/std", "unexcited"} <= set(rows[0])
    assert float(rows[95]["payload/mass"]) == pytest.approx(1.2, rel=0.01)  # 3.84 s: carried
    assert abs(float(rows[-1]["payload/mass"])) < 0.012  # released
    with (out / "events.csv").open() as f:
        (event,) = list(csv.DictReader(f))
    assert 4.0 <= float(event["detect_time"]) <= 4.5
    assert float(event["before/payload/mass"]) == pytest.approx(1.2, rel=0.01)
    assert event["after/payload/mass"] == ""  # the recording ends within settle_s (2 s) of it
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html
    assert "Detected changes" in html
    assert "real time on one core" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "unknown=1"], "--set: unknown tracker setting(s) ['unknown']"),
        (["--set", "change_rate=-1"], "'change_rate' must be a number > 0"),
        (["--rate", "0"], "update rate must be > 0 Hz"),
    ],
)
def test_bad_settings_end_with_status_2_and_one_line(
    bag: Path, tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    status = main(["track", "--bag", str(bag), "--problem", str(PROBLEM), "-o",
                   str(tmp_path / "o"), *extra])  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert message in err


def test_a_problem_without_a_payload_is_refused(bag: Path, tmp_path: Path, capsys) -> None:
    problem = ROOT / "config" / "problems" / "panda_whole_arm.yaml"
    status = main(["track", "--bag", str(bag), "--problem", str(problem), "-o", str(tmp_path)])
    assert status == 2
    assert "exactly one attachment of type 'payload'" in capsys.readouterr().err
