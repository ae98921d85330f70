"""STEADY's expectation-maximisation loop (steady paper, Algorithm 1) and the supervised fit of
its baselines.

One EM iteration: pick one training sequence; **E step** — run the particle filter with the current
model and the observation likelihood tempered by ``w_obs`` (linear from ``obs_weight_start`` to 1
over ``anneal_steps`` iterations), trace ``M`` trajectories back; **M step** — ``m_steps`` Adam
steps (the paper's one by default) on ``−Φ̃(θ)/T`` (eq. 6: the mean over the ``M`` trajectories of
``log p_θ(x_{0:T}, y_{0:T} | u)``, whose θ-dependent part is the sum of transition log-densities;
normalised by the length ``T``), all on the same traced trajectories, each followed by the weight
decay (by default the paper code's: the network's weight matrices shrink by ``1 − weight_decay``,
whatever the learning rate). Every ``validation_every`` iterations the filter's marginal
log-likelihood of the validation sequences, observed every ``validation_stride``-th step only, is
computed (untempered); the best model is kept and the loop stops after ``patience`` validations
without improvement, or at once, back at the best validated model, when the model diverges
(:class:`EarlyStopping`). With ``lr_drops`` > 0 a run out of patience, or diverged after its first
validation, is not over yet: it goes on from the best validated model with every learning rate
divided by ``lr_drop_factor`` and Adam's moments reset, up to ``lr_drops`` times (the paper: none).
With ``weight_average`` > 0 an exponential moving average of the weights (decay ``weight_average``
per iteration: Polyak–Ruppert averaging of the noisy M steps, weighted to forget the early ones) is
what is validated, kept and returned; the E steps still run the current weights (the paper: none).
With ``std_scales`` the run ends with :meth:`SteadyEM.calibrate_std`: the learned std of each
acceleration component is scaled by the factor of ``std_scales`` (or 1) under which the validation
likelihood is highest (the paper: none).
"""

from __future__ import annotations

import copy
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from dynid.errors import EstimatorError
from dynid.estimators.steady.filter import particle_filter, trace_trajectories
from dynid.estimators.steady.observation import ObservationModel
from dynid.model.kinodynamics import Kinodynamics, ResidualNetwork

__all__ = [
    "EMSettings",
    "EarlyStopping",
    "InitialState",
    "Sequences",
    "SteadyEM",
    "fit_supervised",
    "observed_log_likelihood",
    "thin",
    "transition_loss",
]

InitialState = Callable[[int, int, torch.Generator], torch.Tensor]
"""``initial(k, n, generator) -> [n, D]``: ``n`` draws of sequence ``k``'s initial state."""


@dataclass
class Sequences:
    """Recorded sequences for the filter.

    Attributes:
        controls: ``[K, T, nu]`` controls.
        observations: ``[K, T + 1, k]`` observations (NaN: missing).
        initial: the initial-state distribution of each sequence.
        dt: step (s).
    """

    controls: torch.Tensor
    observations: torch.Tensor
    initial: InitialState
    dt: float

    def __post_init__(self) -> None:
        if self.controls.ndim != 3 or self.observations.ndim != 3:
            raise EstimatorError(
                "sequences: controls must be [K, T, nu] and observations [K, T + 1, k], got "
                f"{tuple(self.controls.shape)} and {tuple(self.observations.shape)}"
            )
        if self.observations.shape[:2] != (self.controls.shape[0], self.controls.shape[1] + 1):
            raise EstimatorError(
                f"sequences: controls {tuple(self.controls.shape)} need observations "
                f"[{self.controls.shape[0]}, {self.controls.shape[1] + 1}, k], got "
                f"{tuple(self.observations.shape)}"
            )

    def __len__(self) -> int:
        return int(self.controls.shape[0])


def thin(observations: torch.Tensor, stride: int) -> torch.Tensor:
    """``observations [..., T + 1, k]`` with all but every ``stride``-th step set missing."""
    out = torch.full_like(observations, torch.nan)
    out[..., ::stride, :] = observations[..., ::stride, :]
    return out


