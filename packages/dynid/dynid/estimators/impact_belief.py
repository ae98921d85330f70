"""Stochastic simulation of the planar square (residual-contact paper IV, eqs. 6–8).

Contact-free motion is deterministic; uncertainty enters at contact events, where each particle
draws its corrective impulse from the residual policy (eq. 6; draws that penetrate or gain
energy are discarded and drawn again, :class:`~dynid.model.impulse_residual.ResidualContact`).
The belief is a Gaussian mixture (eq. 7) refitted to the particles after every dynamic step,
a transition from the end of one contact event to the end of the next: when the last particle in
contact leaves it, the particles are replaced by ``m`` draws from the mixture fitted to them
(the hybrid particle / Gaussian-mixture filter of GP-SUM, eq. 8). A draw from the mixture that
penetrates the ground or has more energy than the particles it came from is discarded.

The belief over the whole trajectory is a :class:`TrajectoryBelief`: particles ``[P, T + 1, 6]``
whose every time slice is a :class:`~dynid.posterior.Posterior` over the state (the shape the
nodes publish), and the highest-density regions used for coverage; :func:`recalibrated_thresholds`
recalibrates their levels on held-out observations.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import multivariate_normal
from sklearn.mixture import GaussianMixture

from dynid.model.impulse_residual import ResidualContact
from dynid.model.planar_impact import (
    GRAVITY,
    ImpulseResidual,
    PlanarImpactSimulator,
    kinetic_energy,
)
from dynid.posterior import Posterior

__all__ = [
    "STATE_NAMES",
    "TrajectoryBelief",
    "covered",
    "propagate_belief",
    "recalibrated_thresholds",
]

STATE_NAMES = ("dice/x", "dice/z", "dice/theta", "dice/vx", "dice/vz", "dice/omega")
STATE_UNITS = ("m", "m", "rad", "m/s", "m/s", "rad/s")

NOISE_DRAWS = 16
"""Draws of the observation error per particle for the predictive regions of
:meth:`TrajectoryBelief.coverages`."""


@dataclass
class TrajectoryBelief:
    """Trajectory particles of a stochastic simulation.

    Attributes:
        states: ``[P, T + 1, 6]`` particle states ``(x, z, θ, ẋ, ż, θ̇)`` (equal weights).
        radius_of_gyration: ``r_g`` (m) scaling ``θ`` in the configuration ``(x, z, r_g θ)``.
        rejected: residual draws and mixture draws discarded as infeasible.
        boundaries: samples at which a dynamic step ended (the last particle left contact and
            the belief was redrawn from its mixture), increasing.
    """

    states: np.ndarray
    radius_of_gyration: float
    rejected: int = 0
    boundaries: tuple[int, ...] = ()

    def dynamic_steps(self) -> list[tuple[int, int]]:
        """``(first, last)`` sample ranges of the dynamic steps (contact to contact)."""
        edges = [0, *self.boundaries, self.states.shape[1] - 1]
        return [(a, b) for a, b in itertools.pairwise(edges) if b > a]

    def posterior(self, k: int) -> Posterior:
        """The belief at sample ``k`` as equally weighted particles over :data:`STATE_NAMES`."""
        return Posterior(
            particles=self.states[:, k],
            names=list(STATE_NAMES),
            units=list(STATE_UNITS),
            estimator="residual_contact",
            meta={"sample": int(k)},
        )

    def configurations(self) -> np.ndarray:
        """``[P, T + 1, 3]`` particle configurations ``(x, z, r_g θ)`` (m)."""
        return self.states[..., :3] * np.array([1.0, 1.0, self.radius_of_gyration])

    def coverage(
        self,
        observed: np.ndarray,
        levels: tuple[float, ...] = (0.5, 0.9),
        components: int = 3,
        every: int = 1,
        seed: int = 0,
        observation_std: float = 0.0,
    ) -> dict[float, float]:
        """Fraction of the observed samples inside the highest-density regions of the belief
        (``observation_std = 0``) or of the predictive distribution ``belief ⊕ N(0, σ² I)``;
        see :meth:`coverages`.

        Returns:
            ``{level: fraction}``.
        """
        return self.coverages(observed, (observation_std,), levels, components, every, seed)[
            observation_std
        ]

    def coverages(
        self,
        observed: np.ndarray,
        observation_stds: tuple[float, ...] = (0.0,),
        levels: tuple[float, ...] = (0.5, 0.9),
        components: int = 3,
        every: int = 1,
        seed: int = 0,
    ) -> dict[float, dict[float, float]]:
        """Fraction of the observed samples inside the highest-density regions of the
        predictive distribution of an observation, ``belief ⊕ N(0, σ² I)``, for each ``σ``:
        :func:`covered` applied to the :meth:`density_ranks`.

        Returns:
            ``{σ: {level: fraction}}``.

        Raises:
            ValueError: as :meth:`density_ranks`.
        """
        ranks = self.density_ranks(observed, observation_stds, components, every, seed)
        return {sd: covered(r, levels) for sd, r in ranks.items()}

    def density_ranks(
        self,
        observed: np.ndarray,
        observation_stds: tuple[float, ...] = (0.0,),
        components: int = 3,
        every: int = 1,
        seed: int = 0,
    ) -> dict[float, np.ndarray]:
        """Highest-density rank of every ``every``-th observed sample after the first under the
        predictive distribution of an observation, ``belief ⊕ N(0, σ² I)``, for each ``σ``.

        At each such sample a Gaussian mixture of ``components`` (fewer if the particles are
        fewer) is fitted to the particle configurations; for each ``σ`` every component's
        covariance is widened by ``σ² I`` (the mixture convolved with the observation error;
        ``σ = 0``: the belief itself) and the reference points are the particles, each plus
        :data:`NOISE_DRAWS` draws of that error (the particles alone for ``σ = 0``). The rank
        is the fraction of reference points whose density is at most the observation's: 1 at
        the mode, 0 beyond every reference point. The observation lies in the region of level
        ``a`` (where the density exceeds that at a fraction ``1 - a`` of the reference points)
        when its rank is at least ``1 - a``; ranks of a calibrated predictive are uniform.

        Args:
            observed: ``[T + 1, ≥3]`` observed states (``x, z, θ`` first).
            observation_stds: ``σ`` (m) of the observation error on ``(x, z, r_g θ)``, each ≥ 0.
            components: mixture components.
            every: sample stride.
            seed: seeds the mixture fits and the error draws.

        Returns:
            ``{σ: ranks [S]}`` over the samples ``every, 2 every, …`` in order.

        Raises:
            ValueError: ``observed`` has another sample count, or a ``σ < 0``.
        """
        conf = self.configurations()
        obs = observed[:, :3] * np.array([1.0, 1.0, self.radius_of_gyration])
        if obs.shape[0] != conf.shape[1]:
            raise ValueError(
                f"coverage: observed has {obs.shape[0]} samples, the belief {conf.shape[1]}"
            )
        if any(not sd >= 0 for sd in observation_stds):
            raise ValueError(f"coverage: observation stds must be ≥ 0, got {observation_stds}")
        ranks: dict[float, list[float]] = {sd: [] for sd in observation_stds}
        rng = np.random.default_rng(seed)
        for k in range(1, conf.shape[1], every):
            gmm = _fit_mixture(conf[:, k], components, seed)
            noise = rng.standard_normal((conf.shape[0] * NOISE_DRAWS, conf.shape[2]))
            for sd in observation_stds:
                ref = conf[:, k] if sd == 0 else np.repeat(conf[:, k], NOISE_DRAWS, 0) + sd * noise
                dens = _log_density(gmm, ref, sd * sd)
                value = _log_density(gmm, obs[k : k + 1], sd * sd)[0]
                ranks[sd].append(float(np.mean(dens <= value)))
        return {sd: np.asarray(r) for sd, r in ranks.items()}


def covered(
    ranks: np.ndarray,
    levels: tuple[float, ...] = (0.5, 0.9),
    thresholds: dict[float, float] | None = None,
) -> dict[float, float]:
    """Fraction of the samples with highest-density ``ranks``
    (:meth:`TrajectoryBelief.density_ranks`) inside the region of each level ``a``: rank ≥
    ``1 - a``, or rank ≥ ``thresholds[a]`` for the recalibrated regions of
    :func:`recalibrated_thresholds`.

    Returns:
        ``{level: fraction}``.
    """
    cut = {a: 1.0 - a for a in levels} if thresholds is None else thresholds
    return {a: float(np.mean(ranks >= cut[a])) for a in levels}


def recalibrated_thresholds(
    ranks: np.ndarray, levels: tuple[float, ...] = (0.5, 0.9)
) -> dict[float, float]:
    """Rank thresholds of regions recalibrated on held-out samples (split-conformal
    recalibration of the predictive's highest-density regions).

    For level ``a`` and ``n`` calibration ranks the threshold is the ``⌊(1 - a)(n + 1)⌋``-th
    smallest rank (0, the whole space, where that index is below 1), so that a further sample
    exchangeable with them falls at or above it with probability at least ``a``. The region of
    level ``a`` is then the predictive's highest-density region of level ``1 - threshold``.

    Args:
        ranks: ``[n]`` ranks of held-out observations, each in ``[0, 1]``.
        levels: nominal levels in ``(0, 1)``.

    Returns:
        ``{level: threshold}``.

    Raises:
        ValueError: no ranks, a rank outside ``[0, 1]`` or a level outside ``(0, 1)``.
    """
    r = np.sort(np.asarray(ranks, dtype=float).ravel())
    if r.size == 0 or not ((r >= 0) & (r <= 1)).all():
        raise ValueError(f"recalibration: ranks in [0, 1] expected, got {r.size} values")
    if any(not 0 < a < 1 for a in levels):
        raise ValueError(f"recalibration: levels in (0, 1) expected, got {levels}")
    out = {}
    for a in levels:
        k = int(np.floor((1.0 - a) * (r.size + 1)))
        out[a] = float(r[k - 1]) if k >= 1 else 0.0
    return out


def _log_density(gmm: GaussianMixture, x: np.ndarray, var: float) -> np.ndarray:
    """``[N]`` log density at ``x [N, D]`` of the fitted mixture with every component's
    covariance widened by ``var · I`` (the mixture itself for ``var = 0``)."""
    if var == 0:
        return gmm.score_samples(x)
    eye = var * np.eye(x.shape[1])
    per = [
        np.log(w) + multivariate_normal(m, c + eye).logpdf(x).reshape(-1)
        for w, m, c in zip(gmm.weights_, gmm.means_, gmm.covariances_, strict=True)
    ]
    return logsumexp(np.stack(per), axis=0)


def _fit_mixture(x: np.ndarray, components: int, seed: int) -> GaussianMixture:
    """A full-covariance Gaussian mixture on ``x [P, D]`` with a small ridge (1e-10 m²) so that
    coinciding particles (no contact yet) still give a proper density."""
    k = max(1, min(components, len(np.unique(x.round(12), axis=0))))
    return GaussianMixture(k, covariance_type="full", reg_covar=1e-10, random_state=seed).fit(x)


def propagate_belief(
    simulator: PlanarImpactSimulator,
    state0: torch.Tensor,
    steps: int,
    mu: float,
    eps: float,
    policy: ImpulseResidual,
    *,
    particles: int = 64,
    components: int = 3,
    seed: int = 0,
    extra_std: float = 0.0,
) -> TrajectoryBelief:
    """Propagate the belief of one drop from ``state0`` (eqs. 6–8).

    Args:
        simulator: the analytical simulator.
        state0: ``[6]`` initial state (taken as exact, as in the paper's experiments).
        steps: samples to simulate after the first.
        mu, eps: the identified friction and restitution.
        policy: the residual policy; one with zero standard deviation reduces this to the
            deterministic simulation with the mean residual.
        particles: ``m``, the particle count.
        components: ``K`` of the mixture (eq. 7).
        seed: seeds the residual draws and the mixture draws.
        extra_std: standard deviation (N·s) added in quadrature to the policy's
            (:class:`~dynid.model.impulse_residual.ResidualContact`), e.g. a calibrated spread.

    Returns:
        The trajectory belief (``[particles, steps + 1, 6]``).
    """
    with torch.no_grad():
        contact = ResidualContact(policy, torch.Generator().manual_seed(seed), extra_std=extra_std)
        return _propagate(simulator, state0, steps, mu, eps, contact, particles, components, seed)


def _propagate(
    simulator: PlanarImpactSimulator,
    state0: torch.Tensor,
    steps: int,
    mu: float,
    eps: float,
    contact: ResidualContact,
    particles: int,
    components: int,
    seed: int,
) -> TrajectoryBelief:
    s = state0.reshape(1, 6).expand(particles, 6).clone()
    out = [s]
    in_contact = False
    rejected = 0
    boundaries = []
    for k in range(steps):
        s, event = simulator.step(s, mu, eps, contact)
        touching = bool(event.any())
        if in_contact and not touching:  # the end of a dynamic step: refit and redraw
            s, bad = _redraw(simulator, s, components, seed + k)
            rejected += bad
            boundaries.append(k + 1)
        in_contact = touching
        out.append(s)
    states = torch.stack(out, 1).cpu().numpy()
    return TrajectoryBelief(
        states,
        simulator.body.radius_of_gyration,
        rejected + contact.rejected,
        tuple(boundaries),
    )


def _redraw(
    simulator: PlanarImpactSimulator, s: torch.Tensor, components: int, seed: int
) -> tuple[torch.Tensor, int]:
    """Replace the particles ``[P, 6]`` by draws from a mixture fitted to them, keeping only
    draws that neither penetrate nor exceed the particles' largest total energy; particles without a
    feasible draw keep their own state. Returns the particles and the discarded draws."""
    x = s.cpu().numpy()
    if np.ptp(x, axis=0).max() < 1e-12:  # all equal (zero-variance residual): nothing to fit
        return s, 0
    gmm = _fit_mixture(x, components, seed)
    draws, _ = gmm.sample(x.shape[0])
    rng = np.random.default_rng(seed)
    draws = draws[rng.permutation(len(draws))]
    cand = torch.as_tensor(draws, dtype=s.dtype)
    body = simulator.body

    def energy(x: torch.Tensor) -> torch.Tensor:  # kinetic plus potential (J)
        return kinetic_energy(body, x) + body.mass * GRAVITY * x[..., 1]

    ok = (simulator.lowest_point(cand) >= 0.0) & (energy(cand) <= energy(s).max())
    return torch.where(ok[:, None], cand, s), int((~ok).sum())
