"""Batched, differentiable rigid-body dynamics in torch over parameter particles.

Every particle has its own body inertias, joint placement translations (link lengths), friction,
armature and gravity (:class:`~dynid.model.params.DynamicParameters`, leading dim N), and states
carry extra batch dims ``*B`` (time steps, shooting windows): q, v, a, tau are ``[N, *B, nv]``.

Formulation: joint motion subspaces, velocities, accelerations and body inertias are expressed
in the **world frame** about the world origin, spatial vectors ordered (ω, v_O) (Featherstone,
*Rigid Body Dynamics Algorithms*, §2 and "RNEA in base coordinates", §5.3). In world
coordinates a body's velocity is the sum of its ancestors' joint motions,
V_k = Σ_{j ⪯ k} S_j q̇_j, and a composite inertia is the sum of its descendants' inertias, so the
recursions of RNEA and CRBA become masked sums over the fixed ancestor matrix of the tree (one
matrix product each). Only the forward kinematics (one 3×3 product per body) loops over the
bodies; everything else is one batched operation over (particles, *B, bodies).

Layout: internally every quantity is component-first with the flattened batch last (vectors
[3, nv, Bt], matrices [3, 3, nv, Bt], spatial vectors [3, 2, nv, Bt] with (angular, linear) in
dim 1, Bt = N·prod(*B)), so 3×3 products, dot and cross products are a few fused multiply-adds on
contiguous rows of length Bt (:mod:`dynid.model.cf_algebra`).

Forward dynamics: CRBA + Cholesky. The kinematics, world inertias and motion subspaces are
computed once and shared by the bias C(q, v)v + g(q) (RNEA with q̈ = 0) and the mass matrix
M_ij = S_iᵀ I^c_j S_j (i ⪯ j, from the composite inertias); M is factorised and solved in the
component-first layout (:mod:`dynid.model.cf_cholesky`: the right-hand side rides along the
factorisation), without the transposes to and from a batch-first LAPACK call; below a
flattened batch of ``LAPACK_BELOW`` systems LAPACK is faster and is used instead.

Gradients of q̈ come from the implicit function theorem instead of differentiating through the
factorisation: q̈ solves r(q, v, τ, θ, q̈) = ID(q, v, q̈; θ) + τ_friction(v) − τ = 0, so for a
cotangent ḡ of q̈, λ = M⁻¹ ḡ (one solve with the saved factor) and the cotangents of the inputs
are −λᵀ ∂r/∂(q, v, τ, θ) at fixed q̈ (the relation ∂q̈/∂x = −M⁻¹ ∂ID/∂x that Pinocchio's
``computeABADerivatives`` rests on; Carpentier and Mansard, RSS 2018). That vector-Jacobian
product of inverse dynamics is computed analytically in the same world-frame layout, reusing
the kinematics, inertias and RNEA terms of the forward pass, so neither pass records an autograd
graph of the rigid-body algorithms.
Forward-mode derivatives (``torch.func.jvp``/``jacfwd``) use the same identity with autograd's
forward mode through inverse dynamics. Second derivatives through
:meth:`TorchDynamics.forward_dynamics` are refused (``once_differentiable``). The autograd node
is :class:`_ForwardDynamicsFunction`, next to the passes it calls; the saved forward quantities and
the vector-Jacobian product of inverse dynamics live in :mod:`dynid.model.dynamics_grad`, and
:meth:`TorchDynamics._residual_vjp` maps them to the inputs.

Memory: the forward pass writes every component into a preallocated destination instead of
building temporaries and stacking them (``out=`` fused multiply-adds,
:class:`~dynid.model.cf_algebra.Buffers`). Intermediates live in per-thread scratch buffers of
the :class:`TorchDynamics`, one set per flattened batch size (the last ``SCRATCH_SIZES``); the
saved quantities (kinematics, inertias, RNEA terms, factor) go there too when no backward pass
will read them, and otherwise into fresh tensors per call, or, inside
:meth:`TorchDynamics.recycling_tapes`, into blocks reused once their graph is freed. Results
returned to the caller never alias a reused buffer. ``rnea``, ``mass_matrix`` and the forward
mode build fresh tensors through the same code, which autograd differentiates. The backward
pass uses the same scratch buffers for its intermediates.

Replay: the calls after the first with inputs of the same shapes do not run this Python code
again. The operators of the second call are recorded (:mod:`dynid.model.op_replay`: views
dropped, fresh results turned into ``out=`` writes) and later calls copy their inputs in and replay
the ≈ 250 kernels: the same kernels on the same buffers, bitwise the same results. This holds
for the forward pass without a tape, and, inside :meth:`TorchDynamics.recycling_tapes`, for the
forward pass writing into a recycled tape block and for its vector-Jacobian product (the
checkpointed backward pass of a rollout); ``TorchDynamics(replay=False)`` runs the Python code
at every call (``dynid_bench.model`` times both). A forward pass with nothing to
differentiate keeps only q̈, so its replay plans the other intermediates into shared memory
(:meth:`TorchDynamics._qdd`): same kernels, other addresses, bitwise the same results, fewer
bytes touched. A recording or replay that fails (it rests on torch internals) runs the Python code
instead, from then on, with a warning (:class:`~dynid.model.op_replay.ProgramCache`).

Threads: CPU parallelism is torch's intra-op threads only; the batch is not split across Python
threads. Split over a thread pool, the pieces serialise on the GIL between torch calls and the
replayed kernels share one memory bandwidth, so the split was slower (the measurements are in
``docs/results/model.md``).

The articulated-body algorithm (:mod:`dynid.model.aba`) is kept as
:meth:`TorchDynamics.forward_dynamics_aba`, the measured alternative; ``dynid_bench.model``
reports both.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor
from torch.autograd.forward_ad import unpack_dual
from torch.autograd.function import FunctionCtx, once_differentiable

from dynid.model.aba import articulated_body_forward_dynamics
from dynid.model.cf_algebra import (
    SYM,
    Buffers,
    apply_inertia,
    cf_cross,
    cf_dot,
    cf_matmul,
    cf_matvec,
    force_cross,
    motion_cross,
    rows,
    spatial_dot,
    spatial_parts,
    stacked,
    sum_products,
    tree_sum,
)
from dynid.model.cf_cholesky import spd_apply_inverse, spd_solve_
from dynid.model.dynamics_grad import (
    Tape,
    TapeBlock,
    rigid_body_vjp,
    unflat_param,
)
from dynid.model.errors import StateError
from dynid.model.op_replay import ProgramCache, Stage, transformed
from dynid.model.params import DynamicParameters
from dynid.model.robot import JointKind, RobotModel

__all__ = ["DEFAULT_COULOMB_SMOOTHING", "TorchDynamics", "bias_torque", "friction_torque"]

DEFAULT_COULOMB_SMOOTHING = 1.0e-2
"""Velocity scale ε (rad/s or m/s) of the smooth Coulomb term tanh(v/ε)."""


def friction_torque(
    p: DynamicParameters, v: Tensor, eps: float, direction: Tensor | None = None
) -> Tensor:
    """Joint friction and torque bias [N, *B, nv] (N·m or N), dynid's own terms.

    τ_f = d·v + (μ_c + Δ·exp(−(ξ v)²))·tanh(v/ε) + τ_0 + φ1 σ(φ2 (v + φ3)) − φ1 σ(φ2 φ3):
    viscous damping d, kinetic Coulomb friction μ_c smoothed by tanh, the Stribeck rise Δ at low
    speed with transition rate ξ (lm paper eq. 4.1), a constant torque offset τ_0 (the bias of a
    joint torque sensor), and the sigmoid friction of Gaz et al. 2019 (their Table I, σ the
    logistic function; zero at v = 0). The parameters broadcast from [N, nv] over the extra batch
    dims of v [N, *B, nv]. ``direction`` [N, *B, nv], when given, stands for tanh(v/ε) (the
    direction of recorded samples low-passed like their efforts,
    :class:`dynid.data.preprocess.FilteredMotion`).
    """
    sign = torch.tanh(v / eps) if direction is None else direction
    friction = _friction(p.damping, p.coulomb, p.stribeck_delta, p.stribeck_rate, v, sign)
    bias = bias_torque(p, v)
    return friction if bias is None else friction + bias


def bias_torque(p: DynamicParameters, v: Tensor) -> Tensor | None:
    """τ_0 + φ1 σ(φ2 (v + φ3)) − φ1 σ(φ2 φ3) [N, *B, nv] of :func:`friction_torque`, or ``None``
    when the offsets and sigmoid scales are all zero and nothing differentiates them (then the
    term is zero and is skipped)."""
    fields = (p.torque_offset, p.sigmoid_scale, p.sigmoid_rate, p.sigmoid_shift)
    traced = any(
        x.requires_grad or transformed(x) or unpack_dual(x).tangent is not None for x in fields
    )
    if not traced and not bool(p.torque_offset.any() or p.sigmoid_scale.any()):
        return None
    extra = v.dim() - 2

    def b(t: Tensor) -> Tensor:
        return t.reshape(t.shape[0], *([1] * extra), t.shape[-1])

    scale, rate, shift = b(p.sigmoid_scale), b(p.sigmoid_rate), b(p.sigmoid_shift)
    sigmoid = scale * (torch.sigmoid(rate * (v + shift)) - torch.sigmoid(rate * shift))
    return b(p.torque_offset) + sigmoid


def _friction(
    damping: Tensor, coulomb: Tensor, delta: Tensor, rate: Tensor, v: Tensor, sign: Tensor
) -> Tensor:
    """:func:`friction_torque` from its parameter fields, each [N, nv], with ``sign`` the dry
    terms' direction (tanh(v/ε)) [N, *B, nv]."""
    extra = v.dim() - 2

    def b(t: Tensor) -> Tensor:
        return t.reshape(t.shape[0], *([1] * extra), t.shape[-1])

    stribeck = b(delta) * torch.exp(-((b(rate) * v) ** 2))
    return b(damping) * v + (b(coulomb) + stribeck) * sign