@dataclass
class EMSettings:
    """STEADY's settings (defaults: the paper's, Sec. IV-A.3 and III-C).

    Attributes:
        num_particles: ``N`` of the E step.
        num_trajectories: ``M`` traced per E step.
        m_steps: Adam steps per M step on the same traced trajectories (the paper: 1).
        learning_rate, weight_decay: of Adam; with ``decoupled_decay`` the weight decay is not
            Adam's (an L2 term of every parameter's gradient) but a shrinkage of the network's
            weight matrices by ``1 − weight_decay`` after every Adam step, independent of the
            learning rate, biases and physical parameters untouched (the reference
            implementation's regulariser).
        decoupled_decay: see ``weight_decay``.
        lr_drops: times a run out of patience, or diverged, restarts from its best validated
            model with the learning rates divided by ``lr_drop_factor`` (the paper: 0).
        lr_drop_factor: the divisor (> 1).
        obs_weight_start: ``w_obs`` at the first iteration.
        anneal_steps: iterations over which ``w_obs`` grows linearly to 1.
        validation_every: iterations between validations.
        validation_stride: the validation filter sees every this-many-th observation.
        validation_particles: ``N`` of the validation filter.
        patience: validations without improvement before stopping.
        resample_threshold: resample when ESS < this fraction of N.
        weight_average: decay in [0, 1) of an exponential moving average of the weights taken
            after every M step; > 0: validation scores, and the run keeps and returns, the
            average instead of the current weights (the paper: 0, none).
        std_scales: factors (> 0) tried on the learned std of each acceleration component
            after training (:meth:`SteadyEM.calibrate_std`); empty: none (the paper).
    """

    num_particles: int = 20_000
    num_trajectories: int = 10
    m_steps: int = 1
    learning_rate: float = 1e-4
    weight_decay: float = 1e-4
    decoupled_decay: bool = True
    lr_drops: int = 0
    lr_drop_factor: float = 10.0
    obs_weight_start: float = 1e-3
    anneal_steps: int = 2_000
    validation_every: int = 500
    validation_stride: int = 10
    validation_particles: int = 20_000
    patience: int = 30
    resample_threshold: float = 0.5
    weight_average: float = 0.0
    std_scales: tuple[float, ...] = ()

    @property
    def adam_weight_decay(self) -> float:
        """The L2 weight decay Adam itself applies: ``weight_decay``, or 0 with
        ``decoupled_decay`` (the M step shrinks the weight matrices instead)."""
        return 0.0 if self.decoupled_decay else self.weight_decay

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight_average < 1.0:
            raise EstimatorError(
                f"steady: weight_average must be in [0, 1), got {self.weight_average}"
            )
        self.std_scales = tuple(float(f) for f in self.std_scales)
        if not all(math.isfinite(f) and f > 0 for f in self.std_scales):
            raise EstimatorError(
                f"steady: std_scales must be finite and > 0, got {self.std_scales}"
            )
        require_counts(self, ("num_particles", "num_trajectories", "m_steps", "validation_every",
                              "anneal_steps", "validation_stride", "validation_particles",
                              "patience"), "steady")  # fmt: skip
        if not 0.0 < self.obs_weight_start <= 1.0:
            raise EstimatorError(
                f"steady: obs_weight_start must be in (0, 1], got {self.obs_weight_start}"
            )
        if self.learning_rate <= 0 or not 0 <= self.weight_decay < 1:
            raise EstimatorError(
                "steady: learning_rate must be > 0 and weight_decay in [0, 1), got "
                f"{self.learning_rate}, {self.weight_decay}"
            )
        if int(self.lr_drops) < 0 or not self.lr_drop_factor > 1.0:
            raise EstimatorError(
                "steady: lr_drops must be ≥ 0 and lr_drop_factor > 1, got "
                f"{self.lr_drops}, {self.lr_drop_factor}"
            )


def require_counts(settings: object, keys: Sequence[str], label: str) -> None:
    """Each setting of ``keys`` on ``settings`` is an integer ≥ 1.

    Raises:
        EstimatorError: the first that is not, prefixed by ``label``.
    """
    for key in keys:
        if int(getattr(settings, key)) < 1:
            raise EstimatorError(f"{label}: {key} must be ≥ 1, got {getattr(settings, key)}")


