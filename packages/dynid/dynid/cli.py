"""``dynid``: simulate recordings, identify parameters from a bag, run the demo, validate a fit.

::

    dynid simulate panda_box -o build/panda_box.mcap     # bag + true parameters beside it
    dynid fit --bag build/panda_box.mcap --problem config/problems/panda_box.yaml -o build/fit
    dynid demo                                           # the embedded default, < 5 min on CPU
    dynid validate --posterior build/fit/posterior.yaml --bag held_out.mcap [--urdf other.urdf]
    dynid excite --problem config/problems/panda_payload.yaml -o build/excite  # plan a motion
    dynid track --bag pick.mcap --problem config/problems/panda_payload_track.yaml -o build/track

``fit`` and ``demo`` write ``posterior.yaml``, ``particles.npz``, the identified URDF,
``history.json`` and ``report.html`` into the output directory; ``track`` runs the live payload
tracker over a recording and writes ``track.csv``, ``events.csv`` and ``report.html``. ``fit``
prints what the bag's reader read, used and skipped per topic (kept in ``posterior.yaml`` and
the report) and refuses a recording that lost more than ``--max-skipped-percent`` (default 5 %)
of one topic. Progress bars show iteration, loss and ETA; Ctrl-C stops the estimator after its
current iteration and the posterior reached so far is still written (a second Ctrl-C aborts at
once). Errors end the program with exit status 2 and one line naming the file, key, topic or
estimator at fault (no stack trace).
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch
import yaml

from dynid.data.errors import DataError
from dynid.demo import (
    DEMO_PROBLEM,
    demo_centroid_error,
    demo_parameter_names,
    demo_weights_summary,
)
from dynid.errors import DynidError
from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.estimators.registry import (
    InvalidSettingError,
    ResolvedEstimator,
    UnknownEstimatorError,
    UnknownSettingError,
    resolve_estimator,
)
from dynid.fit import Fit, FitHooks, FitResult
from dynid.metrics import MetricError
from dynid.model.errors import ModelError
from dynid.posterior import Posterior, PosteriorError
from dynid.problem import Problem, ProblemError
from dynid.problem_file import (
    ProblemFile,
    ProblemFileError,
    check_scenario_settings,
    load_scenario,
    read_problem_file,
    scalar_values,
)
from dynid.problem_file.sources import BagSource
from dynid.report import parameter_rows, write_track_report
from dynid.sim.common import truth_path
from dynid.urdf import UrdfWriteError
from dynid.validation import validate_recording

__all__ = ["DEMO_PROBLEM", "CliError", "main"]

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


class CliError(RuntimeError):
    """A command-line usage problem (missing file, unavailable device, bad ``--set``)."""


_ERRORS: tuple[type[BaseException], ...] = (
    CliError,
    ProblemFileError,
    ProblemError,
    DataError,
    ModelError,
    EstimatorError,
    PosteriorError,
    UrdfWriteError,
    MetricError,
    DynidError,
    OSError,
)


# ------------------------------------------------------------------------------------ helpers
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _check_device(device: str) -> str:
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise CliError(f"--device: {device!r} is not a torch device (cpu, cuda, cuda:1)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CliError(f"--device: {device!r} requested but no CUDA device is available")
    return device


def _overrides(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--set: expected KEY=VALUE, got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _check_output(path: Path) -> Path:
    """``-o``: a directory (made when missing); a file there, or a file as one of its parents,
    is refused before anything is fitted."""
    for existing in (path, *path.parents):
        if not existing.exists():
            continue
        if not existing.is_dir():
            what = "is a file" if existing == path else f"lies under the file {existing}"
            raise CliError(f"-o: {path} {what}; name a directory for the outputs")
        break
    return path


def read_truth(path: Path) -> dict[str, float]:
    """True scalar parameter values from a truth file (``parameters: {name: value}``; see
    :func:`dynid.problem_file.scalar_values` for per-trajectory lists).

    Raises:
        CliError: the file is missing or unreadable, not YAML, or a value is not a finite number
            (or a list of them); one line naming the file and the entry.
    """
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CliError(f"--truth: file {path} {what}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--truth: {path}: cannot read: {_one_line(exc)}") from None
    except yaml.YAMLError as exc:
        raise CliError(f"--truth: {path}: invalid YAML: {_one_line(exc)}") from None
    values = data.get("parameters") if isinstance(data, Mapping) else None
    if not isinstance(values, Mapping):
        raise CliError(f"--truth: {path}: parameters: expected a mapping of name: value")
    for name, value in values.items():
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            array = None
        if array is None or array.size == 0 or not np.isfinite(array).all():
            raise CliError(
                f"--truth: {path}: parameters.{_one_line(name)}: expected a finite number or a "
                f"list of them, got {_one_line(repr(value))}"
            )
    return scalar_values(values)


# ------------------------------------------------------------------------------------ fitting
class _ProgressBar(FitHooks):
    """A tqdm bar on stderr: iteration, loss, the trajectory MMD when evaluated, ETA."""

    def __init__(self, total: int, label: str, *, enabled: bool) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=label, unit="it", disable=not enabled,
                        dynamic_ncols=True, file=sys.stderr)  # fmt: skip

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        self.bar.set_postfix({"loss": f"{info.loss:.4g}"}, refresh=False)
        self.bar.update(info.iteration - self.bar.n)

    def close(self) -> None:
        self.bar.close()


@contextmanager
def _ctrl_c_sets(stop: threading.Event) -> Iterator[None]:
    """Inside, the first Ctrl-C (SIGINT) sets ``stop`` (the fit ends after its current step); a
    second one raises ``KeyboardInterrupt`` at once (the step is cut short).

    An asynchronous ``KeyboardInterrupt`` is not a reliable stop: raised while a finalizer runs
    (``weakref.finalize`` callbacks run whenever an autograd graph is freed), Python prints and
    drops it, and the run goes on; an event is never lost. Outside the main thread (where no
    handler can be installed) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _exit_status(result: FitResult) -> int:
    if result.error is not None:
        return EXIT_ERROR
    return EXIT_INTERRUPTED if result.interrupted else 0


