"""The backward pass of the CRBA forward dynamics: implicit-function gradients, analytically.

:class:`ForwardDynamicsFunction` is the autograd node of
:meth:`dynid.model.dynamics.TorchDynamics.forward_dynamics`. q̈ solves
r(q, v, τ, θ, q̈) = ID(q, v, q̈; θ) + τ_friction(v) − τ = 0, so for a cotangent ḡ of q̈,
λ = M⁻¹ ḡ (one solve with the Cholesky factor saved by the forward pass) and the cotangents of
the inputs are −λᵀ ∂r/∂(q, v, τ, θ) at fixed q̈: the relation ∂q̈/∂x = −M⁻¹ ∂ID/∂x that
Pinocchio's ``computeABADerivatives`` rests on (Carpentier and Mansard, "Analytical Derivatives of
Rigid Body Dynamics Algorithms", RSS 2018). Forward mode (``torch.func.jvp``/``jacfwd``) uses the
same identity with autograd's forward mode through inverse dynamics; second derivatives are
refused (``once_differentiable``).

:func:`rigid_body_vjp` is the vector-Jacobian product of inverse dynamics, in the world-frame,
component-first layout of the forward pass (:mod:`dynid.model.cf_algebra`: spatial vectors
[3, 2, nv, Bt] ordered (ω, v_O) about the world origin, inertias [10, nv, Bt], states [nv, Bt],
Bt the flattened batch), reusing the forward pass's kinematics, inertias and RNEA terms
(:class:`Tape`) so that no autograd graph of the rigid-body algorithms is recorded. The friction
law, a few elementwise functions, goes through autograd (:func:`elementwise_vjp`). Units are
those of the dynamics (rad, m, s, kg, N·m or N).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from dynid.model.cf_algebra import (
    SYM,
    SYM_PAIRS,
    apply_inertia,
    cf_matvec,
    cross_component,
    force_cross,
    motion_cross,
    spatial_dot,
    spatial_parts,
    tree_sum,
)

if TYPE_CHECKING:
    from dynid.model.dynamics import TorchDynamics

__all__ = [
    "ForwardDynamicsFunction",
    "Tape",
    "elementwise_vjp",
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


class ForwardDynamicsFunction(torch.autograd.Function):
    """q̈ by CRBA + Cholesky with gradients from the implicit function theorem (module notes).

    Inputs: the :class:`~dynid.model.dynamics.TorchDynamics`, whether a backward pass will read
    the saved quantities (``keep``: autograd records this call; otherwise they live in scratch
    buffers that the next call overwrites, which forward mode, evaluated inside the call, allows),
    then q, v, tau [N, *B, nv] and the parameter fields it reads (``dyn._solve``); outputs
    q̈ [N, *B, nv], the factor and the :class:`Tape` (non-differentiable).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(
        dyn: TorchDynamics, keep: bool, q: Tensor, v: Tensor, tau: Tensor, *fields: Tensor
    ) -> Any:
        qdd, factor, tape = dyn._solve(q, v, tau, fields, keep)
        return qdd, factor, *tape

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> None:
        dyn, _keep, *tensors = inputs
        qdd, *saved = output
        ctx.dyn = dyn  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(*saved)
        ctx.save_for_backward(*tensors, qdd, *saved)
        ctx.save_for_forward(*tensors, qdd, saved[0])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_qdd: Tensor, *_: Tensor | None) -> Any:
        saved = ctx.saved_tensors
        n_inputs = len(saved) - 2 - len(Tape._fields)
        inputs, (qdd, factor, *tape) = saved[:n_inputs], saved[n_inputs:]
        dyn: TorchDynamics = ctx.dyn
        lam = dyn._apply_inverse(factor, grad_qdd)
        grads = dyn._residual_vjp(inputs, qdd, Tape(*tape), -lam, ctx.needs_input_grad[2:])
        return (None, None, *grads)

    @staticmethod
    def jvp(ctx: Any, _dyn: None, _keep: None, *tangents: Tensor | None) -> Any:
        *inputs, qdd, factor = ctx.saved_tensors
        dyn: TorchDynamics = ctx.dyn
        filled = tuple(
            torch.zeros_like(x) if t is None else t for x, t in zip(inputs, tangents, strict=True)
        )
        _, d_residual = torch.func.jvp(lambda *x: dyn._residual(*x, qdd), tuple(inputs), filled)
        return -dyn._apply_inverse(factor, d_residual), *([None] * len(Tape._fields)), None


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
    inertia: bool,
) -> dict[str, Tensor]:
    """μᵀ ∂ID/∂x at fixed q̈ for ID = M(q)q̈ + C(q, v)v + g(q) with armature, analytically.

    tape: the forward quantities at (q, v, q̈ = 0); mu: the cotangent μ [nv, Bt]; a: q̈ [nv, Bt];
    v: q̇ [nv, Bt]; ancestors [k, j] / descendants [j, k]: the tree masks [nv, nv];
    parent_slot [nv]: parent body index + 1 (0 for the world). With J = μᵀ ID = Σ_k Λ_k · f_k,
    Λ_k = Σ_{i ⪯ k} μ_i S_i, f_k = I_k A_k + V_k ×* I_k V_k (world frame): J is bilinear in each
    body inertia (pairs (Λ, A) and (V, Λ ×ₘ V)), its sensitivities to the joint motions S_i and
    velocities s_i = S_i q̇_i follow from ancestor and descendant sums, and a joint angle (or a
    placement translation) moves the subtree below it rigidly, with δS = ξ ×ₘ S and
    δI = ξ ×* I − I ξ×ₘ for its twist ξ, so ∂J/∂q_j = S_j · Σ_{k ⪰ j} Q_k.

    Returns flattened cotangents by field name: "v" [nv, Bt], "armature" [nv, Bt], "gravity"
    [3, Bt]; with ``pose`` also "q" [nv, Bt] and "joint_translation" [3, nv, Bt] (parent frame);
    with ``inertia`` also "inertia" [10, nv, Bt] (body frames, π order).
    """
    bodies, S, V, P = tape.bodies, tape.S, tape.V, tape.P
    acc_q = tree_sum(ancestors, S * a)
    A = tape.A + acc_q
    inertial_q = apply_inertia(bodies, acc_q)
    IA = tape.IA + inertial_q
    F = tape.F + tree_sum(descendants, inertial_q)
    Lam = tree_sum(ancestors, S * mu)
    ILam = apply_inertia(bodies, Lam)
    B = tree_sum(descendants, ILam)  # ∂J/∂A_j summed over the subtree
    W = motion_cross(Lam, V)
    IW = apply_inertia(bodies, W)
    G = force_cross(((Lam, P, -1.0), (S * v, B, 1.0)), IW)  # ∂J/∂V_k
    E = force_cross(((V, B, -1.0),), tree_sum(descendants, G))  # ∂J/∂s_j
    flat: dict[str, Tensor] = {
        "v": spatial_dot(S, E),
        "armature": mu * a,
        "gravity": -ILam[:, 1].sum(1),
    }
    if pose:
        D = mu * F + v * E + a * B  # ∂J/∂S_j
        Q = force_cross(
            (
                (S, D, 1.0),
                (Lam, IA, -1.0),
                (A, ILam, -1.0),
                (V, IW, -1.0),
                (W, P, -1.0),
            )
        )
        Q = tree_sum(descendants, Q)
        flat["q"] = spatial_dot(S, Q)
        eye = torch.eye(3, dtype=Q.dtype, device=Q.device)[..., None, None]
        world_and_bodies = torch.cat((eye.expand(3, 3, 1, Q.shape[-1]), tape.R), 2)
        parent_R = world_and_bodies.index_select(2, parent_slot)
        flat["joint_translation"] = cf_matvec(parent_R.transpose(0, 1), Q[:, 1])
    if inertia:
        flat["inertia"] = inertia_vjp(tape.R, tape.o, ((Lam, A), (V, W)))
    return flat


