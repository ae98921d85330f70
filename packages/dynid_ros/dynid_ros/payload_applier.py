"""``payload_applier`` node: hand an identified payload to the robot's controller, when enabled
and when the gates pass.

After each estimator run that ends CONVERGED (``status_topic``, the estimator's ``~/status``),
and on ``~/apply`` (``std_srvs/Trigger``), the node reads the run's ``posterior.yaml`` in
``posterior_dir`` (the estimator's ``output_dir``: the fit's values, covariance and held-out
validation), converts the payload of the problem file ``problem`` to the flange frame
``flange_frame`` through the URDF's fixed joints, and checks the gates
(:func:`dynid.robot_payload.decide`): σ(mass) ≤ ``max_mass_std``, σ of each centre-of-mass
coordinate ≤ ``max_com_std``, the held-out torque RMSE of the identified model below the nominal
model's, the mass within the rated payload (``rated_payload_kg``, or the datasheet value of
``robot_model`` in :data:`dynid.robot_payload.RATED_PAYLOAD_KG`). With ``exciter_status_topic``
(the exciter's ``~/status``) one more gate, ``motion``: the exciter's last run ``succeeded``; a
fit of what was recorded before an abort or a failed goal is never applied.

``apply`` chooses what happens: ``none`` (the default) sends nothing and reports what it would
send; ``franka`` calls ``franka_msgs/srv/SetLoad`` on ``set_load_service``; ``ur`` calls
``ur_msgs/srv/SetPayload`` on ``set_payload_service``. A service is called only when every gate
passed. Each decision is logged and published on ``~/result`` (``std_msgs/String``, latched,
YAML): ``outcome`` (``applied``, ``rejected_by_robot``, ``gates_failed``, ``dry_run``,
``waiting`` (for the service to appear, up to 10 s), ``unavailable`` (it did not: nothing sent),
``error``), the gates with their details, ``sent`` (the request's fields) and ``answer`` (the
robot's response).

A separate node rather than an estimator option: the estimator knows no robot, runs wherever
there is compute, and needs none of the robot packages; the applier is the one place that
speaks to a controller, with its own switch and gates, next to the driver.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from dynid.errors import DynidError
from dynid.posterior import Posterior
from dynid.problem_file import read_problem_file
from dynid.robot_payload import APPLY_TARGETS, RATED_PAYLOAD_KG, GateSettings, decide
from dynid_msgs.msg import EstimatorStatus
from dynid_ros import params, qos
from dynid_ros.errors import ParameterError
from dynid_ros.estimator_node import resolve_problem
from dynid_ros.run import run_node

_SERVICE_WAIT_S = 10.0  # how long a decision to send waits for the robot's service to appear
_RETRY_S = 0.1

FLANGES = {"franka": ("fr3_link8", "panda_link8"), "ur": ("tool0",)}
"""The flange frames of each target, the first the robot's model has is the default."""


