"""Benchmark records: one JSON object per number shown in a results table.

A benchmark writes its records with :func:`write_records` to ``<out_dir>/<name>.json``;
:func:`read_records` reads such a file back and :func:`format_table` renders records as
Markdown. The benchmark package (``dynid_bench``) and the ROS benchmarks (``dynid_ros``) share
this format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from dynid.atomic import atomic_write_text
from dynid.errors import DynidError

__all__ = ["Record", "RecordsError", "format_table", "read_records", "write_records"]


@dataclass(frozen=True)
class Record:
    """One measured number.

    Attributes:
        case: scenario, method and size, e.g. ``"panda_box/N=1024/torch"``.
        metric: the quantity, e.g. ``"forward_step_ms"``.
        value: the measured value in ``unit``.
        unit: SI or display unit of ``value`` (``"ms"``, ``"kg"``, ``""`` for ratios).
        target: the goal stated in the issue, or ``None``.
        paper: the paper's figure for the same case and metric, or ``None``.
        better: whether lower or higher values are better.
        notes: free text (hardware, dtype, deviations from the paper).
    """

    case: str
    metric: str
    value: float
    unit: str = ""
    target: float | None = None
    paper: float | None = None
    better: Literal["lower", "higher"] = "lower"
    notes: str = ""

    def meets_target(self) -> bool | None:
        """Whether ``value`` meets ``target`` (``None`` when there is no target)."""
        if self.target is None:
            return None
        if self.better == "lower":
            return self.value <= self.target
        return self.value >= self.target


def write_records(
    name: str, records: Iterable[Record], out_dir: str | Path = "build/bench"
) -> Path:
    """Write ``records`` atomically to ``<out_dir>/<name>.json`` and return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    payload = json.dumps([asdict(r) for r in records], indent=1, allow_nan=True)
    return atomic_write_text(path, payload + "\n")


class RecordsError(DynidError, ValueError):
    """A records file that cannot be read or is not a JSON list of record objects."""


def read_records(path: str | Path) -> list[Record]:
    """The records of a :func:`write_records` file.

    Raises:
        RecordsError: the file cannot be read, or is not a JSON list of objects with
            :class:`Record`'s fields (one line naming the file and the cause).
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return [Record(**entry) for entry in raw]
    except (OSError, ValueError, TypeError) as exc:
        raise RecordsError(f"{path}: not a list of benchmark records: {exc}") from None


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.3e}"
    return f"{x:.4g}"


def format_table(records: Sequence[Record], title: str = "") -> str:
    """Render records as a Markdown table: case × metric, ours beside the paper and the target."""
    header = "| case | metric | dynid | paper | target | unit |"
    lines = [f"### {title}", ""] if title else []
    lines += [header, "|---|---|---|---|---|---|"]
    for r in records:
        ok = r.meets_target()
        mark = "" if ok is None else (" ✓" if ok else " ✗")
        lines.append(
            f"| {r.case} | {r.metric} | {_fmt(r.value)}{mark} | {_fmt(r.paper)} | "
            f"{_fmt(r.target)} | {r.unit} |"
        )
    return "\n".join(lines)
