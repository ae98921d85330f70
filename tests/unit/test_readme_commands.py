"""The README's walkthrough runs as written: every ``dynid`` command of its walkthrough section,
from the root of a copy of the repository's ``config/``, with small budgets added (a test run is
not a fit to trust) — a README command that does not run fails this test."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
#: The README section whose commands are run.
WALKTHROUGH = "A five-minute walkthrough"

#: Added to every fit: two iterations, no progress bar.
FIT_BUDGET = ["--iterations", "2", "--no-progress"]
#: Added to a fit by the estimator it runs (particles).
ESTIMATOR_BUDGET = {
    "csvgd": ["--particles", "2"],
    "svgd": ["--particles", "2"],
    "emcee": ["--particles", "4"],
}
#: Added to ``dynid simulate <scenario>``: a shorter recording where the default is long.
SIMULATE_BUDGET = {"panda_payload": ["--set", "duration=1"]}
DEMO_BUDGET = ["--iterations", "2", "--particles", "2", "--no-progress"]


def readme_commands(text: str) -> list[list[str]]:
    """The ``dynid`` commands of the README's walkthrough section (its first ``bash`` block),
    each split like a shell would (continuation lines joined, comments dropped)."""
    usage = text.split(f"\n## {WALKTHROUGH}", 1)[1].split("\n## ", 1)[0]
    block = usage.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv and argv[0] == "dynid":
            commands.append(argv[1:])
    return commands


def _option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _with_budget(argv: list[str], cwd: Path) -> list[str]:
    command = argv[0]
    if command == "simulate":
        return argv + SIMULATE_BUDGET.get(argv[1], [])
    if command == "demo":
        return argv + DEMO_BUDGET
    if command == "fit":
        estimator = _option(argv, "--estimator")
        if estimator is None:
            problem = yaml.safe_load((cwd / str(_option(argv, "--problem"))).read_text())
            estimator = problem.get("estimator", {}).get("name", "csvgd")
        return argv + FIT_BUDGET + ESTIMATOR_BUDGET.get(estimator, [])
    return argv


def test_the_walkthrough_section_lists_the_demo_a_recording_and_fits() -> None:
    commands = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    kinds = [argv[0] for argv in commands]
    assert kinds.count("demo") == 1
    assert kinds.count("simulate") >= 1
    assert kinds.count("fit") >= 2
    for argv in commands:
        if argv[0] == "fit":
            assert (ROOT / str(_option(argv, "--problem"))).is_file(), argv


def test_the_readme_walkthrough_runs_as_written(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """About a minute: the demo, a simulation and two fits, each with two iterations."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    written: set[str] = set()
    for argv in readme_commands((ROOT / "README.md").read_text(encoding="utf-8")):
        bag = _option(argv, "--bag")
        if argv[0] == "fit" and bag is not None and bag not in written:
            pytest.fail(f"README: 'dynid {shlex.join(argv)}' reads {bag}, which no README "
                        "command writes before it")  # fmt: skip
        run = _with_budget(argv, tmp_path)
        result = run_dynid(*run, cwd=tmp_path, script=True)
        assert result.returncode == 0, (
            f"README: 'dynid {shlex.join(argv)}' failed:\n{result.stderr}"
        )
        if argv[0] == "simulate":
            bag = str(_option(argv, "-o"))
            assert (tmp_path / bag).exists(), run
            written.add(bag)
        if argv[0] in ("fit", "demo"):
            out = _option(argv, "-o") or f"build/{argv[0]}"
            assert (tmp_path / out / "posterior.yaml").is_file(), run
            assert (tmp_path / out / "report.html").is_file(), run
