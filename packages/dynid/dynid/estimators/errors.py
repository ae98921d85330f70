"""Errors of estimator configuration (re-exported by :mod:`dynid.estimators.base`); their base
:class:`~dynid.errors.EstimatorError` is shared with the objective and validation."""

from __future__ import annotations

from collections.abc import Sequence

from dynid.errors import EstimatorError

__all__ = [
    "EstimatorError",
    "InvalidSettingError",
    "UnknownEstimatorError",
    "UnknownSettingError",
]


class UnknownEstimatorError(EstimatorError, KeyError):
    """The requested estimator name is not one dynid provides."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnknownSettingError(EstimatorError):
    """A setting the chosen estimator's constructor does not take.

    Attributes:
        estimator: the estimator's name.
        settings: the settings it does not take (sorted).
        accepted: the settings it takes (sorted).
    """

    def __init__(self, estimator: str, settings: Sequence[str], accepted: Sequence[str]) -> None:
        self.estimator = estimator
        self.settings = tuple(settings)
        self.accepted = tuple(accepted)
        plural = "s" if len(self.settings) > 1 else ""
        names = ", ".join(repr(s) for s in self.settings)
        super().__init__(
            f"estimator {estimator}: unknown setting{plural} {names} "
            f"(accepted: {', '.join(self.accepted)})"
        )


class InvalidSettingError(EstimatorError):
    """A setting the chosen estimator takes, given a value of the wrong type (``num_particles:
    2.5`` where its constructor is annotated ``int``).

    Attributes:
        estimator: the estimator's name.
        settings: the setting concerned (one-tuple, like :attr:`UnknownSettingError.settings`).
        value: the value given.
    """

    def __init__(self, estimator: str, setting: str, value: object, expected: str) -> None:
        self.estimator = estimator
        self.settings = (setting,)
        self.value = value
        super().__init__(
            f"estimator {estimator}: setting {setting!r} must be {expected}, got {value!r}"
        )
