"""``Objective``: what every estimator scores, from a problem (``problem.objective``).

As Theseus separates the objective (errors and their Jacobians) from the optimiser, dynid's
estimators consume one API and build no simulator of their own:

- :meth:`Objective.simulate` — single-shooting observations through the problem's simulator;
- :meth:`Objective.residuals` and :meth:`Objective.jacobian` — whitened residuals (measured minus
  predicted, divided by their standard deviations) and ``∂r/∂θ``, batched over particles;
- :meth:`Objective.log_likelihood` — the problem's likelihood as configured;
- :meth:`Objective.likelihood` — the same likelihood in the samplers' normalised coordinates
  (:mod:`dynid.objective.likelihood`), with shooting variables where it has them;
- :meth:`Objective.transition` — one stochastic step of the dynamics, for filters;
- :meth:`Objective.inverse_dynamics_residuals` — the equation error on measured efforts;
- :meth:`Objective.impulse_residuals`, :meth:`Objective.observation_errors` and
  :meth:`Objective.effort_errors` — the errors of a state trajectory the caller estimates
  (joint state and parameter estimation);
- :attr:`Objective.data` — the recorded trajectories as tensors (states, controls, targets), and
  :attr:`Objective.coordinates` — the free parameters' physical ↔ unit box ↔ unconstrained maps.

Which residuals and likelihood: ``likelihood.kind`` of the problem, the name of a likelihood
registered in entry-point group ``dynid.likelihoods``. ``"shooting"``: the
observation errors of single-shooting rollouts from each trajectory's first state (the start
sample, observed from the recorded state, is not scored); ``"inverse_dynamics"``: the effort
errors of :mod:`dynid.objective.torque`. A likelihood of another package is scored through
:meth:`Objective.likelihood` and :meth:`Objective.log_likelihood`; the residuals are those of
dynid's two kinds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from dynid import plugins
from dynid.errors import EstimatorError
from dynid.model.integrate import PrescribedMotion, step
from dynid.objective.likelihood import Likelihood
from dynid.objective.simulation import simulate_dataset
from dynid.objective.torque import InverseDynamicsLikelihood, inverse_dynamics_residuals

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.model.coordinates import Coordinates
    from dynid.problem import Problem, TrajectoryTensors

__all__ = ["JACOBIAN_BATCH", "Objective"]

JACOBIAN_BATCH = 256
"""The most particles :meth:`Objective.jacobian` differentiates in one forward-mode pass."""


class Objective:
    """The objective of ``problem`` (see the module notes). Build it with ``problem.objective``.

    All tensors are on the problem's device and dtype; ``theta`` is ``[N, M]`` in SI units
    (``problem.spec``), not clamped.
    """

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.kind = problem.likelihood.kind
        self._torque: InverseDynamicsLikelihood | None = None

    # ------------------------------------------------------------------ data and coordinates
    @property
    def data(self) -> tuple[TrajectoryTensors, ...]:
        """The problem's trajectories as tensors on its device (``problem.data``): ``q``, ``v``
        ``[T, nv]``, ``controls [T, nu]`` and ``targets [T, k]`` (``problem.obs_names``). Shared:
        read them, do not write into them."""
        return self.problem.data

    @property
    def coordinates(self) -> Coordinates:
        """The maps of the free parameters between SI values, the unit box and unconstrained
        values (``problem.spec.coordinates``)."""
        return self.problem.spec.coordinates

    @property
    def control_width(self) -> int:
        """``nu``: the width of the controls :meth:`transition` takes (``nv`` for measured
        efforts)."""
        return int(self.problem.data[0].controls.shape[-1])

    # ------------------------------------------------------------------ likelihoods
    def likelihood(self, *, shooting: str | None = None, windows: int | None = None) -> Likelihood:
        """The likelihood over ``z [N, D]`` (estimators' normalised coordinates).

        Args:
            shooting, windows: an estimator's override of the problem's shooting settings
                (shooting likelihoods only; ``"single"`` is accepted for the torque likelihood,
                which has no shooting variables).

        Returns:
            What the likelihood registered as ``likelihood.kind`` (group ``dynid.likelihoods``)
            builds for the problem.

        Raises:
            EstimatorError: the likelihood failed to load, multiple shooting asked of the torque
                likelihood, or the data do not fit the likelihood.
        """
        try:
            factory = plugins.LIKELIHOODS.load(self.kind)
        except plugins.PluginError as exc:
            raise EstimatorError(f"problem {self.problem.name!r}: {exc}") from exc
        return factory(self.problem, shooting=shooting, windows=windows)

    @property
    def torque_likelihood(self) -> InverseDynamicsLikelihood:
        """The inverse-dynamics likelihood (built once: filtering the data is not free)."""
        if self._torque is None:
            self._torque = InverseDynamicsLikelihood(self.problem)
        return self._torque

    def log_likelihood(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N]`` log-likelihood of the problem's data as configured (multiple-shooting windows
        restart at the recorded states)."""
        lik = self.likelihood()
        return lik.evaluate(lik.augment(self.as_theta(theta))).log_likelihood

    # ------------------------------------------------------------------ simulation
    def simulate(self, theta: torch.Tensor, trajectory: Trajectory | None = None) -> torch.Tensor:
        """Simulated observations (``problem.obs_names``) from the recorded first state.

        Args:
            theta: ``[N, M]`` SI parameters.
            trajectory: one trajectory (any length); ``None``: all of the problem's (equal
                lengths).

        Returns:
            ``[N, T + 1, k]`` for one trajectory, ``[N, K, T + 1, k]`` for the data set.
        """
        theta = self.as_theta(theta)
        if trajectory is None:
            return simulate_dataset(self.problem, theta)
        return self.problem.simulator(self.problem, theta, trajectory)

    def transition(
        self,
        theta: torch.Tensor,
        state: torch.Tensor,
        control: torch.Tensor,
        dt: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of the dynamics with its process noise: ``x' ~ N(mean, diag scale²)``.

        Semi-implicit Euler with the problem's control model and substeps (the step of every
        rollout), so the mean from a recorded state equals the first step of the shooting
        rollout from it.

        Args:
            theta: ``[N, M]`` SI parameters.
            state: ``[N, *B, 2 nv]`` positions then velocities.
            control: ``[N|1, *B, nu]`` control inputs held over the step.
            dt: step (s); default the problem's. The process noise (``likelihood.process_std``,
                per problem step) scales with ``sqrt(dt / problem.dt)``.

        Returns:
            ``(mean [N, *B, 2 nv], scale [N, *B, 2 nv])``.

        Raises:
            EstimatorError: the problem's simulation keeps state beyond ``(q, v)``, or the state
                has the wrong width.
        """
        problem = self.problem
        if not problem.simulator.rigid:
            raise EstimatorError(
                f"problem {problem.name!r}: its {problem.simulator.name} simulation keeps state "
                "beyond (q, v); transition needs the rigid model"
            )
        nv = problem.robot.nv
        if state.shape[-1] != 2 * nv:
            raise EstimatorError(
                f"transition: state must end in 2 nv = {2 * nv} (q, v), got {tuple(state.shape)}"
            )
        step_s = problem.dt if dt is None else float(dt)
        theta = self.as_theta(theta)
        p = problem.parameters(theta)
        q, v = step(
            problem.dynamics,
            p,
            state[..., :nv],
            state[..., nv:],
            control,
            step_s,
            problem.control,
            problem.substeps,
        )
        mean = torch.cat([q, v], dim=-1)
        stds = np.atleast_1d(np.asarray(problem.likelihood.process_std, dtype=float))
        if stds.size not in (1, 2 * nv):
            raise EstimatorError(
                f"likelihood.process_std has {stds.size} values; expected 1 or 2 nv = {2 * nv}"
            )
        scale = problem.tensor(stds * math.sqrt(step_s / problem.dt))
        return mean, scale.expand_as(mean)

    def inverse_dynamics_residuals(
        self,
        theta: torch.Tensor,
        q: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        tau: torch.Tensor,
    ) -> torch.Tensor:
        """``[N, S, nv]`` measured minus predicted efforts (N·m or N); see
        :func:`dynid.objective.torque.inverse_dynamics_residuals`."""
        return inverse_dynamics_residuals(self.problem, self.as_theta(theta), q, v, a, tau)

    # ------------------------------------------------------------------ state residuals
    def impulse_residuals(
        self,
        theta: torch.Tensor,
        x_a: torch.Tensor,
        x_b: torch.Tensor,
        u: torch.Tensor,
        h: float,
    ) -> torch.Tensor:
        """The impulses one semi-implicit Euler step of ``h`` seconds lacks to go from state
        ``x_a`` to ``x_b`` under inputs ``u`` held over it (lm paper eqs. 3.10–3.13).

        Velocity impulse ``h (τ_applied − ID(q_a, v_a, (v_b − v_a) / h))`` (the problem's control
        model, RNEA, friction and the attachments' forces,
        :func:`~dynid.objective.torque.inverse_dynamics_residuals`); configuration impulse
        ``M(q_a) (q_b − q_a − h v_b) / h`` with the joint-space mass matrix. Both vanish when
        ``x_b`` is the step from ``x_a``.

        Args:
            theta: ``[N, M]`` SI parameters.
            x_a, x_b: ``[N, *B, 2 nv]`` states, positions then velocities.
            u: ``[N|1, *B, nu]`` control inputs.
            h: step (s).

        Returns:
            ``[N, *B, 2 nv]`` velocity then configuration impulses (N·m·s or N·s).

        Raises:
            EstimatorError: the problem prescribes the motion of joints (no efforts to step).
        """
        problem = self.problem
        if isinstance(problem.control, PrescribedMotion):
            raise EstimatorError(
                f"problem {problem.name!r}: impulse residuals need the efforts that drive every "
                "joint; prescribed motion gives none (control.type: torque, current or pd)"
            )
        theta = self.as_theta(theta)
        nv = problem.robot.nv
        qa, va, qb, vb = x_a[..., :nv], x_a[..., nv:], x_b[..., :nv], x_b[..., nv:]
        p = problem.parameters(theta)
        tau = problem.control(p, qa, va, u)
        velocity = inverse_dynamics_residuals(problem, theta, qa, va, (vb - va) / h, tau)
        mass = problem.dynamics.mass_matrix(p, qa)
        configuration = (mass @ (qb - qa - h * vb).unsqueeze(-1)).squeeze(-1) / h
        return torch.cat([h * velocity, configuration], dim=-1)

    def observation_errors(
        self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, k]`` measured ``y [*B, k]`` minus the problem's observation of states
        ``x [N, *B, 2 nv]`` (``problem.obs_names``, units of each channel)."""
        problem = self.problem
        nv = problem.robot.nv
        p = problem.parameters(self.as_theta(theta))
        return y - problem.observe(problem.dynamics, p, x[..., :nv], x[..., nv:])

    def effort_errors(
        self, theta: torch.Tensor, x: torch.Tensor, u: torch.Tensor, effort: torch.Tensor
    ) -> torch.Tensor:
        """``[N, *B, nv]`` measured ``effort [*B, nv]`` minus the efforts the control model
        applies at states ``x [N, *B, 2 nv]`` under inputs ``u [N|1, *B, nu]`` (N·m or N)."""
        problem = self.problem
        nv = problem.robot.nv
        p = problem.parameters(self.as_theta(theta))
        return effort - problem.control(p, x[..., :nv], x[..., nv:], u)

    # ------------------------------------------------------------------ residuals
    def residuals(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N, R]`` whitened residuals, measured minus predicted over standard deviation.

        Shooting kind: the observations of every trajectory after its first sample (the
        problem's ``obs_std``); inverse-dynamics kind: the scored efforts (``torque_std``).
        Entries are ordered trajectory, sample, channel.
        """
        theta = self.as_theta(theta)
        if self.kind == "inverse_dynamics":
            lik = self.torque_likelihood
            errors = lik.errors(theta)
            return torch.cat([(e / lik.torque_std).flatten(1) for e in errors], dim=1)
        self._check_residuals()
        problem = self.problem
        parts = []
        for traj, data in zip(problem.dataset, problem.data, strict=True):
            sim = problem.simulator(problem, theta, traj)[:, 1:]
            parts.append(((data.targets[1:] - sim) / problem.obs_std).flatten(1))
        return torch.cat(parts, dim=1)

    def residual_std(self) -> torch.Tensor:
        """``[R]`` standard deviation of each residual entry (units of its channel)."""
        problem = self.problem
        if self.kind == "inverse_dynamics":
            lik = self.torque_likelihood
            rows = sum(s.q.shape[0] for s in lik.samples)
            return lik.torque_std.repeat(rows)
        self._check_residuals()
        rows = sum(traj.num_samples - 1 for traj in problem.dataset)
        return problem.obs_std.repeat(rows)

    def _check_residuals(self) -> None:
        """Residuals exist for dynid's two likelihood kinds only."""
        if self.kind != "shooting":
            raise EstimatorError(
                f"problem {self.problem.name!r}: likelihood.kind {self.kind!r} gives no residuals "
                "(only shooting and inverse_dynamics do); choose an estimator that uses the "
                "log-likelihood"
            )

    def jacobian(self, theta: torch.Tensor) -> torch.Tensor:
        """``[N, R, M]`` Jacobian ``∂r/∂θ`` of :meth:`residuals` (per SI unit of each parameter).

        Shooting kind: forward-mode automatic differentiation. Each particle's residuals depend
        on its own parameters only, so the particles are repeated once per parameter and one
        pass with the tangent of parameter ``m`` on the ``m``-th copies gives every column at
        once (up to ``JACOBIAN_BATCH`` particles per pass; the per-step cost of a rollout barely
        grows with the batch). Inverse-dynamics kind: reverse mode, one pass per joint over
        per-sample copies of the parameters
        (:meth:`dynid.objective.torque.InverseDynamicsLikelihood.jacobian`). Reverse mode over
        the residual entries with the Pinocchio backend, whose derivatives are reverse-mode only.
        """
        theta = self.as_theta(theta).detach()
        if self.kind == "inverse_dynamics" and self.problem.backend != "pinocchio":
            return self.torque_likelihood.jacobian(theta)
        if self.problem.backend == "pinocchio":
            J = torch.autograd.functional.jacobian(lambda th: self.residuals(th).sum(0), theta)
            return J.permute(1, 0, 2)
        N, M = theta.shape
        per_pass = max(1, JACOBIAN_BATCH // max(N, 1))
        columns = []
        for first in range(0, M, per_pass):
            ms = list(range(first, min(first + per_pass, M)))
            repeated = theta.repeat(len(ms), 1)  # copy c holds all particles for column ms[c]
            tangent = torch.zeros_like(repeated)
            for c, m in enumerate(ms):
                tangent[c * N : (c + 1) * N, m] = 1.0
            _, dr = torch.func.jvp(self.residuals, (repeated,), (tangent,))
            columns += list(dr.reshape(len(ms), N, -1))
        return torch.stack(columns, dim=-1)

    def as_theta(self, theta: torch.Tensor) -> torch.Tensor:
        """``theta [N, M]`` (SI) on the problem's dtype and device, as every method takes it.

        Raises:
            EstimatorError: ``theta`` is not ``[N, M]``.
        """
        if theta.dim() != 2 or theta.shape[1] != self.problem.spec.dim:
            raise EstimatorError(
                f"theta must have shape [N, {self.problem.spec.dim}] ({self.problem.spec.names}), "
                f"got {tuple(theta.shape)}"
            )
        return theta.to(dtype=self.problem.dtype, device=self.problem.device)