def _print_table(posterior: Posterior, problem: Problem, truth: Mapping[str, float] | None) -> None:
    rows = parameter_rows(
        posterior,
        lower=problem.spec.lower.tolist(),
        upper=problem.spec.upper.tolist(),
        truth=truth,
    )
    width = max(len(r.name) for r in rows)
    header = f"{'parameter':<{width}}  {'truth':>10}  {'mean':>10}  {'± std':>9}  95 % interval"
    print(header)
    for r in rows:
        truth_text = "—" if r.truth is None else f"{r.truth:.4f}"
        inside = "" if r.truth_inside is None else ("  in" if r.truth_inside else "  OUT")
        if not r.identified:
            print(f"{r.name:<{width}}  {truth_text:>10}  not identified: the data do not excite it")
            continue
        print(
            f"{r.name:<{width}}  {truth_text:>10}  {r.mean:>10.4f}  {r.std:>9.4f}  "
            f"[{r.q_low:.4f}, {r.q_high:.4f}] {r.unit}{inside}"
        )


#: The estimation flags that set one estimator setting each.
_SETTING_FLAGS = {
    "num_particles": "--particles",
    "max_iterations": "--iterations",
    "seed": "--seed",
}


def _resolve_estimator(pf: ProblemFile, args: argparse.Namespace) -> ResolvedEstimator:
    """``--estimator`` (default: the problem file's) configured by its defaults file, the problem
    file's settings when it names that estimator, then ``--particles``, ``--iterations``,
    ``--seed`` and ``--set`` (:func:`dynid.estimators.registry.resolve_estimator`)."""
    flags = {key: getattr(args, flag[2:]) for key, flag in _SETTING_FLAGS.items()}
    overrides = {key: value for key, value in flags.items() if value is not None}
    from_set = _overrides(args.set or [])
    overrides.update(from_set)

    def flag(setting: str) -> str:
        return "--set" if setting in from_set else _SETTING_FLAGS[setting]

    try:
        return resolve_estimator(args.estimator, pf.estimator, overrides)
    except UnknownEstimatorError as exc:
        where = "--estimator" if args.estimator else f"{pf.origin}: estimator.name"
        raise CliError(f"{where}: {_one_line(exc)}") from None
    except (UnknownSettingError, InvalidSettingError) as exc:
        setting = exc.settings[0]
        where = flag(setting) if setting in overrides else _settings_origin(pf, args)
        raise CliError(f"{where}: {_one_line(exc)}") from None
    except EstimatorError as exc:  # a value the constructor refused: find whose it was
        culprits = [key for key in overrides if _refused(args, pf, {key: overrides[key]})]
        if culprits:
            where = "/".join(dict.fromkeys(flag(key) for key in culprits))
        elif overrides and not _refused(args, pf, {}):
            where = "/".join(dict.fromkeys(flag(key) for key in overrides))
        else:
            where = _settings_origin(pf, args)
        raise CliError(f"{where}: {_one_line(exc)}") from None


