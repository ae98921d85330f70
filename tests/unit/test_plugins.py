"""Plug-ins from outside dynid: for every entry-point group a toy distribution written into a
temporary folder (a module, ``<name>-0.1.dist-info/METADATA`` and ``entry_points.txt``) is put on
the path, and dynid uses what it registers; and the loader's one-line errors."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pinocchio as pin
import pytest
import torch
import yaml
from test_cli_fixtures import TRUTH, pendulum_config, write_pendulum_problem

from dynid import plugins
from dynid.errors import ProblemError
from dynid.estimators.errors import EstimatorError, UnknownEstimatorError
from dynid.estimators.registry import available_estimators, resolve_estimator
from dynid.problem import LikelihoodSettings
from dynid.problem_file import ProblemFileError, load_problem, read_problem_file

Install = Callable[..., Path]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """``install(distribution, {module: source}, {group: {name: "module:attr"}})`` writes a
    distribution into its own folder under ``tmp_path``, puts that folder on ``sys.path`` and
    returns it; the loader's cache is cleared before and after, the modules are forgotten."""
    modules: list[str] = []

    def _install(
        distribution: str, sources: dict[str, str], entry_points: dict[str, dict[str, str]]
    ) -> Path:
        root = tmp_path / distribution
        info = root / f"{distribution}-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n", encoding="utf-8"
        )
        sections = [
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
            for group, entries in entry_points.items()
        ]
        (info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
        for module, source in sources.items():
            (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
            modules.append(module)
        monkeypatch.syspath_prepend(str(root))
        plugins.refresh()
        return root

    yield _install
    for module in modules:
        sys.modules.pop(module, None)
    monkeypatch.undo()
    plugins.refresh()


# ------------------------------------------------------------------------------- estimators
GRID_ESTIMATOR = '''
    """toy_grid: scores points on the diagonal of the parameter box."""
    from pathlib import Path

    import torch

    from dynid.estimators.base import Estimator, StepInfo
    from dynid.posterior import Posterior


    class GridSearch(Estimator):
        kind = "toy_grid"
        defaults_file = Path(__file__).with_name("toy_grid.yaml")

        def __init__(self, *, points: int = 2, **settings) -> None:
            super().__init__(**settings)
            self.points = points

        def init(self, problem, warm_start=None) -> None:
            self.problem, self.iteration = problem, 0
            u = torch.linspace(0.0, 1.0, self.points, dtype=problem.dtype, device=problem.device)
            self.theta = problem.spec.from_unit(u[:, None].expand(-1, len(problem.spec.names)))
            self.log_lik = problem.objective.log_likelihood(self.theta).detach()

        def step(self, iterations: int = 1) -> StepInfo:
            self.iteration += iterations
            return StepInfo(self.iteration, -float(self.log_lik.max()), 0.0, converged=True)

        def posterior(self) -> Posterior:
            spec = self.problem.spec
            return Posterior(particles=self.theta.cpu().numpy(), names=list(spec.names),
                             units=list(spec.units), log_weights=self.log_lik.cpu().numpy(),
                             log_likelihood=self.log_lik.cpu().numpy(), estimator=self.kind,
                             iteration=self.iteration)
'''


def test_an_estimator_of_another_package_is_chosen_by_a_problem_file_and_fits(
    tmp_path: Path, install: Install, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """Its defaults file ships with it (points: 3); the problem file's settings win (points:
    5); ``dynid fit`` runs it and writes its posterior."""
    root = install("toy-grid", {"toy_grid": GRID_ESTIMATOR},
                   {"dynid.estimators": {"toy_grid": "toy_grid:GridSearch"}})  # fmt: skip
    (root / "toy_grid.yaml").write_text("name: toy_grid\nsettings: {points: 3, seed: 0}\n")
    assert "toy_grid" in available_estimators()
    assert dict(resolve_estimator("toy_grid").settings) == {"points": 3, "seed": 0}
    problem = write_pendulum_problem(
        tmp_path, steps=10, estimator={"name": "toy_grid", "settings": {"points": 5}}
    )
    out = tmp_path / "out"
    result = run_dynid("fit", "--problem", str(problem), "-o", str(out), "--no-progress",
                        cwd=tmp_path, path=[root])  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = yaml.safe_load((out / "posterior.yaml").read_text(encoding="utf-8"))
    assert summary["estimator"] == "toy_grid"
    assert summary["num_particles"] == 5
    assert set(summary["parameters"]) == set(TRUTH)


def test_an_estimator_whose_kind_is_not_its_name_is_refused(install: Install) -> None:
    install("toy-misnamed", {"toy_misnamed": GRID_ESTIMATOR},
            {"dynid.estimators": {"grid": "toy_misnamed:GridSearch"}})  # fmt: skip
    with pytest.raises(EstimatorError, match=r"estimator 'grid': class .*GridSearch has kind"):
        resolve_estimator("grid")


# -------------------------------------------------------------------------------- scenarios
LINE_SCENARIO = '''
    """toy_line: one joint moving at a constant rate."""
    import numpy as np

    from dynid.data import BagLayout, Dataset, JointStateTopic, StorageFormat, Trajectory
    from dynid.sim.common import SIM_T0_NS, finish, time_grid

    LAYOUT = BagLayout(joint_states=JointStateTopic("/line/joint_states", joints=("slider",)))


    def simulate(seed, out_path=None, *, samples: int = 5, rate: float = 0.5,
                 storage=StorageFormat.MCAP):
        t = time_grid(samples, 0.1)
        q = (rate * t + seed)[:, None]
        traj = Trajectory(t=t, q=q, joint_names=["slider"], dq=np.full_like(q, rate),
                          meta={"scenario": "toy_line", "t0_ns": SIM_T0_NS})
        truth = {"scenario": "toy_line", "seed": seed, "robot": "line",
                 "parameters": {"rate": rate}, "settings": {"samples": samples}}
        return finish(Dataset([traj]), truth, LAYOUT, out_path, storage)
'''


def test_a_scenario_of_another_package_is_simulated_by_dynid_simulate(
    tmp_path: Path, install: Install, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    from dynid.data import BagLayout, read_bag
    from dynid.sim import read_truth

    root = install("toy-line", {"toy_line": LINE_SCENARIO},
                   {"dynid.scenarios": {"toy_line": "toy_line:simulate"}})  # fmt: skip
    bag = tmp_path / "line"
    result = run_dynid("simulate", "toy_line", "-o", str(bag), "--seed", "2", "--set", "samples=7",
                        cwd=tmp_path, path=[root])  # fmt: skip
    assert result.returncode == 0, result.stderr
    truth = read_truth(bag)
    assert truth["parameters"] == {"rate": 0.5}
    dataset, _ = read_bag(bag, BagLayout.from_mapping(truth["layout"]))
    assert dataset[0].num_samples == 7
    assert dataset[0].q[0, 0] == pytest.approx(2.0, abs=1e-12)


# ------------------------------------------------------------------------------ attachments
BALL_ATTACHMENT = '''
    """toy_ball: a point mass welded to a link."""
    from dynid.model.attachments import attach_payload


    def attach_ball(robot, link: str, *, mass: float, name: str = "ball"):
        return attach_payload(robot, link, mass=mass, com=(0.0, 0.0, 0.0),
                              inertia=[[0.0] * 3] * 3, name=name)
'''


def test_an_attachment_of_another_package_extends_the_robot(
    tmp_path: Path, install: Install
) -> None:
    install("toy-ball", {"toy_ball": BALL_ATTACHMENT},
            {"dynid.attachments": {"toy_ball": "toy_ball:attach_ball"}})  # fmt: skip
    ball = {"type": "toy_ball", "link": "link2", "mass": 0.25}
    robot = read_problem_file(pendulum_config(attachments=[ball])).robot
    plain = read_problem_file(pendulum_config()).robot
    assert [a.name for a in robot.attachments] == ["ball"]
    assert "ball" in robot.frame_names
    assert "ball" not in plain.frame_names
    added = pin.computeTotalMass(robot.model) - pin.computeTotalMass(plain.model)
    assert added == pytest.approx(0.25, abs=1e-12)
    with pytest.raises(ProblemFileError, match=r"attachments\[0\] \(toy_ball\).*'radius'"):
        read_problem_file(pendulum_config(attachments=[{**ball, "radius": 0.1}]))


# ----------------------------------------------------------------------------- data sources
RAMP_SOURCE = '''
    """toy_ramp: both pendulum joints on a ramp, generated on reading."""
    from typing import ClassVar

    import numpy as np

    from dynid.data import Dataset, Trajectory
    from dynid.problem_file.sources import DataSource


    class RampSource(DataSource):
        kind: ClassVar[str] = "toy_ramp"
        keys: ClassVar[frozenset[str]] = frozenset({"samples", "slope"})

        def __init__(self, samples: int, slope: float) -> None:
            self.samples, self.slope = samples, slope

        @classmethod
        def from_section(cls, section):
            samples = section.convert("samples", int, "an integer", 20)
            if samples < 2:
                raise section.error("samples", f"expected at least 2, got {samples}")
            return cls(samples, section.convert("slope", float, "a number", 1.0))

        def read(self):
            t = np.arange(self.samples) * 0.01
            q = np.stack([self.slope * t, -self.slope * t], axis=1)
            dq = np.tile([self.slope, -self.slope], (self.samples, 1))
            traj = Trajectory(t=t, q=q, dq=dq, joint_names=["joint1", "joint2"])
            return Dataset([traj]), {"joint1/damping": 0.3}
'''


def test_a_data_source_of_another_package_feeds_a_problem(install: Install) -> None:
    install("toy-ramp", {"toy_ramp": RAMP_SOURCE},
            {"dynid.data_sources": {"toy_ramp": "toy_ramp:RampSource"}})  # fmt: skip
    config = pendulum_config(data={"source": "toy_ramp", "samples": 30, "slope": 0.5},
                             validation={"fraction": 0.2})  # fmt: skip
    problem, _ = load_problem(config)
    (traj,) = problem.dataset
    assert traj.num_samples == 24  # the last fifth held out
    assert traj.q[5, 0] == pytest.approx(0.5 * 0.05, abs=1e-12)
    bad = pendulum_config(data={"source": "toy_ramp", "samples": 1})
    with pytest.raises(ProblemFileError, match=r"data\.samples: expected at least 2, got 1"):
        read_problem_file(bad)
    with pytest.raises(ProblemFileError, match=r"data: unknown keys \['path'\]"):
        read_problem_file(pendulum_config(data={"source": "toy_ramp", "path": "x.npz"}))


# ------------------------------------------------------------------------------ likelihoods
QUADRATIC_LIKELIHOOD = '''
    """toy_quadratic: log p = −|θ|², whatever the data."""
    import torch

    from dynid.objective.likelihood import Evaluation, Likelihood


    class Quadratic(Likelihood):
        def __init__(self, problem) -> None:
            self.problem, self.shooting = problem, "none"
            self.M, self.K, self.W = len(problem.spec.names), len(problem.dataset), 1
            self.nv = problem.robot.nv
            self.state_scale = torch.ones(2 * self.nv, dtype=problem.dtype)
            self._set_bounds()

        def evaluate(self, z, aggregate=None):
            theta = self.theta(z)
            per = -(theta**2).sum(-1, keepdim=True).expand(-1, self.K)
            defects = z.new_zeros(z.shape[0], self.K, 0, 2 * self.nv)
            return Evaluation(theta, self.combine(per, aggregate), per, defects)


    def quadratic(problem, *, shooting=None, windows=None):
        return Quadratic(problem)
'''


def test_a_likelihood_of_another_package_scores_a_problem(tmp_path: Path, install: Install) -> None:
    install("toy-quadratic", {"toy_quadratic": QUADRATIC_LIKELIHOOD},
            {"dynid.likelihoods": {"toy_quadratic": "toy_quadratic:quadratic"}})  # fmt: skip
    write_pendulum_problem(tmp_path, steps=10)
    config = pendulum_config(str(tmp_path / "dp.npz"), likelihood={"kind": "toy_quadratic"})
    problem, _ = load_problem(config)
    theta = torch.tensor([[0.3, 0.4], [0.0, 1.0]], dtype=problem.dtype)
    log_lik = problem.objective.log_likelihood(theta)
    assert log_lik.tolist() == pytest.approx([-0.25, -1.0], abs=1e-12)
    with pytest.raises(EstimatorError, match="'toy_quadratic' gives no residuals"):
        problem.objective.residuals(theta)


def test_an_unregistered_likelihood_kind_lists_the_registered_ones() -> None:
    with pytest.raises(ProblemError, match=r"likelihood.kind must be one of .*shooting"):
        LikelihoodSettings(kind="toy_missing")


# ---------------------------------------------------------------------- the loader's errors
def test_an_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(plugins.UnknownPluginError) as info:
        plugins.SCENARIOS.load("moon_lander")
    message = str(info.value)
    assert message.startswith("unknown scenario 'moon_lander'; available: ")
    assert "panda_box" in message.split("available: ")[1].split(", ")
    with pytest.raises(UnknownEstimatorError, match=r"^unknown estimator 'magic'; available:"):
        resolve_estimator("magic")


def test_a_plugin_that_fails_to_import_names_entry_point_distribution_and_cause(
    install: Install,
) -> None:
    broken = "import shiny_dependency_not_installed\n"
    install("toy-broken", {"toy_broken": broken},
            {"dynid.estimators": {"broken": "toy_broken:Broken"}})  # fmt: skip
    with pytest.raises(EstimatorError) as info:
        resolve_estimator("broken")
    message = str(info.value)
    assert "estimator 'broken': entry point 'toy_broken:Broken'" in message
    assert "of distribution toy-broken failed to load" in message
    assert "No module named 'shiny_dependency_not_installed'" in message
    assert "\n" not in message


def test_a_name_two_distributions_register_is_an_error_naming_both(install: Install) -> None:
    install("toy-rival", {"toy_rival": LINE_SCENARIO},
            {"dynid.scenarios": {"panda_box": "toy_rival:simulate"}})  # fmt: skip
    with pytest.raises(plugins.PluginError) as info:
        plugins.SCENARIOS.load("panda_box")
    message = str(info.value)
    assert "scenario 'panda_box' is registered in entry-point group dynid.scenarios" in message
    assert "dynid (dynid.sim.panda_box:simulate)" in message
    assert "toy-rival (toy_rival:simulate)" in message
    assert plugins.SCENARIOS.names().count("panda_box") == 1


def test_importing_dynid_loads_no_plugin() -> None:
    """Entry points are read and loaded on demand: a fresh interpreter that imports dynid and
    lists the estimators has imported no estimator module and none of the optional samplers."""
    code = ("import sys, dynid; from dynid.estimators.registry import available_estimators; "
            "available_estimators(); "
            "print(sorted(m for m in sys.modules if m.startswith('dynid.estimators.') "
            "or m in ('emcee', 'pyro')))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, check=True)  # fmt: skip
    loaded = ast.literal_eval(result.stdout)
    assert loaded == ["dynid.estimators.errors", "dynid.estimators.registry"]


def test_the_design_notes_have_a_recipe_per_group_naming_a_test_here() -> None:
    """``docs/design.md`` "Adding a plug-in": one recipe per group, each naming a test of this
    module."""
    design = Path(__file__).resolve().parents[2] / "docs" / "design.md"
    section = design.read_text(encoding="utf-8").split("## Adding a plug-in", 1)[1]
    section = section.split("\n## ", 1)[0]
    recipes = section.split("\n### ")[1:]
    assert [recipe.split("`")[1] for recipe in recipes] == [g.name for g in plugins.GROUPS]
    for recipe in recipes:
        named = recipe.split("Test: `", 1)[1].split("`", 1)[0]
        assert callable(globals().get(named)), named
