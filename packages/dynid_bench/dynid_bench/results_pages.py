"""Results pages from benchmark records: ``build/bench/<name>.json`` into ``docs/results/``.

Each results page holds one generated section between the markers :data:`BEGIN` and
:data:`END`; :func:`update_page` replaces what lies between them with the records rendered as
Markdown tables (one per case group, our figure beside the paper's and the target), and leaves
the rest of the page, written by hand, untouched. ``scripts/bench <name> --pages docs/results``
calls it after the benchmark, so a page's generated tables and its records cannot disagree; a
run without ``--pages`` leaves the pages alone.

``python -m dynid_bench.results_pages [NAME ...]`` regenerates the pages of the named
records (default: every ``build/bench/*.json`` with a page).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dynid.atomic import atomic_write_text
from dynid.records import Record, RecordsError, format_table, read_records

__all__ = [
    "BEGIN",
    "END",
    "PAGES",
    "ResultsPageError",
    "page_name",
    "records_name",
    "render",
    "render_timeline",
    "update_page",
    "update_pages",
]

BEGIN = "<!-- BEGIN records -->"
END = "<!-- END records -->"
#: Pages not named after their benchmark: ``docs/ros.md`` documents the nodes themselves.
PAGES = {"ros": "ros_bench"}


def page_name(name: str) -> str:
    """The results page (file stem) of benchmark ``name``."""
    return PAGES.get(name, name)


def records_name(page: str) -> str:
    """The benchmark whose records results page ``page`` (file stem) holds."""
    return {v: k for k, v in PAGES.items()}.get(page, page)


class ResultsPageError(ValueError):
    """A page without exactly one pair of markers in order."""


def _group(case: str) -> str:
    """The table a case goes in: its first ``/``-separated component."""
    return case.split("/", 1)[0]


def render(records: Sequence[Record], source: str) -> str:
    """The generated section: a line naming ``source`` and the record count, then one table per
    case group (in order of first appearance) with that group's distinct notes under it."""
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(_group(record.case), []).append(record)
    lines = [
        "## Records",
        "",
        f"Generated from `{source}` ({len(records)} records) by `dynid_bench.results_pages`;"
        " ✓ / ✗: the target is met / missed. Do not edit by hand: `scripts/bench` rewrites this"
        " section.",
    ]
    for name, group in groups.items():
        lines += ["", f"### `{name}`", "", format_table(group)]
        timeline = render_timeline(group)
        if timeline:
            lines += ["", timeline]
        notes = list(dict.fromkeys(r.notes for r in group if r.notes))
        if notes:
            lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines)


def render_timeline(records: Sequence[Record]) -> str:
    """The timeline of each case with event records (metric ``t_<event>_s``, unit ``s``: seconds
    from the start of the run): a table with one row per case and one column per event, in
    order of first appearance, after a ``start`` column of 0; ``""`` without such records."""
    events: dict[str, dict[str, float]] = {}
    for record in records:
        if record.metric.startswith("t_") and record.metric.endswith("_s") and record.unit == "s":
            events.setdefault(record.case, {})[record.metric] = record.value
    if not events:
        return ""
    columns = list(dict.fromkeys(m for times in events.values() for m in times))
    heads = [m[2:-2].replace("_", " ") for m in columns]
    lines = [
        "Timeline (s from the start of the run; — : did not happen):",
        "",
        "| case | start | " + " | ".join(heads) + " |",
        "|---|" + "---|" * (len(columns) + 1),
    ]
    for case, times in events.items():
        cells = [_seconds(times.get(m, float("nan"))) for m in columns]
        lines.append(f"| {case} | 0 | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return "—" if value != value else f"{value:.1f}"  # NaN: the event did not happen


def update_page(page: Path, records: Sequence[Record], source: str) -> bool:
    """Replace the generated section of ``page`` by :func:`render` of ``records``.

    Returns:
        Whether the page changed.

    Raises:
        ResultsPageError: the page lacks the markers, has more than one pair, or has them out of
            order.
    """
    text = page.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ResultsPageError(f"{page}: needs exactly one {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    new = f"{head}{BEGIN}\n{render(records, source)}\n{END}{tail}"
    if new == text:
        return False
    atomic_write_text(page, new)
    return True


def update_pages(names: Sequence[str], bench_dir: Path, docs_dir: Path) -> list[tuple[str, str]]:
    """Update ``docs_dir/<page>.md`` from ``bench_dir/<name>.json`` for each name with both
    (:func:`page_name`: the page is the benchmark's name except where :data:`PAGES` says).

    Returns:
        ``(name, outcome)`` pairs: ``"updated"``, ``"unchanged"``, ``"no page"`` or
        ``"no records"``.

    Raises:
        ResultsPageError: a page without one ordered pair of markers.
        RecordsError: a records file that does not parse.
    """
    outcomes = []
    for name in names:
        page, source = docs_dir / f"{page_name(name)}.md", bench_dir / f"{name}.json"
        if not source.is_file():
            outcomes.append((name, "no records"))
        elif not page.is_file():
            outcomes.append((name, "no page"))
        else:
            shown = source.name if source.is_absolute() else source.as_posix()
            changed = update_page(page, read_records(source), shown)
            outcomes.append((name, "updated" if changed else "unchanged"))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate the named pages (default: every record file with a page)."""
    parser = argparse.ArgumentParser(prog="python -m dynid_bench.results_pages")
    parser.add_argument("names", nargs="*", help="benchmark names (default: all with records)")
    parser.add_argument("--bench-dir", type=Path, default=Path("build/bench"))
    parser.add_argument("--docs-dir", type=Path, default=Path("docs/results"))
    args = parser.parse_args(argv)
    names = args.names or sorted(p.stem for p in args.bench_dir.glob("*.json"))
    try:
        for name, outcome in update_pages(names, args.bench_dir, args.docs_dir):
            print(f"{args.docs_dir / page_name(name)}.md: {outcome}")
    except (ResultsPageError, RecordsError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
