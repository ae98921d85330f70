"""The results pages' generated sections: rendered from the records, the hand-written text kept,
and every page with a section belongs to a benchmark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dynid.records import Record, RecordsError, read_records, write_records
from dynid_bench.__main__ import available
from dynid_bench.results_pages import (
    BEGIN,
    END,
    ResultsPageError,
    page_name,
    records_name,
    render,
    render_timeline,
    update_page,
    update_pages,
)

ROOT = Path(__file__).resolve().parents[2]
RECORDS = [
    Record("pendulum/viscous/lm", "cost", 7.3e-7, "rad^2", paper=1.92e-6, notes="5 series"),
    Record("pendulum/viscous/lsq", "cost", 9.1e-7, "rad^2", paper=1.92e-6, notes="5 series"),
    Record("payload/lm", "wall_s", 8.6, "s", target=5.0, notes="stride 40"),
]


def _page(tmp_path: Path, body: str = "") -> Path:
    page = tmp_path / "lm.md"
    page.write_text(f"# LM\n\nhand-written {{table}}\n\n{BEGIN}\n{body}\n{END}\n\ntail\n")
    return page


def test_render_groups_by_case_and_shows_paper_target_and_notes() -> None:
    text = render(RECORDS, "build/bench/lm.json")
    assert "`build/bench/lm.json` (3 records)" in text
    assert text.index("### `pendulum`") < text.index("### `payload`")
    assert "| pendulum/viscous/lm | cost | 7.300e-07 | 1.920e-06 | — | rad^2 |" in text
    assert "| payload/lm | wall_s | 8.6 ✗ | — | 5 | s |" in text
    assert text.count("- 5 series") == 1  # a note shared by a group is listed once


def test_event_records_render_as_a_timeline_per_case() -> None:
    """``t_<event>_s`` records become one row per case, events in order of first appearance, a
    missing event shown as — (NaN too)."""
    records = [
        Record("m1/seed1", "t_motion_start_s", 12.04, "s"),
        Record("m1/seed1", "t_load_applied_s", 30.0, "s"),
        Record("m1/seed1", "mass_error_pct", 0.1, "%"),
        Record("m1/seed2", "t_motion_start_s", 11.0, "s"),
        Record("m1/seed2", "t_load_applied_s", float("nan"), "s"),
        Record("gate/x", "t_decision_s", 20.0, "s"),
    ]
    lines = render_timeline(records).splitlines()
    assert lines[2] == "| case | start | motion start | load applied | decision |"
    assert lines[4:] == ["| m1/seed1 | 0 | 12.0 | 30.0 | — |", "| m1/seed2 | 0 | 11.0 | — | — |",
                         "| gate/x | 0 | — | — | 20.0 |"]  # fmt: skip
    assert render_timeline(RECORDS) == ""
    assert "| case | start | motion start |" in render(records, "loop.json")


def test_update_page_replaces_only_the_generated_section(tmp_path: Path) -> None:
    page = _page(tmp_path, "stale table")
    assert update_page(page, RECORDS, "lm.json")
    text = page.read_text()
    assert "stale table" not in text
    assert text.startswith("# LM\n\nhand-written {table}\n\n")
    assert text.endswith(f"{END}\n\ntail\n")
    assert render(RECORDS, "lm.json") in text
    assert not update_page(page, RECORDS, "lm.json")  # unchanged the second time


@pytest.mark.parametrize(
    "text", [f"{END}\n{BEGIN}\n", f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n", "no markers\n"]
)
def test_a_page_without_one_ordered_pair_of_markers_is_refused(tmp_path: Path, text: str) -> None:
    page = tmp_path / "x.md"
    page.write_text(text)
    with pytest.raises(ResultsPageError, match="exactly one"):
        update_page(page, RECORDS, "x.json")
    assert page.read_text() == text


def test_update_pages_reports_missing_records_and_pages(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _page(docs)
    write_records("lm", RECORDS, tmp_path / "bench")
    write_records("other", RECORDS, tmp_path / "bench")
    outcomes = dict(update_pages(["lm", "other", "none"], tmp_path / "bench", docs))
    assert outcomes == {"lm": "updated", "other": "no page", "none": "no records"}
    assert read_records(tmp_path / "bench" / "lm.json") == RECORDS


@pytest.mark.parametrize("text", ["{not json", '{"case": "x"}', '[{"case": "x", "metric": "m"}]'])
def test_a_file_that_is_not_records_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    """Bad JSON, an object instead of a list, an entry without a value: one error naming the
    file, and the page is left as it was."""
    docs, bench = tmp_path / "docs", tmp_path / "bench"
    docs.mkdir()
    bench.mkdir()
    page = _page(docs, "kept")
    before = page.read_text()
    (bench / "lm.json").write_text(text)
    with pytest.raises(RecordsError, match=r"lm\.json: not a list of benchmark records"):
        update_pages(["lm"], bench, docs)
    assert page.read_text() == before


def test_results_pages_is_not_listed_as_a_benchmark() -> None:
    assert "results_pages" not in available()
    assert "records" not in available()


def test_every_results_page_with_records_has_one_section_and_its_benchmark_exists() -> None:
    """``scripts/bench <name>`` regenerates ``docs/results/<page>.md``: each page with a section
    belongs to a benchmark that exists, and the section can be regenerated."""
    script = (ROOT / "scripts" / "bench").read_text(encoding="utf-8")
    benchmarks = {*available(), *re.findall(r"^\s+(\w+)\) shift; run_ros ", script, re.M)}
    for page in sorted((ROOT / "docs" / "results").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if BEGIN in text or END in text:
            assert text.count(BEGIN) == text.count(END) == 1, page.name
            assert text.index(BEGIN) < text.index(END), page.name
            assert records_name(page.stem) in benchmarks, page.name


def test_the_ros_benchmark_renders_into_ros_bench_md(tmp_path: Path) -> None:
    """``docs/ros.md`` documents the nodes; the ROS benchmark's page is ``ros_bench.md``."""
    assert page_name("ros") == "ros_bench"
    assert records_name("ros_bench") == "ros"
    assert page_name("lm") == records_name("lm") == "lm"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ros_bench.md").write_text(f"# ROS\n\n{BEGIN}\n{END}\n")
    write_records("ros", RECORDS, tmp_path / "bench")
    assert update_pages(["ros"], tmp_path / "bench", docs) == [("ros", "updated")]
    assert "(3 records)" in (docs / "ros_bench.md").read_text()
    assert (ROOT / "docs" / "results" / "ros_bench.md").read_text().count(BEGIN) == 1
