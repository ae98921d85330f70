"""A posterior in physical quantities: log-Cholesky bodies as mass, centre of mass and inertia,
nominal beside identified, σ from the particles or propagated from a covariance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.physical import BODY_QUANTITIES, physical_rows
from dynid.posterior import Posterior, PosteriorError

TOL = 1e-9


@pytest.fixture(scope="module")
def robot():
    return load_robot("double_pendulum")


@pytest.fixture(scope="module")
def spec() -> ParameterSpec:
    """``link2`` freed whole (log-Cholesky, about its nominal values) and ``joint1`` damping."""
    body = [Parameter(f"link2/log_cholesky_{k}", -20.0, 20.0) for k in range(10)]
    return ParameterSpec([Parameter("joint1/damping", 0.0, 1.0), *body])


def _rows(posterior: Posterior, spec: ParameterSpec, robot) -> dict[tuple[str, str], object]:
    return {(r.owner, r.quantity): r for r in physical_rows(posterior, spec, robot)}


def test_a_log_cholesky_body_reads_as_the_urdf_body_at_its_nominal_values(spec, robot) -> None:
    theta = spec.nominal_theta(robot).numpy()
    rows = _rows(Posterior(particles=theta[None], names=spec.names, units=spec.units), spec, robot)
    assert [q for (owner, q) in rows if owner == "link2"] == [q for q, _ in BODY_QUANTITIES]
    # double_pendulum's link2: 1 kg at z = -2 m, 1e-4 kg·m² about its centre of mass
    expected = {"mass": 1.0, "com_x": 0.0, "com_y": 0.0, "com_z": -2.0, "ixx": 1e-4,
                "iyy": 1e-4, "izz": 1e-4, "ixy": 0.0, "ixz": 0.0, "iyz": 0.0}  # fmt: skip
    for quantity, value in expected.items():
        row = rows[("link2", quantity)]
        assert row.nominal == pytest.approx(value, rel=TOL, abs=TOL), quantity
        assert row.value == pytest.approx(value, rel=TOL, abs=TOL), quantity


def test_a_covariance_is_propagated_through_the_body_quantities(spec, robot) -> None:
    """m = e^{2α}: σ_m = 2 m σ_α, the inertia about the centre of mass scales with m, and the
    centre of mass does not depend on α."""
    theta = spec.nominal_theta(robot).numpy()
    sigma_alpha = 0.01
    cov = np.zeros((spec.dim, spec.dim))
    cov[1, 1] = sigma_alpha**2  # link2/log_cholesky_0 = α
    post = Posterior(particles=theta[None], names=spec.names, units=spec.units, covariance=cov)
    rows = _rows(post, spec, robot)
    assert rows[("link2", "mass")].std == pytest.approx(2.0 * sigma_alpha, rel=TOL)
    assert rows[("link2", "ixx")].std == pytest.approx(2.0 * 1e-4 * sigma_alpha, rel=1e-6)
    assert rows[("link2", "com_z")].std == pytest.approx(0.0, abs=TOL)


def test_particles_give_the_weighted_mean_and_spread_of_the_quantity(spec, robot) -> None:
    rng = np.random.default_rng(0)
    theta = np.tile(spec.nominal_theta(robot).numpy(), (50, 1))
    theta[:, 1] += rng.normal(0.0, 0.2, 50)
    w = rng.uniform(0.5, 1.5, 50)
    w /= w.sum()
    post = Posterior(particles=theta, names=spec.names, units=spec.units, log_weights=np.log(w))
    mass = np.exp(2.0 * theta[:, 1])
    mean = float(w @ mass)
    spread = math.sqrt(float(w @ (mass - mean) ** 2) / (1.0 - float(w @ w)))
    row = _rows(post, spec, robot)[("link2", "mass")]
    assert row.value == pytest.approx(mean, rel=TOL)
    assert row.std == pytest.approx(spread, rel=TOL)


def test_a_parameter_given_directly_is_one_row_with_its_prior_and_excitation(spec, robot) -> None:
    theta = spec.nominal_theta(robot).numpy()
    theta[0] = 0.25
    post = Posterior(
        particles=theta[None],
        names=spec.names,
        units=spec.units,
        meta={"unidentified": ["joint1/damping"]},
    )
    row = _rows(post, spec, robot)[("joint1", "damping")]
    assert row.unit == "N*m*s/rad"
    assert row.nominal == 0.0  # the URDF has no <dynamics>
    assert row.value == pytest.approx(0.25, rel=TOL)
    assert row.prior_std == pytest.approx(1.0 / math.sqrt(12.0), rel=TOL)
    assert row.identified is False


def test_a_parameter_missing_from_the_posterior_is_named(spec, robot) -> None:
    post = Posterior(particles=np.zeros((1, 1)), names=["joint1/damping"], units=["N*m*s/rad"])
    with pytest.raises(PosteriorError, match="link2/log_cholesky_0"):
        physical_rows(post, spec, robot)


def test_rows_come_grouped_by_owner_in_the_order_of_the_spec(robot) -> None:
    names = ["joint1/damping", "joint2/damping", "joint1/coulomb", "joint2/coulomb"]
    spec = ParameterSpec([Parameter(name, 0.0, 1.0) for name in names])
    post = Posterior(particles=np.full((1, 4), 0.5), names=spec.names, units=spec.units)
    rows = physical_rows(post, spec, robot)
    assert [(r.owner, r.quantity) for r in rows] == [
        ("joint1", "damping"),
        ("joint1", "coulomb"),
        ("joint2", "damping"),
        ("joint2", "coulomb"),
    ]
