"""Classical payload identification on the simulated Panda: exact without noise, within a few
per mille with the default sensor noise."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.estimators.baselines.regressor_ls import fit_payload
from dynid.model.robot import load_robot
from dynid.sim import panda_payload

NOISELESS = {"joint_position_noise": 0.0, "joint_velocity_noise": 0.0, "torque_noise": 0.0}


pytestmark = pytest.mark.usefixtures("one_thread")


def _truth(truth: dict) -> tuple[float, np.ndarray]:
    params = truth["parameters"]
    return params["payload/mass"], np.array([params[f"payload/com_{a}"] for a in "xyz"])


@pytest.mark.parametrize(
    ("settings", "mass_rtol", "com_atol"),
    [(NOISELESS, 1e-3, 1e-4), ({}, 0.02, 2e-3)],
    ids=["noiseless", "default_noise"],
)
def test_fit_payload_on_the_simulated_panda(settings, mass_rtol, com_atol) -> None:
    data, truth = panda_payload.simulate(0, duration=6.0, **settings)
    mass, com = _truth(truth)
    fit = fit_payload(load_robot("panda"), data[0], panda_payload.PAYLOAD_LINK)
    assert fit.mass == pytest.approx(mass, rel=mass_rtol)
    np.testing.assert_allclose(fit.com, com, atol=com_atol)
    assert fit.residual_rmse.shape == (7,)
    assert fit.rmse < (0.01 if settings is NOISELESS else 0.1)
    assert fit.frame == "panda_link8"


def test_fit_payload_needs_efforts_of_every_joint() -> None:
    data, _ = panda_payload.simulate(0, duration=1.0, **NOISELESS)
    traj = data[0]
    with pytest.raises(ValueError, match="efforts absent"):
        fit_payload(load_robot("panda"), traj.replace(effort=None), "panda_link8")
    with pytest.raises(ValueError, match=r"fewer than (2|10)"):
        fit_payload(load_robot("panda"), traj, "panda_link8", trim_s=0.5)
