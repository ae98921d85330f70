"""CSVGD: constrained Stein variational gradient descent with multiple shooting (csvgd Alg. 1).

Each iteration simulates all particles × trajectories × shooting windows in one batched call
(:meth:`dynid.objective.Objective.likelihood`), takes ``∇ log p_obs`` (+ Gaussian
priors) by autograd, forms the SVGD direction (eq. 1, RBF kernel, median heuristic) over the
normalised parameters ``u`` (the kernel of eq. 1 acts on parameters; each particle's shooting
variables ``s`` follow their own gradient) and subtracts the per-particle MDMM constraint
gradients of the defects (eq. 8); Adam applies the step, with a smaller step size on ``s`` than
on ``u``, and the multipliers ascend ``λ ← λ + η g``.

The limit terms of eq. 8 take a plain gradient step of Adam's step size after Adam's step, outside
its per-coordinate normalisation. Adam divides each coordinate by the running RMS of its
gradients, which the likelihood sets (10³–10⁶ per normalised unit on the IBM double pendulum),
while the limit term ``λ + c g`` is of order one. A particle that Adam's momentum carries beyond a
limit, where its own likelihood gradient is zero because it is simulated clamped, then moved back
by 10⁻⁵ of a step per iteration: inside Adam, 54–99 of 100 particles ended 0.3 normalised units
(median) beyond the limits in every parameter after 2000 iterations there. Outside it, with the
limit damping of :class:`CSVGD`, no particle went more than 0.08 beyond a limit over 400
iterations (32 particles, step 0.05): the limits hold to about one Adam step, the discretisation's
chatter around an active limit.

With several trajectories (the mixture of eq. 9), each trajectory's defect constraints enter the
Lagrangian weighted by its responsibility ``r_k = softmax_k(log p_k + Σ_t log N(defect_kt | 0,
σ_def²))``, held constant within an iteration; the multipliers ascend on the unweighted defects.
Eq. 4 with the multiple-shooting likelihood of eq. 6 keeps each trajectory's defect terms inside
its mixture component, and its gradient weighs them so. Unweighted, the defects of the
trajectories a particle does not explain, whose shooting variables start at their recorded
states, pull its parameters towards theirs: the particles drift to the trajectories' common
average instead of spreading over them (synthetic double pendulum, ten swings with different
link lengths). With one trajectory, or the product of eq. 10, every weight is 1.

Particles whose likelihood or gradient is not finite (an unstable simulation) are reported in
``StepInfo.metrics["nan_particles"]`` and ``Posterior.meta["nan_particles"]``, frozen, excluded
from the kernel sum and given zero weight; the others go on.

``SVGD`` is the paper's unconstrained baseline: single shooting, uniform prior limits enforced by
projecting the particles back into the box after each step.
"""

from __future__ import annotations

import math
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.estimators.mdmm import MDMM, DefectForm, defect_constraint, limit_constraint
from dynid.estimators.svgd import sobol_particles, stein_terms
from dynid.objective import Likelihood, defect_log_density
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["CSVGD", "SVGD", "particles_from_posterior"]


def particles_from_posterior(
    posterior: Posterior, names: list[str], n: int, generator: torch.Generator
) -> torch.Tensor:
    """``[n, M]`` SI particles in ``names`` order, resampled by weight from ``posterior``.

    Raises:
        EstimatorError: the posterior lacks one of ``names``.
    """
    missing = [name for name in names if name not in posterior.names]
    if missing:
        raise EstimatorError(f"warm-start posterior lacks parameters {missing}")
    cols = [posterior.names.index(name) for name in names]
    weights = torch.from_numpy(np.exp(posterior.log_weights))
    idx = torch.multinomial(weights, n, replacement=True, generator=generator)
    return torch.from_numpy(posterior.particles[:, cols])[idx]


class CSVGD(Estimator):
    """Constrained SVGD (csvgd Sec. IV, Algorithm 1).

    Args:
        num_particles: ``N``.
        learning_rate: Adam step size on the normalised parameters ``u``.
        learning_rate_decay: factor ``γ ∈ (0, 1]`` applied to both Adam step sizes and the limit
            terms' step after every iteration (``torch.optim.lr_scheduler.ExponentialLR``; the
            paper's Algorithm 1 takes a "learning rate scheduler"); ``1`` keeps the step
            constant. On the IBM double pendulum ``γ = 0.998`` (the step falls to 0.28 of its
            start over 640 iterations) gave no consistent gain with the median-heuristic
            bandwidth, and lower held-out KL both ways and MMD on all five seeds with the
            problem file's fixed one (README, IBM).
        shooting_learning_rate: Adam step size on the normalised shooting variables ``s``;
            default ``0.4 × learning_rate``. Adam moves each coordinate by about its step size per
            iteration whatever the gradient's scale, so this sets how fast the window starts
            leave the recorded states to follow each particle's own rollout. Window starts that
            follow too fast turn the smooth multiple-shooting likelihood back into the rugged
            single-shooting one around wrong parameters; kept slower, the defect constraints
            move the parameters instead (measured on the double pendulums: 4 × is much worse
            than 1 ×, and 0.4 × better).
        shooting: ``"single"`` | ``"multiple"``; default from the problem's likelihood settings.
        windows: shooting windows per trajectory; default from the problem.
        constrained: MDMM limit and defect constraints (CSVGD); ``False`` projects the particles
            into the limits instead and scores defects as Gaussian terms (σ_def).
        mdmm_damping: ``c`` of eq. 8 for the defect constraints.
        limit_damping: ``c`` of eq. 8 for the limit constraints; default ``0.5 / learning_rate``.
            Their step is ``learning_rate × (λ + c g)`` outside Adam (module docstring), so the
            default removes half of a violation per iteration before the multiplier has grown.
            With ``c = 1`` it removes 5 %, slower than Adam's momentum (β₁ = 0.9) decays: on the
            IBM pendulum (step 0.05) the largest violation was 0.09–0.23 normalised units over
            400 iterations, against 0.03–0.08 with the default ``c = 10``.
        multiplier_lr: multiplier ascent step ``η`` (defects and limits).
        defect_std: ``σ_def`` in normalised state units; default ``problem.likelihood.defect_std``.
        defect_form: ``"squared_norm"`` (the paper's ``g_def``), ``"componentwise"`` or
            ``"bounded"`` (an inequality on the squared norm; :mod:`dynid.estimators.mdmm`).
        bandwidth: fixed RBF bandwidth ``h`` (normalised parameter units²); ``None`` uses the
            median heuristic each iteration. Where neighbouring particles' likelihood gradients
            disagree within the median heuristic's width, the SVGD direction averages them and
            the particles stay spread at that scale; the IBM problem file fixes ``h = 0.01``
            (README, IBM).
        max_iterations, seed: see :class:`Estimator`.
    """

    kind = "csvgd"
    defaults_file = resources.files("dynid.estimators") / "defaults/csvgd.yaml"

    def __init__(
        self,
        *,
        num_particles: int = 64,
        learning_rate: float = 1e-2,
        learning_rate_decay: float = 1.0,
        shooting_learning_rate: float | None = None,
        shooting: str | None = None,
        windows: int | None = None,
        constrained: bool = True,
        mdmm_damping: float = 1.0,
        limit_damping: float | None = None,
        multiplier_lr: float = 0.1,
        defect_std: float | None = None,
        defect_form: str = "squared_norm",
        bandwidth: float | None = None,
        max_iterations: int = 1000,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        if num_particles < 1:
            raise EstimatorError(f"num_particles must be ≥ 1, got {num_particles}")
        if not learning_rate > 0:
            raise EstimatorError(f"learning_rate must be > 0, got {learning_rate}")
        self.num_particles = int(num_particles)
        self.learning_rate = float(learning_rate)
        if not 0.0 < learning_rate_decay <= 1.0:
            raise EstimatorError(
                f"learning_rate_decay must be in (0, 1], got {learning_rate_decay}"
            )
        self.learning_rate_decay = float(learning_rate_decay)
        shooting_lr = (
            0.4 * learning_rate if shooting_learning_rate is None else shooting_learning_rate
        )
        if not shooting_lr > 0:
            raise EstimatorError(f"shooting_learning_rate must be > 0, got {shooting_lr}")
        self.shooting_learning_rate = float(shooting_lr)
        self.shooting = shooting
        self.windows = windows
        self.constrained = bool(constrained)
        self.defect_form = DefectForm(defect_form)
        self.mdmm = MDMM(
            mdmm_damping, multiplier_lr, inequality=self.defect_form == DefectForm.BOUNDED
        )
        limit_c = 0.5 / self.learning_rate if limit_damping is None else limit_damping
        self.limits = MDMM(limit_c, multiplier_lr)
        self.defect_std = defect_std
        self.bandwidth = bandwidth
        self._problem: Problem | None = None

    # ------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Sobol particles over the limits (App. I-A) or resampled ``warm_start`` particles."""
        self._problem = problem
        self.likelihood = problem.objective.likelihood(shooting=self.shooting, windows=self.windows)
        lik, N = self.likelihood, self.num_particles
        sigma = problem.likelihood.defect_std if self.defect_std is None else self.defect_std
        self._sigma_def = float(sigma)
        dtype, device = problem.dtype, problem.device
        if warm_start is None:
            zeros = torch.zeros(lik.M, dtype=torch.float64)
            u = sobol_particles(zeros, torch.ones_like(zeros), N, self.seed)
            theta = problem.spec.from_unit(u)
        else:
            gen = torch.Generator().manual_seed(self.seed)
            theta = particles_from_posterior(warm_start, problem.spec.names, N, gen)
        z = lik.augment(theta.to(dtype=dtype, device=device))
        self._u = torch.nn.Parameter(z[:, : lik.M].clone())
        self._s = torch.nn.Parameter(z[:, lik.M :].clone())
        self.optimizer = torch.optim.Adam(
            [
                {"params": [self._u], "lr": self.learning_rate},
                {"params": [self._s], "lr": self.shooting_learning_rate},
            ]
        )
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(
            self.optimizer, gamma=self.learning_rate_decay
        )
        n_def = lik.K * (lik.W - 1)
        if self.defect_form == DefectForm.COMPONENTWISE:
            n_def *= 2 * lik.nv
        self.lam_lim = torch.zeros(N, lik.M, dtype=dtype, device=device)
        self.lam_def = torch.zeros(N, n_def, dtype=dtype, device=device)
        self.valid = torch.ones(N, dtype=torch.bool, device=device)
        self.nan_particles: list[int] = []
        self.iteration = 0
        self._log_lik = torch.full((N,), math.nan, dtype=dtype, device=device)
        self._start = time.perf_counter()

    def _require_init(self) -> Likelihood:
        if self._problem is None:
            raise EstimatorError(f"{type(self).__name__}.step/posterior called before init()")
        return self.likelihood

    # ------------------------------------------------------------------ iterations
    def _objective(
        self, z: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, float]]:
        """``(log p_obs + log prior, defect penalty, limit penalty, figures)`` for valid particles.

        The three terms are ``[n]``: the MDMM penalties of eq. 8 for the defects and for the
        limits (zero without constraints).

        Figures: ``max_defect`` over all trajectories' windows, ``max_defect_explained`` over
        the windows of the trajectory each particle explains best (highest responsibility; the
        defects that must close — with several trajectories the others' need not), and
        ``max_limit_violation``, all in normalised units.
        """
        lik = self.likelihood
        ev = lik.evaluate(z)
        self._log_lik[self.valid] = ev.log_likelihood.detach()
        u, _ = lik.split(z)
        g_lim = limit_constraint(u)
        defects = ev.defects.detach()
        log_def = defect_log_density(ev.defects, self._sigma_def)  # [n, K]
        resp = lik.responsibilities((ev.per_trajectory + log_def).detach())
        explained = defects[torch.arange(defects.shape[0]), resp.argmax(-1)]
        figures = {
            "max_defect": float(defects.abs().max()) if defects.numel() else 0.0,
            "max_defect_explained": float(explained.abs().max()) if explained.numel() else 0.0,
            "max_limit_violation": float(g_lim.detach().abs().max()),
        }
        prior = lik.log_prior(ev.theta)
        if not self.constrained:
            # defects as Gaussian terms inside each trajectory's mixture component (eq. 4, 6)
            objective = lik.combine(ev.per_trajectory + log_def)
            none = torch.zeros_like(prior)
            return objective + prior, none, none, figures
        g_def = defect_constraint(ev.defects, self._sigma_def, self.defect_form)
        weight = resp.repeat_interleave(g_def.shape[1] // lik.K, dim=1)
        valid = self.valid
        penalty_def = self.mdmm.penalty(g_def, self.lam_def[valid], weight)
        penalty_lim = self.limits.penalty(g_lim, self.lam_lim[valid])
        self._g = (g_lim.detach(), g_def.detach())
        return ev.log_likelihood + prior, penalty_def, penalty_lim, figures

    def _direction(
        self, z: torch.Tensor, grad_obj: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Ascent direction ``[n, D]`` of ``log p_obs + log prior`` before the MDMM terms.

        The parameters ``u`` take the SVGD direction of eq. 1, whose RBF kernel acts on the
        parameters alone (``k: R^M × R^M → R``). Each particle's shooting variables ``s`` belong
        to its own simulation: they take their own gradient, as in the MDMM flow of Algorithm 1,
        and stay out of the kernel (their hundreds of state dimensions would set the median
        bandwidth and flatten the kernel over the parameters, leaving no repulsion there).

        Returns:
            The direction and the figures ``bandwidth`` (normalised parameter units²),
            ``svgd_driving`` and ``svgd_repulsive`` (mean norms of the two terms over ``u``).
        """
        M = self.likelihood.M
        terms = stein_terms(z[:, :M], grad_obj[:, :M], self.bandwidth)
        figures = {
            "bandwidth": float(terms.bandwidth),
            "svgd_driving": float(terms.driving.norm(dim=-1).mean()),
            "svgd_repulsive": float(terms.repulsive.norm(dim=-1).mean()),
        }
        return torch.cat([terms.direction, grad_obj[:, M:]], dim=1), figures

    @staticmethod
    def _gradient(penalty: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``[n, D]`` gradient of the summed ``[n]`` penalty in ``z`` (zero where constant)."""
        if not penalty.requires_grad:
            return torch.zeros_like(z)
        (grad,) = torch.autograd.grad(penalty.sum(), z, retain_graph=True, allow_unused=True)
        return torch.zeros_like(z) if grad is None else grad

    def _iterate(self) -> tuple[float, dict[str, float]]:
        lik = self._require_init()
        valid_idx = torch.nonzero(self.valid).squeeze(-1)
        if valid_idx.numel() == 0:
            raise EstimatorError("every particle has a non-finite likelihood; nothing left to move")
        z = self.augmented[valid_idx].requires_grad_(True)
        objective, penalty_def, penalty_lim, figures = self._objective(z)
        (grad_obj,) = torch.autograd.grad(objective.sum(), z, retain_graph=True)
        grad_pen, grad_lim = (self._gradient(p, z) for p in (penalty_def, penalty_lim))
        finite = (
            torch.isfinite(objective)
            & torch.isfinite(grad_obj).all(-1)
            & torch.isfinite(penalty_def + penalty_lim)
            & torch.isfinite(grad_pen + grad_lim).all(-1)
        )
        if not bool(finite.all()):
            bad = valid_idx[~finite]
            self.nan_particles.extend(int(i) for i in bad)
            self.valid[bad] = False
            self._log_lik[bad] = math.nan
        ok, rows = finite, valid_idx[finite]
        direction = torch.zeros_like(z)
        if bool(ok.any()):
            phi, kernel_figures = self._direction(z.detach()[ok], grad_obj[ok])
            direction[ok] = phi - grad_pen[ok]
            figures.update(kernel_figures)
        grad = torch.zeros(self.num_particles, lik.dim, dtype=z.dtype, device=z.device)
        grad[valid_idx] = -direction
        frozen = [part.detach()[~self.valid].clone() for part in (self._u, self._s)]
        self._u.grad = grad[:, : lik.M].contiguous()
        self._s.grad = grad[:, lik.M :].contiguous()
        step_size = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        with torch.no_grad():
            if self.constrained:  # the limit terms of eq. 8, outside Adam (module docstring)
                self._u[rows] -= step_size * grad_lim[ok][:, : lik.M]
            self._u[~self.valid] = frozen[0]
            self._s[~self.valid] = frozen[1]
            if not self.constrained:
                self._u.clamp_(0.0, 1.0)
        if self.constrained:
            g_lim, g_def = self._g
            self.lam_lim[rows] = self.limits.ascend(self.lam_lim[rows], g_lim[ok])
            self.lam_def[rows] = self.mdmm.ascend(self.lam_def[rows], g_def[ok])
        self.iteration += 1
        loss = float(-objective.detach()[ok].mean()) if bool(ok.any()) else math.nan
        figures["nan_particles"] = float(len(self.nan_particles))
        return loss, figures

    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` CSVGD iterations (one batched simulation each)."""
        loss, figures = math.nan, {}
        for _ in range(int(iterations)):
            loss, figures = self._iterate()
        return StepInfo(
            iteration=self.iteration,
            loss=loss,
            wall_s=time.perf_counter() - self._start,
            metrics=figures,
        )

    # ------------------------------------------------------------------ results
    @property
    def augmented(self) -> torch.Tensor:
        """``[N, D]`` current normalised particles ``z = [u, s]`` (detached copy)."""
        return torch.cat([self._u.detach(), self._s.detach()], dim=1)

    def posterior(self) -> Posterior:
        """Particles in SI units (as simulated: clamped to the limits); NaN particles weigh 0.

        ``meta["clamped_particles"]`` counts, per parameter name, the particles beyond its limits
        (the MDMM limits are soft) that are reported at the limit: their spread there is the
        limit's, not the posterior's.
        """
        lik = self._require_init()
        problem = self._problem
        assert problem is not None
        theta = lik.theta(self.augmented).cpu().numpy()
        log_w = np.where(self.valid.cpu().numpy(), 0.0, -np.inf)
        theta = np.where(np.isfinite(theta), theta, 0.0)
        u = self._u.detach()
        beyond = ((u < 0.0) | (u > 1.0)).sum(0).tolist()
        meta: dict[str, Any] = {
            "clamped_particles": {
                name: int(k) for name, k in zip(problem.spec.names, beyond, strict=True) if k
            },
            "nan_particles": sorted(self.nan_particles),
            "shooting": lik.shooting,
            "windows": lik.W,
            "num_particles": self.num_particles,
            "device": str(problem.device),
        }
        return Posterior(
            particles=theta,
            names=list(problem.spec.names),
            units=list(problem.spec.units),
            log_weights=log_w,
            log_likelihood=self._log_lik.cpu().numpy(),
            estimator=self.kind,
            iteration=self.iteration,
            meta=meta,
        )


class SVGD(CSVGD):
    """Plain SVGD (the paper's baseline): single shooting, limits by projection, no MDMM.

    Takes the settings of :class:`CSVGD` except ``constrained`` (always ``False``); ``shooting``
    defaults to ``"single"`` (pass ``"multiple"`` for the ablation with Gaussian defect terms).
    """

    kind = "svgd"
    defaults_file = resources.files("dynid.estimators") / "defaults/svgd.yaml"

    def __init__(self, *, shooting: str | None = "single", **settings: Any) -> None:
        if "constrained" in settings:
            raise EstimatorError("SVGD is the unconstrained baseline; use CSVGD for constraints")
        super().__init__(shooting=shooting, constrained=False, **settings)
