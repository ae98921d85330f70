"""Streaming estimators: the payload tracker (:mod:`dynid.online.tracker`), a recursive Bayesian
update of a payload's inertial parameters from a joint-state stream, with causal filtering and
change detection."""

from dynid.online.tracker import (
    ChangeEvent,
    PayloadEstimate,
    PayloadTracker,
    SampleError,
    TrackerError,
    TrackerSettings,
    TrackerUpdate,
)

__all__ = [
    "ChangeEvent",
    "PayloadEstimate",
    "PayloadTracker",
    "SampleError",
    "TrackerError",
    "TrackerSettings",
    "TrackerUpdate",
]
