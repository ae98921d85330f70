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
[3, nv, Bt], matrices [3, 3, nv, Bt], Bt = N·prod(*B)), so 3×3 products, dot and cross products
are a few fused multiply-adds on contiguous rows of length Bt instead of batched 3×3 ``matmul``
and ``cross`` over an innermost dim of size 3, which were the measured hot spots (profile of one
forward step at N = 1024: about half the time in tiny ``bmm`` and ``linalg_cross`` kernels).

Forward dynamics: CRBA + Cholesky — the bias C(q, v)v + g(q) from RNEA with q̈ = 0,
M_ij = S_iᵀ I^c_j S_j from the composite inertias, then ``cholesky_solve``. The articulated-body
algorithm is kept as :meth:`TorchDynamics.forward_dynamics_aba` and was measured against it
(Panda + box, 9 dof, float64, 1 thread, median of 10, on the shared 2-core CPU under load):
N = 64: 3.3 ms (CRBA) vs 7.7 ms (ABA); N = 1024: 14 ms vs 29 ms. ABA's articulated inertias
depend on each child's result, so its passes run body by body with 6×6 products, while the dense
nv×nv Cholesky costs little for nv ≤ 10. ``dynid.benchmarks.model`` reports both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from dynid.model.errors import StateError
from dynid.model.params import DynamicParameters
from dynid.model.robot import JointKind, RobotModel
from dynid.model.spatial import inertia_from_vector, skew

__all__ = ["DEFAULT_COULOMB_SMOOTHING", "TorchDynamics", "friction_torque"]

DEFAULT_COULOMB_SMOOTHING = 1.0e-2
"""Velocity scale ε (rad/s or m/s) of the smooth Coulomb term tanh(v/ε)."""


def friction_torque(p: DynamicParameters, v: Tensor, eps: float) -> Tensor:
    """Joint friction [N, *B, nv] (N·m or N) opposing the motion, dynid's own terms.

    τ_f = d·v + (μ_c + Δ·exp(−(ξ v)²))·tanh(v/ε): viscous damping d, kinetic Coulomb friction
    μ_c smoothed by tanh, and the Stribeck rise Δ at low speed with transition rate ξ (lm paper
    eq. 4.1). The parameters broadcast from [N, nv] over the extra batch dims of v [N, *B, nv].
    """
    extra = v.dim() - 2

    def b(t: Tensor) -> Tensor:
        return t.reshape(t.shape[0], *([1] * extra), t.shape[-1])

    stribeck = b(p.stribeck_delta) * torch.exp(-((b(p.stribeck_rate) * v) ** 2))
    return b(p.damping) * v + (b(p.coulomb) + stribeck) * torch.tanh(v / eps)


class _Constants:
    """Robot tables as tensors on one dtype/device."""

    def __init__(self, robot: RobotModel, dtype: torch.dtype, device: torch.device) -> None:
        def t(x: np.ndarray) -> Tensor:
            return torch.as_tensor(x, dtype=dtype, device=device)

        nv = robot.nv
        axes = robot.joint_axes
        rot_placement = robot.placement_rotations
        k = np.stack([np.cross(np.eye(3), a) for a in axes])  # skew(axis): row i = e_i × axis
        self.axes = t(axes)

        def component_first(x: np.ndarray) -> Tensor:  # [nv, *c] → [*c, nv, 1]
            return t(np.moveaxis(x, 0, -1)[..., None])

        # Rodrigues: Rp·R(axis, q) = Rp + sin q·(Rp K) + (1 − cos q)·(Rp K²), K = skew(axis)
        self.rot_placement = component_first(rot_placement)  # [3, 3, nv, 1]
        self.rot_k = component_first(rot_placement @ k)
        self.rot_k2 = component_first(rot_placement @ k @ k)
        self.axes_in_parent = component_first(np.einsum("jab,jb->ja", rot_placement, axes))
        revolute = np.array([kind is JointKind.REVOLUTE for kind in robot.joint_kinds])
        self.revolute = t(revolute.astype(np.float64))
        self.prismatic = 1.0 - self.revolute
        ancestors = np.zeros((nv, nv))
        for body in range(nv):
            j = body
            while j >= 0:
                ancestors[body, j] = 1.0
                j = int(robot.parents[j])
        self.ancestors = t(ancestors)  # [k, j] = 1 if j is k or an ancestor of k
        self.descendants = t(ancestors.T.copy())  # [j, k]
        upper = ancestors.T  # [i, j] = 1 if i is j or an ancestor of j
        # component-first (structure-of-arrays) forms, broadcasting over a trailing batch dim
        self.upper_mask_col = t(upper[..., None])  # [nv, nv, 1]
        self.strict_upper_mask_col = t((upper - np.eye(nv))[..., None])  # i a proper ancestor
        self.revolute_col = self.revolute.unsqueeze(-1)  # [nv, 1]
        self.prismatic_col = self.prismatic.unsqueeze(-1)
        self.sym_index = torch.tensor(((0, 1, 3), (1, 2, 4), (3, 4, 5)), device=device)


