"""The error of excitation design."""

from __future__ import annotations

from dynid.errors import DynidError

__all__ = ["ExcitationError"]


class ExcitationError(DynidError):
    """An excitation that cannot be planned: a start outside the limits, limits too tight for
    any motion, an unknown joint, a trajectory that violates a limit (one line, naming the joint
    and the limit)."""