class EarlyStopping(ABC):
    """Keep-the-best and patience over validations, shared by the iterative learners.

    A subclass has ``model``, ``settings.patience``, ``history`` (a list) and ``label`` (the
    learner's name, the prefix of its errors) and calls :meth:`start_early_stopping` when made;
    its :meth:`step` advances ``iteration``, checks its loss with :meth:`finite_or_stop` and
    calls :meth:`validate_and_keep` on its validation iterations.

    **Divergence** — a training loss that is not finite, or a validation whose filter finds no
    particle with a finite likelihood, ends the run at the best validated model
    (:meth:`stop_diverged`): ``model`` is loaded with ``best_state``, ``converged`` is set and
    ``diverged`` says at which iteration and why (it is empty while the run has not diverged).
    Before any validation has kept a model there is none to go back to, and the divergence
    raises :class:`EstimatorError`.
    """

    label: ClassVar[str]
    model: torch.nn.Module
    settings: Any
    history: list[dict[str, float]]

    def start_early_stopping(self) -> None:
        """Iteration 0, no validation yet, the current model kept, the clock started."""
        self.iteration = 0
        self.best_log_likelihood = -math.inf
        self.best_state: dict[str, Any] = copy.deepcopy(self.model.state_dict())
        self.best_iteration = 0
        self.stale = 0
        self.converged = False
        self.diverged = ""
        self._start = time.perf_counter()

    def stop_diverged(self, reason: str) -> None:
        """End the run at the best validated model: the current one diverged (``reason``).

        ``model`` is loaded with ``best_state``, ``converged`` is set and ``diverged`` reads
        ``"iteration <i>: <reason>"``.

        Raises:
            EstimatorError: no validation has kept a model yet (prefixed with ``label``).
        """
        if self.best_log_likelihood == -math.inf:
            raise EstimatorError(
                f"{self.label}: the model diverged at iteration {self.iteration} before its "
                f"first validation: {reason}"
            )
        self.model.load_state_dict(self.best_state)
        self.diverged = f"iteration {self.iteration}: {reason}"
        self.converged = True

    def finite_or_stop(self, loss: float, where: str) -> bool:
        """``True`` if ``loss`` is finite; otherwise :meth:`stop_diverged` with the reason
        ``"<where> is <loss>"`` and ``False`` (the step then returns NaN)."""
        if math.isfinite(loss):
            return True
        self.stop_diverged(f"{where} is {loss}")
        return False

    @abstractmethod
    def step(self) -> float:
        """One iteration; returns its training loss."""

    @abstractmethod
    def validate(self) -> float:
        """The validation score of the current model (higher is better)."""

    @abstractmethod
    def progress(self) -> dict[str, float]:
        """The learner's own part of a history entry."""

    def validate_and_keep(self) -> float:
        """Validate, keep the model if it is the best so far, and count patience; returns the
        validation score.

        A validation that fails (:class:`EstimatorError`: the filter finds no particle with a
        finite likelihood) ends the run at the best validated model (:meth:`stop_diverged`)
        and returns NaN, with no history entry.
        """
        try:
            value = self.validate()
        except EstimatorError as err:
            self.stop_diverged(f"the validation failed: {err}")
            return math.nan
        if value > self.best_log_likelihood:
            self.best_log_likelihood = value
            self.best_state = copy.deepcopy(self.model.state_dict())
            self.best_iteration = self.iteration
            self.stale = 0
        else:
            self.stale += 1
            self.converged = self.stale >= self.settings.patience
        self.history.append(
            {
                "iteration": float(self.iteration),
                "valid_log_likelihood": value,
                "wall_s": time.perf_counter() - self._start,
                **self.progress(),
            }
        )
        return value

    def run(self, max_iterations: int) -> Any:
        """Iterate until early stopping, divergence (``diverged`` says where and why) or
        ``max_iterations``; :meth:`finish` and return the model."""
        while self.iteration < max_iterations and not self.converged:
            self.step()
        self.finish()
        return self.model

    def finish(self) -> None:
        """End the run: validate the current model unless its iteration was validated or the
        run diverged, then load the best validated model."""
        if not self.diverged and (
            not self.history or self.history[-1]["iteration"] != self.iteration
        ):
            self.validate_and_keep()
        self.model.load_state_dict(self.best_state)