class _Kinematics:
    """World-frame joint poses for a batch of configurations, in structure-of-arrays layout.

    Components come first and the flattened batch (particles × *B, size Bt) last, so every
    3-vector and 3×3 operation below is an elementwise operation on contiguous rows of length Bt
    (batched 3×3 ``matmul`` and ``cross`` over an innermost dim of size 3 are far slower).

    Attributes:
        R: [3, 3, nv, Bt] orientation of each joint (body) frame in the world.
        o: [3, nv, Bt] position of each joint frame origin in the world (m).
        z: [3, nv, Bt] joint axes in the world.
        batch: the unflattened batch shape (N, *B) with prod(batch) = Bt.
    """

    def __init__(self, R: Tensor, o: Tensor, z: Tensor, batch: torch.Size) -> None:
        self.R = R
        self.o = o
        self.z = z
        self.batch = batch


def _mm(A: Tensor, B: Tensor) -> Tensor:
    """A [3, 3, ...] times B [3, k, ...] → [3, k, ...] (component-first matrices)."""
    return _dot(A.transpose(0, 1).unsqueeze(2), B.unsqueeze(1))


def _matvec(A: Tensor, x: Tensor) -> Tensor:
    """A [3, 3, ...] times x [3, ...] → [3, ...] (component-first)."""
    return _dot(A.transpose(0, 1), x.unsqueeze(1))


def _dot(a: Tensor, b: Tensor) -> Tensor:
    """a · b over the leading component dim: [3, ...] → [...] (fused multiply-adds)."""
    a0, a1, a2 = a.unbind(0)  # one unbind (not three selects): one gradient buffer each
    b0, b1, b2 = b.unbind(0)
    return torch.addcmul(torch.addcmul(a0 * b0, a1, b1), a2, b2)


def _cross(a: Tensor, b: Tensor) -> Tensor:
    """a × b over the leading component dim [3, ...] (broadcasting the other dims)."""
    ax, ay, az = a.unbind(0)
    bx, by, bz = b.unbind(0)
    return torch.stack(
        (
            torch.addcmul(ay * bz, az, by, value=-1.0),
            torch.addcmul(az * bx, ax, bz, value=-1.0),
            torch.addcmul(ax * by, ay, bx, value=-1.0),
        )
    )


def _tree_sum(mask: Tensor, x: Tensor) -> Tensor:
    """Σ_j mask[k, j] x[..., j, :] over the body dim → [..., k, Bt] (ancestor or descendant sum)."""
    return torch.matmul(mask, x)


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


