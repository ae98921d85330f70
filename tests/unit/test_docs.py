"""The documentation cannot drift from the code: every ``dynid`` and ``scripts/`` command in
README.md and docs/ parses with the parser that would run it (its flags exist, its required
arguments are given, the problem files and estimators it names exist), and the problem-file
reference in docs/guide/problem-file.md lists exactly the keys the parser accepts."""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata
import inspect
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from dynid.cli import build_parser
from dynid.data.pipeline import FramePoints, PassiveJoints
from dynid.data.topics import CommandTopic, JointStateTopic, MocapTopic, TfLookup
from dynid.estimators.registry import available_estimators, estimator_class
from dynid.model.params import Parameter
from dynid.problem import LikelihoodSettings
from dynid.problem_file import parse
from dynid.problem_file.scenarios import available_scenarios, engines
from dynid_bench.__main__ import _common, available

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Words that mark a command as a pattern, not one to run: placeholders and elisions.
PLACEHOLDER = re.compile(r"<[^>]*>|\[|\.\.\.|…")
#: Environment assignments before a command (``OMP_NUM_THREADS=1 scripts/bench lm``).
ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _commands(text: str) -> Iterator[str]:
    """Command lines starting with ``dynid`` or ``scripts/<name>`` in fenced code blocks
    (continuation lines joined, ``$`` prompts and environment assignments dropped); inline code
    in prose names commands without their arguments and is left out."""
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = ENV_PREFIX.sub("", line.strip().removeprefix("$ "))
            if re.match(r"(dynid|scripts/\w+)(\s|$)", line):
                yield line


def documented_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every runnable command of the docs (patterns left out)."""
    found = []
    for path in DOCS:
        for command in _commands(path.read_text(encoding="utf-8")):
            if not PLACEHOLDER.search(command):
                found.append((str(path.relative_to(ROOT)), command))
    return found


class ParseError(Exception):
    """argparse's complaint, instead of its exit."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ParseError(message)


