"""Declaring node parameters with descriptors, and validating them at start-up.

``declare`` declares one parameter with its description, type and constraints (shown by
``ros2 param describe``) and returns its value. Every parameter holds a value (its override or
its default), so ``ros2 param get`` and ``ros2 param dump`` show all of them; empty-list defaults
keep their array type. An override of another type (``-p max_buffer_s:=abc``) and the validation
helpers raise ``ParameterError`` naming the parameter and what was expected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.node import Node
from rclpy.parameter import Parameter

from dynid_ros.errors import ParameterError

T = TypeVar("T")

_TYPES = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
}
_ARRAY_TYPES = {
    bool: Parameter.Type.BOOL_ARRAY,
    int: Parameter.Type.INTEGER_ARRAY,
    float: Parameter.Type.DOUBLE_ARRAY,
    str: Parameter.Type.STRING_ARRAY,
}
_KINDS = {
    Parameter.Type.NOT_SET: "no value",
    Parameter.Type.BOOL: "a boolean (true or false)",
    Parameter.Type.INTEGER: "an integer",
    Parameter.Type.DOUBLE: "a floating-point number",
    Parameter.Type.STRING: "a string",
    Parameter.Type.BYTE_ARRAY: "a list of bytes",
    Parameter.Type.BOOL_ARRAY: "a list of booleans",
    Parameter.Type.INTEGER_ARRAY: "a list of integers",
    Parameter.Type.DOUBLE_ARRAY: "a list of floating-point numbers",
    Parameter.Type.STRING_ARRAY: "a list of strings",
}
"""What a value of each parameter type is, in the words of an error message."""


def declare(
    node: Node,
    name: str,
    default: T,
    description: str,
    *,
    item: type | None = None,
    constraints: str = "",
    read_only: bool = True,
) -> T:
    """Declare parameter ``name`` and return its value (the override or ``default``).

    ``item`` gives the element type of list parameters (``str``, ``float``, ...). Read-only
    parameters are set at start-up (``--ros-args -p`` or a YAML file) and never change; the
    others can be set at run time (``ros2 param set``) through the node's own
    on-set-parameters callback, which validates them.

    Raises:
        ParameterError: the override has another type (the message names the parameter, the
            type expected and the value given).
    """
    if isinstance(default, list):
        if item is None:
            raise TypeError(f"parameter {name!r}: give the element type of the list")
        ptype = _ARRAY_TYPES[item]
    else:
        ptype = _TYPES[type(default)]

    def descriptor(read_only: bool) -> ParameterDescriptor:
        return ParameterDescriptor(
            name=name,
            type=ptype.value,
            description=description,
            additional_constraints=constraints,
            read_only=read_only,
        )

    # declared by type, then given the default: a value would infer its type, and an empty
    # list would become a byte array
    try:
        value = node.declare_parameter(name, ptype, descriptor(False)).value
    except InvalidParameterTypeException:
        raise ParameterError(_wrong_type(node, name, ptype)) from None
    if value is None:
        (result,) = node.set_parameters([Parameter(name, ptype, default)])
        if not result.successful:
            raise ParameterError(f"parameter {name!r}: default {default!r} refused: "
                                 f"{result.reason}")  # fmt: skip
        value = default
    if read_only:
        node.set_descriptor(name, descriptor(True))
    if isinstance(default, list):
        return list(value)  # type: ignore[return-value]
    if isinstance(default, float) and isinstance(value, int):
        return float(value)  # type: ignore[return-value]
    return value


def _wrong_type(node: Node, name: str, expected: Parameter.Type) -> str:
    """The message for an override of ``name`` that is not of type ``expected``.

    rclpy's exception does not carry the value: the parameter is declared once with dynamic
    typing to read it, then undeclared.
    """
    given = node.declare_parameter(name, None, ParameterDescriptor(dynamic_typing=True)).value
    node.undeclare_parameter(name)
    kind = Parameter.Type.from_parameter_value(given)
    hint = ""
    if expected == Parameter.Type.DOUBLE and kind == Parameter.Type.INTEGER:
        hint = f"; write {given}.0"
    return f"parameter {name!r} must be {_KINDS[expected]}, got {given!r} ({_KINDS[kind]}{hint})"


def positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """``value`` when finite and > 0 (or ≥ 0); otherwise ``ParameterError``."""
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = "≥ 0" if allow_zero else "> 0"
        raise ParameterError(f"parameter {name!r} must be finite and {bound}, got {value!r}")
    return value


def choice(name: str, value: str, allowed: Sequence[str]) -> str:
    """``value`` when it is one of ``allowed``; otherwise ``ParameterError``."""
    if value not in allowed:
        raise ParameterError(f"parameter {name!r} must be one of {list(allowed)}, got {value!r}")
    return value


def same_length(names: dict[str, Sequence[Any]], *, optional: Sequence[str] = ()) -> None:
    """Parallel list parameters must have the same length (``optional`` ones may be empty)."""
    lengths = {k: len(v) for k, v in names.items() if not (k in optional and len(v) == 0)}
    if len(set(lengths.values())) > 1:
        raise ParameterError(f"parameters {lengths} must have one entry each (same lengths)")
