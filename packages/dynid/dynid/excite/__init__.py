"""Excitation design: the motion that identifies what a problem frees, within the robot's limits,
with the Cramér–Rao σ it predicts (``dynid excite``)."""

from dynid.excite.design import (
    CRITERIA,
    DesignSettings,
    Excitation,
    ExcitationPlanner,
    design_excitation,
)
from dynid.excite.errors import ExcitationError
from dynid.excite.fourier import FourierMotion
from dynid.excite.information import Criteria, InformationModel, criteria
from dynid.excite.limits import PANDA_LIMITS, JointLimits
from dynid.excite.noise import SensorNoise, propagated_covariance

__all__ = [
    "CRITERIA",
    "PANDA_LIMITS",
    "Criteria",
    "DesignSettings",
    "Excitation",
    "ExcitationError",
    "ExcitationPlanner",
    "FourierMotion",
    "InformationModel",
    "JointLimits",
    "SensorNoise",
    "criteria",
    "design_excitation",
    "propagated_covariance",
]
