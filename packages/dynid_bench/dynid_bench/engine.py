"""The recommended estimators on MuJoCo recordings beside dynid's own simulator, fitted as a
user fits them.

For each scenario, engine and draw (seeds ``0 .. draws-1``) the benchmark simulates a training
recording (seed ``s``) and a held-out one (seed ``s +`` :data:`HELDOUT_SEED`; on MuJoCo of the
same robot, ``robot_seed = s``: payload, perturbation, friction and torque offsets), writes the
problem file the user guide has the user write with the held-out bag as its ``validation``, and
times ``dynid fit --bag ... --problem ... --estimator E -o DIR`` in a subprocess for every
estimator the guide (``docs/guide/estimators.md``) names for that question: the wall time of the
whole fit (interpreter start and imports, reading the bag, filtering, the estimator, held-out
validation, report and outputs). The scores are read back from the output folder
(``posterior.yaml``) and compared with the recording's truth file.

Scenarios (:data:`SCENARIOS`; ``dynid simulate <scenario> --engine <engine>``):

- ``panda_payload`` on ``dynid`` and ``mujoco``: ``config/problems/panda_payload.yaml``;
  ``csvgd`` and ``lm`` (their defaults, as the guide runs them).
- ``ur5_payload`` on ``mujoco``: the UR5 walkthrough's problem file
  (``docs/guide/examples/ur5_payload``) with the URDF beside it; ``csvgd`` and ``lm``.
- ``panda_whole_arm`` on ``mujoco``: ``config/problems/panda_whole_arm.yaml`` reading the
  simulated bag; ``consistent_lsq``, and beside it (case ``<scenario>/<engine>/regressor``,
  :func:`regressor_reference`) the unconstrained regressor of the same draw: ordinary least
  squares of the same torque rows on the same regressor columns (:mod:`dynid.objective.linear`:
  the problem's filtering, stride and trim, every row), with no prior and no consistency
  constraint, computed in the benchmark's process (it is no estimator of ``dynid fit``).

MuJoCo's torque sensors carry a constant offset per joint; the payload problem files do not free
one, so by default (``--offsets free``) the benchmark adds the guide's ``torque_offset`` group
(``docs/guide/recording.md``) to a payload problem on a MuJoCo recording; ``--offsets shipped``
fits the files as shipped. dynid's own recordings have no offsets and keep the shipped file.
MuJoCo holds each torque over its control period, so on a MuJoCo recording the problem file also
sets ``likelihood.effort_delay`` to half of it (:data:`dynid.sim.mujoco.engine.EFFORT_DELAY`),
as the recording guide tells a user fitting such a recording; dynid's own recordings apply the
torque at its stamp and keep the file's 0.

Metrics per case ``<scenario>/<engine>/<estimator>``, over the draws (``fits``: the draws whose
fit succeeded and is scored; a failed fit is reported on stderr): payloads: error of the
posterior mean (``mass_err_pct``, ``com_err_mm``; mean and worst draw); every case: coverage of
the 95 % interval mean ± 1.96 σ (``coverage_pct``: share of draws × scored parameters whose
truth lies inside; payloads score mass and centre of mass, the whole arm every free parameter;
``coverage_min_pct``: the worst single parameter), held-out torque RMSE of the identified model
(``heldout_rmse_nm``; ``nominal_rmse_nm``: the URDF's, for scale), and the wall profile
(``wall_s``; ``read_s``: start until the bag is read; ``estimate_s``: the estimator alone,
``meta.wall_s``; ``report_s``: writing ``report.html``; ``other_s``: the rest: filtering,
validation, the other outputs, exit) and ``cpu_s``, the fit process's CPU time (user + system),
which other programs loading the machine do not inflate as they do the wall time. On 20 s
recordings ``wall_s`` and ``cpu_s`` carry the issue's targets (:data:`WALL_TARGETS`: 5 s for the
fast estimators, 30 s for CSVGD, for a whole ``dynid fit`` on 2 cores). Whole arm: held-out RMSE
relative to the unconstrained regressor of the same draw (``rmse_vs_regressor_pct``, the issue's
target 10 %) and ``consistent``: the share of draws whose identified URDF has every link's
pseudo-inertia positive definite. The regressor's case carries ``fits``, ``heldout_rmse_nm`` and
``wall_s`` (its solve and held-out prediction in the benchmark's process); its standard
parameters are defined only up to the combinations the data fix, so no consistency is scored.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml

from dynid.model.robot import example_robot_data_urdf
from dynid.objective.linear import linear_torque_model
from dynid.problem_file import read_problem_file
from dynid.problem_file.scenarios import load_scenario
from dynid.records import Record
from dynid.resources import repo_root
from dynid.sim import read_truth
from dynid.sim.mujoco import engine as mujoco_engine
from dynid.sim.mujoco.engine import Inertial, read_urdf, urdf_inertials

__all__ = [
    "HELDOUT_SEED",
    "SCENARIOS",
    "FitOutcome",
    "Scenario",
    "add_arguments",
    "pseudo_inertia_min_eig",
    "read_outcome",
    "records",
    "regressor_reference",
    "resolve_sizes",
    "run",
    "summary_table",
]

#: The held-out recording of draw ``s`` is simulated with seed ``s + HELDOUT_SEED``.
HELDOUT_SEED = 10_000
PAYLOAD = ("payload/mass", "payload/com_x", "payload/com_y", "payload/com_z")
#: The guide's torque-sensor offsets (``docs/guide/recording.md``), freed on MuJoCo payloads.
OFFSETS = {
    "group": "joints",
    "joints": "all",
    "fields": {"torque_offset": {"lower": -1.0, "upper": 1.0}},
}
#: The issue's targets for a whole ``dynid fit`` of a 20 s, 1 kHz recording on 2 cores (s).
WALL_TARGETS = {"lm": 5.0, "consistent_lsq": 5.0, "csvgd": 30.0}
TARGET_DURATION = 20.0
#: The case name of the unconstrained regressor beside a whole-arm scenario's estimators.
REGRESSOR = "regressor"
#: Relative singular-value cut-off of the regressor's least squares (columns scaled to unit
#: norm), as the base-parameter analysis of ``consistent_lsq`` (``rank_tol``).
REGRESSOR_RCOND = 1e-8
Kind = Literal["payload", "whole_arm"]


@dataclass(frozen=True)
class Scenario:
    """A benchmarked scenario.

    Attributes:
        kind: ``payload`` or ``whole_arm`` (which metrics and targets apply).
        engines: the engines that simulate it.
        estimators: the estimators fitted: the guide's for the question (a whole arm also gets
            the unconstrained regressor, :func:`regressor_reference`).
        problem: writes the problem file into a folder: ``(folder, held-out bag, free the torque
            offsets, likelihood.effort_delay s) -> path``.
    """

    kind: Kind
    engines: tuple[str, ...]
    estimators: tuple[str, ...]
    problem: Callable[[Path, Path, bool, float], Path]


def _write(
    config: dict[str, Any], folder: Path, heldout: Path, free_offsets: bool, effort_delay: float
) -> Path:
    """``config`` with the held-out bag as its validation, the offsets freed where asked and
    ``likelihood.effort_delay`` (s) where non-zero, as ``folder/problem.yaml``."""
    config = {**config, "validation": {"bags": [str(heldout)]}}
    if free_offsets:
        config["parameters"] = [*config["parameters"], OFFSETS]
    if effort_delay:
        config["likelihood"] = {**config["likelihood"], "effort_delay": effort_delay}
    path = folder / "problem.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _panda_payload(folder: Path, heldout: Path, free_offsets: bool, effort_delay: float) -> Path:
    config = _load(repo_root() / "config" / "problems" / "panda_payload.yaml")
    return _write(config, folder, heldout, free_offsets, effort_delay)


def _ur5_payload(folder: Path, heldout: Path, free_offsets: bool, effort_delay: float) -> Path:
    example = repo_root() / "docs" / "guide" / "examples" / "ur5_payload"
    urdf = example_robot_data_urdf("ur_description/urdf/ur5_robot.urdf")
    shutil.copy(urdf, folder / "ur5_robot.urdf")
    return _write(_load(example / "ur5_payload.yaml"), folder, heldout, free_offsets,
                  effort_delay)  # fmt: skip


def _panda_whole_arm(folder: Path, heldout: Path, free_offsets: bool, effort_delay: float) -> Path:
    config = _load(repo_root() / "config" / "problems" / "panda_whole_arm.yaml")
    config["data"] = {k: v for k, v in config["data"].items() if k != "path"}
    del free_offsets  # the whole-arm file frees the torque offsets itself
    return _write(config, folder, heldout, free_offsets=False, effort_delay=effort_delay)


SCENARIOS: dict[str, Scenario] = {
    "panda_payload": Scenario("payload", ("dynid", "mujoco"), ("csvgd", "lm"), _panda_payload),
    "ur5_payload": Scenario("payload", ("mujoco",), ("csvgd", "lm"), _ur5_payload),
    "panda_whole_arm": Scenario("whole_arm", ("mujoco",), ("consistent_lsq",), _panda_whole_arm),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options."""
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma list of {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--engines",
        default="dynid,mujoco",
        help="comma list of engines (a scenario runs on those it has)",
    )
    parser.add_argument(
        "--estimators", default="", help="comma list overriding every scenario's estimators"
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=None,
        help="noise and excitation draws per scenario (default 20, quick 2)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help=f"recorded seconds (default {TARGET_DURATION:g}, quick 4)",
    )
    parser.add_argument(
        "--offsets",
        choices=("free", "shipped"),
        default="free",
        help="free: add the torque-sensor offsets to a payload problem on a "
        "MuJoCo recording (the guide's advice); shipped: the file as shipped",
    )
    parser.add_argument(
        "--particles",
        type=int,
        default=None,
        help="csvgd particles (default: the problem file's)",
    )
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="csvgd iterations (default: the problem file's)",
    )


