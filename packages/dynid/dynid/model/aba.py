"""Featherstone's articulated-body algorithm (ABA) in torch, batch-first, body coordinates.

The measured alternative to the CRBA + Cholesky forward dynamics of
:meth:`dynid.model.dynamics.TorchDynamics.forward_dynamics` (it is reached through
:meth:`~dynid.model.dynamics.TorchDynamics.forward_dynamics_aba`; ``dynid_bench.model``
times both). Featherstone, *Rigid Body Dynamics Algorithms*, Table 7.1: 6×6 spatial matrices,
spatial vectors ordered (ω, v) in each body frame, one body at a time, the armature added to D_i
as in Pinocchio. Batch-first layout: quantities are ``[*batch, nv, ...]`` with the components
last (``*batch`` = (N, *B)); units SI (rad, m, s, kg, N·m or N).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from dynid.model.spatial import inertia_from_vector, skew

__all__ = ["articulated_body_forward_dynamics"]


def articulated_body_forward_dynamics(
    parents: Sequence[int],
    motion: Tensor,
    rot: Tensor,
    trans: Tensor,
    pi: Tensor,
    armature: Tensor,
    gravity: Tensor,
    v: Tensor,
    tau: Tensor,
) -> Tensor:
    """q̈ [*batch, nv] of a kinematic tree by the three passes of ABA.

    parents: parent index of each joint (−1 for the world), parents before children;
    motion: joint motion subspaces [nv, 6] in the joint frames, (ω, v) ordering; rot, trans:
    pose of each joint frame in its parent, [*batch, nv, 3, 3] and [*batch, nv, 3] (m);
    pi: body dynamic parameters [*, nv, 10] in the body frames (π order, broadcast to
    ``*batch``); armature [*batch, nv]; gravity [*batch, 3] (m/s², world frame);
    v [*batch, nv] joint velocities; tau [*batch, nv] joint forces net of friction.
    """
    batch, nv = rot.shape[:-3], rot.shape[-3]
    S = motion
    m, h, inertia = pi[..., 0], pi[..., 1:4], inertia_from_vector(pi[..., 4:10])
    hx = skew(h)
    eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
    spatial_inertia = torch.cat(
        (torch.cat((inertia, hx), -1), torch.cat((-hx, m[..., None, None] * eye), -1)), -2
    ).expand(*batch, nv, 6, 6)
    rt = rot.transpose(-1, -2)
    zero = torch.zeros_like(rt)
    # X_i: motion transform parent → body i, (ω, v) ordering: [[Rᵀ, 0], [−Rᵀ[t]×, Rᵀ]]
    X = torch.cat((torch.cat((rt, zero), -1), torch.cat((-rt @ skew(trans), rt), -1)), -2)
    vel: list[Tensor] = []
    bias_acc: list[Tensor] = []
    IA: list[Tensor] = []
    pA: list[Tensor] = []
    for i, parent in enumerate(parents):
        vj = S[i] * v[..., i : i + 1]
        vi = vj if parent < 0 else _mv(X[..., i, :, :], vel[parent]) + vj
        vel.append(vi)
        bias_acc.append(_motion_cross6(vi, vj))
        Ii = spatial_inertia[..., i, :, :]
        IA.append(Ii)
        pA.append(_force_cross6(vi, _mv(Ii, vi)))
    U: list[Tensor] = [torch.empty(0)] * nv
    D: list[Tensor] = [torch.empty(0)] * nv
    u: list[Tensor] = [torch.empty(0)] * nv
    for i in reversed(range(nv)):
        U[i] = _mv(IA[i], S[i].expand_as(pA[i]))
        D[i] = U[i] @ S[i] + armature[..., i]
        u[i] = tau[..., i] - pA[i] @ S[i]
        parent = parents[i]
        if parent >= 0:
            Ia = IA[i] - U[i].unsqueeze(-1) * (U[i] / D[i].unsqueeze(-1)).unsqueeze(-2)
            pa = pA[i] + _mv(Ia, bias_acc[i]) + U[i] * (u[i] / D[i]).unsqueeze(-1)
            Xi = X[..., i, :, :]
            IA[parent] = IA[parent] + Xi.transpose(-1, -2) @ Ia @ Xi
            pA[parent] = pA[parent] + _mv(Xi.transpose(-1, -2), pa)
    acc: list[Tensor] = [torch.empty(0)] * nv
    qdd: list[Tensor] = [torch.empty(0)] * nv
    base = torch.cat((torch.zeros_like(gravity), -gravity), -1)
    for i, parent in enumerate(parents):
        ai = _mv(X[..., i, :, :], base if parent < 0 else acc[parent]) + bias_acc[i]
        qdd[i] = (u[i] - (U[i].unsqueeze(-2) @ ai.unsqueeze(-1))[..., 0, 0]) / D[i]
        acc[i] = ai + S[i] * qdd[i].unsqueeze(-1)
    return torch.stack(qdd, -1)


def _mv(A: Tensor, x: Tensor) -> Tensor:
    """A [..., n, n] times x [..., n]."""
    return (A @ x.unsqueeze(-1)).squeeze(-1)


def _motion_cross6(a: Tensor, b: Tensor) -> Tensor:
    """Spatial motion cross product a ×ₘ b of (ω, v) 6-vectors."""
    aw, av = a[..., :3], a[..., 3:]
    bw, bv = b[..., :3], b[..., 3:]
    return torch.cat(
        (torch.linalg.cross(aw, bw), torch.linalg.cross(aw, bv) + torch.linalg.cross(av, bw)), -1
    )


def _force_cross6(a: Tensor, f: Tensor) -> Tensor:
    """Spatial force cross product a ×* f for motion a = (ω, v), force f = (n, l)."""
    aw, av = a[..., :3], a[..., 3:]
    fn, fl = f[..., :3], f[..., 3:]
    return torch.cat(
        (torch.linalg.cross(aw, fn) + torch.linalg.cross(av, fl), torch.linalg.cross(aw, fl)), -1
    )
