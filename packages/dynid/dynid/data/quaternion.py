"""Unit quaternions in ROS order ``(x, y, z, w)``: products, rotation, hemisphere continuity.

All functions take and return float64 numpy arrays with the quaternion on the last axis
(shape ``[..., 4]``) and broadcast over the leading axes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


def multiply(a: Array, b: Array) -> Array:
    """Hamilton product ``a ⊗ b`` of quaternions ``[..., 4]`` (xyzw); rotation ``b`` then ``a``."""
    ax, ay, az, aw = np.moveaxis(np.asarray(a, dtype=np.float64), -1, 0)
    bx, by, bz, bw = np.moveaxis(np.asarray(b, dtype=np.float64), -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def conjugate(q: Array) -> Array:
    """Conjugate (the inverse of a unit quaternion) ``[..., 4]`` (xyzw)."""
    out = np.array(q, dtype=np.float64, copy=True)
    out[..., :3] *= -1.0
    return out


def rotate(q: Array, v: Array) -> Array:
    """Rotate vectors ``v [..., 3]`` by unit quaternions ``q [..., 4]`` (xyzw): ``R(q) v``."""
    q = np.asarray(q, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    u = q[..., :3]
    w = q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def to_matrix(q: Array) -> Array:
    """Rotation matrices ``[..., 3, 3]`` of unit quaternions ``[..., 4]`` (xyzw)."""
    x, y, z, w = np.moveaxis(np.asarray(q, dtype=np.float64), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def from_matrix(R: Array) -> Array:
    """Unit quaternions ``[..., 4]`` (xyzw, ``w >= 0``) of rotation matrices ``[..., 3, 3]``.

    Shepperd's method: each sample takes the branch of its largest of ``(trace, R00, R11, R22)``,
    which keeps the square root away from zero.
    """
    R = np.asarray(R, dtype=np.float64)
    d = np.stack([R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]], axis=-1)
    trace = d.sum(-1)
    # diff = (R21 - R12, R02 - R20, R10 - R01); summ = (R01 + R10, R02 + R20, R12 + R21)
    diff = np.stack(
        [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]],
        axis=-1,
    )
    summ = np.stack(
        [R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1]],
        axis=-1,
    )
    k = np.argmax(np.concatenate([trace[..., None], d], axis=-1), axis=-1)
    q = np.empty((*R.shape[:-2], 4), dtype=np.float64)
    # Branch k = 0: w is the largest component.
    s = np.sqrt(np.maximum(1.0 + trace, 1e-300)) * 2.0
    q_w = np.concatenate([diff / s[..., None], (s / 4.0)[..., None]], axis=-1)
    q[...] = q_w
    # Branch k = i + 1: component i of (x, y, z) is the largest.
    pairs = {0: (1, 2), 1: (0, 2), 2: (0, 1)}
    sum_index = {(0, 1): 0, (0, 2): 1, (1, 2): 2}
    for i, (j, m) in pairs.items():
        sel = k == i + 1
        if not np.any(sel):
            continue
        s_i = np.sqrt(np.maximum(1.0 + 2.0 * d[..., i] - trace, 1e-300)) * 2.0
        branch = np.empty_like(q)
        branch[..., i] = s_i / 4.0
        branch[..., j] = summ[..., sum_index[(min(i, j), max(i, j))]] / s_i
        branch[..., m] = summ[..., sum_index[(min(i, m), max(i, m))]] / s_i
        branch[..., 3] = diff[..., i] / s_i
        q = np.where(sel[..., None], branch, q)
    q *= np.where(q[..., 3:4] < 0.0, -1.0, 1.0)
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def make_continuous(q: Array) -> Array:
    """Flip signs along axis 0 of ``q [T, 4]`` so consecutive quaternions share a hemisphere.

    ``q`` and ``-q`` are the same rotation; interpolation and filtering need the sign choice that
    keeps ``dot(q[i], q[i + 1]) >= 0``. The first sample keeps its sign.
    """
    q = np.array(q, dtype=np.float64, copy=True)
    if q.shape[0] < 2:
        return q
    dots = np.einsum("ij,ij->i", q[1:], q[:-1])
    flips = np.concatenate([[1.0], np.cumprod(np.where(dots < 0.0, -1.0, 1.0))])
    return q * flips[:, None]
