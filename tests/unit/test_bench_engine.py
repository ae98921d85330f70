"""The engine benchmark: discovered by ``scripts/bench``, its sizes under ``--quick``, and its
scoring of ``dynid fit`` output folders into records (on small synthetic folders: no fit runs)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

import dynid_bench.__main__ as bench
from dynid.estimators.registry import make_estimator
from dynid.objective.linear import linear_torque_model
from dynid.problem_file import read_problem_file
from dynid.problem_file.scenarios import load_scenario
from dynid.sim.mujoco.engine import Inertial
from dynid_bench import engine

TRUTH = {"payload/mass": 2.0, "payload/com_x": 0.01, "payload/com_y": -0.02,
         "payload/com_z": 0.08, "link1/mass": 1.0}  # fmt: skip
URDF = """<robot name="toy"><link name="link1"><inertial><origin xyz="0 0 0.1" rpy="0 0 0"/>
<mass value="{mass}"/><inertia ixx="{ixx}" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
</inertial></link></robot>"""


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(parents=[bench._common()])
    engine.add_arguments(parser)
    args = parser.parse_args(argv)
    engine.resolve_sizes(args)
    return args


def test_scripts_bench_discovers_the_engine_benchmark() -> None:
    assert "engine" in bench.available()


def test_quick_runs_two_short_draws_with_the_problem_files_csvgd() -> None:
    args = _parse(["--quick"])
    assert (args.draws, args.duration, args.particles, args.iterations) == (2, 4.0, None, None)


def test_a_full_run_is_twenty_draws_of_twenty_seconds_with_the_problem_files_csvgd() -> None:
    args = _parse([])
    assert (args.draws, args.duration, args.particles, args.iterations) == (20, 20.0, None, None)


def test_explicit_sizes_win_over_quick() -> None:
    args = _parse(["--quick", "--draws", "3", "--particles", "8"])
    assert (args.draws, args.particles) == (3, 8)


def _fit_folder(
    folder: Path,
    mean: dict[str, float],
    std: float,
    rmse: float,
    urdf: str | None = None,
) -> Path:
    """A ``dynid fit`` output folder: posterior.yaml, then report.html 2 s later, then
    history.json (and the identified URDF when given)."""
    folder.mkdir(parents=True)
    posterior = {
        "parameters": {n: {"mean": v, "std": std} for n, v in mean.items()},
        "meta": {
            "wall_s": 1.5,
            "validation": {
                "identified": {"rmse_overall": rmse},
                "nominal": {"rmse_overall": 3.0},
            },
        },
    }
    (folder / "posterior.yaml").write_text(yaml.safe_dump(posterior))
    (folder / "report.html").write_text("<html></html>")
    (folder / "history.json").write_text("{}")
    if urdf is not None:
        (folder / "toy_identified.urdf").write_text(urdf)
    for offset, name in ((0.0, "posterior.yaml"), (2.0, "report.html"), (2.5, "history.json")):
        os.utime(folder / name, (1000.0 + offset, 1000.0 + offset))
    return folder


def _payload(tmp_path: Path, seed: int, mass: float, std: float) -> engine.FitOutcome:
    mean = {**TRUTH, "payload/mass": mass, "payload/com_x": 0.013}
    del mean["link1/mass"]
    folder = _fit_folder(tmp_path / f"p{seed}", mean, std, rmse=0.02)
    return engine.read_outcome(folder, TRUTH, key=("ur5_payload", "mujoco", "lm", seed),
                               wall_s=10.0, read_s=3.0, whole_arm=False, cpu_s=4.0)  # fmt: skip


def test_an_output_folder_is_scored_against_the_truth_with_its_wall_profile(
    tmp_path: Path,
) -> None:
    outcome = _payload(tmp_path, 0, mass=2.01, std=0.006)
    assert outcome.truth == {n: v for n, v in TRUTH.items() if n.startswith("payload/")}
    assert outcome.heldout_rmse == pytest.approx(0.02, abs=1e-12)
    assert outcome.nominal_rmse == pytest.approx(3.0, abs=1e-12)
    assert outcome.profile == pytest.approx(
        {
            "wall_s": 10.0,
            "read_s": 3.0,
            "estimate_s": 1.5,
            "report_s": 2.0,
            "other_s": 3.5,
            "cpu_s": 4.0,
        },
        abs=1e-6,
    )
    assert outcome.min_eig is None


def test_payload_records_average_the_errors_and_count_coverage_per_draw_and_parameter(
    tmp_path: Path,
) -> None:
    # draw 0: mass 0.5 % off, σ 0.006 (inside 1.96 σ); draw 1: 1 % off, σ 0.001 (outside);
    # com_x 3 mm off in both (σ 0.006: inside; σ 0.001: outside); com_y, com_z exact
    outcomes = [_payload(tmp_path, 0, 2.01, 0.006), _payload(tmp_path, 1, 2.02, 0.001)]
    by = {r.metric: r for r in engine.records(outcomes, wall_targets={"lm": 5.0})}
    assert {r.case for r in engine.records(outcomes)} == {"ur5_payload/mujoco/lm"}
    assert by["fits"].value == 2.0
    assert by["mass_err_pct"].value == pytest.approx(0.75, abs=1e-9)
    assert by["mass_err_pct_max"].value == pytest.approx(1.0, abs=1e-9)
    assert by["com_err_mm"].value == pytest.approx(3.0, abs=1e-9)
    assert by["coverage_pct"].value == pytest.approx(75.0, abs=1e-9)
    assert by["coverage_min_pct"].value == pytest.approx(50.0, abs=1e-9)
    assert by["wall_s"].target == 5.0
    assert by["cpu_s"].target == 5.0
    assert by["cpu_s"].value == 4.0
    assert by["mass_err_pct"].meets_target() is False


def test_whole_arm_records_compare_with_the_regressor_of_the_same_draw_and_check_consistency(
    tmp_path: Path,
) -> None:
    solid = URDF.format(mass=1.0, ixx=0.01)
    folder = _fit_folder(tmp_path / "consistent_lsq", {"link1/mass": 1.0}, 0.1, 0.11, solid)
    fit = engine.read_outcome(
        folder, TRUTH, key=("panda_whole_arm", "mujoco", "consistent_lsq", 0), wall_s=5.0,
        read_s=1.0, whole_arm=True,
    )  # fmt: skip
    profile = {k: float("nan") for k in ("read_s", "estimate_s", "report_s", "other_s", "cpu_s")}
    regressor = engine.FitOutcome(
        "panda_whole_arm", "mujoco", engine.REGRESSOR, 0, mean={}, std={}, truth={},
        heldout_rmse=0.1, nominal_rmse=float("nan"), profile={**profile, "wall_s": 2.0},
    )  # fmt: skip
    by = {(r.case, r.metric): r.value for r in engine.records([fit, regressor])}
    assert by["panda_whole_arm/mujoco/consistent_lsq", "rmse_vs_regressor_pct"] == pytest.approx(
        10.0, abs=1e-9
    )
    assert by["panda_whole_arm/mujoco/consistent_lsq", "consistent"] == 1.0
    assert by["panda_whole_arm/mujoco/consistent_lsq", "coverage_pct"] == 100.0
    assert {m for c, m in by if c == "panda_whole_arm/mujoco/regressor"} == {
        "fits", "heldout_rmse_nm", "wall_s",
    }  # fmt: skip
    assert by["panda_whole_arm/mujoco/regressor", "heldout_rmse_nm"] == pytest.approx(0.1)


def test_the_pseudo_inertia_is_positive_for_a_solid_and_not_for_a_broken_inertia() -> None:
    solid = Inertial(1.0, np.array([0.0, 0.0, 0.1]), np.diag([0.01, 0.01, 0.01]))
    broken = Inertial(1.0, np.zeros(3), np.diag([0.05, 0.01, 0.01]))  # ixx > iyy + izz
    assert engine.pseudo_inertia_min_eig(solid) > 0.0
    assert engine.pseudo_inertia_min_eig(broken) < 0.0


def test_the_summary_table_has_a_row_per_engine_and_estimator(tmp_path: Path) -> None:
    outcomes = [_payload(tmp_path, 0, 2.01, 0.006)]
    lines = engine.summary_table(engine.records(outcomes), "ur5_payload").splitlines()
    assert lines[0].startswith("| ur5_payload | mass err % | COM err mm | coverage %")
    assert lines[2].startswith("| mujoco/lm | 0.5 | 3 | 100 | 0.02 | 10 |")


def test_a_failed_fit_is_an_error_that_carries_the_commands_output(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"missing\.yaml"):
        engine._time_fit(["--problem", "missing.yaml", "-o", "out"], tmp_path)


def test_the_regressor_reference_is_the_least_squares_optimum_of_the_torque_rows(
    tmp_path: Path,
) -> None:
    """Scored on its own training recording (every sample, as the fit with stride 1 scores it),
    the unconstrained regressor leaves no more residual than the URDF or consistent_lsq's
    consistent, prior-pulled fit of the same rows."""
    simulate = load_scenario("panda_whole_arm", "scenario", engine="mujoco")
    train = tmp_path / "train"
    simulate(0, train, duration=2.0)
    path = engine.SCENARIOS["panda_whole_arm"].problem(tmp_path, train, False, 5e-4)
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert config["likelihood"]["effort_delay"] == 5e-4
    config["likelihood"]["stride"] = 1
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    outcome = engine.regressor_reference(path, train, train, ("panda_whole_arm", "mujoco", 0))
    assert outcome.estimator == engine.REGRESSOR
    problem = read_problem_file(path).build(read_problem_file(path).load_dataset(str(train)))
    model = linear_torque_model(problem)
    nominal = model.layout.x_of_theta(problem.spec.nominal_theta(problem.robot).numpy())
    consistent = model.layout.x_of_theta(make_estimator("consistent_lsq").fit(problem).map())
    for x in (nominal, consistent):
        assert outcome.heldout_rmse <= model.rmse(x)[1] + 1e-12
    assert outcome.heldout_rmse < 0.5 * model.rmse(nominal)[1]
