"""A posterior in physical quantities: per body mass, centre of mass and inertia, per joint its
coefficients, the nominal model beside the identified one.

:func:`physical_rows` reads a :class:`~dynid.posterior.Posterior` against the
:class:`~dynid.model.params.ParameterSpec` of the problem it was fitted on:

- a parameter that is a physical quantity already (``payload/mass``, ``<link>/com_x``,
  ``<joint>/damping``, ``gravity/z``, ...) gives one row: its nominal value (the spec's
  ``nominal_theta``: the URDF or the problem file), the posterior mean and standard deviation, its
  prior standard deviation;
- a body freed whole through ``<link>/log_cholesky_0..9`` gives ten rows: ``mass`` (kg),
  ``com_x|y|z`` (m) and ``ixx|iyy|izz|ixy|ixz|iyz`` (kg·m², about the centre of mass), in the
  body's joint frame (the link frame of a URDF; the moving body with every link fixed to it).
  Their mean and σ are those of the quantity over the particles (weighted), or, for a posterior
  with a covariance of its own (least squares, LM), the quantity at the mean with the covariance
  propagated through its Jacobian; the prior σ is the coordinates' prior σ propagated through
  the Jacobian at the nominal values.

Rows come grouped by owner, owners in the order of their first parameter in the spec and each
owner's rows in spec order; a log-Cholesky body's rows stand where its first coordinate is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.autograd.functional import jacobian

from dynid.model.spatial import body_from_dynamic_params, dynamic_params_from_log_cholesky
from dynid.posterior import PosteriorError

if TYPE_CHECKING:
    from dynid.model.params import ParameterSpec
    from dynid.model.robot import RobotModel
    from dynid.posterior import Posterior

__all__ = ["BODY_QUANTITIES", "PhysicalRow", "physical_rows"]

BODY_QUANTITIES: tuple[tuple[str, str], ...] = (
    ("mass", "kg"),
    ("com_x", "m"),
    ("com_y", "m"),
    ("com_z", "m"),
    ("ixx", "kg*m^2"),
    ("iyy", "kg*m^2"),
    ("izz", "kg*m^2"),
    ("ixy", "kg*m^2"),
    ("ixz", "kg*m^2"),
    ("iyz", "kg*m^2"),
)
"""The rows of a log-Cholesky body: ``(quantity, unit)``."""

_LOG_CHOLESKY = "log_cholesky_"


@dataclass(frozen=True)
class PhysicalRow:
    """One physical quantity, nominal beside identified (SI units).

    Attributes:
        owner: the link, joint or attachment prefix (``panda_link3``, ``payload``, ``gravity``).
        quantity: ``mass``, ``com_x``, ``ixx``, ``damping``, ...
        unit: its unit.
        nominal: the nominal model's value.
        value: the posterior mean.
        std: the posterior standard deviation.
        prior_std: the prior's standard deviation (as wide as this: the data did not determine it).
        identified: ``False`` when the estimator reports the parameter as not excited by the data
            (``posterior.meta["unidentified"]``; parameters given directly only).
    """

    owner: str
    quantity: str
    unit: str
    nominal: float
    value: float
    std: float
    prior_std: float
    identified: bool = True


def _body_quantities(theta: torch.Tensor) -> torch.Tensor:
    """``[..., 10]`` log-Cholesky coordinates → ``[..., 10]`` in :data:`BODY_QUANTITIES` order."""
    mass, com, inertia = body_from_dynamic_params(dynamic_params_from_log_cholesky(theta))
    six = torch.stack(
        (
            inertia[..., 0, 0],
            inertia[..., 1, 1],
            inertia[..., 2, 2],
            inertia[..., 0, 1],
            inertia[..., 0, 2],
            inertia[..., 1, 2],
        ),
        -1,
    )
    return torch.cat((mass.unsqueeze(-1), com, six), -1)


def _log_cholesky_bodies(spec: ParameterSpec) -> dict[str, list[int]]:
    """Link → spec columns of ``log_cholesky_0..9`` for the links freed whole that way."""
    cols: dict[str, dict[int, int]] = {}
    for j, p in enumerate(spec.parameters):
        if p.field.startswith(_LOG_CHOLESKY):
            cols.setdefault(p.prefix, {})[int(p.field[len(_LOG_CHOLESKY) :])] = j
    return {link: [c[k] for k in range(10)] for link, c in cols.items() if len(c) == 10}


def _propagated_std(theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """σ of :func:`_body_quantities` at ``theta [10]`` for a covariance ``cov [10, 10]``."""
    J = jacobian(_body_quantities, torch.as_tensor(theta, dtype=torch.float64)).numpy()
    return np.sqrt(np.clip(np.diag(J @ cov @ J.T), 0.0, None))


def physical_rows(
    posterior: Posterior, spec: ParameterSpec, robot: RobotModel
) -> list[PhysicalRow]:
    """The physical quantities of ``posterior`` (module docstring), nominal beside identified.

    Args:
        posterior: a posterior over (at least) the names of ``spec``.
        spec: the parameters of the problem it was fitted on.
        robot: the problem's robot (its nominal values).

    Raises:
        PosteriorError: a parameter of ``spec`` is not in the posterior (named).
    """
    missing = [n for n in spec.names if n not in posterior.names]
    if missing:
        raise PosteriorError(f"parameters of the problem not in the posterior: {missing}")
    cols = [posterior.names.index(n) for n in spec.names]
    mean, std = posterior.mean()[cols], posterior.std()[cols]
    nominal = spec.nominal_theta(robot).numpy()
    prior_std = np.array([p.prior_std for p in spec.parameters])
    unidentified = set(posterior.meta.get("unidentified", ()))
    bodies = _log_cholesky_bodies(spec)
    first = {c[0]: link for link, c in bodies.items()}
    in_bodies = {j for c in bodies.values() for j in c}
    w = posterior.weights
    alive = w > 0
    rows: list[PhysicalRow] = []
    for j, p in enumerate(spec.parameters):
        if j in first:
            link = first[j]
            rows += _body_rows(
                link,
                posterior,
                [cols[k] for k in bodies[link]],
                nominal[bodies[link]],
                prior_std[bodies[link]],
                alive,
                w,
            )
        elif j not in in_bodies:
            rows.append(
                PhysicalRow(
                    p.prefix,
                    p.field,
                    p.unit,
                    float(nominal[j]),
                    float(mean[j]),
                    float(std[j]),
                    float(prior_std[j]),
                    identified=p.name not in unidentified,
                )
            )
    first_of: dict[str, int] = {}
    for k, row in enumerate(rows):
        first_of.setdefault(row.owner, k)
    return sorted(rows, key=lambda row: first_of[row.owner])


def _body_rows(
    link: str,
    posterior: Posterior,
    cols: list[int],
    nominal: np.ndarray,
    prior_std: np.ndarray,
    alive: np.ndarray,
    w: np.ndarray,
) -> list[PhysicalRow]:
    """The :data:`BODY_QUANTITIES` rows of one log-Cholesky body (posterior columns ``cols``)."""
    with torch.no_grad():
        at_nominal = _body_quantities(torch.as_tensor(nominal, dtype=torch.float64)).numpy()
    if posterior.covariance is not None or alive.sum() < 2:
        theta = posterior.mean()[cols]
        with torch.no_grad():
            value = _body_quantities(torch.as_tensor(theta, dtype=torch.float64)).numpy()
        std = _propagated_std(theta, posterior.cov()[np.ix_(cols, cols)])
    else:
        with torch.no_grad():
            each = _body_quantities(
                torch.as_tensor(posterior.particles[np.ix_(alive, cols)], dtype=torch.float64)
            ).numpy()
        wa = w[alive] / w[alive].sum()
        value = wa @ each
        spread = wa @ (each - value) ** 2 / (1.0 - float(wa @ wa))
        std = np.sqrt(np.clip(spread, 0.0, None))
    prior = _propagated_std(nominal, np.diag(prior_std**2))
    return [
        PhysicalRow(
            link, q, unit, float(at_nominal[k]), float(value[k]), float(std[k]), float(prior[k])
        )
        for k, (q, unit) in enumerate(BODY_QUANTITIES)
    ]