class TorchDynamics:
    """Batched torch dynamics of ``robot`` for per-particle :class:`DynamicParameters`.

    Args:
        robot: the robot (revolute and prismatic joints; fixed joints merged by Pinocchio).
        dtype: floating dtype of the computation (float64 by default).
        device: torch device ("cpu", "cuda", ...).
        coulomb_smoothing: ε of tanh(v/ε) in the Coulomb term (rad/s or m/s).
        check_inputs: validate shapes and finiteness of every state argument (names the
            argument in a :class:`StateError`); turn off inside hot loops once inputs are trusted.

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
    ) -> None:
        self.robot = robot
        self.nv = robot.nv
        self.dtype = dtype
        self.device = torch.device(device)
        self.coulomb_smoothing = float(coulomb_smoothing)
        self.check_inputs = check_inputs
        self._const = _Constants(robot, dtype, self.device)
        self._parents = [int(j) for j in robot.parents]

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

    # --- kinematics -----------------------------------------------------------------------

    def _local_blocks(self, p: DynamicParameters, q: Tensor, batch: torch.Size) -> Tensor:
        """Pose of each joint frame in its parent and its axis there, [3, 5, nv, Bt]:
        columns 0–2 the rotation R_loc, column 3 the translation t_loc (m), column 4 the
        placement-rotated joint axis R_loc a (constant)."""
        c = self._const
        q = self._flat_state(q, batch)
        angle = q * c.revolute_col
        rot = torch.addcmul(c.rot_placement, torch.sin(angle), c.rot_k)
        rot = torch.addcmul(rot, 1.0 - torch.cos(angle), c.rot_k2)
        trans = self._flat_param(p.joint_translation, batch).permute(2, 1, 0)  # [3, nv, Bt]
        trans = torch.addcmul(trans, c.axes_in_parent, q * c.prismatic_col)
        axes = c.axes_in_parent.expand_as(trans)
        return torch.cat((rot, trans.unsqueeze(1), axes.unsqueeze(1)), 1)

    def _flat_batch(self, p: DynamicParameters, *states: Tensor) -> torch.Size:
        """Broadcast batch shape (N, *B) of the states and the parameter particles."""
        extra = states[0].dim() - 2
        shapes = [x.shape[:-1] for x in states]
        return torch.broadcast_shapes(*shapes, (p.n,) + (1,) * extra)

    def _flat_state(self, x: Tensor, batch: torch.Size) -> Tensor:
        """State [N, *B, nv] → [nv, Bt] (contiguous, batch last)."""
        return x.expand(*batch, self.nv).reshape(-1, self.nv).T.contiguous()

    def _unflat_state(self, x: Tensor, batch: torch.Size) -> Tensor:
        """[nv, Bt] → [N, *B, nv]."""
        return x.T.reshape(*batch, self.nv)

    def _flat_param(self, field: Tensor, batch: torch.Size) -> Tensor:
        """Parameter field [Np, *rest] broadcast over ``batch`` → [Bt, *rest]."""
        rest = field.shape[1:]
        field = field.reshape(field.shape[0], *([1] * (len(batch) - 1)), *rest)
        return field.expand(*batch, *rest).reshape(-1, *rest)

    def _kinematics(self, p: DynamicParameters, q: Tensor, batch: torch.Size) -> _Kinematics:
        """World poses by one [3, 3] × [3, 5] product per body.

        Each local block [R_loc | t_loc | R_loc a] (R_loc a is the placement-rotated joint axis,
        a constant) times the parent's world rotation gives the body's [R | R_p t_loc | z].
        """
        # unbind/split rather than indexing: one gradient buffer for all the pieces
        local = self._local_blocks(p, q, batch).unbind(2)  # nv × [3, 5, Bt]
        blocks: list[Tensor] = []
        origins: list[Tensor] = []
        for i, parent in enumerate(self._parents):
            block = local[i]
            if parent < 0:
                origins.append(block[:, 3])
            else:
                block = _mm(blocks[parent][:, :3], block)
                origins.append(origins[parent] + block[:, 3])
            blocks.append(block)
        R, _, z = torch.stack(blocks, 2).split((3, 1, 1), 1)  # [3, 5, nv, Bt] → R, R_p t, z
        return _Kinematics(R, torch.stack(origins, 1), z.squeeze(1), batch)

    def _world_inertia(
        self, p: DynamicParameters, kin: _Kinematics
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Body inertias about the world origin in world axes.

        Returns (m [nv, Bt], first moment h = m·c [3, nv, Bt], rotational inertia
        Ī_O [3, 3, nv, Bt]), from the local π by rotation and the parallel-axis theorem.
        """
        c = self._const
        pi = self._flat_param(p.inertia, kin.batch).permute(2, 1, 0).contiguous()  # [10, nv, Bt]
        m, h_local, inertia_local = pi.split((1, 3, 6), 0)
        m, inertia_local = m.squeeze(0), inertia_local[c.sym_index]
        R, o = kin.R, kin.o
        rh = _matvec(R, h_local)
        h = m * o + rh
        # Ī_O = R Ī Rᵀ + (m|o|² + 2 o·Rh) 1 − (o hᵀ + Rh oᵀ), with h = m o + R h_local
        outer = o.unsqueeze(1) * h.unsqueeze(0) + rh.unsqueeze(1) * o.unsqueeze(0)
        diagonal = m * _dot(o, o) + 2.0 * _dot(o, rh)
        inertia = _mm(_mm(R, inertia_local), R.transpose(0, 1)) - outer
        inertia.diagonal(dim1=0, dim2=1).add_(diagonal.unsqueeze(-1))
        return m, h, inertia

    def _motion_subspace(self, kin: _Kinematics) -> tuple[Tensor, Tensor]:
        """World joint motion subspaces (S_ω, S_v) [3, nv, Bt] about the world origin."""
        c = self._const
        return kin.z * c.revolute_col, _cross(
            kin.o, kin.z
        ) * c.revolute_col + kin.z * c.prismatic_col

    def _rnea(
        self,
        p: DynamicParameters,
        kin: _Kinematics,
        body: tuple[Tensor, Tensor, Tensor],
        v: Tensor,
        a: Tensor | None,
    ) -> Tensor:
        """RNEA in world coordinates with world-origin body inertias ``body`` (m, h, Ī_O).

        v, a: [nv, Bt] (flattened); returns τ [nv, Bt] without armature.
        """
        c = self._const
        A = c.ancestors
        Sw, Sv = self._motion_subspace(kin)
        Vw = _tree_sum(A, Sw * v)
        Vv = _tree_sum(A, Sv * v)
        acc_w = _cross(Vw, Sw) * v
        acc_v = (_cross(Vw, Sv) + _cross(Vv, Sw)) * v
        if a is not None:
            acc_w = acc_w + Sw * a
            acc_v = acc_v + Sv * a
        gravity = self._flat_param(p.gravity, kin.batch).T.unsqueeze(1)  # [3, 1, Bt]
        aw = _tree_sum(A, acc_w)
        av = _tree_sum(A, acc_v) - gravity
        m, h, inertia = body
        lin_mom = m * Vv - _cross(h, Vw)
        ang_mom = _matvec(inertia, Vw) + _cross(h, Vv)
        n = _matvec(inertia, aw) + _cross(h, av) + _cross(Vw, ang_mom) + _cross(Vv, lin_mom)
        f = m * av - _cross(h, aw) + _cross(Vw, lin_mom)
        Fn = _tree_sum(c.descendants, n)
        Ff = _tree_sum(c.descendants, f)
        return _dot(Sw, Fn) + _dot(Sv, Ff)

    def _mass_matrix(
        self, p: DynamicParameters, kin: _Kinematics, body: tuple[Tensor, Tensor, Tensor]
    ) -> Tensor:
        """CRBA in world coordinates: composite inertias as masked sums, M_ij = S_iᵀ Ic_j S_j.

        Returns M [N, *B, nv, nv] with the armature on the diagonal.
        """
        c = self._const
        Sw, Sv = self._motion_subspace(kin)
        m, h, inertia = body
        D = c.descendants
        mc = _tree_sum(D, m)
        hc = _tree_sum(D, h)
        ic = _tree_sum(D, inertia)
        Fn = _matvec(ic, Sw) + _cross(hc, Sv)
        Fl = mc * Sv - _cross(hc, Sw)
        G = _dot(Sw.unsqueeze(2), Fn.unsqueeze(1)) + _dot(Sv.unsqueeze(2), Fl.unsqueeze(1))
        # G[i, j] = S_iᵀ Ic_j S_j is M_ij where i ⪯ j; the strict upper part mirrors below
        M = G * c.upper_mask_col + (G * c.strict_upper_mask_col).transpose(0, 1)
        armature = self._flat_param(p.armature, kin.batch)
        M = M.permute(2, 0, 1) + torch.diag_embed(armature)
        return M.reshape(*kin.batch, self.nv, self.nv)

    # --- public API -----------------------------------------------------------------------

    def rnea(self, p: DynamicParameters, q: Tensor, v: Tensor, a: Tensor) -> Tensor:
        """Inverse dynamics τ = M(q)a + C(q, v)v + g(q) [N, *B, nv] (N·m or N).

        Like ``pinocchio.rnea``: M includes the armature (rotor inertia · a), and there is no
        damping or friction (dynid's own terms, :meth:`friction_torque`).
        """
        for name, x in (("q", q), ("v", v), ("a", a)):
            self._check(name, x)
        self._check_params(p, q)
        batch = self._flat_batch(p, q, v, a)
        kin = self._kinematics(p, q, batch)
        body = self._world_inertia(p, kin)
        flat_v, flat_a = self._flat_state(v, batch), self._flat_state(a, batch)
        tau = self._unflat_state(self._rnea(p, kin, body, flat_v, flat_a), batch)
        return tau + self._param(p, p.armature, q.dim() - 2) * a

    def mass_matrix(self, p: DynamicParameters, q: Tensor) -> Tensor:
        """Joint-space inertia M(q) [N, *B, nv, nv] (kg·m²), armature on the diagonal."""
        self._check("q", q)
        self._check_params(p, q)
        kin = self._kinematics(p, q, self._flat_batch(p, q))
        return self._mass_matrix(p, kin, self._world_inertia(p, kin))

    def _body_inertia(self, p: DynamicParameters, extra: int) -> tuple[Tensor, Tensor, Tensor]:
        """(m [Np, *1, nv], h [Np, *1, nv, 3], I_O [Np, *1, nv, 3, 3]) in the body frames."""
        pi = self._param(p, p.inertia, extra)
        inertia = inertia_from_vector(pi[..., 4:10])
        return pi[..., 0], pi[..., 1:4], inertia

    def friction_torque(self, p: DynamicParameters, v: Tensor) -> Tensor:
        """Damping + smooth Coulomb + Stribeck friction [N, *B, nv] (:func:`friction_torque`)."""
        self._check("v", v)
        return friction_torque(p, v, self.coulomb_smoothing)

    def forward_dynamics(self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor) -> Tensor:
        """q̈ = M(q)⁻¹ (τ − τ_friction(v) − C(q, v)v − g(q)) [N, *B, nv] by CRBA + Cholesky."""
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x)
        self._check_params(p, q)
        batch = self._flat_batch(p, q, v, tau)
        kin = self._kinematics(p, q, batch)
        body = self._world_inertia(p, kin)
        bias = self._unflat_state(self._rnea(p, kin, body, self._flat_state(v, batch), None), batch)
        rhs = tau - friction_torque(p, v, self.coulomb_smoothing) - bias
        L = torch.linalg.cholesky(self._mass_matrix(p, kin, body))
        return torch.cholesky_solve(rhs.unsqueeze(-1), L).squeeze(-1)

    def forward_dynamics_aba(
        self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor
    ) -> Tensor:
        """The same q̈ as :meth:`forward_dynamics` by the articulated-body algorithm.

        Featherstone's ABA (*Rigid Body Dynamics Algorithms*, Table 7.1) in body coordinates with
        6×6 spatial matrices, one body at a time (armature added to D_i as in Pinocchio). Kept
        as the measured alternative to CRBA + Cholesky (``dynid.benchmarks.model``).
        """
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x)
        self._check_params(p, q)
        c = self._const
        extra = q.dim() - 2
        batch = self._flat_batch(p, q)
        local = self._local_blocks(p, q, batch)
        rot = local[:, :3].permute(3, 2, 0, 1).reshape(*batch, self.nv, 3, 3)
        trans = local[:, 3].permute(2, 1, 0).reshape(*batch, self.nv, 3)
        v = v.expand(*batch, self.nv)
        tau = (tau - friction_torque(p, v, self.coulomb_smoothing)).expand(*batch, self.nv)
        m, h, inertia = self._body_inertia(p, extra)
        hx = skew(h)
        eye = torch.eye(3, dtype=q.dtype, device=q.device)
        spatial_inertia = torch.cat(
            (torch.cat((inertia, hx), -1), torch.cat((-hx, m[..., None, None] * eye), -1)), -2
        ).expand(*batch, self.nv, 6, 6)
        rt = rot.transpose(-1, -2)
        zero = torch.zeros_like(rt)
        # X_i: motion transform parent → body i, (ω, v) ordering: [[Rᵀ, 0], [−Rᵀ[t]×, Rᵀ]]
        X = torch.cat((torch.cat((rt, zero), -1), torch.cat((-rt @ skew(trans), rt), -1)), -2)
        S = torch.cat((c.axes * c.revolute[:, None], c.axes * c.prismatic[:, None]), -1)
        armature = self._param(p, p.armature, extra).expand(*batch, self.nv)
        gravity = self._param(p, p.gravity, extra).expand(*batch, 3)
        vel: list[Tensor] = []
        bias_acc: list[Tensor] = []
        IA: list[Tensor] = []
        pA: list[Tensor] = []
        for i, parent in enumerate(self._parents):
            vj = S[i] * v[..., i : i + 1]
            vi = vj if parent < 0 else _mv(X[..., i, :, :], vel[parent]) + vj
            vel.append(vi)
            bias_acc.append(_motion_cross6(vi, vj))
            Ii = spatial_inertia[..., i, :, :]
            IA.append(Ii)
            pA.append(_force_cross6(vi, _mv(Ii, vi)))
        U: list[Tensor] = [torch.empty(0)] * self.nv
        D: list[Tensor] = [torch.empty(0)] * self.nv
        u: list[Tensor] = [torch.empty(0)] * self.nv
        for i in reversed(range(self.nv)):
            U[i] = _mv(IA[i], S[i].expand_as(pA[i]))
            D[i] = U[i] @ S[i] + armature[..., i]
            u[i] = tau[..., i] - pA[i] @ S[i]
            parent = self._parents[i]
            if parent >= 0:
                Ia = IA[i] - U[i].unsqueeze(-1) * (U[i] / D[i].unsqueeze(-1)).unsqueeze(-2)
                pa = pA[i] + _mv(Ia, bias_acc[i]) + U[i] * (u[i] / D[i]).unsqueeze(-1)
                Xi = X[..., i, :, :]
                IA[parent] = IA[parent] + Xi.transpose(-1, -2) @ Ia @ Xi
                pA[parent] = pA[parent] + _mv(Xi.transpose(-1, -2), pa)
        acc: list[Tensor] = [torch.empty(0)] * self.nv
        qdd: list[Tensor] = [torch.empty(0)] * self.nv
        base = torch.cat((torch.zeros_like(gravity), -gravity), -1)
        for i, parent in enumerate(self._parents):
            ai = _mv(X[..., i, :, :], base if parent < 0 else acc[parent]) + bias_acc[i]
            qdd[i] = (u[i] - (U[i].unsqueeze(-2) @ ai.unsqueeze(-1))[..., 0, 0]) / D[i]
            acc[i] = ai + S[i] * qdd[i].unsqueeze(-1)
        return torch.stack(qdd, -1)

    def frame_placement(
        self, p: DynamicParameters, q: Tensor, frames: Sequence[str]
    ) -> tuple[Tensor, Tensor]:
        """World poses of named frames: (R [N, *B, F, 3, 3], t [N, *B, F, 3] in m)."""
        self._check("q", q)
        self._check_params(p, q)
        batch = self._flat_batch(p, q)
        kin = self._kinematics(p, q, batch)
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
