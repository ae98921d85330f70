"""The guide's UR5 walkthrough (docs/guide/walkthrough-ur5.md) runs as written, on a shorter
recording and a two-iteration fit: a user's recording of a robot dynid does not ship, the
example problem file beside its URDF, ``dynid fit`` and ``dynid validate``."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "guide" / "examples" / "ur5_payload"


def _ur5_urdf() -> Path:
    dist = importlib.metadata.distribution("example-robot-data")
    files = dist.files or []
    found = [f for f in files if str(f).endswith("ur_description/urdf/ur5_robot.urdf")]
    assert found, "example-robot-data ships no ur5_robot.urdf"
    return Path(str(dist.locate_file(found[0])))


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stderr}"
    return result


def test_the_transcript_in_the_guide_shows_these_commands() -> None:
    page = (ROOT / "docs" / "guide" / "walkthrough-ur5.md").read_text(encoding="utf-8")
    for command in (
        "$ python record_ur5.py ur5_robot.urdf ur5_payload\n",
        "$ dynid fit --bag ur5_payload --problem ur5_payload.yaml -o fit --no-progress\n",
        "$ dynid validate --posterior fit/posterior.yaml --bag ur5_payload_2\n",
    ):
        assert command in page
    assert (EXAMPLE / "ur5_payload.yaml").read_text(encoding="utf-8").strip() in page


def test_the_ur5_walkthrough_runs(tmp_path: Path) -> None:
    """About 20 s: two 3 s recordings, a two-iteration fit with held-out validation, a rescore."""
    for name in ("record_ur5.py", "ur5_payload.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path)
    shutil.copy(_ur5_urdf(), tmp_path / "ur5_robot.urdf")
    record = [sys.executable, "record_ur5.py", "ur5_robot.urdf"]
    _run([*record, "ur5_payload", "--duration", "3"], tmp_path)
    dynid = [sys.executable, "-m", "dynid.cli"]
    fit = _run(
        [*dynid, "fit", "--bag", "ur5_payload", "--problem", "ur5_payload.yaml", "-o", "fit",
         "--no-progress", "--iterations", "2", "--particles", "2"],
        tmp_path,
    )  # fmt: skip
    assert "held-out validation" in fit.stdout
    assert "shoulder_pan" in fit.stdout
    posterior = yaml.safe_load((tmp_path / "fit" / "posterior.yaml").read_text())
    assert list(posterior["parameters"]) == [
        "payload/mass", "payload/com_x", "payload/com_y", "payload/com_z"
    ]  # fmt: skip
    assert posterior["meta"]["recordings"][0]["topics"]["/joint_states"]["used"] == 1501
    assert set(posterior["meta"]["validation"]) >= {"identified", "nominal"}
    urdf = (tmp_path / "fit" / "ur5_identified.urdf").read_text()
    assert '<parent link="tool0" /><child link="payload" />' in urdf
    _run([*record, "ur5_payload_2", "--duration", "3", "--seed", "1"], tmp_path)
    rescore = _run(
        [*dynid, "validate", "--posterior", "fit/posterior.yaml", "--bag", "ur5_payload_2"],
        tmp_path,
    )
    assert rescore.stdout.splitlines()[1].startswith("identified")