def _friction_vjp(
    damping: Tensor,
    coulomb: Tensor,
    delta: Tensor,
    rate: Tensor,
    v: Tensor,
    eps: float,
    cotangent: Tensor,
    wanted: Sequence[str],
) -> dict[str, Tensor]:
    """cᵀ ∂τ_f/∂x of :func:`_friction` for x in ``wanted`` ("v" and the parameter names).

    With e = exp(−(ξ v)²), t = tanh(v/ε): ∂τ_f/∂v = d + (μ_c + Δ e)(1 − t²)/ε − 2Δ e ξ² v t,
    ∂τ_f/∂d = v, ∂τ_f/∂μ_c = t, ∂τ_f/∂Δ = e t, ∂τ_f/∂ξ = −2Δ e ξ v² t. v and the cotangent c
    are [N, *B, nv]; the parameter gradients are summed over *B to the parameters' shapes.
    """
    extra = v.dim() - 2

    def b(x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *([1] * extra), x.shape[-1])

    def reduce(x: Tensor, like: Tensor) -> Tensor:
        return (x.sum(tuple(range(1, 1 + extra))) if extra else x).sum_to_size(like.shape)

    d, mu, dl, xi = b(damping), b(coulomb), b(delta), b(rate)
    t = torch.tanh(v / eps)
    e = torch.exp(-((xi * v) ** 2))
    ct = cotangent * t
    de_ct = dl * e * ct  # c Δ e t
    grads: dict[str, Tensor] = {}
    if "v" in wanted:
        sech2 = (1.0 - t * t) / eps
        grads["v"] = cotangent * (d + (mu + dl * e) * sech2) - 2.0 * de_ct * xi * xi * v
    if "damping" in wanted:
        grads["damping"] = reduce(cotangent * v, damping)
    if "coulomb" in wanted:
        grads["coulomb"] = reduce(ct, coulomb)
    if "stribeck_delta" in wanted:
        grads["stribeck_delta"] = reduce(e * ct, delta)
    if "stribeck_rate" in wanted:
        grads["stribeck_rate"] = reduce(-2.0 * de_ct * xi * v * v, rate)
    return grads


class _Fields(NamedTuple):
    """The :class:`DynamicParameters` fields the dynamics read, leading dim N (or 1)."""

    inertia: Tensor  # [N, nv, 10]
    joint_translation: Tensor  # [N, nv, 3]
    armature: Tensor  # [N, nv]
    gravity: Tensor  # [N, 3]
    damping: Tensor  # [N, nv]
    coulomb: Tensor  # [N, nv]
    stribeck_delta: Tensor  # [N, nv]
    stribeck_rate: Tensor  # [N, nv]

    @classmethod
    def of(cls, p: DynamicParameters) -> _Fields:
        return cls(*(getattr(p, name) for name in cls._fields))