def _raising(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` and its subparsers made to raise instead of exiting."""
    parser.__class__ = _Parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _raising(sub)
    return parser


def _dispatched() -> dict[str, str]:
    """Benchmarks ``scripts/bench`` hands to a module of their own (``ros``: ``dynid_ros``)."""
    script = (ROOT / "scripts" / "bench").read_text(encoding="utf-8")
    return dict(re.findall(r"^\s+(\w+)\) shift; run_ros \1 ([\w.]+) ", script, re.MULTILINE))


def _own_parser(module_name: str) -> argparse.ArgumentParser:
    """The argument parser of a benchmark that runs as ``python -m module_name``."""
    module = importlib.import_module(module_name)
    if hasattr(module, "add_arguments"):
        parser = _Parser(parents=[_common()])
        module.add_arguments(parser)
        return parser
    main = importlib.import_module(f"{module_name}.__main__")
    build = getattr(main, "build_parser", None) or getattr(main, "_parser", None)
    if build is None:
        raise ParseError(f"python -m {module_name}: no parser to check its options against")
    return _raising(build())


def _parse_bench(argv: list[str]) -> None:
    """As ``scripts/bench`` would: the name, then that benchmark's options."""
    if not argv or argv[0].startswith("-"):
        raise ParseError("no benchmark named")
    name, rest = argv[0], argv[1:]
    dispatched = _dispatched()
    if name in dispatched:
        parser = _own_parser(dispatched[name])
        parser.add_argument("--pages")  # taken by scripts/bench itself
    elif name in (*available(), "all"):
        parser = _Parser(parents=[_common()])
        parser.add_argument("--pages")
        module = importlib.import_module(f"dynid_bench.{name}") if name != "all" else None
        if module is not None and hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    else:
        raise ParseError(f"no benchmark {name!r}; available: {available()}")
    parser.parse_args(rest)


def check_command(command: str) -> None:
    """Raise :class:`ParseError` when ``command`` would not get past its argument parsing."""
    argv = shlex.split(command, comments=True)
    program, args = argv[0], argv[1:]
    if program == "scripts/bench":
        _parse_bench(args)
        return
    if program == "scripts/demo":
        args = ["demo", *args]
    elif program in ("scripts/test", "scripts/setup"):
        if not os.access(ROOT / program, os.X_OK):
            raise ParseError(f"{program} is not an executable script")
        return
    elif program != "dynid":
        raise ParseError(f"unknown program {program!r}")
    parsed = _raising(build_parser()).parse_args(args)
    estimator = getattr(parsed, "estimator", None)
    if estimator is not None and estimator not in available_estimators():
        raise ParseError(f"--estimator {estimator}: not one of {available_estimators()}")
    scenario = getattr(parsed, "scenario", None)
    engine = getattr(parsed, "engine", "dynid")
    if engine not in engines():
        raise ParseError(f"--engine {engine}: not one of {engines()}")
    if scenario is not None and scenario not in available_scenarios(engine):
        raise ParseError(f"no scenario {scenario!r}; available: {available_scenarios(engine)}")
    problem = getattr(parsed, "problem", None)
    if problem is not None and problem.startswith("config/") and not (ROOT / problem).is_file():
        raise ParseError(f"--problem {problem}: no such file")


def test_scripts_bench_hands_the_ros_benchmarks_to_their_modules() -> None:
    assert _dispatched()["ros"] == "dynid_ros.benchmark"
    assert _dispatched()["reliability"] == "dynid_ros.reliability"
    assert set(_dispatched()).isdisjoint(available())


def test_the_readme_is_a_short_guide_and_results_live_in_docs() -> None:
    """At most 250 lines; every row of its results table links to a results page."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    table = text.split("\n## Results", 1)[1].split("\n## ", 1)[0]
    rows = [
        r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| experiment")
    ]
    assert len(rows) >= 10
    for row in rows:
        assert re.search(r"\]\(docs/results/\w+\.md(#[\w-]+)?\) \|$", row), row


def test_the_docs_hold_commands_to_check() -> None:
    files = {path for path, _ in documented_commands()}
    assert "README.md" in files
    assert any(path.startswith("docs/guide/") for path in files)
    assert any(path.startswith("docs/results/") for path in files)


@pytest.mark.parametrize(("path", "command"), documented_commands())
def test_documented_command_parses(path: str, command: str) -> None:
    try:
        check_command(command)
    except ParseError as exc:
        pytest.fail(f"{path}: '{command}': {exc}")


@pytest.mark.parametrize(
    "command",
    [
        "dynid fit --bag x.mcap",  # --problem is required
        "dynid fit --problem config/problems/panda_payload.yaml --no-such-flag 3",  # no such flag
        "dynid fit --problem config/problems/no_such.yaml",
        "dynid fit --problem config/problems/panda_payload.yaml --estimator levenberg",
        "dynid simulate panda_box",  # -o is required
        "dynid simulate panda_crate -o build/x.mcap",  # no such scenario
        "dynid simulate panda_box --engine mujoco -o build/x.mcap",  # no MuJoCo version
        "dynid simulate panda_payload --engine bullet -o build/x.mcap",  # no such engine
        "scripts/bench model --no-such-option 1",
        "scripts/bench nonexistent",
        "dynid bench model",  # the benchmarks run from scripts/bench only
        "scripts/demo --no-such-flag 3",
    ],
)
def test_a_wrong_command_is_caught(command: str) -> None:
    with pytest.raises(ParseError):
        check_command(command)


# ------------------------------------------------------------------- problem-file reference
def _names(cls: type) -> set[str]:
    return set(inspect.signature(cls).parameters)


def _dynid_plugins(group: str) -> list[object]:
    """The objects dynid's own distribution registers in entry-point ``group``."""
    entries = importlib.metadata.distribution("dynid").entry_points.select(group=group)
    return [entry.load() for entry in entries]


def parser_keys() -> set[str]:
    """Every key path the problem-file parser accepts (``[]``: an entry of a list); keys whose
    children are free names (joint names, estimator settings) stop at the parent."""
    keys = {*parse._TOP_KEYS}
    keys |= {f"robot.{k}" for k in parse._ROBOT_KEYS}
    attachment = {"type"}.union(*(list(inspect.signature(f).parameters)[1:]
                                  for f in _dynid_plugins("dynid.attachments")))  # fmt: skip
    keys |= {f"attachments[].{k}" for k in attachment}
    group = set().union(*parse._GROUP_KEYS.values())
    keys |= {f"parameters[].{k}" for k in _names(Parameter) | group}
    sources = _dynid_plugins("dynid.data_sources")
    data = {"source"}.union(*(cls.keys for cls in sources), parse._PREPROCESS_KEYS)
    keys |= {f"data.{k}" for k in data}
    keys |= {f"data.joint_states.{k}" for k in _names(JointStateTopic)}
    keys |= {f"data.mocap[].{k}" for k in _names(MocapTopic)}
    keys |= {f"data.tf[].{k}" for k in _names(TfLookup)}
    keys |= {f"data.commands[].{k}" for k in _names(CommandTopic)}
    keys |= {f"data.passive_joints.{k}" for k in parse._PASSIVE_KEYS | _names(PassiveJoints)}
    keys |= {f"control.{k}" for k in set().union(*parse._CONTROL_KEYS.values())}
    keys |= {f"observe.{k}" for k in parse._OBSERVE_KEYS}
    keys |= {f"observe.frame_points[].{k}" for k in parse._FRAME_POINT_KEYS | _names(FramePoints)}
    keys |= {f"likelihood.{f.name}" for f in fields(LikelihoodSettings)}
    keys |= {f"simulation.{k}" for k in parse._SIMULATION_KEYS}
    keys |= {f"simulation.soft_block.{k}" for k in parse._SOFT_BLOCK_TYPES}
    keys |= {f"validation.{k}" for k in parse._VALIDATION_KEYS}
    keys |= {f"estimator.{k}" for k in parse._ESTIMATOR_KEYS}
    keys |= {f"excitation.{k}" for k in parse._EXCITATION_KEYS}
    keys |= {f"excitation.sensor_noise.{k}" for k in parse._SENSOR_NOISE_KEYS}
    return keys


def reference_keys() -> set[str]:
    """The keys in the first column of the reference's tables."""
    text = (ROOT / "docs" / "guide" / "problem-file.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z_.\[\]]+)` \|", text, re.MULTILINE))


def test_the_reference_lists_every_key_the_parser_accepts() -> None:
    missing = parser_keys() - reference_keys()
    assert not missing, f"docs/guide/problem-file.md lacks {sorted(missing)}"


def test_every_key_in_the_reference_is_accepted_by_the_parser() -> None:
    unknown = reference_keys() - parser_keys()
    assert not unknown, f"docs/guide/problem-file.md documents unknown keys {sorted(unknown)}"


# ------------------------------------------------------------------------------ docstrings
CORE = ROOT / "packages" / "dynid" / "dynid"


def _docstrings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *ast.walk(tree)]
    for node in nodes:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                yield getattr(node, "lineno", 1), doc


