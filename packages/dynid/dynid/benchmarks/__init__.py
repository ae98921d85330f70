"""Benchmarks: each module ``dynid.benchmarks.<name>`` reproduces one paper experiment.

A benchmark module defines ``run(args: argparse.Namespace) -> list[Record]`` and may define
``add_arguments(parser)``. ``scripts/bench <name>`` (or ``dynid bench <name>``) runs it, prints
its table, writes ``build/bench/<name>.json`` and regenerates the records section of
``docs/results/<name>.md`` (:mod:`dynid.benchmarks.results_pages`).
"""

from dynid.records import Record, format_table, write_records

__all__ = ["Record", "format_table", "write_records"]
