"""A rigid body's ten inertial parameters: the linear ones the regressor takes, the physical ones
a user reads, the map between them with its Jacobian, the frame change, and the projection onto
physically consistent bodies.

Linear parameters ``π [10]`` (Pinocchio's order, about a frame's origin, in its axes):
``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)`` (kg, kg·m, kg·m²). Physical
parameters ``φ [10]`` (the order of a payload's parameter names, :data:`BODY_FIELDS`):
``(m, c_x, c_y, c_z, ixx, ixy, iyy, ixz, iyz, izz)`` with the centre of mass ``c`` (m) and the
inertia about it (kg·m²), same axes. With ``h = m c`` and ``I_o`` the inertia about the origin,
``I_c = I_o − ((hᵀh) 1 − h hᵀ) / m``.

Physical consistency (Wensing, Kim and Slotine 2017): the pseudo-inertia
``J = [[½ tr(I_o) 1 − I_o, h], [hᵀ, m]]`` is positive semi-definite.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BODY_FIELDS",
    "frame_to_joint",
    "linear_from_physical",
    "physical_from_linear",
    "project_consistent",
    "pseudo_inertia",
]

Array = NDArray[np.float64]

BODY_FIELDS: tuple[str, ...] = (
    "mass", "com_x", "com_y", "com_z", "ixx", "ixy", "iyy", "ixz", "iyz", "izz",
)  # fmt: skip
"""The physical parameters' fields, in ``φ`` order (the names of a payload's parameters)."""

#: Index pairs of the six inertia entries in the order of ``π[4:10]`` and ``φ[4:10]``.
_SIX = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
_ROW, _COL = np.array(_SIX).T
_DIAGONAL = (_ROW == _COL).astype(np.float64)
_ROW_HOT, _COL_HOT = np.eye(3)[_ROW], np.eye(3)[_COL]


def _matrix(six: Array) -> Array:
    out = np.empty((3, 3))
    out[_ROW, _COL] = six
    out[_COL, _ROW] = six
    return out


def _six(matrix: Array) -> Array:
    return matrix[_ROW, _COL]


def _parallel_axis(h: Array) -> Array:
    """``(hᵀh) 1 − h hᵀ`` ``[3, 3]``."""
    return float(h @ h) * np.eye(3) - np.outer(h, h)


def linear_from_physical(phi: Array) -> Array:
    """``π [10]`` of the physical parameters ``φ [10]`` (module docstring)."""
    m, c, inertia_c = phi[0], phi[1:4], _matrix(phi[4:10])
    return np.concatenate(([m], m * c, _six(inertia_c + m * _parallel_axis(c))))


def physical_from_linear(pi: Array) -> tuple[Array, Array]:
    """``φ [10]`` of ``π [10]`` and the Jacobian ``∂φ/∂π [10, 10]``; ``m`` must be > 0."""
    m, h, inertia_o = float(pi[0]), pi[1:4], _matrix(pi[4:10])
    shift = _parallel_axis(h)
    phi = np.concatenate(([m], h / m, _six(inertia_o - shift / m)))
    jac = np.zeros((10, 10))
    jac[0, 0] = 1.0
    jac[1:4, 0] = -h / m**2
    jac[1:4, 1:4] = np.eye(3) / m
    jac[4:10, 0] = _six(shift) / m**2
    # ∂(I_c)_ij/∂h_k = −(2 h_k δ_ij − δ_ik h_j − δ_jk h_i) / m
    jac[4:10, 1:4] = (
        -(
            2.0 * _DIAGONAL[:, None] * h[None, :]
            - _ROW_HOT * h[_COL][:, None]
            - _COL_HOT * h[_ROW][:, None]
        )
        / m
    )
    jac[4:10, 4:10] = np.eye(6)
    return phi, jac


def frame_to_joint(rotation: Array, translation: Array) -> Array:
    """``T [10, 10]`` with ``π_joint = T π_frame`` for a frame placed at ``(rotation R [3, 3],
    translation p [3])`` in its body's joint frame. The change of frame is linear in ``π``:
    ``m' = m``, ``h' = R h + m p``, ``I' = R I_o Rᵀ − m [p]ₓ² − [p]ₓ[R h]ₓ − [R h]ₓ[p]ₓ``."""
    R = np.asarray(rotation, dtype=np.float64)
    p = np.asarray(translation, dtype=np.float64)
    px = _skew(p)
    out = np.empty((10, 10))
    for k in range(10):
        m, h, inertia_o = (1.0 if k == 0 else 0.0), np.eye(10)[k, 1:4], _matrix(np.eye(10)[k, 4:])
        rh = _skew(R @ h)
        moved = R @ inertia_o @ R.T - m * px @ px - px @ rh - rh @ px
        out[:, k] = np.concatenate(([m], R @ h + m * p, _six(moved)))
    return out


def _skew(v: Array) -> Array:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def pseudo_inertia(pi: Array) -> Array:
    """``J [4, 4]`` of ``π [10]`` (module docstring)."""
    m, h, inertia_o = pi[0], pi[1:4], _matrix(pi[4:10])
    out = np.empty((4, 4))
    out[:3, :3] = 0.5 * np.trace(inertia_o) * np.eye(3) - inertia_o
    out[:3, 3] = out[3, :3] = h
    out[3, 3] = m
    return out


def project_consistent(pi: Array, min_mass: float = 1e-6) -> tuple[Array, bool]:
    """The nearest ``π`` (Frobenius norm of the pseudo-inertia) whose pseudo-inertia is positive
    semi-definite with a mass of at least ``min_mass`` (kg), and whether ``pi`` had to move.

    The negative eigenvalues of ``J`` are set to zero; a mass still below ``min_mass`` is raised
    to it (a body that weighs nothing has no centre of mass).
    """
    J = pseudo_inertia(pi)
    values, vectors = np.linalg.eigh(J)
    moved = bool(values.min() < 0.0 or J[3, 3] < min_mass)
    if not moved:
        return np.array(pi, dtype=np.float64), False
    J = (vectors * np.clip(values, 0.0, None)) @ vectors.T
    J[3, 3] = max(J[3, 3], min_mass)
    sigma = J[:3, :3]
    inertia_o = np.trace(sigma) * np.eye(3) - sigma
    return np.concatenate(([J[3, 3]], J[:3, 3], _six(inertia_o))), True
