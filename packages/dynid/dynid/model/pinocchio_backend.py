"""The dynamics of :mod:`dynid.model.dynamics` computed by Pinocchio (C++) with exact gradients.

:class:`PinocchioDynamics` has the interface of :class:`~dynid.model.dynamics.TorchDynamics`.
Forward dynamics and inverse dynamics run inside ``torch.autograd.Function`` s whose backward
passes use Pinocchio's analytic derivatives:

- states: ``computeABADerivatives`` (∂q̈/∂q, ∂q̈/∂v, M⁻¹ = ∂q̈/∂τ) and
  ``computeRNEADerivatives``;
- inertias: ∂q̈/∂π = −M⁻¹ Y(q, v, q̈) and ∂τ/∂π = Y(q, v, a) with
  ``computeJointTorqueRegressor``;
- armature: ∂q̈/∂r_j = −M⁻¹ e_j q̈_j; gravity: ∂q̈/∂g = −M⁻¹ G(q), G from
  ``computeGeneralizedGravity`` with unit gravity vectors (g enters linearly).

Friction (damping, smooth Coulomb, Stribeck) is dynid's own term and is added in torch, exactly
as in the torch backend. Gradients with respect to joint placement translations (link lengths)
are not available from Pinocchio; requesting them raises :class:`UnsupportedGradientError` (use
the torch backend for kinematic parameters). ``mass_matrix`` and ``frame_placement`` are
provided without gradients.

Use: one parameter set over many states or time steps (LM, the proprioceptive fit): forward
passes without gradients then run through ``abaInParallel`` on a ``ModelPool``. With
per-particle parameters the model is updated particle by particle (setting a body inertia is
cheaper than rebuilding M and the bias from ``nv + 1`` regressor evaluations per state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor

from dynid.model.dynamics import DEFAULT_COULOMB_SMOOTHING, check_state, friction_torque
from dynid.model.errors import StateError, UnsupportedGradientError
from dynid.model.params import DynamicParameters
from dynid.model.robot import RobotModel

__all__ = ["PinocchioDynamics"]


def _symmetric(upper: np.ndarray) -> np.ndarray:
    """Pinocchio fills only the upper triangle of M and M⁻¹."""
    return np.triu(upper) + np.triu(upper, 1).T


class _Batch:
    """Particles × states layout shared by the functions: inputs flattened to [N, S, nv]."""

    def __init__(self, n_params: int, state: Tensor, nv: int) -> None:
        self.shape = state.shape
        self.n_params = n_params
        self.n = max(n_params, state.shape[0])
        self.s = int(np.prod(state.shape[1:-1], dtype=np.int64))
        self.nv = nv

    def flat(self, x: Tensor) -> np.ndarray:
        """[Nx, *B, nv] tensor → [N, S, nv] float64 array (broadcast over particles)."""
        arr = x.detach().to("cpu", torch.float64).reshape(x.shape[0], self.s, self.nv).numpy()
        return np.broadcast_to(arr, (self.n, self.s, self.nv))

    def out_shape(self) -> tuple[int, ...]:
        return (self.n, *self.shape[1:])

    def groups(self) -> Iterator[tuple[int, list[int]]]:
        """(parameter index, state rows) pairs: one group per distinct parameter set."""
        if self.n_params == 1:
            yield 0, list(range(self.n))
        else:
            for i in range(self.n):
                yield i, [i]


def _inertia(pi: np.ndarray) -> pin.Inertia:
    """``pin.Inertia`` of the 10 dynamic parameters ``pi`` (Pinocchio order), massless bodies too.

    ``Inertia.FromDynamicParameters`` divides the first moment by the mass, which gives a NaN
    centre of mass for a massless body (e.g. the intermediate body of a universal joint). With
    zero mass the rotational inertia about the COM equals the one about the origin.
    """
    if pi[0] != 0.0:
        return pin.Inertia.FromDynamicParameters(pi)
    ixx, ixy, iyy, ixz, iyz, izz = pi[4:10]
    rot = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return pin.Inertia(0.0, np.zeros(3), rot)


class PinocchioDynamics:
    """Pinocchio-backed dynamics with the interface of :class:`TorchDynamics`.

    Args:
        robot: the robot.
        dtype, device: dtype and device of the returned tensors (computation is float64 on CPU).
        coulomb_smoothing: ε of tanh(v/ε) in the Coulomb term (rad/s or m/s).
        num_threads: threads of ``abaInParallel`` (default: ``torch.get_num_threads()``).
        check_inputs: validate shapes and finiteness of state arguments.
    """

    def __init__(
        self,
        robot: RobotModel,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
        coulomb_smoothing: float = DEFAULT_COULOMB_SMOOTHING,
        num_threads: int | None = None,
        check_inputs: bool = True,
    ) -> None:
        self.robot = robot
        self.nv = robot.nv
        self.dtype = dtype
        self.device = torch.device(device)
        self.coulomb_smoothing = float(coulomb_smoothing)
        self.num_threads = int(num_threads or torch.get_num_threads())
        self.check_inputs = check_inputs
        self.model = pin.Model(robot.model)
        self.data = self.model.createData()
        self._pool: pin.ModelPool | None = None

    # --- parameters into the Pinocchio model ----------------------------------------------

    def _set(self, params: dict[str, np.ndarray], i: int) -> None:
        model = self.model
        for j in range(self.nv):
            model.inertias[j + 1] = _inertia(params["inertia"][i, j])
            placement = model.jointPlacements[j + 1]
            placement.translation = params["translation"][i, j]
            model.jointPlacements[j + 1] = placement
        model.armature = params["armature"][i]
        model.gravity = pin.Motion(params["gravity"][i], np.zeros(3))

    @staticmethod
    def _numpy(p: DynamicParameters) -> dict[str, np.ndarray]:
        def a(t: Tensor) -> np.ndarray:
            return t.detach().to("cpu", torch.float64).numpy()

        return {
            "inertia": a(p.inertia),
            "translation": a(p.joint_translation),
            "armature": a(p.armature),
            "gravity": a(p.gravity),
        }

    def _gravity_regressor(self, q: np.ndarray, gravity: np.ndarray) -> np.ndarray:
        """[nv, 3] ∂g(q)/∂gravity (g(q) is linear in the gravity vector)."""
        cols = []
        for k in range(3):
            self.model.gravity = pin.Motion(np.eye(3)[k], np.zeros(3))
            cols.append(np.array(pin.computeGeneralizedGravity(self.model, self.data, q)))
        self.model.gravity = pin.Motion(gravity, np.zeros(3))
        return np.stack(cols, -1)

    # --- input handling -------------------------------------------------------------------

    def _check(self, name: str, x: Tensor, p: DynamicParameters) -> None:
        if not self.check_inputs:
            return
        check_state(self.robot, name, x)
        if p.n != x.shape[0] and 1 not in (p.n, x.shape[0]):
            raise StateError(
                f"parameter batch N={p.n} does not broadcast with {name} N={x.shape[0]}"
            )

    def _out(self, arr: np.ndarray, like: Tensor) -> Tensor:
        return torch.as_tensor(arr, dtype=self.dtype, device=like.device)

    @staticmethod
    def _no_translation_grad(p: DynamicParameters) -> None:
        if p.joint_translation.requires_grad and torch.is_grad_enabled():
            raise UnsupportedGradientError(
                "PinocchioDynamics cannot differentiate with respect to joint_translation "
                "(joint offsets / link lengths); use TorchDynamics for kinematic parameters"
            )

    # --- public API -----------------------------------------------------------------------

    def friction_torque(
        self, p: DynamicParameters, v: Tensor, direction: Tensor | None = None
    ) -> Tensor:
        """Joint friction and torque offsets [N, *B, nv], the dry terms along ``direction``
        when given (the torch backend's :func:`~dynid.model.dynamics.friction_torque`)."""
        self._check("v", v, p)
        return friction_torque(p, v, self.coulomb_smoothing, direction)

    def forward_dynamics(self, p: DynamicParameters, q: Tensor, v: Tensor, tau: Tensor) -> Tensor:
        """q̈ = M(q)⁻¹ (τ − τ_friction(v) − C(q, v)v − g(q)) [N, *B, nv], Pinocchio ABA."""
        for name, x in (("q", q), ("v", v), ("tau", tau)):
            self._check(name, x, p)
        self._no_translation_grad(p)
        tau_eff = tau - friction_torque(p, v, self.coulomb_smoothing)
        return _AbaFunction.apply(self, p, p.inertia, p.armature, p.gravity, q, v, tau_eff)

    def rnea(self, p: DynamicParameters, q: Tensor, v: Tensor, a: Tensor) -> Tensor:
        """τ = M(q)a + C(q, v)v + g(q) [N, *B, nv] (armature included, no friction)."""
        for name, x in (("q", q), ("v", v), ("a", a)):
            self._check(name, x, p)
        self._no_translation_grad(p)
        return _RneaFunction.apply(self, p, p.inertia, p.armature, p.gravity, q, v, a)

    def mass_matrix(self, p: DynamicParameters, q: Tensor) -> Tensor:
        """M(q) [N, *B, nv, nv] with armature (Pinocchio CRBA; no gradient)."""
        self._check("q", q, p)
        batch = _Batch(p.n, q, self.nv)
        params, qs = self._numpy(p), batch.flat(q)
        out = np.empty((batch.n, batch.s, self.nv, self.nv))
        for _, r, k in self._samples(batch, params):
            out[r, k] = _symmetric(pin.crba(self.model, self.data, qs[r, k]))
        return self._out(out.reshape(*batch.out_shape(), self.nv), q)

    def frame_placement(
        self, p: DynamicParameters, q: Tensor, frames: Sequence[str]
    ) -> tuple[Tensor, Tensor]:
        """World poses (R [N, *B, F, 3, 3], t [N, *B, F, 3]) of named frames (no gradient)."""
        self._check("q", q, p)
        ids = [self.robot.frame_id(name) for name in frames]
        batch = _Batch(p.n, q, self.nv)
        params, qs = self._numpy(p), batch.flat(q)
        R = np.empty((batch.n, batch.s, len(ids), 3, 3))
        t = np.empty((batch.n, batch.s, len(ids), 3))
        for _, r, k in self._samples(batch, params):
            pin.framesForwardKinematics(self.model, self.data, qs[r, k])
            for f, fid in enumerate(ids):
                R[r, k, f] = self.data.oMf[fid].rotation
                t[r, k, f] = self.data.oMf[fid].translation
        shape = batch.out_shape()[:-1]
        return self._out(R.reshape(*shape, len(ids), 3, 3), q), self._out(
            t.reshape(*shape, len(ids), 3), q
        )

    # --- kernels used by the autograd functions -------------------------------------------

    def _samples(
        self, batch: _Batch, params: dict[str, np.ndarray]
    ) -> Iterator[tuple[int, int, int]]:
        """(parameter index i, particle row r, state k) of every sample, with the model set to
        particle i's parameters while its rows are visited."""
        for i, rows in batch.groups():
            self._set(params, i)
            for r in rows:
                for k in range(batch.s):
                    yield i, r, k

    def _aba_all(
        self,
        batch: _Batch,
        params: dict[str, np.ndarray],
        qs: np.ndarray,
        vs: np.ndarray,
        ts: np.ndarray,
    ) -> np.ndarray:
        """[N, S, nv] q̈ without derivatives: ``abaInParallel`` for large groups, else a loop."""
        out = np.empty((batch.n, batch.s, self.nv))
        for i, rows in batch.groups():
            self._set(params, i)
            count = len(rows) * batch.s
            if count >= 4 * self.num_threads:
                out[rows] = self._aba_parallel(
                    qs[rows].reshape(count, -1),
                    vs[rows].reshape(count, -1),
                    ts[rows].reshape(count, -1),
                ).reshape(len(rows), batch.s, self.nv)
            else:
                for r in rows:
                    for k in range(batch.s):
                        out[r, k] = pin.aba(self.model, self.data, qs[r, k], vs[r, k], ts[r, k])
        return out

    def _aba_parallel(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray) -> np.ndarray:
        if self._pool is None:
            self._pool = pin.ModelPool(self.model, self.num_threads)
        else:
            self._pool.update(self.model)
        res = pin.abaInParallel(
            self.num_threads,
            self._pool,
            np.asfortranarray(q.T),
            np.asfortranarray(v.T),
            np.asfortranarray(tau.T),
        )
        return np.asarray(res).T


_Linearisation = tuple[
    np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray
]
"""One sample's (value, ∂/∂q, ∂/∂v, ∂/∂(third input), acceleration of the regressor)."""


def _linearise(
    dyn: PinocchioDynamics,
    batch: _Batch,
    params: dict[str, np.ndarray],
    states: tuple[np.ndarray, np.ndarray, np.ndarray],
    needs: tuple[bool, ...],
    kernel: Callable[[np.ndarray, np.ndarray, np.ndarray, bool], _Linearisation],
) -> tuple[np.ndarray, ...]:
    """Run ``kernel(q, v, x, grads)`` on every sample and collect what the backward pass needs.

    states: (q, v, x) [N, S, nv] with x = τ (ABA) or q̈ (RNEA); needs: ``needs_input_grad`` of
    (inertia, armature, gravity, q, v, x). The kernel returns a :data:`_Linearisation`; the
    derivative blocks [N, S, nv, nv] are stored only when some input needs a gradient, the
    joint-torque regressor Y [N, S, nv, 10·nv] (at the kernel's acceleration) only for the
    inertias and the gravity regressor G [N, S, nv, 3] only for gravity. Returns (value, ∂q, ∂v,
    ∂x (symmetrised), Y, G), ``None`` for what was not needed.
    """
    nv, n, s = dyn.nv, batch.n, batch.s
    grads = any(needs)
    value = np.empty((n, s, nv))
    blocks = [np.empty((n, s, nv, nv)) if grads else None for _ in range(3)]
    Y = np.empty((n, s, nv, 10 * nv)) if needs[0] else None
    G = np.empty((n, s, nv, 3)) if needs[2] else None
    qs, vs, xs = states
    for i, r, k in dyn._samples(batch, params):
        value[r, k], d_q, d_v, d_x, acc = kernel(qs[r, k], vs[r, k], xs[r, k], grads)
        if grads:
            blocks[0][r, k], blocks[1][r, k], blocks[2][r, k] = d_q, d_v, _symmetric(d_x)
        if Y is not None:
            Y[r, k] = pin.computeJointTorqueRegressor(dyn.model, dyn.data, qs[r, k], vs[r, k], acc)
        if G is not None:
            G[r, k] = dyn._gravity_regressor(qs[r, k], params["gravity"][i])
    return value, *blocks, Y, G


class _AbaFunction(torch.autograd.Function):
    """q̈(π, r, g, q, v, τ) by Pinocchio with the analytic VJP (module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        dyn: PinocchioDynamics,
        p: DynamicParameters,
        inertia: Tensor,
        armature: Tensor,
        gravity: Tensor,
        q: Tensor,
        v: Tensor,
        tau: Tensor,
    ) -> Tensor:
        batch = _Batch(p.n, torch.empty(np.broadcast_shapes(q.shape, v.shape, tau.shape)), dyn.nv)
        params = dyn._numpy(p)
        qs, vs, ts = batch.flat(q), batch.flat(v), batch.flat(tau)
        needs = ctx.needs_input_grad[2:8]
        if not any(needs):
            qdd = dyn._aba_all(batch, params, qs, vs, ts)
            return dyn._out(qdd.reshape(batch.out_shape()), q)

        def kernel(q: np.ndarray, v: np.ndarray, t: np.ndarray, _: bool) -> _Linearisation:
            d_q, d_v, m_inv = pin.computeABADerivatives(dyn.model, dyn.data, q, v, t)
            qdd = dyn.data.ddq.copy()
            return qdd, d_q, d_v, m_inv, qdd

        qdd, dq, dv, minv, Y, G = _linearise(dyn, batch, params, (qs, vs, ts), needs, kernel)
        ctx.dyn, ctx.batch = dyn, batch
        ctx.saved = (qdd, dq, dv, minv, Y, G)
        ctx.shapes = (q.shape, v.shape, tau.shape, inertia.shape, armature.shape, gravity.shape)
        return dyn._out(qdd.reshape(batch.out_shape()), q)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        qdd, dq, dv, minv, Y, G = ctx.saved
        batch: _Batch = ctx.batch
        g = grad.detach().to("cpu", torch.float64).reshape(batch.n, batch.s, batch.nv).numpy()
        lam = np.einsum("nsij,nsj->nsi", minv, g)  # M⁻¹ ḡ (M symmetric)
        out = _state_grads(
            ctx,
            batch,
            grad,
            {
                "q": np.einsum("nsji,nsj->nsi", dq, g),
                "v": np.einsum("nsji,nsj->nsi", dv, g),
                "tau": lam,
            },
        )
        gi, ga, gg = _inertial_grads(ctx, batch, grad, -lam, qdd, Y, G)
        return None, None, gi, ga, gg, out["q"], out["v"], out["tau"]


class _RneaFunction(torch.autograd.Function):
    """τ(π, r, g, q, v, a) by Pinocchio RNEA with the analytic VJP (module docstring)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        dyn: PinocchioDynamics,
        p: DynamicParameters,
        inertia: Tensor,
        armature: Tensor,
        gravity: Tensor,
        q: Tensor,
        v: Tensor,
        a: Tensor,
    ) -> Tensor:
        batch = _Batch(p.n, torch.empty(np.broadcast_shapes(q.shape, v.shape, a.shape)), dyn.nv)
        params = dyn._numpy(p)
        qs, vs, acc = batch.flat(q), batch.flat(v), batch.flat(a)
        needs = ctx.needs_input_grad[2:8]

        def kernel(q: np.ndarray, v: np.ndarray, a: np.ndarray, grads: bool) -> _Linearisation:
            tau = pin.rnea(dyn.model, dyn.data, q, v, a)
            if not grads:
                return tau, None, None, None, a
            d_q, d_v, d_a = pin.computeRNEADerivatives(dyn.model, dyn.data, q, v, a)
            return tau, d_q, d_v, d_a, a

        tau, dq, dv, M, Y, G = _linearise(dyn, batch, params, (qs, vs, acc), needs, kernel)
        ctx.dyn, ctx.batch = dyn, batch
        ctx.saved = (acc, dq, dv, M, Y, G)
        ctx.shapes = (q.shape, v.shape, a.shape, inertia.shape, armature.shape, gravity.shape)
        return dyn._out(tau.reshape(batch.out_shape()), q)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        acc, dq, dv, M, Y, G = ctx.saved
        batch: _Batch = ctx.batch
        g = grad.detach().to("cpu", torch.float64).reshape(batch.n, batch.s, batch.nv).numpy()
        out = _state_grads(
            ctx,
            batch,
            grad,
            {
                "q": np.einsum("nsji,nsj->nsi", dq, g),
                "v": np.einsum("nsji,nsj->nsi", dv, g),
                "tau": np.einsum("nsij,nsj->nsi", M, g),
            },
        )
        gi, ga, gg = _inertial_grads(ctx, batch, grad, g, acc, Y, G)
        return None, None, gi, ga, gg, out["q"], out["v"], out["tau"]


