"""Plug-ins: the pieces dynid finds by name, registered as Python entry points.

Every estimator, likelihood, attachment, data source and scenario, dynid's own included, is an
entry point of one of these groups; a package adds one by declaring it in its ``pyproject.toml``,
without editing dynid::

    [project.entry-points."dynid.estimators"]
    my_method = "my_package.estimator:MyEstimator"

=======================  =================================================================
group                    the object an entry point names
=======================  =================================================================
``dynid.estimators``     a subclass of :class:`dynid.estimators.base.Estimator`
``dynid.likelihoods``    ``factory(problem, *, shooting, windows) -> Likelihood``
``dynid.attachments``    ``attach(robot, **arguments) -> RobotModel``
``dynid.data_sources``   a :class:`dynid.problem_file.sources.DataSource` subclass
``dynid.scenarios``      ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)``
=======================  =================================================================

The entry point's name is the name problem files, the command line and the nodes use. Nothing
is imported until a name is asked for (:meth:`Group.load`), so ``import dynid`` stays cheap and
optional dependencies (pyro, emcee, cma) load only with the plug-in that needs them. The entry
points of a group are read once per process; :func:`refresh` reads them again (after installing
a package into a running interpreter). This module imports nothing of dynid but its errors, so
that every layer may look up the plug-ins it dispatches to.
"""

from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass
from typing import Any

from dynid.errors import DynidError

__all__ = [
    "ATTACHMENTS",
    "DATA_SOURCES",
    "ESTIMATORS",
    "GROUPS",
    "LIKELIHOODS",
    "SCENARIOS",
    "Group",
    "PluginError",
    "UnknownPluginError",
    "refresh",
]


class PluginError(DynidError, ValueError):
    """A plug-in that cannot be used: it failed to import, or two distributions claim its name."""


class UnknownPluginError(PluginError, KeyError):
    """No plug-in of the group has the name asked for; the message lists those that exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _distribution(entry: importlib.metadata.EntryPoint) -> str:
    """The name of the distribution declaring ``entry`` (``?`` when unknown)."""
    dist = entry.dist
    return dist.name if dist is not None else "?"


@functools.cache
def _entries(group: str) -> dict[str, tuple[importlib.metadata.EntryPoint, ...]]:
    """``{name: entry points}`` of ``group``: one per distribution that declares the name."""
    out: dict[str, tuple[importlib.metadata.EntryPoint, ...]] = {}
    for entry in importlib.metadata.entry_points(group=group):
        out[entry.name] = (*out.get(entry.name, ()), entry)
    return out


def refresh() -> None:
    """Forget the entry points read so far; the next look-up reads the installed ones again."""
    _entries.cache_clear()


@dataclass(frozen=True)
class Group:
    """One entry-point group.

    Attributes:
        name: the entry-point group (``dynid.estimators``).
        noun: what one plug-in is called in messages (``estimator``).
    """

    name: str
    noun: str

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(_entries(self.name))

    def load(self, name: str) -> Any:
        """The object registered as ``name`` (its module imported now).

        Raises:
            UnknownPluginError: no plug-in of this group is called ``name``; lists those there are.
            PluginError: two distributions register ``name`` (both named), or importing the
                plug-in failed (the entry point, its distribution and the cause named).
        """
        found = _entries(self.name).get(name) if isinstance(name, str) else None
        if not found:
            raise UnknownPluginError(
                f"unknown {self.noun} {name!r}; available: {', '.join(self.names())}"
            )
        if len(found) > 1:
            owners = " and ".join(f"{_distribution(e)} ({e.value})" for e in found)
            raise PluginError(
                f"{self.noun} {name!r} is registered in entry-point group {self.name} by both "
                f"{owners}; uninstall one of them"
            )
        (entry,) = found
        try:
            return entry.load()
        except Exception as exc:  # any failure of third-party code becomes one line
            cause = " ".join(str(exc).split()) or type(exc).__name__
            raise PluginError(
                f"{self.noun} {name!r}: entry point {entry.value!r} of distribution "
                f"{_distribution(entry)} failed to load: {type(exc).__name__}: {cause}"
            ) from exc


ESTIMATORS = Group("dynid.estimators", "estimator")
LIKELIHOODS = Group("dynid.likelihoods", "likelihood")
ATTACHMENTS = Group("dynid.attachments", "attachment")
DATA_SOURCES = Group("dynid.data_sources", "data source")
SCENARIOS = Group("dynid.scenarios", "scenario")

GROUPS = (ESTIMATORS, LIKELIHOODS, ATTACHMENTS, DATA_SOURCES, SCENARIOS)
"""Every group dynid reads."""
