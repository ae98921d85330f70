"""The objective of an identification problem: simulation, residuals, likelihoods, transitions.

``problem.objective`` (:class:`Objective`) is the one API every estimator and benchmark scores
parameters through; the likelihood kinds (:mod:`~dynid.objective.shooting`,
:mod:`~dynid.objective.torque`) and the simulators (:mod:`~dynid.objective.simulation`) are its
backends, chosen in the problem file (``likelihood.kind``, ``simulation.model``).
"""

from dynid.objective.likelihood import (
    Evaluation,
    Likelihood,
    PosteriorTarget,
    Target,
    defect_log_density,
)
from dynid.objective.objective import Objective
from dynid.objective.shooting import ShootingLikelihood
from dynid.objective.simulation import (
    RigidSimulation,
    Simulator,
    SingleJointDynamics,
    SoftBlockSimulation,
    simulate_dataset,
)
from dynid.objective.torque import InverseDynamicsLikelihood, inverse_dynamics_residuals

__all__ = [
    "Evaluation",
    "InverseDynamicsLikelihood",
    "Likelihood",
    "Objective",
    "PosteriorTarget",
    "RigidSimulation",
    "ShootingLikelihood",
    "Simulator",
    "SingleJointDynamics",
    "SoftBlockSimulation",
    "Target",
    "defect_log_density",
    "inverse_dynamics_residuals",
    "simulate_dataset",
]
