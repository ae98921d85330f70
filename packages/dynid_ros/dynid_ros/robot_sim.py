"""``robot_sim`` node: a simulated arm, not dynid's model, behind the interfaces of a real one.

MuJoCo (:mod:`dynid.sim.mujoco.engine`) compiles the arm's URDF with a hidden payload welded to
``payload_link`` and joint friction (viscous ``joint_damping``, dry ``joint_coulomb``; by
default the Panda's dry friction as Gaz et al. 2019 identified it on a real arm,
:data:`dynid.sim.mujoco.panda_payload.JOINT_COULOMB`, and the URDF's damping; the UR5's URDF
friction, none), and runs the engine's joint impedance controller at 1 kHz: PD on the
measured state plus MuJoCo's gravity and Coriolis torques of the arm *without* the payload (the
controller was not told the load). The node

* publishes ``joint_state_topic`` (``sensor_msgs/JointState``): encoder-quantised positions,
  noisy velocities and joint torques with Gaussian noise and a constant offset per joint (drawn
  from ``seed``), one message per ``1 / publish_rate_hz`` of simulated time, stamped with the
  simulated time. The torques are sensed on ``torque_sensing``'s side of the joint (the
  engine's ``torque_side``): ``link`` (the Panda's default) as the Panda's and FR3's link-side
  joint torque sensors report ``tau_J``, the torque transmitted to the link without the
  joint's friction; ``motor`` (the UR5's default) as a UR estimates joint torque from its motor
  currents, the applied torque with the friction in it;
* executes ``control_msgs/action/FollowJointTrajectory`` goals on ``action_name`` as
  ros2_control's joint_trajectory_controller does (:mod:`dynid_ros.follow`): rejection of
  invalid goals, interpolation between points, feedback every tick, path and goal tolerances,
  ``goal_time_tolerance``, the controller's result codes, cancel and preemption; between goals
  it holds its last commanded position;
* serves ``franka_msgs/srv/SetLoad`` (``set_load_service``) and ``ur_msgs/srv/SetPayload``
  (``set_payload_service``) where those packages are importable, answering success for finite
  values and a mass ≥ 0 and recording each request: logged, and published on
  ``~/received_loads`` (``std_msgs/String``, latched: YAML with the service, the count so far,
  the request's fields and what the controller made of it). As the arm's own controller does,
  the controller compensates an accepted load from then on (on the flange; mass 0 removes it);
  MuJoCo needs its inertia positive definite, so a load without one (zeros) is recorded and
  answered but leaves the controller as it was, and says so.

Time: a wall timer of period ``tick_s`` steps the engine in chunks up to where
``real_time_factor`` × the wall time since start says the simulation should be (at most
``max_catch_up`` ticks' worth per tick: a loaded machine slows the simulation rather than
letting it fall ever further behind); ``real_time_factor: 0`` simulates for 80 % of each
tick's wall time, as fast as the machine allows. Messages are stamped with the
simulated time (the wall time at start plus the simulated seconds), which ``publish_clock``
also publishes on ``/clock`` for nodes running with ``use_sim_time``. Every 5 s the node logs
the simulated rate it achieved. A controller torque beyond a joint's effort limit is not
applied: the arm holds where it is and the active goal aborts (``PATH_TOLERANCE_VIOLATED``,
naming the joint), as a real arm's reflex stops a motion.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectoryPoint

from dynid.sim.common import SimulationError
from dynid.sim.mujoco import arm as mj_arm
from dynid.sim.mujoco import engine, panda_payload, ur5_payload
from dynid_ros import follow, params, qos
from dynid_ros.conversions import ns_to_stamp
from dynid_ros.errors import ParameterError
from dynid_ros.run import run_node


@dataclass(frozen=True)
class SimArm:
    """An arm the node simulates: the MuJoCo scenario's arm (URDF, joints, gains), its flange,
    the side its joint torques are sensed on by default (:data:`engine.TORQUE_SIDES`) and its
    default dry friction per joint (N·m; empty: the URDF's)."""

    make: Callable[[], mj_arm.Arm]
    flange: str
    torque_sensing: str
    coulomb: tuple[float, ...]


ARMS = {
    "panda": SimArm(
        panda_payload.panda, panda_payload.PAYLOAD_LINK, "link", panda_payload.JOINT_COULOMB
    ),
    "ur5": SimArm(ur5_payload.ur5, ur5_payload.PAYLOAD_LINK, "motor", ()),
}
"""Arms the node simulates, by the ``robot`` parameter's value."""

_RATE_LOG_S = 5.0
_BUSY_SHARE = 0.8  # of each tick that real_time_factor 0 simulates; the rest serves callbacks


@dataclass
class _Active:
    """The goal being executed: its handle, plan and the future its execute callback awaits."""

    handle: Any
    plan: follow.Plan
    done: Future


class RobotSim(Node):
    """The robot_sim node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("robot_sim", **kwargs)
        try:  # control_msgs comes with ros2_control; the Python wheels here lack it
            from control_msgs.action import FollowJointTrajectory
        except ImportError as err:
            raise ParameterError(
                f"needs control_msgs (FollowJointTrajectory), which is not importable: {err}; "
                "source a ROS 2 installation with ros2_control"
            ) from err
        self._action = FollowJointTrajectory
        d = params.declare
        robot = params.choice("robot", d(self, "robot", "panda", f"simulated arm: {list(ARMS)}"),
                              list(ARMS))  # fmt: skip
        sim_arm = ARMS[robot]
        flange = self.flange = sim_arm.flange
        self.arm = sim_arm.make()
        n = len(self.arm.joints)
        topic = d(self, "joint_state_topic", "/joint_states", "sensor_msgs/JointState output")
        rate = params.positive("publish_rate_hz", d(self, "publish_rate_hz", 1000.0,
                               "joint states per simulated second (divides 1000)"))  # fmt: skip
        self.decimation = round(1.0 / (rate * engine.CONTROL_PERIOD))
        if self.decimation < 1 or not math.isclose(self.decimation * rate * engine.CONTROL_PERIOD,
                                                   1.0):  # fmt: skip
            raise ParameterError(f"parameter 'publish_rate_hz' must divide 1000 Hz, got {rate!r}")
        self.rtf = _nonnegative(self, "real_time_factor", 1.0,
                                "simulated s per wall s; 0: as fast as possible")  # fmt: skip
        publish_clock = d(self, "publish_clock", False, "publish the simulated time on /clock")
        tick = params.positive("tick_s", d(self, "tick_s", 0.01, "period of the stepping timer"))
        self.ticks_per_chunk = max(1, round(tick / engine.CONTROL_PERIOD))
        catch_up = params.positive("max_catch_up", float(d(self, "max_catch_up", 5,
                                   "most ticks' worth of simulation one tick runs")))  # fmt: skip
        self.max_chunk = max(1, round(catch_up)) * self.ticks_per_chunk
        home = d(self, "initial_positions", [], "start pose (rad); empty: the arm's home",
                 item=float)  # fmt: skip
        link = d(self, "payload_link", flange, "link the hidden payload is welded to") or flange
        mass = _nonnegative(self, "payload_mass", 0.0, "hidden payload mass (kg); 0: none")
        com = d(self, "payload_com", [0.0, 0.0, 0.0], "payload centre of mass in payload_link (m)",
                item=float)  # fmt: skip
        inertia6 = d(self, "payload_inertia", [1e-3, 1e-3, 1e-3, 0.0, 0.0, 0.0],
                     "payload inertia about its COM, payload_link axes: ixx iyy izz ixy ixz iyz "
                     "(kg·m²)", item=float)  # fmt: skip
        damping = d(self, "joint_damping", [], f"viscous friction per joint ({n}, N·m·s/rad); "
                    "empty: the URDF's", item=float)  # fmt: skip
        coulomb = d(self, "joint_coulomb", list(sim_arm.coulomb), f"dry friction per joint ({n}, "
                    "N·m); empty: the URDF's", item=float)  # fmt: skip
        sensing = params.choice("torque_sensing", d(
            self, "torque_sensing", sim_arm.torque_sensing, "side of the joint the torques are "
            "sensed on: link (without the joint friction, a Panda's tau_J) or motor (with it, a "
            "UR's current-based torques)"), list(engine.TORQUE_SIDES))  # fmt: skip
        seed = d(self, "seed", 0, "seeds the sensor noise and the torque offsets")
        torque_std = _nonnegative(self, "torque_noise", 0.05, "σ of the joint torque noise (N·m)")
        offset = _nonnegative(self, "torque_offset", 0.2,
                              "bound of the per-joint torque offsets (N·m)")  # fmt: skip
        velocity_std = _nonnegative(self, "velocity_noise", 1e-3,
                                    "σ of the joint velocity noise (rad/s)")  # fmt: skip
        action_name = d(self, "action_name", "/joint_trajectory_controller/follow_joint_trajectory",
                        "FollowJointTrajectory action served")  # fmt: skip
        tolerances = {
            name: _nonnegative(self, name, 0.0, text)
            for name, text in (
                ("path_tolerance", "default path position tolerance (rad); 0: unchecked"),
                ("goal_tolerance", "default goal position tolerance (rad); 0: unchecked"),
                ("goal_time_tolerance", "default goal time tolerance (s); 0: wait for the goal"),
            )
        }
        load_service = d(self, "set_load_service", "/service_server/set_load",
                         "franka_msgs/srv/SetLoad served (empty: none)")  # fmt: skip
        payload_service = d(self, "set_payload_service", "/io_and_status_controller/set_payload",
                            "ur_msgs/srv/SetPayload served (empty: none)")  # fmt: skip
        for name, values in (("initial_positions", home), ("joint_damping", damping),
                             ("joint_coulomb", coulomb)):  # fmt: skip
            if values and len(values) != n:
                raise ParameterError(f"parameter {name!r} needs {n} values ({list(self.arm.joints)}"
                                     f"), got {len(values)}")  # fmt: skip
        if len(com) != 3 or len(inertia6) != 6:
            raise ParameterError("parameters 'payload_com' and 'payload_inertia' need 3 and 6 "
                                 f"values, got {len(com)} and {len(inertia6)}")  # fmt: skip

        rng, _ = mj_arm.generators(int(seed), None)
        self.rng = rng
        sensors = engine.Sensors(engine.ENCODER_TICKS, velocity_std, torque_std,
                                 mj_arm.torque_offsets(rng, n, offset), sensing)  # fmt: skip
        try:
            urdf = engine.read_urdf(self.arm.urdf)
            lower, upper, _, effort = engine.urdf_joint_limits(urdf, self.arm.joints)
            given = engine.urdf_joint_friction(urdf, self.arm.joints)
            friction = {
                j: engine.JointFriction(damping[k] if damping else given[j].damping,
                                        coulomb[k] if coulomb else given[j].coulomb)
                for k, j in enumerate(self.arm.joints)
            }  # fmt: skip
            payload = None
            if mass > 0.0:
                xx, yy, zz, xy, xz, yz = inertia6
                inertia = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
                payload = engine.Payload(link, engine.Inertial(mass, np.array(com), inertia))
            model = engine.compile_arm(
                engine.prepared_urdf(urdf, locked=self.arm.locked, friction=friction), payload
            )
            self.controller_urdf = engine.prepared_urdf(urdf, locked=self.arm.locked)
            controller = engine.compile_arm(self.controller_urdf)
            q0 = np.array(home if home else self.arm.home, dtype=np.float64)
            if np.any(q0 < lower) or np.any(q0 > upper):
                raise SimulationError(f"parameter 'initial_positions' {q0.tolist()} is outside "
                                      "the joint limits")  # fmt: skip
            self.loop = engine.ImpedanceLoop(model, controller, self.arm.joints, self.arm.kp,
                                             self.arm.kd, sensors, effort, q0)  # fmt: skip
        except SimulationError as err:
            raise ParameterError(str(err)) from err
        self.lower, self.upper = lower, upper
        self.sensors = sensors
        self.q_d, self.v_d = q0.copy(), np.zeros(n)
        self.defaults = (
            follow.Tolerances(_tol(tolerances["path_tolerance"], n), np.full(n, np.inf)),
            follow.Tolerances(_tol(tolerances["goal_tolerance"], n), np.full(n, np.inf)),
            tolerances["goal_time_tolerance"],
        )
        self.active: _Active | None = None
        self.last: engine.Sample | None = None
        self.start_ns = time.time_ns()  # the simulation is the time source, even on sim time
        self.t0_wall = time.monotonic()
        self._rate_mark = (self.t0_wall, 0)

        self.js_pub = self.create_publisher(JointState, topic, qos.sensor(1000))
        self.js_msg = JointState(name=list(self.arm.joints))
        self.clock_pub = self.create_publisher(Clock, "/clock", qos.clock()) if publish_clock \
            else None  # fmt: skip
        self.loads_pub = self.create_publisher(String, "~/received_loads", qos.latched())
        self.loads: list[dict[str, Any]] = []
        self.server = ActionServer(
            self, FollowJointTrajectory, action_name, execute_callback=self._execute,
            goal_callback=self._on_goal, cancel_callback=lambda _goal: CancelResponse.ACCEPT,
        )  # fmt: skip
        served = self._serve_loads(load_service, payload_service)
        self.timer = self.create_timer(tick, self._tick)
        self.get_logger().info(
            f"{robot}: {n} joints {list(self.arm.joints)}, payload "
            f"{f'{mass:g} kg on {link}' if payload else 'none'}, dry friction "
            f"{[round(f.coulomb, 4) for f in friction.values()]} N·m, viscous "
            f"{[round(f.damping, 4) for f in friction.values()]} N·m·s/rad, torques sensed on "
            f"the {sensing} side; {topic} at {rate:g} Hz of simulated time, "
            f"real_time_factor {self.rtf:g}; action {action_name}; services {served or 'none'}"
        )

    # ---------------------------------------------------------------- time and stepping
    def now_s(self) -> float:
        """The simulated time (s on the node's stamps) of the next control period."""
        return (self.start_ns + self.loop.periods * 1_000_000) * 1e-9

    def _tick(self) -> None:
        """Step the simulation: in real time (scaled) up to where the wall clock says, at most
        ``max_catch_up`` ticks' worth; with ``real_time_factor: 0`` for most of the tick's wall
        time. Feedback, tolerances and ``/clock`` follow every ``tick_s`` of simulated time."""
        start = time.monotonic()
        if self.rtf > 0.0:
            due = int((start - self.t0_wall) * self.rtf / engine.CONTROL_PERIOD)
            todo = min(due - self.loop.periods, self.max_chunk)
            while todo > 0:
                todo -= self._chunk(min(todo, self.ticks_per_chunk))
        else:
            budget = _BUSY_SHARE * self.ticks_per_chunk * engine.CONTROL_PERIOD
            while time.monotonic() - start < budget:
                self._chunk(self.ticks_per_chunk)
        self._log_rate()

    def _chunk(self, periods: int) -> int:
        """Run ``periods`` control periods, then ``/clock``, feedback and the goal's verdict."""
        for _ in range(periods):
            self._period()
        if self.clock_pub is not None:
            self.clock_pub.publish(Clock(clock=ns_to_stamp(round(self.now_s() * 1e9))))
        self._judge()
        return periods

    def _period(self) -> None:
        now = self.now_s()
        if self.active is not None:
            self.q_d, self.v_d, _ = self.active.plan.sample(now)
        try:
            sample = self.loop.period(self.q_d, self.v_d, self.rng)
        except SimulationError as err:  # an effort beyond a limit: hold here, end the goal
            self.get_logger().error(f"{err}; holding the measured position",
                                    throttle_duration_sec=1.0)  # fmt: skip
            self._hold_measured()
            self._finish(follow.PATH_TOLERANCE_VIOLATED, str(err))
            sample = self.loop.period(self.q_d, self.v_d, self.rng)
        self.last = sample
        k = self.loop.periods - 1
        if k % self.decimation == 0:
            tau = self.sensors.read_torque(sample.tau_sensed, self.rng)
            msg = self.js_msg
            msg.header.stamp = ns_to_stamp(self.start_ns + k * 1_000_000)
            msg.position = sample.q_measured.tolist()
            msg.velocity = sample.v_measured.tolist()
            msg.effort = tau.tolist()
            self.js_pub.publish(msg)

    def _log_rate(self) -> None:
        wall, periods = self._rate_mark
        now = time.monotonic()
        if now - wall < _RATE_LOG_S:
            return
        simulated = (self.loop.periods - periods) * engine.CONTROL_PERIOD
        self.get_logger().info(
            f"simulated {simulated:.2f} s in {now - wall:.2f} s of wall time "
            f"({simulated / (now - wall):.2f}× real time, {simulated / (now - wall) * 1e3:.0f} "
            "control periods/s)"
        )
        self._rate_mark = (now, self.loop.periods)

    def _hold_measured(self) -> None:
        if self.last is not None:
            self.q_d, self.v_d = self.last.q_measured.copy(), np.zeros_like(self.v_d)

    # ---------------------------------------------------------------- the action
    def _plan(self, goal: Any) -> follow.Plan:
        path, goal_tol, goal_time = self.defaults
        return follow.plan_goal(goal, self.arm.joints, self.lower, self.upper, self.now_s(),
                                self.q_d, self.v_d, path, goal_tol, goal_time)  # fmt: skip

    def _on_goal(self, goal: Any) -> GoalResponse:
        try:
            self._plan(goal)
        except follow.GoalError as err:
            self.get_logger().error(f"goal rejected ({err})")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, handle: Any) -> Any:
        result = self._action.Result
        try:
            plan = self._plan(handle.request)
        except follow.GoalError as err:
            handle.abort()
            return result(error_code=err.code, error_string=err.reason)
        self._finish(follow.INVALID_GOAL, "Current goal preempted by new incoming action.")
        self.active = _Active(handle, plan, Future())
        self.get_logger().info(
            f"goal accepted: {len(plan.t) - int(plan.prepended)} point(s) over "
            f"{plan.t[-1]:.3f} s, interpolation order {plan.order}"
        )
        return await self.active.done

    def _judge(self) -> None:
        """Feedback and the tolerance verdict of the active goal, once per tick."""
        active, sample = self.active, self.last
        if active is None or sample is None:
            return
        if active.handle.is_cancel_requested:
            self._hold_measured()
            active.handle.canceled()
            active.done.set_result(self._action.Result())
            self.active = None
            self.get_logger().info("goal canceled; holding the measured position")
            return
        now = self.now_s() - engine.CONTROL_PERIOD  # the last sample's time
        q_d, v_d, index = active.plan.sample(now)
        feedback = self._action.Feedback()
        feedback.header.stamp = ns_to_stamp(round(now * 1e9))
        feedback.joint_names = list(self.arm.joints)
        feedback.desired = _point(q_d, v_d)
        feedback.actual = _point(sample.q_measured, sample.v_measured)
        feedback.error = _point(q_d - sample.q_measured, v_d - sample.v_measured)
        if hasattr(feedback, "index"):
            feedback.index = int(index)
        active.handle.publish_feedback(feedback)
        verdict = active.plan.check(now, q_d, v_d, sample.q_measured, sample.v_measured,
                                    self.arm.joints)  # fmt: skip
        if verdict.done:
            if verdict.code != follow.SUCCESSFUL:
                self._hold_measured()
            self._finish(verdict.code, verdict.message)

    def _finish(self, code: int, message: str) -> None:
        """End the active goal (if any) with ``code``: succeed or abort it and hand its execute
        callback the result."""
        active, self.active = self.active, None
        if active is None:
            return
        (active.handle.succeed if code == follow.SUCCESSFUL else active.handle.abort)()
        line = f"goal {follow.CODE_NAMES[code]}: {message}"
        if code == follow.SUCCESSFUL:  # rclpy: one severity per call site
            self.get_logger().info(line)
        else:
            self.get_logger().warning(line)
        active.done.set_result(self._action.Result(error_code=code, error_string=message))

    # ---------------------------------------------------------------- load services
    def _serve_loads(self, load_service: str, payload_service: str) -> list[str]:
        served = []
        if load_service:
            try:
                from franka_msgs.srv import SetLoad
            except ImportError as err:
                self.get_logger().warning(f"not serving {load_service}: franka_msgs: {err}")
            else:
                self.create_service(SetLoad, load_service, self._on_set_load)
                served.append(load_service)
        if payload_service:
            try:
                from ur_msgs.srv import SetPayload
            except ImportError as err:
                self.get_logger().warning(f"not serving {payload_service}: ur_msgs: {err}")
            else:
                self.create_service(SetPayload, payload_service, self._on_set_payload)
                served.append(payload_service)
        return served

    def _on_set_load(self, request: Any, response: Any) -> Any:
        fields = {"mass": float(request.mass),
                  "center_of_mass": [float(v) for v in request.center_of_mass],
                  "load_inertia": [float(v) for v in request.load_inertia]}  # fmt: skip
        inertia = np.reshape(fields["load_inertia"], (3, 3), order="F")
        response.success, response.error = self._record(
            "franka_msgs/srv/SetLoad", fields, fields["center_of_mass"], inertia
        )
        return response

    def _on_set_payload(self, request: Any, response: Any) -> Any:
        c = request.center_of_gravity
        fields = {"mass": float(request.mass), "center_of_gravity": [c.x, c.y, c.z]}
        for key in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz"):  # ur_msgs ≥ 2.6
            if hasattr(request, key):
                fields[key] = float(getattr(request, key))
        i = {k: fields.get(k, 0.0) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
        inertia = np.array([[i["ixx"], i["ixy"], i["ixz"]], [i["ixy"], i["iyy"], i["iyz"]],
                            [i["ixz"], i["iyz"], i["izz"]]])  # fmt: skip
        response.success, _ = self._record("ur_msgs/srv/SetPayload", fields,
                                           fields["center_of_gravity"], inertia)  # fmt: skip
        return response

    def _record(self, service: str, fields: dict[str, Any], com: list[float],
                inertia: np.ndarray) -> tuple[bool, str]:  # fmt: skip
        """Check, record and publish a load request; hand an accepted one to the controller."""
        values = [v for f in fields.values() for v in (f if isinstance(f, list) else [f])]
        ok = all(math.isfinite(v) for v in values) and fields["mass"] >= 0.0
        error = "" if ok else f"non-finite value or negative mass in {fields}"
        controller = self._tell_controller(fields["mass"], com, inertia) if ok else "unchanged"
        self.loads.append({"service": service, "accepted": ok, "controller": controller,
                           "request": fields})  # fmt: skip
        self.loads_pub.publish(String(data=yaml.safe_dump(
            {"count": len(self.loads), **self.loads[-1]}, sort_keys=False)))  # fmt: skip
        self.get_logger().info(f"{service} {'accepted' if ok else 'refused'}: {fields}; "
                               f"controller: {controller}")  # fmt: skip
        return ok, error

    def _tell_controller(self, mass: float, com: list[float], inertia: np.ndarray) -> str:
        """Compensate the load ``mass`` (kg) at ``com`` (m, flange frame) with ``inertia``
        (kg·m² about the COM) from the next period on, as the arm's own controller takes a load
        it is told; what happened, in words."""
        try:
            if mass == 0.0:
                model = engine.compile_arm(self.controller_urdf)
            else:
                load = engine.Inertial(mass, np.asarray(com, dtype=np.float64), inertia)
                model = engine.compile_arm(self.controller_urdf, engine.Payload(self.flange, load))
        except SimulationError as err:  # MuJoCo needs a positive-definite inertia
            return f"unchanged ({err})"
        self.loop.set_controller_model(model)
        return f"compensates {mass:g} kg on {self.flange}" if mass else "compensates no load"

    def close(self) -> None:
        """Abort a goal still running (the simulation stops with the node)."""
        self._finish(follow.INVALID_GOAL, "robot_sim is shutting down")


def _nonnegative(node: Node, name: str, default: float, text: str) -> float:
    """Declare the float parameter ``name`` and return it when finite and ≥ 0."""
    return params.positive(name, params.declare(node, name, default, text), allow_zero=True)


def _tol(value: float, n: int) -> np.ndarray:
    return np.full(n, np.inf if value == 0.0 else value)


def _point(q: np.ndarray, v: np.ndarray) -> JointTrajectoryPoint:
    return JointTrajectoryPoint(positions=q.tolist(), velocities=v.tolist())


def main(args: list[str] | None = None) -> None:
    """Console entry point ``robot_sim``."""
    run_node(RobotSim, "robot_sim", (ParameterError,), args)


if __name__ == "__main__":
    main()
