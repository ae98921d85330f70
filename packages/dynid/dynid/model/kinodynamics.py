"""Stochastic kinodynamic models ⟨f, Q_ε⟩ (steady paper, Sec. III-C.1): ``x' ~ p(x' | x, u)``.

Every model predicts a diagonal Gaussian over the *acceleration* part of the state derivative;
the configuration follows by integration, so a transition has ``dim(v)`` random dimensions and
its log-density is that of the implied acceleration (the Jacobian ``1/dt`` of the velocity
change included), which is what the M step maximises.

- :class:`PlanarKinodynamics`: vehicles on a plane, state ``(p_x, p_y, θ, v_x, v_y, ω)`` (world
  frame), accelerations predicted in the body frame from body-frame inputs, explicit Euler.
- :class:`NeuralPlanarKinodynamics`: the paper's network (Fig. 2).

The robot model that adds such a residual to a problem's physics is
:class:`dynid.estimators.steady.hybrid.HybridKinodynamics`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
from torch import nn
from torch.nn import functional

from dynid.errors import EstimatorError

__all__ = [
    "Kinodynamics",
    "NeuralPlanarKinodynamics",
    "PlanarKinodynamics",
    "ResidualNetwork",
    "normal_log_density",
]


class Kinodynamics(nn.Module, ABC):
    """A stochastic one-step model ``x' ~ p(x' | x, u)`` on ``[..., D]`` states.

    Attributes:
        state_dim: ``D``.
    """

    state_dim: int

    @abstractmethod
    def sample(
        self, x: torch.Tensor, u: torch.Tensor, dt: float, generator: torch.Generator | None
    ) -> torch.Tensor:
        """``[..., D]`` next states drawn from ``x [..., D]`` under controls ``u [..., nu]``
        (broadcast against ``x``) held over ``dt`` (s)."""

    @abstractmethod
    def log_prob(
        self, x: torch.Tensor, u: torch.Tensor, x_next: torch.Tensor, dt: float
    ) -> torch.Tensor:
        """``[...]`` log-density of the transition ``x → x_next`` (over its random dimensions)."""


def _rotate(heading: torch.Tensor, xy: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    c, s = torch.cos(heading), torch.sin(heading)
    if inverse:
        s = -s
    x, y = xy.unbind(-1)
    return torch.stack([c * x - s * y, s * x + c * y], dim=-1)


class PlanarKinodynamics(Kinodynamics):
    """A planar vehicle: subclasses give the body-frame acceleration distribution.

    State ``(p_x, p_y, θ, v_x, v_y, ω)`` with velocities in the world frame; explicit Euler::

        p' = p + dt v,  θ' = θ + dt ω,  v' = v + dt R(θ) a_xy,  ω' = ω + dt α,
        (a_x, a_y, α) ~ N(mean, diag std²)  in the body frame.
    """

    state_dim = 6

    @abstractmethod
    def acceleration(
        self, heading: torch.Tensor, body_velocity: torch.Tensor, control: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, std)``, each ``[..., 3]``: body-frame ``(a_x, a_y, α)`` (m/s², rad/s²) from the
        heading ``[...]`` (rad), body velocity ``[..., 3]`` (``v_x^b, v_y^b, ω``) and control."""

    def body_acceleration(
        self, x: torch.Tensor, u: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, std)``, each ``[..., 3]``: the distribution of the body-frame ``(a_x, a_y,
        α)`` (m/s², rad/s²) from states ``x [..., 6]`` under controls ``u [..., nu]``
        (broadcast against ``x``)."""
        heading = x[..., 2]
        vb = torch.cat([_rotate(heading, x[..., 3:5], inverse=True), x[..., 5:6]], dim=-1)
        return self.acceleration(heading, vb, u.expand(*x.shape[:-1], u.shape[-1]))

    def sample(
        self, x: torch.Tensor, u: torch.Tensor, dt: float, generator: torch.Generator | None
    ) -> torch.Tensor:
        mean, std = self.body_acceleration(x, u)
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return self.integrate(x, mean + std * noise, dt)

    @staticmethod
    def integrate(x: torch.Tensor, a: torch.Tensor, dt: float) -> torch.Tensor:
        """``[..., 6]`` the explicit-Euler step of ``x [..., 6]`` with body-frame accelerations
        ``a [..., 3]`` (m/s², rad/s²) over ``dt`` (s)."""
        heading = x[..., 2]
        return torch.cat(
            [
                x[..., 0:2] + dt * x[..., 3:5],
                (heading + dt * x[..., 5]).unsqueeze(-1),
                x[..., 3:5] + dt * _rotate(heading, a[..., :2]),
                x[..., 5:6] + dt * a[..., 2:3],
            ],
            dim=-1,
        )

    def log_prob(
        self, x: torch.Tensor, u: torch.Tensor, x_next: torch.Tensor, dt: float
    ) -> torch.Tensor:
        mean, std = self.body_acceleration(x, u)
        heading = x[..., 2]
        a_xy = _rotate(heading, (x_next[..., 3:5] - x[..., 3:5]) / dt, inverse=True)
        a = torch.cat([a_xy, (x_next[..., 5:6] - x[..., 5:6]) / dt], dim=-1)
        return normal_log_density(a, mean, std).sum(-1) - 3.0 * math.log(dt)


def normal_log_density(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log N(x | mean, std²)`` (broadcast; ``std > 0``)."""
    z = (x - mean) / std
    return -0.5 * z * z - torch.log(std) - 0.5 * math.log(2.0 * math.pi)


