"""The benchmarks are a package of their own, ``dynid_bench``: the installed core holds none of
them, ``dynid_ros`` does not import them, and a run writes its records but rewrites a results
page only when asked to (``--pages``)."""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import dynid
import dynid_bench.__main__ as bench
from dynid.records import Record, read_records
from dynid_bench.results_pages import BEGIN, END

ROOT = Path(__file__).resolve().parents[2]
RECORDS = [Record("toy/one", "wall_s", 1.5, "s", target=2.0)]


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` statement of ``path`` names (relative
    imports resolved against the package the file belongs to are left out: they stay inside it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_core_has_no_benchmarks_module() -> None:
    """Neither the imported core package nor its sources hold ``dynid.benchmarks``; the records
    format stays in the core."""
    modules = {m.name for m in pkgutil.iter_modules(dynid.__path__)}
    assert "benchmarks" not in modules
    assert "records" in modules
    assert not (ROOT / "packages" / "dynid" / "dynid" / "benchmarks").exists()


@pytest.mark.parametrize("package", ["dynid", "dynid_ros"])
def test_the_core_and_dynid_ros_import_nothing_from_dynid_bench(package: str) -> None:
    sources = sorted((ROOT / "packages" / package / package).rglob("*.py"))
    assert sources
    offending = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in sources
        for module in _imported_modules(path)
        if module == "dynid_bench" or module.startswith(("dynid_bench.", "dynid.benchmarks"))
    }
    assert not offending, sorted(offending)


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import dynid_bench.lm as lm\nfrom dynid_bench import records\n"
        "def f():\n    from dynid_bench.csvgd import run\n    import os\n"
        "from . import sibling\n"
    )
    assert _imported_modules(source) == {"dynid_bench.lm", "dynid_bench", "dynid_bench.csvgd", "os"}


@pytest.fixture
def toy_benchmark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A benchmark ``toy`` returning :data:`RECORDS`, run from ``tmp_path``, whose
    ``docs/results/toy.md`` holds an empty generated section."""
    module = types.ModuleType("dynid_bench.toy")
    module.run = lambda args: list(RECORDS)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dynid_bench.toy", module)
    monkeypatch.setattr(bench, "available", lambda: ["toy"])
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "docs" / "results" / "toy.md"
    page.parent.mkdir(parents=True)
    page.write_text(f"# Toy\n\n{BEGIN}\n{END}\n")
    return page


def test_a_run_writes_its_records_and_leaves_the_results_pages_alone(toy_benchmark: Path) -> None:
    before = toy_benchmark.read_text()
    assert bench.main(["toy"]) == 0
    assert read_records(Path("build/bench/toy.json")) == RECORDS
    assert toy_benchmark.read_text() == before


def test_pages_regenerates_the_named_folders_page(toy_benchmark: Path) -> None:
    assert bench.main(["toy", "--out-dir", "out", "--pages", "docs/results"]) == 0
    text = toy_benchmark.read_text()
    assert "Generated from `out/toy.json` (1 records)" in text
    assert "| toy/one | wall_s | 1.5 ✓ | — | 2 | s |" in text


def test_pages_with_quick_is_refused_before_running(
    toy_benchmark: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["toy", "--quick", "--pages", "docs/results"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--pages: a --quick run's records do not go into results pages" in err
    assert not Path("build").exists()


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    command = [sys.executable, "-m", "dynid_bench", *args]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env, check=False
    )


def test_a_benchmarks_help_lists_its_own_options_and_runs_nothing(tmp_path: Path) -> None:
    result = _bench("csvgd", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "--scenarios" in result.stdout
    assert "--out-dir" in result.stdout
    assert not (tmp_path / "build").exists()


def test_an_unknown_benchmark_is_refused_naming_it(tmp_path: Path) -> None:
    result = _bench("no_such_benchmark", cwd=tmp_path)
    assert result.returncode == 2
    assert "scripts/bench: error:" in result.stderr
    assert "no_such_benchmark" in result.stderr


def test_every_listed_benchmark_runs_and_the_helper_modules_are_not_listed() -> None:
    """``scripts/bench all`` runs every name :func:`available` lists."""
    names = bench.available()
    assert not {"fitting", "equation_error", "figaroh_runner", "results_pages"} & set(names)
    for name in names:
        assert callable(getattr(importlib.import_module(f"dynid_bench.{name}"), "run", None)), name
