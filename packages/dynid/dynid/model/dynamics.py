"""Batched, differentiable rigid-body dynamics in torch over parameter particles.

Every particle has its own body inertias, joint placement translations (link lengths), friction,
armature and gravity (:class:`~dynid.model.params.DynamicParameters`, leading dim N), and states
carry extra batch dims ``*B`` (time steps, shooting windows): q, v, a, tau are ``[N, *B, nv]``.

Formulation: joint motion subspaces, velocities and accelerations are spatial vectors in the
**world frame** about the world origin, ordered (ω, v_O) (Featherstone, *Rigid Body Dynamics
Algorithms*, §2, and RNEA in base coordinates, §5.3). In world coordinates a body's velocity is
the sum of its ancestors' joint motions, V_k = Σ_{j ⪯ k} S_j q̇_j, so the forward and backward
recursions of RNEA become masked sums over the fixed ancestor matrix of the tree (one GEMM
each); body forces are evaluated with the body's own inertia in its local frame (π needs no
rotation). Only the forward kinematics (one 3×3 product per body) loops over the bodies;
everything else is one batched operation over (particles, *B, bodies).

Mass matrix: M = Σ_k J_kᵀ I_k J_k with the body Jacobians J_k at each body origin in body axes
(the joint-space form of CRBA's composite inertias), a single batched product over bodies.
Forward dynamics uses CRBA + Cholesky: the bias C(q, v)v + g(q) from RNEA with q̈ = 0, M as
above, then ``cholesky_solve``. An articulated-body (ABA) recursion was not chosen: its
articulated inertias depend on each child's result, so its three passes cannot be written as
masked sums and cost ~3·nv sequential small-tensor steps, while the dense nv×nv Cholesky is
negligible for nv ≤ 10 (see ``dynid.benchmarks.model`` for the measured step times).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from dynid.model.errors import StateError
from dynid.model.params import DynamicParameters
from dynid.model.robot import JointKind, RobotModel

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
        self.rot_placement = t(rot_placement)
        # Rodrigues: Rp·R(axis, q) = Rp + sin q·(Rp K) + (1 − cos q)·(Rp K²), K = skew(axis)
        self.rot_k = t(rot_placement @ k)
        self.rot_k2 = t(rot_placement @ k @ k)
        self.axes_in_parent = t(np.einsum("jab,jb->ja", rot_placement, axes))
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
        self.jacobian_mask = t(ancestors[:, None, :])  # [k, 1, j]


class _Kinematics:
    """World-frame joint poses for a batch of configurations.

    Attributes:
        R: [..., nv, 3, 3] orientation of each joint (body) frame in the world.
        o: [..., nv, 3] position of each joint frame origin in the world (m).
        z: [..., nv, 3] joint axes in the world.
    """

    def __init__(self, R: Tensor, o: Tensor, z: Tensor) -> None:
        self.R = R
        self.o = o
        self.z = z


def _matvec(R: Tensor, x: Tensor) -> Tensor:
    """R [..., 3, 3] times x [..., 3]."""
    return (R * x.unsqueeze(-2)).sum(-1)


def _matvec_t(R: Tensor, x: Tensor) -> Tensor:
    """Rᵀ x for R [..., 3, 3], x [..., 3]."""
    return (R * x.unsqueeze(-1)).sum(-2)


def _cross(a: Tensor, b: Tensor, dim: int = -1) -> Tensor:
    """a × b along ``dim`` (broadcasting); by components, faster than ``linalg.cross`` here."""
    a0, a1, a2 = a.unbind(dim)
    b0, b1, b2 = b.unbind(dim)
    return torch.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), dim)


def _tree_sum(mask: Tensor, x: Tensor) -> Tensor:
    """Σ_j mask[k, j] x[..., j, :] → [..., k, c] as one GEMM over all leading dims."""
    return (x.transpose(-1, -2) @ mask.T).transpose(-1, -2)


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
        if not self.check_inputs:
            return
        if not isinstance(x, Tensor):
            raise StateError(f"{name} must be a torch.Tensor [N, *B, {self.nv}], got {type(x)}")
        if x.dim() < 2 or x.shape[-1] != self.nv:
            raise StateError(
                f"{name} has shape {tuple(x.shape)}, expected [N, *B, {self.nv}] for joints "
                f"{self.robot.joint_names}"
            )
        if not bool(torch.isfinite(x).all()):
            bad = torch.nonzero(~torch.isfinite(x).reshape(-1, self.nv).all(0)).flatten()
            joints = [self.robot.joint_names[i] for i in bad.tolist()]
            raise StateError(f"{name} has non-finite values for joints {joints}")

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

    def _kinematics(self, p: DynamicParameters, q: Tensor) -> _Kinematics:
        c = self._const
        extra = q.dim() - 2
        batch = torch.broadcast_shapes(q.shape[:-1], (p.n,) + (1,) * extra)
        q = q.expand(*batch, self.nv)
        trans = self._param(p, p.joint_translation, extra)  # [Np, *1, nv, 3]
        angle = q * c.revolute
        sin = torch.sin(angle)[..., None, None]
        one_minus_cos = (1.0 - torch.cos(angle))[..., None, None]
        rot_local = c.rot_placement + sin * c.rot_k + one_minus_cos * c.rot_k2
        t_local = trans + c.axes_in_parent * (q * c.prismatic).unsqueeze(-1)
        t_local = t_local.expand(*batch, self.nv, 3)
        Rs: list[Tensor] = []
        ts: list[Tensor] = []
        for i, parent in enumerate(self._parents):
            if parent < 0:
                Rs.append(rot_local[..., i, :, :])
                ts.append(t_local[..., i, :])
            else:
                Rp = Rs[parent]
                Rs.append(Rp @ rot_local[..., i, :, :])
                ts.append(ts[parent] + _matvec(Rp, t_local[..., i, :]))
        R = torch.stack(Rs, -3)
        return _Kinematics(R, torch.stack(ts, -2), _matvec(R, c.axes))

    def _body_inertia(self, p: DynamicParameters, extra: int) -> tuple[Tensor, Tensor, Tensor]:
        """(m [Np, *1, nv], h [Np, *1, nv, 3], I_O [Np, *1, nv, 3, 3]) in the body frames."""
        pi = self._param(p, p.inertia, extra)
        i6 = pi[..., 4:10]
        inertia = torch.stack(
            (
                torch.stack((i6[..., 0], i6[..., 1], i6[..., 3]), -1),
                torch.stack((i6[..., 1], i6[..., 2], i6[..., 4]), -1),
                torch.stack((i6[..., 3], i6[..., 4], i6[..., 5]), -1),
            ),
            -2,
        )
        return pi[..., 0], pi[..., 1:4], inertia

    # --- public API -----------------------------------------------------------------------

    def rnea(self, p: DynamicParameters, q: Tensor, v: Tensor, a: Tensor) -> Tensor:
        """Inverse dynamics τ = M(q)a + C(q, v)v + g(q) [N, *B, nv] (N·m or N).

        Like ``pinocchio.rnea``: M includes the armature (rotor inertia · a), and there is no
        damping or friction (dynid's own terms, :meth:`friction_torque`).
        """
        for name, x in (("q", q), ("v", v), ("a", a)):
            self._check(name, x)
        self._check_params(p, q)
        kin = self._kinematics(p, q)
        armature = self._param(p, p.armature, q.dim() - 2)
        return self._rnea(p, kin, q.dim() - 2, v, a) + armature * a

    def _rnea(
        self, p: DynamicParameters, kin: _Kinematics, extra: int, v: Tensor, a: Tensor | None
    ) -> Tensor:
        """RNEA in world coordinates; body forces from local inertias at each body origin."""
        c = self._const
        A = c.ancestors
        rev, pri = c.revolute.unsqueeze(-1), c.prismatic.unsqueeze(-1)
        z, o, R = kin.z, kin.o, kin.R
        Sw = z * rev
        Sv = _cross(o, z) * rev + z * pri
        qd = v.unsqueeze(-1)
        Vw = _tree_sum(A, Sw * qd)
        Vv = _tree_sum(A, Sv * qd)
        acc_w = _cross(Vw, Sw) * qd
        acc_v = (_cross(Vw, Sv) + _cross(Vv, Sw)) * qd
        if a is not None:
            acc_w = acc_w + Sw * a.unsqueeze(-1)
            acc_v = acc_v + Sv * a.unsqueeze(-1)
        gravity = self._param(p, p.gravity, extra).unsqueeze(-2)
        aw = _tree_sum(A, acc_w)
        av = _tree_sum(A, acc_v) - gravity
        # spatial velocity / acceleration at each body origin, in body coordinates
        w = _matvec_t(R, Vw)
        vel = _matvec_t(R, Vv + _cross(Vw, o))
        dw = _matvec_t(R, aw)
        dv = _matvec_t(R, av + _cross(aw, o))
        m, h, inertia = self._body_inertia(p, extra)
        m = m.unsqueeze(-1)
        lin_mom = m * vel - _cross(h, w)
        ang_mom = _matvec(inertia, w) + _cross(h, vel)
        n = _matvec(inertia, dw) + _cross(h, dv) + _cross(w, ang_mom) + _cross(vel, lin_mom)
        f = m * dv - _cross(h, dw) + _cross(w, lin_mom)
        f_world = _matvec(R, f)
        n_world = _matvec(R, n) + _cross(o, f_world)
        Fn = _tree_sum(c.descendants, n_world)
        Ff = _tree_sum(c.descendants, f_world)
        return (Sw * Fn).sum(-1) + (Sv * Ff).sum(-1)

    def mass_matrix(self, p: DynamicParameters, q: Tensor) -> Tensor:
        """Joint-space inertia M(q) [N, *B, nv, nv] (kg·m²), armature on the diagonal."""
        self._check("q", q)
        self._check_params(p, q)
        kin = self._kinematics(p, q)
        return self._mass_matrix(p, kin, q.dim() - 2)

    def _mass_matrix(self, p: DynamicParameters, kin: _Kinematics, extra: int) -> Tensor:
        """M = Σ_k J_kᵀ I_k J_k, body Jacobians J_k [6, nv] at each body origin in body axes."""
        c = self._const
        z, o, R = kin.z, kin.o, kin.R
        rev, pri = c.revolute.unsqueeze(-1), c.prismatic.unsqueeze(-1)
        Rt = R.transpose(-1, -2)  # [.., k, 3, 3]
        arm = o.unsqueeze(-2) - o.unsqueeze(-3)  # [.., k, j, 3] from joint j to body k
        jv = _cross(z.unsqueeze(-3), arm) * rev + (z * pri).unsqueeze(-3)
        mask = c.jacobian_mask
        jw_local = (Rt @ (z * rev).transpose(-1, -2).unsqueeze(-3)) * mask  # [.., k, 3, j]
        jv_local = (Rt @ jv.transpose(-1, -2)) * mask
        m, h, inertia = self._body_inertia(p, extra)
        hk = h.unsqueeze(-1)
        top = inertia @ jw_local + _cross(hk, jv_local, dim=-2)
        bottom = m[..., None, None] * jv_local - _cross(hk, jw_local, dim=-2)
        J = torch.cat((jw_local, jv_local), -2).flatten(-3, -2)  # [.., 6k, j]
        IJ = torch.cat((top, bottom), -2).flatten(-3, -2)
        M = J.transpose(-1, -2) @ IJ
        M = 0.5 * (M + M.transpose(-1, -2))
        armature = self._param(p, p.armature, extra)
        return M + torch.diag_embed(armature.expand(*M.shape[:-1]))

    def friction_torque(self, p: DynamicParameters, v: Tensor) -> Tensor:
        """Damping + smooth Coulomb + Stribeck friction [N, *B, nv] (:func:`friction_torque`)."""
        self._check("v", v)
        return friction_torque(p, v, self.coulomb_smoothing)

    def forward_dynamics(self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor) -> Tensor:
        """q̈ = M(q)⁻¹ (τ − τ_friction(v) − C(q, v)v − g(q)) [N, *B, nv] by CRBA + Cholesky."""
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x)
        self._check_params(p, q)
        extra = q.dim() - 2
        kin = self._kinematics(p, q)
        bias = self._rnea(p, kin, extra, v, None)
        rhs = tau - friction_torque(p, v, self.coulomb_smoothing) - bias
        M = self._mass_matrix(p, kin, extra)
        L = torch.linalg.cholesky(M)
        return torch.cholesky_solve(rhs.unsqueeze(-1), L).squeeze(-1)

    def frame_placement(
        self, p: DynamicParameters, q: Tensor, frames: Sequence[str]
    ) -> tuple[Tensor, Tensor]:
        """World poses of named frames: (R [N, *B, F, 3, 3], t [N, *B, F, 3] in m)."""
        self._check("q", q)
        self._check_params(p, q)
        kin = self._kinematics(p, q)
        return self._frames(kin, frames)

    def _frames(self, kin: _Kinematics, frames: Sequence[str]) -> tuple[Tensor, Tensor]:
        Rs, ts = [], []
        batch = kin.o.shape[:-2]
        for name in frames:
            info = self.robot.frame(name)
            R_f = torch.as_tensor(info.rotation, dtype=kin.o.dtype, device=kin.o.device)
            t_f = torch.as_tensor(info.translation, dtype=kin.o.dtype, device=kin.o.device)
            if info.parent < 0:
                Rs.append(R_f.expand(*batch, 3, 3))
                ts.append(t_f.expand(*batch, 3))
            else:
                Rj = kin.R[..., info.parent, :, :]
                Rs.append(Rj @ R_f)
                ts.append(kin.o[..., info.parent, :] + _matvec(Rj, t_f))
        return torch.stack(Rs, -3), torch.stack(ts, -2)
