"""The hybrid robot model of the STEADY estimator: a problem's physics plus a learned residual.

:class:`HybridKinodynamics` is a :class:`~dynid.model.kinodynamics.Kinodynamics` whose physics
step is the problem's one-step transition (``problem.objective.transition``) with free
parameters θ, and whose acceleration residual is a
:class:`~dynid.model.kinodynamics.ResidualNetwork` of the features :data:`RESIDUAL_INPUTS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from dynid.errors import EstimatorError
from dynid.model.kinodynamics import Kinodynamics, ResidualNetwork, normal_log_density

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["RESIDUAL_INPUTS", "HybridKinodynamics", "check_residual_inputs"]

#: The features a :class:`HybridKinodynamics` residual may see, in their order.
RESIDUAL_INPUTS = ("position", "velocity", "control")


def check_residual_inputs(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as a checked tuple in the order of :data:`RESIDUAL_INPUTS`.

    Raises:
        EstimatorError: ``names`` is empty, repeats a name or names something else.
    """
    names = tuple(names)
    if not names or len(set(names)) != len(names) or not set(names) <= set(RESIDUAL_INPUTS):
        raise EstimatorError(
            f"residual_inputs: need a non-empty subset of {list(RESIDUAL_INPUTS)} without "
            f"repeats, got {list(names)}"
        )
    return tuple(i for i in RESIDUAL_INPUTS if i in names)


class HybridKinodynamics(Kinodynamics):
    """A robot's physics with free parameters θ plus a learned acceleration residual.

    State ``(q, v)`` (``[..., 2 nv]``, the problem's joint order). The physics step is
    ``problem.objective.transition(θ, x, u)`` (semi-implicit Euler: ``v_p' = v + dt q̈(θ)``,
    ``q_p' = q + dt v_p'``); the residual ``r ~ N(μ_φ(x, u), diag σ_φ²)`` (rad/s² or m/s²) is
    added to the acceleration and integrated the same way::

        v' = v_p' + dt r,    q' = q_p' + dt² r.

    The residual's features are ``inputs``, a subset of :data:`RESIDUAL_INPUTS` in that
    order: ``"position"`` (q), ``"velocity"`` (v) and ``"control"`` (u). All three (the paper's
    network sees the whole state and control) let the residual represent any acceleration error,
    including the part the free θ should explain — a payload's gravity torque depends on q, an
    inertia error scales the response to u — so θ and residual are separated only by the
    network's regularisation. A residual of the velocity alone is a friction model: it cannot
    absorb a gravity or inertia error, which θ must then explain.

    θ lives inside the problem's bounds as ``lower + (upper − lower) σ(z)`` (unconstrained ``z``
    of ``problem.spec.coordinates``).

    Args:
        problem: the identification problem (its robot, free parameters, control model).
        theta0: ``[M]`` starting parameters (SI, inside the bounds).
        residual: learn the residual mean (``False``: only its std, i.e. physics plus learned
            process noise).
        inputs: the residual network's features (see above; non-empty, no repeats).
        hidden, std_floor, initial_std: of the residual network.

    Raises:
        EstimatorError: the problem's simulation is not the rigid model or uses substeps, or
            ``inputs`` is empty or names something else.
    """

    def __init__(
        self,
        problem: Problem,
        theta0: torch.Tensor,
        *,
        residual: bool = True,
        inputs: Sequence[str] = RESIDUAL_INPUTS,
        hidden: int = 64,
        std_floor: float = 1e-3,
        initial_std: float = 1.0,
    ) -> None:
        super().__init__()
        if problem.substeps != 1 or not problem.simulator.rigid:
            raise EstimatorError(
                f"problem {problem.name!r}: STEADY's hybrid model needs the rigid simulation "
                f"with simulation.substeps 1 (has {problem.simulator.name}, substeps "
                f"{problem.substeps})"
            )
        self.problem = problem
        self.nv = problem.robot.nv
        self.state_dim = 2 * self.nv
        self.coordinates = problem.spec.coordinates
        self.z = nn.Parameter(self.coordinates.to_unconstrained(theta0.to(problem.dtype), 1e-4))
        self.learn_mean = bool(residual)
        self.residual_inputs = check_residual_inputs(inputs)
        widths = [self.nv, self.nv, problem.objective.control_width]  # RESIDUAL_INPUTS' order
        blocks = dict(zip(RESIDUAL_INPUTS, torch.arange(sum(widths)).split(widths), strict=True))
        columns = torch.cat([blocks[name] for name in self.residual_inputs])
        self.register_buffer("feature_columns", columns, persistent=False)
        self.network = ResidualNetwork(
            len(columns),
            self.nv,
            hidden=hidden,
            std_floor=std_floor,
            initial_std=initial_std,
        ).to(problem.dtype)
        if not self.learn_mean:
            for layer in (self.network.skip, self.network.hidden, self.network.residual):
                layer.requires_grad_(False)
            self.network.out.requires_grad_(False)

    def set_normalisation(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Scales of the full feature vector ``(q, v, u)`` (``[2 nv + nu]`` each; std > 0); the
        network keeps those of its ``inputs``."""
        self.network.set_normalisation(mean[self.feature_columns], std[self.feature_columns])

    @property
    def theta(self) -> torch.Tensor:
        """``[M]`` the physical parameters (SI)."""
        return self.coordinates.from_unconstrained(self.z)

    def _parts(
        self, x: torch.Tensor, u: torch.Tensor, dt: float, theta: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        u = u.expand(*x.shape[:-1], u.shape[-1])
        theta = self.theta if theta is None else theta
        physics, _ = self.problem.objective.transition(
            theta.unsqueeze(0), x.unsqueeze(0), u.unsqueeze(0), dt
        )
        features = torch.cat([x, u], dim=-1).index_select(-1, self.feature_columns)
        mean, std = self.network(features)
        if not self.learn_mean:
            mean = torch.zeros_like(mean)
        return physics[0], mean, std

    def sample(
        self, x: torch.Tensor, u: torch.Tensor, dt: float, generator: torch.Generator | None
    ) -> torch.Tensor:
        physics, mean, std = self._parts(x, u, dt)
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        r = mean + std * noise
        nv = self.nv
        return torch.cat([physics[..., :nv] + dt * dt * r, physics[..., nv:] + dt * r], dim=-1)

    def log_prob(
        self,
        x: torch.Tensor,
        u: torch.Tensor,
        x_next: torch.Tensor,
        dt: float,
        theta: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """As :meth:`Kinodynamics.log_prob`; ``theta [M]`` (SI) in place of the model's own."""
        physics, mean, std = self._parts(x, u, dt, theta)
        r = (x_next[..., self.nv :] - physics[..., self.nv :]) / dt
        return normal_log_density(r, mean, std).sum(-1) - self.nv * math.log(dt)
