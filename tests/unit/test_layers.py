"""Imports point down the layer map of ``docs/design.md`` (its ``layer-map`` block).

Every ``import`` and ``from ... import`` of every module of ``dynid`` and ``dynid_ros`` is read
with :mod:`ast` (also those inside functions and under ``TYPE_CHECKING``): a module may import a
module of its own layer or of a layer below, never one above.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"dynid": ROOT / "packages" / "dynid", "dynid_ros": ROOT / "packages" / "dynid_ros"}
DESIGN = ROOT / "docs" / "design.md"


def layer_map() -> list[tuple[str, list[str]]]:
    """``[(layer, [module prefixes])]`` bottom first, as written in ``docs/design.md``."""
    text = DESIGN.read_text(encoding="utf-8")
    match = re.search(r"```text layer-map\n(.*?)```", text, re.S)
    assert match, f"{DESIGN} has no ```text layer-map block"
    rows = [line.split() for line in match.group(1).splitlines() if line.strip()]
    return [(row[0], row[1:]) for row in rows]


def layer_of(module: str, layers: list[tuple[str, list[str]]]) -> int:
    """Index of the layer whose longest prefix names ``module``; raises if none does."""
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            named = module == prefix or module.startswith(prefix + ".")
            if named and len(prefix) > length:
                best, length = index, len(prefix)
    if best < 0:
        raise AssertionError(f"module {module} is in no layer of {DESIGN.name}'s layer map")
    return best


def modules() -> Iterator[tuple[str, Path]]:
    """``(dotted name, file)`` of every module of the mapped packages."""
    for name, root in PACKAGES.items():
        for path in sorted((root / name).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), path


def is_module(dotted: str) -> bool:
    """``dotted`` names a module or package of the mapped packages."""
    top, *rest = dotted.split(".")
    if top not in PACKAGES:
        return False
    base = PACKAGES[top].joinpath(top, *rest)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module of the mapped packages that ``path`` imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:  # `from dynid.model import robot` imports dynid.model.robot
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if is_module(sub) else target


def test_the_layer_map_names_every_module_once() -> None:
    layers = layer_map()
    names = [name for name, _ in layers]
    assert len(set(names)) == len(names), f"layer named twice in {names}"
    prefixes = [p for _, group in layers for p in group]
    assert len(set(prefixes)) == len(prefixes), f"prefix listed twice in {prefixes}"
    for module, _ in modules():
        layer_of(module, layers)  # raises for a module of no layer


def test_every_import_points_down_the_layer_map() -> None:
    layers = layer_map()
    upward = []
    for module, path in modules():
        own = layer_of(module, layers)
        for line, target in imported(module, path):
            other = layer_of(target, layers)
            if other > own:
                upward.append(
                    f"{path.relative_to(ROOT)}:{line}: {module} ({layers[own][0]}) imports "
                    f"{target} ({layers[other][0]})"
                )
    assert not upward, "imports against the layer map:\n" + "\n".join(upward)


@pytest.mark.parametrize("lower", ["dynid.model", "dynid.data", "dynid.objective"])
def test_the_core_layers_import_nothing_of_the_layers_that_use_them(lower: str) -> None:
    """The issue's own scan: model, data and objective import no estimator, problem file,
    command line, report or benchmark."""
    forbidden = ("dynid.estimators", "dynid.problem_file", "dynid.cli", "dynid.report",
                 "dynid.benchmarks", "dynid_bench")  # fmt: skip
    found = [
        f"{module} imports {target}"
        for module, path in modules()
        if module == lower or module.startswith(lower + ".")
        for _, target in imported(module, path)
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    ]
    assert not found, "\n".join(found)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The reader finds a function-level import of a higher layer (so a pass means something)."""
    layers = layer_map()
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from dynid.estimators.base import Estimator\n")
    (target,) = [t for _, t in imported("dynid.model.probe", source)]
    assert layer_of(target, layers) > layer_of("dynid.model.probe", layers)
