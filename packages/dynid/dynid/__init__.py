"""dynid: identify the physical parameters of robots and the objects they handle.

The main entry points, importable from the package root (imported on first use, so
``import dynid`` stays light)::

    from dynid import load_robot, ParameterSpec, Problem, resolve_estimator, Posterior, read_bag
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "load_robot": "dynid.model.robot",
    "RobotModel": "dynid.model.robot",
    "ParameterSpec": "dynid.model.params",
    "TorchDynamics": "dynid.model.dynamics",
    "PinocchioDynamics": "dynid.model.pinocchio_backend",
    "Trajectory": "dynid.data.trajectory",
    "Dataset": "dynid.data.trajectory",
    "read_bag": "dynid.data.bag",
    "write_bag": "dynid.data.bag_write",
    "Problem": "dynid.problem",
    "LikelihoodSettings": "dynid.problem",
    "Posterior": "dynid.posterior",
    "resolve_estimator": "dynid.estimators.registry",
    "make_estimator": "dynid.estimators.registry",
    "available_estimators": "dynid.estimators.registry",
    "read_problem_file": "dynid.problem_file",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dynid' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
