"""``estimator`` node: identify parameters online from recorded segments, publish the posterior.

Segments (``dynid_msgs/TrajectorySegment``, from the recorder) are validated at the edge and
queued; a worker thread builds the ``Problem`` from the problem file (read once, at start-up)
and the latest segments, and runs the fit driver :class:`dynid.fit.Fit` on it, the one
``dynid fit`` runs: one iteration per step (so a reset or Ctrl-C stops it within one
iteration), and after its first iteration, then every ``publish_every`` iterations and after its
last, the node publishes ``~/particles``, ``~/estimate``, ``~/markers``, ``~/com_covariance``
and ``~/status``. ``publish_every``, ``max_iterations`` and ``estimator_settings`` can be set at run
time (``ros2 param set``; validated, the budget and settings apply from the next run); the other
parameters are read-only.
Each run is scored on the problem file's held-out data (``validation``), as ``dynid fit``
scores it: held-out recordings, or with ``validation.fraction`` the tail of each segment, held
out of the fit; ``holdout_fraction`` holds out such tails for a file without a ``validation``
section (the loop's launch files set it, so the payload_applier's held-out gate has data).
A new segment warm-starts from the last posterior. At the end of a run the fit's output folder
(``posterior.yaml``, ``particles.npz``, ``<robot>_identified.urdf``, ``report.html``,
``history.json``: the files ``dynid fit`` writes for the same data and seed) goes into
``output_dir`` and the identified URDF to ``~/robot_description`` (latched).
A run stopped by the node's shutdown (Ctrl-C, a second Ctrl-C, SIGTERM) writes the same files
with the posterior it reached (``meta["interrupted"]``) and logs where before the node exits.
The estimator is the ``estimator`` parameter (default: the problem file's), configured as
everywhere in dynid (:func:`dynid.estimators.registry.resolve_estimator`): its own defaults, the
problem file's settings only when the file names that estimator, then ``estimator_settings`` and
``max_iterations``.
Callbacks never wait on the worker. An estimator that raises, or whose loss turns NaN, ends its
run with status FAILED and the reason (the posterior it reached is written, marked
``meta["error"]``, as ``dynid fit`` does); the node keeps serving.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseWithCovarianceStamped
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from dynid.data import DataError, Dataset, Trajectory
from dynid.errors import DynidError
from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.estimators.registry import (
    ResolvedEstimator,
    available_estimators,
    resolve_estimator,
)
from dynid.fit import Fit, FitHooks, FitResult, HeldOut
from dynid.posterior import Posterior
from dynid.problem import Problem
from dynid.problem_file import ProblemFileError, read_problem_file
from dynid.resources import repo_root
from dynid_msgs.msg import EstimatorStatus, ParameterEstimate, ParticleSet, TrajectorySegment
from dynid_ros import conversions as cv
from dynid_ros import params, qos
from dynid_ros.diagnostics import Diagnostics
from dynid_ros.errors import BadMessageError, ParameterError
from dynid_ros.run import run_node

SEGMENT_TOPIC = "segment"
_CLOSE_S = 30.0  # longest wait in close() for a run to stop and save


class RunFailedError(RuntimeError):
    """An estimator run failed part-way (a non-finite loss, a diverging simulation)."""


class _Publishing(FitHooks):
    """The node's hooks on one run: the posterior and a RUNNING status go out when the fit hands
    the posterior over; a reset, a newer job or the node's shutdown stops the run.

    Attributes:
        last: the last step's progress (``None`` before the first step).
    """

    def __init__(self, node: EstimatorNode, job: _Job, start: float) -> None:
        self.node, self.job, self.start = node, job, start
        self.last: StepInfo | None = None

    def on_step(self, info: StepInfo, estimator: Estimator) -> None:
        self.last = info

    def on_posterior(self, posterior: Posterior, info: StepInfo) -> None:
        try:
            self.node._publish_posterior(posterior)
            elapsed = time.perf_counter() - self.start
            self.node._publish_status(EstimatorStatus.RUNNING, iteration=info.iteration,
                                      loss=info.loss, elapsed_s=elapsed)  # fmt: skip
        except Exception:  # the shutdown invalidated a publisher meanwhile: the run goes on
            if not self.node._stopping():
                raise

    def stop_requested(self) -> bool:
        return self.node._cancelled(self.job)


def resolve_problem(value: str) -> Path:
    """The problem YAML: a path, or a name looked up in ``config/problems`` of the checkout and
    of the installed ``dynid_bringup`` share."""
    path = Path(value).expanduser()
    if path.is_file():
        return path
    candidates = [repo_root() / "config" / "problems" / f"{value}.yaml"]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        share = Path(get_package_share_directory("dynid_bringup"))
        candidates.append(share / "config" / "problems" / f"{value}.yaml")
    except (ImportError, PackageNotFoundError):
        pass
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ParameterError(
        f"parameter 'problem': {value!r} is neither a file nor a problem name in "
        f"{[str(c.parent) for c in candidates]}"
    )


@dataclass
class _Job:
    """One estimator run: the trajectories and the reset generation they belong to.

    The run warm-starts from the posterior of the run before it, read when it starts (not when it
    was queued: a segment that arrives during a run is fitted from that run's result).
    """

    trajectories: list[Trajectory]
    generation: int


class EstimatorNode(Node):
    """The estimator node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("estimator", **kwargs)
        d = params.declare
        chosen = d(self, "estimator", "", "estimator name; empty: the problem file's")
        if chosen:
            params.choice("estimator", chosen, available_estimators())
        self.problem_path = resolve_problem(
            d(self, "problem", "panda_box", "problem YAML path or name in config/problems")
        )
        try:  # validate the problem file at start-up (robot, parameters, sections)
            self.problem_file = read_problem_file(self.problem_path)
        except ProblemFileError as err:
            raise ParameterError(f"parameter 'problem': {err}") from err
        holdout = params.positive("holdout_fraction", d(
            self, "holdout_fraction", 0.0, "tail of each segment held out of the fit and scored "
            "as held-out data, in [0, 1), when the problem file has no validation section; 0: "
            "none", constraints="0 <= x < 1"), allow_zero=True)  # fmt: skip
        if holdout:
            try:
                self.problem_file.hold_out_tails(holdout)
            except ProblemFileError as err:
                raise ParameterError(f"parameter 'holdout_fraction': {err}") from err
        self.device = params.choice("device", d(self, "device", "cpu", "torch device"),
                                    ["cpu", "cuda"])  # fmt: skip
        self._chosen = chosen
        budget = d(self, "max_iterations", 0, "iteration budget per run; 0: the estimator's "
                   "settings (settable: applies from the next run)", constraints=">= 0",
                   read_only=False)  # fmt: skip
        self.publish_every = int(params.positive("publish_every", d(
            self, "publish_every", 10, "iterations between publications (settable)",
            constraints=">= 1", read_only=False)))  # fmt: skip
        settings_text = d(
            self,
            "estimator_settings",
            "{}",
            "YAML mapping of settings of the chosen estimator, over its defaults and the problem "
            "file's settings when it names that estimator (e.g. {num_particles: 16}); settable: "
            "applies from the next run",
            read_only=False,
        )
        self.resolved = self._resolve(settings_text, budget)
        self.estimator_name = self.resolved.name
        self.max_segments = int(params.positive("max_segments", d(
            self, "max_segments", 1, "latest segments a run uses")))  # fmt: skip
        self.auto_run = d(self, "auto_run", True, "start a run when a segment arrives")
        out = d(
            self,
            "output_dir",
            "dynid_identified",
            "output folder of each run: posterior.yaml, particles.npz, <robot>_identified.urdf, "
            "report.html and history.json, as dynid fit writes them",
        )
        self.output_dir = Path(out).expanduser()
        self.frame_id = d(self, "frame_id", "world", "header frame of particles and estimates")
        frames = d(self, "marker_frames", [], "'prefix:frame' of point parameters, e.g. "
                   "'payload:link5'; default frame = prefix", item=str)  # fmt: skip
        self.marker_frames = dict(self._pair(f) for f in frames)
        self.scatter_frame = d(
            self,
            "scatter_frame",
            "dynid_parameters",
            "frame of the scatter of non-spatial parameters",
        )
        urdf_file = d(self, "urdf_file", "", "nominal URDF file; empty: robot_description topic "
                      "or the problem's robot")  # fmt: skip
        self.rsp_node = d(
            self,
            "update_robot_state_publisher",
            "",
            "node whose robot_description parameter gets the identified URDF (opt-in)",
        )
        self._nominal_urdf: str | None = None
        if urdf_file:
            path = Path(urdf_file).expanduser()
            if not path.is_file():
                raise ParameterError(f"parameter 'urdf_file': {urdf_file!r} does not exist")
            self._nominal_urdf = path.read_text(encoding="utf-8")
        self.bounds = {p.name: (p.lower, p.upper) for p in self.problem_file.spec.parameters}
        self.diag = Diagnostics(self.get_fully_qualified_name())
        self._lock = threading.Lock()
        self._segments: list[Trajectory] = []
        self._posterior: Posterior | None = None
        self._generation = 0  # bumped by ~/reset: runs of older generations stop
        self._stop = threading.Event()  # the node stops: a run saves what it reached
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._heldout: HeldOut | None = None  # the validation data, read once
        self._last: tuple[Fit, FitResult] | None = None  # the last run, for ~/save
        self._validation: dict[str, str] = {}  # the last run's held-out scores (/diagnostics)

        # outputs: reliable (they match best-effort subscribers too); status and description
        # latched so late RViz/test subscribers get the current state
        self.particles_pub = self.create_publisher(ParticleSet, "~/particles", qos.reliable(5))
        self.estimate_pub = self.create_publisher(ParameterEstimate, "~/estimate",
                                                  qos.reliable(10))  # fmt: skip
        self.status_pub = self.create_publisher(EstimatorStatus, "~/status", qos.latched())
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", qos.reliable(5))
        self.cov_pub = self.create_publisher(PoseWithCovarianceStamped, "~/com_covariance",
                                             qos.reliable(10))  # fmt: skip
        self.urdf_pub = self.create_publisher(String, "~/robot_description", qos.latched())
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.reliable(10))
        # segments: reliable, a few deep (each is seconds of data; none may be dropped)
        self.create_subscription(TrajectorySegment, SEGMENT_TOPIC, self._on_segment,
                                 qos.reliable(10))  # fmt: skip
        if self._nominal_urdf is None:
            # robot_state_publisher latches robot_description: transient local, depth 1
            self.create_subscription(String, "robot_description", self._on_description,
                                     qos.latched())  # fmt: skip
        self.create_service(Trigger, "~/run", self._on_run)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/save", self._on_save)
        self.create_timer(1.0, self._publish_diagnostics,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))  # fmt: skip
        self._rsp_client = None
        if self.rsp_node:
            self._rsp_client = self.create_client(
                SetParameters, f"{self.rsp_node.rstrip('/')}/set_parameters"
            )
        self._publish_status(EstimatorStatus.IDLE, message="waiting for a segment")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._worker = threading.Thread(target=self._work, name="estimator-worker", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"{self.estimator_name} on {self.problem_path} ({self.device}), settings "
            f"{self.resolved.settings}, publishing every {self.publish_every} iterations"
        )

    def _resolve(self, settings_text: str, budget: int) -> ResolvedEstimator:
        """The chosen estimator with its settings: ``settings_text`` (``estimator_settings``, a
        YAML mapping) over its defaults, and ``budget`` (``max_iterations``) when not 0.

        Raises:
            ParameterError: not a YAML mapping, a negative budget, or settings the estimator
                does not take (the message names the parameter).
        """
        try:
            overrides = yaml.safe_load(settings_text)
        except yaml.YAMLError as err:
            raise ParameterError(f"parameter 'estimator_settings': not YAML: {err}") from err
        if not isinstance(overrides, dict):
            raise ParameterError(
                f"parameter 'estimator_settings' must be a YAML mapping, got {settings_text!r}"
            )
        if budget < 0:
            raise ParameterError(f"parameter 'max_iterations' must be >= 0, got {budget}")
        if budget:
            overrides["max_iterations"] = budget
        try:  # settings belong to the estimator they name (dynid.estimators.registry)
            return resolve_estimator(self._chosen or None, self.problem_file.estimator, overrides)
        except EstimatorError as err:
            raise ParameterError(f"parameter 'estimator_settings': {err}") from err

    def _on_set_parameters(self, changed: list[Parameter]) -> SetParametersResult:
        """``ros2 param set`` of ``publish_every`` (from the next publication), ``max_iterations``
        or ``estimator_settings`` (from the next run): validated as at start-up, refused with
        the reason otherwise (read-only parameters are refused by rclpy before this)."""
        new = {p.name: p.value for p in changed}
        try:
            every = self.publish_every
            if "publish_every" in new:
                every = int(params.positive("publish_every", new["publish_every"]))
            resolved = self.resolved
            if new.keys() & {"max_iterations", "estimator_settings"}:
                resolved = self._resolve(
                    new.get("estimator_settings", self.get_parameter("estimator_settings").value),
                    new.get("max_iterations", self.get_parameter("max_iterations").value),
                )
        except ParameterError as err:
            return SetParametersResult(successful=False, reason=str(err))
        self.publish_every, self.resolved = every, resolved
        if new.keys() & {"max_iterations", "estimator_settings"}:
            self.get_logger().info(f"next run: {resolved.name} with {resolved.settings}")
        return SetParametersResult(successful=True)

    @staticmethod
    def _pair(entry: str) -> tuple[str, str]:
        prefix, sep, frame = entry.partition(":")
        if not sep or not prefix or not frame:
            raise ParameterError(f"parameter 'marker_frames': entry {entry!r} is not "
                                 "'prefix:frame'")  # fmt: skip
        return prefix, frame

    # ------------------------------------------------------------------ callbacks
    def _on_segment(self, msg: Any) -> None:
        self.diag.received(SEGMENT_TOPIC)
        try:
            traj = cv.segment_to_trajectory(msg)
        except BadMessageError as err:
            self.diag.rejected(SEGMENT_TOPIC, err.key)
            self.get_logger().warning(
                f"{self.resolve_topic_name(SEGMENT_TOPIC)}: segment from {msg.source!r} skipped: "
                f"{err}"
            )
            return
        self.diag.used(SEGMENT_TOPIC)
        with self._lock:
            self._segments = [*self._segments, traj][-self.max_segments :]
        self.get_logger().info(
            f"segment {msg.source!r}: {traj.num_samples} samples, {traj.duration:.3f} s"
        )
        if self.auto_run:
            self._enqueue()

    def _on_description(self, msg: String) -> None:
        """Take a URDF from ``robot_description`` (a ``<robot>`` XML document, else skipped)."""
        self.diag.received("robot_description")
        text = msg.data.strip()
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError as err:  # the counter's key stays fixed, the log has where
            reason, detail = "data: not well-formed XML", f" ({err})"
        else:
            reason = "" if root.tag == "robot" else f"data: root <{root.tag}>, expected <robot>"
            detail = ""
        if reason:
            self.diag.rejected("robot_description", reason)
            self.get_logger().warning(f"robot_description skipped: {reason}{detail}")
            return
        self.diag.used("robot_description")
        self._nominal_urdf = text

    def _enqueue(self) -> bool:
        with self._lock:
            if not self._segments:
                return False
            job = _Job(list(self._segments), self._generation)
        self._jobs.put(job)
        return True

    def _on_run(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success = self._enqueue()
        res.message = "run queued" if res.success else "no segment received yet"
        return res

    def _on_reset(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self._lock:
            self._generation += 1
            self._segments, self._posterior, self._last = [], None, None
        self.markers_pub.publish(cv.clear_markers(self._stamp()))
        self._publish_status(EstimatorStatus.IDLE, message="reset")
        res.success, res.message = True, "posterior and segments cleared"
        return res

    def _on_save(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        with self._lock:
            last = self._last
        if last is None:
            res.success, res.message = False, "no posterior yet"
            return res
        try:
            files = self._write_outputs(*last)
        except (OSError, DynidError) as err:
            res.success, res.message = False, f"not written: {err}"
            return res
        res.success, res.message = True, ", ".join(str(f) for f in files)
        return res

    # ------------------------------------------------------------------ worker
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            while not self._jobs.empty():  # only the latest data matter
                nxt = self._jobs.get()
                if nxt is None:
                    return
                job = nxt
            self._run(job)

    def _stopping(self) -> bool:
        """The node stops (``close``, or a signal that shut the context down)."""
        return self._stop.is_set() or not self.context.ok()

    def _cancelled(self, job: _Job) -> bool:
        return job.generation != self._generation or self._stopping()

    def _problem(self, job: _Job) -> Problem:
        """The problem over the job's segments.

        When it cannot be built, the kept segments it cannot use are dropped with an error
        naming their source, so that later runs do not fail on them (the recorder keeps them on
        disk): each one that fails alone, or, when each builds alone but they do not fit
        together (other joints), all but the newest. Then the error is raised again.

        Raises:
            ProblemFileError, DataError: the segments do not fit the problem file.
        """
        try:
            return self._load(job.trajectories)
        except (ProblemFileError, DataError) as err:
            if len(job.trajectories) == 1:  # the failed build was this segment alone
                unusable = job.trajectories
            else:
                unusable = [t for t in job.trajectories if not self._builds(t)]
            if not unusable:
                unusable = job.trajectories[:-1]
            with self._lock:
                self._segments = [t for t in self._segments
                                  if not any(t is u for u in unusable)]  # fmt: skip
            for traj in unusable:
                self.get_logger().error(
                    f"segment {traj.meta.get('source', '')!r} dropped from the kept segments: {err}"
                )
            raise

    def _load(self, trajectories: list[Trajectory]) -> Problem:
        """The problem file's problem over ``trajectories`` without their held-out tails (with
        ``validation.fraction``: they become the run's held-out data), on the node's device (the
        file was read once, at start-up)."""
        pf = self.problem_file
        return pf.build(pf.hold_out(pf.preprocess(Dataset(trajectories))), device=self.device)

    def _builds(self, traj: Trajectory) -> bool:
        """Whether the problem builds on ``traj`` alone."""
        try:
            self._load([traj])
        except (ProblemFileError, DataError):
            return False
        return True

    def _run(self, job: _Job) -> None:
        """One run of the fit driver (:class:`dynid.fit.Fit`) on the job's segments: published
        as it goes, its outputs written when it ends (also when the node's shutdown ended it; not
        when a reset or a newer job cancelled it)."""
        start = time.perf_counter()
        hooks = _Publishing(self, job, start)
        self._publish_status(EstimatorStatus.RUNNING, message="building the problem")
        try:
            problem = self._problem(job)
            with self._lock:
                warm = self._posterior if job.generation == self._generation else None
            # held-out tails belong to this job's segments; held-out recordings are read once
            heldout = None if self.problem_file.holds_out_tails else self._heldout
            fit = Fit(self.problem_file, problem, self.resolved, heldout=heldout,
                      meta={"device": self.device, "problem": str(self.problem_path)},
                      publish_every=self.publish_every)  # fmt: skip
            self.get_logger().info(
                f"run on {len(job.trajectories)} segment(s), "
                f"{'cold start' if warm is None else 'warm start from the previous posterior'}"
            )
            result = fit.run(warm_start=warm, hooks=hooks, stop=self._stop)
            if not self.problem_file.holds_out_tails:
                self._heldout = fit.heldout_loaded or self._heldout
            if self._cancelled(job) and not self._stopping():
                return  # a reset or a newer job: this run's result is not wanted
            if result.interrupted and result.posterior.iteration == 0:
                return  # stopped before its first step: nothing was estimated
            with self._lock:
                self._posterior = result.posterior
                self._last = (fit, result)
            self._record_validation(result)
            files = self._write_outputs(fit, result)
            info = hooks.last
            if result.interrupted:
                self.get_logger().warning(
                    f"run stopped at iteration {result.posterior.iteration} by the shutdown; "
                    f"saved the posterior it reached: {', '.join(str(f) for f in files)}"
                )
                return
            if result.error is not None:
                raise RunFailedError(f"{result.error}; wrote {', '.join(f.name for f in files)}")
            budget = self.resolved.estimator.max_iterations
            reason = "converged" if result.converged else f"iteration budget {budget} reached"
            scored = self._validation_clause(result)
            self._publish_status(
                EstimatorStatus.CONVERGED, iteration=info.iteration, loss=info.loss,
                elapsed_s=time.perf_counter() - start,
                message=f"{reason}; wrote {', '.join(f.name for f in files)}"
                        + (f"; {scored}" if scored else ""),
            )  # fmt: skip
        except Exception as err:  # an estimator plug-in failing must not stop the node
            self.get_logger().error(f"{self.estimator_name} run failed: {err}")
            info = hooks.last
            self._publish_status(
                EstimatorStatus.FAILED, iteration=info.iteration if info else 0,
                loss=info.loss if info else math.nan, elapsed_s=time.perf_counter() - start,
                message=f"{type(err).__name__}: {err}",
            )  # fmt: skip

    def _record_validation(self, result: FitResult) -> None:
        """The run's held-out scores for ``/diagnostics``: per model ``validation_rmse_<model>``,
        or ``validation_error`` when the scoring failed."""
        report, meta = result.validation, result.posterior.meta
        if report is not None:
            values = {f"validation_rmse_{label}": f"{score.overall:.6g}"
                      for label, score in report.scores.items()}  # fmt: skip
            self._validation = {**values, "validation_data": ", ".join(report.data)}
        elif "validation_error" in meta:
            self._validation = {"validation_error": str(meta["validation_error"])}
            self.get_logger().warning(f"held-out validation skipped: {meta['validation_error']}")

    @staticmethod
    def _validation_clause(result: FitResult) -> str:
        """The identified and the nominal model's overall held-out RMSE (torque, N·m; or
        simulation, over ``obs_std``) as a clause of the status message; ``""`` without one."""
        report = result.validation
        if report is None:
            return ""
        ident, nominal = report.scores["identified"], report.scores.get("nominal")
        versus = f" (nominal {nominal.overall:.4g})" if nominal is not None else ""
        what, unit = (
            ("torque RMSE", " N*m") if report.quantity == "torque" else ("simulation RMSE/σ", "")
        )
        names = ", ".join(Path(d).name for d in report.data)
        return f"held-out {what} {ident.overall:.4g}{unit}{versus} on {names}"

    # ------------------------------------------------------------------ outputs
    def _stamp(self) -> Any:
        return self.get_clock().now().to_msg()  # sim time under use_sim_time

    def _publish_status(self, state: int, **fields: Any) -> None:
        if self.context.ok():
            msg = cv.status_message(stamp=self._stamp(), estimator=self.estimator_name,
                                    state=state, **fields)  # fmt: skip
            self.status_pub.publish(msg)

    def _publish_posterior(self, post: Posterior) -> None:
        if not self.context.ok():
            return
        stamp = self._stamp()
        self.particles_pub.publish(
            cv.posterior_to_particle_set(post, stamp=stamp, frame_id=self.frame_id)
        )
        self.estimate_pub.publish(
            cv.posterior_to_estimate(post, stamp=stamp, frame_id=self.frame_id)
        )
        self.markers_pub.publish(
            cv.posterior_markers(post, stamp=stamp, frames=self.marker_frames,
                                 scatter_frame=self.scatter_frame, bounds=self.bounds)
        )  # fmt: skip
        cov = cv.point_covariance(post, stamp=stamp, frames=self.marker_frames)
        if cov is not None:
            self.cov_pub.publish(cov)

    def _nominal(self) -> str | None:
        """The URDF the identified values go into: ``urdf_file``, else the last
        ``robot_description``, else (``None``) the problem's own robot URDF."""
        return self._nominal_urdf

    def _write_outputs(self, fit: Fit, result: FitResult) -> list[Path]:
        """The fit's output folder in ``output_dir`` (:data:`dynid.fit.OUTPUT_FILES`, as
        ``dynid fit`` writes it), then the identified URDF on ``~/robot_description``."""
        files = fit.write(result, self.output_dir, nominal_urdf=self._nominal())
        if "urdf" not in files:
            self.get_logger().warning("no nominal URDF (robot_description, urdf_file or the "
                                      "problem's robot): no identified URDF written")  # fmt: skip
            return list(files.values())
        xml = files["urdf"].read_text(encoding="utf-8")
        try:
            if self.context.ok():
                self.urdf_pub.publish(String(data=xml))
                self._update_robot_state_publisher(xml)
        except Exception:  # the shutdown invalidated the publisher meanwhile: files are written
            if not self._stopping():
                raise
        return list(files.values())

    def _update_robot_state_publisher(self, xml: str) -> None:
        client = self._rsp_client
        if client is None:
            return
        if not client.service_is_ready():
            self.get_logger().warning(f"{client.srv_name} not available; URDF not pushed")
            return
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=xml)
        request = SetParameters.Request(
            parameters=[ParameterMsg(name="robot_description", value=value)]
        )
        client.call_async(request)

    def _publish_diagnostics(self) -> None:
        self.diag_pub.publish(self.diag.to_msg(self._stamp(), dict(self._validation) or None))

    def close(self) -> None:
        """Stop the worker after its current iteration; a run in progress saves its posterior
        first (signals meanwhile do not cut the saving short: ``run_node``). Waits at most
        ``_CLOSE_S`` seconds."""
        self._stop.set()
        self._jobs.put(None)
        # joined, not only waited for: its thread (and torch's state on it) is gone before the
        # process exits
        self._worker.join(timeout=_CLOSE_S)
        if self._worker.is_alive():
            self.get_logger().error(
                f"the run did not stop within {_CLOSE_S:g} s; exiting without saving its posterior"
            )


def main(args: list[str] | None = None) -> None:
    """Console entry point ``estimator``."""
    run_node(EstimatorNode, "estimator", (ParameterError,), args)


if __name__ == "__main__":
    main()