def _refused(args: argparse.Namespace, pf: ProblemFile, overrides: Mapping[str, Any]) -> bool:
    """Whether the estimator refuses its settings with ``overrides`` alone on top."""
    try:
        resolve_estimator(args.estimator, pf.estimator, overrides)
    except EstimatorError:
        return True
    return False


def _settings_origin(pf: ProblemFile, args: argparse.Namespace) -> str:
    """Where an estimator's settings come from when no flag set them: the problem file's
    ``estimator.settings`` when it names the estimator run, else its defaults file."""
    if args.estimator is None or args.estimator == pf.estimator.name:
        return f"{pf.origin}: estimator.settings"
    return f"--estimator {args.estimator} (its defaults file)"


def _fit_and_write(
    pf: ProblemFile,
    problem: Problem,
    args: argparse.Namespace,
    resolved: ResolvedEstimator,
) -> tuple[FitResult, dict[str, Path]]:
    """Run the fit (:class:`dynid.fit.Fit`) with a progress bar, Ctrl-C ending it after the
    current step, then write the output folder and print the held-out scores."""
    command = " ".join(["dynid", *sys.argv[1:]]) if sys.argv else "dynid"
    fit = Fit(pf, problem, resolved, meta={"command": command, "device": args.device},
              mmd_every=args.mmd_every)  # fmt: skip
    bar = _ProgressBar(resolved.estimator.max_iterations, resolved.name,
                       enabled=not args.no_progress)  # fmt: skip
    stop = threading.Event()
    try:
        with _ctrl_c_sets(stop):
            result = fit.run(hooks=bar, stop=stop)
    finally:
        bar.close()
    if result.interrupted:
        print("interrupted: writing the posterior reached so far", file=sys.stderr)
    if result.error is not None:
        print(
            f"stopped after iteration {result.posterior.iteration}: {result.error}; "
            "writing the posterior reached so far",
            file=sys.stderr,
        )
    if "validation_error" in result.posterior.meta:
        print(f"held-out validation skipped: {result.posterior.meta['validation_error']}",
              file=sys.stderr)  # fmt: skip
    files = fit.write(result, Path(args.output))
    if result.validation is not None:
        print(f"held-out validation ({', '.join(result.validation.data)}):\n"
              f"{result.validation.table()}")  # fmt: skip
    return result, files


# ----------------------------------------------------------------------------------- commands
def cmd_fit(args: argparse.Namespace) -> int:
    """``dynid fit``: identify the problem's parameters from a recording."""
    _check_device(args.device)
    _check_output(Path(args.output))
    pf = read_problem_file(args.problem)
    resolved = _resolve_estimator(pf, args)
    if args.bag is not None and not Path(args.bag).exists():
        raise CliError(f"--bag: recording {args.bag} does not exist")
    truth_file = Path(args.truth) if args.truth else None
    if truth_file is None and args.bag is not None and truth_path(Path(args.bag)).is_file():
        truth_file = truth_path(Path(args.bag))
    values = read_truth(truth_file) if truth_file is not None else {}  # checked before reading
    limit = _max_skipped(pf, args.max_skipped_percent)
    try:
        dataset = pf.load_dataset(args.bag, max_skipped_percent=limit)
    finally:  # what was read, used and skipped, also when the recording is refused
        for summary in pf.read_summaries:
            print(summary, flush=True)
    truth = pf.truth  # set after loading: a scenario source brings its own truth
    truth = {k: v for k, v in values.items() if k in pf.spec.names} or truth
    problem = pf.build(dataset, device=args.device, truth=truth)
    result, files = _fit_and_write(pf, problem, args, resolved)
    _print_table(result.posterior, problem, truth)
    _print_identifiability(result.posterior)
    for label, path in files.items():
        print(f"wrote {label}: {path}")
    return _exit_status(result)


