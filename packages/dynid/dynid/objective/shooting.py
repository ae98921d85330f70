"""Single- and multiple-shooting likelihoods over a ``Problem`` (csvgd paper, Sec. IV-B/C).

``z = [u, s]`` (:mod:`dynid.objective.likelihood`): ``s`` are the start states of windows
1 … W − 1 of each of the K trajectories (eq. 6), each state dimension divided by its standard
deviation over the data. All particles × trajectories × windows are simulated in one batched call
of :func:`dynid.model.integrate.shoot_windows`.

Terms (eqs. 2, 5, 6, 9, 10):

- observations: ``log N(x_t^real | x_t^sim, diag σ_obs²)`` for every simulated step of every
  window (the window start states are decision variables, not predictions, and are not scored);
- per trajectory: the sum over its windows; over trajectories: ``log (1/K) Σ_k p_k`` (eq. 9, a
  mixture of equally weighted Gaussians) or ``Σ_k log p_k`` (eq. 10); the gradient of the
  mixture weighs trajectory ``k`` by its responsibility ``softmax_k log p_k``;
- defects: the gap between the end of window ``w`` and the start of window ``w + 1``, in
  normalised state units, returned separately so that CSVGD treats them as MDMM constraints and
  the MCMC baselines as the Gaussian likelihood term of eq. 5.

A problem whose simulation is not the rigid model alone (the soft block,
:class:`~dynid.objective.simulation.SoftBlockSimulation`) carries state the windows cannot
restart, so it is scored by single shooting through its simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dynid.errors import EstimatorError
from dynid.model.integrate import shoot_windows
from dynid.objective.likelihood import LOG_2PI, Evaluation, Likelihood

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["ShootingLikelihood"]


class ShootingLikelihood(Likelihood):
    """Single- or multiple-shooting likelihood of a problem's data set (csvgd Sec. IV-B/C).

    Args:
        problem: the problem; all its trajectories must have the same number of samples.
        shooting: ``"single"`` or ``"multiple"``; default ``problem.likelihood.shooting``.
        windows: shooting windows per trajectory; default ``problem.likelihood.windows``
            (ignored for single shooting). The last ``T mod W`` steps are not scored.

    Attributes:
        M, K, W, h, nv: parameters, trajectories, windows, steps per window, dofs.
        dim: ``D = M + K (W − 1) 2 nv``.
        state_scale: ``[2 nv]`` standard deviations of ``q`` and ``v`` over the data (rad, rad/s
            or m, m/s) dividing the shooting variables and defects.

    Raises:
        EstimatorError: unequal trajectory lengths, too few steps for the windows, or multiple
            shooting of a problem whose simulator keeps its own state.
    """

    def __init__(
        self, problem: Problem, *, shooting: str | None = None, windows: int | None = None
    ) -> None:
        self.problem = problem
        settings = problem.likelihood
        mode = settings.shooting if shooting is None else shooting
        if mode not in ("single", "multiple"):
            raise EstimatorError(f"shooting must be 'single' or 'multiple', got {mode!r}")
        self.shooting = mode
        lengths = {traj.num_samples for traj in problem.dataset}
        if len(lengths) != 1:
            raise EstimatorError(
                f"problem {problem.name!r}: shooting likelihoods need trajectories of equal "
                f"length, got sample counts {sorted(lengths)}; slice them first"
            )
        T = lengths.pop() - 1
        W = 1 if mode == "single" else int(settings.windows if windows is None else windows)
        if W < 1:
            raise EstimatorError(f"problem {problem.name!r}: windows must be ≥ 1, got {W}")
        if T // W < 1:
            short = next(traj for traj in problem.dataset if traj.num_samples == T + 1)
            raise EstimatorError(
                f"problem {problem.name!r}: {W} shooting window{'s' if W > 1 else ''} need at "
                f"least {W + 1} samples per trajectory ({W} steps of {problem.dt:g} s), but the "
                f"trajectories have {T + 1} ({short.describe()}); record longer, or lower "
                "likelihood.windows"
            )
        if W > 1 and not problem.simulator.rigid:
            raise EstimatorError(
                f"problem {problem.name!r}: multiple shooting restarts the rigid model only; "
                f"its {problem.simulator.name} simulation needs shooting: single"
            )
        self.M, self.K, self.W, self.h = problem.spec.dim, len(problem.dataset), W, T // W
        self.nv = problem.robot.nv
        steps = self.W * self.h
        qs, vs, ys, us = [], [], [], []
        for traj in problem.dataset:
            q, v = problem.states(traj)
            qs.append(q[: steps + 1])
            vs.append(v[: steps + 1])
            ys.append(problem.targets(traj)[1 : steps + 1])
            us.append(problem.controls(traj)[:steps])
        self.q_data = torch.stack(qs)  # [K, steps + 1, nv]
        self.v_data = torch.stack(vs)
        k_obs = ys[0].shape[-1]
        self.y_data = torch.stack(ys).reshape(self.K, self.W, self.h, k_obs)
        nu = us[0].shape[-1]
        self.u_data = torch.stack(us).reshape(1, self.K * self.W, self.h, nu)
        states = torch.cat([self.q_data, self.v_data], dim=-1).reshape(-1, 2 * self.nv)
        self.state_scale = states.std(0).clamp_min(1e-6)
        self.obs_std = problem.obs_std
        self._set_bounds()

    def initial_shooting(self) -> torch.Tensor:
        """``[K (W − 1) 2 nv]`` normalised shooting variables at the recorded window starts."""
        starts = torch.arange(1, self.W, device=self.q_data.device) * self.h
        s = torch.cat([self.q_data[:, starts], self.v_data[:, starts]], dim=-1)
        return (s / self.state_scale).reshape(-1)

    def evaluate(self, z: torch.Tensor, aggregate: str | None = None) -> Evaluation:
        """Simulate every particle's windows in one batched call and score them (see
        :meth:`Likelihood.evaluate`)."""
        problem, N, nv = self.problem, z.shape[0], self.nv
        how = self.aggregation(aggregate)
        theta = self.theta(z)
        _, s = self.split(z)
        if problem.simulator.rigid:
            p = problem.parameters(theta)
            s0 = torch.cat([self.q_data[:, 0], self.v_data[:, 0]], dim=-1)  # [K, 2nv]
            starts = torch.cat(
                [s0[None, :, None].expand(N, self.K, 1, 2 * nv), s * self.state_scale], dim=2
            ).reshape(N, self.K * self.W, 2 * nv)
            q, v, defects = shoot_windows(
                problem.dynamics,
                p,
                starts[..., :nv],
                starts[..., nv:],
                self.u_data,
                problem.dt,
                problem.control,
                problem.substeps,
            )
            y = problem.observe(problem.dynamics, p, q[:, :, 1:], v[:, :, 1:])
        else:  # single shooting through the problem's own simulator
            steps = self.W * self.h
            y = torch.stack(
                [problem.simulator(problem, theta, tr)[:, 1 : steps + 1] for tr in problem.dataset],
                dim=1,
            )
            defects = y.new_zeros(N, 0, 2 * nv)
        y = y.reshape(N, self.K, self.W, self.h, -1)
        r = (y - self.y_data) / self.obs_std
        const = self.W * self.h * (torch.log(self.obs_std).sum() + 0.5 * r.shape[-1] * LOG_2PI)
        per_traj = -0.5 * (r * r).sum((-1, -2, -3)) - const  # [N, K]
        total = self.combine(per_traj, how)
        keep = [i for i in range(self.K * self.W - 1) if (i + 1) % self.W != 0]
        d = defects[:, keep].reshape(N, self.K, self.W - 1, 2 * nv) / self.state_scale
        return Evaluation(theta=theta, log_likelihood=total, per_trajectory=per_traj, defects=d)
