"""STEADY: simultaneous state estimation and dynamics learning (Wei et al., steady paper).

An expectation-maximisation loop whose E step samples state trajectories with a particle filter
(:mod:`~dynid.estimators.steady.filter`) and whose M step takes one Adam step on the
trajectories' log-likelihood under the kinodynamic model
(:mod:`~dynid.model.kinodynamics`, :mod:`~dynid.estimators.steady.em`), with the
sensors of :mod:`~dynid.estimators.steady.observation`. The estimator on a ``Problem`` (hybrid
physics plus residual) is :class:`dynid.estimators.steady.estimator.STEADY`.
"""

from dynid.estimators.steady.em import (
    EMSettings,
    Sequences,
    SteadyEM,
    fit_supervised,
    observed_log_likelihood,
    thin,
)
from dynid.estimators.steady.filter import (
    FilterResult,
    particle_filter,
    systematic_resample,
    trace_trajectories,
)
from dynid.estimators.steady.hybrid import HybridKinodynamics
from dynid.estimators.steady.observation import (
    BearingObservation,
    EncoderObservation,
    ObservationModel,
    PoseObservation,
    wrap_angle,
)
from dynid.model.kinodynamics import (
    Kinodynamics,
    NeuralPlanarKinodynamics,
    PlanarKinodynamics,
    ResidualNetwork,
)

__all__ = [
    "BearingObservation",
    "EMSettings",
    "EncoderObservation",
    "FilterResult",
    "HybridKinodynamics",
    "Kinodynamics",
    "NeuralPlanarKinodynamics",
    "ObservationModel",
    "PlanarKinodynamics",
    "PoseObservation",
    "ResidualNetwork",
    "Sequences",
    "SteadyEM",
    "fit_supervised",
    "observed_log_likelihood",
    "particle_filter",
    "systematic_resample",
    "thin",
    "trace_trajectories",
    "wrap_angle",
]
