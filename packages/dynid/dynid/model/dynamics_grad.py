"""The vector-Jacobian product of inverse dynamics for the backward pass of the CRBA forward
dynamics, analytically.

The autograd node of :meth:`dynid.model.dynamics.TorchDynamics.forward_dynamics` (in
:mod:`dynid.model.dynamics`) gets its gradients from the implicit function theorem: q̈ solves
r(q, v, τ, θ, q̈) = ID(q, v, q̈; θ) + τ_friction(v) − τ = 0, so for a cotangent ḡ of q̈,
λ = M⁻¹ ḡ (one solve with the Cholesky factor saved by the forward pass) and the cotangents of
the inputs are −λᵀ ∂r/∂(q, v, τ, θ) at fixed q̈: the relation ∂q̈/∂x = −M⁻¹ ∂ID/∂x that
Pinocchio's ``computeABADerivatives`` rests on (Carpentier and Mansard, "Analytical Derivatives of
Rigid Body Dynamics Algorithms", RSS 2018).

:func:`rigid_body_vjp` is the vector-Jacobian product of inverse dynamics, in the world-frame,
component-first layout of the forward pass (:mod:`dynid.model.cf_algebra`: spatial vectors
[3, 2, nv, Bt] ordered (ω, v_O) about the world origin, inertias [10, nv, Bt], states [nv, Bt],
Bt the flattened batch), reusing the forward pass's kinematics, inertias and RNEA terms
(:class:`Tape`) so that no autograd graph of the rigid-body algorithms is recorded (the friction
law's derivatives are in :mod:`dynid.model.dynamics`). Its intermediates go to the scratch
destinations of the forward pass (:class:`~dynid.model.cf_algebra.Buffers`). Units are those of
the dynamics (rad, m, s, kg, N·m or N).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from dynid.model.cf_algebra import (
    SYM,
    SYM_PAIRS,
    Buffers,
    apply_inertia,
    cf_dot,
    cf_matvec,
    cross_terms,
    force_cross,
    motion_cross,
    rows,
    spatial_dot,
    spatial_parts,
    stacked,
    sum_products,
    tree_sum,
)

__all__ = [
    "Tape",
    "TapeBlock",
    "inertia_vjp",
    "rigid_body_vjp",
    "unflat_param",
]


class Tape(NamedTuple):
    """Forward-pass quantities the backward pass reuses (flattened, component-first).

    R [3, 3, nv, Bt], o [3, nv, Bt]: body poses; bodies [10, nv, Bt]: world inertias; S, V, A,
    P, IA, F [3, 2, nv, Bt]: motion subspaces and the RNEA terms of the bias (q̈ = 0).
    """

    R: Tensor
    o: Tensor
    bodies: Tensor
    S: Tensor
    V: Tensor
    A: Tensor
    P: Tensor
    IA: Tensor
    F: Tensor


class TapeBlock(dict):
    """The buffers of one call's :class:`Tape` and factor, by name and shape.

    pool: the list it returns to when the autograd graph that saved it is freed (``None``: it is
    not reused; ``TorchDynamics.recycling_tapes``).
    """

    def __init__(self, pool: list[TapeBlock] | None) -> None:
        super().__init__()
        self.pool = pool


def rigid_body_vjp(
    tape: Tape,
    mu: Tensor,
    a: Tensor,
    v: Tensor,
    *,
    ancestors: Tensor,
    descendants: Tensor,
    parent_slot: Tensor,
    pose: bool,
    translation: bool,
    inertia: bool,
    buf: Buffers,
) -> dict[str, Tensor]:
    """μᵀ ∂ID/∂x at fixed q̈ for ID = M(q)q̈ + C(q, v)v + g(q) with armature, analytically.

    tape: the forward quantities at (q, v, q̈ = 0); mu: the cotangent μ [nv, Bt]; a: q̈ [nv, Bt];
    v: q̇ [nv, Bt]; ancestors [k, j] / descendants [j, k]: the tree masks [nv, nv];
    parent_slot [nv]: parent body index + 1 (0 for the world); buf: destinations of the
    intermediates (results are always fresh tensors). With J = μᵀ ID = Σ_k Λ_k · f_k,
    Λ_k = Σ_{i ⪯ k} μ_i S_i, f_k = I_k A_k + V_k ×* I_k V_k (world frame): J is bilinear in each
    body inertia (pairs (Λ, A) and (V, Λ ×ₘ V)), its sensitivities to the joint motions S_i and
    velocities s_i = S_i q̇_i follow from ancestor and descendant sums, and a joint angle (or a
    placement translation) moves the subtree below it rigidly, with δS = ξ ×ₘ S and
    δI = ξ ×* I − I ξ×ₘ for its twist ξ, so ∂J/∂q_j = S_j · Σ_{k ⪰ j} Q_k.

    Returns flattened cotangents by field name: "v" [nv, Bt], "armature" [nv, Bt], "gravity"
    [3, Bt]; with ``pose`` also "q" [nv, Bt]; with ``translation`` (needs ``pose``)
    "joint_translation" [3, nv, Bt] (parent frame); with ``inertia`` also "inertia"
    [10, nv, Bt] (body frames, π order).
    """
    nv, bt = mu.shape
    bodies, S, V, P = tape.bodies, tape.S, tape.V, tape.P

    def spatial(name: str) -> Tensor | None:
        return buf("vjp/" + name, 3, 2, nv, bt)

    # the three motions whose inertial forces are needed: the q̈ part of A, Λ and W = Λ ×ₘ V
    motions = buf("vjp/motions", 3, 3, 2, nv, bt)
    forces = buf("vjp/forces", 3, 3, 2, nv, bt)
    dest = [None] * 3 if motions is None else motions.unbind(0)
    acc_q = tree_sum(ancestors, torch.mul(S, a, out=spatial("Sa")), dest[0])
    Lam = tree_sum(ancestors, torch.mul(S, mu, out=spatial("Smu")), dest[1])
    W = motion_cross(Lam, V, dest[2])
    both = None if motions is None else motions.permute(1, 2, 0, 3, 4)
    both_out = None if forces is None else forces.permute(1, 2, 0, 3, 4)
    inertial_q, ILam, IW = apply_inertia(
        bodies, stacked((acc_q, Lam, W), both, 2), both_out
    ).unbind(2)
    B = tree_sum(descendants, ILam, spatial("B"))  # ∂J/∂A_j summed over the subtree
    G = force_cross(
        ((Lam, P, -1.0), (torch.mul(S, v, out=spatial("Sv")), B, 1.0)), IW, spatial("G")
    )  # ∂J/∂V_k
    E = tree_sum(descendants, G, spatial("E"))
    E = force_cross(((V, B, -1.0),), E, E)  # ∂J/∂s_j
    flat: dict[str, Tensor] = {
        "v": spatial_dot(S, E),
        "armature": mu * a,
        "gravity": -ILam[:, 1].sum(1),
    }
    A = torch.add(tape.A, acc_q, out=spatial("A"))
    if pose:
        F = tree_sum(descendants, inertial_q, spatial("F"))
        F = torch.add(F, tape.F, out=None if forces is None else F)
        IA = torch.add(tape.IA, inertial_q, out=spatial("IA"))
        D = sum_products([(mu, F, 1.0), (v, E, 1.0), (a, B, 1.0)], spatial("D"))  # ∂J/∂S_j
        Q = force_cross(
            (
                (S, D, 1.0),
                (Lam, IA, -1.0),
                (A, ILam, -1.0),
                (V, IW, -1.0),
                (W, P, -1.0),
            ),
            out=spatial("Q"),
        )
        Q = tree_sum(descendants, Q, spatial("sumQ"))
        flat["q"] = spatial_dot(S, Q)
        if translation:
            eye = torch.eye(3, dtype=Q.dtype, device=Q.device)[..., None, None]
            world_and_bodies = torch.cat((eye.expand(3, 3, 1, Q.shape[-1]), tape.R), 2)
            parent_R = world_and_bodies.index_select(2, parent_slot)
            flat["joint_translation"] = cf_matvec(parent_R.transpose(0, 1), Q[:, 1])
    if inertia:
        flat["inertia"] = inertia_vjp(tape.R, tape.o, ((Lam, A), (V, W)), buf)
    return flat


def inertia_vjp(
    R: Tensor, o: Tensor, pairs: Sequence[tuple[Tensor, Tensor]], buf: Buffers
) -> Tensor:
    """∂J/∂π_local [10, nv, Bt] for J = Σ_pairs x · I y with I the world inertia of π_local.

    R [3, 3, nv, Bt], o [3, nv, Bt]: body poses; pairs of motions x, y [3, 2, nv, Bt]; buf:
    destinations of the intermediates (the result is fresh). The gradient with respect to the
    world terms (m, h, Ī_O) is taken from x·Iy = x_ωᵀĪ y_ω + x_ω·(h × y_v) + m x_v·y_v −
    x_v·(h × y_ω) and carried back through ``TorchDynamics._world_inertia`` (rotation and
    parallel-axis theorem).
    """
    nv, bt = o.shape[1:]
    parts = [(spatial_parts(x), spatial_parts(y)) for x, y in pairs]
    world_buf = buf("vjp/world", 10, nv, bt)
    world = rows(world_buf, 10)  # ∂J/∂(m, h, Ī_O)
    mass_terms = [(xv[i], yv[i], 1.0) for (_, xv), (_, yv) in parts for i in range(3)]
    d_mass = sum_products(mass_terms, world[0])
    dh = []
    for i in range(3):
        terms = [
            t
            for (xw, xv), (yw, yv) in parts
            for t in cross_terms(yv, xw, i) + cross_terms(xv, yw, i)
        ]
        dh.append(sum_products(terms, world[1 + i]))
    gi = []  # ∂J/∂Ī_O: the symmetric part of Σ x_ω y_ωᵀ, 6 unique entries
    for k, (i, j) in enumerate(SYM_PAIRS):
        pair_terms = ((i, j, 1.0),) if i == j else ((i, j, 0.5), (j, i, 0.5))
        terms = [(xw[r], yw[c], w) for (xw, _), (yw, _) in parts for r, c, w in pair_terms]
        gi.append(sum_products(terms, world[4 + k]))
    g = [[gi[SYM[i][j]] for j in range(3)] for i in range(3)]  # as a 3×3 matrix
    d_h = stacked(dh, None if world_buf is None else world_buf[1:4])  # [3, nv, Bt]
    rows_R = R.unbind(0)  # row a of R, [3, nv, Bt]
    oc = o.unbind(0)
    out = buf("vjp/inertia", 10, nv, bt, tape=True)
    trace = torch.add(gi[0], gi[2], out=buf("vjp/trace", nv, bt))
    trace = torch.add(trace, gi[5], out=None if out is None else trace)
    g_o_dest = buf("vjp/g_o", 3, nv, bt)
    g_o = [
        sum_products([(g[i][c], oc[c], 1.0) for c in range(3)], d)
        for i, d in enumerate(rows(g_o_dest, 3))
    ]
    o_o = cf_dot(o, o, buf("vjp/o_o", nv, bt))
    mass_terms = [(oc[c], dh[c], 1.0) for c in range(3)] + [(oc[c], g_o[c], -1.0) for c in range(3)]
    mass = sum_products([*mass_terms, (o_o, trace, 1.0)], None if out is None else out[0], d_mass)
    # ∂J/∂(R h_local) = ∂J/∂h + 2 (tr G o − G o); ∂J/∂h_local = Rᵀ of it
    d_rh = torch.add(d_h, stacked(g_o, g_o_dest), alpha=-2.0, out=buf("vjp/d_rh", 3, nv, bt))
    d_rh = sum_products([(trace, o, 2.0)], None if out is None else d_rh, d_rh)
    d_rh_c = d_rh.unbind(0)
    h_local = sum_products(
        [(rows_R[c], d_rh_c[c], 1.0) for c in range(3)], None if out is None else out[1:4]
    )
    # ∂J/∂Ī_local = Rᵀ G R column by column (entries k ≤ d of column d are rows
    # 4 + d(d + 1)/2 … of the result), off-diagonal entries counted twice in the 6-vector
    gr_dest = rows(buf("vjp/GR", 3, 3, nv, bt), 3)
    gr = [  # gr[i] = row i of G R, [3, nv, Bt]
        sum_products([(rows_R[c], g[i][c], 1.0) for c in range(3)], gr_dest[i]) for i in range(3)
    ]
    local = []
    for d in range(3):
        first = 4 + d * (d + 1) // 2
        dest = None if out is None else out[first : first + d + 1]
        column = sum_products([(rows_R[a][: d + 1], gr[a][d], 1.0) for a in range(3)], dest)
        if d:
            column[:d].mul_(2.0)
        local.append(column)
    if out is not None:
        return out
    return torch.cat((mass.unsqueeze(0), h_local, *local))


def unflat_param(grad: Tensor, batch: torch.Size, shape: torch.Size) -> Tensor:
    """Gradient [*reversed(rest), Bt] of a flattened parameter field → its shape [Np, *rest]."""
    rest = shape[1:]
    nb = len(batch)
    g = grad.reshape(*reversed(rest), *batch)
    g = g.permute(*range(len(rest), len(rest) + nb), *reversed(range(len(rest))))
    if nb > 1:
        g = g.sum(tuple(range(1, nb)))
    return g.sum_to_size(shape)
