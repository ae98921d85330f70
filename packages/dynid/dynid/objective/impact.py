"""The planar impact simulation as a backend of the objective, and the dice-drop problem.

:class:`PlanarImpactSimulation` is a :class:`~dynid.objective.simulation.Simulator`: it rolls
the planar square (:mod:`dynid.model.planar_impact`) from each trajectory's first recorded
state with the friction and restitution of every particle (``"dice/friction"``,
``"dice/restitution"``), optionally through a residual contact model, and observes
``(x, z, θ)``. :func:`dice_problem` builds the :class:`~dynid.problem.Problem` of the planar dice
drops around it, so the estimators score ``(μ, ε)`` through ``problem.objective`` like any other
parameters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import pinocchio as pin
import torch

from dynid.data.planar_dice import JOINTS, RATE_HZ
from dynid.data.trajectory import Dataset
from dynid.errors import EstimatorError
from dynid.model.integrate import Unactuated
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.planar_impact import ContactModel, PlanarImpactSimulator, PlanarSquare
from dynid.model.robot import RobotModel, load_robot
from dynid.problem import LikelihoodSettings, Problem

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory

__all__ = [
    "FRICTION",
    "RESTITUTION",
    "PlanarImpactSimulation",
    "dice_problem",
    "dice_robot",
]

FRICTION = "dice/friction"
"""Name of the Coulomb friction coefficient μ (dimensionless)."""

RESTITUTION = "dice/restitution"
"""Name of the restitution coefficient ε (dimensionless)."""


@dataclass(frozen=True)
class PlanarImpactSimulation:
    """Single-shooting rollouts of the planar square (the ``planar_impact`` simulation model).

    The spec must hold :data:`FRICTION` and :data:`RESTITUTION` and nothing else (the body's
    mass and size are fixed, as in the paper). The first recorded sample ``(q, q̇)`` of the
    trajectory is the initial state.

    Attributes:
        simulator: the time stepper (square, step, contact sweeps).
        contact: a residual contact model applied at every contact event; ``None``: the
            analytical model alone.
    """

    simulator: PlanarImpactSimulator = field(default_factory=PlanarImpactSimulator)
    contact: ContactModel | None = None
    names: ClassVar[tuple[str, str]] = (FRICTION, RESTITUTION)
    name: ClassVar[str] = "planar_impact"
    rigid: ClassVar[bool] = False

    @classmethod
    def for_robot(
        cls, robot: RobotModel, dt: float, contact: ContactModel | None = None
    ) -> PlanarImpactSimulation:
        """The simulation of a planar square robot with joints ``x, z, theta`` (as
        ``planar_dice.urdf``), stepped at ``dt`` (s).

        The square's mass is the robot's mass along ``x`` and its side follows from the inertia
        about the ``theta`` axis, ``I = m a² / 6``, both read from the joint-space inertia
        matrix at the neutral configuration.

        Raises:
            ModelError: the robot lacks one of the joints ``x, z, theta``.
            ValueError: ``dt`` is not positive, or the square has no mass or no inertia.
        """
        x, _, theta = (robot.joint_index(name) for name in JOINTS)
        inertia = pin.crba(robot.model, robot.model.createData(), pin.neutral(robot.model))
        mass, rotational = float(inertia[x, x]), float(inertia[theta, theta])
        if not mass > 0:
            raise ValueError(f"robot {robot.name!r}: the square has no mass along x")
        side = math.sqrt(6.0 * rotational / mass)
        return cls(PlanarImpactSimulator(PlanarSquare(side=side, mass=mass), dt=dt), contact)

    def coefficients(self, problem: Problem, theta: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(μ [N], ε [N])`` of ``theta [N, M]``.

        Raises:
            EstimatorError: the spec lacks one of :attr:`names` or has other parameters.
        """
        names = problem.spec.names
        if sorted(names) != sorted(self.names):
            raise EstimatorError(
                f"planar impact problem {problem.name!r}: the parameters must be exactly "
                f"{list(self.names)}, got {names}"
            )
        return theta[:, names.index(FRICTION)], theta[:, names.index(RESTITUTION)]

    def __call__(self, problem: Problem, theta: torch.Tensor, traj: Trajectory) -> torch.Tensor:
        """``[N, T + 1, 3]`` simulated ``(x, z, θ)`` of ``traj`` for ``theta [N, M]``."""
        return self.rollout(problem, theta, [traj])[:, 0, :, :3]

    def simulate_dataset(self, problem: Problem, theta: torch.Tensor) -> torch.Tensor:
        """``[N, K, T + 1, 3]`` simulated ``(x, z, θ)`` of all ``K`` trajectories of ``problem``
        (equal lengths), in one batched rollout."""
        return self.rollout(problem, theta, list(problem.dataset))[..., :3]

    def rollout(
        self, problem: Problem, theta: torch.Tensor, trajectories: Sequence[Trajectory]
    ) -> torch.Tensor:
        """``[N, K, T + 1, 6]`` full states of ``trajectories`` (equal lengths ``T + 1``)."""
        lengths = {traj.num_samples for traj in trajectories}
        if len(lengths) != 1:
            raise EstimatorError(f"trajectories must have equal length, got {sorted(lengths)}")
        mu, eps = self.coefficients(problem, theta.to(dtype=problem.dtype))
        starts = torch.stack([torch.cat(problem.initial_state(tr)) for tr in trajectories])
        n, k = theta.shape[0], len(trajectories)
        state0 = starts[None].expand(n, k, 6)
        return self.simulator.rollout(
            state0, lengths.pop() - 1, mu[:, None], eps[:, None], self.contact
        )