def elementwise_vjp(
    fn: Callable[..., Tensor], args: Sequence[Tensor], wanted: Sequence[int], cotangent: Tensor
) -> dict[int, Tensor]:
    """cotangentᵀ ∂fn(*args)/∂args[i] for i in ``wanted`` (by index), through autograd.

    For cheap elementwise laws (the friction torque): ``fn`` is re-run on detached copies of the
    wanted arguments; ``cotangent`` has the shape of ``fn``'s output.
    """
    if not wanted:
        return {}
    args = list(args)
    with torch.enable_grad():
        for i in wanted:
            args[i] = args[i].detach().requires_grad_(True)
        parts = torch.autograd.grad(fn(*args), [args[i] for i in wanted], cotangent)
    return dict(zip(wanted, parts, strict=True))


def inertia_vjp(R: Tensor, o: Tensor, pairs: Sequence[tuple[Tensor, Tensor]]) -> Tensor:
    """∂J/∂π_local [10, nv, Bt] for J = Σ_pairs x · I y with I the world inertia of π_local.

    R [3, 3, nv, Bt], o [3, nv, Bt]: body poses; pairs of motions x, y [3, 2, nv, Bt]. The
    gradient with respect to the world terms (m, h, Ī_O) is taken from x·Iy = x_ωᵀĪ y_ω +
    x_ω·(h × y_v) + m x_v·y_v − x_v·(h × y_ω) and carried back through
    ``TorchDynamics._world_inertia`` (rotation and parallel-axis theorem).
    """
    d_mass: Tensor | None = None
    d_h = [None, None, None]
    d_inertia: list[Tensor | None] = [None] * 6
    for x, y in pairs:
        xw, xv = spatial_parts(x)
        yw, yv = spatial_parts(y)
        for i in range(3):
            d_mass = xv[i] * yv[i] if d_mass is None else torch.addcmul(d_mass, xv[i], yv[i])
            term = cross_component(xv, yw, i, cross_component(yv, xw, i))
            d_h[i] = term if d_h[i] is None else d_h[i] + term
        for k, (i, j) in enumerate(SYM_PAIRS):  # symmetric part of x_ω y_ωᵀ
            term = torch.addcmul(xw[i] * yw[j], xw[j], yw[i]).mul_(0.5)
            d_inertia[k] = term if d_inertia[k] is None else d_inertia[k] + term
    assert d_mass is not None
    dh = [t for t in d_h if t is not None]
    gi = [t for t in d_inertia if t is not None]
    g = [[gi[SYM[i][j]] for j in range(3)] for i in range(3)]  # ∂J/∂Ī_O as a 3×3 matrix
    rot = [row.unbind(0) for row in R.unbind(0)]  # rot[a][c]
    oc = o.unbind(0)
    trace = gi[0] + gi[2] + gi[5]
    g_o = [
        torch.addcmul(torch.addcmul(g[i][0] * oc[0], g[i][1], oc[1]), g[i][2], oc[2])
        for i in range(3)
    ]
    o_g_o = torch.addcmul(torch.addcmul(oc[0] * g_o[0], oc[1], g_o[1]), oc[2], g_o[2])
    o_o = torch.addcmul(torch.addcmul(oc[0] * oc[0], oc[1], oc[1]), oc[2], oc[2])
    o_dh = torch.addcmul(torch.addcmul(oc[0] * dh[0], oc[1], dh[1]), oc[2], dh[2])
    mass = torch.addcmul(d_mass + o_dh - o_g_o, o_o, trace)
    # ∂J/∂(R h_local) = ∂J/∂h + 2 (tr G o − G o); ∂J/∂h_local = Rᵀ of it
    d_rh = [torch.addcmul(dh[i] - 2.0 * g_o[i], trace, oc[i], value=2.0) for i in range(3)]
    h_local = [
        torch.addcmul(torch.addcmul(rot[0][k] * d_rh[0], rot[1][k], d_rh[1]), rot[2][k], d_rh[2])
        for k in range(3)
    ]
    # ∂J/∂Ī_local = Rᵀ G R, off-diagonal entries counted twice in the 6-vector
    gr = [
        [
            torch.addcmul(
                torch.addcmul(g[i][0] * rot[0][d], g[i][1], rot[1][d]), g[i][2], rot[2][d]
            )
            for d in range(3)
        ]
        for i in range(3)
    ]
    local = []
    for k, d in SYM_PAIRS:
        entry = torch.addcmul(
            torch.addcmul(rot[0][k] * gr[0][d], rot[1][k], gr[1][d]), rot[2][k], gr[2][d]
        )
        local.append(entry if k == d else 2.0 * entry)
    return torch.stack((mass, *h_local, *local))


def unflat_param(grad: Tensor, batch: torch.Size, shape: torch.Size) -> Tensor:
    """Gradient [*reversed(rest), Bt] of a flattened parameter field → its shape [Np, *rest]."""
    rest = shape[1:]
    nb = len(batch)
    g = grad.reshape(*reversed(rest), *batch)
    g = g.permute(*range(len(rest), len(rest) + nb), *reversed(range(len(rest))))
    if nb > 1:
        g = g.sum(tuple(range(1, nb)))
    return g.sum_to_size(shape)
