"""estimator node over real DDS: a run publishes particles, markers, status and the URDF;
failures set status FAILED with the reason and the node keeps serving.

The problem is a tiny double-pendulum identification (two link lengths, 8 particles, a few
iterations) on a short synthetic segment, so each run takes seconds on a busy CPU.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseWithCovarianceStamped
from node_helpers import (
    ROOT,
    STARTUP_S,
    call_service,
    call_trigger,
    collect,
    executable,
    latched_history,
    output_of,
    ros_args,
    start_estimator,
    wait_for,
)
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
from rclpy.parameter import Parameter, parameter_value_to_python
from ros_helpers import spin_until, stop
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from dynid.data import Trajectory, write_bag
from dynid.fit import output_names
from dynid.posterior import Posterior
from dynid_msgs.msg import EstimatorStatus, ParameterEstimate, ParticleSet, TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import (
    particle_set_to_posterior,
    segment_to_trajectory,
    trajectory_to_segment,
)

NUM_PARTICLES = 8
ITERATIONS = 4


@pytest.fixture
def problem_file(tmp_path):
    config = {
        "name": "dp_node_test",
        "robot": {"name": "double_pendulum"},
        "parameters": [
            {"name": "link1/length", "lower": 1.0, "upper": 2.5, "unit": "m"},
            {"name": "link2/length", "lower": 1.0, "upper": 2.5, "unit": "m"},
        ],
        "data": {"source": "bag", "dt": 0.01},
        "control": {"type": "none"},
        "observe": {"joints": "all"},
        "likelihood": {"obs_std": 0.01, "shooting": "multiple", "windows": 2},
        "estimator": {
            "name": "csvgd",
            "settings": {"num_particles": NUM_PARTICLES, "max_iterations": ITERATIONS,
                         "learning_rate": 0.05, "seed": 0},
        },
    }  # fmt: skip
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def segment(scale: float = 1.0) -> TrajectorySegment:
    """20 samples (0.2 s) of a swinging double pendulum; ``scale`` blows the velocities up."""
    t = np.arange(20) * 0.01
    q = np.stack([np.pi / 2 * np.cos(3 * t), 0.2 * np.sin(5 * t)], axis=1)
    dq = np.stack([-3 * np.pi / 2 * np.sin(3 * t), np.cos(5 * t)], axis=1) * scale
    traj = Trajectory(t=t, q=q, joint_names=["joint1", "joint2"], dq=dq,
                      meta={"t0_ns": 1_700_000_000_000_000_000})  # fmt: skip
    return trajectory_to_segment(traj, source="test:synthetic", frame_id="world")


def _latest_state(statuses: list) -> int | None:
    return statuses[-1].state if statuses else None


def test_run_publishes_posterior_markers_status_and_identified_urdf(
    test_node, spawn, tmp_path, problem_file
) -> None:
    out = tmp_path / "out"
    proc = spawn(
        executable("estimator"),
        *ros_args({"problem": str(problem_file), "publish_every": 2, "output_dir": str(out)}),
    )
    seg_pub = test_node.create_publisher(TrajectorySegment, "/segment", qos.reliable(10))
    statuses = collect(test_node, EstimatorStatus, "/estimator/status", latched_history())
    particles = collect(test_node, ParticleSet, "/estimator/particles", qos.reliable(10))
    estimates = collect(test_node, ParameterEstimate, "/estimator/estimate", qos.reliable(10))
    markers = collect(test_node, MarkerArray, "/estimator/markers", qos.reliable(10))
    covs = collect(test_node, PoseWithCovarianceStamped, "/estimator/com_covariance",
                   qos.reliable(10))  # fmt: skip
    urdfs = collect(test_node, String, "/estimator/robot_description", qos.latched())
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    wait_for(test_node, lambda: seg_pub.get_subscription_count() > 0, "estimator", proc,
             STARTUP_S)  # fmt: skip
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.IDLE, "idle", proc)
    bad = segment()
    bad.position = bad.position[:-1]  # malformed: counted and skipped
    seg_pub.publish(bad)
    description = test_node.create_publisher(String, "/robot_description", qos.latched())
    description.publish(String(data="<html><body/></html>"))  # XML, but not a URDF: skipped
    seg_pub.publish(segment())
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.CONVERGED,
             "converged status", proc, 180.0)  # fmt: skip
    final = statuses[-1]
    assert final.iteration == ITERATIONS
    assert "iteration budget" in final.message
    assert EstimatorStatus.RUNNING in {s.state for s in statuses}
    # the first iteration publishes (an estimate at once), then every publish_every (2)
    wait_for(test_node, lambda: len(particles) == 1 + ITERATIONS // 2 and urdfs, "outputs", proc)
    post = particle_set_to_posterior(particles[-1])
    assert post.names == ["link1/length", "link2/length"]
    assert post.num_particles == NUM_PARTICLES
    assert np.isfinite(post.particles).all()
    assert np.all((post.particles >= 1.0) & (post.particles <= 2.5))
    np.testing.assert_allclose(estimates[-1].mean, post.mean())
    assert len(estimates[-1].covariance) == 4
    # no point-like parameters: one scatter column per parameter, one point per particle
    assert [len(m.points) for m in markers[-1].markers] == [NUM_PARTICLES] * 2
    assert {m.header.frame_id for m in markers[-1].markers} == {"dynid_parameters"}
    assert not covs
    # identified URDF: link2's joint placement carries the mean link1 length
    assert "<robot" in urdfs[-1].data
    assert f"{post.mean()[0]:.6g}"[:5] in urdfs[-1].data
    assert (out / "double_pendulum_identified.urdf").read_text() == urdfs[-1].data
    assert yaml.safe_load((out / "posterior.yaml").read_text())["iteration"] == ITERATIONS
    wait_for(test_node, lambda: any(s.name.endswith(": segment") and s.message == "1 rejected"
                                    for d in diags for s in d.status),
             "the rejected segment on /diagnostics", proc)  # fmt: skip
    wait_for(test_node, lambda: any(s.name.endswith(": robot_description")
                                    and any(kv.key == "data: root <html>, expected <robot>"
                                            for kv in s.values)
                                    for d in diags for s in d.status),
             "the rejected robot_description on /diagnostics", proc)  # fmt: skip
    assert call_trigger(test_node, "/estimator/save").success
    assert call_trigger(test_node, "/estimator/reset").success
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.IDLE, "reset", proc)
    assert not call_trigger(test_node, "/estimator/run").success  # no segment after reset
    assert proc.poll() is None, output_of(proc)


def test_failing_run_sets_failed_with_reason_and_node_keeps_serving(
    test_node, spawn, tmp_path, problem_file
) -> None:
    proc, seg_pub, statuses = start_estimator(
        test_node, spawn, problem_file, tmp_path / "out", publish_every=2
    )
    seg_pub.publish(segment(1e150))  # the simulation overflows to non-finite states
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.FAILED,
             "failed status", proc, 180.0)  # fmt: skip
    message = statuses[-1].message
    assert "non-finite" in message, message
    assert not math.isnan(statuses[-1].elapsed_s)
    # still serving: services answer, a new run can be queued, the process lives
    assert call_trigger(test_node, "/estimator/run").success
    assert call_trigger(test_node, "/estimator/reset").success
    assert proc.poll() is None, output_of(proc)


def test_a_segment_that_does_not_fit_the_problem_is_dropped(
    test_node, spawn, tmp_path, problem_file
) -> None:
    """A segment whose joints are not the robot's fails its run and is dropped from the kept
    segments (``max_segments`` 2), so the next segment's run succeeds."""
    proc, seg_pub, statuses = start_estimator(
        test_node, spawn, problem_file, tmp_path / "out", max_segments=2
    )

    def ended(state: int, count: int) -> Callable[[], bool]:
        return lambda: sum(s.state == state for s in statuses) == count

    seg_pub.publish(segment())
    wait_for(test_node, ended(EstimatorStatus.CONVERGED, 1), "the first run", proc, 180.0)
    other = segment()
    other.joint_names = ["elbow", "joint2"]
    other.source = "test:other-robot"
    seg_pub.publish(other)
    wait_for(test_node, ended(EstimatorStatus.FAILED, 1), "the failing run", proc, 180.0)
    assert "elbow" in statuses[-1].message, statuses[-1].message
    seg_pub.publish(segment())
    wait_for(test_node, ended(EstimatorStatus.CONVERGED, 2), "the run after it", proc, 180.0)
    stop(proc)
    assert "segment 'test:other-robot' dropped from the kept segments" in output_of(proc)


def test_a_segment_arriving_during_a_run_is_fitted_from_that_runs_posterior(
    test_node, spawn, tmp_path, problem_file
) -> None:
    """The run a segment queues while another runs warm-starts from that run's posterior (read
    when the queued run starts, not when it was queued)."""
    proc, seg_pub, statuses = start_estimator(
        test_node, spawn, problem_file, tmp_path / "out", max_iterations=40, publish_every=1
    )
    seg_pub.publish(segment())
    wait_for(test_node, lambda: any(s.state == EstimatorStatus.RUNNING and s.iteration > 0
                                    for s in statuses), "the first run", proc, 300.0)  # fmt: skip
    seg_pub.publish(segment())  # queued while the first run goes on (39 iterations left)
    wait_for(test_node, lambda: sum(s.state == EstimatorStatus.CONVERGED for s in statuses) == 2,
             "both runs", proc, 600.0)  # fmt: skip
    stop(proc)
    starts = [line.split("segment(s), ")[1] for line in output_of(proc).splitlines()
              if "segment(s), " in line]  # fmt: skip
    assert starts == ["cold start", "warm start from the previous posterior"], starts


def _parameters(test_node, node: str, proc: subprocess.Popen) -> dict[str, Any]:
    """Every parameter of ``node`` as ``ros2 param dump`` reads them: the names from
    ``list_parameters``, then one ``get_parameters`` call for all of them."""
    listed = call_service(test_node, ListParameters, f"{node}/list_parameters",
                          ListParameters.Request(), STARTUP_S, proc).result.names  # fmt: skip
    got = call_service(test_node, GetParameters, f"{node}/get_parameters",
                       GetParameters.Request(names=listed), proc=proc).values  # fmt: skip
    assert len(got) == len(listed), f"{node}: {len(got)} values for {len(listed)} names"
    return {n: parameter_value_to_python(v) for n, v in zip(listed, got, strict=True)
            if v.type != ParameterType.PARAMETER_NOT_SET}  # fmt: skip


def _set(test_node, proc: subprocess.Popen, **values: Any) -> list[tuple[bool, str]]:
    """``ros2 param set /estimator NAME VALUE`` for each of ``values``: (successful, reason)."""
    request = SetParameters.Request(
        parameters=[Parameter(n, value=v).to_parameter_msg() for n, v in values.items()]
    )
    results = call_service(test_node, SetParameters, "/estimator/set_parameters", request,
                           proc=proc).results  # fmt: skip
    return [(r.successful, r.reason) for r in results]


def test_every_parameter_has_a_value_and_the_run_time_ones_are_settable(
    test_node, spawn, tmp_path, problem_file
) -> None:
    """``ros2 param dump`` of the estimator and the recorder shows every parameter (empty lists
    typed as such); ``publish_every``, ``max_iterations`` and ``estimator_settings`` are set at
    run time, validated, and the budget applies to the next run; read-only ones are refused."""
    recorder = spawn(executable("recorder"),
                     *ros_args({"output_dir": str(tmp_path / "rec")}))  # fmt: skip
    proc, seg_pub, statuses = start_estimator(test_node, spawn, problem_file, tmp_path / "out")
    values = _parameters(test_node, "/estimator", proc)
    for name in ("estimator", "urdf_file", "estimator_settings", "marker_frames", "max_iterations",
                 "update_robot_state_publisher", "publish_every", "use_sim_time"):  # fmt: skip
        assert name in values, f"/estimator {name} has no value: {sorted(values)}"
    assert values["marker_frames"] == []
    assert values["estimator_settings"] == "{}"
    rec = _parameters(test_node, "/recorder", recorder)
    for name in ("joints", "tf_frames", "mocap_topics", "storage", "segment_mode", "command_types"):
        assert name in rec, f"/recorder {name} has no value: {sorted(rec)}"
    assert rec["tf_frames"] == []
    assert rec["storage"] == "mcap"
    ((ok, reason),) = _set(test_node, proc, publish_every=0)
    assert not ok
    assert "publish_every" in reason, reason
    ((ok, reason),) = _set(test_node, proc, estimator_settings="[1, 2]")
    assert not ok
    assert "YAML mapping" in reason, reason
    ((ok, reason),) = _set(test_node, proc, max_iterations=-1)
    assert not ok
    assert "max_iterations" in reason, reason
    ((ok, reason),) = _set(test_node, proc, problem="furuta")
    assert not ok
    assert "read-only" in reason, reason
    assert _set(test_node, proc, max_iterations=2, publish_every=5) == [(True, ""), (True, "")]
    assert _parameters(test_node, "/estimator", proc)["max_iterations"] == 2
    seg_pub.publish(segment())
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.CONVERGED,
             "the run on the budget set at run time", proc, 180.0)  # fmt: skip
    assert statuses[-1].iteration == 2, statuses[-1].message


def test_a_run_on_a_problem_with_held_out_data_reports_its_validation(
    test_node, spawn, tmp_path, shared_recording
) -> None:
    """The whole-arm Panda problem names a held-out recording (``validation.bags``): a run on a
    segment of the fitted recording states the identified and the nominal model's held-out
    torque RMSE in its CONVERGED status and on ``/diagnostics``; the identified one is lower."""
    from dynid.data import read_bag
    from dynid.problem_file import read_problem_file

    shared_recording("panda-gaz2019")
    problem = ROOT / "config" / "problems" / "panda_whole_arm.yaml"
    source = read_problem_file(problem).config.data.source
    bag = source.path
    # on the 1 kHz grid, as a recorder with rate_hz 1000 cuts it
    (traj,) = read_bag(bag, source.layout, rate=source.rate)[0]
    diags = collect(test_node, DiagnosticArray, "/diagnostics", qos.reliable(10))
    proc, seg_pub, statuses = start_estimator(test_node, spawn, problem, tmp_path / "out")
    seg_pub.publish(trajectory_to_segment(traj, source=str(bag), frame_id="world"))
    wait_for(test_node, lambda: _latest_state(statuses) in (EstimatorStatus.CONVERGED,
                                                            EstimatorStatus.FAILED),
             "the consistent_lsq run", proc, 300.0)  # fmt: skip
    message = statuses[-1].message
    assert statuses[-1].state == EstimatorStatus.CONVERGED, message
    assert "held-out torque RMSE" in message, message
    assert message.endswith("on repeat"), message

    def scores() -> dict[str, str]:
        return {v.key: v.value for d in diags for s in d.status for v in s.values
                if v.key.startswith("validation_")}  # fmt: skip

    wait_for(test_node, lambda: "validation_rmse_identified" in scores(), "the scores", proc)
    values = scores()
    identified = float(values["validation_rmse_identified"])
    assert 0.0 < identified < float(values["validation_rmse_nominal"])
    assert f"held-out torque RMSE {identified:.4g} N*m" in message


@pytest.mark.parametrize(
    ("name", "parameters", "problem_settings_used"),
    [
        ("csvgd", {}, True),
        ("emcee", {"estimator_settings": "{num_particles: 8}", "max_iterations": 4}, False),
        ("proprio", {"estimator_settings": "{starts: 2}", "max_iterations": 4}, False),
        ("lm", {"max_iterations": 4}, False),
        ("svgd", {"estimator_settings": "{num_particles: 8}", "max_iterations": 4}, False),
        ("sgld", {"estimator_settings": "{num_particles: 4}", "max_iterations": 8}, False),
        ("cem", {"estimator_settings": "{num_particles: 8}", "max_iterations": 3}, False),
    ],
)
def test_any_estimator_runs_on_a_problem_file_naming_another(
    test_node, spawn, tmp_path, problem_file, name, parameters, problem_settings_used
) -> None:
    """``estimator:=<name>`` on a problem file whose ``estimator:`` section is CSVGD's: the
    file's settings (learning_rate 0.05, 8 particles) configure only CSVGD; the others start
    from their own defaults, and each run publishes particles and an estimate under its name."""
    particles = collect(test_node, ParticleSet, "/estimator/particles", qos.reliable(10))
    estimates = collect(test_node, ParameterEstimate, "/estimator/estimate", qos.reliable(10))
    proc, seg_pub, statuses = start_estimator(
        test_node,
        spawn,
        problem_file,
        tmp_path / "out",
        estimator=name,
        publish_every=2,
        **parameters,
    )
    seg_pub.publish(segment())
    wait_for(test_node, lambda: _latest_state(statuses) in (EstimatorStatus.CONVERGED,
                                                            EstimatorStatus.FAILED),
             f"the {name} run", proc, 180.0)  # fmt: skip
    assert statuses[-1].state == EstimatorStatus.CONVERGED, statuses[-1].message
    assert {s.estimator for s in statuses} == {name}
    wait_for(test_node, lambda: bool(particles and estimates), "particles and estimate", proc)
    assert particles[-1].estimator.split("/")[0] == name  # proprio/adam: method/optimizer
    post = particle_set_to_posterior(particles[-1])
    assert post.names == ["link1/length", "link2/length"]
    assert np.isfinite(post.particles).all()
    assert list(estimates[-1].names) == post.names
    assert np.isfinite(estimates[-1].mean).all()
    if name == "lm":  # one particle and its linearised covariance
        assert post.num_particles == 1
        cov = np.asarray(estimates[-1].covariance).reshape(2, 2)
        assert np.isfinite(cov).all()
        assert (np.diag(cov) > 0).all()
    stop(proc)
    (started,) = [line for line in output_of(proc).splitlines() if f"{name} on " in line]
    assert ("'learning_rate': 0.05" in started) is problem_settings_used, started
    assert ("'num_particles': 8" in started) is (name in ("csvgd", "emcee", "svgd", "cem")), started


@pytest.mark.parametrize(
    ("signals", "late"),
    [(("SIGTERM",), False), (("SIGINT",), False), (("SIGINT", "SIGINT"), False),
     (("SIGINT", "SIGINT"), True)],
)  # fmt: skip
def test_a_run_stopped_by_a_signal_saves_the_posterior_it_reached(
    test_node, spawn, tmp_path, problem_file, signals, late
) -> None:
    """SIGTERM, Ctrl-C, a second Ctrl-C while saving, or one after the posterior is saved
    (``late``): the run ends at its current iteration, writes the files a finished run writes
    (atomically) and logs where, and the node exits with status 0."""
    out = tmp_path / "out"
    proc = spawn(
        executable("estimator"),
        *ros_args({"problem": str(problem_file), "output_dir": str(out),
                   "max_iterations": 100000, "publish_every": 1}),
        # Ctrl-C raises KeyboardInterrupt, as in a terminal, however pytest itself was started
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    seg_pub = test_node.create_publisher(TrajectorySegment, "/segment", qos.reliable(10))
    statuses = collect(test_node, EstimatorStatus, "/estimator/status", latched_history())
    wait_for(test_node, lambda: seg_pub.get_subscription_count() > 0, "estimator", proc,
             STARTUP_S)  # fmt: skip
    seg_pub.publish(segment())
    running = lambda: any(s.state == EstimatorStatus.RUNNING and s.iteration >= 3  # noqa: E731
                          for s in statuses)  # fmt: skip
    wait_for(test_node, running, "a few iterations", proc, 180.0)
    assert not (out / "particles.npz").exists()
    for name in signals:
        proc.send_signal(getattr(signal, name))
        spin_until(test_node, lambda: (out / "particles.npz").exists(), 30.0 if late else 0.05)
    status = proc.wait(timeout=60)
    log = proc.stdout.read() if proc.stdout else ""
    assert status == 0, log  # a clean exit, however many signals
    assert "Traceback" not in log, log
    assert f"{signals[0]}: shutting down" in log, log
    assert "saved the posterior it reached" in log, log
    assert str(out / "posterior.yaml") in log, log
    post = Posterior.load_npz(out / "particles.npz")
    assert post.names == ["link1/length", "link2/length"]
    assert post.num_particles == NUM_PARTICLES
    assert np.isfinite(post.particles).all()
    assert post.meta["interrupted"] is True
    assert post.iteration >= 3
    summary = yaml.safe_load((out / "posterior.yaml").read_text())
    assert summary["meta"]["interrupted"] is True
    assert "<robot" in (out / "double_pendulum_identified.urdf").read_text()
    assert not [f.name for f in out.iterdir() if f.name.startswith(".")]  # no temporary files


# provenance that differs by design between a run of `dynid fit` and one of the node: how the
# data arrived (the bag's reader summary, the command line, the node's problem path) and time
PROVENANCE = {"command", "problem", "recordings", "max_skipped_percent", "wall_s"}


@pytest.mark.parametrize("validation", [None, {"fraction": 0.25}])
def test_the_node_and_dynid_fit_write_the_same_outputs(
    test_node, spawn, tmp_path, problem_file, validation
) -> None:
    """One segment to the node, the same samples as a bag to ``dynid fit``, the same problem
    file and seed: the same output files with the same posterior (up to provenance); with
    ``validation.fraction`` both hold out the same tail and score the fit on it."""
    if validation is not None:
        config = yaml.safe_load(problem_file.read_text())
        problem_file.write_text(yaml.safe_dump({**config, "validation": validation}))
    msg = segment()
    bag = write_bag(segment_to_trajectory(msg), tmp_path / "segment_bag")
    cli_out, node_out = tmp_path / "cli", tmp_path / "node"
    done = subprocess.run(
        [sys.executable, "-m", "dynid.cli", "fit", "--bag", str(bag), "--problem",
         str(problem_file), "-o", str(cli_out), "--no-progress"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    settings = {"problem": str(problem_file), "output_dir": str(node_out)}
    proc = spawn(executable("estimator"), *ros_args(settings))
    seg_pub = test_node.create_publisher(TrajectorySegment, "/segment", qos.reliable(10))
    statuses = collect(test_node, EstimatorStatus, "/estimator/status", latched_history())
    wait_for(test_node, lambda: seg_pub.get_subscription_count() > 0, "estimator", proc,
             STARTUP_S)  # fmt: skip
    seg_pub.publish(msg)
    wait_for(test_node, lambda: _latest_state(statuses) == EstimatorStatus.CONVERGED,
             "converged status", proc, 180.0)  # fmt: skip
    names = sorted(output_names("double_pendulum"))
    assert sorted(f.name for f in cli_out.iterdir()) == names
    assert sorted(f.name for f in node_out.iterdir()) == names
    cli, node = (yaml.safe_load((d / "posterior.yaml").read_text()) for d in (cli_out, node_out))
    for summary in (cli, node):
        for key in PROVENANCE:
            summary["meta"].pop(key, None)
    assert cli.keys() == node.keys()
    assert cli["meta"] == node["meta"]
    assert ("validation" in node["meta"]) == (validation is not None), node["meta"]
    assert cli["iteration"] == node["iteration"] == ITERATIONS
    a, b = (Posterior.load_npz(d / "particles.npz") for d in (cli_out, node_out))
    assert a.names == b.names
    # the bag stores stamps in integer ns, the segment its own: the same samples to ~1e-12 s
    np.testing.assert_allclose(a.particles, b.particles, rtol=1e-9, atol=0.0)
    urdf = "double_pendulum_identified.urdf"
    assert (cli_out / urdf).read_text() == (node_out / urdf).read_text()


def test_the_loops_holdout_fraction_scores_the_segments_tail_and_opens_the_heldout_gate(
    test_node, spawn, tmp_path
) -> None:
    """The shipped ``panda_payload.yaml`` names no held-out data; with ``holdout_fraction`` (as
    the loop's launch files set it) a run fits the segment without its last fifth and scores the
    identified and the nominal model on that tail, so the payload_applier's held-out gate has a
    figure and passes for a right fit (without it the gate always failed: no held-out RMSE)."""
    from dynid.problem_file import read_problem_file
    from dynid.robot_payload import GateSettings, decide
    from dynid.sim.mujoco import panda_payload

    (traj,), _ = panda_payload.simulate(11, duration=3.0, payload_mass=0.7, torque_offset=0.0,
                                        payload_com=[0.02, 0.01, 0.06])  # fmt: skip
    problem = ROOT / "config" / "problems" / "panda_payload.yaml"
    out = tmp_path / "out"
    proc, seg_pub, statuses = start_estimator(test_node, spawn, problem, out, estimator="lm",
                                              holdout_fraction=0.2)  # fmt: skip
    seg_pub.publish(trajectory_to_segment(traj, source="test:panda", frame_id="world"))
    wait_for(test_node, lambda: _latest_state(statuses) in (EstimatorStatus.CONVERGED,
                                                            EstimatorStatus.FAILED),
             "the lm run", proc, 180.0)  # fmt: skip
    message = statuses[-1].message
    assert statuses[-1].state == EstimatorStatus.CONVERGED, message
    assert message.endswith("on held-out tails"), message
    summary = yaml.safe_load((out / "posterior.yaml").read_text())
    scored = summary["meta"]["validation"]["identified"]
    # the tail (600 samples) less the likelihood's trim at both ends (250 each) is scored
    assert scored["samples"] == 600 - 2 * 250, scored
    robot = read_problem_file(problem).robot
    decision = decide(Posterior.from_summary(out / "posterior.yaml"), robot, "franka",
                      "panda_link8", GateSettings(0.02, 0.005, 3.0))  # fmt: skip
    gates = {g.name: g for g in decision.gates}
    assert gates["heldout_rmse"].passed, gates["heldout_rmse"].detail
    assert abs(decision.fields["mass"] - 0.7) < 0.01 * 0.7, decision.fields
