"""The scenarios problem files and ``dynid simulate`` name: the entry points of group
``dynid.scenarios`` (:mod:`dynid.plugins`), each ``simulate(seed, out_path=None, **settings) ->
(Dataset, truth)`` (:mod:`dynid.sim.common`). A scenario runs on one engine: dynid's own model
(plain names) or another (``<engine>.<name>``, e.g. ``mujoco.panda_payload`` for
``dynid simulate panda_payload --engine mujoco``); problem files use dynid's."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dynid import plugins
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.values import check_arguments

__all__ = [
    "DEFAULT_ENGINE",
    "Simulate",
    "available_scenarios",
    "check_scenario_settings",
    "engines",
    "load_scenario",
    "scalar_values",
]

Simulate = Callable[..., tuple[Any, Mapping[str, Any]]]
"""A scenario: ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)``."""

DEFAULT_ENGINE = "dynid"
"""The engine of a scenario registered under a plain name: dynid's own model. A scenario of
another engine is registered as ``<engine>.<name>`` (``mujoco.panda_payload``)."""


def _registered(name: str, engine: str) -> str:
    """The entry-point name of scenario ``name`` on ``engine``."""
    return name if engine == DEFAULT_ENGINE else f"{engine}.{name}"


def engines() -> list[str]:
    """The engines scenarios are registered for (:data:`DEFAULT_ENGINE` first)."""
    others = {name.split(".", 1)[0] for name in plugins.SCENARIOS.names() if "." in name}
    return [DEFAULT_ENGINE, *sorted(others - {DEFAULT_ENGINE})]


def available_scenarios(engine: str = DEFAULT_ENGINE) -> list[str]:
    """The names of the scenarios registered for ``engine``, sorted."""
    prefix = "" if engine == DEFAULT_ENGINE else f"{engine}."
    return [
        name.removeprefix(prefix)
        for name in plugins.SCENARIOS.names()
        if ("." not in name if not prefix else name.startswith(prefix))
    ]


def load_scenario(name: str, where: str, engine: str = DEFAULT_ENGINE) -> Simulate:
    """The ``simulate`` function of scenario ``name`` on ``engine``.

    Raises:
        ProblemFileError: ``engine`` is unknown, it has no scenario ``name`` (the message lists
            those it has), or the plug-in failed to load; ``where`` prefixes the message.
    """
    known_engines = engines()
    if engine not in known_engines:
        raise ProblemFileError(f"{where}: unknown engine {engine!r}; engines: {known_engines}")
    known = available_scenarios(engine)
    if name not in known:
        raise ProblemFileError(
            f"{where}: no scenario {name!r} on engine {engine!r}; its scenarios: {known}"
        )
    try:
        simulate = plugins.SCENARIOS.load(_registered(name, engine))
    except plugins.PluginError as exc:
        raise ProblemFileError(f"{where}: {exc}") from None
    if not callable(simulate):
        raise ProblemFileError(f"{where}: scenario {name!r} is {simulate!r}, not a function")
    return simulate


def check_scenario_settings(
    name: str, simulate: Simulate, settings: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """``settings`` (``seed`` among them or not) checked against the keyword arguments of
    scenario ``name``'s ``simulate``, with integral floats for ``int`` arguments made ints.

    Raises:
        ProblemFileError: a setting it does not take (the message lists those it takes), or a
            value of the wrong type; ``where`` prefixes the message.
    """
    params = inspect.signature(simulate).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    accepted = sorted(k for k in params if k != "out_path")
    unknown = sorted(set(map(str, settings)) - set(accepted))
    if unknown and not takes_any:
        raise ProblemFileError(
            f"{where}: scenario {name!r} takes no setting {', '.join(map(repr, unknown))} "
            f"(settings: {', '.join(accepted)})"
        )
    checked, key, problem = check_arguments(simulate, {"seed": 0, **settings}, skip=0)
    if key is not None:
        raise ProblemFileError(f"{where}: scenario {name!r}: {key}: {problem}")
    return {k: checked[k] for k in settings}


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
