"""The planar dice drops as a problem file: ``data.source planar_dice``, ``simulation.model
planar_impact`` and held-out drops (``validation.data``), equal to the Python problem the
residual-contact benchmark builds, and scored on the held-out drops by simulation error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dynid.cli import main
from dynid.data.planar_dice import load_dice_trajectories
from dynid.model.robot import load_robot
from dynid.objective.impact import PlanarImpactSimulation, dice_problem
from dynid.posterior import Posterior
from dynid.problem_file import ProblemFileError, load_problem, read_problem_file
from dynid.problem_file.build import simulator
from dynid.problem_file.schema import SimulationSection
from dynid.problem_file.values import as_positive_ints
from dynid.resources import repo_root
from dynid.validation import simulation_residuals, validate

PROBLEM = repo_root() / "config" / "problems" / "planar_dice.yaml"


def _mapping(**changes: object) -> dict:
    mapping = yaml.safe_load(PROBLEM.read_text(encoding="utf-8"))
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            mapping[section][field] = value
        else:
            mapping[section] = value
    return mapping


@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=20))
def test_drop_lists_are_kept_as_given(drops: list[int]) -> None:
    assert as_positive_ints(drops) == tuple(drops)


@given(st.integers(1, 500), st.integers(0, 500))
def test_a_range_is_inclusive(first: int, length: int) -> None:
    assert as_positive_ints(f"{first}-{first + length}") == tuple(range(first, first + length + 1))


@given(
    st.one_of(
        st.text(max_size=8).filter(lambda s: "-" not in s or not s.replace("-", "").isdigit()),
        st.lists(st.integers(-5, 0), min_size=1, max_size=3),
        st.just([]),
        st.just("5-2"),
        st.none(),
        st.floats(),
    )
)
def test_anything_else_is_refused_with_a_type_or_value_error(value: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        as_positive_ints(value)


def test_the_square_is_read_from_the_urdf() -> None:
    sim = PlanarImpactSimulation.for_robot(load_robot("planar_dice"), 0.004)
    assert sim.simulator.body.side == pytest.approx(0.06, rel=1e-12)
    assert sim.simulator.body.mass == pytest.approx(0.049, rel=1e-12)
    assert sim.simulator.dt == 0.004


def test_planar_impact_needs_a_planar_square_robot() -> None:
    section = SimulationSection(model="planar_impact")
    with pytest.raises(ProblemFileError, match=r"simulation.model: .*no movable joint 'x'"):
        simulator(section, load_robot("double_pendulum"), "f.yaml", 0.004)


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"data__drops": None}, r"data.drops: expected drop numbers"),
        ({"data__drops": "30-2"}, r"data.drops: expected drop numbers"),
        ({"data__drops": [0, 1]}, r"data.drops: expected drop numbers"),
        ({"validation": {"data": {"drops": "1-2"}, "fraction": 0.2}}, r"give one of bags"),
        ({"validation": {"data": {"runs": [1]}}}, r"validation.data: unknown key"),
        ({"validation": {"data": {"drops": "x"}}}, r"validation.data.drops: expected"),
        (
            {"parameters": [{"name": "dice/friction", "lower": 0.0, "upper": 1.0}]},
            r"planar_impact needs \['dice/restitution'\] free",
        ),
        (
            {
                "parameters": [
                    {"name": "dice/friction", "lower": 0.0, "upper": 1.0},
                    {"name": "dice/restitution", "lower": 0.0, "upper": 1.0},
                    {"name": "theta/damping", "lower": 0.0, "upper": 1.0},
                ]
            },
            r"frees only μ and ε, not \['theta/damping'\]",
        ),
    ],
)
def test_errors_name_the_key(changes: dict, match: str) -> None:
    with pytest.raises(ProblemFileError, match=match):
        read_problem_file(_mapping(**changes))


def test_held_out_data_of_a_bag_source_are_bags() -> None:
    bag_problem = repo_root() / "config" / "problems" / "panda_whole_arm.yaml"
    mapping = yaml.safe_load(bag_problem.read_text(encoding="utf-8"))
    mapping["validation"] = {"data": {"path": "other.mcap"}}
    with pytest.raises(ProblemFileError, match=r"validation.data: held-out recordings"):
        read_problem_file(mapping)


def test_the_problem_file_is_the_benchmark_problem(shared_recording) -> None:
    root = shared_recording("planar-dice")
    mapping = _mapping(data__path=str(root), data__drops=[3, 7, 11])
    problem, pf = load_problem(mapping)
    reference = dice_problem(load_dice_trajectories([3, 7, 11], root=root), position_std=0.05)
    assert problem.spec.names == reference.spec.names
    assert torch.equal(problem.spec.lower, reference.spec.lower)
    assert torch.equal(problem.spec.upper, reference.spec.upper)
    assert problem.obs_names == reference.obs_names
    assert torch.allclose(problem.obs_std, reference.obs_std, rtol=1e-4)
    theta = torch.tensor([[0.2, 0.4], [0.6, 0.1]], dtype=torch.float64)
    assert torch.equal(problem.objective.simulate(theta), reference.objective.simulate(theta))
    held = pf.load_validation()
    assert held is not None
    assert len(held) == 50
    assert held[0].meta["source"].endswith("traj_401.csv")


def test_held_out_simulation_error_is_the_rollout_against_the_drops(shared_recording) -> None:
    root = shared_recording("planar-dice")
    problem = dice_problem(load_dice_trajectories([1, 2]), position_std=0.05)
    held = load_dice_trajectories([401, 402], root=root)
    theta = np.array([0.2, 0.4])
    post = Posterior(particles=theta[None], names=problem.spec.names, units=problem.spec.units)
    report = validate(problem, post, held)
    sim = problem.simulator.simulator
    expected = []
    for traj in held:
        start = torch.from_numpy(np.concatenate([traj.q[0], traj.dq[0]]))[None]
        states = sim.rollout(start, traj.num_samples - 1, torch.tensor([0.2]), torch.tensor([0.4]))
        expected.append(states[0, 1:, :3].numpy() - traj.q[1:])
    residuals = np.concatenate(expected)
    assert np.allclose(simulation_residuals(problem, theta, held), residuals, atol=1e-12)
    score = report.scores["identified"]
    assert report.quantity == "simulation"
    assert score.channels == tuple(problem.obs_names)
    assert score.rmse == pytest.approx(np.sqrt(np.mean(residuals**2, axis=0)))
    whitened = residuals / problem.obs_std.numpy()
    assert score.overall == pytest.approx(float(np.sqrt(np.mean(whitened**2))))
    # the nominal model is the paper's (μ, ε) = (0.11, 0.48), a different rollout
    assert report.scores["nominal"].overall != pytest.approx(score.overall)


def test_dynid_fit_identifies_and_scores_the_held_out_drops(
    tmp_path, capsys, shared_recording
) -> None:
    shared_recording("planar-dice")
    out = tmp_path / "fit"
    status = main(["fit", "--problem", str(PROBLEM), "-o", str(out), "--iterations", "40",
                   "--set", "burn_in=10", "--set", "chains=2", "--no-progress"])  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    assert "held-out validation (validation.data of" in printed
    assert "theta/position" in printed
    meta = yaml.safe_load((out / "posterior.yaml").read_text(encoding="utf-8"))["meta"]
    validation = meta["validation"]
    assert validation["quantity"] == "simulation"
    assert validation["identified"]["samples"] == 50 * 199
    assert set(meta["median"]) == {"dice/friction", "dice/restitution"}
