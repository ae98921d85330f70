"""``python -m dynid_ros.reliability [--quick] [--duration-s S] [--trials N] [--seed N]``.

Three parts, the table printed and the records written to ``<out-dir>/reliability.json``
(``dynid.records``):

1. endurance: the recorder (``python -m dynid_ros.recorder``, its own process, automatic
   segments) fed ``sensor_msgs/JointState`` at 1 kHz and a Vicon ``TransformStamped`` at 200 Hz
   from this process over DDS for ``--duration-s`` (600 s by default): ``samples_lost`` (published
   while moving, not in any segment bag), ``rss_growth_mb`` (the recorder's resident memory from
   the end of the warm-up to the end of the feed);
2. kill -9: ``--trials`` recorders (20 by default) killed with SIGKILL at seeded random moments,
   each followed by a recorder started on the same folder that recovers the spool:
   ``max_lost_s`` (the longest span of published data missing on disk), ``segments_unreadable``;
3. the damaged-bag corpus through ``dynid fit``: ``fitted_silently``.

Nodes talk on a private ROS domain, localhost only. ``--keep DIR`` keeps the bags and logs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from dynid.records import Record, format_table, write_records
from dynid_ros.reliability import corpus, runs
from dynid_ros.reliability.feed import Feed, Motion, environment


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dynid_ros.reliability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out-dir", default="build/bench", help="where reliability.json goes")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 20 s feed, 3 kill trials, short motions"
    )
    parser.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="s of feed of the endurance run (default 600, --quick 20)",
    )
    parser.add_argument(
        "--trials", type=int, default=None, help="kill -9 trials (default 20, --quick 3)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments and corpus")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep bags and logs in this folder (default: a temporary one)",
    )
    return parser


def run(args: argparse.Namespace, work: Path) -> list[Record]:
    """The three parts in ``work``; their records."""
    if args.quick:
        motion, max_buffer_s, window = Motion(rest_s=3.0, move_s=5.0), 2.0, (3.5, 7.5)
    else:
        motion, max_buffer_s, window = Motion(), 10.0, (4.0, 20.0)
    duration = args.duration_s or (20.0 if args.quick else 600.0)
    trials = args.trials if args.trials is not None else (3 if args.quick else 20)
    environment()
    feed = Feed(motion)
    try:
        warmup = min(60.0, duration / 3)
        records = runs.endurance(feed, work, duration, max_buffer_s, warmup)
        records += runs.kill_trials(feed, work, trials, args.seed, window, max_buffer_s)
    finally:
        feed.close()
    corpus_records, _ = corpus.run(work / "corpus", args.seed)
    return records + corpus_records


def targets_table(records: list[Record]) -> str:
    """The records that have a target as a Markdown table: metric, value, target, met."""
    lines = ["| part | metric | value | target | met |", "|---|---|---|---|---|"]
    for r in records:
        if r.target is not None:
            cmp = "≤" if r.better == "lower" else "≥"
            met = "yes" if r.meets_target() else "no"
            unit = f" {r.unit}" if r.unit else ""
            lines.append(
                f"| {r.case.split('/')[0]} | {r.metric} | {r.value:.4g}{unit} | "
                f"{cmp} {r.target:g}{unit} | {met} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the records; returns the exit status."""
    args = _parser().parse_args(argv)
    start = time.perf_counter()
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        records = run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="dynid_reliability_") as tmp:
            records = run(args, Path(tmp))
    print(format_table(records, title=f"reliability ({time.perf_counter() - start:.0f} s wall)"))
    print(f"\n{targets_table(records)}\n")
    print(f"wrote {write_records('reliability', records, args.out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
