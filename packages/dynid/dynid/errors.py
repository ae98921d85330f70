"""The error families every layer of dynid shares; this module imports nothing of dynid.

Each layer raises its own family (``ModelError`` in :mod:`dynid.model.errors`, ``DataError`` in
:mod:`dynid.data.errors`, ``ProblemFileError`` in :mod:`dynid.problem_file.errors`); the two
defined here are raised by more than one layer (the objective, the estimators, validation), so
they sit below all of them. Every one of them is a :class:`DynidError`: a caller that turns
errors into one line for a user (the CLI, a node) catches that.
"""

from __future__ import annotations

__all__ = ["DynidError", "EstimatorError", "ProblemError"]


class DynidError(Exception):
    """Base class of every error a user of dynid can cause; its message is one line naming the
    file, key, topic, joint or parameter concerned and what was expected."""


class ProblemError(DynidError, ValueError):
    """A problem's parts do not fit together (names, shapes, units)."""


class EstimatorError(DynidError, ValueError):
    """An estimator was configured wrongly or could not run on the problem it was given."""