@dataclass(frozen=True)
class FitOutcome:
    """One ``dynid fit`` run scored against the truth.

    Attributes:
        scenario, engine, estimator, seed: what was fitted.
        mean, std: posterior mean and standard deviation per free parameter.
        truth: the true value of every free parameter the truth file names.
        heldout_rmse, nominal_rmse: held-out torque RMSE of the identified model and of the
            nominal one (the URDF's; N·m), NaN without held-out data.
        profile: ``wall_s``, ``read_s``, ``estimate_s``, ``report_s``, ``other_s``, ``cpu_s`` (s).
        min_eig: smallest pseudo-inertia eigenvalue over the identified URDF's links with a
            mass, or ``None`` (not a whole-arm fit).
    """

    scenario: str
    engine: str
    estimator: str
    seed: int
    mean: dict[str, float]
    std: dict[str, float]
    truth: dict[str, float]
    heldout_rmse: float
    nominal_rmse: float
    profile: dict[str, float]
    min_eig: float | None = None

    def inside(self, name: str) -> bool:
        """Whether the truth of ``name`` lies within mean ± 1.96 σ."""
        return abs(self.truth[name] - self.mean[name]) <= 1.96 * self.std[name]


def pseudo_inertia_min_eig(inertial: Inertial) -> float:
    """Smallest eigenvalue of a body's 4 × 4 pseudo-inertia ``[[Σ, m c], [m cᵀ, m]]`` (Σ the
    second moment of mass about the link origin); positive iff the body is physically
    consistent."""
    com = np.asarray(inertial.com, dtype=np.float64)
    about_origin = np.asarray(inertial.inertia) + inertial.mass * (
        com @ com * np.eye(3) - np.outer(com, com)
    )
    sigma = 0.5 * np.trace(about_origin) * np.eye(3) - about_origin
    pseudo = np.block(
        [
            [sigma, inertial.mass * com[:, None]],
            [inertial.mass * com[None, :], np.array([[inertial.mass]])],
        ]
    )
    return float(np.linalg.eigvalsh(pseudo)[0])