@dataclass
class SteadyEM(EarlyStopping):
    """The EM loop over ``model`` (module notes); ``step`` runs one iteration.

    Attributes:
        model: the kinodynamic model being learned (its parameters change in place).
        observation: ``Q_y``.
        train, valid: training and validation sequences.
        settings: :class:`EMSettings`.
        seed: seeds the filter, the choice of sequences and the trace-back.
        optimizer: the M step's optimiser; ``None``: Adam over every trainable parameter with
            the settings' learning rate and (without ``decoupled_decay``) weight decay.
        decayed: the weight matrices the decoupled decay shrinks (empty without it).
        history: one entry per validation (iteration, log-likelihood, wall time, w_obs, M-step
            loss, the learning-rate divisor in force).
        drop_reasons: why each learning-rate drop so far was taken (``"iteration <i>: out of
            patience"`` or the divergence, as :meth:`stop_diverged` words it); :attr:`drops`
            counts them.
        calibration: after :meth:`calibrate_std`, the validation log-likelihood before and
            after it and the std scale chosen (empty before).
        average: the moving average of the weights, a state dict of ``model`` (empty without
            ``settings.weight_average``).
    """

    label: ClassVar[str] = "steady"
    model: Kinodynamics
    observation: ObservationModel
    train: Sequences
    valid: Sequences
    settings: EMSettings = field(default_factory=EMSettings)
    seed: int = 0
    optimizer: torch.optim.Optimizer | None = None
    history: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        s = self.settings
        if self.optimizer is None:
            params = [p for p in self.model.parameters() if p.requires_grad]
            if not params:
                raise EstimatorError("steady: the model has no trainable parameters")
            self.optimizer = torch.optim.Adam(
                params, lr=s.learning_rate, weight_decay=s.adam_weight_decay
            )
        self.decayed = weight_matrices(self.model) if s.decoupled_decay else []
        self._initial_optimizer = copy.deepcopy(self.optimizer.state_dict())
        self.generator = torch.Generator().manual_seed(int(self.seed))
        self.last_loss = math.nan
        self.drop_reasons: list[str] = []
        self.calibration: dict[str, Any] = {}
        self.start_average()
        self.start_early_stopping()

    def start_average(self) -> None:
        """Start the weight average at the current weights (no average without
        ``settings.weight_average``)."""
        self.average: dict[str, torch.Tensor] = (
            copy.deepcopy(self.model.state_dict()) if self.settings.weight_average > 0 else {}
        )

    def update_average(self) -> None:
        """Move the weight average towards the current weights by ``1 − weight_average``."""
        weight = 1.0 - self.settings.weight_average
        with torch.no_grad():
            for name, value in self.model.state_dict().items():
                average = self.average[name]
                if average.is_floating_point():
                    average.lerp_(value, weight)
                else:
                    average.copy_(value)

    def obs_weight(self) -> float:
        """``w_obs`` of the current iteration."""
        s = self.settings
        frac = min(1.0, self.iteration / s.anneal_steps)
        return s.obs_weight_start + (1.0 - s.obs_weight_start) * frac

    def step(self) -> float:
        """One EM iteration (E step on one random training sequence, one M step); returns the
        M-step loss ``−Φ̃/T`` before the M step's first Adam step (without the observation term,
        which does not depend on θ).

        A model that diverged (no particle of the E step with a finite likelihood, or an M-step
        loss that is not finite, checked before the optimiser's step) goes back to the best
        validated model (:meth:`stop_diverged`: a learning-rate drop while one is left, the end
        of the run otherwise), and the step returns NaN. A failed validation is handled
        likewise (:meth:`validate_and_keep`); the step then returns its loss.
        """
        s = self.settings
        k = int(torch.randint(len(self.train), (), generator=self.generator))
        x0 = self.train.initial(k, s.num_particles, self.generator)
        try:
            result = particle_filter(
                self.model,
                self.observation,
                x0,
                self.train.controls[k],
                self.train.observations[k],
                self.train.dt,
                obs_weight=self.obs_weight(),
                resample_threshold=s.resample_threshold,
                generator=self.generator,
            )
        except EstimatorError as err:
            self.stop_diverged(f"the E step on training sequence {k} failed: {err}")
            return math.nan
        paths = trace_trajectories(result, s.num_trajectories, self.generator)
        for inner in range(s.m_steps):
            loss = transition_loss(self.model, paths, self.train.controls[k], self.train.dt)
            value = float(loss.detach())
            if not self.finite_or_stop(value, f"the M-step loss on training sequence {k}"):
                return math.nan
            if inner == 0:
                self.last_loss = value
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            shrink(self.decayed, s.weight_decay)
        if self.average:
            self.update_average()
        self.iteration += 1
        if self.iteration % s.validation_every == 0:
            self.validate_and_keep()
            if self.converged and not self.diverged and self.drops < s.lr_drops:
                self.drop_learning_rate("out of patience")
        return self.last_loss

    def validate_and_keep(self) -> float:
        """:meth:`EarlyStopping.validate_and_keep` of the weight average, when there is one;
        training then goes on from the current weights (unless the validation ended the run or
        dropped the learning rate, which go back to the best validated model)."""
        if not self.average:
            return super().validate_and_keep()
        current = copy.deepcopy(self.model.state_dict())
        drops = self.drops
        self.model.load_state_dict(self.average)
        value = super().validate_and_keep()
        if not self.diverged and self.drops == drops:
            self.model.load_state_dict(current)
        return value

    @property
    def drops(self) -> int:
        """Learning-rate drops taken so far."""
        return len(self.drop_reasons)

    def stop_diverged(self, reason: str) -> None:
        """With a learning-rate drop left and a validated model to go back to,
        :meth:`drop_learning_rate` instead of ending the run; otherwise end it
        (:meth:`EarlyStopping.stop_diverged`)."""
        if self.drops < self.settings.lr_drops and self.best_log_likelihood > -math.inf:
            self.drop_learning_rate(reason)
        else:
            super().stop_diverged(reason)

    def drop_learning_rate(self, reason: str) -> None:
        """Go on from the best validated model with every learning rate divided by
        ``lr_drop_factor`` once more and the optimiser's state reset; the patience count
        restarts, the weight average starts afresh, and ``reason`` is kept in ``drop_reasons``."""
        self.drop_reasons.append(f"iteration {self.iteration}: {reason}")
        self.model.load_state_dict(self.best_state)
        self.start_average()
        self.optimizer.load_state_dict(self._initial_optimizer)
        for group in self.optimizer.param_groups:
            group["lr"] /= self.settings.lr_drop_factor**self.drops
        self.stale = 0
        self.converged = False

    def finish(self) -> None:
        """End the run: load the best validated model, then :meth:`calibrate_std` if
        ``settings.std_scales`` is set and the model has not been calibrated yet."""
        super().finish()
        if self.settings.std_scales and not self.calibration:
            self.calibrate_std()

    def calibrate_std(self) -> list[float]:
        """Scale the learned std of each acceleration component by the factor of
        ``settings.std_scales`` (or 1) under which :meth:`validate` scores highest.

        EM moves the std slowly where the observations say little about each step (steady
        results page), so the run's std can stay far from the validation likelihood's optimum.
        One sweep of coordinate ascent over the components, in order: each factor is tried with
        the other components at their chosen scale, and kept only if it raises the validation
        log-likelihood; a factor under which the filter loses every particle counts as worse.
        The scale goes into the network's ``std_scale`` buffer (so into the state dict and
        ``best_state``), and ``best_log_likelihood`` becomes the calibrated model's.

        Returns:
            The chosen scale, one factor per component.

        Raises:
            EstimatorError: the model has no :class:`ResidualNetwork` (``model.network``).
        """
        network = getattr(self.model, "network", None)
        if not isinstance(network, ResidualNetwork):
            raise EstimatorError(
                f"steady: std calibration needs a model with a residual network, got "
                f"{type(self.model).__name__}"
            )
        before = self.validate()
        best = before
        scale = network.std_scale.clone()
        for c in range(scale.numel()):
            kept = float(scale[c])
            for factor in self.settings.std_scales:
                trial = scale.clone()
                trial[c] = kept * factor
                network.std_scale.copy_(trial)
                try:
                    value = self.validate()
                except EstimatorError:
                    continue
                if value > best:
                    best, scale = value, trial
        network.std_scale.copy_(scale)
        self.best_log_likelihood = best
        self.best_state = copy.deepcopy(self.model.state_dict())
        self.calibration = {
            "valid_log_likelihood_before": before,
            "valid_log_likelihood": best,
            "std_scale": scale.tolist(),
        }
        return scale.tolist()

    def validate(self) -> float:
        """:func:`observed_log_likelihood` of the validation sequences (observations every
        ``validation_stride``-th step, seeded afresh so that iterations compare)."""
        s = self.settings
        return observed_log_likelihood(
            self.model, self.observation, self.valid, stride=s.validation_stride,
            particles=s.validation_particles, seed=int(self.seed) + 1,
            resample_threshold=s.resample_threshold,
        )  # fmt: skip

    def progress(self) -> dict[str, float]:
        """The history entry's own part: ``w_obs``, the last M-step loss and the divisor of
        the learning rates."""
        return {
            "obs_weight": self.obs_weight(),
            "loss": self.last_loss,
            "lr_divisor": self.settings.lr_drop_factor**self.drops,
        }


