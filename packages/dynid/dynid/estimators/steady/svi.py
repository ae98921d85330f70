"""The SVI baseline of the steady paper (Sec. IV): a kinodynamic model learned by stochastic
variational inference with a structured inference network (Krishnan, Shalit and Sontag,
"Structured inference networks for nonlinear state space models", AAAI 2017), the transition
being the steady paper's network in place of their gated one.

**Generative model** — the learned planar model itself: ``x_0 ~ N(m_k, diag s_k²)`` (the
diagonal Gaussian matched to the moments of draws from the sequence's initial-state
distribution), body-frame accelerations ``a_{t+1} ~ N(μ_θ(x_t, u_t), diag σ_θ²)`` integrated
into ``x_{t+1}`` (:meth:`PlanarKinodynamics.integrate`), and the observation model's likelihood
``Q_y(y_t | x_t)`` (a missing, NaN, channel contributes nothing). The random dimensions of a
transition are its accelerations, so those (with ``x_0``) are the latent variables; a state is
their deterministic consequence.

**Guide** — the "ST-R" (deep Kalman smoother) inference network: a GRU run backwards in time
over the observations and controls gives ``h_t``, a summary of ``y_{t:T}`` and the controls
``u_{t−1:T−1}`` that lead to them; ``q(x_0 | h_0)`` is a diagonal Gaussian relative to the
prior, ``N(m_k + s_k μ_0(h_0), diag (s_k σ_0(h_0))²)``; the combiner
``g = ½ (tanh(W x̃_t + b) + h_{t+1})`` gives ``q(a_{t+1} | x_t, h_{t+1}) = N(W_μ g, diag
softplus(W_σ g)²)`` with ``x̃_t`` the normalised state features.

**Training** — ``pyro.infer.SVI`` with ``Trace_ELBO`` and ``pyro.optim.ClippedAdam`` on
minibatches of sequences, the ELBO normalised per sequence and step; the KL terms (the latent
sites of model and guide) are weighted by a factor that grows linearly from ``kl_start`` to 1
over ``anneal_steps`` iterations (Krishnan et al.'s annealing). Every ``validation_every``
iterations the transition model is scored like STEADY's
(:func:`~dynid.estimators.steady.em.observed_log_likelihood`: the particle filter's log-likelihood
of the validation sequences observed every ``validation_stride``-th step); the best model is kept
and training stops after ``patience`` validations without improvement once the annealing is
over, or at once, back at the best validated model, when a loss is not finite or a validation
fails (:class:`~dynid.estimators.steady.em.EarlyStopping`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO
from pyro.optim import ClippedAdam
from torch import nn
from torch.nn import functional

from dynid.errors import EstimatorError
from dynid.estimators.steady.em import (
    EarlyStopping,
    Sequences,
    observed_log_likelihood,
    require_counts,
)
from dynid.estimators.steady.observation import BearingObservation, ObservationModel
from dynid.model.kinodynamics import PlanarKinodynamics

__all__ = ["InferenceNetwork", "SVISettings", "StructuredSVI"]


@dataclass
class SVISettings:
    """The SVI baseline's settings.

    Attributes:
        learning_rate, weight_decay, clip_norm: of ``ClippedAdam`` (guide and model alike).
        batch: sequences per iteration.
        kl_start: the KL weight at the first iteration (annealed linearly to 1).
        anneal_steps: iterations over which the KL weight reaches 1.
        hidden: width of the GRU state and the combiner.
        prior_draws: draws of each initial-state distribution matched by ``N(m_k, diag s_k²)``.
        validation_every: iterations between validations.
        validation_stride: the validation filter sees every this-many-th observation.
        validation_particles: ``N`` of the validation filter.
        patience: validations without improvement, once the annealing is over, before stopping.
    """

    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    clip_norm: float = 10.0
    batch: int = 8
    kl_start: float = 0.01
    anneal_steps: int = 1_000
    hidden: int = 64
    prior_draws: int = 2_000
    validation_every: int = 100
    validation_stride: int = 10
    validation_particles: int = 1_000
    patience: int = 5

    def __post_init__(self) -> None:
        require_counts(self, ("batch", "anneal_steps", "hidden", "prior_draws",
                              "validation_every", "validation_stride", "validation_particles",
                              "patience"), "svi")  # fmt: skip
        if not 0.0 < self.kl_start <= 1.0:
            raise EstimatorError(f"svi: kl_start must be in (0, 1], got {self.kl_start}")
        if self.learning_rate <= 0 or self.weight_decay < 0 or self.clip_norm <= 0:
            raise EstimatorError(
                "svi: learning_rate and clip_norm must be > 0 and weight_decay ≥ 0, got "
                f"{self.learning_rate}, {self.clip_norm}, {self.weight_decay}"
            )


def _state_features(x: torch.Tensor) -> torch.Tensor:
    """``[..., 7]``: ``(p_x, p_y, cos θ, sin θ, v_x, v_y, ω)`` of planar states ``x [..., 6]``."""
    heading = x[..., 2:3]
    return torch.cat([x[..., :2], torch.cos(heading), torch.sin(heading), x[..., 3:]], dim=-1)


class InferenceNetwork(nn.Module):
    """The ST-R guide's networks (module notes) for planar states and body accelerations.

    Args:
        observation_dim: ``k``, channels of an observation.
        control_dim: ``nu``.
        hidden: width of the GRU state and the combiner.
        angular: observations are angles (rad), given to the GRU as ``(cos y, sin y)``.
    """

    def __init__(
        self, observation_dim: int, control_dim: int, *, hidden: int = 64, angular: bool = False
    ) -> None:
        super().__init__()
        self.angular = bool(angular)
        width = observation_dim * (3 if self.angular else 2) + control_dim
        self.rnn = nn.GRU(width, hidden, batch_first=True)
        self.initial_head = nn.Linear(hidden, 12)
        self.state = nn.Linear(7, hidden)
        self.loc = nn.Linear(hidden, 3)
        self.scale = nn.Linear(hidden, 3)
        for layer in (self.initial_head, self.loc):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        # q(x_0) starts at the prior: softplus(b) = 1
        nn.init.constant_(self.initial_head.bias[6:], math.log(math.expm1(1.0)))
        self.register_buffer("feature_mean", torch.zeros(7))
        self.register_buffer("feature_std", torch.ones(7))

    def set_normalisation(self, states: torch.Tensor) -> None:
        """Normalise the combiner's state features by their mean and std over ``states
        [..., 6]`` (e.g. the prior means of the training sequences)."""
        f = _state_features(states.reshape(-1, 6))
        self.feature_mean.copy_(f.mean(0))
        self.feature_std.copy_(f.std(0).nan_to_num(1.0).clamp_min(1e-3))

    def encode(self, observations: torch.Tensor, controls: torch.Tensor) -> torch.Tensor:
        """``[B, T + 1, hidden]``: ``h_t`` from ``observations [B, T + 1, k]`` (NaN: missing,
        entered as 0 with a presence flag) and ``controls [B, T, nu]`` (``u_{t−1}`` enters at
        step ``t``, zero at ``t = 0``), the GRU run from ``t = T`` down to 0."""
        present = ~torch.isnan(observations)
        y = torch.where(present, observations, 0.0)
        flags = present.to(y)
        parts = [torch.cos(y) * flags, torch.sin(y) * flags] if self.angular else [y]
        previous = functional.pad(controls, (0, 0, 1, 0))
        inputs = torch.cat([*parts, flags, previous.to(y)], dim=-1)
        backward, _ = self.rnn(inputs.flip(1))
        return backward.flip(1)

    def initial(self, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(μ_0, σ_0)``, each ``[B, 6]``: ``q(x_0)`` in units of the prior (module notes)."""
        out = self.initial_head(h0)
        return out[..., :6], functional.softplus(out[..., 6:]) + 1e-4

    def combine(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loc, scale)``, each ``[B, 3]``: ``q(a_{t+1} | x_t, h_{t+1})`` (m/s², rad/s²) from
        states ``x [B, 6]`` and ``h [B, hidden]``."""
        f = (_state_features(x) - self.feature_mean) / self.feature_std
        g = 0.5 * (torch.tanh(self.state(f)) + h)
        return self.loc(g), functional.softplus(self.scale(g)) + 1e-4


@dataclass
class StructuredSVI(EarlyStopping):
    """SVI of ``model`` with the ST-R guide (module notes); ``step`` runs one iteration.

    Attributes:
        model: the planar kinodynamic model being learned (its parameters change in place).
        observation: ``Q_y`` (its ``log_prob`` is called with ``[B, D]`` states and ``[B, k]``
            observations).
        train, valid: training and validation sequences.
        settings: :class:`SVISettings`.
        seed: seeds the minibatches, the prior matching, the guide's initial weights and
            pyro's draws (from a forked copy of torch's global generator, which is left as it
            was).
        history: one entry per validation (iteration, log-likelihood, wall time, KL weight,
            the mean loss since the previous validation).

    Raises:
        EstimatorError: ``model`` is not a :class:`PlanarKinodynamics`.

    Pyro's global parameter store is cleared when the object is made.
    """

    label: ClassVar[str] = "svi"
    model: PlanarKinodynamics
    observation: ObservationModel
    train: Sequences
    valid: Sequences
    settings: SVISettings = field(default_factory=SVISettings)
    seed: int = 0
    history: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.model, PlanarKinodynamics):
            raise EstimatorError(
                f"svi: the model must be a PlanarKinodynamics, got {type(self.model).__name__}"
            )
        s = self.settings
        self.generator = torch.Generator().manual_seed(int(self.seed))
        self.prior_loc, self.prior_scale = self.initial_prior(self.train)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.seed))
            self.network = InferenceNetwork(
                self.train.observations.shape[-1], self.train.controls.shape[-1],
                hidden=s.hidden, angular=isinstance(self.observation, BearingObservation),
            ).to(self.train.observations.dtype)  # fmt: skip
            self.rng_state = torch.get_rng_state()
        self.network.set_normalisation(self.prior_loc)
        pyro.clear_param_store()
        optimizer = ClippedAdam(
            {"lr": s.learning_rate, "weight_decay": s.weight_decay, "clip_norm": s.clip_norm}
        )
        self.svi = SVI(self.generative, self.guide, optimizer, loss=Trace_ELBO())
        self.losses: list[float] = []
        self.start_early_stopping()

    def initial_prior(self, sequences: Sequences) -> tuple[torch.Tensor, torch.Tensor]:
        """``(m, s)``, each ``[K, D]``: the moments of ``prior_draws`` draws from each sequence's
        initial-state distribution."""
        draws = [
            sequences.initial(k, self.settings.prior_draws, self.generator)
            for k in range(len(sequences))
        ]
        stacked = torch.stack(draws).to(sequences.observations.dtype)
        return stacked.mean(1), stacked.std(1).clamp_min(1e-6)

    def kl_weight(self) -> float:
        """The KL weight of the current iteration."""
        s = self.settings
        return s.kl_start + (1.0 - s.kl_start) * min(1.0, self.iteration / s.anneal_steps)

    def generative(
        self,
        controls: torch.Tensor,
        observations: torch.Tensor,
        prior_loc: torch.Tensor,
        prior_scale: torch.Tensor,
        kl_weight: float = 1.0,
    ) -> None:
        """The pyro model on ``B`` sequences: ``controls [B, T, nu]``, ``observations
        [B, T + 1, k]`` (NaN: missing), initial prior ``N(prior_loc, diag prior_scale²)``
        (``[B, D]`` each); log-densities averaged over sequences and steps, latent sites
        weighted by ``kl_weight``."""
        pyro.module("kinodynamics", self.model)
        batch, steps = controls.shape[:2]
        with pyro.plate("sequences", batch), poutine.scale(scale=1.0 / (batch * (steps + 1))):
            with poutine.scale(scale=kl_weight):
                x = pyro.sample("x_0", dist.Normal(prior_loc, prior_scale).to_event(1))
            states = [x]
            for t in range(steps):
                mean, std = self.model.body_acceleration(x, controls[:, t])
                with poutine.scale(scale=kl_weight):
                    a = pyro.sample(f"a_{t + 1}", dist.Normal(mean, std).to_event(1))
                x = self.model.integrate(x, a, self.train.dt)
                states.append(x)
            # Q_y(y_t | x_t) of every step at once (missing channels contribute nothing)
            pyro.factor(
                "y", self.observation.log_prob(torch.stack(states, 1), observations).sum(-1)
            )

    def guide(
        self,
        controls: torch.Tensor,
        observations: torch.Tensor,
        prior_loc: torch.Tensor,
        prior_scale: torch.Tensor,
        kl_weight: float = 1.0,
    ) -> torch.Tensor:
        """The pyro guide (arguments as :meth:`generative`); returns the drawn states
        ``[B, T + 1, D]``."""
        pyro.module("inference", self.network)
        batch, steps = controls.shape[:2]
        h = self.network.encode(observations, controls)
        with pyro.plate("sequences", batch), poutine.scale(scale=1.0 / (batch * (steps + 1))):
            loc, scale = self.network.initial(h[:, 0])
            q0 = dist.Normal(prior_loc + prior_scale * loc, prior_scale * scale)
            with poutine.scale(scale=kl_weight):
                x = pyro.sample("x_0", q0.to_event(1))
            states = [x]
            for t in range(steps):
                loc, scale = self.network.combine(x, h[:, t + 1])
                with poutine.scale(scale=kl_weight):
                    a = pyro.sample(f"a_{t + 1}", dist.Normal(loc, scale).to_event(1))
                x = self.model.integrate(x, a, self.train.dt)
                states.append(x)
        return torch.stack(states, dim=1)

    def _batch(self, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            self.train.controls[index].to(self.train.observations),
            self.train.observations[index],
            self.prior_loc[index],
            self.prior_scale[index],
        )

    def step(self) -> float:
        """One SVI iteration on a random minibatch of training sequences; returns its loss
        (the negative ELBO per sequence and step, KL-weighted).

        Pyro has already applied the optimiser's step when the loss is seen, so a loss that is
        not finite has left the model and the guide with non-finite parameters: the run then
        ends at the best validated model (:meth:`~EarlyStopping.stop_diverged` loads
        ``best_state`` into ``model``, which is what the learner returns; the guide, which only
        serves training, is left as it is), and the step returns NaN. A failed validation ends
        the run likewise (:meth:`validate_and_keep`); the step then returns its loss.
        """
        s = self.settings
        index = torch.randperm(len(self.train), generator=self.generator)[: s.batch]
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.rng_state)
            loss = float(self.svi.step(*self._batch(index), kl_weight=self.kl_weight()))
            self.rng_state = torch.get_rng_state()
        if not self.finite_or_stop(loss, f"the ELBO loss on training sequences {index.tolist()}"):
            return math.nan
        self.iteration += 1
        self.losses.append(loss)
        if self.iteration % s.validation_every == 0:
            self.validate_and_keep()
        return loss

    def sample_states(self, index: torch.Tensor) -> torch.Tensor:
        """``[len(index), T + 1, D]`` states drawn from the guide for training sequences
        ``index`` (no gradients)."""
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.rng_state)
            states = self.guide(*self._batch(index))
            self.rng_state = torch.get_rng_state()
        return states

    def validate(self) -> float:
        """:func:`observed_log_likelihood` of the validation sequences (seeded afresh so that
        iterations compare)."""
        s = self.settings
        return observed_log_likelihood(
            self.model, self.observation, self.valid, stride=s.validation_stride,
            particles=s.validation_particles, seed=int(self.seed) + 1,
        )  # fmt: skip

    def validate_and_keep(self) -> float:
        """As :meth:`EarlyStopping.validate_and_keep` (a failed validation ends the run at the
        best validated model), but validations before the KL weight reaches 1 do not count
        towards the patience (the objective is still changing)."""
        value = super().validate_and_keep()
        annealing = self.settings.kl_start < 1.0 and self.iteration < self.settings.anneal_steps
        if annealing and not self.diverged:
            self.stale, self.converged = 0, False
        return value

    def progress(self) -> dict[str, float]:
        """The history entry's own part: the KL weight and the mean loss since the previous
        validation (the losses are then cleared)."""
        entry = {"kl_weight": self.kl_weight(), "loss": sum(self.losses) / max(1, len(self.losses))}
        self.losses = []
        return entry