class PayloadApplier(Node):
    """The payload_applier node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("payload_applier", **kwargs)
        d = params.declare
        problem = d(
            self,
            "problem",
            "",
            "problem YAML path or name in config/problems: the payload fit's (the estimator's)",
        )
        self.posterior_dir = Path(
            d(self, "posterior_dir", "dynid_identified", "the estimator's output_dir")
        ).expanduser()
        status_topic = d(self, "status_topic", "/estimator/status", "the estimator's ~/status")
        self.target = params.choice(
            "apply",
            d(self, "apply", "none", f"where the payload goes: {list(APPLY_TARGETS)}"),
            APPLY_TARGETS,
        )
        flange = d(
            self,
            "flange_frame",
            "",
            "frame the controller takes the load in; empty: "
            "fr3_link8 / panda_link8 (franka), tool0 (ur)",
        )
        model = d(
            self,
            "robot_model",
            "",
            f"rated-payload key {sorted(RATED_PAYLOAD_KG)}; empty: the problem's robot",
        )
        rated = params.positive(
            "rated_payload_kg",
            d(self, "rated_payload_kg", 0.0, "rated payload (kg); 0: robot_model's"),
            allow_zero=True,
        )
        mass_std = params.positive(
            "max_mass_std", d(self, "max_mass_std", 0.02, "largest σ of the mass (kg)")
        )
        com_std = params.positive(
            "max_com_std",
            d(self, "max_com_std", 0.005, "largest σ of each centre-of-mass coordinate (m)"),
        )
        exciter_topic = d(
            self,
            "exciter_status_topic",
            "",
            "the exciter's ~/status: apply only after a run that succeeded; empty: no such gate",
        )
        self.service_names = {
            "franka": d(
                self,
                "set_load_service",
                "/service_server/set_load",
                "franka_msgs/srv/SetLoad service",
            ),
            "ur": d(
                self,
                "set_payload_service",
                "/io_and_status_controller/set_payload",
                "ur_msgs/srv/SetPayload service",
            ),
        }
        if not problem:
            raise ParameterError("parameter 'problem' must name the payload fit's problem file")
        path = resolve_problem(problem)
        try:
            self.robot = read_problem_file(path).robot
        except DynidError as err:
            raise ParameterError(f"parameter 'problem': {err}") from err
        key = model or self.robot.name
        if rated == 0.0:
            if key not in RATED_PAYLOAD_KG:
                raise ParameterError(
                    f"parameter 'robot_model': no rated payload for {key!r}; "
                    f"give one of {sorted(RATED_PAYLOAD_KG)} or "
                    "rated_payload_kg"
                )
            rated = RATED_PAYLOAD_KG[key]
        self.settings = GateSettings(mass_std, com_std, rated)
        kind = self.target if self.target != "none" else "franka"
        self.flange = flange or next(
            (f for f in FLANGES[kind] if self.robot.model.existFrame(f)), FLANGES[kind][0]
        )
        if not self.robot.model.existFrame(self.flange):
            raise ParameterError(
                f"parameter 'flange_frame': robot {self.robot.name!r} has no frame {self.flange!r}"
            )
        self.client = None
        if self.target != "none":
            self.srv_type = _service_type(self.target)
            self.client = self.create_client(self.srv_type, self.service_names[self.target])
        self.result_pub = self.create_publisher(String, "~/result", qos.latched())
        self.create_subscription(EstimatorStatus, status_topic, self._on_status, qos.latched())
        self.create_service(Trigger, "~/apply", self._on_apply)
        self._exciter: dict[str, Any] | None = None  # the exciter's last status
        self.motion_gate = bool(exciter_topic)
        if exciter_topic:
            self.create_subscription(String, exciter_topic, self._on_exciter, qos.latched())
        self._last_stamp: tuple[int, int] | None = None
        self.get_logger().info(
            f"apply: {self.target}; payload of {path} in {self.flange}; gates σ(mass) ≤ "
            f"{mass_std:g} kg, σ(com) ≤ {com_std:g} m, held-out RMSE below nominal, mass ≤ "
            f"{rated:g} kg; posterior from {self.posterior_dir} on {status_topic} CONVERGED"
        )

    def _on_status(self, msg: EstimatorStatus) -> None:
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        if msg.state != EstimatorStatus.CONVERGED or stamp == self._last_stamp:
            return
        self._last_stamp = stamp
        self.evaluate()

    def _on_exciter(self, msg: String) -> None:
        try:
            status = yaml.safe_load(msg.data)
        except yaml.YAMLError:
            status = None
        if not isinstance(status, dict) or "state" not in status:
            self.get_logger().warning(f"exciter status without a state ignored: {msg.data!r}")
            return
        self._exciter = status

    def _motion_gate(self) -> dict[str, Any]:
        """The ``motion`` gate: the exciter's last run succeeded."""
        status = self._exciter
        if status is None:
            return {"name": "motion", "passed": False, "detail": "no exciter status received"}
        detail = f"the exciter's last run: {status['state']}: {status.get('message', '')}"
        return {"name": "motion", "passed": status["state"] == "succeeded", "detail": detail}

    def _on_apply(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        report = self.evaluate()
        response.success = report["outcome"] in ("sent", "waiting", "dry_run")
        response.message = report["summary"]
        return response

    def evaluate(self) -> dict[str, Any]:
        """Read the posterior, decide, and send or refuse; the report as published (a call in
        flight completes it later with the robot's answer)."""
        source = self.posterior_dir / "posterior.yaml"
        try:
            posterior = Posterior.from_summary(source)
            decision = decide(
                posterior,
                self.robot,
                "ur" if self.target == "ur" else "franka",
                self.flange,
                self.settings,
            )
        except DynidError as err:
            return self._report({"outcome": "error", "summary": f"{source}: {err}"})
        report: dict[str, Any] = {
            "target": self.target,
            "frame": self.flange,
            "posterior": str(source),
            "gates": [
                {"name": g.name, "passed": g.passed, "detail": g.detail} for g in decision.gates
            ]
            + ([self._motion_gate()] if self.motion_gate else []),
            "sent": None,
            "answer": None,
        }
        failing = [g for g in report["gates"] if not g["passed"]]
        if failing:
            failed = "; ".join(f"{g['name']}: {g['detail']}" for g in failing)
            return self._report(
                {
                    **report,
                    "outcome": "gates_failed",
                    "would_send": decision.fields,
                    "summary": f"not applied, gates failed: {failed}",
                }
            )
        if self.target == "none":
            return self._report(
                {
                    **report,
                    "outcome": "dry_run",
                    "would_send": decision.fields,
                    "summary": f"apply is none; would send {decision.fields}",
                }
            )
        service = self.service_names[self.target]
        if self.client is not None and self.client.service_is_ready():
            return self._send(report, decision.fields)
        deadline = time.monotonic() + _SERVICE_WAIT_S
        timer: Any = None

        def retry() -> None:
            ready = self.client is not None and self.client.service_is_ready()
            if not ready and time.monotonic() < deadline:
                return
            timer.cancel()
            self.destroy_timer(timer)
            if ready:
                self._send(report, decision.fields)
            else:
                self._report({**report, "outcome": "unavailable",
                              "summary": f"{service} did not appear in {_SERVICE_WAIT_S:g} s; "
                                         "nothing sent"})  # fmt: skip

        timer = self.create_timer(_RETRY_S, retry)
        waiting = f"waiting up to {_SERVICE_WAIT_S:g} s for {service}"
        return self._report({**report, "outcome": "waiting", "summary": waiting})

    def _send(self, report: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        """Call the robot's service with ``fields``; the report as sent (completed later with
        the answer)."""
        service = self.service_names[self.target]
        request = _request(self.srv_type, self.target, fields)
        report = {**report, "outcome": "sent", "sent": fields,
                  "summary": f"sent {fields} to {service}"}  # fmt: skip
        assert self.client is not None
        future = self.client.call_async(request)
        future.add_done_callback(lambda f: self._answered(report, f))
        return self._report(report)

    def _answered(self, report: dict[str, Any], future: Any) -> None:
        try:
            response = future.result()
        except Exception as err:  # the call failed in the middleware
            self._report({**report, "outcome": "error", "summary": f"the call failed: {err}"})
            return
        answer = {"success": bool(response.success)}
        if hasattr(response, "error"):
            answer["error"] = str(response.error)
        ok = answer["success"]
        self._report(
            {
                **report,
                "outcome": "applied" if ok else "rejected_by_robot",
                "answer": answer,
                "summary": f"{'applied' if ok else 'the robot refused'} {report['sent']}: {answer}",
            }
        )

    def _report(self, report: dict[str, Any]) -> dict[str, Any]:
        line = f"{report['outcome']}: {report['summary']}"
        if report["outcome"] in (
            "applied",
            "sent",
            "waiting",
            "dry_run",
        ):  # rclpy: one severity per call
            self.get_logger().info(line)
        else:
            self.get_logger().warning(line)
        self.result_pub.publish(String(data=yaml.safe_dump(report, sort_keys=False)))
        return report

    def close(self) -> None:
        """Nothing to finish: every decision is published when made."""


def _service_type(target: str) -> type:
    """The service type of ``target``, from the robot's interface package."""
    try:
        if target == "franka":
            from franka_msgs.srv import SetLoad

            return SetLoad
        from ur_msgs.srv import SetPayload

        return SetPayload
    except ImportError as err:
        package = "franka_msgs" if target == "franka" else "ur_msgs"
        raise ParameterError(
            f"parameter 'apply': {target} needs {package}, which is not "
            f"importable: {err}; source the robot's ROS 2 workspace"
        ) from err


def _request(srv_type: type, target: str, fields: dict[str, Any]) -> Any:
    """The request of ``srv_type`` carrying ``fields`` (UR: the inertia where the installed
    ur_msgs has it)."""
    request = srv_type.Request()
    request.mass = fields["mass"]
    if target == "franka":
        request.center_of_mass = fields["center_of_mass"]
        request.load_inertia = fields["load_inertia"]
        return request
    c = request.center_of_gravity
    c.x, c.y, c.z = fields["center_of_gravity"]
    for key in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz"):
        if hasattr(request, key):
            setattr(request, key, fields[key])
    return request


def main(args: list[str] | None = None) -> None:
    """Console entry point ``payload_applier``."""
    run_node(PayloadApplier, "payload_applier", (ParameterError,), args)


if __name__ == "__main__":
    main()
