"""The error of the problem-file layer: one line naming the file and the key."""

from __future__ import annotations

from dynid.errors import DynidError


class ProblemFileError(DynidError, ValueError):
    """A problem file is unreadable or invalid; the message names the file and the key."""

    @classmethod
    def at(cls, origin: str, key: str, message: object) -> ProblemFileError:
        """``"<origin>: <key>: <message>"``, the message on one line.

        Args:
            origin: the file (its path, or ``problem '<name>'`` for a mapping).
            key: the key concerned (``robot.urdf``, ``parameters[2].name``, ``data``).
            message: what is wrong (an exception's text is joined onto one line).
        """
        return cls(f"{origin}: {one_line(key)}: {one_line(message)}")


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())
