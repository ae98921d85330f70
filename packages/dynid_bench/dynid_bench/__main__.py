"""``python -m dynid_bench <name>|all``: run benchmarks, print tables, write JSON records."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path

import dynid_bench as _pkg
from dynid.records import format_table, write_records
from dynid_bench.results_pages import page_name, update_pages

_NOT_BENCHMARKS = {
    "results_pages",
    "__main__",
    "figaroh_runner",
    "fitting",
    "equation_error",
    "robot_loop",
}

#: Benchmarks ``all`` leaves out: they need the ROS environment and run on their own.
_NOT_IN_ALL = {"loop"}


def available() -> list[str]:
    """Names of the benchmark modules in ``dynid_bench``."""
    return sorted(
        m.name for m in pkgutil.iter_modules(_pkg.__path__) if m.name not in _NOT_BENCHMARKS
    )


def _common() -> argparse.ArgumentParser:
    """Options every benchmark takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out-dir", default="build/bench", help="where <name>.json goes")
    common.add_argument("--device", default="cpu", help="torch device (cpu | cuda)")
    common.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    return common


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark (or ``all``) and return a process exit code.

    ``<name> --help`` lists that benchmark's own options next to the common ones.
    """
    names = available()
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description=__doc__, parents=[_common()], add_help=False
    )
    parser.add_argument(
        "-h", "--help", action="store_true", help="this help; after a name: its options"
    )
    parser.add_argument("name", nargs="?", choices=[*names, "all"], help="benchmark to run")
    parser.add_argument(
        "--pages",
        default="",
        metavar="DIR",
        help="also regenerate the records section of DIR/<name>.md after the run, e.g. "
        "--pages docs/results (default: none; only <out-dir>/<name>.json is written)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.name is None:
        if args.help:
            parser.print_help()
            return 0
        parser.error("name a benchmark: " + ", ".join([*names, "all"]))
    if args.pages and args.quick:
        parser.error("--pages: a --quick run's records do not go into results pages")
    chosen = [n for n in names if n not in _NOT_IN_ALL] if args.name == "all" else [args.name]
    for name in chosen:
        module = importlib.import_module(f"dynid_bench.{name}")
        sub = argparse.ArgumentParser(
            prog=f"scripts/bench {name}", description=module.__doc__, parents=[_common()]
        )
        if hasattr(module, "add_arguments"):
            module.add_arguments(sub)
        own = [*rest, "--help"] if args.help else rest
        sub_args = sub.parse_args(own if args.name != "all" else [])
        for key, value in vars(args).items():
            if key != "help":
                setattr(sub_args, key, value)
        start = time.perf_counter()
        records = module.run(sub_args)
        wall = time.perf_counter() - start
        print(format_table(records, title=f"{name} ({wall:.1f} s wall)"))
        path = write_records(name, records, args.out_dir)
        print(f"wrote {path}")
        if args.pages:
            for _, outcome in update_pages([name], Path(args.out_dir), Path(args.pages)):
                print(f"{args.pages}/{page_name(name)}.md: {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
