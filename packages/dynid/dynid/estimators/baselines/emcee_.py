"""emcee's affine-invariant ensemble sampler (stretch move, Goodman and Weare 2010) on a target.

``vectorize=True``: emcee hands all proposed walkers to one call, which scores them in a single
batched simulation. NaN log-densities (unstable simulations) are counted and returned as ``−inf``
so the proposal is rejected. Walkers that start identical in a coordinate can never move in it
under the stretch move, so shooting variables (which all start at the recorded states) receive a
seeded jitter of ``init_jitter`` normalised units.
"""

from __future__ import annotations

from importlib import resources

import emcee
import numpy as np
import torch

from dynid.estimators.base import EstimatorError
from dynid.estimators.baselines.base import SamplerEstimator, safe_log_prob
from dynid.objective import Target

__all__ = ["Emcee", "EmceeSampler"]


class EmceeSampler:
    """An ``emcee.EnsembleSampler`` with the stretch move over ``z [W, D]`` walkers.

    Args:
        target: the log-density.
        z0: ``[W, D]`` initial walkers (``W ≥ 2 D`` is emcee's recommendation, not enforced).
        stretch: the move's scale ``a`` (emcee default 2).
        seed: seeds emcee's random state.
    """

    def __init__(self, target: Target, z0: torch.Tensor, stretch: float = 2.0, seed: int = 0):
        if z0.shape[0] < 2:
            raise EstimatorError(f"emcee needs at least two walkers, got {z0.shape[0]}")
        self.target = target
        self.like = z0
        self.nan_evaluations = 0
        self.sampler = emcee.EnsembleSampler(
            z0.shape[0],
            z0.shape[1],
            self._log_prob,
            moves=emcee.moves.StretchMove(a=stretch),
            vectorize=True,
        )
        self.sampler.random_state = np.random.RandomState(seed).get_state()
        self.state = emcee.State(z0.detach().cpu().numpy())

    def _log_prob(self, x: np.ndarray) -> np.ndarray:
        z = torch.as_tensor(x, dtype=self.like.dtype, device=self.like.device)
        lp, bad = safe_log_prob(self.target, z)
        self.nan_evaluations += int(bad.sum())
        return lp.cpu().numpy()

    def step(self) -> None:
        """One stretch-move sweep over the ensemble.

        emcee's initial-state check (walkers linearly independent) is skipped: with fewer
        walkers than twice the dimension (small ensembles over shooting variables) the ensemble
        only explores its affine hull, which the caller accepts by choosing the size.
        """
        self.state = self.sampler.run_mcmc(
            self.state, 1, progress=False, skip_initial_state_check=True
        )

    def samples(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The current walkers and their log-densities."""
        z = torch.as_tensor(self.state.coords, dtype=self.like.dtype, device=self.like.device)
        lp = torch.as_tensor(self.state.log_prob, dtype=self.like.dtype, device=self.like.device)
        return z, lp

    @property
    def acceptance_fraction(self) -> float:
        """Mean acceptance fraction of the walkers so far."""
        return float(np.mean(self.sampler.acceptance_fraction))


class Emcee(SamplerEstimator):
    """emcee baseline on a problem; ``num_particles`` walkers from a Sobol set. Settings of
    :class:`SamplerEstimator` plus ``stretch`` and ``init_jitter``."""

    kind = "emcee"
    defaults_file = resources.files("dynid.estimators") / "defaults/emcee.yaml"
    ensemble = True

    def __init__(self, *, stretch: float = 2.0, init_jitter: float = 1e-2, **settings) -> None:
        super().__init__(**settings)
        self.stretch = stretch
        self.init_jitter = init_jitter

    def ensemble_size(self, dim: int) -> int:
        """``max(num_particles, 2 D)``: the stretch move needs at least twice as many walkers as
        dimensions (multiple shooting adds the shooting variables to ``D``)."""
        return max(self.num_particles, 2 * dim)

    def make_sampler(self, target: Target, z0: torch.Tensor) -> EmceeSampler:
        """Walkers at ``z0``, shooting variables jittered."""
        M = self.likelihood.M
        gen = torch.Generator().manual_seed(self.seed)
        noise = torch.randn(z0.shape[0], z0.shape[1] - M, generator=gen, dtype=z0.dtype)
        z = z0.clone()
        z[:, M:] += self.init_jitter * noise.to(z.device)
        return EmceeSampler(target, z, self.stretch, self.seed)