def test_core_docstrings_carry_no_load_averages_or_outside_files() -> None:
    """Timings under load belong in benchmarks and results pages; a design file outside the
    repository is no reference."""
    offending = []
    for path in sorted(CORE.rglob("*.py")):
        for line, doc in _docstrings(path):
            if re.search(r"load average|DESIGN\.md", doc):
                offending.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offending, offending


def test_the_estimator_guide_covers_every_estimator_of_dynid() -> None:
    """Each estimator dynid registers has a row linking the defaults file its class carries."""
    text = (ROOT / "docs" / "guide" / "estimators.md").read_text(encoding="utf-8")
    folder = "packages/dynid/dynid/estimators/defaults"
    linked = set(re.findall(rf"\]\(\.\./\.\./{folder}/(\w+)\.yaml\)", text))
    own = importlib.metadata.distribution("dynid").entry_points.select(group="dynid.estimators")
    assert linked == {entry.name for entry in own}
    for name in linked:
        assert estimator_class(name).defaults_file == ROOT / folder / f"{name}.yaml", name


#: Keys whose children are free names (joints, parameters, settings), not schema keys.
OPAQUE = {"robot.locked_joints", "truth", "data.joint_states.effort_scale", "data.settings",
          "estimator.settings", "parameters[].fields"}  # fmt: skip


def _key_paths(value: object, prefix: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for key, child in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            if path not in OPAQUE:
                yield from _key_paths(child, path)
    elif isinstance(value, list):
        for child in value:
            yield from _key_paths(child, f"{prefix}[]")


def test_the_guides_problem_file_snippets_use_only_schema_keys() -> None:
    """Every YAML block of the guide that is (part of) a problem file uses keys the parser
    accepts; the examples of posterior.yaml are another format and are left out."""
    checked = 0
    for path in sorted((ROOT / "docs" / "guide").glob("*.md")):
        for block in re.findall(r"^```yaml\n(.*?)^```", path.read_text(), re.DOTALL | re.M):
            snippet = yaml.safe_load(block)
            if not isinstance(snippet, dict) or "iteration" in snippet:
                continue
            unknown = set(_key_paths(snippet)) - parser_keys()
            assert not unknown, f"{path.name}: {sorted(unknown)} in\n{block}"
            checked += 1
    assert checked >= 3


# -------------------------------------------------------------------------------------- links
#: Results pages written alongside this documentation by the estimators' and the nodes' authors;
#: linked from the README's results table before they land.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """The heading anchors a forge renders for ``path`` (lower case, punctuation dropped, spaces
    as hyphens)."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_in_the_docs_resolves() -> None:
    broken = []
    for path in DOCS:
        for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken
