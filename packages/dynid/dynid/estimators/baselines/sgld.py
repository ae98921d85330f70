"""Stochastic gradient Langevin dynamics (Welling and Teh 2011) on a bounded target.

``z ← z + (ε_t / 2) ∇ log p(z) + N(0, ε_t I)`` with ``ε_t = a (b + t)^−γ`` (γ = 0.55 as in the
original). The csvgd likelihood uses the whole trajectory each step (no minibatches), so this is
the unadjusted Langevin algorithm with a decaying step. Coordinates that leave the bounds are
reflected back; a step whose gradient is not finite is rejected (the chain stays) and counted.
``C`` chains run batched (the paper runs one); the posterior keeps the last ``num_particles``
states over all chains.
"""

from __future__ import annotations

import math
from importlib import resources

import torch

from dynid.estimators.base import EstimatorError
from dynid.estimators.baselines.base import SamplerEstimator
from dynid.objective import Target

__all__ = ["SGLD", "SGLDSampler", "reflect"]


def reflect(z: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor) -> torch.Tensor:
    """Reflect ``z`` into ``[lower, upper]`` per coordinate (infinite bounds pass through)."""
    finite = torch.isfinite(lower) & torch.isfinite(upper)
    lo = torch.where(finite, lower, torch.zeros_like(lower))
    width = torch.where(finite, upper - lower, torch.ones_like(lower))
    y = torch.remainder(z - lo, 2 * width)
    y = torch.where(y > width, 2 * width - y, y) + lo
    return torch.where(finite, y, z)


class SGLDSampler:
    """Langevin chains ``z [C, D]`` on a target, keeping the last ``keep`` states.

    Args:
        target: the log-density (differentiable).
        z0: ``[C, D]`` chain starts.
        step_size: ``a`` of the schedule.
        step_offset: ``b`` of the schedule.
        decay: ``γ`` of the schedule.
        keep: number of most recent states returned by :meth:`samples`.
        seed: seeds the noise.
    """

    def __init__(
        self,
        target: Target,
        z0: torch.Tensor,
        step_size: float = 1e-4,
        step_offset: float = 1.0,
        decay: float = 0.55,
        keep: int = 64,
        seed: int = 0,
    ) -> None:
        if not step_size > 0:
            raise EstimatorError(f"SGLD step_size must be > 0, got {step_size}")
        self.target = target
        self.a, self.b, self.gamma = float(step_size), float(step_offset), float(decay)
        self.keep = int(keep)
        self.generator = torch.Generator().manual_seed(seed)
        self.t = 0
        self.nan_evaluations = 0
        self.z = z0.clone()
        self.lp, self.grad = self._score(self.z)
        self.history: list[tuple[torch.Tensor, torch.Tensor]] = [(self.z, self.lp)]

    def _score(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = z.detach().clone().requires_grad_(True)
        lp = self.target.log_prob(x)
        (grad,) = torch.autograd.grad(lp.sum(), x)
        return lp.detach(), grad

    def step(self) -> None:
        """One Langevin transition of every chain."""
        eps = self.a * (self.b + self.t) ** -self.gamma
        noise = torch.randn(self.z.shape, generator=self.generator, dtype=self.z.dtype)
        proposal = self.z + 0.5 * eps * self.grad + math.sqrt(eps) * noise.to(self.z.device)
        proposal = reflect(proposal, self.target.lower, self.target.upper)
        lp, grad = self._score(proposal)
        ok = torch.isfinite(lp) & torch.isfinite(grad).all(-1)
        self.nan_evaluations += int((~ok).sum())
        self.z = torch.where(ok[:, None], proposal, self.z)
        self.lp = torch.where(ok, lp, self.lp)
        self.grad = torch.where(ok[:, None], grad, self.grad)
        self.t += 1
        self.history.append((self.z, self.lp))
        chains = self.z.shape[0]
        self.history = self.history[-max(1, math.ceil(self.keep / chains)) :]

    def samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The last ``keep`` states over all chains (fewer early on) and their log-densities."""
        z = torch.cat([h[0] for h in self.history])[-self.keep :]
        lp = torch.cat([h[1] for h in self.history])[-self.keep :]
        return z, lp


class SGLD(SamplerEstimator):
    """SGLD baseline on a problem: one chain from the centre of the limits (App. I-A) unless
    ``chains`` > 1; settings of :class:`SamplerEstimator` plus ``step_size``, ``step_offset``,
    ``decay`` and ``chains``."""

    kind = "sgld"
    defaults_file = resources.files("dynid.estimators") / "defaults/sgld.yaml"
    ensemble = False

    def __init__(
        self,
        *,
        step_size: float = 1e-4,
        step_offset: float = 1.0,
        decay: float = 0.55,
        chains: int = 1,
        **settings,
    ) -> None:
        super().__init__(**settings)
        if chains < 1:
            raise EstimatorError(f"SGLD chains must be ≥ 1, got {chains}")
        self.step_size, self.step_offset, self.decay = step_size, step_offset, decay
        self.chains = int(chains)

    def make_sampler(self, target: Target, z0: torch.Tensor) -> SGLDSampler:
        """Chains started at ``z0`` (repeated to ``chains``)."""
        return SGLDSampler(
            target,
            z0.expand(self.chains, -1),
            self.step_size,
            self.step_offset,
            self.decay,
            self.num_particles,
            self.seed,
        )
