"""Errors raised by the robot-model layer (``dynid.model``).

Callers catch :class:`ModelError`; each subclass names the kind of item that was wrong and every
message names the item itself (file, joint, link, frame, parameter or array).
"""

from __future__ import annotations

from dynid.errors import DynidError

__all__ = [
    "ModelError",
    "ParameterSpecError",
    "StateError",
    "UnknownFrameError",
    "UnknownJointError",
    "UnsupportedGradientError",
    "UnsupportedJointError",
    "UrdfError",
]


class ModelError(DynidError):
    """Base class of every error raised by ``dynid.model``."""


class UrdfError(ModelError):
    """A URDF could not be read, is malformed, or describes something dynid cannot model."""


class UnsupportedJointError(ModelError):
    """A joint type other than revolute, prismatic or fixed (e.g. floating, planar, spherical)."""


class UnknownJointError(ModelError, KeyError):
    """A joint name that is not among the robot's movable (or lockable) joints."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownFrameError(ModelError, KeyError):
    """A frame (link, joint or operational frame) name that the model does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ParameterSpecError(ModelError):
    """A parameter specification (names, bounds, priors, YAML) is invalid for the robot."""


class StateError(ModelError, ValueError):
    """A state, control or parameter tensor has the wrong shape or non-finite entries."""


class UnsupportedGradientError(ModelError):
    """A gradient was requested that the chosen dynamics backend cannot provide exactly."""
