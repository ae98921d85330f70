"""Values of a problem file checked against what they feed: integers that are integers, and the
keyword arguments of a Python function (an attachment) against its annotations."""

from __future__ import annotations

import inspect
import numbers
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["as_int", "as_ints", "as_positive_ints", "check_arguments", "hashable"]


def as_int(value: Any) -> int:
    """``value`` as an int: an int (not a bool), or a float with no fractional part.

    Raises:
        TypeError: anything else (``2.5``, ``"3"``, ``true``, ``nan``).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"expected an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if not float(value).is_integer():
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


def as_ints(values: Any) -> tuple[int, ...]:
    """A list of integers (:func:`as_int` each) as a tuple.

    Raises:
        TypeError: not a list, or an entry that is not an integer.
    """
    if not isinstance(values, list | tuple):
        raise TypeError(f"expected a list, got {type(values).__name__}")
    return tuple(as_int(x) for x in values)


def as_positive_ints(values: Any) -> tuple[int, ...]:
    """Positive integers given as a list (:func:`as_ints`) or as an inclusive range ``"a-b"``
    (``"1-30"``: 1, 2, …, 30).

    Raises:
        TypeError: neither a list of integers nor a range string.
        ValueError: an empty list, a reversed range, or a number below 1.
    """
    if isinstance(values, str):
        first, sep, last = values.partition("-")
        if not sep or not first.strip().isdigit() or not last.strip().isdigit():
            raise TypeError(f"expected a range 'a-b', got {values!r}")
        numbers_ = tuple(range(int(first), int(last) + 1))
    else:
        numbers_ = as_ints(values)
    if not numbers_ or min(numbers_) < 1:
        raise ValueError(f"expected numbers ≥ 1, got {values!r}")
    return numbers_


def check_arguments(
    function: Callable[..., Any], arguments: Mapping[str, Any], *, skip: int = 1
) -> tuple[dict[str, Any], str | None, str | None]:
    """``arguments`` of ``function`` (or of a class's constructor, e.g. a dataclass) checked
    against its annotations.

    Understood annotations: ``float``, ``int``, ``str``, ``bool``, ``None``, ``Literal[...]``,
    ``Sequence[...]``, ``tuple[...]``, ``Mapping[..., ...]``, ``np.ndarray`` (nested lists of
    numbers) and unions of them; an argument with any other annotation is passed as given. The
    first ``skip`` parameters (an attachment's robot) are not checked.

    Returns:
        ``(arguments, name, problem)``: the arguments with integral floats given for ``int``
        parameters made ints; ``name`` and ``problem`` (``"expected a list of numbers, got
        'big'"``, ``"is required"``) of the first argument that does not fit, else ``None``.
    """
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # an annotation that does not resolve: nothing is checked
        hints = {}
    params = list(inspect.signature(function).parameters.values())[skip:]
    out = dict(arguments)
    for p in params:
        if p.name not in out:
            if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD:
                return out, p.name, "is required"
            continue
        annotation = hints.get(p.name)
        if annotation is None:
            continue
        value = out[p.name]
        if _matches(value, annotation) is False:
            return out, p.name, f"expected {_describe(annotation)}, got {_shown(value)}"
        if annotation is int and not isinstance(value, int):
            out[p.name] = as_int(value)
    return out, None, None


def _shown(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _union_args(annotation: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(annotation)
    return None


def _matches(value: Any, annotation: Any) -> bool | None:
    """Whether ``value`` fits ``annotation``; ``None`` when the annotation is not understood."""
    options = _union_args(annotation)
    if options is not None:
        results = [_matches(value, option) for option in options]
        if True in results:
            return True
        return None if None in results else False
    if annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        try:
            as_int(value)
        except TypeError:
            return False
        return True
    if annotation is float:
        return _is_number(value)
    if annotation is str:
        return isinstance(value, str)
    if annotation is np.ndarray:
        return _nested_numbers(value)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return hashable(value) and value in typing.get_args(annotation)
    if origin in (Mapping, dict):
        args = typing.get_args(annotation)
        if not isinstance(value, Mapping):
            return False
        if len(args) != 2:
            return True
        results = [_matches(k, args[0]) for k in value] + [
            _matches(v, args[1]) for v in value.values()
        ]
        return None if None in results and False not in results else False not in results
    if origin in (Sequence, list, tuple):
        if not isinstance(value, list | tuple):
            return False
        args = typing.get_args(annotation)
        if not args:
            return True
        results = [_matches(v, args[0]) for v in value]
        return None if None in results and False not in results else False not in results
    return None


def hashable(value: Any) -> bool:
    """Whether ``value`` can be looked up in a set or a mapping (a YAML list or mapping cannot)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _nested_numbers(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return bool(value) and all(_nested_numbers(v) for v in value)
    return _is_number(value)


def _describe(annotation: Any) -> str:
    """``"a list of numbers"``, ``"a number or a list of numbers"``, ... for messages."""
    options = _union_args(annotation)
    if options is not None:
        return " or ".join(dict.fromkeys(_describe(option) for option in options))
    names = {
        type(None): "null",
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        np.ndarray: "an array of numbers",
    }
    if annotation in names:
        return names[annotation]
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) in (Mapping, dict):
        args = typing.get_args(annotation)
        if len(args) == 2 and args[0] is str:
            inner = _describe(args[1])
            for article in ("an ", "a "):
                inner = inner.removeprefix(article)
            return f"a mapping of name: {inner}"
        return "a mapping"
    if typing.get_origin(annotation) in (Sequence, list, tuple):
        args = typing.get_args(annotation)
        if not args:
            return "a list"
        inner = _describe(args[0])
        for article in ("an ", "a "):
            inner = inner.replace(article, "")
        plural = {"number": "numbers", "integer": "integers", "string": "strings"}
        inner = " ".join(plural.get(word, word) for word in inner.split(" "))
        inner = inner.replace("list of", "lists of")
        return f"a list of {inner}"
    return str(annotation)
