"""Forward simulation of a problem: the rigid model (with a single-joint fast path) or the
soft block, rollouts of whole data sets, and the one-step transition of filters.

A :class:`Simulator` maps parameters to the observations of one trajectory, simulated from its
first recorded state under its recorded controls (single shooting). The problem holds one
(``Problem.simulator``, chosen in the problem file's ``simulation.model``); every estimator and
benchmark simulates through it (:class:`dynid.objective.Objective`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import torch

from dynid.errors import EstimatorError
from dynid.model.integrate import CurrentControl, TorqueControl, rollout
from dynid.model.params import ParameterSpec, nominal_parameters
from dynid.model.robot import JointKind
from dynid.model.soft_block import GripperSqueeze

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.model.params import DynamicParameters
    from dynid.problem import Problem

__all__ = [
    "RigidSimulation",
    "Simulator",
    "SingleJointDynamics",
    "SoftBlockSimulation",
    "simulate_dataset",
]


class Simulator(Protocol):
    """``simulate(problem, theta [N, M], trajectory) -> observations [N, T + 1, k]``.

    The problem's ``obs_names`` columns at the trajectory's samples; index 0 observes the recorded
    start state. Control sample ``k`` acts on ``[t_k, t_{k+1})``.

    Attributes:
        name: the ``simulation.model`` name of the problem file.
        rigid: the state is the robot's ``(q, v)`` alone, so rollouts can restart from any
            recorded state (multiple shooting, one-step transitions).
    """

    name: str
    rigid: bool

    def __call__(self, problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
        """Simulated observations of ``traj`` for every particle."""
        ...


class SingleJointDynamics:
    """Exact forward dynamics of a fixed-base robot with one movable joint, cheap to step.

    With one joint about (or along) a fixed axis the joint-space inertia is constant and the
    gravity torque is ``g(q) = g(0) cos q + g(π/2) sin q`` (revolute; constant for a prismatic
    joint), with no Coriolis term. ``M`` (armature included) and ``g`` are taken once from the
    shared dynamics (``mass_matrix``, ``rnea``) for the particles of ``p``, friction from its
    ``friction_torque`` at every step; :meth:`forward_dynamics` then equals the shared one.

    Args:
        problem: a problem whose robot has ``nv == 1``.
        p: per-particle parameters ``[N, ...]`` the accelerations are for.
    """

    def __init__(self, problem: Problem, p: DynamicParameters) -> None:
        if problem.robot.nv != 1:
            raise EstimatorError(
                f"SingleJointDynamics needs one movable joint, robot {problem.robot.name!r} "
                f"has {problem.robot.joint_names}"
            )
        self.dyn = problem.dynamics
        n = p.inertia.shape[0]
        zero = torch.zeros(n, 1, dtype=problem.dtype, device=problem.device)
        self.inertia = self.dyn.mass_matrix(p, zero)[..., 0, 0:1]
        self.g_cos = self.dyn.rnea(p, zero, zero, zero)
        revolute = problem.robot.joint_kinds[0] is JointKind.REVOLUTE
        self.g_sin = self.dyn.rnea(p, zero + math.pi / 2.0, zero, zero) if revolute else None
        # Every friction term is proportional to damping, Coulomb or Stribeck level, torque offset
        # or sigmoid scale: all zero (and not being fitted) means no friction, and its evaluation
        # can be skipped.
        terms = (p.damping, p.coulomb, p.stribeck_delta, p.torque_offset, p.sigmoid_scale)
        self.frictionless = not any(bool(x.requires_grad or x.any()) for x in terms)

    def forward_dynamics(
        self, p: DynamicParameters, q: torch.Tensor, v: torch.Tensor, tau: torch.Tensor
    ) -> torch.Tensor:
        """``q̈ [N, 1]`` for ``q, v, tau [N, 1]`` (the particles given at construction)."""
        grav = (
            self.g_cos * torch.cos(q) + self.g_sin * torch.sin(q)
            if self.g_sin is not None
            else self.g_cos
        )
        rhs = tau - grav
        if not self.frictionless:
            rhs = rhs - self.dyn.friction_torque(p, v)
        return rhs / self.inertia


def _single_dof_rollout(
    problem: Problem,
    p: DynamicParameters,
    q0: torch.Tensor,
    v0: torch.Tensor,
    u: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Semi-implicit Euler rollout with :class:`SingleJointDynamics` (same result as
    ``integrate.rollout``); open-loop controls (torque, current) are converted for all samples in
    one call.

    Args:
        q0, v0: ``[1, 1]`` initial state; u: ``[1, T, nu]`` controls.

    Returns:
        ``(q [N, T + 1, 1], v [N, T + 1, 1])``.
    """
    dyn = SingleJointDynamics(problem, p)
    n = p.inertia.shape[0]
    q = q0.expand(n, 1)
    v = v0.expand(n, 1)
    T = u.shape[-2]
    open_loop = isinstance(problem.control, (TorqueControl, CurrentControl))
    if open_loop:  # torque from the command alone: one batched call for all samples
        taus = problem.control(p, q.unsqueeze(1).expand(n, T, 1), v.unsqueeze(1).expand(n, T, 1), u)
    h = problem.dt / problem.substeps
    qs, vs = [q], [v]
    for k in range(T):
        for _ in range(problem.substeps):
            tau = taus[:, k] if open_loop else problem.control(p, q, v, u[:, k])
            v = v + h * dyn.forward_dynamics(p, q, v, tau)
            q = q + h * v
        qs.append(q)
        vs.append(v)
    return torch.stack(qs, dim=-2), torch.stack(vs, dim=-2)


