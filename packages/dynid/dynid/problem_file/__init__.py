"""Problem files: one YAML file describes an identification problem end to end.

``load_problem(path, bag=...)`` reads a problem file, checks every key and returns a
:class:`dynid.problem.Problem` plus the :class:`ProblemFile` (with the estimator defaults). Every
error is a :class:`ProblemFileError` whose one-line message names the file and the key.

Modules: :mod:`~dynid.problem_file.schema` (every key documented; a dataclass per section),
:mod:`~dynid.problem_file.parse` (the YAML read and checked once into those sections),
:mod:`~dynid.problem_file.model` (the robot with its attachments, checked against the
parameters), :mod:`~dynid.problem_file.build` (observation, control and simulation models),
:mod:`~dynid.problem_file.file` (:class:`ProblemFile`, :func:`read_problem_file`,
:func:`load_problem`), :mod:`~dynid.problem_file.scenarios` (the registered scenarios) and
:mod:`~dynid.problem_file.errors`. The data are read and preprocessed by
:mod:`dynid.data.pipeline`.
"""

from dynid.estimators.registry import EstimatorDefaults
from dynid.model.integrate import Unactuated
from dynid.model.observe import Observation
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.file import ProblemFile, load_problem, read_problem_file
from dynid.problem_file.parse import check_estimator
from dynid.problem_file.scenarios import (
    available_scenarios,
    check_scenario_settings,
    load_scenario,
    scalar_values,
)

__all__ = [
    "EstimatorDefaults",
    "Observation",
    "ProblemFile",
    "ProblemFileError",
    "Unactuated",
    "available_scenarios",
    "check_estimator",
    "check_scenario_settings",
    "load_problem",
    "load_scenario",
    "read_problem_file",
    "scalar_values",
]
