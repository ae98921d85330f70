"""The excitation benchmark's whole-arm MuJoCo replay: its scoring on synthetic fits, the hidden
robot's base-parameter truth against MuJoCo's torques, and the replay end to end on two draws of
a two-second motion."""

from __future__ import annotations

import numpy as np
import pytest

from dynid.excite import DesignSettings, ExcitationPlanner
from dynid.objective.linear import linear_torque_model
from dynid.problem_file import read_problem_file
from dynid.sim.mujoco import engine
from dynid_bench import excite

NAMES = ["panda_link2/XX", "panda_link3/m + 0.3 panda_link4/m", "panda_joint1/damping",
         "panda_joint1/coulomb", "panda_joint1/torque_offset"]  # fmt: skip


@pytest.fixture(scope="module")
def planner() -> ExcitationPlanner:
    pf = read_problem_file(excite.ROOT / "config" / "problems" / "panda_whole_arm.yaml")
    return ExcitationPlanner(pf, DesignSettings(duration=2.0, seed=0))


@pytest.fixture(scope="module")
def motion(planner: ExcitationPlanner) -> excite.Desired:
    c, _ = planner.feasible(planner.random_coefficients(np.random.default_rng(3)))
    return excite._designed_desired(planner, c)


def test_scores_measure_errors_against_the_truths_base_parameters_in_design_sigma() -> None:
    truth = np.array([1.0, 2.0, 0.3, 0.4, -0.1])
    design = np.array([0.1, 0.2, 0.01, 0.02, 0.05])
    offsets = np.array([[1.0, 0.0, 0.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0, 0.0]])  # ± 1 design σ
    beta = truth + offsets * design
    sigma = np.tile(design * 0.6, (2, 1))  # ±1.96 σ = ±1.18 design σ: every truth inside
    m = excite.whole_arm_metrics(NAMES, truth, np.hstack([beta, sigma]), 2 * design, design)
    assert m["err_rms_design_sigma"] == pytest.approx(np.sqrt(2 / 10))
    assert m["predicted_err_rms_design_sigma"] == pytest.approx(2.0)
    assert m["bias_rms_design_sigma"] == pytest.approx(0.0)
    assert m["err_rms_design_sigma_inertial"] == pytest.approx(np.sqrt(2 / 4))
    assert m["err_rms_design_sigma_joint"] == pytest.approx(0.0)
    assert m["coverage_pct"] == pytest.approx(100.0)
    # spread of the first parameter: √2 design σ against 2 design σ predicted; the others 0
    assert m["spread_over_sigma_max"] == pytest.approx(np.sqrt(2) / 2)
    assert m["within_1p5_pct"] == pytest.approx(20.0)
    biased = excite.whole_arm_metrics(NAMES, truth - 3 * design, np.hstack([beta, sigma]),
                                      design, design)  # fmt: skip
    assert biased["bias_rms_design_sigma"] == pytest.approx(3.0)
    assert biased["coverage_pct"] == pytest.approx(0.0)
    assert biased["damping_mae"] == pytest.approx(3 * design[2])
    assert biased["coulomb_mae"] == pytest.approx(3 * design[3])
    assert biased["offset_mae"] == pytest.approx(3 * design[4])


def test_the_hidden_arms_truth_predicts_mujocos_torques(
    planner: ExcitationPlanner, motion: excite.Desired
) -> None:
    hidden = excite.hidden_arm()
    recording = excite._whole_arm_recording(motion, 1, hidden)
    truth = excite.whole_arm_truth(planner, hidden)

    def rms(pf, x: np.ndarray | None = None) -> float:
        # on the rows consistent_lsq scores (joints faster than 0.1 rad/s)
        problem = pf.build(pf.preprocess(excite.Dataset([recording])), device="cpu")
        model = linear_torque_model(problem)
        if x is None:
            x = model.layout.x_of_theta(problem.spec.nominal_theta(problem.robot).numpy())
        fast = model.speed >= 0.1
        return float(np.sqrt(np.mean(model.residuals(x).reshape(-1)[fast] ** 2)))

    # with the torque's hold modelled the truth leaves the filtered sensor noise and a little of
    # the friction models' difference (0.012 N·m); without, also the lag of half a period
    # (0.05 N·m); the URDF's values leave the perturbation, the friction and the offsets
    delayed = excite.with_effort_delay(planner.pf, engine.EFFORT_DELAY)
    assert planner.pf.config.likelihood.effort_delay == 0.0
    assert rms(delayed, truth) < 0.02
    assert rms(planner.pf, truth) > 3 * rms(delayed, truth)
    assert rms(delayed) > 10 * rms(delayed, truth)
    # the benchmark's base parameters of the truth are those of the information model
    base = planner.info.base
    assert base is not None
    assert base.values(truth).shape == (planner.info.dim,)


def test_the_replay_records_every_metric_of_two_draws(
    planner: ExcitationPlanner, motion: excite.Desired
) -> None:
    records = excite._whole_arm_records(planner.pf, planner, {"designed": motion}, 2, motion,
                                        "test")  # fmt: skip
    values = {r.metric: r.value for r in records if r.case == "panda_whole_arm/designed/mujoco"}
    assert set(values) == set(excite.WHOLE_ARM_METRICS)
    assert values["draws_run"] == 2
    # errors in the designed motion's own σ: the predicted aggregate is 1 by construction
    assert values["predicted_err_rms_design_sigma"] == pytest.approx(1.0)
    assert 0 < values["err_rms_design_sigma"] < 100
    assert 0 <= values["coverage_pct"] <= 100
    assert 0 < values["heldout_rmse_nm"] < 0.5
    assert 0.1 < values["spread_over_sigma_median"] < 10
    other = excite._whole_arm_records(planner.pf, planner, {"designed": motion}, 2, motion,
                                      "test", robot_seed=1)  # fmt: skip
    assert {r.case for r in other} == {"panda_whole_arm/designed/mujoco_robot1"}
    assert {r.metric for r in other} == set(excite._DIAGNOSIS_METRICS)
    assert all("robot seed 1" in r.notes for r in other)
    assert excite.hidden_arm(robot_seed=1).friction != excite.hidden_arm().friction


def test_the_no_dry_diagnosis_removes_only_the_dry_friction() -> None:
    hidden = excite.hidden_arm(dry_friction=False)
    drawn = excite.hidden_arm()
    assert all(f.coulomb == 0.0 for f in hidden.friction.values())
    assert any(f.coulomb > 0.0 for f in drawn.friction.values())
    assert [f.damping for f in hidden.friction.values()] == [
        f.damping for f in drawn.friction.values()
    ]
    assert {v.effort_delay for v in excite.WHOLE_ARM_VARIANTS.values()} == {
        0.0,
        engine.EFFORT_DELAY,
    }
