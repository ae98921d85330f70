"""Proprioceptive identification (Chen et al.): object parameters from joint encoders alone.

The object (a payload held by a fixed joint, a sphere shaken in a container, a soft block squeezed
by the gripper) is part of the simulated robot–object system; its parameters θ are found by
minimising the mean squared error between simulated and measured *joint positions* (eq. 5) — the
object itself is never tracked. Gradients come from differentiating the simulation (the shared
torch model, semi-implicit Euler, eq. 2).

- ``optimizer="adam"``: Adam with a cosine-annealed learning rate (App. VI-B, lr 0.01), run from
  several initial guesses at once (multi-start, Sec. V-D: five guesses spanning two orders of
  magnitude), projected onto the parameter bounds after every step;
- ``optimizer="cma"``: the gradient-free baseline of Sec. V-E, CMA-ES (the ``cma`` package) on the
  same loss, one population member per start, so both spend the same number of simulations per
  iteration.

Optimisation runs in the normalised coordinates ``u = (θ − lower) / (upper − lower)`` of the
parameter spec (csvgd App. I-C), so the learning rate is a fraction of each parameter's range.

The returned :class:`~dynid.posterior.Posterior` holds one particle per start (the best point each
start reached), log-likelihoods under the problem's Gaussian encoder noise, and a Gauss–Newton
(Laplace) covariance at the best fit: ``Σ = (Jᵀ S⁻¹ J)⁻¹`` with ``J = ∂q_sim/∂θ``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import torch

from dynid.estimators.base import Estimator, EstimatorError, EstimatorKind, StepInfo
from dynid.model.integrate import CurrentControl, TorqueControl, rollout
from dynid.model.params import ParameterSpec, nominal_parameters
from dynid.model.robot import JointKind
from dynid.model.soft_block import GripperSqueeze
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.model.params import DynamicParameters
    from dynid.problem import Problem

__all__ = [
    "Optimizer",
    "ProprioFit",
    "ProprioLoss",
    "Simulator",
    "SingleJointDynamics",
    "SoftBlockSimulation",
    "initial_guesses",
    "rigid_simulation",
]

Simulator = Callable[["Problem", torch.Tensor, "Trajectory"], torch.Tensor]
"""``simulate(problem, theta [N, M], trajectory) -> observations [N, T, k]`` (the problem's
``obs_names`` columns, at the trajectory's samples)."""


class Optimizer(StrEnum):
    """How θ is searched."""

    ADAM = "adam"
    CMA = "cma"


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
        # Every friction term is proportional to damping, Coulomb or Stribeck level: all zero
        # (and not being fitted) means no friction, and its evaluation can be skipped.
        self.frictionless = not any(
            bool(x.requires_grad or x.any()) for x in (p.damping, p.coulomb, p.stribeck_delta)
        )

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


def rigid_simulation(problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
    """Simulate ``traj``'s controls from its first state for every particle of ``theta``.

    Rigid robot plus its attachments (fixed payload; sphere in container through the contact
    forces of its attachment). The robot starts at the trajectory's first sample (zero velocity
    when the trajectory has none); control sample ``k`` acts on ``[t_k, t_{k+1})``.

    Args:
        problem: the identification problem.
        theta: ``[N, M]`` parameters (SI).
        traj: one trajectory of the problem's dataset.

    Returns:
        ``[N, T, k]`` simulated observations (``problem.obs_names``).
    """
    p = problem.parameters(theta)
    q0, v0 = problem.initial_state(traj)
    u = problem.controls(traj)[:-1].unsqueeze(0)
    # Attachments with their own forces (penalty contact) need the full dynamics; rollout applies
    # them by default.
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


@dataclass
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

    def __call__(self, problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
        """``[N, T, k]`` simulated observations (the gripper joint position)."""
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


class ProprioLoss:
    """Eq. 5: mean squared error of simulated against measured joint positions.

    The mean runs over samples, observed channels and trajectories, per particle.

    Args:
        problem: whose ``obs_names`` are joint positions (``"<joint>/position"``).
        simulate: the robot–object simulation; :func:`rigid_simulation` by default.
    """

    def __init__(self, problem: Problem, simulate: Simulator = rigid_simulation) -> None:
        not_joints = [n for n in problem.obs_names if not n.endswith("/position")]
        if not_joints:
            raise EstimatorError(
                f"proprio fits joint positions only (eq. 5); problem {problem.name!r} also "
                f"observes {not_joints}"
            )
        self.problem = problem
        self.simulate = simulate
        self.targets = [problem.targets(traj) for traj in problem.dataset]
        self.count = sum(int(t.numel()) for t in self.targets)

    def residuals(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N, R]`` simulated minus measured positions over all samples (rad or m)."""
        parts = []
        for traj, target in zip(self.problem.dataset, self.targets, strict=True):
            sim = self.simulate(self.problem, theta, traj)
            parts.append((sim - target).reshape(sim.shape[0], -1))
        return torch.cat(parts, dim=-1)

    def __call__(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` mean squared error per particle (rad² or m²); NaN becomes +inf."""
        r = self.residuals(theta)
        mse = (r * r).mean(-1)
        return torch.where(torch.isfinite(mse), mse, torch.full_like(mse, math.inf))

    def log_likelihood(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` Gaussian log-likelihood with the problem's encoder noise ``obs_std``."""
        r = self.residuals(theta)
        k = len(self.problem.obs_names)
        std = self.problem.obs_std
        z = r.reshape(r.shape[0], -1, k) / std
        log_norm = torch.log(std * math.sqrt(2.0 * math.pi)).sum() * z.shape[1]
        return -0.5 * (z * z).sum((-1, -2)) - log_norm


def initial_guesses(
    problem: Problem, count: int, span: float, center: torch.Tensor | None = None
) -> torch.Tensor:
    """``[count, M]`` starting points spanning ``span`` (ratio) geometrically about ``center``.

    Parameter ``j`` takes ``center_j · span^s`` for ``s`` evenly spaced in ``[−½, ½]`` (Sec. V-D:
    five guesses over two orders of magnitude for ``span = 100``). A parameter whose centre is not
    positive is spread evenly over the middle 80 % of its bounds instead. Everything is clipped to
    the bounds. ``center`` defaults to the nominal values of the spec.
    """
    spec = problem.spec
    c = spec.nominal_theta(problem.robot) if center is None else center.to(torch.float64)
    s = torch.linspace(-0.5, 0.5, count, dtype=torch.float64) if count > 1 else torch.zeros(1)
    geometric = c.unsqueeze(0) * span ** s.unsqueeze(1)
    lo, hi = spec.lower.to(torch.float64), spec.upper.to(torch.float64)
    linear = lo + (hi - lo) * (0.1 + 0.8 * (s.unsqueeze(1) + 0.5))
    guesses = torch.where(c.unsqueeze(0) > 0.0, geometric, linear)
    return spec.clamp(guesses)


@dataclass
class _Track:
    """Per-start best points and the run's history."""

    theta: torch.Tensor
    loss: torch.Tensor
    history: list[dict[str, float]] = field(default_factory=list)
    past: list[torch.Tensor] = field(default_factory=list)
    evaluations: int = 0


class ProprioFit(Estimator):
    """The proprioceptive fit of Chen et al. (Adam multi-start) or its CMA-ES baseline.

    Args:
        optimizer: ``"adam"`` (paper method) or ``"cma"`` (Sec. V-E baseline).
        lr: Adam learning rate in normalised coordinates (App. VI-B: 0.01).
        starts: number of initial guesses (Adam) / CMA-ES population size.
        span: ratio spanned by the initial guesses (100 = two orders of magnitude).
        initial: explicit initial guesses ``[starts, M]`` (SI); overrides ``span``.
        sigma0: CMA-ES initial step size in normalised coordinates.
        rtol: stop when the best loss improved by less than this fraction over ``patience``
            iterations.
        patience: iterations of the stopping test.
        simulate: robot–object simulation (default :func:`rigid_simulation`).
        max_iterations: iteration budget (cosine annealing runs over it).
        seed: seed of CMA-ES's sampler (Adam is deterministic).
    """

    kind = EstimatorKind.PROPRIO

    def __init__(
        self,
        *,
        optimizer: str = "adam",
        lr: float = 0.01,
        starts: int = 5,
        span: float = 100.0,
        initial: Sequence[Sequence[float]] | None = None,
        sigma0: float = 0.2,
        rtol: float = 1e-6,
        patience: int = 10,
        simulate: Simulator = rigid_simulation,
        max_iterations: int = 100,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        try:
            self.optimizer = Optimizer(optimizer)
        except ValueError:
            raise EstimatorError(
                f"proprio optimizer must be one of {[o.value for o in Optimizer]}, "
                f"got {optimizer!r}"
            ) from None
        if not (lr > 0.0 and starts >= 1 and span >= 1.0 and sigma0 > 0.0 and patience >= 1):
            raise EstimatorError(
                f"proprio settings out of range: lr={lr} (> 0), starts={starts} (≥ 1), "
                f"span={span} (≥ 1), sigma0={sigma0} (> 0), patience={patience} (≥ 1)"
            )
        self.lr = lr
        self.starts = starts
        self.span = span
        self.initial = None if initial is None else np.asarray(initial, dtype=np.float64)
        self.sigma0 = sigma0
        self.rtol = rtol
        self.patience = patience
        self.simulate = simulate
        self._problem: Problem | None = None

    # ------------------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Build the loss and the starting points (explicit, warm start's MAP, or nominal)."""
        self._problem = problem
        self._loss = ProprioLoss(problem, self.simulate)
        spec = problem.spec
        if self.initial is not None:
            theta0 = torch.as_tensor(self.initial, dtype=torch.float64).reshape(-1, spec.dim)
        else:
            center = None
            if warm_start is not None:
                center = torch.as_tensor(warm_start.subset(spec.names).map())
            theta0 = initial_guesses(problem, self.starts, self.span, center)
        theta0 = spec.clamp(theta0)
        self._iteration = 0
        self._theta0 = theta0
        if self.optimizer is Optimizer.ADAM:
            self._u = spec.to_unit(problem.tensor(theta0.numpy())).detach().requires_grad_(True)
            self._adam = torch.optim.Adam([self._u], lr=self.lr)
            self._schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
                self._adam, T_max=self.max_iterations
            )
        else:
            self._start_cma(theta0)
        self._start_time = time.perf_counter()
        with torch.no_grad():
            loss0 = self._loss(problem.tensor(theta0.numpy()))
        self._track = _Track(
            theta=theta0.clone(), loss=loss0.detach().cpu(), evaluations=int(theta0.shape[0])
        )
        self._record(loss0)

    def _start_cma(self, theta0: torch.Tensor) -> None:
        import cma

        spec = self._problem.spec  # type: ignore[union-attr]
        u0 = spec.to_unit(theta0).mean(0).numpy()
        # cma needs at least two dimensions; a 1-D problem gets an inert second coordinate.
        self._pad = spec.dim == 1
        x0 = np.append(u0, 0.5) if self._pad else u0
        self._es = cma.CMAEvolutionStrategy(
            x0.tolist(),
            self.sigma0,
            {
                "bounds": [0.0, 1.0],
                "popsize": self.starts,
                "seed": self.seed + 1,
                "verbose": -9,
                "maxiter": self.max_iterations,
            },
        )

    # ------------------------------------------------------------------------------ running
    def _record(self, loss: torch.Tensor) -> None:
        self._track.past.append(self._track.loss.clone())
        best = float(torch.min(self._track.loss))
        self._track.history.append(
            {
                "iteration": float(self._iteration),
                "best_loss": best,
                "mean_loss": float(loss.detach().mean()),
                "wall_s": time.perf_counter() - self._start_time,
                "evaluations": float(self._track.evaluations),
            }
        )

    def _update_best(self, theta: torch.Tensor, loss: torch.Tensor) -> None:
        """Keep, per start, the lowest-loss point seen (Adam) / the best members (CMA-ES)."""
        theta = theta.detach().cpu()
        loss = loss.detach().cpu()
        if self.optimizer is Optimizer.ADAM:
            better = loss < self._track.loss
            self._track.theta = torch.where(better[:, None], theta, self._track.theta)
            self._track.loss = torch.where(better, loss, self._track.loss)
            return
        pool_theta = torch.cat([self._track.theta, theta])
        pool_loss = torch.cat([self._track.loss, loss])
        order = torch.argsort(pool_loss)[: self.starts]
        self._track.theta, self._track.loss = pool_theta[order], pool_loss[order]

    def _adam_iteration(self) -> torch.Tensor:
        problem = self._problem
        assert problem is not None
        self._adam.zero_grad()
        theta = problem.spec.from_unit(self._u)
        loss = self._loss(theta)
        finite = torch.isfinite(loss)
        loss.where(finite, torch.zeros_like(loss)).sum().backward()
        with torch.no_grad():
            self._u.grad = torch.nan_to_num(self._u.grad, nan=0.0, posinf=0.0, neginf=0.0)
        self._adam.step()
        self._schedule.step()
        with torch.no_grad():
            self._u.clamp_(0.0, 1.0)
        self._update_best(theta, loss)
        return loss

    def _cma_iteration(self) -> torch.Tensor:
        problem = self._problem
        assert problem is not None
        x = np.asarray(self._es.ask(), dtype=np.float64)
        u = torch.as_tensor(x[:, :1] if self._pad else x)
        theta = problem.spec.from_unit(u)
        with torch.no_grad():
            loss = self._loss(problem.tensor(theta.numpy()))
        self._es.tell(list(x), loss.cpu().numpy().tolist())
        self._update_best(theta, loss)
        return loss

    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` optimiser iterations (one batched simulation of all starts each)."""
        if self._problem is None:
            raise EstimatorError("ProprioFit.step called before init(problem)")
        converged = False
        for _ in range(iterations):
            if self._iteration >= self.max_iterations:
                converged = True
                break
            loss = (
                self._adam_iteration()
                if self.optimizer is Optimizer.ADAM
                else (self._cma_iteration())
            )
            self._iteration += 1
            self._track.evaluations += int(loss.shape[0])
            self._record(loss)
            converged = self._stalled()
            if converged:
                break
        last = self._track.history[-1]
        return StepInfo(
            iteration=self._iteration,
            loss=last["best_loss"],
            wall_s=last["wall_s"],
            converged=converged,
            metrics={"mean_loss": last["mean_loss"], "evaluations": last["evaluations"]},
        )

    def _stalled(self) -> bool:
        """No start improved its best loss by more than ``rtol`` over ``patience`` iterations."""
        past = self._track.past
        if len(past) <= self.patience:
            return False
        before, now = past[-1 - self.patience], past[-1]
        gain = torch.where(torch.isfinite(before), before - now, torch.zeros_like(now))
        return bool((gain <= self.rtol * before.abs().clamp_min(1e-300)).all())

    # ------------------------------------------------------------------------------ result
    @property
    def history(self) -> list[dict[str, float]]:
        """Per iteration: best and mean loss, wall time since ``init`` (s), simulations run."""
        return list(self._track.history)

    def covariance(self, theta: torch.Tensor) -> np.ndarray:
        """Gauss–Newton (Laplace) covariance ``(Jᵀ S⁻¹ J)⁻¹`` ``[M, M]`` (SI) at ``theta [M]``."""
        problem = self._problem
        assert problem is not None
        k = len(problem.obs_names)

        def whitened(th: torch.Tensor) -> torch.Tensor:
            r = self._loss.residuals(th.unsqueeze(0))[0]
            return (r.reshape(-1, k) / problem.obs_std).reshape(-1)

        J = torch.func.jacfwd(whitened)(problem.tensor(theta.numpy()))
        info = (J.T @ J).detach().cpu().numpy()
        return np.linalg.pinv(info, hermitian=True)

    def posterior(self) -> Posterior:
        """One particle per start (its best point), weighted by likelihood, with Laplace cov."""
        problem = self._problem
        if problem is None:
            raise EstimatorError("ProprioFit.posterior called before init(problem)")
        theta = self._track.theta
        spec = problem.spec
        with torch.no_grad():
            th = problem.tensor(theta.numpy())
            loglik = self._loss.log_likelihood(th)
            logdens = loglik + spec.log_prior(th)
        loglik_np = loglik.cpu().numpy()
        finite = np.isfinite(loglik_np)
        log_w = np.where(finite, loglik_np, -np.inf)
        best = int(np.argmin(self._track.loss.numpy()))
        cov = self.covariance(theta[best])
        spread = theta[torch.from_numpy(finite)].std(0) if finite.sum() > 1 else None
        return Posterior(
            particles=theta.numpy(),
            names=list(spec.names),
            units=[p.unit for p in spec.parameters],
            log_weights=log_w,
            log_likelihood=np.where(finite, loglik_np, -np.inf),
            log_density=np.where(finite, logdens.cpu().numpy(), -np.inf),
            covariance=cov,
            estimator=f"proprio/{self.optimizer.value}",
            iteration=self._iteration,
            meta={
                "problem": problem.name,
                "optimizer": self.optimizer.value,
                "best_loss": float(self._track.loss[best]),
                "start_loss": [float(x) for x in self._track.loss],
                "initial_guesses": self._theta0.tolist(),
                "start_spread": None if spread is None else spread.tolist(),
                "evaluations": self._track.evaluations,
                "wall_s": time.perf_counter() - self._start_time,
            },
        )