def dice_robot() -> RobotModel:
    """The planar dice (``dynid/model/urdf/planar_dice.urdf``): joints ``x, z, theta``."""
    return load_robot("planar_dice")


def dice_problem(
    trajectories: Sequence[Trajectory],
    *,
    position_std: float = 0.01,
    friction: tuple[float, float] = (0.0, 1.0),
    restitution: tuple[float, float] = (0.0, 1.0),
    contact: ContactModel | None = None,
    name: str = "planar_dice",
) -> Problem:
    """The identification problem of ``(μ, ε)`` on planar dice drops (paper V-A).

    Observations are ``(x, z, θ)``; their standard deviations are ``position_std`` (m) for
    ``x, z`` and ``position_std / r_g`` (rad) for ``θ``, so the whitened residuals measure the
    configuration error ``(x, z, r_g θ)`` of the paper (``r_g`` the radius of gyration).

    Args:
        trajectories: drops with joints ``x, z, theta`` at 250 Hz
            (:func:`dynid.data.planar_dice.load_dice_trajectories`).
        position_std: observation noise (m).
        friction, restitution: uniform prior bounds of μ and ε.
        contact: residual contact model of the simulation (``None``: analytical).
        name: problem name.

    Raises:
        ProblemError: a trajectory lacks a joint or is not at 250 Hz.
    """
    robot = dice_robot()
    simulation = PlanarImpactSimulation.for_robot(robot, 1.0 / RATE_HZ, contact)
    observation = JointObservation(robot, list(JOINTS))
    spec = ParameterSpec(
        [
            Parameter(FRICTION, *friction, unit="", nominal=0.11),
            Parameter(RESTITUTION, *restitution, unit="", nominal=0.48),
        ]
    )
    std = position_std
    return Problem(
        robot=robot,
        spec=spec,
        dataset=Dataset(list(trajectories)),
        dt=1.0 / RATE_HZ,
        control=Unactuated(),
        control_names=[],
        observe=observation,
        obs_names=observation.names,
        likelihood=LikelihoodSettings(
            kind="shooting",
            shooting="single",
            obs_std=(std, std, std / simulation.simulator.body.radius_of_gyration),
        ),
        name=name,
        simulator=simulation,
    )