def _max_skipped(pf: ProblemFile, value: float | None) -> float | None:
    """``--max-skipped-percent``: a percentage, for a problem whose data come from a bag."""
    if value is None:
        return None
    if not 0.0 <= value <= 100.0:
        raise CliError(f"--max-skipped-percent: expected a percentage in [0, 100], got {value:g}")
    source = pf.config.data.source
    if not isinstance(source, BagSource):
        raise CliError(
            f"--max-skipped-percent: {pf.origin}: data.source is {source.kind!r}; only a bag's "
            "reader skips messages"
        )
    return value


def _print_identifiability(posterior: Posterior) -> None:
    """The base parameters an estimator reports (``meta["identifiability"]``), if any."""
    ident = posterior.meta.get("identifiability")
    if not isinstance(ident, Mapping) or "base_parameters" not in ident:
        return
    rows = ident["base_parameters"]
    print(
        f"base parameters: {ident['rank']} combinations of {ident['num_standard']} standard "
        f"parameters; {sum(not r['identified'] for r in rows)} stay at the prior"
    )
    for r in rows:
        mark = "" if r["identified"] else "  (at the prior)"
        print(f"  {r['value']:+.5g} ± {r['std']:.2g}  = {r['expression']}{mark}")
    for key, text in (
        ("unexcited", "no effect on the data (at the prior)"),
        ("combined", "known only in combination"),
    ):
        if ident.get(key):
            print(f"{text}: {', '.join(ident[key])}")


def cmd_validate(args: argparse.Namespace) -> int:
    """``dynid validate``: torque RMSE of a fit on a recording, beside the nominal URDF."""
    for flag, path in (("--posterior", args.posterior), ("--bag", args.bag)):
        if not Path(path).exists():
            raise CliError(f"{flag}: {path} does not exist")
    report = validate_recording(args.posterior, args.bag, urdfs=args.urdf or (),
                                problem=args.problem)  # fmt: skip
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        print(report.table())
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """``dynid simulate``: write a simulated recording and its true parameters beside it."""
    simulate = load_scenario(args.scenario, "scenario", engine=args.engine)
    settings = check_scenario_settings(args.scenario, simulate, _overrides(args.set or []), "--set")
    settings["seed"] = args.seed
    out = Path(args.output)
    if out.exists():
        raise CliError(f"-o: {out} exists already; recordings are never overwritten")
    try:
        dataset, _ = simulate(out_path=out, **settings)
    except (TypeError, ValueError) as exc:
        raise CliError(f"scenario {args.scenario!r}: {_one_line(exc)}") from None
    print(f"wrote {out} ({len(dataset)} trajectories) and {truth_path(out)}")
    return 0


