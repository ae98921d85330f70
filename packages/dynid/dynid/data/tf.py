"""Chain lookups in a TF tree recorded on ``/tf`` and ``/tf_static``.

Poses are ``[n, 7]`` rows ``(x, y, z, qx, qy, qz, qw)``: translation (m) and rotation of the child
frame expressed in the parent frame. Stamps are integer nanoseconds.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from dynid.data import quaternion as quat
from dynid.data.align import interp_channels
from dynid.data.errors import BagReadError

Poses = NDArray[np.float64]
Stamps = NDArray[np.int64]
_POSE_NAMES = ("x", "y", "z", "e/qx", "e/qy", "e/qz", "e/qw")


def compose(a: Poses, b: Poses) -> Poses:
    """``T_ac = T_ab · T_bc`` for pose rows ``a = T_ab``, ``b = T_bc`` (broadcast ``[..., 7]``)."""
    t = a[..., :3] + quat.rotate(a[..., 3:], b[..., :3])
    return np.concatenate([t, quat.multiply(a[..., 3:], b[..., 3:])], axis=-1)


def invert(a: Poses) -> Poses:
    """``T_ba`` from ``T_ab`` (``[..., 7]``)."""
    qi = quat.conjugate(a[..., 3:])
    return np.concatenate([-quat.rotate(qi, a[..., :3]), qi], axis=-1)


def _ancestors(frame: str, parent_of: dict[str, str]) -> list[str]:
    chain = [frame]
    while chain[-1] in parent_of:
        nxt = parent_of[chain[-1]]
        if nxt in chain:
            raise BagReadError(f"tf: frames form a cycle through {nxt!r}")
        chain.append(nxt)
    return chain


def lookup(
    parent: str,
    child: str,
    dynamic: dict[tuple[str, str], tuple[Stamps, Poses]],
    static: dict[tuple[str, str], tuple[float, ...]],
    *,
    where: str,
) -> tuple[Stamps | None, Poses]:
    """Pose of ``child`` in ``parent`` over time.

    Returns ``(stamps [n], poses [n, 7])`` on the time base of the most finely sampled dynamic
    edge of the chain (other edges interpolated, slerp for rotations, within their common span),
    or ``(None, pose [1, 7])`` when every edge of the chain is static.
    """
    parent_of = {c: p for p, c in (*dynamic, *static)}
    up_child, up_parent = _ancestors(child, parent_of), _ancestors(parent, parent_of)
    common = next((f for f in up_child if f in up_parent), None)
    if common is None:
        known = sorted({f for edge in (*dynamic, *static) for f in edge})
        raise BagReadError(
            f"{where}: no tf chain from {parent!r} to {child!r}; frames seen: {known}"
        )

    def edges_down(chain: list[str]) -> list[tuple[str, str]]:
        stop = chain.index(common)
        return [(chain[i + 1], chain[i]) for i in range(stop - 1, -1, -1)]

    down_child, down_parent = edges_down(up_child), edges_down(up_parent)
    used = [e for e in down_child + down_parent if e in dynamic]
    if used:
        base = max(used, key=lambda e: dynamic[e][0].size)
        stamps = dynamic[base][0]
        lo = max(int(dynamic[e][0][0]) for e in used)
        hi = min(int(dynamic[e][0][-1]) for e in used)
        stamps = stamps[(stamps >= lo) & (stamps <= hi)]
        if stamps.size == 0:
            raise BagReadError(f"{where}: tf edges {used} never overlap in time")
    else:
        stamps = None
    origin = 0 if stamps is None else int(stamps[0])
    t_query = np.zeros(0) if stamps is None else (stamps - origin) * 1e-9

    def edge_pose(edge: tuple[str, str]) -> Poses:
        if edge in dynamic:
            s, rows = dynamic[edge]
            return interp_channels((s - origin) * 1e-9, rows, _POSE_NAMES, t_query, what=where)
        return np.asarray(static[edge], dtype=np.float64)[None, :]

    def chain_pose(edges: list[tuple[str, str]]) -> Poses:
        pose = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
        for edge in edges:
            pose = compose(pose, edge_pose(edge))
        return pose

    return stamps, compose(invert(chain_pose(down_parent)), chain_pose(down_child))
