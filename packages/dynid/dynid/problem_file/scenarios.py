"""The synthetic scenarios (dynid.sim) named by problem files and by ``dynid simulate``."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

import numpy as np

from dynid.problem_file.errors import ProblemFileError

__all__ = ["ENGINES", "available_scenarios", "scalar_values", "scenario_module"]

#: The package of each engine's scenarios: dynid's own model, or MuJoCo (``--engine mujoco``).
ENGINES = {"dynid": "dynid.sim", "mujoco": "dynid.sim.mujoco"}
_NOT_SCENARIOS = {"common", "mujoco", "engine", "arm"}


def available_scenarios(engine: str = "dynid") -> list[str]:
    """Names of the synthetic scenarios simulated by ``engine`` (a key of :data:`ENGINES`)."""
    package = importlib.import_module(ENGINES[engine])
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in _NOT_SCENARIOS
    )


def scenario_module(name: str, where: str, engine: str = "dynid") -> Any:
    """The module of scenario ``name`` on ``engine`` (it offers ``simulate(seed, ...)``).

    Raises:
        ProblemFileError: ``engine`` is unknown or has no scenario ``name``; ``where`` prefixes
            the message.
    """
    if engine not in ENGINES:
        raise ProblemFileError(f"{where}: unknown engine {engine!r}; engines: {list(ENGINES)}")
    known = available_scenarios(engine)
    if name not in known:
        raise ProblemFileError(
            f"{where}: no scenario {name!r} on engine {engine!r}; its scenarios: {known}"
        )
    return importlib.import_module(f"{ENGINES[engine]}.{name}")


def scalar_values(values: Mapping[str, Any]) -> dict[str, float]:
    """``{name: value}`` of the entries that hold one number.

    Per-trajectory values (lists, e.g. link lengths drawn per trajectory of a scenario) are kept
    only when all entries are equal.
    """
    out = {}
    for name, value in values.items():
        unique = np.unique(np.asarray(value, dtype=np.float64).reshape(-1))
        if unique.size == 1:
            out[str(name)] = float(unique[0])
    return out
