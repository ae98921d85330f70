"""Time stepping: semi-implicit Euler, control models, rollouts and multiple-shooting windows.

The integrator is the one of the csvgd paper (eq. 12) and of the proprioceptive paper (eq. 2)::

    q̈_{k+1} = FD(q_k, q̇_k, τ_k; θ)
    q̇_{k+1} = q̇_k + Δt q̈_{k+1}
    q_{k+1} = q_k + Δt q̇_{k+1}

with ``substeps`` equal sub-steps of ``dt / substeps`` per control sample (the control is held
constant over a sample). With :class:`PrescribedMotion` the actuated joints are not simulated but
follow a recording, and only the passive joints are integrated (hybrid dynamics).

Shapes follow the model layer: ``N`` parameter particles, extra batch dimensions ``*B`` (e.g.
shooting windows ``W``), ``T`` time steps, ``nv`` generalised velocities (``nq == nv`` for dynid's
revolute and prismatic joints) and ``nu`` control inputs. Positions are in rad or m, velocities in
rad/s or m/s, generalised forces in N·m or N, time in s.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import torch
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from dynid.model.errors import StateError

if TYPE_CHECKING:
    from dynid.model.params import DynamicParameters

__all__ = [
    "ControlModel",
    "CurrentControl",
    "ForwardDynamics",
    "GeneralizedForce",
    "HybridDynamics",
    "PDControl",
    "PrescribedMotion",
    "TorqueControl",
    "Unactuated",
    "rollout",
    "shoot_windows",
    "split_windows",
    "step",
]


class ForwardDynamics(Protocol):
    """Anything that maps a state and joint forces to joint accelerations (both backends do)."""

    def forward_dynamics(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, tau: torch.Tensor
    ) -> torch.Tensor:
        """Joint accelerations ``[N, *B, nv]`` for ``q, v, tau`` of shape ``[N, *B, nv]``."""
        ...


class HybridDynamics(ForwardDynamics, Protocol):
    """Dynamics with the inverse-dynamics terms :class:`PrescribedMotion` needs (both backends)."""

    def rnea(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, a: torch.Tensor
    ) -> torch.Tensor:
        """``τ = M(q) a + C(q, v) v + g(q)`` ``[N, *B, nv]`` (no friction)."""
        ...

    def mass_matrix(self, p: DynamicParameters, q: torch.Tensor) -> torch.Tensor:
        """``M(q)`` ``[N, *B, nv, nv]`` (kg·m² or kg)."""
        ...

    def friction_torque(
        self, p: DynamicParameters, v: torch.Tensor, direction: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Joint friction ``[N, *B, nv]`` opposing ``v``; the dry terms along ``direction``
        ``[N, *B, nv]`` in place of ``tanh(v/ε)`` when given."""
        ...


class ControlModel(Protocol):
    """Maps a control sample ``u [N|1, *B, nu]`` to generalised forces ``[N, *B, nv]``."""

    def input_size(self, nv: int) -> int:
        """Number of control inputs ``nu`` this model expects for a robot with ``nv`` dofs."""
        ...

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """Generalised forces ``[N, *B, nv]`` (N·m or N)."""
        ...


GeneralizedForce = Callable[["DynamicParameters", torch.Tensor, torch.Tensor], torch.Tensor]
"""A state-dependent generalised force ``f(p, q, v) -> [N, *B, nv]`` added to the control's
output, e.g. the penalty contact of :class:`dynid.model.attachments.SphereInContainer`."""


def _forces_of(
    dyn: ForwardDynamics, forces: Sequence[GeneralizedForce] | None
) -> Sequence[GeneralizedForce]:
    """``forces``, or by default the generalised forces of the attachments of ``dyn.robot``."""
    if forces is not None:
        return forces
    robot = getattr(dyn, "robot", None)
    return tuple(getattr(robot, "generalized_forces", ()))