class ResidualNetwork(nn.Module):
    """The network of the steady paper's Fig. 2 on normalised features.

    ``mean = W_skip f + out(h + relu(W_res h)),  h = relu(W_in f)``, with ``out`` (and the skip)
    zero-initialised so that the model starts at zero acceleration; ``std = (softplus(W_σ f + b)
    + floor) · std_scale``, starting at ``initial_std`` everywhere. ``std_scale`` (``[outputs]``,
    ones) is a buffer, not trained: a calibration of the learned std after training
    (:meth:`dynid.estimators.steady.em.SteadyEM.calibrate_std`), saved with the state dict.

    Args:
        inputs, outputs: feature and output widths.
        hidden: width of the hidden and residual layers.
        std_floor: lower bound of the predicted std.
        initial_std: the std before training (large: the E step starts nearly uninformed).
    """

    def __init__(
        self,
        inputs: int,
        outputs: int,
        *,
        hidden: int = 64,
        std_floor: float = 1e-3,
        initial_std: float = 1.0,
    ) -> None:
        super().__init__()
        if hidden < 1 or std_floor <= 0 or initial_std <= std_floor:
            raise EstimatorError(
                f"network: need hidden ≥ 1 and 0 < std_floor < initial_std, got hidden={hidden}, "
                f"std_floor={std_floor}, initial_std={initial_std}"
            )
        self.skip = nn.Linear(inputs, outputs)
        self.hidden = nn.Linear(inputs, hidden)
        self.residual = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, outputs)
        self.sigma = nn.Linear(inputs, outputs)
        self.std_floor = float(std_floor)
        for layer in (self.skip, self.out, self.sigma):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        # softplus⁻¹(initial_std − floor)
        target = initial_std - std_floor
        nn.init.constant_(self.sigma.bias, target + math.log(-math.expm1(-target)))
        self.register_buffer("feature_mean", torch.zeros(inputs))
        self.register_buffer("feature_std", torch.ones(inputs))
        self.register_buffer("std_scale", torch.ones(outputs))

    def set_normalisation(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Features are used as ``(f − mean) / std`` (``[inputs]`` each; std > 0)."""
        self.feature_mean.copy_(mean)
        self.feature_std.copy_(std.clamp_min(1e-6))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = (features - self.feature_mean) / self.feature_std
        h = functional.relu(self.hidden(f))
        h = h + functional.relu(self.residual(h))
        mean = self.skip(f) + self.out(h)
        std = (functional.softplus(self.sigma(f)) + self.std_floor) * self.std_scale
        return mean, std


class NeuralPlanarKinodynamics(PlanarKinodynamics):
    """The steady paper's learned vehicle model: features ``(cos θ, sin θ, v_x^b, v_y^b, ω, u)``
    through :class:`ResidualNetwork` to the body-frame accelerations.

    Args:
        control_dim: ``nu``.
        hidden, std_floor, initial_std: of the network.
    """

    def __init__(
        self,
        control_dim: int,
        *,
        hidden: int = 64,
        std_floor: float = 1e-3,
        initial_std: float = 1.0,
    ) -> None:
        super().__init__()
        self.network = ResidualNetwork(
            5 + control_dim, 3, hidden=hidden, std_floor=std_floor, initial_std=initial_std
        )

    @staticmethod
    def features(
        heading: torch.Tensor, body_velocity: torch.Tensor, control: torch.Tensor
    ) -> torch.Tensor:
        """``[..., 5 + nu]`` network inputs."""
        trig = torch.stack([torch.cos(heading), torch.sin(heading)], dim=-1)
        return torch.cat([trig, body_velocity, control], dim=-1)

    def fit_normalisation(self, states: torch.Tensor, controls: torch.Tensor) -> None:
        """Normalise the features by their mean and std over ``states [..., T + 1, 6]`` (world
        frame) and ``controls [..., T, nu]``."""
        x = states[..., :-1, :].reshape(-1, 6)
        vb = torch.cat([_rotate(x[:, 2], x[:, 3:5], inverse=True), x[:, 5:6]], dim=-1)
        f = self.features(x[:, 2], vb, controls.reshape(-1, controls.shape[-1]).to(x))
        self.network.set_normalisation(f.mean(0).to(self.network.feature_mean), f.std(0))

    def acceleration(
        self, heading: torch.Tensor, body_velocity: torch.Tensor, control: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.network(self.features(heading, body_velocity, control))
