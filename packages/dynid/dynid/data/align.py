"""Interpolation of sampled signals onto a time grid: linear for vectors, slerp for quaternions.

Every function is exact at the sample times (a query equal to a sample time returns that sample
bit for bit) and refuses to extrapolate: queries must lie inside ``[t_src[0], t_src[-1]]``.
Times are in seconds, float64, strictly increasing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from dynid.data.errors import DataError
from dynid.data.quaternion import make_continuous

Array = NDArray[np.float64]

Channel = tuple[str, Sequence[str], NDArray[np.int64] | None, Array, bool]
"""One recorded stream: (topic, channel names, stamps [S] in ns — ``None`` or empty for a single
constant row such as a static transform chain, values [S, k], is it a command?)."""

QUATERNION_SUFFIXES = ("qx", "qy", "qz", "qw")


def _bracket(t_src: Array, t_query: Array, what: str) -> tuple[Array, Array, Array]:
    """Indices ``i0, i1`` and fractions ``w`` with ``t_query = (1 - w) t[i0] + w t[i1]``."""
    t_src = np.asarray(t_src, dtype=np.float64)
    t_query = np.asarray(t_query, dtype=np.float64)
    if t_src.ndim != 1 or t_src.size == 0:
        raise DataError(f"{what}: sample times must be a non-empty 1-D array, got {t_src.shape}")
    if t_query.size and (t_query.min() < t_src[0] or t_query.max() > t_src[-1]):
        raise DataError(
            f"{what}: query times [{t_query.min():.9g}, {t_query.max():.9g}] s leave the sampled "
            f"span [{t_src[0]:.9g}, {t_src[-1]:.9g}] s; extrapolation is refused"
        )
    i1 = np.searchsorted(t_src, t_query, side="left")
    exact = (i1 < t_src.size) & (t_src[np.minimum(i1, t_src.size - 1)] == t_query)
    i0 = np.where(exact, i1, np.maximum(i1 - 1, 0))
    i1 = np.where(exact, i1, np.minimum(i1, t_src.size - 1))
    span = t_src[i1] - t_src[i0]
    w = np.where(span > 0.0, (t_query - t_src[i0]) / np.where(span > 0.0, span, 1.0), 0.0)
    return i0, i1, w


def interp_linear(t_src: Array, x: Array, t_query: Array, *, what: str = "signal") -> Array:
    """Linear interpolation of ``x [S, d]`` sampled at ``t_src [S]`` onto ``t_query [Q]``.

    Returns ``[Q, d]``. ``what`` names the signal in error messages.
    """
    x = np.asarray(x, dtype=np.float64)
    i0, i1, w = _bracket(t_src, t_query, what)
    w = w[:, None]
    out = x[i0] + w * (x[i1] - x[i0])
    exact = w[:, 0] == 0.0
    out[exact] = x[i0[exact]]
    return out


def slerp(t_src: Array, quat: Array, t_query: Array, *, what: str = "orientation") -> Array:
    """Spherical linear interpolation of unit quaternions ``quat [S, 4]`` (xyzw) onto ``t_query``.

    The samples are first made hemisphere-continuous, so the shortest arc is taken. Returns
    ``[Q, 4]`` unit quaternions; samples hit exactly are returned unchanged.
    """
    q = make_continuous(np.asarray(quat, dtype=np.float64))
    i0, i1, w = _bracket(t_src, t_query, what)
    a, b = q[i0], q[i1]
    cos = np.clip(np.einsum("ij,ij->i", a, b), -1.0, 1.0)
    theta = np.arccos(cos)
    sin = np.sin(theta)
    small = sin < 1e-9
    safe = np.where(small, 1.0, sin)
    wa = np.where(small, 1.0 - w, np.sin((1.0 - w) * theta) / safe)
    wb = np.where(small, w, np.sin(w * theta) / safe)
    out = wa[:, None] * a + wb[:, None] * b
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    exact = w == 0.0
    out[exact] = q[i0[exact]]
    return out


def quaternion_groups(names: Sequence[str]) -> list[tuple[str, list[int]]]:
    """Find pose orientation channels: ``("<body>", [i_qx, i_qy, i_qz, i_qw])`` per body.

    A body counts when all four ``<body>/qx|qy|qz|qw`` channels are present in ``names``.
    """
    index = {n: i for i, n in enumerate(names)}
    groups = []
    for name in names:
        if name.endswith("/qx"):
            body = name[: -len("/qx")]
            cols = [index.get(f"{body}/{s}") for s in QUATERNION_SUFFIXES]
            if all(c is not None for c in cols):
                groups.append((body, [int(c) for c in cols if c is not None]))
    return groups


def interp_channels(
    t_src: Array, x: Array, names: Sequence[str], t_query: Array, *, what: str = "signal"
) -> Array:
    """Interpolate named channels ``x [S, k]``: slerp for ``<body>/q*`` groups, linear otherwise."""
    out = interp_linear(t_src, x, t_query, what=what)
    for body, cols in quaternion_groups(names):
        out[:, cols] = slerp(t_src, np.asarray(x)[:, cols], t_query, what=f"{what} {body}")
    return out


def uniform_grid(t0: float, t1: float, dt: float) -> Array:
    """Uniform times ``t0 + k dt`` (s) for ``k = 0, 1, ...`` up to ``t1`` (within 1e-9 dt)."""
    if not dt > 0.0:
        raise DataError(f"grid step must be positive, got dt={dt}")
    n = int(np.floor((t1 - t0) / dt + 1e-9)) + 1
    return t0 + dt * np.arange(n, dtype=np.float64)


def align_streams(
    streams: Iterable[Channel], t: Array, origin_ns: int
) -> tuple[Array | None, list[str], Array | None, list[str]]:
    """Streams onto the grid ``t`` [T] (s after ``origin_ns``), split into commands and
    observations in stream order: ``(command [T, nc] | None, command names, obs [T, k] | None,
    obs names)``. Constant streams are repeated; the others go through :func:`interp_channels`
    (errors name the topic)."""
    parts: dict[bool, list[Array]] = {True: [], False: []}
    names: dict[bool, list[str]] = {True: [], False: []}
    for topic, channel_names, stamps, values, is_command in streams:
        if stamps is None or stamps.size == 0:
            aligned = np.repeat(values, t.size, axis=0)
        else:
            t_src = (stamps - origin_ns) * 1e-9
            aligned = interp_channels(t_src, values, channel_names, t, what=topic)
        parts[is_command].append(aligned)
        names[is_command].extend(channel_names)

    def stack(x: list[Array]) -> Array | None:
        return np.concatenate(x, axis=1) if x else None

    return stack(parts[True]), names[True], stack(parts[False]), names[False]