@dataclass(frozen=True)
class RigidSimulation:
    """The rigid robot plus its attachments (fixed payload; sphere in container through the
    contact forces of its attachment), from the trajectory's first sample (zero velocity when
    the trajectory has none). A robot with one movable joint and no contact forces steps with
    :class:`SingleJointDynamics` (the same result, cheaper).
    """

    name: ClassVar[str] = "rigid"
    rigid: ClassVar[bool] = True

    def __call__(self, problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
        """``[N, T + 1, k]`` simulated observations (``problem.obs_names``) of ``traj`` for SI
        parameters ``theta [N, M]``."""
        p = problem.parameters(theta)
        q0, v0 = problem.initial_state(traj)
        u = problem.controls(traj)[:-1].unsqueeze(0)
        # Attachments with their own forces (penalty contact) need the full dynamics; rollout
        # applies them by default.
        if problem.robot.nv == 1 and not getattr(problem.robot, "generalized_forces", ()):
            q, v = _single_dof_rollout(problem, p, q0[None], v0[None], u)
        else:
            q, v = rollout(
                problem.dynamics,
                p,
                q0[None],
                v0[None],
                u,
                problem.dt,
                problem.control,
                problem.substeps,
            )
        return problem.observe(problem.dynamics, p, q, v)


@dataclass(frozen=True)
class SoftBlockSimulation:
    """Simulation of the gripper squeezing the FEM soft block (Sec. III-B, V-C).

    The Lamé parameters are the spec's ``"block/mu"`` and ``"block/lambda"`` (Pa); every other
    parameter goes through the spec to the robot as usual. The robot must have the gripper joint
    as its only movable joint (the arm locked), stepped with :class:`SingleJointDynamics`.

    Attributes:
        squeeze: the block and its coupling to the gripper joint.
    """

    squeeze: GripperSqueeze
    names: tuple[str, str] = ("block/mu", "block/lambda")
    name: ClassVar[str] = "soft_block"
    rigid: ClassVar[bool] = False

    def __call__(self, problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
        """``[N, T + 1, k]`` simulated observations (the gripper joint position)."""
        spec = problem.spec
        missing = [n for n in self.names if n not in spec.names]
        if missing:
            raise EstimatorError(
                f"soft-block problem {problem.name!r} needs parameters {missing} (Pa) in its spec"
            )
        cols = [spec.names.index(n) for n in self.names]
        rest = [i for i in range(spec.dim) if i not in cols]
        robot_spec = ParameterSpec([spec.parameters[i] for i in rest])
        n = theta.shape[0]
        if rest:
            p = robot_spec.apply(problem.robot, theta[:, rest])
        else:
            p = nominal_parameters(problem.robot, n, dtype=theta.dtype, device=theta.device)
        q0, v0 = problem.initial_state(traj)
        u = problem.controls(traj)[:-1].unsqueeze(0)
        control = problem.control
        if isinstance(control, (TorqueControl, CurrentControl)):
            # Open loop: convert the whole command once, then apply it as joint torques.
            T = u.shape[-2]
            q_b = q0.reshape(1, 1, -1).expand(n, T, -1)
            u = control(p, q_b, v0.reshape(1, 1, -1).expand(n, T, -1), u)
            control = TorqueControl(None)
        q, v, _ = self.squeeze.rollout(
            SingleJointDynamics(problem, p),
            p,
            q0[None],
            v0[None],
            u,
            problem.dt,
            control,
            theta[:, cols[0]],
            theta[:, cols[1]],
            problem.substeps,
        )
        return problem.observe(problem.dynamics, p, q, v)


def simulate_dataset(problem: Problem, theta: torch.Tensor) -> torch.Tensor:
    """Single-shooting simulation of every particle on every trajectory of ``problem``.

    Args:
        problem: its trajectories give the initial states, controls and length ``T + 1``
            (all equal).
        theta: ``[N, M]`` SI parameters.

    Returns:
        ``[N, K, T + 1, k]`` simulated observations (index 0 observes the recorded start state).

    Raises:
        EstimatorError: the trajectories differ in length.
    """
    lengths = {traj.num_samples for traj in problem.dataset}
    if len(lengths) != 1:
        raise EstimatorError(f"trajectories must have equal length, got {sorted(lengths)}")
    theta = theta.to(dtype=problem.dtype, device=problem.device)
    if not problem.simulator.rigid:
        batched = getattr(problem.simulator, "simulate_dataset", None)  # all trajectories at once
        if batched is not None:
            return batched(problem, theta)
        return torch.stack([problem.simulator(problem, theta, tr) for tr in problem.dataset], 1)
    starts = [problem.initial_state(traj) for traj in problem.dataset]
    q0 = torch.stack([s[0] for s in starts]).unsqueeze(0)  # [1, K, nv]
    v0 = torch.stack([s[1] for s in starts]).unsqueeze(0)
    T = lengths.pop() - 1
    u = torch.stack([problem.controls(traj)[:T] for traj in problem.dataset]).unsqueeze(0)
    p = problem.parameters(theta)
    N = theta.shape[0]
    q, v = rollout(
        problem.dynamics,
        p,
        q0.expand(N, -1, -1),
        v0.expand(N, -1, -1),
        u,
        problem.dt,
        problem.control,
        problem.substeps,
    )
    return problem.observe(problem.dynamics, p, q, v)
