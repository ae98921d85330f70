"""The estimator registry and the one resolver the CLI, the nodes and the benchmarks share.

An estimator is chosen by name and configured in three layers, later ones winning::

    1. its own defaults         the estimator class's ``defaults_file`` (shipped with it)
    2. the problem file's       `estimator: {name, settings}`, only when `name` is the chosen one
    3. overrides                CLI flags (--particles, --iterations, --seed, --set k=v), node
                                parameters, a benchmark's explicit settings

    resolved = resolve_estimator("emcee", problem_file.estimator, {"max_iterations": 50})
    resolved.name, resolved.settings, resolved.estimator

Settings belong to the estimator they name: choosing an estimator other than the problem file's
starts from that estimator's own defaults. Every setting is checked against the estimator's
constructor before it is built, so a setting it does not take (``learning_rate`` for emcee,
``num_particles`` for proprio) is a one-line :class:`UnknownSettingError` listing those it takes,
and a value that is not an integer for a setting the constructor annotates ``int`` (``int |
None``) is a one-line :class:`InvalidSettingError` (``num_particles: 2.5`` would otherwise be cut
to 2 somewhere inside); an integral float (``100.0``) is taken as that integer.

The estimators are the entry points of group ``dynid.estimators`` (:mod:`dynid.plugins`), dynid's
own among them: an entry point ``<name> = "module:Class"`` names a subclass of
:class:`dynid.estimators.base.Estimator` whose ``kind`` is ``<name>``; the class carries its
defaults file (``Estimator.defaults_file``), so a package adds an estimator without editing
dynid.
"""

from __future__ import annotations

import inspect
import numbers
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import yaml

from dynid import plugins
from dynid.estimators.errors import (
    EstimatorError,
    InvalidSettingError,
    UnknownEstimatorError,
    UnknownSettingError,
)

if TYPE_CHECKING:
    from dynid.estimators.base import Estimator

__all__ = [
    "EstimatorDefaults",
    "InvalidSettingError",
    "ResolvedEstimator",
    "UnknownSettingError",
    "accepted_settings",
    "available_estimators",
    "estimator_class",
    "estimator_defaults",
    "integer_settings",
    "make_estimator",
    "resolve_estimator",
]


@dataclass
class EstimatorDefaults:
    """An estimator name with settings for it: a problem file's ``estimator`` section.

    Attributes:
        name: estimator name (:func:`available_estimators`).
        settings: keyword arguments of that estimator's constructor; they apply only when this
            estimator is the one chosen.
    """

    name: str = "csvgd"
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResolvedEstimator:
    """The outcome of :func:`resolve_estimator`.

    Attributes:
        name: the chosen estimator.
        settings: every setting it was built with (defaults, problem file, overrides merged).
        estimator: the estimator, built with ``settings`` and not yet started.
    """

    name: str
    settings: Mapping[str, Any]
    estimator: Estimator

    def build(self) -> Estimator:
        """Another estimator with the same settings (e.g. one per run of a node)."""
        return make_estimator(self.name, **self.settings)


def available_estimators() -> list[str]:
    """Names accepted by :func:`make_estimator` and :func:`resolve_estimator`: the entry points
    of group ``dynid.estimators``."""
    return plugins.ESTIMATORS.names()


def estimator_class(name: str) -> type[Estimator]:
    """The class implementing estimator ``name`` (its module imported now).

    Raises:
        UnknownEstimatorError: ``name`` is not one of :func:`available_estimators`.
        EstimatorError: the plug-in failed to import, two distributions register ``name``, or
            the entry point names no :class:`~dynid.estimators.base.Estimator` of kind ``name``.
    """
    from dynid.estimators.base import Estimator

    try:
        cls = plugins.ESTIMATORS.load(name)
    except plugins.UnknownPluginError as exc:
        raise UnknownEstimatorError(str(exc)) from None
    except plugins.PluginError as exc:
        raise EstimatorError(str(exc)) from exc
    if not (isinstance(cls, type) and issubclass(cls, Estimator)):
        raise EstimatorError(
            f"estimator {name!r}: its entry point names {cls!r}, not a subclass of "
            "dynid.estimators.base.Estimator"
        )
    kind = getattr(cls, "kind", None)
    if kind != name:
        raise EstimatorError(
            f"estimator {name!r}: class {cls.__module__}.{cls.__qualname__} has kind {kind!r}; "
            "an estimator's kind is the name it is registered under"
        )
    return cls


def _constructors(name: str) -> Iterator[tuple[Callable[..., Any], list[inspect.Parameter]]]:
    """Estimator ``name``'s own constructors along its MRO, each with its parameters but
    ``self``, up to the first that passes no ``**settings`` on to its base."""
    for klass in estimator_class(name).__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            return
        params = list(inspect.signature(init).parameters.values())[1:]
        yield init, params
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return


