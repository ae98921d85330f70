"""dynid's paper benchmarks: each module ``dynid_bench.<name>`` reproduces one paper experiment.

A benchmark module defines ``run(args: argparse.Namespace) -> list[Record]`` (records of
:mod:`dynid.records`) and may define ``add_arguments(parser)``. ``scripts/bench <name>``
(``python -m dynid_bench <name>``) runs it, prints its table and writes
``build/bench/<name>.json``; with ``--pages docs/results`` it also regenerates the records section
of the benchmark's results page (:mod:`dynid_bench.results_pages`).
"""