class _Constants:
    """Robot tables as tensors on one dtype/device, component-first (trailing batch dim 1)."""

    def __init__(self, robot: RobotModel, dtype: torch.dtype, device: torch.device) -> None:
        def t(x: np.ndarray) -> Tensor:
            return torch.as_tensor(x, dtype=dtype, device=device)

        def component_first(x: np.ndarray) -> Tensor:  # [nv, *c] → [*c, nv, 1]
            return t(np.moveaxis(x, 0, -1)[..., None])

        nv = robot.nv
        axes = robot.joint_axes
        rot_placement = robot.placement_rotations
        k = np.stack([np.cross(np.eye(3), a) for a in axes])  # skew(axis): row i = e_i × axis
        self.axes = t(axes)
        # Rodrigues: Rp·R(axis, q) = Rp + sin q·(Rp K) + (1 − cos q)·(Rp K²), K = skew(axis)
        self.rot_placement = component_first(rot_placement)  # [3, 3, nv, 1]
        self.rot_k = component_first(rot_placement @ k)
        self.rot_k2 = component_first(rot_placement @ k @ k)
        self.axes_in_parent = component_first(np.einsum("jab,jb->ja", rot_placement, axes))
        self.axes_cf = component_first(axes)  # [3, nv, 1], each joint's axis in its own frame
        revolute = np.array([kind is JointKind.REVOLUTE for kind in robot.joint_kinds])
        self.revolute = t(revolute.astype(np.float64))
        self.prismatic = 1.0 - self.revolute
        self.all_revolute = bool(revolute.all())
        self.revolute_col = self.revolute.unsqueeze(-1)  # [nv, 1]
        self.prismatic_col = self.prismatic.unsqueeze(-1)
        ancestors = np.zeros((nv, nv))
        for body in range(nv):
            j = body
            while j >= 0:
                ancestors[body, j] = 1.0
                j = int(robot.parents[j])
        self.ancestors = t(ancestors)  # [k, j] = 1 if j is k or an ancestor of k
        # parent body index + 1 (0 for the world), to pick the parent's pose from [world, bodies]
        self.parent_slot = torch.tensor([int(j) + 1 for j in robot.parents], device=device)
        self.descendants = t(ancestors.T.copy())  # [j, k]
        upper = ancestors.T  # [i, j] = 1 if i is j or an ancestor of j
        # a chain relates every pair: its M needs no mask (entries of unrelated bodies are zero)
        self.chain = bool(np.all(np.triu(upper) == np.triu(np.ones((nv, nv)))))
        self.upper_mask_col = t(upper[..., None])  # [nv, nv, 1]
        self.strict_upper_mask_col = t((upper - np.eye(nv))[..., None])  # i a proper ancestor


class _Kinematics(NamedTuple):
    """World-frame joint poses for a flattened batch, component-first.

    R: [3, 3, nv, Bt] orientation of each joint (body) frame in the world; o: [3, nv, Bt] its
    origin in the world (m).
    """

    R: Tensor
    o: Tensor


SCRATCH_SIZES = 4
"""Flattened batch sizes whose scratch buffers a :class:`TorchDynamics` keeps (per thread)."""


class _Space(NamedTuple):
    """Scratch of one flattened batch size: buffers by (name, shape) and the recorded passes."""

    tensors: dict[tuple, Tensor]
    programs: ProgramCache


def _component_first(x: Tensor, batch_dims: int) -> Tensor:
    """An empty tensor shaped like ``x`` [*batch, *rest] laid out as [*reversed(rest), *batch],
    the order of the flattened batch-last layout (states [N, *B, nv] → [nv, N, *B], parameter
    fields [N, *rest] → [*reversed(rest), N]): a replayed forward pass reads such staged
    inputs without transposing them."""
    order = list(range(x.dim()))[batch_dims:][::-1] + list(range(batch_dims))
    empty = x.new_empty([x.shape[d] for d in order])
    return empty.permute(*[order.index(d) for d in range(x.dim())])


def _stage_state(x: Tensor) -> Tensor:
    """:func:`_component_first` for a state [N, *B, nv]."""
    return _component_first(x, x.dim() - 1)


def _stage_field(x: Tensor) -> Tensor:
    """:func:`_component_first` for a parameter field [N, *rest]."""
    return _component_first(x, 1)


def check_state(robot: RobotModel, name: str, x: Tensor) -> None:
    """Raise ``StateError`` unless ``x`` is a finite tensor ``[N, *B, nv]`` of ``robot``.

    The error names the offending joints (non-finite values) or the expected shape.
    """
    nv = robot.nv
    if not isinstance(x, Tensor):
        raise StateError(f"{name} must be a torch.Tensor [N, *B, {nv}], got {type(x)}")
    if x.dim() < 2 or x.shape[-1] != nv:
        raise StateError(
            f"{name} has shape {tuple(x.shape)}, expected [N, *B, {nv}] for joints "
            f"{robot.joint_names}"
        )
    if not bool(torch.isfinite(x).all()):
        bad = torch.nonzero(~torch.isfinite(x).reshape(-1, nv).all(0)).flatten()
        joints = [robot.joint_names[i] for i in bad.tolist()]
        raise StateError(f"{name} has non-finite values for joints {joints}")