def _per_particle(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """View a per-particle tensor ``[N|1, k]`` so it broadcasts against ``like [N, *B, k']``."""
    extra = like.dim() - x.dim()
    return x.reshape(x.shape[0], *([1] * extra), x.shape[-1])


class _Actuation:
    """Selection of the actuated dofs shared by the control models."""

    def __init__(self, actuated: Sequence[int] | None = None) -> None:
        if actuated is not None:
            indices = [int(i) for i in actuated]
            if len(set(indices)) != len(indices) or any(i < 0 for i in indices):
                raise StateError(
                    f"actuated dof indices must be distinct and non-negative, got {indices}"
                )
            self.actuated: tuple[int, ...] | None = tuple(indices)
        else:
            self.actuated = None

    def _actuated_count(self, nv: int) -> int:
        if self.actuated is None:
            return nv
        if self.actuated and max(self.actuated) >= nv:
            raise StateError(
                f"actuated dof index {max(self.actuated)} is out of range for a robot with "
                f"nv = {nv} dofs"
            )
        return len(self.actuated)

    def _select(self, x: torch.Tensor) -> torch.Tensor:
        """The actuated columns ``[..., na]`` of ``x [..., nv]``."""
        if self.actuated is None:
            return x
        return x[..., list(self.actuated)]

    def _scatter(self, tau_a: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """Generalised forces ``[*like.shape[:-1], nv]`` with ``tau_a`` on the actuated dofs."""
        nv = like.shape[-1]
        shape = np.broadcast_shapes(like.shape[:-1], tau_a.shape[:-1])
        if self.actuated is None:
            return tau_a.expand(*shape, nv)
        index = torch.tensor(self.actuated, dtype=torch.long, device=like.device)
        tau_a = tau_a.expand(*shape, len(self.actuated))
        return tau_a.new_zeros(*shape, nv).index_copy(-1, index, tau_a)

    def _check_input(self, u: torch.Tensor, nu: int, what: str) -> None:
        if u.shape[-1] != nu:
            raise StateError(
                f"control u must have {nu} columns ({what}), got shape {tuple(u.shape)}"
            )


class Unactuated:
    """Control model of an unactuated system (a free double pendulum): ``τ = 0``, ``nu = 0``."""

    def input_size(self, nv: int) -> int:
        """``nu = 0``: no control inputs."""
        return 0

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """Zero generalised forces ``[N, *B, nv]`` shaped like the broadcast of ``q`` and ``v``."""
        return torch.zeros(np.broadcast_shapes(q.shape, v.shape), dtype=q.dtype, device=q.device)


class TorqueControl(_Actuation):
    """Measured or commanded joint torques applied directly: ``τ = Sᵀ u``.

    Args:
        actuated: dof indices (into ``q``/``v``) that ``u`` drives, in column order of ``u``;
            ``None`` means every dof (``nu == nv``). Unactuated dofs (a passive universal joint,
            a sphere's translations) receive zero.
    """

    def input_size(self, nv: int) -> int:
        """``nu``: one torque (N·m) or force (N) per actuated dof."""
        return self._actuated_count(nv)

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """``u [N|1, *B, nu]`` torques → generalised forces ``[N, *B, nv]``."""
        self._check_input(u, self.input_size(q.shape[-1]), "one torque per actuated dof")
        return self._scatter(u, q)


class CurrentControl(_Actuation):
    """Motor currents times a torque constant: ``τ_j = k_j i_j`` on the actuated dofs.

    Args:
        torque_constant: ``k`` in N·m per current unit, a scalar or one value per actuated dof;
            ``None`` takes the per-particle ``DynamicParameters.motor_gain [N, nv]`` (the
            ``"<joint>/motor_gain"`` parameters).
        actuated: dof indices driven by the columns of ``u``; ``None`` means every dof.
    """

    def __init__(
        self,
        torque_constant: float | Sequence[float] | torch.Tensor | None = None,
        actuated: Sequence[int] | None = None,
    ) -> None:
        super().__init__(actuated)
        if torque_constant is None:
            self.torque_constant: torch.Tensor | None = None
        else:
            k = torch.as_tensor(torque_constant, dtype=torch.float64)
            if k.dim() > 1 or not bool(torch.isfinite(k).all()):
                raise StateError(
                    f"torque_constant must be a finite scalar or vector, got {torque_constant!r}"
                )
            self.torque_constant = k

    def input_size(self, nv: int) -> int:
        """``nu``: one current per actuated dof."""
        return self._actuated_count(nv)

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """``u [N|1, *B, nu]`` currents → generalised forces ``[N, *B, nv]``."""
        nu = self.input_size(q.shape[-1])
        self._check_input(u, nu, "one current per actuated dof")
        if self.torque_constant is None:
            k = self._select(_per_particle(p.motor_gain, q))
        else:
            k = self.torque_constant.to(dtype=u.dtype, device=u.device)
            if k.dim() == 1 and k.shape[0] != nu:
                raise StateError(
                    f"torque_constant has {k.shape[0]} entries, expected {nu} (one per "
                    "actuated dof)"
                )
        return self._scatter(k * u, q)


class PDControl(_Actuation):
    """PD tracking of desired positions and velocities (the Panda box experiment, csvgd V-C).

    ``τ_a = k_p (q_d − q_a) + k_d (q̇_d − q̇_a)`` on the actuated dofs; ``u`` holds
    ``[q_d, q̇_d]`` (``nu = 2 na``), as in the csvgd paper's 20-D state with PD targets (App. II-E).

    Args:
        kp: stiffness gains (N·m/rad or N/m), scalar or ``[na]``.
        kd: damping gains (N·m·s/rad or N·s/m), scalar or ``[na]``.
        actuated: dof indices tracked, in the column order of ``q_d``; ``None`` means every dof.
    """

    def __init__(
        self,
        kp: float | Sequence[float] | torch.Tensor,
        kd: float | Sequence[float] | torch.Tensor,
        actuated: Sequence[int] | None = None,
    ) -> None:
        super().__init__(actuated)
        self.kp = self._gain(kp, "kp")
        self.kd = self._gain(kd, "kd")

    @staticmethod
    def _gain(value: float | Sequence[float] | torch.Tensor, name: str) -> torch.Tensor:
        gain = torch.as_tensor(value, dtype=torch.float64)
        if gain.dim() > 1 or not bool(torch.isfinite(gain).all()):
            raise StateError(f"PD gain {name} must be a finite scalar or vector, got {value!r}")
        return gain

    def input_size(self, nv: int) -> int:
        """``nu = 2 na``: desired positions then desired velocities of the actuated dofs."""
        na = self._actuated_count(nv)
        for name, gain in (("kp", self.kp), ("kd", self.kd)):
            if gain.dim() == 1 and gain.shape[0] != na:
                raise StateError(
                    f"PD gain {name} has {gain.shape[0]} entries, expected {na} (actuated dofs)"
                )
        return 2 * na

    def __call__(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> torch.Tensor:
        """``u [N|1, *B, 2 na]`` targets ``[q_d, q̇_d]`` → generalised forces ``[N, *B, nv]``."""
        nu = self.input_size(q.shape[-1])
        self._check_input(u, nu, "desired positions then desired velocities")
        q_d, v_d = u[..., : nu // 2], u[..., nu // 2 :]
        kp = self.kp.to(dtype=u.dtype, device=u.device)
        kd = self.kd.to(dtype=u.dtype, device=u.device)
        tau_a = kp * (q_d - self._select(q)) + kd * (v_d - self._select(v))
        return self._scatter(tau_a, q)


class PrescribedMotion(_Actuation):
    """The actuated joints follow recorded motion; only the passive joints are simulated.

    ``u`` holds ``[q_a, q̇_a, q̈_a]`` of the actuated dofs (``nu = 3 na``; rad, rad/s, rad/s² or
    m, m/s, m/s²). At the start of every control sample the actuated positions and velocities are
    set to ``q_a, q̇_a``; within the sample they move with the constant acceleration ``q̈_a``. The
    passive dofs ``p`` follow the hybrid dynamics (Featherstone, *Rigid Body Dynamics
    Algorithms*, Sec. 9.2)::

        q̈_p = M_pp⁻¹ (τ_ext,p − τ_friction,p − [C(q, q̇) q̇ + g(q) + M_·a q̈_a]_p)

    with the bracket from one RNEA call at ``q̈ = [q̈_a, 0]`` and ``M_pp`` the passive block of
    the joint-space inertia; ``τ_ext`` are the attachments' generalised forces (no actuator acts
    on a passive dof).

    This deviates from the csvgd paper's Panda box experiment (Sec. V-C, App. II-E), which
    simulates the PD-controlled arm from the recorded targets: conditioning on the measured arm
    motion removes the stiff PD loop (which needs ~1 ms steps) and the arm's model errors from
    the likelihood, so only the box's dynamics, which carry the unknown weights, are simulated.

    Args:
        actuated: dof indices (into ``q``/``v``) that follow the recording, in the column order
            of each block of ``u``; every other dof is passive. At least one dof must stay
            passive.
    """

    def __init__(self, actuated: Sequence[int]) -> None:
        if actuated is None or len(actuated) == 0:
            raise StateError("prescribed motion needs the list of actuated dofs, got none")
        super().__init__(actuated)
        self.actuated: tuple[int, ...]

    def input_size(self, nv: int) -> int:
        """``nu = 3 na``: positions, velocities then accelerations of the actuated dofs."""
        na = self._actuated_count(nv)
        if na >= nv:
            raise StateError(
                f"prescribed motion drives all {nv} dofs ({list(self.actuated)}); at least one "
                "dof must be passive"
            )
        return 3 * na

    def passive(self, nv: int) -> list[int]:
        """Indices of the passive (simulated) dofs of a robot with ``nv`` dofs."""
        return [i for i in range(nv) if i not in self.actuated]

    def _blocks(self, like: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(q_a, q̇_a, q̈_a)`` of ``u``, each ``[N|1, *B, na]``."""
        nu = self.input_size(like.shape[-1])
        self._check_input(u, nu, "actuated positions, velocities then accelerations")
        return torch.split(u, nu // 3, dim=-1)

    def prescribe(
        self, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q, v)`` ``[N, *B, nv]`` with the actuated entries replaced by those of ``u``."""
        q_a, v_a, _ = self._blocks(q, u)
        mask = torch.zeros(q.shape[-1], dtype=torch.bool, device=q.device)
        mask[list(self.actuated)] = True
        return (
            torch.where(mask, self._scatter(q_a, q), q),
            torch.where(mask, self._scatter(v_a, v), v),
        )

    def accelerations(
        self,
        dyn: HybridDynamics,
        p: DynamicParameters,
        q: torch.Tensor,
        v: torch.Tensor,
        u: torch.Tensor,
        tau_ext: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Joint accelerations ``[N, *B, nv]``: ``q̈_a`` of ``u`` and the hybrid ``q̈_p``.

        Args:
            dyn: a dynamics backend with ``rnea``, ``mass_matrix`` and ``friction_torque``; its
                mass matrix must carry gradients when ``p`` does.
            p: per-particle dynamic parameters.
            q, v: state ``[N, *B, nv]`` (actuated entries as prescribed).
            u: ``[N|1, *B, 3 na]`` prescribed motion.
            tau_ext: extra generalised forces ``[N, *B, nv]`` (attachments), or ``None``.
        """
        _, _, a_a = self._blocks(q, u)
        passive = self.passive(q.shape[-1])
        a = self._scatter(a_a, q)
        rhs = -(dyn.rnea(p, q, v, a) + dyn.friction_torque(p, v))
        if tau_ext is not None:
            rhs = rhs + tau_ext
        M = dyn.mass_matrix(p, q)
        needs_grad = p.inertia.requires_grad or p.armature.requires_grad
        if torch.is_grad_enabled() and needs_grad and not M.requires_grad:
            raise StateError(
                f"{type(dyn).__name__}.mass_matrix carries no gradient; prescribed motion needs "
                "a differentiable mass matrix for gradient-based estimators (use the torch backend)"
            )
        M_pp = M[..., passive, :][..., passive]
        a_p = torch.linalg.solve(M_pp, rhs[..., passive])
        index = torch.tensor(passive, dtype=torch.long, device=q.device)
        return a.expand(*a_p.shape[:-1], q.shape[-1]).index_copy(-1, index, a_p)


def _check_step_size(dt: float, substeps: int) -> None:
    if not (math.isfinite(dt) and dt > 0.0):
        raise StateError(f"time step dt must be a positive finite number of seconds, got {dt!r}")
    if int(substeps) != substeps or substeps < 1:
        raise StateError(f"substeps must be a positive integer, got {substeps!r}")


Control = ControlModel | PrescribedMotion
"""What drives a simulation: generalised forces from inputs, or prescribed actuated motion."""


def _accelerations(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    control: Control,
    forces: Sequence[GeneralizedForce],
) -> torch.Tensor:
    """Joint accelerations ``[N, *B, nv]`` under ``control`` plus the extra ``forces``."""
    tau_ext = None
    for force in forces:
        tau_ext = force(p, q, v) if tau_ext is None else tau_ext + force(p, q, v)
    if isinstance(control, PrescribedMotion):
        return control.accelerations(dyn, p, q, v, u, tau_ext)  # type: ignore[arg-type]
    tau = control(p, q, v, u)
    return dyn.forward_dynamics(p, q, v, tau if tau_ext is None else tau + tau_ext)


def step(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    dt: float,
    control: Control,
    substeps: int = 1,
    forces: Sequence[GeneralizedForce] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advance one control sample with semi-implicit Euler (csvgd eq. 12, proprio eq. 2).

    Args:
        dyn: forward dynamics (``TorchDynamics`` or ``PinocchioDynamics``).
        p: per-particle dynamic parameters (leading dim ``N``, broadcast over ``*B``).
        q, v: positions and velocities ``[N, *B, nv]`` (``N`` may be 1 and broadcast).
        u: control sample ``[N|1, *B, nu]``, held constant over the ``substeps``.
        dt: control period in s; each sub-step advances ``dt / substeps``.
        control: maps ``u`` to generalised forces, or :class:`PrescribedMotion` (the actuated
            entries of ``q, v`` are then replaced by ``u``'s before the first sub-step).
        substeps: number of integrator sub-steps per control sample.
        forces: extra state-dependent generalised forces; ``None`` (default) takes those of the
            attachments of ``dyn.robot`` (the penalty contact of a sphere in a container), ``()``
            none.

    Returns:
        ``(q_next, v_next)``, each ``[N, *B, nv]``.
    """
    _check_step_size(dt, substeps)
    h = dt / substeps
    forces = _forces_of(dyn, forces)
    if isinstance(control, PrescribedMotion):
        q, v = control.prescribe(q, v, u)
    for _ in range(int(substeps)):
        a = _accelerations(dyn, p, q, v, u, control, forces)
        v = v + h * a
        q = q + h * v
    return q, v


def _check_state(name: str, x: torch.Tensor) -> None:
    if x.dim() < 2:
        raise StateError(f"{name} must have shape [N, *B, nv], got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise StateError(f"{name} contains NaN or infinite entries")


def _check_rollout_inputs(
    q0: torch.Tensor, v0: torch.Tensor, u: torch.Tensor, control: Control
) -> None:
    _check_state("q0", q0)
    _check_state("v0", v0)
    if q0.shape[-1] != v0.shape[-1]:
        raise StateError(
            f"q0 {tuple(q0.shape)} and v0 {tuple(v0.shape)} disagree on nv (nq must equal nv)"
        )
    if u.dim() != q0.dim() + 1:
        raise StateError(
            f"u must have shape [N|1, *B, T, nu] with the batch dims of q0 {tuple(q0.shape)}, "
            f"got {tuple(u.shape)}"
        )
    if not bool(torch.isfinite(u).all()):
        raise StateError("control u contains NaN or infinite entries")
    nu = control.input_size(q0.shape[-1])
    if u.shape[-1] != nu:
        raise StateError(
            f"u has {u.shape[-1]} control columns, the control model expects {nu}: "
            f"got shape {tuple(u.shape)}"
        )


def _integrate(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    dt: float,
    control: Control,
    substeps: int,
    forces: Sequence[GeneralizedForce] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """States after each of the ``T`` samples of ``u [.., T, nu]``: ``[.., T, nv]`` twice."""
    qs, vs = [], []
    for k in range(u.shape[-2]):
        q, v = step(dyn, p, q, v, u[..., k, :], dt, control, substeps, forces)
        qs.append(q)
        vs.append(v)
    return torch.stack(qs, dim=-2), torch.stack(vs, dim=-2)


def rollout(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q0: torch.Tensor,
    v0: torch.Tensor,
    u: torch.Tensor,
    dt: float,
    control: Control,
    substeps: int = 1,
    forces: Sequence[GeneralizedForce] | None = None,
    checkpoint_every: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Simulate ``T`` control samples from ``(q0, v0)`` for every particle (single shooting).

    Args:
        dyn, p, control, substeps, forces: as in :func:`step`.
        q0, v0: initial state ``[N|1, *B, nv]``.
        u: controls ``[N|1, *B, T, nu]``; sample ``k`` acts on ``[t_k, t_k + dt)``.
        dt: control period in s.
        checkpoint_every: if set, the rollout is cut into chunks of this many samples whose
            forward pass records no graph and keeps only the states; the backward pass
            recomputes a chunk one sample at a time from those states and back-propagates
            through that sample at once (:class:`_CheckpointedChunk`), so memory for gradients
            is the states plus one sample's graph instead of ``T`` sample graphs (long
            rollouts, T = 1000, many particles). Gradients reach ``q0``, ``v0``, ``u`` and the
            tensors of ``p``; a control model or force holding tensors that require gradients
            itself falls back to ``torch.utils.checkpoint`` of whole chunks.

    Returns:
        ``(q, v)``, each ``[N, *B, T + 1, nv]``; index 0 is the initial state.
    """
    _check_rollout_inputs(q0, v0, u, control)
    _check_step_size(dt, substeps)
    if checkpoint_every is not None and (
        int(checkpoint_every) != checkpoint_every or checkpoint_every < 1
    ):
        raise StateError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    q, v = q0, v0
    q_chunks, v_chunks = [], []
    T = u.shape[-2]
    chunk = T if checkpoint_every is None else int(checkpoint_every)
    tensors, rebuild = _parameter_tensors(p)
    own_grads = _holds_grad(control) or any(_holds_grad(f) for f in _forces_of(dyn, forces))
    for start in range(0, T, max(chunk, 1)):
        u_chunk = u[..., start : start + chunk, :]
        if checkpoint_every is None or not torch.is_grad_enabled():
            qs, vs = _integrate(dyn, p, q, v, u_chunk, dt, control, substeps, forces)
        elif own_grads:
            qs, vs = checkpoint(
                _integrate,
                dyn,
                p,
                q,
                v,
                u_chunk,
                dt,
                control,
                substeps,
                forces,
                use_reentrant=False,
            )
        else:
            setup = _ChunkSetup(dyn, rebuild, dt, control, substeps, forces)
            qs, vs = _CheckpointedChunk.apply(setup, q, v, u_chunk, *tensors)
        q_chunks.append(qs)
        v_chunks.append(vs)
        q, v = qs[..., -1, :], vs[..., -1, :]
    shape = np.broadcast_shapes(q.shape, q0.shape)
    q_first = q0.expand(shape).unsqueeze(-2)
    v_first = v0.expand(shape).unsqueeze(-2)
    return torch.cat([q_first, *q_chunks], dim=-2), torch.cat([v_first, *v_chunks], dim=-2)


def _parameter_tensors(
    p: DynamicParameters,
) -> tuple[list[torch.Tensor], Callable[[Sequence[torch.Tensor]], DynamicParameters]]:
    """The tensors of ``p`` in a fixed order, and the map from such a list back to parameters."""
    names = [f.name for f in fields(p) if f.name != "extra"]
    extra = list(p.extra)
    tensors = [getattr(p, name) for name in names] + [p.extra[key] for key in extra]

    def rebuild(values: Sequence[torch.Tensor]) -> DynamicParameters:
        n = len(names)
        return type(p)(
            **dict(zip(names, values[:n], strict=True)),
            extra=dict(zip(extra, values[n:], strict=True)),
        )

    return tensors, rebuild


def _holds_grad(obj: object) -> bool:
    """Whether ``obj`` (a control model or a force) holds a tensor that requires gradients.

    Looks at its attributes, a bound method's object and a closure's cells.
    """
    seen: list[object] = [obj, getattr(obj, "__self__", None)]
    seen += [cell.cell_contents for cell in getattr(obj, "__closure__", None) or ()]
    values: list[object] = []
    for item in seen:
        values.append(item)
        values += list(getattr(item, "__dict__", {}).values())
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(x, torch.Tensor) and x.requires_grad for x in items):
            return True
    return False


class _ChunkSetup(NamedTuple):
    """The non-tensor arguments of a checkpointed chunk (see :func:`rollout`)."""

    dyn: ForwardDynamics
    rebuild: Callable[[Sequence[torch.Tensor]], DynamicParameters]
    dt: float
    control: Control
    substeps: int
    forces: Sequence[GeneralizedForce] | None


class _CheckpointedChunk(torch.autograd.Function):
    """A rollout chunk whose forward keeps only the states and whose backward recomputes it.

    Inputs: the :class:`_ChunkSetup`, the chunk's start state q, v ``[N|1, *B, nv]``, its
    controls ``[N|1, *B, k, nu]`` and the tensors of the parameters; outputs the states after
    each sample, ``[N, *B, k, nv]`` twice. The forward pass runs without a graph (the dynamics
    then use their reused scratch buffers); the backward pass walks the samples backwards:
    re-run one :func:`step` from its saved start state with a graph, back-propagate the
    incoming cotangents of its end state through it, free that graph, and carry the cotangents
    of its start state to the previous sample. Memory: the states plus one sample's graph.
    """

    @staticmethod
    def forward(
        setup: _ChunkSetup, q: torch.Tensor, v: torch.Tensor, u: torch.Tensor, *params: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        p = setup.rebuild(params)
        return _integrate(
            setup.dyn, p, q, v, u, setup.dt, setup.control, setup.substeps, setup.forces
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        setup, *tensors = inputs
        ctx.setup = setup
        ctx.save_for_backward(*tensors, *output)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_qs: torch.Tensor | None, grad_vs: torch.Tensor | None) -> Any:
        setup: _ChunkSetup = ctx.setup
        q0, v0, u, *rest = ctx.saved_tensors
        params, (qs, vs) = rest[:-2], rest[-2:]
        needs = ctx.needs_input_grad[1:]
        grad_qs = torch.zeros_like(qs) if grad_qs is None else grad_qs
        grad_vs = torch.zeros_like(vs) if grad_vs is None else grad_vs
        leaves = [
            x.detach().requires_grad_(need) for x, need in zip(params, needs[3:], strict=True)
        ]
        p = setup.rebuild(leaves)
        wanted = [x for x in leaves if x.requires_grad]
        grad_params: list[torch.Tensor | None] = [None] * len(wanted)
        grad_u = torch.zeros_like(u) if needs[2] else None
        carry_q, carry_v = grad_qs[..., -1, :], grad_vs[..., -1, :]
        # each sample's graph is freed before the next: the dynamics may reuse its saved buffers
        recycling = getattr(setup.dyn, "recycling_tapes", None)
        with recycling() if recycling is not None else contextlib.nullcontext():
            for k in reversed(range(u.shape[-2])):
                q_in = (q0 if k == 0 else qs[..., k - 1, :]).detach().requires_grad_(True)
                v_in = (v0 if k == 0 else vs[..., k - 1, :]).detach().requires_grad_(True)
                u_k = u[..., k, :].detach().requires_grad_(needs[2])
                with torch.enable_grad():
                    q_out, v_out = step(
                        setup.dyn,
                        p,
                        q_in,
                        v_in,
                        u_k,
                        setup.dt,
                        setup.control,
                        setup.substeps,
                        setup.forces,
                    )
                    inputs = [q_in, v_in, *wanted] + ([u_k] if needs[2] else [])
                    grads = torch.autograd.grad(
                        (q_out, v_out), inputs, (carry_q, carry_v), allow_unused=True
                    )
                carry_q = torch.zeros_like(q_in) if grads[0] is None else grads[0]
                carry_v = torch.zeros_like(v_in) if grads[1] is None else grads[1]
                for i, g in enumerate(grads[2 : 2 + len(wanted)]):
                    if g is not None:
                        grad_params[i] = g if grad_params[i] is None else grad_params[i] + g
                if grad_u is not None and grads[-1] is not None:
                    grad_u[..., k, :] = grads[-1]
                if k > 0:
                    carry_q = carry_q + grad_qs[..., k - 1, :]
                    carry_v = carry_v + grad_vs[..., k - 1, :]
        by_leaf = dict(zip(map(id, wanted), grad_params, strict=True))
        out_params = [by_leaf.get(id(x)) for x in leaves]
        grad_q0 = carry_q.sum_to_size(q0.shape) if needs[0] else None
        grad_v0 = carry_v.sum_to_size(v0.shape) if needs[1] else None
        return (None, grad_q0, grad_v0, grad_u, *out_params)


def split_windows(
    q: torch.Tensor, v: torch.Tensor, u: torch.Tensor, horizon: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cut a trajectory into ``W = T // horizon`` shooting windows of ``horizon`` samples.

    Args:
        q, v: states ``[*L, T + 1, nv]`` (a rollout or a recording; extra rows are ignored).
        u: controls ``[*L', T, nu]``.
        horizon: samples per window ``h``.

    Returns:
        ``(q_start [*L, W, nv], v_start [*L, W, nv], u_windows [*L', W, h, nu])``: the state at
        the start of each window and the controls acting in it.
    """
    if int(horizon) != horizon or horizon < 1:
        raise StateError(f"window horizon must be a positive integer, got {horizon!r}")
    T = u.shape[-2]
    W = T // horizon
    if W < 1:
        raise StateError(f"u has {T} samples, fewer than one window of horizon {horizon}")
    if q.shape[-2] < W * horizon or v.shape[-2] < W * horizon:
        raise StateError(
            f"q {tuple(q.shape)} and v {tuple(v.shape)} must have at least {W * horizon} samples"
        )
    starts = torch.arange(W, device=q.device) * horizon
    u_windows = u[..., : W * horizon, :].reshape(*u.shape[:-2], W, horizon, u.shape[-1])
    return q.index_select(-2, starts), v.index_select(-2, starts), u_windows


def shoot_windows(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q_start: torch.Tensor,
    v_start: torch.Tensor,
    u: torch.Tensor,
    dt: float,
    control: Control,
    substeps: int = 1,
    forces: Sequence[GeneralizedForce] | None = None,
    checkpoint_every: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Multiple shooting: simulate all windows of all particles in one batched rollout.

    Window ``w`` starts from ``(q_start[:, w], v_start[:, w])`` (free decision variables of the
    estimator) and runs ``h`` samples of ``u[:, w]``. The defect of window ``w`` is the gap between
    its simulated end state and the start of window ``w + 1`` (csvgd Sec. IV-C). Under
    :class:`PrescribedMotion` the actuated entries of every window start come from the window's
    first input (the data), so they are no decision variables: their defects are zero and only
    the passive joints' defects remain.

    Args:
        dyn, p, dt, control, substeps, forces, checkpoint_every: as in :func:`rollout`.
        q_start, v_start: window start states ``[N|1, W, nv]``.
        u: controls ``[N|1, W, h, nu]``.

    Returns:
        ``(q [N, W, h + 1, nv], v [N, W, h + 1, nv], defects [N, W - 1, 2 nv])`` with defects
        ordered ``[q_end − q_start_next, v_end − v_start_next]``.
    """
    if q_start.dim() != 3 or u.dim() != 4:
        raise StateError(
            f"q_start must be [N, W, nv] and u [N|1, W, h, nu], got {tuple(q_start.shape)} "
            f"and {tuple(u.shape)}"
        )
    if u.shape[1] != q_start.shape[1]:
        raise StateError(
            f"u has {u.shape[1]} windows but q_start has {q_start.shape[1]} window starts"
        )
    if isinstance(control, PrescribedMotion):
        q_start, v_start = control.prescribe(q_start, v_start, u[..., 0, :])
    q, v = rollout(dyn, p, q_start, v_start, u, dt, control, substeps, forces, checkpoint_every)
    defects = torch.cat([q[:, :-1, -1] - q_start[:, 1:], v[:, :-1, -1] - v_start[:, 1:]], dim=-1)
    if isinstance(control, PrescribedMotion):
        nv = q_start.shape[-1]
        keep = torch.zeros(nv, dtype=defects.dtype, device=defects.device)
        keep[control.passive(nv)] = 1.0
        defects = defects * keep.repeat(2)
    return q, v, defects