def _reduce_to(x: Tensor, shape: torch.Size) -> Tensor:
    """Sum a broadcast gradient back to an input's shape."""
    while x.dim() > len(shape):
        x = x.sum(0)
    for d, size in enumerate(shape):
        if size == 1 and x.shape[d] != 1:
            x = x.sum(d, keepdim=True)
    return x


def _state_grads(
    ctx: Any, batch: _Batch, like: Tensor, grads: dict[str, np.ndarray]
) -> dict[str, Tensor | None]:
    """VJPs for the three state inputs, reduced to their (possibly broadcast) shapes."""
    out: dict[str, Tensor | None] = {}
    for pos, (key, shape) in enumerate(zip(("q", "v", "tau"), ctx.shapes[:3], strict=True)):
        if not ctx.needs_input_grad[5 + pos]:
            out[key] = None
            continue
        full = torch.as_tensor(grads[key], dtype=like.dtype, device=like.device)
        out[key] = _reduce_to(full.reshape(batch.out_shape()), shape)
    return out


def _inertial_grads(
    ctx: Any,
    batch: _Batch,
    like: Tensor,
    w: np.ndarray,
    acc: np.ndarray,
    Y: np.ndarray | None,
    G: np.ndarray | None,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """VJPs for (inertia, armature, gravity) of a torque-linear quantity.

    The RNEA torque is linear in the body inertias (regressor ``Y`` [N, S, nv, 10·nv]), in the
    armature (coefficient a) and in the gravity vector (``G`` [N, S, nv, 3]). With the torque-space
    cotangent ``w`` [N, S, nv] (ḡ for RNEA; −M⁻¹ḡ for forward dynamics, where a = q̈) the
    parameter VJPs are Yᵀw, w ⊙ a and Gᵀw, summed over the states.
    """
    needs = ctx.needs_input_grad
    gi = ga = gg = None
    if needs[2]:
        gi = _param_grad(np.einsum("nsij,nsi->nsj", Y, w), batch, ctx.shapes[3], like)
    if needs[3]:
        ga = _param_grad(w * acc, batch, ctx.shapes[4], like)
    if needs[4]:
        gg = _param_grad(np.einsum("nsij,nsi->nsj", G, w), batch, ctx.shapes[5], like)
    return gi, ga, gg


def _param_grad(per_state: np.ndarray, batch: _Batch, shape: torch.Size, like: Tensor) -> Tensor:
    """[N, S, k] per-state parameter VJPs → summed over states, shaped like the parameter."""
    total = per_state.sum(1)  # [N, k]
    if shape[0] == 1:
        total = total.sum(0, keepdims=True)
    return torch.as_tensor(total.reshape(shape), dtype=like.dtype, device=like.device)
