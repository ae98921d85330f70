"""Errors of the data layer: trajectories, bags and preprocessing.

Callers catch ``DataError`` (or one of its subclasses), never a bare ``Exception``. Every message
names the file, topic, field, joint or channel concerned and what was expected.
"""

from __future__ import annotations

from dynid.errors import DynidError


class DataError(DynidError):
    """Base class of every error raised by ``dynid.data``."""


class TrajectoryError(DataError, ValueError):
    """A ``Trajectory`` or ``Dataset`` failed validation (shapes, names, time, finiteness)."""


class BagReadError(DataError):
    """A ROS 2 bag could not be read: missing file or topic, wrong type, bad or truncated data."""


class BagWriteError(DataError):
    """A ``Dataset`` could not be written to a ROS 2 bag."""


class PreprocessError(DataError, ValueError):
    """Invalid preprocessing settings for a trajectory (cut-off, step, window, threshold)."""


class SegmentError(DataError, ValueError):
    """A ``TrajectorySegment`` message is inconsistent; ``field`` and ``reason`` say how."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class DataSectionError(DataError, ValueError):
    """A problem's ``data`` section cannot be applied to its recordings; ``key`` names the entry
    concerned (``data.path``, ``data.passive_joints``, ``observe.frame_points`` ...)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason
