"""Excitation design (``dynid excite``) beside Gaz et al.'s recorded excitation and random
Fourier motions, for the Panda whole arm and the Panda payload.

For each problem (``config/problems/panda_whole_arm.yaml``, ``panda_payload.yaml``) the
benchmark plans a motion with ``dynid.excite.design_excitation`` (its defaults: 5 harmonics,
3 starts, D-optimality) over the duration of Gaz et al.'s recording
(``shared:panda-gaz2019/first_half_period``, 6.67 s), and scores three kinds of motion the same
way, by the Fisher information of the problem's free parameters (base parameters for the whole
arm) under the problem's torque noise on the samples its likelihood scores:

- ``designed``: the planned motion (its states exact at the scored samples);
- ``gaz2019``: the recording, filtered and differentiated by the problem's own likelihood
  settings (``TorqueSamples``) — Gaz et al. 2019 drove the Panda with 5-harmonic Fourier
  coefficients at ω_f = 0.15π checked against limits (their Table II);
- ``random/<k>``: random Fourier coefficients (seeded) scaled per joint to 90 % of every limit,
  then scaled down together until the dense check passes, as the designed motion is.

Metrics per case ``<problem>/<motion>``: ``log_det`` (D-optimality, higher is better),
``cond`` (condition number of the whitened base regressor, ``√(λ_max/λ_min)`` of ``F``; Gaz et
al. report 121.88 for their own regressor scaling, shown as the anchor), ``min_eig``
(E-criterion), for the payload the Cramér–Rao σ of the mass (g) and the largest of the centre of
mass (mm), and ``planning_s`` for the designed motion (targets: payload 30 s, whole arm 300 s on
2 cores).

MuJoCo check of the prediction (payload): every motion above (the designed one at full speed,
Gaz et al.'s recorded positions low-passed at 10 Hz and differentiated, the random ones) is
driven on MuJoCo (``dynid.sim.mujoco``: the Panda's URDF with the payload of
``dynid.sim.panda_payload``, 1.2 kg at (0.03, −0.02, 0.06) m, tracked by the scenario's
impedance controller with the motion's accelerations fed forward, encoder quantisation, velocity
noise 1e-3 rad/s, torque noise 0.05 N·m, no torque-sensor offsets since the payload problem
frees none), ``--mujoco-draws`` recordings each (sensor-noise seeds ``0 …``), each fitted with
``lm`` on the problem file as shipped but for ``likelihood.effort_delay``, which is half of
MuJoCo's control period (:data:`dynid.sim.mujoco.engine.EFFORT_DELAY`: the engine holds each
torque over the period, a property of the recording the file for the real arm's torque sensors
does not have). The prediction is the design's: those sensors' noise
propagated through the problem's preprocessing (:mod:`dynid.excite.noise`, :data:`MUJOCO_SENSORS`).
Metrics per ``panda_payload/<motion>/mujoco``: the predicted σ and the spread (standard deviation
over the draws) of the fitted mass (g) and of the centre of mass (mm, largest coordinate), their
ratio per parameter (``spread_over_sigma_*``; the issue asks for agreement within 1.5) and the
ratio to the Cramér–Rao σ under the file's ``torque_std`` (``spread_over_crb_*``: the
prediction without the sensors' noise), the mean
absolute errors of the mass (g) and centre of mass (mm, largest coordinate), the held-out torque
RMSE (N·m, mean over the draws) of the fitted payload on one MuJoCo recording along a further
random motion (seed :data:`HELDOUT_SEED`), and ``draws_run`` where MuJoCo refused a motion (its
controller beyond an effort limit).

MuJoCo check (whole arm): every motion is driven on MuJoCo the same way by one hidden robot,
the scenario ``panda_whole_arm``'s draw of :data:`ROBOT_SEED`
(:func:`dynid.sim.mujoco.panda_whole_arm.perturbed_panda`: links 2, 3, 4 and 6 with mass and
inertia scaled within ±20 % and centres of mass shifted within ±2 cm, viscous and dry friction on
every joint, torque-sensor offsets within ±0.2 N·m), with the same sensors, ``--mujoco-draws``
recordings per motion (sensor-noise seeds ``0 …``), each fitted with ``consistent_lsq``
(:data:`WHOLE_ARM_ESTIMATOR`, the guide's estimator for a whole arm) on the problem file as
shipped with that ``effort_delay`` (as for the payload). Scored are the base parameters
``β = T x`` the planner's information model uses
(:class:`~dynid.model.base_parameters.BaseParameters` of the standard parameters ``x``: what a
motion identifies; the joints' friction and offsets are base parameters by themselves), against
the hidden robot's ``T x`` computed the same way (:func:`whole_arm_truth`); the prediction is
the design's (the file states no ``excitation.sensor_noise``, so the benchmark gives
:data:`MUJOCO_SENSORS`, propagated as for the payload, without the parameter prior of the fit).
Metrics per ``panda_whole_arm/<motion>/mujoco`` (:func:`whole_arm_metrics`), the aggregate
chosen before any run: ``err_rms_design_sigma``, the RMS over draws and base parameters of the
error in units of the *designed* motion's predicted σ of that parameter (one yardstick for every
motion, so "lower along the designed motion" is decidable), beside what the prediction expects
of it (``predicted_err_rms_design_sigma``: the RMS of this motion's predicted σ in the same
units; 1 for the designed motion) and its bias part (``bias_rms_design_sigma``: the RMS of the
mean error over draws); the same RMS over the inertial and over the joint base parameters; the
mean absolute errors of damping, Coulomb friction and offsets; spread / predicted σ per base
parameter (median, smallest, largest, and ``within_1p5_pct``: the share within [1/1.5, 1.5]);
``coverage_pct`` of the fits' 95 % intervals (mean ± 1.96 σ of ``T Σ_x Tᵀ``,
:meth:`~dynid.estimators.consistent_lsq.ConsistentLeastSquares.standard_covariance`); the
held-out torque RMSE (N·m, mean over the draws) on one MuJoCo recording of the same robot along
a further random motion (seed :data:`HELDOUT_SEED`).

Diagnoses (``--diagnoses``, default on; :data:`WHOLE_ARM_VARIANTS`, cases
``panda_whole_arm/<motion>/mujoco_*``): the same draws with one of the two differences between
the model and MuJoCo that the information of a motion cannot see put back or taken away.
``no_delay``: fitted with the file's ``effort_delay`` of 0. MuJoCo holds each torque over its
1 ms control period and the likelihood differences the sampled velocities centrally, so without
the delay the acceleration it scores a torque against is the mean of the period before and the
period after the sample, half a period behind (an error of about ``M(q) q⃛ Δt / 2``, largest
along brisk motions). ``no_dry``: the hidden robot without its dry friction (MuJoCo's
``frictionloss`` row against the model's ``c tanh(v/ε)``, filtered in parallel with the efforts,
on the rows faster than ``coulomb_min_speed``).

Further hidden robots (``--robot-seeds``, default 1 and 2; cases
``panda_whole_arm/<motion>/mujoco_robot<seed>``): every motion replayed as recorded by the
scenario's draws of those robot seeds, with the same sensors, draws and fit, scored in the same
units (the design's predicted σ, which do not depend on the hidden robot).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from dynid.data.preprocess import filtered_motion
from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.base import Estimator
from dynid.estimators.consistent_lsq import ConsistentLeastSquares
from dynid.estimators.registry import resolve_estimator
from dynid.excite import (
    DesignSettings,
    ExcitationPlanner,
    SensorNoise,
    criteria,
    design_excitation,
    propagated_covariance,
)
from dynid.objective.linear import LinearLayout
from dynid.objective.torque import InverseDynamicsLikelihood
from dynid.problem_file import ProblemFile, read_problem_file
from dynid.records import Record
from dynid.resources import shared_data_dir
from dynid.sim.common import SimulationError
from dynid.sim.mujoco import arm as mujoco_arm
from dynid.sim.mujoco import engine, panda_whole_arm
from dynid.sim.mujoco.panda_payload import panda as mujoco_panda
from dynid.sim.panda_box import ARM
from dynid.sim.panda_payload import PAYLOAD_LINK, SCENARIO
from dynid_bench.fitting import run_fit

ROOT = Path(__file__).resolve().parents[3]
PROBLEMS = {"panda_whole_arm": 300.0, "panda_payload": 30.0}  # planning-time targets (s)
GAZ_BAG = "panda-gaz2019/first_half_period"
GAZ_CONDITION = 121.88
PAYLOAD_TRUTH = {"payload/mass": 1.2, "payload/com_x": 0.03, "payload/com_y": -0.02,
                 "payload/com_z": 0.06}  # fmt: skip
MUJOCO_SENSORS = SensorNoise(
    position=2 * np.pi / engine.ENCODER_TICKS / np.sqrt(12), velocity=1e-3, effort=0.05
)
"""The MuJoCo recordings' sensors: encoder quantisation (resolution / √12), velocity and torque
noise."""
REPLAY_CUTOFF_HZ = (
    10.0  # Hz: Gaz et al.'s recorded positions are low-passed before MuJoCo replays them
)
HELDOUT_SEED = 10_000  # seeds the held-out motion and its sensor noise
ROBOT_SEED = 0
"""Seeds the whole arm's hidden robot (:func:`dynid.sim.mujoco.panda_whole_arm.perturbed_panda`:
inertials, friction, torque offsets), the same for every motion and draw; ``--robot-seeds``
replays further robots (cases ``…/mujoco_robot<seed>``)."""
WHOLE_ARM_ESTIMATOR = "consistent_lsq"  # the guide's estimator for a whole arm
Desired = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own options."""
    parser.add_argument("--problems", default=",".join(PROBLEMS), help="comma-separated")
    parser.add_argument("--random", type=int, default=3, help="random motions per problem")
    parser.add_argument("--seed", type=int, default=0, help="seed of the design and draws")
    parser.add_argument("--mujoco-draws", type=int, default=20,
                        help="MuJoCo recordings per motion (0: none)")  # fmt: skip
    parser.add_argument("--diagnoses", action=argparse.BooleanOptionalAction, default=True,
                        help="replay the whole arm also with its model biases removed "
                             "(WHOLE_ARM_VARIANTS; not under --quick)")  # fmt: skip
    parser.add_argument("--robot-seeds", default="1,2",
                        help="further hidden whole arms replayed as recorded (comma-separated "
                             "robot seeds; not under --quick)")  # fmt: skip


def _scores(planner: ExcitationPlanner, F: np.ndarray) -> dict[str, float]:
    c = criteria(F)
    out = {"log_det": c.log_det, "cond": c.regressor_condition_number, "min_eig": c.min_eigenvalue}
    _, sigma = planner.info.cramer_rao(F)
    names = planner.info.names
    if "payload/mass" in names:
        out["sigma_mass_g"] = 1e3 * float(sigma[names.index("payload/mass")])
        com = [sigma[names.index(f"payload/com_{k}")] for k in "xyz"]
        out["sigma_com_mm"] = 1e3 * float(max(com))
    return out


def _motion_information(planner: ExcitationPlanner, c: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        q, v, a, _ = planner.motion.evaluate(torch.as_tensor(c), torch.as_tensor(planner.t_scored))
        return planner.info.fisher(q, v, a).numpy()


def _designed_desired(planner: ExcitationPlanner, c: np.ndarray) -> Desired:
    """``(t, q, q̇, q̈)`` of the Fourier motion ``c`` at the control rate."""
    duration = planner.motion.duration
    t = np.arange(round(duration / engine.CONTROL_PERIOD) + 1) * engine.CONTROL_PERIOD
    with torch.no_grad():
        q, v, a, _ = planner.motion.evaluate(torch.as_tensor(c), torch.as_tensor(t))
    return t, q.numpy(), v.numpy(), a.numpy()


def _recorded_desired(traj: Trajectory, joints: list[str]) -> Desired:
    """``(t, q, q̇, q̈)`` of a recorded motion at the control rate: its positions low-passed at
    :data:`REPLAY_CUTOFF_HZ` and differentiated (:func:`filtered_motion`)."""
    smooth, a, _ = filtered_motion(traj, REPLAY_CUTOFF_HZ, measured_velocities=False)
    cols = [smooth.joint_names.index(j) for j in joints]
    t = smooth.t - smooth.t[0]
    step = round(engine.CONTROL_PERIOD / float(np.median(np.diff(t))))
    assert smooth.dq is not None
    return t[::step], smooth.q[::step, cols], smooth.dq[::step, cols], a[::step][:, cols]


def _excitation(desired: Desired) -> mujoco_arm.Excitation:
    """The MuJoCo scenario's motion along ``desired``, its accelerations fed forward."""
    t, q, v, a = desired
    zeros = np.zeros((q.shape[1], 1))
    return mujoco_arm.Excitation(q[0], zeros, zeros, 2 * np.pi / t[-1], q, v, a)


def _payload_recording(desired: Desired, seed: int) -> Trajectory:
    """One MuJoCo recording along ``desired`` with the benchmark's payload and sensors (module
    notes); sensor-noise seed ``seed``.

    Raises:
        SimulationError: MuJoCo's controller refused the motion (an effort limit).
    """
    robot = mujoco_panda()
    motion = _excitation(desired)
    com = np.array([PAYLOAD_TRUTH[f"payload/com_{k}"] for k in "xyz"])
    payload = engine.Payload(
        PAYLOAD_LINK, engine.Inertial(PAYLOAD_TRUTH["payload/mass"], com, np.eye(3) * 2e-3)
    )
    sensors = engine.Sensors(engine.ENCODER_TICKS, MUJOCO_SENSORS.velocity, MUJOCO_SENSORS.effort,
                             np.zeros(len(robot.joints)))  # fmt: skip
    recording = mujoco_arm.run(robot, engine.read_urdf(robot.urdf), motion, sensors,
                               np.random.default_rng(seed), payload=payload)  # fmt: skip
    return mujoco_arm.trajectory(recording, robot, motion, SCENARIO)


def hidden_arm(
    dry_friction: bool = True, robot_seed: int = ROBOT_SEED
) -> panda_whole_arm.PerturbedPanda:
    """The whole arm's hidden robot (``robot_seed``, the scenario's default ranges); without
    ``dry_friction`` its drawn dry friction is removed (a diagnosis: MuJoCo's dry friction
    against the model's ``c tanh(v/ε)``), everything else as drawn."""
    urdf = engine.read_urdf(mujoco_panda().urdf)
    hidden = panda_whole_arm.perturbed_panda(np.random.default_rng(robot_seed), urdf)
    if dry_friction:
        return hidden
    viscous = {j: engine.JointFriction(f.damping, 0.0) for j, f in hidden.friction.items()}
    return dataclasses.replace(hidden, friction=viscous)


def with_effort_delay(pf: ProblemFile, delay: float) -> ProblemFile:
    """``pf`` with ``likelihood.effort_delay`` set to ``delay`` (s)."""
    likelihood = dataclasses.replace(pf.config.likelihood, effort_delay=delay)
    return dataclasses.replace(pf, config=dataclasses.replace(pf.config, likelihood=likelihood))


def _whole_arm_recording(
    desired: Desired, seed: int, hidden: panda_whole_arm.PerturbedPanda
) -> Trajectory:
    """One MuJoCo recording of the whole arm ``hidden`` along ``desired`` with the benchmark's
    sensors and the robot's torque offsets; sensor-noise seed ``seed``.

    Raises:
        SimulationError: MuJoCo's controller refused the motion (an effort limit).
    """
    motion = _excitation(desired)
    sensors = hidden.sensors(engine.ENCODER_TICKS, float(MUJOCO_SENSORS.velocity or 0.0),
                             MUJOCO_SENSORS.effort)  # fmt: skip
    recording = hidden.run(motion, sensors, np.random.default_rng(seed))
    return mujoco_arm.trajectory(recording, mujoco_panda(), motion, panda_whole_arm.SCENARIO)


def whole_arm_truth(planner: ExcitationPlanner, hidden: panda_whole_arm.PerturbedPanda
                    ) -> np.ndarray:  # fmt: skip
    """``[P]`` the standard parameters of the whole arm ``hidden`` (:class:`LinearLayout` of the
    planner's problem: inertials about each joint, friction, offsets)."""
    truth = {**hidden.parameters(), **mujoco_arm.offset_parameters(ARM, hidden.torque_offset)}
    problem = planner.problem
    theta = np.array([truth[n] for n in problem.spec.names])
    return LinearLayout.of(problem).x_of_theta(theta)


def _predicted_covariance(pf: ProblemFile, planner: ExcitationPlanner, desired: Desired
                          ) -> np.ndarray:  # fmt: skip
    """The design's covariance of the planner's coordinates along ``desired``: the MuJoCo
    sensors' noise propagated through the problem's preprocessing, no prior recordings."""
    t, q, v, a = desired
    with torch.no_grad():
        tau = planner.torque(*(torch.as_tensor(x) for x in (q, v, a))).numpy()
    zero = np.zeros((planner.info.dim, planner.info.dim))
    return propagated_covariance(pf, planner.info, (t, q, v, tau), zero, MUJOCO_SENSORS)


def _heldout_rmse(pf: ProblemFile, heldout: Trajectory, estimate: dict[str, float]) -> float:
    """RMS (N·m) of the measured minus predicted efforts of the fitted payload over the scored
    samples of the held-out recording (the problem's own filter and stride)."""
    problem = pf.build(pf.preprocess(Dataset([heldout])), device="cpu")
    theta = problem.spec.nominal_theta(problem.robot).clone()
    for k, name in enumerate(problem.spec.names):
        theta[k] = estimate[name]
    with torch.no_grad():
        errors = InverseDynamicsLikelihood(problem).errors(problem.tensor(theta.numpy())[None])
    return float(torch.sqrt(torch.cat([e.reshape(-1) for e in errors]).square().mean()))


Recorder = Callable[[Desired, int], Trajectory]
Scorer = Callable[[Estimator, dict[str, float]], np.ndarray]


def _replay_fits(
    pf: ProblemFile, record: Recorder, estimator: str, desired: Desired, draws: int,
    heldout: Trajectory, score: Scorer,
) -> tuple[np.ndarray, list[float], str | None]:  # fmt: skip
    """``([K, n] score of each fit, K held-out RMSEs, the refusal or None)``: ``draws`` MuJoCo
    recordings along ``desired`` (sensor-noise seeds ``0 …``), each fitted with ``estimator``
    on the problem file as shipped and scored by ``score(estimator run, posterior mean)``."""
    rows, rmse = [], []
    for draw in range(draws):
        try:
            traj = record(desired, draw)
        except SimulationError as exc:
            return np.array(rows), rmse, str(exc)
        problem = pf.build(pf.preprocess(Dataset([traj])), device="cpu")
        resolved = resolve_estimator(estimator, pf.estimator)
        result = run_fit(resolved, problem, threads=1)
        mean = result.posterior.as_dict()
        rows.append(score(resolved.estimator, mean))
        rmse.append(_heldout_rmse(pf, heldout, mean))
    return np.array(rows), rmse, None


def _payload_score(_: Estimator, mean: dict[str, float]) -> np.ndarray:
    """``[4]`` the fitted payload's mass and centre of mass."""
    return np.array([mean[n] for n in PAYLOAD_TRUTH])


def _payload_records(
    pf: ProblemFile, planner: ExcitationPlanner, motions: dict[str, Desired], draws: int,
    heldout: Trajectory, note: str,
) -> list[Record]:  # fmt: skip
    records = []
    names = planner.info.names
    truth = np.array(list(PAYLOAD_TRUTH.values()))
    for case, desired in motions.items():
        _, q, v, a = desired
        cov = _predicted_covariance(pf, planner, desired)
        order = [names.index(n) for n in PAYLOAD_TRUTH]
        predicted = np.sqrt(np.diag(cov))[order]
        scored = np.round(planner.t_scored / engine.CONTROL_PERIOD).astype(int)
        with torch.no_grad():
            F = planner.info.fisher(*(torch.as_tensor(x[scored]) for x in (q, v, a))).numpy()
        crb = planner.info.cramer_rao(F)[1][order]  # under the file's torque_std, white
        estimates, rmse, refused = _replay_fits(pf, _payload_recording, "lm", desired, draws,
                                                heldout, _payload_score)  # fmt: skip
        where = f"panda_payload/{case}/mujoco"
        if refused is not None or estimates.shape[0] < 2:
            why = f"of {draws}: {refused}; {note}"
            records.append(Record(where, "draws_run", float(estimates.shape[0]), "",
                                  better="higher", notes=why))  # fmt: skip
            print(f"{where}: {estimates.shape[0]} of {draws} draws ran ({refused})")
            continue
        spread = np.std(estimates, axis=0, ddof=1)
        errors = np.abs(estimates - truth).mean(axis=0)
        values = {
            "predicted_mass_g": (1e3 * predicted[0], "g"),
            "spread_mass_g": (1e3 * spread[0], "g"),
            "predicted_com_mm": (1e3 * predicted[1:].max(), "mm"),
            "spread_com_mm": (1e3 * spread[1:].max(), "mm"),
            "mean_err_mass_g": (1e3 * errors[0], "g"),
            "mean_err_com_mm": (1e3 * errors[1:].max(), "mm"),
            "heldout_rmse_nm": (float(np.mean(rmse)), "N·m"),
            "draws_run": (float(estimates.shape[0]), ""),
        }
        for k, name in enumerate(PAYLOAD_TRUTH):
            values[f"spread_over_sigma_{name.split('/')[1]}"] = (spread[k] / predicted[k], "")
        for k, name in enumerate(PAYLOAD_TRUTH):
            values[f"spread_over_crb_{name.split('/')[1]}"] = (spread[k] / crb[k], "")
        for metric, (value, unit) in values.items():
            records.append(Record(where, metric, float(value), unit,
                                  better=_BETTER.get(metric, "lower"),
                                  notes=f"{draws} MuJoCo draws, lm; {note}"))  # fmt: skip
        ratios = ", ".join(f"{spread[k] / predicted[k]:.3g}" for k in range(4))
        print(f"{where} ({draws} draws, lm): spread / predicted σ = {ratios}; mean |error| mass "
              f"{1e3 * errors[0]:.3g} g, COM {1e3 * errors[1:].max():.3g} mm; held-out RMSE "
              f"{np.mean(rmse):.4g} N·m")  # fmt: skip
    return records


def _whole_arm_score(planner: ExcitationPlanner) -> Scorer:
    """The score of a ``consistent_lsq`` fit: ``[2 r]`` its base parameters ``β = T x`` (the
    planner's, :class:`~dynid.model.base_parameters.BaseParameters`) and their σ from the fit's
    covariance of ``x``."""
    base = planner.info.base
    assert base is not None
    problem = planner.problem
    layout = LinearLayout.of(problem)

    def score(estimator: Estimator, mean: dict[str, float]) -> np.ndarray:
        assert isinstance(estimator, ConsistentLeastSquares)
        x = layout.x_of_theta(np.array([mean[n] for n in problem.spec.names]))
        sigma = np.sqrt(np.clip(np.diag(base.covariance(estimator.standard_covariance())), 0, None))
        return np.concatenate([base.values(x), sigma])

    return score


WHOLE_ARM_METRICS = {
    "err_rms_design_sigma": "",
    "predicted_err_rms_design_sigma": "",
    "bias_rms_design_sigma": "",
    "err_rms_design_sigma_inertial": "",
    "err_rms_design_sigma_joint": "",
    "damping_mae": "N·m·s/rad",
    "coulomb_mae": "N·m",
    "offset_mae": "N·m",
    "spread_over_sigma_median": "",
    "spread_over_sigma_min": "",
    "spread_over_sigma_max": "",
    "within_1p5_pct": "%",
    "coverage_pct": "%",
    "heldout_rmse_nm": "N·m",
    "draws_run": "",
}
"""Per whole-arm motion on MuJoCo (module notes), with their units."""


def whole_arm_metrics(
    names: list[str], truth: np.ndarray, fits: np.ndarray, predicted: np.ndarray,
    design: np.ndarray,
) -> dict[str, float]:  # fmt: skip
    """The scores of one motion's fits of the whole arm's base parameters (module notes).

    Args:
        names: ``r`` base-parameter expressions (leading member first).
        truth: ``[r]`` the hidden robot's base parameters.
        fits: ``[K, 2 r]`` per draw the fitted base parameters and their σ (K ≥ 2).
        predicted: ``[r]`` this motion's predicted σ; design: ``[r]`` the designed motion's,
            the unit every motion's errors are measured in.
    """
    r = truth.size
    beta, sigma = fits[:, :r], fits[:, r:]
    err = beta - truth
    z = err / design
    joint = np.array([n.split(" ")[0].rsplit("/", 1)[1] in ("damping", "coulomb", "torque_offset")
                      for n in names])  # fmt: skip
    spread = np.std(beta, axis=0, ddof=1)
    ratio = spread / predicted

    def mae(field: str) -> float:
        cols = [k for k, n in enumerate(names) if n.endswith(f"/{field}")]
        return float(np.abs(err[:, cols]).mean())

    return {
        "err_rms_design_sigma": float(np.sqrt(np.mean(z**2))),
        "predicted_err_rms_design_sigma": float(np.sqrt(np.mean((predicted / design) ** 2))),
        "bias_rms_design_sigma": float(np.sqrt(np.mean(z.mean(axis=0) ** 2))),
        "err_rms_design_sigma_inertial": float(np.sqrt(np.mean(z[:, ~joint] ** 2))),
        "err_rms_design_sigma_joint": float(np.sqrt(np.mean(z[:, joint] ** 2))),
        "damping_mae": mae("damping"),
        "coulomb_mae": mae("coulomb"),
        "offset_mae": mae("torque_offset"),
        "spread_over_sigma_median": float(np.median(ratio)),
        "spread_over_sigma_min": float(ratio.min()),
        "spread_over_sigma_max": float(ratio.max()),
        "within_1p5_pct": 100.0 * float(np.mean((ratio >= 1 / 1.5) & (ratio <= 1.5))),
        "coverage_pct": 100.0 * float(np.mean(np.abs(err) <= 1.96 * sigma)),
    }


@dataclass(frozen=True)
class Variant:
    """How the whole arm is replayed: with the hidden robot's ``dry_friction`` or without,
    fitted with ``likelihood.effort_delay`` ``effort_delay`` (s), the ``metrics`` recorded, and
    what the notes say."""

    dry_friction: bool
    effort_delay: float
    metrics: tuple[str, ...]
    note: str


_DIAGNOSIS_METRICS = ("err_rms_design_sigma", "bias_rms_design_sigma",
                      "err_rms_design_sigma_inertial", "err_rms_design_sigma_joint",
                      "within_1p5_pct", "coverage_pct", "heldout_rmse_nm")  # fmt: skip
WHOLE_ARM_VARIANTS = {
    "mujoco": Variant(True, engine.EFFORT_DELAY, tuple(WHOLE_ARM_METRICS),
                      f"effort_delay {engine.EFFORT_DELAY:g} s"),
    "mujoco_no_delay": Variant(True, 0.0, _DIAGNOSIS_METRICS,
                               "diagnosis: effort_delay 0 (the torque's hold not modelled)"),
    "mujoco_no_dry": Variant(False, engine.EFFORT_DELAY, _DIAGNOSIS_METRICS,
                             "diagnosis: the hidden robot without its dry friction"),
}  # fmt: skip
"""The whole arm's replays, by case suffix: the benchmark's, and the diagnoses of the two
differences between the model and MuJoCo (module notes)."""


def _whole_arm_records(
    pf: ProblemFile, planner: ExcitationPlanner, motions: dict[str, Desired], draws: int,
    held: Desired, note: str, suffix: str = "mujoco", robot_seed: int = ROBOT_SEED,
) -> list[Record]:  # fmt: skip
    """The whole arm's MuJoCo replay ``WHOLE_ARM_VARIANTS[suffix]`` of every motion (module
    notes) by the hidden robot of ``robot_seed`` (cases ``…/<suffix>``, or
    ``…/<suffix>_robot<seed>`` for another than :data:`ROBOT_SEED`) with its held-out recording
    along ``held``; ``motions`` starts with the designed one, whose predicted σ are the unit of
    every motion's errors."""
    variant = WHOLE_ARM_VARIANTS[suffix]
    pf = with_effort_delay(pf, variant.effort_delay)
    hidden = hidden_arm(variant.dry_friction, robot_seed)
    if robot_seed != ROBOT_SEED:
        suffix = f"{suffix}_robot{robot_seed}"
    record = functools.partial(_whole_arm_recording, hidden=hidden)
    heldout = record(held, HELDOUT_SEED)
    names = list(planner.info.names)
    truth = planner.info.base.values(whole_arm_truth(planner, hidden))  # type: ignore[union-attr]
    score = _whole_arm_score(planner)
    records: list[Record] = []
    design: np.ndarray | None = None
    for case, desired in motions.items():
        predicted = np.sqrt(np.diag(_predicted_covariance(pf, planner, desired)))
        design = predicted if design is None else design
        fits, rmse, refused = _replay_fits(pf, record, WHOLE_ARM_ESTIMATOR, desired, draws,
                                           heldout, score)  # fmt: skip
        where = f"panda_whole_arm/{case}/{suffix}"
        if refused is not None or fits.shape[0] < 2:
            records.append(Record(where, "draws_run", float(fits.shape[0]), "", better="higher",
                                  notes=f"of {draws}: {refused}; {note}"))  # fmt: skip
            print(f"{where}: {fits.shape[0]} of {draws} draws ran ({refused})")
            continue
        values = whole_arm_metrics(names, truth, fits, predicted, design)
        values["heldout_rmse_nm"] = float(np.mean(rmse))
        values["draws_run"] = float(fits.shape[0])
        why = (f"{draws} MuJoCo draws, {WHOLE_ARM_ESTIMATOR}, robot seed {robot_seed}, "
               f"{variant.note}; {note}")  # fmt: skip
        for metric in variant.metrics if robot_seed == ROBOT_SEED else _DIAGNOSIS_METRICS:
            better = "higher" if metric in ("within_1p5_pct", "draws_run") else "lower"
            records.append(Record(where, metric, values[metric], WHOLE_ARM_METRICS[metric],
                                  better=better, notes=why))  # fmt: skip
        r = truth.size
        spread = np.std(fits[:, :r], axis=0, ddof=1)
        bias = (fits[:, :r].mean(axis=0) - truth) / design
        worst = np.argsort(-np.abs(bias))[:3]
        print(f"{where} ({fits.shape[0]} draws, {WHOLE_ARM_ESTIMATOR}): error RMS "
              f"{values['err_rms_design_sigma']:.3g} designed σ (predicted "
              f"{values['predicted_err_rms_design_sigma']:.3g}), spread / predicted σ median "
              f"{np.median(spread / predicted):.3g} [{values['spread_over_sigma_min']:.3g}, "
              f"{values['spread_over_sigma_max']:.3g}], within 1.5: "
              f"{values['within_1p5_pct']:.0f} %, coverage {values['coverage_pct']:.0f} %, "
              f"held-out RMSE {values['heldout_rmse_nm']:.4g} N·m; largest mean errors "
              "(designed σ): " + ", ".join(f"{names[k]} {bias[k]:.2g}" for k in worst))  # fmt: skip
    return records


_UNITS = {"log_det": "", "cond": "", "min_eig": "", "sigma_mass_g": "g", "sigma_com_mm": "mm",
          "planning_s": "s"}  # fmt: skip
_BETTER = {"log_det": "higher", "min_eig": "higher"}


def run(args: argparse.Namespace) -> list[Record]:
    """Plan, score and compare (module notes); prints one table per problem."""
    records: list[Record] = []
    # read as the whole-arm problem file reads it: resampled onto 1 kHz (its stamps jitter)
    whole_arm = read_problem_file(ROOT / "config" / "problems" / "panda_whole_arm.yaml")
    recorded = whole_arm.load_dataset(shared_data_dir() / GAZ_BAG, holdout=False)
    for name in [n for n in args.problems.split(",") if n]:
        pf = read_problem_file(ROOT / "config" / "problems" / f"{name}.yaml")
        gaz = pf.build(pf.preprocess(recorded), device="cpu")
        traj = gaz.dataset[0]
        duration = round(float(traj.t[-1] - traj.t[0]), 3)
        settings = DesignSettings(duration=duration, seed=args.seed)
        if args.quick:
            settings = DesignSettings(duration=duration, seed=args.seed, starts=1, iterations=15)
        started = time.perf_counter()
        exc = design_excitation(pf, settings)
        planning = time.perf_counter() - started
        planner = ExcitationPlanner(pf, settings)
        cases = {"designed": _scores(planner, exc.information_motion)}
        cases["gaz2019"] = _scores(planner, planner.info.fisher_of_recordings(gaz))
        rng = np.random.default_rng(args.seed + 1)
        joints = list(planner.robot.joint_names)
        motions = {"designed": _designed_desired(planner, exc.coefficients),
                   "gaz2019": _recorded_desired(traj, joints)}  # fmt: skip
        for k in range(args.random):
            c, _ = planner.feasible(planner.random_coefficients(rng))
            cases[f"random/{k}"] = _scores(planner, _motion_information(planner, c))
            motions[f"random/{k}"] = _designed_desired(planner, c)
        note = (f"{duration:g} s, {settings.harmonics} harmonics, {settings.starts} starts, "
                f"seed {args.seed}; 2-core CPU shared with other jobs (under load)")  # fmt: skip
        for case, scores in cases.items():
            for metric, value in scores.items():
                paper = GAZ_CONDITION if (case, metric, name) == (
                    "gaz2019", "cond", "panda_whole_arm") else None  # fmt: skip
                records.append(Record(f"{name}/{case}", metric, float(value), _UNITS[metric],
                                      paper=paper, better=_BETTER.get(metric, "lower"),
                                      notes=note))  # fmt: skip
        records.append(Record(f"{name}/designed", "planning_s", planning, "s",
                              target=PROBLEMS[name], notes=note))  # fmt: skip
        width = max(len(c) for c in cases)
        print(f"\n{name}: {duration:g} s, planned in {planning:.1f} s")
        metrics = list(next(iter(cases.values())))
        print(f"{'motion':<{width}}  " + "  ".join(f"{m:>12}" for m in metrics))
        for case, scores in cases.items():
            print(f"{case:<{width}}  " + "  ".join(f"{scores[m]:>12.5g}" for m in metrics))
        if args.mujoco_draws > 0:
            draws = 3 if args.quick else args.mujoco_draws
            c_held, _ = planner.feasible(
                planner.random_coefficients(np.random.default_rng(HELDOUT_SEED))
            )
            held = _designed_desired(planner, c_held)
            if name == "panda_whole_arm":
                diagnoses = args.diagnoses and not args.quick
                for suffix in WHOLE_ARM_VARIANTS if diagnoses else ["mujoco"]:
                    records += _whole_arm_records(pf, planner, motions, draws, held, note,
                                                  suffix)  # fmt: skip
                seeds = [] if args.quick else [int(s) for s in args.robot_seeds.split(",") if s]
                for seed in seeds:
                    records += _whole_arm_records(pf, planner, motions, draws, held, note,
                                                  robot_seed=seed)  # fmt: skip
            else:
                heldout = _payload_recording(held, HELDOUT_SEED)
                records += _payload_records(with_effort_delay(pf, engine.EFFORT_DELAY),
                                            planner, motions, draws, heldout, note)  # fmt: skip
    return records
