"""The generic learned residual (SIAN-like, Ajay et al. 2019): a recurrent network that corrects
the simulated state at every time step, contact or not, trained on whole trajectories.

``s_{t+1} = sim(s_t) + D gᵩ(h_{t+1})`` with ``h_{t+1} = GRU([s_t, sim(s_t)] / S, h_t)``: the
network sees the state and the simulator's prediction (divided by typical magnitudes ``S``) and
outputs a correction of all six state components (scaled by ``D``). It knows nothing of contact.
Training is back-propagation through time through the simulator with Adam on the loss of eq. 5
(summed trajectory errors over ``(x, z, r_g θ)``), the same loss as the residual impulse policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from dynid.errors import EstimatorError
from dynid.estimators.residual_contact import trajectory_errors
from dynid.model.planar_impact import PlanarImpactSimulator
from dynid.model.weights import load_state, save_state

__all__ = [
    "GenericResidual",
    "GenericTraining",
    "load_generic_residual",
    "save_generic_residual",
    "train_generic_residual",
]

_STATE_SCALE = (0.3, 0.1, 3.0, 1.0, 2.0, 20.0)
"""Typical magnitudes of ``(x, z, θ, ẋ, ż, θ̇)`` in the dice drops (m, m, rad, m/s, m/s, rad/s)."""

_CORRECTION_SCALE = (2e-3, 2e-3, 2e-2, 5e-2, 5e-2, 0.5)
"""Size of one output unit of the per-step correction, same units."""


class GenericResidual(nn.Module):
    """GRU state-correction network over simulator rollouts.

    Args:
        hidden: GRU width.
    """

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        if hidden < 1:
            raise ValueError(f"GenericResidual: hidden must be ≥ 1, got {hidden}")
        self.hidden = hidden
        self.cell = nn.GRUCell(12, hidden)
        self.head = nn.Linear(hidden, 6)
        nn.init.zeros_(self.head.weight)  # start as the simulator itself
        nn.init.zeros_(self.head.bias)
        self.register_buffer("state_scale", torch.tensor(_STATE_SCALE))
        self.register_buffer("correction_scale", torch.tensor(_CORRECTION_SCALE))
        self.double()

    def rollout(
        self,
        simulator: PlanarImpactSimulator,
        state0: torch.Tensor,
        steps: int,
        mu: float,
        eps: float,
    ) -> torch.Tensor:
        """``[B, steps + 1, 6]`` corrected rollouts from ``state0 [B, 6]``."""
        s = state0
        h = state0.new_zeros(state0.shape[0], self.hidden)
        out = [s]
        for _ in range(steps):
            predicted, _ = simulator.step(s, mu, eps)
            h = self.cell(torch.cat([s, predicted], -1) / self.state_scale.repeat(2), h)
            s = predicted + self.head(h) * self.correction_scale
            out.append(s)
        return torch.stack(out, 1)


@dataclass(frozen=True)
class GenericTraining:
    """Settings of :func:`train_generic_residual`.

    Attributes:
        epochs: full-batch Adam steps.
        learning_rate: Adam step size.
        hidden: GRU width.
        batch: at most this many training trajectories per Adam step, drawn afresh for each
            (all of them when there are fewer).
        seed: seeds the initial weights and the batches.
    """

    epochs: int = 100
    learning_rate: float = 3e-3
    hidden: int = 32
    batch: int = 16
    seed: int = 0


def train_generic_residual(
    simulator: PlanarImpactSimulator,
    observed: torch.Tensor,
    mu: float,
    eps: float,
    settings: GenericTraining = GenericTraining(),
    validation: torch.Tensor | None = None,
) -> tuple[GenericResidual, list[float]]:
    """Train the generic residual on ``observed [K, T + 1, 6]`` training trajectories.

    Args:
        simulator, observed, mu, eps: the simulator, the training drops and the coefficients.
        settings: Adam steps, step size, width, batch, seed.
        validation: ``[V, T' + 1, 6]`` held-out drops; when given, the weights kept are those
            (before any step, and after each) of the lowest mean trajectory error on them.

    Returns:
        The network with the weights of the lowest batch loss (or validation error, with
        ``validation``), and the batch loss per epoch.

    Raises:
        EstimatorError: ``observed`` or ``validation`` is not ``[K, T + 1, 6]``.
    """
    if observed.dim() != 3 or observed.shape[-1] != 6 or observed.shape[1] < 2:
        raise EstimatorError(f"observed must be [K, T + 1, 6] states, got {tuple(observed.shape)}")
    if validation is not None and (validation.dim() != 3 or validation.shape[-1] != 6):
        raise EstimatorError(f"validation must be [V, T + 1, 6], got {tuple(validation.shape)}")
    torch.manual_seed(settings.seed)
    net = GenericResidual(settings.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    rg = simulator.body.radius_of_gyration
    steps = observed.shape[1] - 1
    history: list[float] = []
    best, best_state = float("inf"), {k: v.clone() for k, v in net.state_dict().items()}
    gen = torch.Generator().manual_seed(settings.seed)
    count = observed.shape[0]
    for _ in range(settings.epochs):
        opt.zero_grad()
        obs = observed
        if count > settings.batch:
            obs = observed[torch.randperm(count, generator=gen)[: settings.batch]]
        pred = net.rollout(simulator, obs[:, 0], steps, mu, eps)
        loss = trajectory_errors(pred, obs, rg).mean()
        value = float(loss.detach())
        score = (
            value if validation is None else _validation_error(net, simulator, validation, mu, eps)
        )
        if score < best:
            best, best_state = score, {k: v.clone() for k, v in net.state_dict().items()}
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        history.append(value)
    if validation is not None:
        score = _validation_error(net, simulator, validation, mu, eps)
        if score < best:
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
    net.load_state_dict(best_state)
    return net, history


def _validation_error(
    net: GenericResidual,
    simulator: PlanarImpactSimulator,
    validation: torch.Tensor,
    mu: float,
    eps: float,
) -> float:
    """Mean trajectory error (m) of the network on ``validation [V, T + 1, 6]``."""
    with torch.no_grad():
        pred = net.rollout(simulator, validation[:, 0], validation.shape[1] - 1, mu, eps)
        rg = simulator.body.radius_of_gyration
        return float(trajectory_errors(pred, validation, rg).mean())


def save_generic_residual(net: GenericResidual, path: str | Path) -> Path:
    """Write the network's ``state_dict`` with its width (tensors only)."""
    return save_state(net, path, hidden=net.hidden)


def load_generic_residual(path: str | Path) -> GenericResidual:
    """Read a network written by :func:`save_generic_residual` (``weights_only=True``).

    Raises:
        ValueError: the file is not such a state dict.
    """
    return load_state(path, GenericResidual, "generic residual", ("hidden",))