def _start_values(text: str | None) -> list[float] | dict[str, float] | None:
    """``--start``: comma-separated values for every joint, or ``joint=value`` pairs."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if all("=" in p for p in parts):
            return {k.strip(): float(v) for k, v in (p.split("=", 1) for p in parts)}
        return [float(p) for p in parts]
    except ValueError:
        raise CliError(
            f"--start: expected comma-separated numbers or joint=value pairs, got {text!r}"
        ) from None


def cmd_excite(args: argparse.Namespace) -> int:
    """``dynid excite``: plan an excitation motion for a problem's free parameters, check it at
    every sample and write it with its predicted σ."""
    from dynid.excite import DesignSettings, design_excitation
    from dynid.excite.output import predicted_rows, prediction_basis, write_outputs

    pf = read_problem_file(args.problem)
    priors = []
    for bag in args.prior or []:
        priors.append(pf.build(pf.load_dataset(bag, holdout=False), device="cpu"))
    settings = DesignSettings(
        duration=args.duration,
        harmonics=args.harmonics,
        base_frequency=args.base_frequency,
        rate=args.rate,
        start=_start_values(args.start),
        criterion=args.criterion,
        seed=args.seed,
        starts=args.starts,
        iterations=args.iterations,
        speed_scale=args.speed_scale,
        priors=tuple(priors),
    )
    exc = design_excitation(pf, settings, progress=print)
    paths = write_outputs(exc, args.output)
    c = exc.criteria
    print(
        f"log det F {c.log_det:.4g}, cond(F) {c.condition_number:.4g}, λ_min "
        f"{c.min_eigenvalue:.4g}; closest approach {exc.distance.min():.3g} m; amplitude scale "
        f"{exc.scale:.3g}; planned in {exc.planning_s:.1f} s"
    )
    print(f"predicted σ ({prediction_basis(exc)}):")
    for row in predicted_rows(exc):
        shown = (
            f"  ({row['sigma_display']:.3g} {row['display_unit']})" if "display_unit" in row else ""
        )
        print(f"  {row['name']:<48} {row['sigma']:.4g} {row['unit']}{shown}")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_track(args: argparse.Namespace) -> int:
    """``dynid track``: the live payload tracker over a recording (``dynid.online``)."""
    from dynid.online import TrackerSettings
    from dynid.online.recording import track_trajectory, write_events_csv, write_track_csv

    for flag, path in (("--problem", args.problem), ("--bag", args.bag)):
        if not Path(path).exists():
            raise CliError(f"{flag}: {path} does not exist")
    overrides = _overrides(args.set or [])
    known = set(TrackerSettings.__dataclass_fields__)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise CliError(f"--set: unknown tracker setting(s) {unknown}; known: {sorted(known)}")
    try:
        settings = TrackerSettings(**overrides)
    except TypeError as exc:
        raise CliError(f"--set: {_one_line(exc)}") from None
    pf = read_problem_file(args.problem)
    dataset = pf.load_dataset(args.bag, holdout=False)
    if len(dataset) != 1:
        raise CliError(
            f"--bag: {args.bag} reads as {len(dataset)} recordings; the tracker takes one stream"
        )
    run = track_trajectory(pf, dataset.trajectories[0], rate_hz=args.rate, settings=settings,
                           use_velocity=args.velocity)  # fmt: skip
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    truth_file = truth_path(Path(args.bag))
    truth = read_truth(truth_file) if truth_file.is_file() else None
    files = {
        "track": write_track_csv(out / "track.csv", run),
        "events": write_events_csv(out / "events.csv", run),
        "report": write_track_report(
            out / "report.html", run, truth=truth, title=f"dynid track: {Path(args.bag).name}"
        ),
    }
    final = run.updates[-1].estimate
    for name, value, std in zip(run.names, final.values, final.std, strict=True):
        mark = "  (unexcited: at the prior)" if name in final.unexcited else ""
        print(f"{name:<28} {value:+.5g} ± {std:.2g}{mark}")
    for e in run.events:
        after = "—" if e.after is None else f"{e.after.mass:.4g} kg"
        print(f"change at {e.change_time:.3f} s (detected {e.detect_time:.3f} s, {e.joint}): "
              f"mass {e.before.mass:.4g} kg -> {after}")  # fmt: skip
    print(
        f"{len(run.updates)} updates over {run.duration_s:.1f} s in {run.wall_s:.2f} s wall, "
        f"{run.cpu_s:.2f} s CPU ({run.duration_s / max(run.cpu_s, 1e-9):.1f}x real time on one "
        "core)"
    )
    for label, path in files.items():
        print(f"wrote {label}: {path}")
    return 0


def _print_weights(posterior: Posterior, truth: Mapping[str, float] | None) -> None:
    summary = demo_weights_summary(posterior, truth)
    print(
        f"weight positions ({len(summary.particles)} particles, each particle's two weights "
        "ordered like its most likely particle's; truth matched up to swapping):"
    )
    print(f"{'coordinate':<14}  {'truth':>8}  {'mean':>8}  {'± std':>8}  truth in mean ± 2σ")
    for k, name in enumerate(summary.names):
        true = "—" if summary.truth is None else f"{summary.truth[k]:.4f}"
        inside = "" if summary.inside is None else ("yes" if summary.inside[k] else "NO")
        print(
            f"{name:<14}  {true:>8}  {summary.mean[k]:>8.4f}  {summary.std[k]:>8.4f}  m  {inside}"
        )
    clamped = posterior.meta.get("clamped_particles", {})
    for name in summary.names:
        if clamped.get(name):
            print(
                f"note: {clamped[name]} of {len(summary.particles)} particles lie beyond a limit "
                f"of {name} and are reported at the limit (no posterior spread there)"
            )
    if summary.truth is None or summary.inside is None:
        return
    verdict = "yes" if bool(summary.inside.all()) else "no"
    print(f"truth inside the posterior (every coordinate within mean ± 2σ): {verdict}")
    print(f"largest weight-position error of the mean (up to swapping): {summary.error:.4f} m")
    centroid = demo_centroid_error(posterior, truth)
    print(f"error of the weights' centroid (the box's COM shift): {centroid:.4f} m")


def cmd_demo(args: argparse.Namespace) -> int:
    """``dynid demo``: simulate the Panda shaking the weighted box and identify the weights."""
    _check_device(args.device)
    _check_output(Path(args.output))
    config = json.loads(json.dumps(DEMO_PROBLEM))
    settings: dict[str, Any] = {**config["data"]["settings"], "seed": args.seed}
    if args.hold is not None:
        settings["hold"] = args.hold
    config["data"]["settings"] = settings
    pf = read_problem_file(config)
    resolved = _resolve_estimator(pf, args)
    print(f"simulating {config['data']['scenario']} (seed {args.seed}) ...", file=sys.stderr)
    simulate = load_scenario(config["data"]["scenario"], "demo")
    dataset, truth = simulate(**settings)
    demo_truth = {
        k: float(v) for k, v in truth["parameters"].items() if k in demo_parameter_names()
    }
    problem = pf.build(pf.preprocess(dataset), device=args.device, truth=demo_truth)
    result, files = _fit_and_write(pf, problem, args, resolved)
    _print_weights(result.posterior, problem.truth or None)
    for label, path in files.items():
        print(f"wrote {label}: {path}")
    return _exit_status(result)


# ------------------------------------------------------------------------------------- parser
def _add_estimation_flags(p: argparse.ArgumentParser, *, output: str) -> None:
    p.add_argument(
        "--estimator",
        help="estimator name (default: the problem file's); its settings start from its own "
        "defaults, plus the problem file's when it names this estimator",
    )
    p.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    p.add_argument("-o", "--output", default=output, help=f"output directory (default {output})")
    p.add_argument("--particles", type=int, help="number of particles (num_particles)")
    p.add_argument("--iterations", type=int, help="iteration budget (max_iterations)")
    p.add_argument("--seed", type=int, help="random seed of the estimator")
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="further estimator setting (YAML value), e.g. --set learning_rate=0.02",
    )
    p.add_argument(
        "--mmd-every",
        type=int,
        default=0,
        help="evaluate the trajectory MMD every N iterations (default: only at the end; shooting "
        "problems only)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The ``dynid`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="dynid", description=__doc__.split("\n")[0].replace("``", "")
    )
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", help="identify parameters from a recording")
    fit.add_argument("--problem", required=True, help="problem YAML file")
    fit.add_argument("--bag", help="recording (ROS 2 bag dir, .mcap or .db3)")
    fit.add_argument("--truth", help="true values (YAML 'parameters: {name: value}')")
    fit.add_argument(
        "--max-skipped-percent",
        type=float,
        metavar="PERCENT",
        help="refuse the recording when its reader skipped more than this share of one "
        "topic's messages (default: the problem file's data.max_skipped_percent, 5)",
    )
    _add_estimation_flags(fit, output="build/fit")
    fit.set_defaults(func=cmd_fit)

    simulate = sub.add_parser("simulate", help="write a simulated recording")
    simulate.add_argument(
        "scenario", help="a registered scenario (group dynid.scenarios), e.g. panda_box, hovercraft"
    )
    simulate.add_argument("-o", "--output", required=True, help="bag to write (.mcap)")
    simulate.add_argument("--seed", type=int, default=0, help="seed of the scenario (default 0)")
    simulate.add_argument(
        "--engine",
        default="dynid",
        help="physics engine: dynid (its own model, default) or mujoco (the robot's URDF "
        "compiled by MuJoCo; panda_payload, panda_whole_arm, ur5_payload)",
    )
    simulate.add_argument("--set", action="append", metavar="KEY=VALUE",
                          help="scenario setting (YAML value)")  # fmt: skip
    simulate.set_defaults(func=cmd_simulate)

    demo = sub.add_parser(
        "demo",
        help="Panda + weighted box: simulate and identify the weights",
        description="Simulate the Panda shaking a box with two 500 g weights (dynid.sim "
        "panda_box), identify the weight positions with CSVGD and write the report. Defaults: "
        "12 particles, 120 iterations, 50 shooting windows over 5 s at 100 Hz; the arm follows "
        "its recorded motion and only the box's universal joint is simulated "
        "(dynid.demo.DEMO_PROBLEM).",
    )
    _add_estimation_flags(demo, output="build/demo")
    demo.add_argument("--hold", type=float, help="s held before, between and after the moves")
    demo.set_defaults(func=cmd_demo)

    excite = sub.add_parser(
        "excite",
        help="plan an excitation motion for a problem's free parameters",
        description="Plan a rest-to-rest Fourier joint trajectory that maximises the information "
        "of the problem's free parameters (base parameters for a whole arm) under its torque "
        "noise, within position, velocity, acceleration, jerk and torque limits, the workspace "
        "and without self-collision; write trajectory.csv, trajectory.yaml, excitation.yaml and "
        "report.html with the predicted σ of every parameter.",
    )
    excite.add_argument("--problem", required=True, help="problem YAML file")
    excite.add_argument("-o", "--output", required=True, help="output directory")
    excite.add_argument("--duration", type=float, default=20.0, help="s (default 20)")
    excite.add_argument("--harmonics", type=int, default=5, help="per joint (default 5)")
    excite.add_argument("--base-frequency", type=float,
                        help="Hz of the first harmonic (default 1 / duration)")  # fmt: skip
    excite.add_argument("--rate", type=float, default=1000.0,
                        help="Hz of trajectory.csv and the recording (default 1000)")  # fmt: skip
    excite.add_argument("--start", help="start and end configuration: one value per joint "
                        "(comma-separated, rad) or joint=value pairs; default: the middle of "
                        "each joint's range")  # fmt: skip
    excite.add_argument("--prior", action="append", metavar="BAG",
                        help="a recording already made whose information is added "
                        "(repeatable)")  # fmt: skip
    excite.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    excite.add_argument("--criterion", default="d",
                        help="d: log det (default), cond: condition number, e: smallest "
                        "eigenvalue of the information")  # fmt: skip
    excite.add_argument("--speed-scale", type=float, default=1.0,
                        help="scale velocity, acceleration and jerk limits (0, 1]; run at "
                        "reduced speed first")  # fmt: skip
    excite.add_argument("--starts", type=int, default=3, help="random starts (default 3)")
    excite.add_argument("--iterations", type=int, default=90,
                        help="L-BFGS-B iterations per start (default 90)")  # fmt: skip
    excite.set_defaults(func=cmd_excite)

    track = sub.add_parser(
        "track",
        help="live payload tracking over a recording: estimate, σ and changes over time",
    )
    track.add_argument("--bag", required=True, help="recording (ROS 2 bag dir, .mcap or .db3)")
    track.add_argument("--problem", required=True, help="problem file with one payload")
    track.add_argument("-o", "--output", default="build/track",
                       help="output directory (default build/track)")  # fmt: skip
    track.add_argument("--rate", type=float, default=50.0,
                       help="published updates per second of recording (default 50)")  # fmt: skip
    track.add_argument("--velocity", action="store_true",
                       help="use the recorded joint velocities instead of differentiating the "
                       "positions")  # fmt: skip
    track.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="tracker setting (YAML value), e.g. --set change_rate=0.05",
    )
    track.set_defaults(func=cmd_track)

    check = sub.add_parser(
        "validate", help="torque RMSE of a fit on a recording, beside the nominal URDF"
    )
    check.add_argument("--posterior", required=True, help="posterior.yaml written by dynid fit")
    check.add_argument("--bag", required=True, help="recording to score on (ROS 2 bag)")
    check.add_argument("--urdf", action="append", help="another URDF to score (repeatable)")
    check.add_argument("--problem", help="problem file, if the posterior does not record it")
    check.add_argument("--json", action="store_true", help="print the scores as JSON")
    check.set_defaults(func=cmd_validate)
    return parser


def _sigterm_as_ctrl_c(_signum: int, frame: FrameType | None) -> None:
    """SIGTERM (``timeout``, a container stop) does what Ctrl-C would do at that moment: a fit
    ends after its iteration and writes its posterior, history and report."""
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        raise KeyboardInterrupt
    handler(signal.SIGINT, frame)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dynid`` console script; returns the exit status.

    Run as the program (``argv`` ``None``: the command line's own arguments), the objects the
    command built are frozen out of the garbage collector when it returns (:func:`gc.freeze`),
    so that the interpreter's exit does not traverse them all once more; the process ends next.
    """
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo" and args.seed is None:
        args.seed = 0
    signal.signal(signal.SIGTERM, _sigterm_as_ctrl_c)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print(f"dynid {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except _ERRORS as exc:
        print(f"dynid {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if program:
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
