"""Errors of the ROS adapters: bad messages from the network and bad node parameters.

A ``BadMessageError`` is counted on ``/diagnostics`` and the message skipped; it is never fatal.
A ``ParameterError`` stops a node at start-up with a message naming the parameter.
"""

from __future__ import annotations


class RosAdapterError(Exception):
    """Base class of the errors raised by ``dynid_ros``."""


class BadMessageError(RosAdapterError, ValueError):
    """A message failed validation; ``field`` and ``reason`` name what was wrong.

    ``key`` (``"<field>: <reason>"``) is the counter name used in diagnostics.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason

    @property
    def key(self) -> str:
        """Counter name of this rejection, ``"<field>: <reason>"``."""
        return f"{self.field}: {self.reason}"


class ParameterError(RosAdapterError, ValueError):
    """A node parameter has a value the node cannot run with."""