def observed_log_likelihood(
    model: Kinodynamics,
    observation: ObservationModel,
    sequences: Sequences,
    *,
    stride: int,
    particles: int,
    seed: int,
    resample_threshold: float = 0.5,
) -> float:
    """Mean over ``sequences`` of the filter's ``log p(y)`` per step, observations thinned to
    every ``stride``-th step (untempered)."""
    gen = torch.Generator().manual_seed(int(seed))
    thinned = thin(sequences.observations, stride)
    total = 0.0
    for k in range(len(sequences)):
        result = particle_filter(
            model, observation, sequences.initial(k, particles, gen), sequences.controls[k],
            thinned[k], sequences.dt, resample_threshold=resample_threshold, generator=gen,
        )  # fmt: skip
        total += result.log_marginal / sequences.controls.shape[1]
    return total / len(sequences)


def transition_loss(
    model: Kinodynamics, paths: torch.Tensor, controls: torch.Tensor, dt: float
) -> torch.Tensor:
    """``−mean log p(x_{t+1} | x_t, u_t)`` over ``paths [B, T + 1, D]`` and steps, controls
    ``[T, nu]`` or ``[B, T, nu]``."""
    u = (
        controls.to(paths)
        if controls.ndim == 3
        else controls.to(paths).expand(paths.shape[0], *controls.shape)
    )
    return -model.log_prob(paths[:, :-1], u, paths[:, 1:], dt).mean()