class _ForwardDynamicsFunction(torch.autograd.Function):
    """q̈ by CRBA + Cholesky with gradients from the implicit function theorem (module notes).

    Inputs: the :class:`TorchDynamics`, the :class:`~dynid.model.dynamics_grad.TapeBlock` that
    holds the saved quantities when a backward pass will read them (None: autograd records
    nothing, they live in scratch buffers that the next call overwrites, which forward mode,
    evaluated inside the call, allows), then q, v, tau [N, *B, nv] and the parameter fields it
    reads (:meth:`TorchDynamics._solve`); outputs q̈ [N, *B, nv], the factor and the
    :class:`~dynid.model.dynamics_grad.Tape` (non-differentiable).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(
        dyn: TorchDynamics,
        block: TapeBlock | None,
        q: Tensor,
        v: Tensor,
        tau: Tensor,
        *fields: Tensor,
    ) -> Any:
        qdd, factor, tape = dyn._solve(q, v, tau, fields, block)
        return qdd, factor, *tape

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> None:
        dyn, block, *tensors = inputs
        recycled = block is not None and block.pool is not None
        if recycled:
            weakref.finalize(ctx, block.pool.append, block)  # reusable once the graph is freed
        qdd, *saved = output
        ctx.dyn = dyn  # type: ignore[attr-defined]
        ctx.block = block if recycled else None  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(*saved)
        ctx.set_materialize_grads(False)  # no zero cotangents for the factor and the tape
        ctx.save_for_backward(*tensors, qdd, *saved)
        ctx.save_for_forward(*tensors, qdd, saved[0])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_qdd: Tensor | None, *_: Tensor | None) -> Any:
        saved = ctx.saved_tensors
        if grad_qdd is None:
            return (None,) * len(ctx.needs_input_grad)
        n_inputs = len(saved) - 2 - len(Tape._fields)
        inputs, (qdd, factor, *tape) = saved[:n_inputs], saved[n_inputs:]
        dyn: TorchDynamics = ctx.dyn
        grads = dyn._forward_dynamics_vjp(
            inputs, qdd, factor, Tape(*tape), grad_qdd, ctx.needs_input_grad[2:], ctx.block
        )
        return (None, None, *grads)

    @staticmethod
    def jvp(ctx: Any, _dyn: None, _block: None, *tangents: Tensor | None) -> Any:
        *inputs, qdd, factor = ctx.saved_tensors
        dyn: TorchDynamics = ctx.dyn
        # Broadcast (expanded) primals or tangents cannot carry a dual: give each its own memory.
        filled = tuple(
            torch.zeros_like(x) if t is None else t.contiguous()
            for x, t in zip(inputs, tangents, strict=True)
        )
        primals = tuple(x.contiguous() for x in inputs)
        _, d_residual = torch.func.jvp(lambda *x: dyn._residual(*x, qdd), primals, filled)
        return -dyn._apply_inverse(factor, d_residual), *([None] * len(Tape._fields)), None


class TorchDynamics:
    """Batched torch dynamics of ``robot`` for per-particle :class:`DynamicParameters`.

    Args:
        robot: the robot (revolute and prismatic joints; fixed joints merged by Pinocchio).
        dtype: floating dtype of the computation (float64 by default).
        device: torch device ("cpu", "cuda", ...).
        coulomb_smoothing: ε of tanh(v/ε) in the Coulomb term (rad/s or m/s).
        check_inputs: validate shapes and finiteness of every state argument (names the
            argument in a :class:`StateError`); turn off inside hot loops once inputs are trusted.
        replay: let :meth:`forward_dynamics` without gradients (and, inside
            :meth:`recycling_tapes`, its forward pass into a recycled tape and backward step)
            replay the recorded operators after the first calls with inputs of the same shapes
            (:mod:`dynid.model.op_replay`; same results to the bit, about a third less time on
            a CPU); off: always the Python code.

    All methods take q, v, a, tau as ``[N, *B, nv]`` (N particles, any extra batch dims) and
    parameters with leading dim N (or 1, broadcast); N of the states may also be 1 against
    N parameter particles. Gradients flow to every parameter field and state.
    """

    def __init__(
        self,
        robot: RobotModel,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
        coulomb_smoothing: float = DEFAULT_COULOMB_SMOOTHING,
        check_inputs: bool = True,
        replay: bool = True,
    ) -> None:
        self.robot = robot
        self.nv = robot.nv
        self.dtype = dtype
        self.device = torch.device(device)
        self.coulomb_smoothing = float(coulomb_smoothing)
        self.check_inputs = check_inputs
        self.replay = replay
        self._const = _Constants(robot, dtype, self.device)
        self._parents = [int(j) for j in robot.parents]
        self._scratch = threading.local()  # per thread: scratch buffers of the forward pass

    # --- input handling -------------------------------------------------------------------

    def _check(self, name: str, x: Tensor) -> None:
        if self.check_inputs:
            check_state(self.robot, name, x)

    def _param(self, p: DynamicParameters, field: Tensor, extra: int) -> Tensor:
        """[Np, ...] parameter field → [Np, 1 × extra, ...] to broadcast over *B."""
        return field.reshape(field.shape[0], *([1] * extra), *field.shape[1:])

    def _check_params(self, p: DynamicParameters, x: Tensor) -> None:
        if not self.check_inputs:
            return
        shape = tuple(p.inertia.shape[1:])
        if shape != (self.nv, 10):
            raise StateError(f"inertia has shape {tuple(p.inertia.shape)}, expected [N, nv, 10]")
        n_p, n_x = p.n, x.shape[0]
        if n_p != n_x and 1 not in (n_p, n_x):
            raise StateError(f"parameter batch N={n_p} does not broadcast with state batch N={n_x}")

    def _batch(self, n_params: int, *states: Tensor) -> torch.Size:
        """Broadcast batch shape (N, *B) of the states and the parameter particles."""
        extra = states[0].dim() - 2
        return torch.Size(
            np.broadcast_shapes(*(x.shape[:-1] for x in states), (n_params,) + (1,) * extra)
        )

    def _flat_state(self, x: Tensor, batch: torch.Size) -> Tensor:
        """State [N, *B, nv] → [nv, Bt] (contiguous, batch last)."""
        return x.expand(*batch, self.nv).reshape(-1, self.nv).T.contiguous()

    def _unflat_state(self, x: Tensor, batch: torch.Size) -> Tensor:
        """[nv, Bt] → [N, *B, nv]."""
        return x.T.reshape(*batch, self.nv)

    def _flat_param(self, field: Tensor, batch: torch.Size) -> Tensor:
        """Parameter field [Np, *rest] broadcast over ``batch`` → [*reversed(rest), Bt].

        One copy: e.g. inertia [Np, nv, 10] → [10, nv, Bt], gravity [Np, 3] → [3, Bt].
        """
        rest = field.shape[1:]
        field = field.reshape(field.shape[0], *([1] * (len(batch) - 1)), *rest)
        field = field.expand(*batch, *rest)
        nb = len(batch)
        order = [nb + i for i in reversed(range(len(rest)))] + list(range(nb))
        return field.permute(*order).reshape(*reversed(rest), -1)

    # --- building blocks (flattened, component-first) -------------------------------------
    # Each takes optional destinations (``out``, or ``buf`` for its intermediates): given, it
    # writes in place without autograd (the forward pass of :meth:`_solve`); without, it builds
    # fresh tensors that autograd differentiates (:mod:`dynid.model.cf_algebra`).

    def _local_pose(self, q: Tensor, translation: Tensor, out: Tensor | None = None) -> Tensor:
        """Pose of each joint frame in its parent, [R_loc | t_loc]: [3, 4, nv, Bt].

        q: [nv, Bt]; translation: [3, nv, Bt] joint placement translations (m).
        """
        c = self._const
        angle = q if c.all_revolute else q * c.revolute_col
        dest_rot, dest_t = (None, None) if out is None else (out[:, :3], out[:, 3])
        rot = sum_products(
            [(torch.sin(angle), c.rot_k, 1.0), (1.0 - torch.cos(angle), c.rot_k2, 1.0)],
            dest_rot,
            c.rot_placement,
        )
        if not c.all_revolute:
            translation = torch.addcmul(
                translation, c.axes_in_parent, q * c.prismatic_col, out=dest_t
            )
        elif dest_t is not None:
            dest_t.copy_(translation)
        return out if out is not None else torch.cat((rot, translation.unsqueeze(1)), 1)

    def _kinematics(self, q: Tensor, translation: Tensor, buf: Buffers) -> _Kinematics:
        """World poses by one [3, 3] × [3, 4] product per body.

        Each local block [R_loc | t_loc] times the parent's world rotation gives the body's
        [R | R_p t_loc]; q: [nv, Bt], translation: [3, nv, Bt] (m).
        """
        nv, bt = q.shape
        # unbind rather than indexing: one gradient buffer for all the pieces
        local = self._local_pose(q, translation, buf("local", 3, 4, nv, bt)).unbind(2)
        pose = buf("pose", 3, 4, nv, bt, tape=True)
        dest = [None] * nv if pose is None else pose.unbind(2)  # nv × [3, 4, Bt]
        rotations: list[Tensor] = []
        origins: list[Tensor] = []
        for i, parent in enumerate(self._parents):
            if parent < 0:
                block = local[i] if dest[i] is None else dest[i].copy_(local[i])
                origin = block[:, 3]
            else:
                block = cf_matmul(rotations[parent], local[i], dest[i])
                into = None if pose is None else block[:, 3]
                origin = torch.add(block[:, 3], origins[parent], out=into)
            rotations.append(block[:, :3])
            origins.append(origin)
        if pose is not None:
            return _Kinematics(pose[:, :3], pose[:, 3])
        return _Kinematics(torch.stack(rotations, 2), torch.stack(origins, 1))

    def _world_inertia(self, pi: Tensor, kin: _Kinematics, buf: Buffers) -> Tensor:
        """Body inertias about the world origin in world axes from the local π [10, nv, Bt].

        Returns [10, nv, Bt] in π's order (m, h = m·c, Ī_O as xx, xy, yy, xz, yz, zz), by
        rotation and the parallel-axis theorem: with h = m o + R h_local,
        Ī_O = R Ī Rᵀ + (m|o|² + 2 o·Rh) 1 − (o hᵀ + Rh oᵀ). Column by column on 3-vectors:
        the entries (a ≤ b) of column b are rows 4 + b(b + 1)/2 … of the result, in π's order.
        """
        nv, bt = pi.shape[1:]
        out = buf("bodies", 10, nv, bt, tape=True)
        m, *rest = pi.unbind(0)
        h_local, i6 = rest[:3], rest[3:]
        columns = kin.R.unbind(1)  # R[:, c], [3, nv, Bt]
        R = [row.unbind(0) for row in kin.R.unbind(0)]  # R[a][c]
        o, oc = kin.o, kin.o.unbind(0)
        rh = sum_products([(columns[c], h_local[c], 1.0) for c in range(3)], buf("rh", 3, nv, bt))
        h = torch.addcmul(rh, m, o, out=None if out is None else out[1:4])
        y_dest = rows(buf("Y", 3, 3, nv, bt), 3)
        Y = [  # Y[b] = (R Ī)[:, b]
            sum_products([(columns[c], i6[SYM[c][b]], 1.0) for c in range(3)], y_dest[b])
            for b in range(3)
        ]
        o_o = cf_dot(o, o, buf("o_o", nv, bt))
        rhc = rh.unbind(0)
        diagonal = sum_products(
            [(m, o_o, 1.0), *[(oc[c], rhc[c], 2.0) for c in range(3)]], buf("diagonal", nv, bt)
        )
        world = []
        for b in range(3):
            first = 4 + b * (b + 1) // 2
            terms = [(Y[c][: b + 1], R[b][c], 1.0) for c in range(3)]
            terms += [(o[: b + 1], h[b], -1.0), (rh[: b + 1], oc[b], -1.0)]
            column = sum_products(terms, None if out is None else out[first : first + b + 1])
            column[b].add_(diagonal)
            world.append(column)
        if out is not None:
            out[0].copy_(m)
            return out
        return torch.cat((m.unsqueeze(0), h, *world))

    def _motion_subspace(self, kin: _Kinematics, buf: Buffers) -> Tensor:
        """World joint motion subspaces S [3, 2, nv, Bt]: (S_ω, S_v) about the world origin."""
        c = self._const
        nv, bt = kin.o.shape[1:]
        out = buf("S", 3, 2, nv, bt, tape=True)
        mixed = not c.all_revolute
        dest_w, dest_v = (None, None) if out is None else (out[:, 0], out[:, 1])
        z = cf_matvec(kin.R, c.axes_cf, None if mixed else dest_w)
        moment = cf_cross(kin.o, z, None if mixed else dest_v)
        if mixed:
            moment = sum_products(
                [(moment, c.revolute_col, 1.0), (z, c.prismatic_col, 1.0)], dest_v
            )
            z = torch.mul(z, c.revolute_col, out=dest_w)
        return stacked((z, moment), out, 1)

    def _crba(self, S: Tensor, bodies: Tensor, buf: Buffers, out: Tensor | None = None) -> Tensor:
        """G [nv, nv, Bt] with G_ij = S_iᵀ I^c_j S_j, the mass matrix entry M_ij for i ⪯ j.

        Entries of unrelated pairs are zeroed (trees); no armature. Six fused multiply-adds of
        outer products over the whole [nv, nv, Bt] block; ``out`` may be a view [nv, nv, Bt] of a
        larger system.
        """
        nv, bt = S.shape[2:]
        composite = tree_sum(self._const.descendants, bodies, buf("composite", 10, nv, bt))
        F = apply_inertia(composite, S, buf("IcS", 3, 2, nv, bt))  # I^c_j S_j
        s = S.reshape(6, nv, 1, bt).unbind(0)
        f = F.reshape(6, 1, nv, bt).unbind(0)
        G = sum_products([(s[k], f[k], 1.0) for k in range(6)], out)
        if self._const.chain:
            return G
        return torch.mul(G, self._const.upper_mask_col, out=out)

    def _rnea_terms(
        self,
        S: Tensor,
        bodies: Tensor,
        v: Tensor,
        a: Tensor | None,
        gravity: Tensor,
        buf: Buffers,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """RNEA in world coordinates: (V, A, P = I V, I A, F) per body, each [3, 2, nv, Bt].

        V velocity, A acceleration (with the base acceleration −g), F = Σ_{k ⪰ j} f_k the force
        across joint j, f_k = I_k A_k + V_k ×* P_k. S: motion subspaces [3, 2, nv, Bt]; v, a:
        [nv, Bt] (a = None: q̈ = 0, the bias); gravity: [3, Bt] (m/s²).
        """
        ancestors = self._const.ancestors
        nv, bt = v.shape
        motions = buf("V_A", 2, 3, 2, nv, bt, tape=True)  # V and A, each contiguous
        momenta = buf("P_IA", 2, 3, 2, nv, bt, tape=True)
        dest = [None, None] if motions is None else motions.unbind(0)
        s = torch.mul(S, v, out=buf("s", 3, 2, nv, bt))
        V = tree_sum(ancestors, s, dest[0])  # body velocities
        acc = motion_cross(V, s, buf("acc", 3, 2, nv, bt))  # Ṡ_j q̇_j = V_j ×ₘ S_j q̇_j
        if a is not None:
            acc = torch.addcmul(acc, S, a)
        A = tree_sum(ancestors, acc, dest[1])
        A[:, 1] -= gravity.unsqueeze(1)  # base acceleration −g
        both = None if motions is None else motions.permute(1, 2, 0, 3, 4)
        both_out = None if momenta is None else momenta.permute(1, 2, 0, 3, 4)
        P, IA = apply_inertia(bodies, stacked((V, A), both, 2), both_out).unbind(2)
        f = force_cross(((V, P, 1.0),), IA, buf("f", 3, 2, nv, bt))
        F = tree_sum(self._const.descendants, f, buf("F", 3, 2, nv, bt, tape=True))
        return V, A, P, IA, F

    # --- cores on flattened inputs ---------------------------------------------------------

    def _solve(
        self, q: Tensor, v: Tensor, tau: Tensor, fields: Sequence[Tensor], tape: TapeBlock | None
    ) -> tuple[Tensor, Tensor, Tape]:
        """q̈ [N, *B, nv], the Cholesky factor of M (:func:`~dynid.model.cf_cholesky.spd_solve_`)
        and the forward quantities the backward pass reuses; ``fields`` in :class:`_Fields`
        order. ``tape``: where the factor and the tape go when a backward pass reads them after
        the call (:meth:`_tape_block`); None: scratch buffers, valid until the next call.

        The calls after the first with inputs of the same shapes (and, with a tape, the same
        recycled :class:`TapeBlock`) replay the recorded operators of :meth:`_compute`
        (:mod:`dynid.model.op_replay`; module notes).
        """
        if not self.replay or transformed(q) or (tape is not None and tape.pool is None):
            return self._compute(q, v, tau, fields, tape)
        qdd, factor, saved = self._replayed_forward(
            "solve", lambda *x: self._compute(*x[:3], x[3:], tape), q, v, tau, fields, tape
        )
        return qdd.clone(), factor, saved  # the next replay overwrites the program's q̈

    def _qdd(self, q: Tensor, v: Tensor, tau: Tensor, fields: Sequence[Tensor]) -> Tensor:
        """q̈ [N, *B, nv] alone, for a forward pass with nothing to differentiate.

        Its replayed program returns only q̈, so its intermediates (the factor and the forward
        quantities included) share memory (:func:`~dynid.model.op_replay.record` with
        ``plan``): on the Panda + box at N = 1024 a replay touches 5.0 MB instead of the
        12.1 MB of the program that keeps them.
        """
        if not self.replay or transformed(q):
            return self._compute(q, v, tau, fields, None)[0]
        qdd = self._replayed_forward(
            "qdd", lambda *x: self._compute(*x[:3], x[3:], None)[0], q, v, tau, fields, None, True
        )
        return qdd.clone()  # the next replay overwrites the program's q̈

    def _replayed_forward(
        self,
        kind: str,
        fn: Callable[..., Any],
        q: Tensor,
        v: Tensor,
        tau: Tensor,
        fields: Sequence[Tensor],
        tape: TapeBlock | None,
        plan: bool = False,
    ) -> Any:
        """``fn(q, v, tau, *fields)`` through :meth:`_replayed`, inputs staged component-first."""
        return self._replayed(
            kind,
            self._batch(fields[0].shape[0], q, v, tau).numel(),
            fn,
            (q, v, tau, *fields),
            tape,
            [_stage_state] * 3 + [_stage_field] * len(fields),
            plan=plan,
        )

    def _replayed(
        self,
        kind: str,
        bt: int,
        fn: Callable[..., Any],
        inputs: Sequence[Tensor],
        block: TapeBlock | None,
        stage: Sequence[Stage] | None = None,
        flags: tuple = (),
        plan: bool = False,
    ) -> Any:
        """``fn(*inputs)`` through this thread's programs for a flattened batch of ``bt``
        (:class:`~dynid.model.op_replay.ProgramCache`), keyed by ``kind``, the input shapes,
        ``flags``, the friction smoothing and the tape ``block`` it writes into; ``plan`` as
        in :func:`~dynid.model.op_replay.record`."""
        key = (kind, *(x.shape for x in inputs), *flags, self.coulomb_smoothing, id(block))
        return self._space(inputs[0], bt).programs.run(key, fn, inputs, block, stage, plan)

    def _compute(
        self, q: Tensor, v: Tensor, tau: Tensor, fields: Sequence[Tensor], tape: TapeBlock | None
    ) -> tuple[Tensor, Tensor, Tape]:
        """:meth:`_solve` by running the building blocks."""
        f = _Fields(*fields)
        batch = self._batch(f.inertia.shape[0], q, v, tau)
        nv, bt = self.nv, batch.numel()
        buf = self._buffers(q, bt, tape)
        rhs = tau - _friction(
            f.damping, f.coulomb, f.stribeck_delta, f.stribeck_rate, v, self._sign(v)
        )
        flat_v = self._flat_state(v, batch)
        kin = self._kinematics(
            self._flat_state(q, batch), self._flat_param(f.joint_translation, batch), buf
        )
        bodies = self._world_inertia(self._flat_param(f.inertia, batch), kin, buf)
        S = self._motion_subspace(kin, buf)
        terms = self._rnea_terms(S, bodies, flat_v, None, self._flat_param(f.gravity, batch), buf)
        system = buf("system", nv, nv + 1, bt, tape=True)
        dest_m, dest_b = (None, None) if system is None else (system[:, :nv], system[:, nv])
        G = self._crba(S, bodies, buf, dest_m)
        # b = τ − τ_f − S·F (the bias), into the last column of the system
        (sw, sv), (fw, fv) = spatial_parts(S), spatial_parts(terms[-1])
        bias_terms = [(x, y, -1.0) for x, y in zip(sw + sv, fw + fv, strict=True)]
        b = sum_products(bias_terms, dest_b, self._flat_state(rhs, batch))
        if system is None:
            system = torch.cat((G, b.unsqueeze(1)), 1)
        system.diagonal(dim1=0, dim2=1).add_(self._flat_param(f.armature, batch).T)
        qdd, factor = spd_solve_(system)
        return self._unflat_state(qdd, batch), factor, Tape(kin.R, kin.o, bodies, S, *terms)

    def _buffers(self, like: Tensor, bt: int, tape: dict | None) -> Buffers:
        """Destinations for :meth:`_solve` on a flattened batch of ``bt`` (this thread's scratch).

        Inside ``torch.func`` transforms (batched or wrapped tensors) there are none: in-place
        writes into plain buffers are not allowed there.
        """
        if transformed(like):
            return Buffers(None, like, tape=None)
        return Buffers(self._space(like, bt).tensors, like, tape=tape)

    def _space(self, like: Tensor, bt: int) -> _Space:
        """This thread's scratch for a flattened batch of ``bt`` (the last ``SCRATCH_SIZES``).

        Tensors made under ``torch.inference_mode`` cannot be written outside it: that mode has
        its own scratch.
        """
        spaces: OrderedDict[tuple, _Space] | None = getattr(self._scratch, "spaces", None)
        if spaces is None:
            spaces = self._scratch.spaces = OrderedDict()
        key = (bt, like.dtype, like.device, torch.is_inference_mode_enabled())
        space = spaces.get(key)
        if space is None:
            space = spaces[key] = _Space({}, ProgramCache())
            while len(spaces) > SCRATCH_SIZES:
                spaces.popitem(last=False)
        spaces.move_to_end(key)
        return space

    def _apply_inverse(self, factor: Tensor, x: Tensor) -> Tensor:
        """M⁻¹ x [N, *B, nv] for x [N, *B, nv] with the factor left by :meth:`_solve`."""
        batch = x.shape[:-1]
        return self._unflat_state(spd_apply_inverse(factor, self._flat_state(x, batch)), batch)

    def _inverse(self, q: Tensor, v: Tensor, a: Tensor, f: _Fields) -> Tensor:
        """τ = M(q)a + C(q, v)v + g(q) [N, *B, nv] with armature, without friction."""
        batch = self._batch(f.inertia.shape[0], q, v, a)
        none = Buffers(None, q, tape=None)
        kin = self._kinematics(
            self._flat_state(q, batch), self._flat_param(f.joint_translation, batch), none
        )
        bodies = self._world_inertia(self._flat_param(f.inertia, batch), kin, none)
        flat_a = self._flat_state(a, batch)
        S = self._motion_subspace(kin, none)
        gravity = self._flat_param(f.gravity, batch)
        forces = self._rnea_terms(S, bodies, self._flat_state(v, batch), flat_a, gravity, none)[-1]
        tau = torch.addcmul(spatial_dot(S, forces), self._flat_param(f.armature, batch), flat_a)
        return self._unflat_state(tau, batch)

    def _sign(self, v: Tensor) -> Tensor:
        """The dry friction's direction ``tanh(v/ε)`` [N, *B, nv]."""
        return torch.tanh(v / self.coulomb_smoothing)

    def _residual(self, q: Tensor, v: Tensor, tau: Tensor, *rest: Tensor) -> Tensor:
        """r = ID(q, v, q̈) + τ_friction(v) − τ [N, *B, nv]; ``rest`` = (*fields, q̈)."""
        *fields, qdd = rest
        f = _Fields(*fields)
        friction = _friction(
            f.damping, f.coulomb, f.stribeck_delta, f.stribeck_rate, v, self._sign(v)
        )
        return self._inverse(q, v, qdd, f) + friction - tau

    def _forward_dynamics_vjp(
        self,
        inputs: Sequence[Tensor],
        qdd: Tensor,
        factor: Tensor,
        tape: Tape,
        grad_qdd: Tensor,
        needs: Sequence[bool],
        block: TapeBlock | None,
    ) -> list[Tensor | None]:
        """Cotangents of (q, v, τ, fields) for the cotangent ḡ [N, *B, nv] of q̈ (module notes):
        λ = M⁻¹ ḡ with the saved factor, then −λᵀ ∂r/∂x (:meth:`_residual_vjp`).

        ``block``: the recycled :class:`TapeBlock` holding ``tape`` and ``factor``, if any; the
        calls after the first then replay the recorded operators (:mod:`dynid.model.op_replay`).
        """

        def vjp(grad_qdd: Tensor, qdd: Tensor, *inputs: Tensor) -> list[Tensor | None]:
            lam = self._apply_inverse(factor, grad_qdd)
            return self._residual_vjp(inputs, qdd, tape, -lam, needs)

        tensors = (grad_qdd, qdd, *inputs)
        if block is None or not self.replay or any(transformed(x) for x in tensors):
            return vjp(*tensors)
        bt = qdd.shape[:-1].numel()
        grads = self._replayed("vjp", bt, vjp, tensors, block, flags=tuple(needs))
        return [None if g is None else g.clone() for g in grads]  # overwritten by the next replay

    def _residual_vjp(
        self,
        inputs: Sequence[Tensor],
        qdd: Tensor,
        tape: Tape,
        cotangent: Tensor,
        needs: Sequence[bool],
    ) -> list[Tensor | None]:
        """μᵀ ∂r/∂(q, v, τ, fields) at fixed q̈ for r = ID(q, v, q̈) + τ_f(v) − τ.

        μ: cotangent [N, *B, nv]; inputs: (q, v, tau, *fields) as given to the autograd node.
        The rigid-body part is :func:`~dynid.model.dynamics_grad.rigid_body_vjp` on the
        flattened batch, the friction part is :func:`_friction_vjp`. Returns the gradients in the
        order and shapes of ``inputs`` (None where not needed).
        """
        names = ("q", "v", "tau", *_Fields._fields)
        need = dict(zip(names, needs, strict=True))
        batch = qdd.shape[:-1]
        c = self._const
        mu, a, flat_v = (self._flat_state(x, batch) for x in (cotangent, qdd, inputs[1]))
        flat = rigid_body_vjp(
            tape,
            mu,
            a,
            flat_v,
            ancestors=c.ancestors,
            descendants=c.descendants,
            parent_slot=c.parent_slot,
            pose=need["q"] or need["joint_translation"],
            translation=need["joint_translation"],
            inertia=need["inertia"],
            buf=self._buffers(mu, mu.shape[1], tape={}),
        )
        grads: list[Tensor | None] = []
        for name, x in zip(need, inputs, strict=True):
            if not need[name]:
                grads.append(None)
            elif name in ("q", "v"):
                grads.append(self._unflat_state(flat[name], batch).sum_to_size(x.shape))
            elif name == "tau":
                grads.append((-cotangent).sum_to_size(x.shape))
            elif name in flat:
                grads.append(unflat_param(flat[name], batch, x.shape))
            else:
                grads.append(None)
        f = _Fields(*inputs[3:])
        wanted = [name for name in names if need[name]]
        friction = _friction_vjp(
            f.damping,
            f.coulomb,
            f.stribeck_delta,
            f.stribeck_rate,
            inputs[1],
            self.coulomb_smoothing,
            cotangent,
            wanted,
        )
        for name, part in friction.items():
            i = names.index(name)
            part = part.sum_to_size(inputs[i].shape)
            grads[i] = part if grads[i] is None else grads[i] + part
        return grads

    # --- public API -----------------------------------------------------------------------

    def rnea(self, p: DynamicParameters, q: Tensor, v: Tensor, a: Tensor) -> Tensor:
        """Inverse dynamics τ = M(q)a + C(q, v)v + g(q) [N, *B, nv] (N·m or N).

        Like ``pinocchio.rnea``: M includes the armature (rotor inertia · a), and there is no
        damping or friction (dynid's own terms, :meth:`friction_torque`).
        """
        for name, x in (("q", q), ("v", v), ("a", a)):
            self._check(name, x)
        self._check_params(p, q)
        return self._inverse(q, v, a, _Fields.of(p))

    def mass_matrix(self, p: DynamicParameters, q: Tensor) -> Tensor:
        """Joint-space inertia M(q) [N, *B, nv, nv] (kg·m²), armature on the diagonal."""
        self._check("q", q)
        self._check_params(p, q)
        c = self._const
        batch = self._batch(p.n, q)
        none = Buffers(None, q, tape=None)
        kin = self._kinematics(
            self._flat_state(q, batch), self._flat_param(p.joint_translation, batch), none
        )
        bodies = self._world_inertia(self._flat_param(p.inertia, batch), kin, none)
        G = self._crba(self._motion_subspace(kin, none), bodies, none)
        # G[i, j] = M_ij where i ⪯ j; the strict upper part mirrors below
        M = G * c.upper_mask_col + (G * c.strict_upper_mask_col).transpose(0, 1)
        M = M.permute(2, 0, 1) + torch.diag_embed(self._flat_param(p.armature, batch).T)
        return M.reshape(*batch, self.nv, self.nv)

    def friction_torque(
        self, p: DynamicParameters, v: Tensor, direction: Tensor | None = None
    ) -> Tensor:
        """Damping, smooth Coulomb, Stribeck and sigmoid friction and the torque offsets
        [N, *B, nv], the dry terms along ``direction`` when given (:func:`friction_torque`)."""
        self._check("v", v)
        return friction_torque(p, v, self.coulomb_smoothing, direction)

    def forward_dynamics(self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor) -> Tensor:
        """q̈ = M(q)⁻¹ (τ − τ_friction(v) − C(q, v)v − g(q)) [N, *B, nv] by CRBA + Cholesky.

        Differentiable once (reverse and forward mode) in q, v, tau and the parameter fields
        through the implicit-function identity of the module notes.
        """
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x)
        self._check_params(p, q)
        bias = bias_torque(p, v)
        if bias is not None:  # outside the rigid-body node: autograd differentiates it
            tau = tau - bias
        fields = _Fields.of(p)
        inputs = (q, v, tau, *fields)
        tape = None  # the saved quantities live in scratch buffers unless a backward will read them
        if torch.is_grad_enabled() and any(x.requires_grad for x in inputs):
            tape = self._tape_block(self._batch(p.n, q, v, tau).numel(), q)
        elif not any(transformed(x) or unpack_dual(x).tangent is not None for x in inputs):
            return self._qdd(q, v, tau, fields)  # no derivative: no autograd node
        qdd, *_ = _ForwardDynamicsFunction.apply(self, tape, *inputs)
        return qdd

    def release_buffers(self) -> None:
        """Drop this thread's scratch buffers, recycled tape blocks and recorded programs.

        They are rebuilt on demand; call this to return their memory after a large batch (the
        scratch of up to ``SCRATCH_SIZES`` batch sizes is otherwise kept). Tensors returned
        earlier are unaffected: results never alias these buffers.
        """
        for name in ("spaces", "tape_pools"):
            self._scratch.__dict__.pop(name, None)

    @contextmanager
    def recycling_tapes(self) -> Iterator[None]:
        """Inside, the forward quantities that :meth:`forward_dynamics` saves for a backward pass
        are reused by a later call once the autograd graph that saved them has been freed.

        For loops that back-propagate through each call before they drop its graph (the
        checkpointed backward pass of :func:`~dynid.model.integrate.rollout`): no fresh memory
        per call. Only where nothing else (e.g. a saved-tensor hook) keeps the saved tensors
        beyond the graph. Per thread.
        """
        before = getattr(self._scratch, "recycling", False)
        self._scratch.recycling = True
        try:
            yield
        finally:
            self._scratch.recycling = before

    def _tape_block(self, bt: int, like: Tensor) -> TapeBlock:
        """Buffers for the tape of one call: fresh, or (:meth:`recycling_tapes`) a released one."""
        if not getattr(self._scratch, "recycling", False):
            return TapeBlock(None)
        pools = self._scratch.__dict__.setdefault("tape_pools", {})
        pool = pools.setdefault((bt, like.dtype, like.device), [])
        return pool.pop() if pool else TapeBlock(pool)

    def forward_dynamics_aba(
        self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor
    ) -> Tensor:
        """The same q̈ as :meth:`forward_dynamics` by the articulated-body algorithm.

        Featherstone's ABA (*Rigid Body Dynamics Algorithms*, Table 7.1) in body coordinates with
        6×6 spatial matrices, one body at a time (:mod:`dynid.model.aba`). Kept as the measured
        alternative to CRBA + Cholesky (``dynid_bench.model``).
        """
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x)
        self._check_params(p, q)
        c = self._const
        extra = q.dim() - 2
        batch = self._batch(p.n, q)
        local = self._local_pose(
            self._flat_state(q, batch), self._flat_param(p.joint_translation, batch)
        )
        rot, trans = local[:, :3], local[:, 3]
        v = v.expand(*batch, self.nv)
        tau = (tau - friction_torque(p, v, self.coulomb_smoothing)).expand(*batch, self.nv)
        return articulated_body_forward_dynamics(
            self._parents,
            torch.cat((c.axes * c.revolute[:, None], c.axes * c.prismatic[:, None]), -1),
            rot.permute(3, 2, 0, 1).reshape(*batch, self.nv, 3, 3),
            trans.permute(2, 1, 0).reshape(*batch, self.nv, 3),
            self._param(p, p.inertia, extra),
            self._param(p, p.armature, extra).expand(*batch, self.nv),
            self._param(p, p.gravity, extra).expand(*batch, 3),
            v,
            tau,
        )

    def frame_placement(
        self, p: DynamicParameters, q: Tensor, frames: Sequence[str]
    ) -> tuple[Tensor, Tensor]:
        """World poses of named frames: (R [N, *B, F, 3, 3], t [N, *B, F, 3] in m)."""
        self._check("q", q)
        self._check_params(p, q)
        batch = self._batch(p.n, q)
        kin = self._kinematics(
            self._flat_state(q, batch),
            self._flat_param(p.joint_translation, batch),
            Buffers(None, q, tape=None),
        )
        R = kin.R.permute(3, 2, 0, 1).reshape(*batch, self.nv, 3, 3)
        o = kin.o.permute(2, 1, 0).reshape(*batch, self.nv, 3)
        Rs, ts = [], []
        for name in frames:
            info = self.robot.frame(name)
            R_f = torch.as_tensor(info.rotation, dtype=o.dtype, device=o.device)
            t_f = torch.as_tensor(info.translation, dtype=o.dtype, device=o.device)
            if info.parent < 0:
                Rs.append(R_f.expand(*batch, 3, 3))
                ts.append(t_f.expand(*batch, 3))
            else:
                Rj = R[..., info.parent, :, :]
                Rs.append(Rj @ R_f)
                ts.append(o[..., info.parent, :] + (Rj @ t_f.unsqueeze(-1)).squeeze(-1))
        return torch.stack(Rs, -3), torch.stack(ts, -2)