def accepted_settings(name: str) -> tuple[str, ...]:
    """The keyword arguments estimator ``name``'s constructor takes (sorted).

    Read from the constructor signatures along the class's MRO: a constructor passing
    ``**settings`` on to its base takes the base's keywords too.
    """
    keywords = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = {p.name for _, params in _constructors(name) for p in params if p.kind in keywords}
    return tuple(sorted(names))


def integer_settings(name: str) -> dict[str, bool]:
    """The settings estimator ``name``'s constructor annotates ``int`` or ``int | None``, each
    with whether ``None`` is allowed (read along the MRO like :func:`accepted_settings`; the
    first constructor naming a keyword decides its type)."""
    annotations: dict[str, Any] = {}
    for init, params in _constructors(name):
        try:
            hints = typing.get_type_hints(init)
        except Exception:  # an annotation that does not resolve: its settings go unchecked
            hints = {}
        for p in params:
            annotations.setdefault(p.name, hints.get(p.name))
    out = {}
    for key, annotation in annotations.items():
        if annotation is int:
            out[key] = False
        elif set(typing.get_args(annotation)) == {int, type(None)}:
            out[key] = True
    return out


def _check_settings(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` checked against estimator ``name``'s constructor: every key one it takes,
    every integer setting an integer (an integral float becomes that int)."""
    accepted = accepted_settings(name)
    unknown = sorted(set(map(str, settings)) - set(accepted))
    if unknown:
        raise UnknownSettingError(name, unknown, accepted)
    out = dict(settings)
    for key, optional in integer_settings(name).items():
        if key not in out or (optional and out[key] is None):
            continue
        value = out[key]
        if not _is_integer(value):
            expected = "an integer or null" if optional else "an integer"
            raise InvalidSettingError(name, key, value, expected)
        out[key] = int(value)
    return out


def _is_integer(value: Any) -> bool:
    """An int (not a bool), or a finite float with no fractional part."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) or float(value).is_integer()


def estimator_defaults(name: str) -> dict[str, Any]:
    """Estimator ``name``'s own default settings, from its class's ``defaults_file`` (none: an
    empty mapping, the constructor's defaults apply).

    Raises:
        UnknownEstimatorError: ``name`` is not one of :func:`available_estimators`.
        EstimatorError: the file is missing or malformed, naming it.
        UnknownSettingError: the file names a setting the estimator does not take.
    """
    path = estimator_class(name).defaults_file
    if path is None:
        return {}
    if not path.is_file():
        raise EstimatorError(f"estimator {name}: defaults file {path} is missing")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        text = " ".join(str(exc).split())
        raise EstimatorError(f"{path}: invalid YAML: {text}") from None
    if not isinstance(data, Mapping) or data.get("name") != name:
        raise EstimatorError(f"{path}: expected 'name: {name}' and 'settings: {{...}}'")
    settings = data.get("settings") or {}
    if not isinstance(settings, Mapping):
        raise EstimatorError(f"{path}: settings: expected a mapping")
    return _check_settings(name, settings)


def make_estimator(name: str, **settings: Any) -> Estimator:
    """Build estimator ``name`` with exactly these constructor ``settings`` (no defaults file,
    no problem file: :func:`resolve_estimator` is the way to choose one).

    Raises:
        UnknownEstimatorError: ``name`` is not one of :func:`available_estimators`.
        UnknownSettingError: a setting its constructor does not take (checked before building).
        InvalidSettingError: a value that is not an integer for an integer setting.
        EstimatorError: the constructor rejected a value (the message names the estimator).
    """
    cls = estimator_class(name)
    settings = _check_settings(name, settings)
    try:
        return cls(**settings)
    except (TypeError, ValueError) as exc:  # EstimatorError is a ValueError
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise EstimatorError(f"estimator {name}: {text}") from exc


def resolve_estimator(
    name: str | None,
    problem: EstimatorDefaults | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ResolvedEstimator:
    """Choose and configure an estimator: the one place that does it.

    Args:
        name: the estimator to run; ``None``: the one ``problem`` names.
        problem: the problem file's estimator section; its settings apply only when its name is
            the chosen estimator.
        overrides: settings on top (CLI flags, node parameters, a benchmark's explicit ones).

    Returns:
        The name, the merged settings (its defaults file, then the problem file's, then
        ``overrides``) and the estimator built with them.

    Raises:
        UnknownEstimatorError: no or an unknown estimator name.
        UnknownSettingError: a setting the chosen estimator does not take, before building it.
        InvalidSettingError: a value that is not an integer for an integer setting.
        EstimatorError: the estimator rejected a value, or its defaults file is broken.
    """
    chosen = name if name is not None else (problem.name if problem is not None else None)
    if chosen is None:
        known = ", ".join(available_estimators())
        raise UnknownEstimatorError(f"no estimator chosen; available: {known}")
    settings = estimator_defaults(chosen)
    if problem is not None and problem.name == chosen:
        settings.update(problem.settings)
    settings.update(overrides or {})
    settings = _check_settings(chosen, settings)
    estimator = make_estimator(chosen, **settings)
    return ResolvedEstimator(chosen, MappingProxyType(settings), estimator)
