"""ParameterSpec: YAML, priors, normalisation, log-Cholesky and the map onto Pinocchio's model."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import torch

from dynid.model.errors import ParameterSpecError, StateError
from dynid.model.params import Parameter, ParameterSpec, nominal_parameters
from dynid.model.robot import load_robot
from dynid.model.spatial import dynamic_params_from_log_cholesky, log_cholesky_from_dynamic_params

OMX_YAML = """
parameters:
  - {name: link3/mass, lower: 0.05, upper: 0.3}
  - {name: link3/com_x, lower: -0.05, upper: 0.05}
  - {name: link3/com_z, lower: 0.0, upper: 0.2}
  - {name: link3/ixx, lower: 1.0e-5, upper: 1.0e-3}
  - {name: link3/ixz, lower: -1.0e-4, upper: 1.0e-4}
  - {name: joint3/offset_z, lower: 0.1, upper: 0.2}
  - {name: joint2/damping, lower: 0.0, upper: 0.5, prior: gaussian, mean: 0.1, std: 0.05}
  - {name: joint2/coulomb, lower: 0.0, upper: 0.2}
  - {name: joint4/armature, lower: 0.0, upper: 0.01}
  - {name: gravity/z, lower: -10.0, upper: -9.0}
"""


def test_log_cholesky_matches_pinocchio_and_round_trips() -> None:
    gen = torch.Generator().manual_seed(0)
    theta = torch.randn(50, 10, generator=gen, dtype=torch.float64)
    pi = dynamic_params_from_log_cholesky(theta)
    for k in range(50):
        ref = pin.Inertia.FromLogCholeskyParameters(pin.LogCholeskyParameters(theta[k].numpy()))
        np.testing.assert_allclose(pi[k].numpy(), ref.toDynamicParameters(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(log_cholesky_from_dynamic_params(pi), theta, rtol=1e-9, atol=1e-9)


def test_normalisation_is_invertible_and_maps_bounds_to_unit_box() -> None:
    spec = ParameterSpec.from_yaml(OMX_YAML)
    gen = torch.Generator().manual_seed(1)
    theta = spec.sample_prior(200, gen)
    u = spec.to_unit(theta)
    assert bool(((u >= 0) & (u <= 1)).all())
    torch.testing.assert_close(spec.from_unit(u), theta, rtol=0, atol=1e-15)
    torch.testing.assert_close(spec.to_unit(spec.lower), torch.zeros(spec.dim, dtype=torch.float64))
    torch.testing.assert_close(spec.to_unit(spec.upper), torch.ones(spec.dim, dtype=torch.float64))


def test_priors_sample_within_bounds_and_log_density_is_right() -> None:
    spec = ParameterSpec(
        [
            Parameter("link1/mass", 1.0, 3.0),
            Parameter("joint1/damping", 0.0, 1.0, prior="gaussian", mean=0.2, std=0.1),
        ]
    )
    samples = spec.sample_prior(20000, torch.Generator().manual_seed(2))
    assert bool(((samples >= spec.lower) & (samples <= spec.upper)).all())
    assert abs(float(samples[:, 0].mean()) - 2.0) < 0.02
    assert abs(float(samples[:, 1].mean()) - 0.2) < 0.01  # truncation at 0 shifts it slightly up
    inside = torch.tensor([2.0, 0.2], dtype=torch.float64)
    mass_part = -math.log(2.0)
    z_mass = 0.5 * (math.erf((1.0 - 0.2) / (0.1 * math.sqrt(2))) + 1) - 0.5 * (
        math.erf((0.0 - 0.2) / (0.1 * math.sqrt(2))) + 1
    )
    gauss_part = -math.log(0.1 * math.sqrt(2 * math.pi)) - math.log(z_mass)
    assert float(spec.log_prior(inside)) == pytest.approx(mass_part + gauss_part, rel=1e-12)
    outside = torch.tensor([[3.5, 0.2], [2.0, -0.1]], dtype=torch.float64)
    assert torch.isinf(spec.log_prior(outside)).all()
    clamped = spec.clamp(outside)
    torch.testing.assert_close(clamped, torch.tensor([[3.0, 0.2], [2.0, 0.0]], dtype=torch.float64))


def test_prior_std_is_the_gaussian_std_or_the_uniform_spread() -> None:
    uniform = Parameter("link1/mass", 1.0, 4.0)
    gaussian = Parameter("link1/mass", 0.0, 10.0, prior="gaussian", mean=2.0, std=0.3)
    assert uniform.prior_std == pytest.approx(3.0 / math.sqrt(12.0))
    draws = np.random.default_rng(0).uniform(1.0, 4.0, 200_000)
    assert uniform.prior_std == pytest.approx(draws.std(), rel=0.01)
    assert gaussian.prior_std == 0.3


def test_apply_changes_the_model_like_pinocchio(tmp_path: Path) -> None:
    robot = load_robot("open_manipulator_x")
    path = tmp_path / "spec.yaml"
    path.write_text(OMX_YAML)
    spec = ParameterSpec.from_yaml(path)
    theta = spec.sample_prior(3, torch.Generator().manual_seed(3))
    p = spec.apply(robot, theta)
    b, j3 = robot.body_index("link3"), robot.joint_index("joint3")
    nominal = robot.model.inertias[b + 1]
    for i in range(3):
        t = dict(zip(spec.names, theta[i].tolist(), strict=True))
        inertia_c = np.array(nominal.inertia)
        inertia_c[0, 0] = t["link3/ixx"]
        inertia_c[0, 2] = inertia_c[2, 0] = t["link3/ixz"]
        com = np.array(nominal.lever)
        com[0], com[2] = t["link3/com_x"], t["link3/com_z"]
        ref = pin.Inertia(t["link3/mass"], com, inertia_c).toDynamicParameters()
        np.testing.assert_allclose(p.inertia[i, b].numpy(), ref, rtol=1e-13, atol=1e-15)
        others = [k for k in range(robot.nv) if k != b]
        np.testing.assert_array_equal(p.inertia[i, others].numpy(), robot.nominal_inertia()[others])
        expect = robot.placement_translations[j3].copy()
        expect[2] = t["joint3/offset_z"]
        np.testing.assert_array_equal(p.joint_translation[i, j3].numpy(), expect)
        assert float(p.damping[i, 1]) == t["joint2/damping"]
        assert float(p.coulomb[i, 1]) == t["joint2/coulomb"]
        assert float(p.armature[i, 3]) == t["joint4/armature"]
        np.testing.assert_array_equal(p.gravity[i].numpy(), [0.0, 0.0, t["gravity/z"]])
    torch.testing.assert_close(
        spec.apply(robot, spec.nominal_theta(robot)).inertia[0],
        torch.as_tensor(robot.nominal_inertia()),
    )


def test_apply_is_differentiable() -> None:
    robot = load_robot("open_manipulator_x")
    spec = ParameterSpec.from_yaml(OMX_YAML)
    theta = spec.sample_prior(2, torch.Generator().manual_seed(4)).requires_grad_(True)
    p = spec.apply(robot, theta)
    total = p.inertia.sum() + p.joint_translation.sum() + p.damping.sum() + p.coulomb.sum()
    (total + p.armature.sum() + p.gravity.sum()).backward()
    assert theta.grad is not None
    assert bool((theta.grad != 0).all())


def test_log_cholesky_parameters_of_a_link() -> None:
    robot = load_robot("furuta")
    names = [f"pendulum/log_cholesky_{k}" for k in range(10)]
    spec = ParameterSpec([Parameter(n, -5.0, 5.0) for n in names])
    theta0 = spec.nominal_theta(robot)
    p = spec.apply(robot, theta0.unsqueeze(0))
    np.testing.assert_allclose(p.inertia[0, 1].numpy(), robot.nominal_inertia()[1], atol=1e-14)
    theta = theta0 + 0.3
    pi = spec.apply(robot, theta).inertia[0, 1].numpy()
    ref = pin.Inertia.FromLogCholeskyParameters(pin.LogCholeskyParameters(theta.numpy()))
    np.testing.assert_allclose(pi, ref.toDynamicParameters(), rtol=1e-12)


def test_link_length_scales_child_joint_and_com() -> None:
    robot = load_robot("double_pendulum")
    spec = ParameterSpec([Parameter("link1/length", 1.0, 3.0), Parameter("link2/length", 1, 3)])
    torch.testing.assert_close(
        spec.nominal_theta(robot), torch.tensor([1.5, 2.0], dtype=torch.float64)
    )
    p = spec.apply(robot, torch.tensor([[1.2, 2.5]], dtype=torch.float64))
    np.testing.assert_allclose(p.joint_translation[0, 1].numpy(), [0.0, 0.0, -1.2])
    np.testing.assert_allclose(p.inertia[0, 0, 1:4].numpy(), [0.0, 0.0, -1.2])  # m = 1 kg
    np.testing.assert_allclose(p.inertia[0, 1, 1:4].numpy(), [0.0, 0.0, -2.5])
    # rotational inertia about the centre of mass stays 1e-4 kg m^2
    assert float(p.inertia[0, 1, 4]) == pytest.approx(1e-4 + 2.5**2)


def test_gravity_tilt_rotates_gravity() -> None:
    robot = load_robot("furuta")
    spec = ParameterSpec([Parameter("gravity/tilt_x", -0.2, 0.2)])
    g = spec.apply(robot, torch.tensor([[0.1]], dtype=torch.float64)).gravity[0].numpy()
    np.testing.assert_allclose(g, [0.0, 9.81 * math.sin(0.1), -9.81 * math.cos(0.1)], atol=1e-14)


@pytest.mark.parametrize(
    ("entries", "needle"),
    [
        ([{"name": "link9/mass", "lower": 0, "upper": 1}], "'link9/mass'"),
        ([{"name": "joint1/mass", "lower": 0, "upper": 1}], "'joint1/mass'"),
        ([{"name": "link2/mass", "lower": 2, "upper": 1}], "'link2/mass'"),
        ([{"name": "link2/mass", "lower": 0, "upper": 1, "prior": "gaussian"}], "gaussian"),
        ([{"name": "link2/mass", "lower": 0, "upper": 1, "bogus": 3}], "bogus"),
        ([{"name": "link2/mass", "upper": 1}], "lower"),
        ([{"name": "mass", "lower": 0, "upper": 1}], "'mass'"),
        (
            [
                {"name": "link2/mass", "lower": 0, "upper": 1},
                {"name": "link2/log_cholesky_0", "lower": 0, "upper": 1},
            ],
            "log_cholesky",
        ),
    ],
)
def test_bad_specs_raise_errors_naming_the_parameter(entries: list, needle: str) -> None:
    robot = load_robot("open_manipulator_x")

    def load_and_apply() -> None:
        spec = ParameterSpec.from_yaml({"parameters": entries})
        spec.apply(robot, spec.nominal_theta(robot).unsqueeze(0))

    with pytest.raises(ParameterSpecError, match=needle):
        load_and_apply()


def test_bad_theta_raises_state_error() -> None:
    robot = load_robot("double_pendulum")
    spec = ParameterSpec([Parameter("link1/mass", 0.5, 2.0), Parameter("link2/mass", 0.5, 2.0)])
    with pytest.raises(StateError, match=r"\[N, 2\]"):
        spec.apply(robot, torch.ones(4, 3, dtype=torch.float64))
    with pytest.raises(StateError, match="link2/mass"):
        spec.apply(robot, torch.tensor([[1.0, float("nan")]], dtype=torch.float64))


def test_yaml_round_trip_and_nominal_parameters() -> None:
    spec = ParameterSpec.from_yaml(OMX_YAML)
    again = ParameterSpec.from_yaml(spec.to_mapping())
    assert again.names == spec.names
    assert again.units[0] == "kg"
    torch.testing.assert_close(again.lower, spec.lower)
    p = nominal_parameters(load_robot("panda"), 5)
    assert p.inertia.shape == (5, 7, 10)
    assert p.expand(5) is p
    assert p.index(2).inertia.shape == (1, 7, 10)