def read_outcome(
    out_dir: Path,
    truth: Mapping[str, float],
    *,
    key: tuple[str, str, str, int],
    wall_s: float,
    read_s: float,
    whole_arm: bool,
    cpu_s: float = float("nan"),
) -> FitOutcome:
    """Score the output folder of one ``dynid fit``.

    Args:
        out_dir: the ``-o`` folder (``posterior.yaml``, ``report.html``, the identified URDF).
        truth: true values by parameter name; those of free parameters are scored.
        key: ``(scenario, engine, estimator, seed)``.
        wall_s: the subprocess's wall time; read_s: from its start until it printed the bag's
            read summary; cpu_s: its CPU time (user + system).
        whole_arm: also check the identified URDF's pseudo-inertias.

    Raises:
        OSError, KeyError: the folder lacks ``posterior.yaml`` or it lacks a field named here.
    """
    posterior = _load(out_dir / "posterior.yaml")
    params = posterior["parameters"]
    meta = posterior["meta"]
    validation = meta.get("validation", {})
    estimate = float(meta["wall_s"])
    report = out_dir / "report.html"
    written = [p.stat().st_mtime for p in out_dir.iterdir() if p != report]
    report_s = 0.0
    if report.is_file():
        before = [t for t in written if t <= report.stat().st_mtime]
        report_s = report.stat().st_mtime - max(before) if before else 0.0
    profile = {
        "wall_s": wall_s,
        "read_s": read_s,
        "estimate_s": estimate,
        "report_s": report_s,
        "other_s": max(0.0, wall_s - read_s - estimate - report_s),
        "cpu_s": cpu_s,
    }
    min_eig = None
    if whole_arm:
        urdfs = sorted(out_dir.glob("*_identified.urdf"))
        bodies = urdf_inertials(read_urdf(urdfs[0])).values()
        min_eig = min(pseudo_inertia_min_eig(b) for b in bodies if b.mass > 0.0)
    return FitOutcome(
        *key,
        mean={n: float(p["mean"]) for n, p in params.items()},
        std={n: float(p["std"]) for n, p in params.items()},
        truth={n: float(truth[n]) for n in params if n in truth},
        heldout_rmse=float(validation.get("identified", {}).get("rmse_overall", np.nan)),
        nominal_rmse=float(validation.get("nominal", {}).get("rmse_overall", np.nan)),
        profile=profile,
        min_eig=min_eig,
    )


