"""The No-U-Turn sampler (Hoffman and Gelman 2014) from pyro-ppl on a bounded target.

pyro's ``NUTS(potential_fn=...)`` samples an unconstrained vector ``y``; bounded coordinates map
through ``z = lower + (upper − lower) σ(y)`` (:class:`~dynid.model.coordinates.Coordinates`) and
the log-Jacobian joins the potential, unbounded ones (shooting variables) pass through. The
kernel is driven one transition at a time (``setup`` / ``sample``) so the estimator can run in
pieces; warm-up adapts the step size and a diagonal mass matrix for ``warmup_steps``
transitions. pyro draws from torch's global generator, so each call runs inside
``torch.random.fork_rng`` with the chain's own saved RNG state: runs are seeded and leave the
caller's random state untouched.
"""

from __future__ import annotations

from importlib import resources

import torch
from pyro.infer import mcmc as pyro_mcmc

from dynid.estimators.baselines.base import SamplerEstimator
from dynid.model.coordinates import Coordinates
from dynid.objective import Target

__all__ = ["NUTS", "NUTSSampler"]


class NUTSSampler:
    """One NUTS chain on a target, keeping the last ``keep`` samples.

    Args:
        target: the log-density (differentiable).
        z0: ``[1, D]`` chain start inside the bounds.
        warmup_steps: adaptation transitions (counted as iterations).
        max_tree_depth: NUTS tree depth limit (≤ 2^depth gradient evaluations per transition).
        keep: number of latest samples returned.
        seed: seeds the chain's generator.
    """

    def __init__(
        self,
        target: Target,
        z0: torch.Tensor,
        warmup_steps: int = 100,
        max_tree_depth: int = 6,
        keep: int = 64,
        seed: int = 0,
    ) -> None:
        self.target = target
        self.coordinates = Coordinates(target.lower, target.upper)
        self.keep = int(keep)
        self.nan_evaluations = 0
        self.kernel = pyro_mcmc.NUTS(
            potential_fn=self._potential,
            max_tree_depth=max_tree_depth,
            adapt_step_size=True,
            adapt_mass_matrix=True,
            full_mass=False,
        )
        y0 = self.coordinates.to_unconstrained(z0[0], margin=1e-9)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.kernel.initial_params = {"y": y0}
            self.kernel.setup(warmup_steps)
            self.params = {"y": y0}
            self.rng_state = torch.get_rng_state()
        self.history: list[torch.Tensor] = []

    def _potential(self, params: dict[str, torch.Tensor]) -> torch.Tensor:
        y = params["y"]
        z = self.coordinates.from_unconstrained(y)
        lp = self.target.log_prob(z.unsqueeze(0))[0] + self.coordinates.log_abs_det_jacobian(y)
        if torch.isnan(lp):  # pyro treats a NaN energy as a divergent, rejected trajectory
            self.nan_evaluations += 1
        return -lp

    def step(self) -> None:
        """One NUTS transition (an adaptation step during warm-up)."""
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.rng_state)
            self.params = self.kernel.sample(self.params)
            self.rng_state = torch.get_rng_state()
        self.history.append(self.params["y"].detach().clone())
        self.history = self.history[-self.keep :]

    def samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The last ``keep`` samples (at least the start) and their log-densities."""
        ys = torch.stack(self.history or [self.params["y"].detach()])
        z = self.coordinates.from_unconstrained(ys)
        with torch.no_grad():
            lp = self.target.log_prob(z)
        return z, lp


class NUTS(SamplerEstimator):
    """NUTS baseline on a problem: one chain from the centre of the limits (App. I-A).
    Settings of :class:`SamplerEstimator` plus ``warmup_steps`` and ``max_tree_depth``."""

    kind = "nuts"
    defaults_file = resources.files("dynid.estimators") / "defaults/nuts.yaml"
    ensemble = False

    def __init__(self, *, warmup_steps: int = 100, max_tree_depth: int = 6, **settings) -> None:
        super().__init__(**settings)
        self.warmup_steps = int(warmup_steps)
        self.max_tree_depth = int(max_tree_depth)

    def make_sampler(self, target: Target, z0: torch.Tensor) -> NUTSSampler:
        """A chain from ``z0``."""
        return NUTSSampler(
            target, z0, self.warmup_steps, self.max_tree_depth, self.num_particles, self.seed
        )
