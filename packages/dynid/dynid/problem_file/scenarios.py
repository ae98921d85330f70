"""The synthetic scenarios (dynid.sim) named by problem files and by ``dynid simulate``."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Any

import numpy as np

from dynid.problem_file.errors import ProblemFileError

__all__ = ["available_scenarios", "scalar_values", "scenario_module"]

_NOT_SCENARIOS = {"common"}


def available_scenarios() -> list[str]:
    """Names of the synthetic scenarios in :mod:`dynid.sim`."""
    import dynid.sim

    return sorted(
        m.name for m in pkgutil.iter_modules(dynid.sim.__path__) if m.name not in _NOT_SCENARIOS
    )


def scenario_module(name: str, where: str) -> Any:
    """The :mod:`dynid.sim` module of scenario ``name`` (it offers ``simulate(seed, ...)``).

    Raises:
        ProblemFileError: ``name`` is not a scenario; ``where`` prefixes the message.
    """
    known = available_scenarios()
    if name not in known:
        raise ProblemFileError(f"{where}: unknown scenario {name!r}; available: {known}")
    return importlib.import_module(f"dynid.sim.{name}")


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