def regressor_reference(
    problem_file: Path, train: Path, heldout: Path, key: tuple[str, str, int]
) -> FitOutcome:
    """The unconstrained regressor of one whole-arm draw, scored as a fit (module notes).

    Ordinary least squares ``min ‖W (y − A x)‖`` (``W`` the problem's ``1 / torque_std``) of the
    problem's linear torque model on ``train``, every scored row, columns scaled to unit norm,
    singular values below :data:`REGRESSOR_RCOND` of the largest cut (the minimum-norm solution
    in the directions no row sees, 0 for a column no row touches); its held-out RMSE is that of
    ``y − A x`` on ``heldout`` with every filtered sample scored, as ``dynid fit`` validates.

    Args:
        problem_file, train, heldout: the draw's problem file and recordings.
        key: ``(scenario, engine, seed)``.
    """
    start = time.perf_counter()
    pf = read_problem_file(problem_file)
    problem = pf.build(pf.load_dataset(str(train)))
    model = linear_torque_model(problem)
    w = 1.0 / model.torque_std[model.joint]
    Aw = model.A * w[:, None]
    norm = np.linalg.norm(Aw, axis=0)
    scale = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0.0)  # unseen columns: 0
    x = scale * np.linalg.lstsq(Aw * scale, model.y * w, rcond=REGRESSOR_RCOND)[0]
    every = problem.with_likelihood(stride=1)
    held = linear_torque_model(every, list(pf.load_dataset(str(heldout))))
    rmse = float(np.sqrt(np.mean(held.residuals(x) ** 2)))
    wall = time.perf_counter() - start
    profile = {k: float("nan") for k in ("read_s", "estimate_s", "report_s", "other_s", "cpu_s")}
    return FitOutcome(key[0], key[1], REGRESSOR, key[2], mean={}, std={}, truth={},
                      heldout_rmse=rmse, nominal_rmse=float("nan"),
                      profile={**profile, "wall_s": wall})  # fmt: skip