def weight_matrices(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The trainable weight matrices of ``model``'s linear layers: what a decoupled weight decay
    shrinks (biases and other parameters, physical ones included, are left alone)."""
    return [
        m.weight
        for m in model.modules()
        if isinstance(m, torch.nn.Linear) and m.weight.requires_grad
    ]


def shrink(weights: Sequence[torch.Tensor], decay: float) -> None:
    """Decoupled weight decay: multiply every tensor of ``weights`` by ``1 − decay`` in place."""
    with torch.no_grad():
        for weight in weights:
            weight.mul_(1.0 - decay)


def fit_supervised(
    model: Kinodynamics,
    train_paths: torch.Tensor,
    train_controls: torch.Tensor,
    valid_paths: torch.Tensor,
    valid_controls: torch.Tensor,
    dt: float,
    *,
    learning_rate: float = 1e-3,
    weight_decay: float = 1e-4,
    decoupled_decay: bool = False,
    batch: int = 16,
    max_iterations: int = 20_000,
    validation_every: int = 200,
    patience: int = 10,
    seed: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
) -> tuple[Kinodynamics, list[dict[str, float]]]:
    """Fit ``model`` to state trajectories by maximum likelihood of their transitions (the
    supervised step of FitHand, FitTV and FitTruth), Adam on minibatches of ``batch``
    trajectories, early stopping on the validation trajectories' transition log-likelihood.

    Args:
        train_paths, valid_paths: ``[B, T + 1, D]`` states.
        train_controls, valid_controls: ``[B, T, nu]`` their controls.
        weight_decay, decoupled_decay: Adam's L2 weight decay, or with ``decoupled_decay`` the
            shrinkage of the weight matrices by ``1 − weight_decay`` after every Adam step
            (:func:`shrink`).
        optimizer: in place of Adam over every trainable parameter (e.g. parameter groups).

    Returns:
        The best model (loaded into ``model``) and the validation history.
    """
    gen = torch.Generator().manual_seed(int(seed))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer or torch.optim.Adam(
        params, lr=learning_rate, weight_decay=0.0 if decoupled_decay else weight_decay
    )
    decayed = weight_matrices(model) if decoupled_decay else []
    best, best_state, stale, history = math.inf, copy.deepcopy(model.state_dict()), 0, []
    for it in range(1, max_iterations + 1):
        pick = torch.randint(train_paths.shape[0], (min(batch, train_paths.shape[0]),),
                             generator=gen)  # fmt: skip
        loss = transition_loss(model, train_paths[pick], train_controls[pick], dt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        shrink(decayed, weight_decay)
        if it % validation_every == 0:
            with torch.no_grad():
                value = float(transition_loss(model, valid_paths, valid_controls, dt))
            history.append({"iteration": float(it), "valid_loss": value})
            if value < best:
                best, best_state, stale = value, copy.deepcopy(model.state_dict()), 0
            else:
                stale += 1
                if stale >= patience:
                    break
    model.load_state_dict(best_state)
    return model, history
