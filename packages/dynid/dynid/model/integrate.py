"""Time stepping: semi-implicit Euler, control models, rollouts and multiple-shooting windows.

The integrator is the one of the csvgd paper (eq. 12) and of the proprioceptive paper (eq. 2)::

    q̈_{k+1} = FD(q_k, q̇_k, τ_k; θ)
    q̇_{k+1} = q̇_k + Δt q̈_{k+1}
    q_{k+1} = q_k + Δt q̇_{k+1}

with ``substeps`` equal sub-steps of ``dt / substeps`` per control sample (the control is held
constant over a sample). Shapes follow the model layer: ``N`` parameter particles, extra batch
dimensions ``*B`` (e.g. shooting windows ``W``), ``T`` time steps, ``nv`` generalised velocities
(``nq == nv`` for dynid's revolute and prismatic joints) and ``nu`` control inputs. Positions are in
rad or m, velocities in rad/s or m/s, generalised forces in N·m or N, time in s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import torch
from torch.utils.checkpoint import checkpoint

from dynid.model.errors import StateError

if TYPE_CHECKING:
    from dynid.model.params import DynamicParameters

__all__ = [
    "ControlModel",
    "CurrentControl",
    "ForwardDynamics",
    "GeneralizedForce",
    "PDControl",
    "TorqueControl",
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
        shape = torch.broadcast_shapes(like.shape[:-1], tau_a.shape[:-1])
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


def _check_step_size(dt: float, substeps: int) -> None:
    if not (math.isfinite(dt) and dt > 0.0):
        raise StateError(f"time step dt must be a positive finite number of seconds, got {dt!r}")
    if int(substeps) != substeps or substeps < 1:
        raise StateError(f"substeps must be a positive integer, got {substeps!r}")


def step(
    dyn: ForwardDynamics,
    p: DynamicParameters,
    q: torch.Tensor,
    v: torch.Tensor,
    u: torch.Tensor,
    dt: float,
    control: ControlModel,
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
        control: maps ``u`` to generalised forces.
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
    for _ in range(int(substeps)):
        tau = control(p, q, v, u)
        for force in forces:
            tau = tau + force(p, q, v)
        a = dyn.forward_dynamics(p, q, v, tau)
        v = v + h * a
        q = q + h * v
    return q, v


def _check_state(name: str, x: torch.Tensor) -> None:
    if x.dim() < 2:
        raise StateError(f"{name} must have shape [N, *B, nv], got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise StateError(f"{name} contains NaN or infinite entries")


def _check_rollout_inputs(
    q0: torch.Tensor, v0: torch.Tensor, u: torch.Tensor, control: ControlModel
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
    control: ControlModel,
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
    control: ControlModel,
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
        checkpoint_every: if set, the rollout is cut into chunks of this many samples and each
            chunk is recomputed during the backward pass (``torch.utils.checkpoint``), so memory
            for gradients grows with ``T / checkpoint_every + checkpoint_every`` step graphs
            instead of ``T`` (long rollouts, T = 1000, many particles).

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
    for start in range(0, T, max(chunk, 1)):
        u_chunk = u[..., start : start + chunk, :]
        if checkpoint_every is None or not torch.is_grad_enabled():
            qs, vs = _integrate(dyn, p, q, v, u_chunk, dt, control, substeps, forces)
        else:
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
        q_chunks.append(qs)
        v_chunks.append(vs)
        q, v = qs[..., -1, :], vs[..., -1, :]
    shape = torch.broadcast_shapes(q.shape, q0.shape)
    q_first = q0.expand(shape).unsqueeze(-2)
    v_first = v0.expand(shape).unsqueeze(-2)
    return torch.cat([q_first, *q_chunks], dim=-2), torch.cat([v_first, *v_chunks], dim=-2)


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
    control: ControlModel,
    substeps: int = 1,
    forces: Sequence[GeneralizedForce] | None = None,
    checkpoint_every: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Multiple shooting: simulate all windows of all particles in one batched rollout.

    Window ``w`` starts from ``(q_start[:, w], v_start[:, w])`` (free decision variables of the
    estimator) and runs ``h`` samples of ``u[:, w]``. The defect of window ``w`` is the gap between
    its simulated end state and the start of window ``w + 1`` (csvgd Sec. IV-C).

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
    q, v = rollout(dyn, p, q_start, v_start, u, dt, control, substeps, forces, checkpoint_every)
    defects = torch.cat([q[:, :-1, -1] - q_start[:, 1:], v[:, :-1, -1] - v_start[:, 1:]], dim=-1)
    return q, v, defects