def _time_fit(argv: Sequence[str], cwd: Path) -> tuple[float, float, float]:
    """Run ``dynid fit`` as a user does; its wall time, the time until the bag was read and its
    CPU time (user + system of the process, from ``os.wait4``).

    Raises:
        RuntimeError: the fit failed (its last lines of output).
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    read_s = float("nan")
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-m", "dynid.cli", "fit", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if np.isnan(read_s) and line.startswith("read "):
                read_s = time.perf_counter() - start
            lines.append(line)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"dynid fit {' '.join(argv)} failed:\n{''.join(lines[-15:])}")
    return wall, read_s, usage.ru_utime + usage.ru_stime


def _estimator_argv(estimator: str, args: argparse.Namespace, seed: int) -> list[str]:
    argv = ["--estimator", estimator, "--seed", str(seed)]
    if estimator == "csvgd":
        for flag, value in (("--particles", args.particles), ("--iterations", args.iterations)):
            if value is not None:
                argv += [flag, str(value)]
    return argv


def _draw(
    name: str, engine: str, seed: int, args: argparse.Namespace, folder: Path
) -> list[FitOutcome]:
    """Simulate draw ``seed`` of ``name`` on ``engine`` into ``folder`` and fit it with each
    estimator; a fit that fails is reported on stderr and left out (the case's ``fits`` record
    counts those scored)."""
    scenario = SCENARIOS[name]
    simulate = load_scenario(name, "scenario", engine=engine)
    train, heldout = folder / "train", folder / "heldout"
    simulate(seed, train, duration=args.duration)
    # the held-out recording: other motion and noise, the same robot (payload, offsets, friction)
    same_robot = {"robot_seed": seed} if engine == "mujoco" else {}
    simulate(seed + HELDOUT_SEED, heldout, duration=args.duration, **same_robot)
    free = args.offsets == "free" and engine == "mujoco" and scenario.kind == "payload"
    delay = mujoco_engine.EFFORT_DELAY if engine == "mujoco" else 0.0
    problem = scenario.problem(folder, heldout, free, delay)
    truth = read_truth(train)["parameters"]
    outcomes = []
    for estimator in _estimators(name, args):
        out = folder / estimator
        argv = [
            "--bag",
            str(train),
            "--problem",
            str(problem),
            "-o",
            str(out),
            "--no-progress",
            *_estimator_argv(estimator, args, seed),
        ]
        try:
            wall, read_s, cpu_s = _time_fit(argv, folder)
        except RuntimeError as exc:  # one failed fit leaves the draw out of its case only
            print(f"engine: {name}/{engine}/{estimator} seed {seed}: {exc}", file=sys.stderr)
            continue
        outcomes.append(
            read_outcome(
                out,
                truth,
                key=(name, engine, estimator, seed),
                wall_s=wall,
                read_s=read_s,
                cpu_s=cpu_s,
                whole_arm=scenario.kind == "whole_arm",
            )
        )
    if scenario.kind == "whole_arm":
        outcomes.append(regressor_reference(problem, train, heldout, (name, engine, seed)))
    return outcomes


def _estimators(name: str, args: argparse.Namespace) -> tuple[str, ...]:
    chosen = tuple(e for e in args.estimators.split(",") if e)
    return chosen or SCENARIOS[name].estimators


def _coverage(runs: Sequence[FitOutcome], names: Sequence[str]) -> tuple[float, float]:
    """Share (%) of runs × ``names`` whose truth lies inside the 95 % interval, and the lowest
    share of a single parameter."""
    per = [100.0 * np.mean([r.inside(n) for r in runs]) for n in names]
    return float(np.mean(per)), float(min(per))


def _case_metrics(
    runs: Sequence[FitOutcome], outcomes: Sequence[FitOutcome]
) -> list[tuple[str, float, str, float | None, Literal["lower", "higher"]]]:
    """``(metric, value, unit, target, better)`` of one case's ``runs`` (``outcomes``: every
    run, where a whole-arm case finds the regressor of the same draws)."""
    first = runs[0]
    rows: list[tuple[str, float, str, float | None, Literal["lower", "higher"]]] = [
        ("fits", float(len(runs)), "", None, "higher")
    ]
    if first.estimator == REGRESSOR:
        return [
            *rows,
            ("heldout_rmse_nm", float(np.mean([r.heldout_rmse for r in runs])), "N*m", None,
             "lower"),
            ("wall_s", float(np.mean([r.profile["wall_s"] for r in runs])), "s", None, "lower"),
        ]  # fmt: skip
    if SCENARIOS[first.scenario].kind == "payload":
        mass = [100 * abs(r.mean[PAYLOAD[0]] / r.truth[PAYLOAD[0]] - 1) for r in runs]
        com = [
            1e3 * float(np.linalg.norm([r.mean[n] - r.truth[n] for n in PAYLOAD[1:]])) for r in runs
        ]
        rows += [
            ("mass_err_pct", float(np.mean(mass)), "%", 0.5, "lower"),
            ("mass_err_pct_max", max(mass), "%", None, "lower"),
            ("com_err_mm", float(np.mean(com)), "mm", 3.0, "lower"),
            ("com_err_mm_max", max(com), "mm", None, "lower"),
        ]
        scored: Sequence[str] = PAYLOAD
    else:
        scored = sorted(set.intersection(*(set(r.truth) for r in runs)))
        consistent = float(np.mean([(r.min_eig or 0.0) > 0.0 for r in runs]))
        rows.append(("consistent", consistent, "", 1.0, "higher"))
        reference = {
            r.seed: r.heldout_rmse
            for r in outcomes
            if (r.scenario, r.engine, r.estimator) == (first.scenario, first.engine, REGRESSOR)
        }
        if all(r.seed in reference for r in runs):
            gap = float(np.mean([100 * (r.heldout_rmse / reference[r.seed] - 1) for r in runs]))
            rows.append(("rmse_vs_regressor_pct", gap, "%", 10.0, "lower"))
    cover, worst = _coverage(runs, scored)
    rows += [
        ("coverage_pct", cover, "%", 90.0, "higher"),
        ("coverage_min_pct", worst, "%", None, "higher"),
        ("heldout_rmse_nm", float(np.mean([r.heldout_rmse for r in runs])), "N*m", None, "lower"),
        ("nominal_rmse_nm", float(np.mean([r.nominal_rmse for r in runs])), "N*m", None, "lower"),
    ]
    for stage in ("wall_s", "read_s", "estimate_s", "report_s", "other_s", "cpu_s"):
        rows.append((stage, float(np.mean([r.profile[stage] for r in runs])), "s", None, "lower"))
    return rows


def records(
    outcomes: Sequence[FitOutcome],
    notes: Callable[[FitOutcome], str] = lambda o: "",
    wall_targets: Mapping[str, float] | None = None,
) -> list[Record]:
    """The records of every case ``<scenario>/<engine>/<estimator>``, over its draws.

    Args:
        outcomes: the scored fits, in order; a case's records follow its first appearance.
        notes: the notes of a case, from its first outcome.
        wall_targets: ``wall_s`` (and ``cpu_s``) target per estimator (:func:`run` sets the
            issue's on its 20 s recordings only); the accuracy targets are the issue's.
    """
    cases: dict[tuple[str, str, str], list[FitOutcome]] = {}
    for o in outcomes:
        cases.setdefault((o.scenario, o.engine, o.estimator), []).append(o)
    out = []
    for (scenario, engine, estimator), runs in cases.items():
        case, note = f"{scenario}/{engine}/{estimator}", notes(runs[0])
        for metric, value, unit, target, better in _case_metrics(runs, outcomes):
            if metric in ("wall_s", "cpu_s") and wall_targets:
                target = wall_targets.get(estimator)
            out.append(Record(case, metric, value, unit, target, better=better, notes=note))
    return out


#: Columns of :func:`summary_table` per kind: (metric, header).
COLUMNS: dict[Kind, tuple[tuple[str, str], ...]] = {
    "payload": (
        ("mass_err_pct", "mass err %"),
        ("com_err_mm", "COM err mm"),
        ("coverage_pct", "coverage %"),
        ("heldout_rmse_nm", "held-out RMSE N·m"),
        ("wall_s", "wall s"),
    ),
    "whole_arm": (
        ("heldout_rmse_nm", "held-out RMSE N·m"),
        ("rmse_vs_regressor_pct", "vs regressor %"),
        ("consistent", "consistent"),
        ("coverage_pct", "coverage %"),
        ("wall_s", "wall s"),
    ),
}


def summary_table(recs: Sequence[Record], scenario: str) -> str:
    """Markdown table of ``scenario``'s records: one row per engine × estimator, the columns of
    :data:`COLUMNS` (— where a case has no such record)."""
    columns = COLUMNS[SCENARIOS[scenario].kind]
    rows: dict[str, dict[str, float]] = {}
    for r in recs:
        if r.case.startswith(f"{scenario}/"):
            rows.setdefault(r.case.split("/", 1)[1], {})[r.metric] = r.value
    lines = [
        f"| {scenario} | " + " | ".join(h for _, h in columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for row, values in rows.items():
        cells = [f"{values[m]:.4g}" if m in values else "—" for m, _ in columns]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def resolve_sizes(args: argparse.Namespace) -> None:
    """Fill the size options left unset: 20 draws of 20 s, or with ``--quick`` 2 draws of 4 s.

    CSVGD keeps the problem file's particles and iterations unless ``--particles`` or
    ``--iterations`` say otherwise, also under ``--quick``: a smaller CSVGD would score a
    configuration the guide does not give.
    """
    quick = getattr(args, "quick", False)
    if args.draws is None:
        args.draws = 2 if quick else 20
    if args.duration is None:
        args.duration = 4.0 if quick else TARGET_DURATION


def _notes(outcome: FitOutcome, args: argparse.Namespace) -> str:
    """A case's notes: draws, recording, the problem file's offsets and effort delay, CSVGD's
    size if changed."""
    freed = args.offsets == "free" and outcome.engine == "mujoco"
    if outcome.estimator == REGRESSOR:
        problem = "ordinary least squares of the problem file's torque rows, no prior"
    elif SCENARIOS[outcome.scenario].kind == "whole_arm":
        problem = "problem file as shipped (it frees the torque offsets)"
    else:
        problem = "torque offsets freed" if freed else "problem file as shipped"
    sizes = [
        f"{flag} {value}"
        for flag, value in (("--particles", args.particles), ("--iterations", args.iterations))
        if value is not None
    ]
    if outcome.estimator == "csvgd" and sizes:
        problem += ", csvgd " + " ".join(sizes)
    if outcome.engine == "mujoco":
        problem += f", effort_delay {mujoco_engine.EFFORT_DELAY:g} s"
    quick = "; --quick" if getattr(args, "quick", False) else ""
    return (
        f"{args.draws} draws (seeds 0–{args.draws - 1}, held-out seed +{HELDOUT_SEED}), "
        f"{args.duration:g} s at 1 kHz; {problem}{quick}"
    )


def run(args: argparse.Namespace) -> list[Record]:
    """Simulate, fit and score every draw of every chosen scenario and engine; print a summary
    table per scenario."""
    names = [n for n in args.scenarios.split(",") if n]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        raise ValueError(f"--scenarios: unknown {unknown}; choose from {list(SCENARIOS)}")
    engines = [e for e in args.engines.split(",") if e]
    known = {e for scenario in SCENARIOS.values() for e in scenario.engines}
    if set(engines) - known:
        raise ValueError(f"--engines: unknown {sorted(set(engines) - known)}; choose from {known}")
    resolve_sizes(args)
    outcomes: list[FitOutcome] = []
    with tempfile.TemporaryDirectory(prefix="dynid-engine-") as tmp:
        for name in names:
            for engine in (e for e in engines if e in SCENARIOS[name].engines):
                for seed in range(args.draws):
                    folder = Path(tmp) / name / engine / str(seed)
                    folder.mkdir(parents=True)
                    outcomes += _draw(name, engine, seed, args, folder)
    targets = WALL_TARGETS if args.duration == TARGET_DURATION else None
    recs = records(outcomes, lambda o: _notes(o, args), targets)
    for name in names:
        print(summary_table(recs, name), end="\n\n")
    return recs
