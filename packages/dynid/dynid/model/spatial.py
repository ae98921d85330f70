"""Small batched helpers for rigid-body quantities in torch (inertias, rotations, log-Cholesky).

Dynamic parameters follow Pinocchio's order π = (m, m·c_x, m·c_y, m·c_z, I_xx, I_xy, I_yy, I_xz,
I_yz, I_zz) with the rotational inertia taken about the body-frame origin; 6-vectors of rotational
inertia use the same (xx, xy, yy, xz, yz, zz) order. Every function broadcasts over leading dims
(components last); the component-first counterparts used by the batched dynamics live in
:mod:`dynid.model.cf_algebra` and :mod:`dynid.model.cf_cholesky`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from dynid.model.cf_algebra import SYM

__all__ = [
    "axis_angle_rotation",
    "body_from_dynamic_params",
    "dynamic_params_from_body",
    "dynamic_params_from_log_cholesky",
    "inertia_from_vector",
    "log_cholesky_from_dynamic_params",
    "skew",
    "vector_from_inertia",
]


def skew(v: Tensor) -> Tensor:
    """[..., 3] → [..., 3, 3] matrix S with S @ w = v × w."""
    x, y, z = v.unbind(-1)
    zero = torch.zeros_like(x)
    return torch.stack(
        (
            torch.stack((zero, -z, y), -1),
            torch.stack((z, zero, -x), -1),
            torch.stack((-y, x, zero), -1),
        ),
        -2,
    )


def inertia_from_vector(i6: Tensor) -> Tensor:
    """[..., 6] (xx, xy, yy, xz, yz, zz) → [..., 3, 3] symmetric inertia matrix (kg·m²)."""
    rows = [torch.stack([i6[..., k] for k in row], -1) for row in SYM]
    return torch.stack(rows, -2)


def vector_from_inertia(inertia: Tensor) -> Tensor:
    """[..., 3, 3] symmetric inertia matrix → [..., 6] (xx, xy, yy, xz, yz, zz)."""
    return torch.stack(
        (
            inertia[..., 0, 0],
            inertia[..., 0, 1],
            inertia[..., 1, 1],
            inertia[..., 0, 2],
            inertia[..., 1, 2],
            inertia[..., 2, 2],
        ),
        -1,
    )


def dynamic_params_from_body(mass: Tensor, com: Tensor, inertia_com: Tensor) -> Tensor:
    """Mass [...], centre of mass [..., 3] (m) and inertia about it [..., 3, 3] → π [..., 10].

    The rotational inertia is moved to the frame origin by the parallel-axis theorem,
    I_O = I_C + m (|c|² 1 − c cᵀ).
    """
    cc = com.unsqueeze(-1) * com.unsqueeze(-2)
    eye = torch.eye(3, dtype=com.dtype, device=com.device)
    shift = (com * com).sum(-1)[..., None, None] * eye - cc
    inertia_origin = inertia_com + mass[..., None, None] * shift
    return torch.cat(
        (mass.unsqueeze(-1), mass.unsqueeze(-1) * com, vector_from_inertia(inertia_origin)), -1
    )


def body_from_dynamic_params(pi: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """π [..., 10] → (mass [...], centre of mass [..., 3], inertia about the COM [..., 3, 3]).

    Requires m > 0 for the centre of mass to be defined.
    """
    mass = pi[..., 0]
    com = pi[..., 1:4] / mass.unsqueeze(-1)
    cc = com.unsqueeze(-1) * com.unsqueeze(-2)
    eye = torch.eye(3, dtype=pi.dtype, device=pi.device)
    shift = (com * com).sum(-1)[..., None, None] * eye - cc
    return mass, com, inertia_from_vector(pi[..., 4:10]) - mass[..., None, None] * shift


def axis_angle_rotation(axis: Tensor, angle: Tensor) -> Tensor:
    """Rodrigues' formula: unit axis [..., 3] and angle [...] (rad) → rotation [..., 3, 3]."""
    k = skew(axis)
    s = torch.sin(angle)[..., None, None]
    c = torch.cos(angle)[..., None, None]
    eye = torch.eye(3, dtype=k.dtype, device=k.device)
    return eye + s * k + (1.0 - c) * (k @ k)


def dynamic_params_from_log_cholesky(theta: Tensor) -> Tensor:
    """Log-Cholesky parameters [..., 10] → π [..., 10] (Rucker & Wensing 2022).

    θ = (α, d1, d2, d3, s12, s23, s13, t1, t2, t3) as in ``pinocchio.LogCholeskyParameters``:
    U = e^α [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]],
    pseudo-inertia
    J = U Uᵀ = [[Σ, h], [hᵀ, m]], and I_O = tr(Σ) 1 − Σ. Every θ ∈ R¹⁰ gives a physically
    consistent body (m > 0, J ≻ 0).
    """
    alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta.unbind(-1)
    zero = torch.zeros_like(alpha)
    one = torch.ones_like(alpha)
    upper = (
        torch.stack(
            (
                torch.stack((d1.exp(), s12, s13, t1), -1),
                torch.stack((zero, d2.exp(), s23, t2), -1),
                torch.stack((zero, zero, d3.exp(), t3), -1),
                torch.stack((zero, zero, zero, one), -1),
            ),
            -2,
        )
        * alpha.exp()[..., None, None]
    )
    pseudo = upper @ upper.transpose(-1, -2)
    sigma = pseudo[..., :3, :3]
    eye = torch.eye(3, dtype=theta.dtype, device=theta.device)
    inertia_origin = sigma.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] * eye - sigma
    return torch.cat(
        (pseudo[..., 3:4, 3], pseudo[..., :3, 3], vector_from_inertia(inertia_origin)), -1
    )


def log_cholesky_from_dynamic_params(pi: Tensor) -> Tensor:
    """π [..., 10] of a physically consistent body → its log-Cholesky parameters [..., 10].

    Inverse of :func:`dynamic_params_from_log_cholesky`: the pseudo-inertia is factored as
    J = U Uᵀ with U upper triangular (a Cholesky factorisation of the index-reversed matrix).
    """
    inertia_origin = inertia_from_vector(pi[..., 4:10])
    eye = torch.eye(3, dtype=pi.dtype, device=pi.device)
    sigma = 0.5 * inertia_origin.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] * eye
    sigma = sigma - inertia_origin
    h = pi[..., 1:4]
    top = torch.cat((sigma, h.unsqueeze(-1)), -1)
    bottom = torch.cat((h, pi[..., 0:1]), -1).unsqueeze(-2)
    pseudo = torch.cat((top, bottom), -2)
    flipped = pseudo.flip(-1).flip(-2)
    upper = torch.linalg.cholesky(flipped).flip(-1).flip(-2)
    scale = upper[..., 3, 3]
    u = upper / scale[..., None, None]
    return torch.stack(
        (
            scale.log(),
            u[..., 0, 0].log(),
            u[..., 1, 1].log(),
            u[..., 2, 2].log(),
            u[..., 0, 1],
            u[..., 1, 2],
            u[..., 0, 2],
            u[..., 0, 3],
            u[..., 1, 3],
            u[..., 2, 3],
        ),
        -1,
    )
