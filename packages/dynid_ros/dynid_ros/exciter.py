"""``exciter`` node: move the arm through an excitation motion, with the recorder running for
exactly that motion, only when asked to.

The motion is ``trajectory_file`` (``dynid excite``'s ``trajectory.csv``), or, with ``problem``
instead, one planned by :func:`dynid.excite.design_excitation` when a run starts, starting and
ending at the arm's joint positions then (``plan_duration``, ``plan_harmonics``, ``plan_seed``,
``plan_starts``, ``plan_iterations``; planned in a worker thread, the node stays responsive).
``joint_names`` renames the motion's joints for the controller (a Panda problem driving an FR3's
``fr3_joint1…7``: the problem's URDF names the columns, the controller its own joints).

A run begins on ``~/run`` (``std_srvs/Trigger``) or, with ``autostart``, once, as soon as the
joint state, the controller, the recorder and a subscriber on each topic of
``wait_for_subscribers`` are there; nothing moves otherwise. It then

1. checks the motion's start against the latest ``joint_state_topic`` message: every joint within
   ``start_tolerance`` rad, or, only with ``move_to_start``, a slow quintic move there first
   (no joint faster than ``approach_speed`` rad/s, not recorded); otherwise it refuses and says
   which joint is how far off;
2. calls the recorder's ``<recorder>/start`` (``recorder`` empty: no recorder), asking again
   for up to 5 s while it refuses (a recorder started beside the arm may not have its first
   joint state when the exciter has);
3. sends the motion, time-scaled by ``speed_scale`` (times / s, velocities × s, accelerations
   × s²) and thinned to ``point_rate_hz`` points with positions, velocities and accelerations:
   with ``mode: action`` as a ``control_msgs/action/FollowJointTrajectory`` goal on ``action``
   (``path_tolerance``, ``goal_tolerance`` rad and ``goal_time_tolerance`` s per joint; 0: the
   controller's defaults), with ``mode: topic`` as a ``trajectory_msgs/JointTrajectory`` on
   ``topic`` (then the motion is taken as done when its duration has passed on the node's clock);
4. calls ``<recorder>/stop`` right after the motion's end, so the recorded segment is the motion.

A run aborts (the goal cancelled, or in topic mode an empty trajectory published, which
joint_trajectory_controller takes as "hold the current position"; the recorder stopped, keeping
what it recorded; the reason said) on a rejected goal, a goal the controller aborts (a path or
goal tolerance violated: its ``error_string``), a failed recorder start, ``~/abort``
(``std_srvs/Trigger``) and on shutdown (Ctrl-C, SIGTERM). Each change of state is logged and
published on ``~/status`` (``std_msgs/String``, latched, YAML: ``state`` one of ``idle``,
``planning``, ``moving_to_start``, ``starting_recorder``, ``moving``, ``stopping_recorder``,
``succeeded``, ``aborted``, ``refused``; ``message``; ``recorder``, the recorder's last answer).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import yaml
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from dynid.errors import DynidError
from dynid.excite import DesignSettings, design_excitation
from dynid.problem_file import read_problem_file
from dynid_ros import params, qos
from dynid_ros.errors import ParameterError
from dynid_ros.estimator_node import resolve_problem
from dynid_ros.excitation_motion import Motion, MotionError, approach, from_excitation, read_csv
from dynid_ros.run import run_node

MODES = ("action", "topic")
_STEP_S = 0.02  # period of the state machine's timer
_CLOSE_S = 3.0  # longest wait for the cancel and the recorder's stop on shutdown
_RECORDER_WAIT_S = 5.0  # how long a refused recorder start is asked again (its data may lag)
_RECORDER_RETRY_S = 0.2
_GOAL_STATUS = {GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED", GoalStatus.STATUS_CANCELED: "CANCELED",
                GoalStatus.STATUS_ABORTED: "ABORTED"}  # fmt: skip


class Exciter(Node):
    """The exciter node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("exciter", **kwargs)
        d = params.declare
        self.mode = params.choice(
            "mode", d(self, "mode", "action", f"how the motion goes out: {list(MODES)}"), MODES
        )
        trajectory_file = d(self, "trajectory_file", "", "dynid excite's trajectory.csv")
        problem = d(self, "problem", "", "problem YAML (path or config/problems name) to plan "
                    "from at the current joint state, instead of trajectory_file")  # fmt: skip
        duration = params.positive(
            "plan_duration",
            d(self, "plan_duration", 20.0, "planned motion's duration (s, before speed_scale)"),
        )
        self.plan_settings = {
            "duration": duration,
            "harmonics": _count(self, "plan_harmonics", 5, "Fourier harmonics per joint"),
            "seed": d(self, "plan_seed", 0, "seed of the planner's random starts"),
            "starts": _count(self, "plan_starts", 3, "planner's random starts"),
            "iterations": _count(self, "plan_iterations", 90, "L-BFGS-B iterations per start"),
        }
        self.rename = d(self, "joint_names", [], "the controller's names of the motion's joints, "
                        "in its column order; empty: the motion's own", item=str)  # fmt: skip
        js_topic = d(self, "joint_state_topic", "/joint_states", "sensor_msgs/JointState input")
        self.speed_scale = params.positive(
            "speed_scale", d(self, "speed_scale", 0.25, "time scaling of the motion, (0, 1]")
        )
        if self.speed_scale > 1.0:
            raise ParameterError(f"parameter 'speed_scale' must be in (0, 1], got "
                                 f"{self.speed_scale!r}")  # fmt: skip
        self.point_rate = params.positive(
            "point_rate_hz", d(self, "point_rate_hz", 100.0, "trajectory points per second")
        )
        self.start_tolerance = params.positive(
            "start_tolerance",
            d(self, "start_tolerance", 0.02, "largest start-pose error per joint (rad)"),
        )
        self.move_to_start = d(
            self,
            "move_to_start",
            False,
            "move slowly to the motion's start if the arm is not there",
        )
        self.approach_speed = params.positive(
            "approach_speed",
            d(self, "approach_speed", 0.2, "fastest joint speed of the move to start (rad/s)"),
        )
        action = d(self, "action", "/joint_trajectory_controller/follow_joint_trajectory",
                   "FollowJointTrajectory action of the controller (mode action)")  # fmt: skip
        topic = d(self, "topic", "/joint_trajectory_controller/joint_trajectory",
                  "JointTrajectory topic of the controller (mode topic)")  # fmt: skip
        self.tolerances = {
            name: params.positive(name, d(self, name, default, text), allow_zero=True)
            for name, default, text in (
                ("path_tolerance", 0.0, "path position tolerance per joint (rad); 0: default"),
                ("goal_tolerance", 0.0, "goal position tolerance per joint (rad); 0: default"),
                ("goal_time_tolerance", 0.0, "goal time tolerance (s); 0: the default"),
            )
        }
        recorder = d(self, "recorder", "/recorder", "recorder node whose ~/start and ~/stop "
                     "bracket the motion; empty: none")  # fmt: skip
        self.autostart = d(self, "autostart", False, "start a run once the arm and controller "
                           "are there, without ~/run")  # fmt: skip
        self.wait_topics = d(self, "wait_for_subscribers", [], "topics that need a subscriber "
                             "before autostart (e.g. the recorder's segment: the estimator "
                             "listens)", item=str)  # fmt: skip
        if bool(trajectory_file) == bool(problem):
            raise ParameterError(
                "give exactly one of parameters 'trajectory_file' (dynid excite's trajectory.csv) "
                "and 'problem' (plan at the current state)"
            )
        self.motion: Motion | None = None
        self.problem_path: Path | None = None
        if trajectory_file:
            try:
                self.motion = read_csv(trajectory_file)
            except MotionError as err:
                raise ParameterError(f"parameter 'trajectory_file': {err}") from err
            self._check_rename(self.motion.joint_names)
        else:
            self.problem_path = resolve_problem(problem)
            try:
                self.pf = read_problem_file(self.problem_path)
            except DynidError as err:
                raise ParameterError(f"parameter 'problem': {err}") from err
            self._check_rename(list(self.pf.robot.joint_names))

        self.action_type: Any = None
        self.client: ActionClient | None = None
        self.traj_pub = None
        if self.mode == "action":
            self.action_type = _follow_joint_trajectory()
            self.client = ActionClient(self, self.action_type, action)
        else:
            self.traj_pub = self.create_publisher(JointTrajectory, topic, qos.reliable(10))
        self.recorder_start = self.recorder_stop = None
        if recorder:
            base = recorder.rstrip("/")
            self.recorder_start = self.create_client(Trigger, f"{base}/start")
            self.recorder_stop = self.create_client(Trigger, f"{base}/stop")
        self.status_pub = self.create_publisher(String, "~/status", qos.latched())
        self.state_msg: JointState | None = None
        self.create_subscription(JointState, js_topic, self._on_joint_state, qos.sensor(10))
        self.create_service(Trigger, "~/run", self._on_run)
        self.create_service(Trigger, "~/abort", self._on_abort)

        self.state = "idle"
        self.recorder_answer = ""
        self._pending: Future | None = None  # the future the current state waits on
        self._goal: Any = None  # the accepted goal's handle
        self._plan_result: list[Any] = []  # the worker's Motion or error
        self._motion_end_s = 0.0  # topic mode: when the published motion is over
        self.motion_to_send: Motion | None = None  # the motion of the run under way
        self._after_stop = ("aborted", "")  # the state and reason once the recorder stopped
        self._cancel: Future | None = None  # the last cancel request's answer
        self._response: Future | None = None  # a goal response an abort waits for
        self._recorder_deadline = 0.0  # until when a refused recorder start is asked again
        self._retry_at = 0.0  # when it is asked next
        self.create_timer(_STEP_S, self._step)
        source = trajectory_file or f"planned from {self.problem_path} at the current state"
        self._set("idle", f"motion: {source}; speed_scale {self.speed_scale:g}; {self.mode} "
                  f"{action if self.mode == 'action' else topic}; recorder {recorder or 'none'}; "
                  f"{'autostart' if self.autostart else 'waiting for ~/run'}")  # fmt: skip

    # ------------------------------------------------------------------ inputs
    def _check_rename(self, names: list[str]) -> None:
        if self.rename and len(self.rename) != len(names):
            raise ParameterError(f"parameter 'joint_names' has {len(self.rename)} names for the "
                                 f"motion's {len(names)} joints {names}")  # fmt: skip

    def _on_joint_state(self, msg: JointState) -> None:
        if len(msg.name) == len(msg.position):
            self.state_msg = msg

    def _joint_state(self) -> dict[str, float]:
        msg = self.state_msg
        return {} if msg is None else dict(zip(msg.name, msg.position, strict=True))

    def _goal_names(self, motion: Motion) -> list[str]:
        return list(self.rename) if self.rename else list(motion.joint_names)

    # ------------------------------------------------------------------ services
    def _on_run(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        res.success, res.message = self._begin()
        return res

    def _on_abort(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        if not self._busy() or self.state == "stopping_recorder":
            res.success, res.message = False, f"nothing to abort (state {self.state})"
            return res
        self._abort("~/abort called")
        res.success, res.message = True, f"aborted: {self.state}"
        return res

    def _busy(self) -> bool:
        return self.state in ("planning", "moving_to_start", "starting_recorder", "moving",
                              "stopping_recorder")  # fmt: skip

    def _begin(self) -> tuple[bool, str]:
        """Start a run: refuse (with the reason) or go on to planning or the start check."""
        if self._busy():
            return False, f"a run is in progress ({self.state})"
        missing = self._missing()
        if missing:
            return False, missing
        self.recorder_answer = ""
        state = self._joint_state()
        if self.motion is None:
            return self._plan_in_worker(state)
        return self._check_start(self.motion, state)

    def _missing(self) -> str:
        """What a run still lacks (the joint state, the controller, the recorder), or ''."""
        if self.state_msg is None:
            return "no joint state received yet"
        if self.client is not None and not self.client.server_is_ready():
            return "the FollowJointTrajectory action server is not available"
        if self.recorder_start is not None and not self.recorder_start.service_is_ready():
            return "the recorder's start service is not available"
        return ""

    def _plan_in_worker(self, state: dict[str, float]) -> tuple[bool, str]:
        """Plan from the joints' current positions in a worker thread (``_after_planning``
        takes the result)."""
        joints = list(self.pf.robot.joint_names)
        names = list(self.rename) or joints
        missing = [j for j in names if j not in state]
        if missing:
            return self._refuse(f"joints {missing} are not in the joint state (it has "
                                f"{sorted(state)}); set joint_names")  # fmt: skip
        settings = DesignSettings(start=[state[j] for j in names], **self.plan_settings)
        result: list[Motion | Exception] = []
        self._plan_result = result

        def work() -> None:
            try:
                result.append(from_excitation(design_excitation(self.pf, settings)))
            except Exception as err:  # the run is refused with it; the node goes on
                result.append(err)

        threading.Thread(target=work, name="exciter_plan", daemon=True).start()
        self._set("planning", f"planning a {settings.duration:g} s motion at the current state")
        return True, "planning the motion at the current joint state"

    def _check_start(
        self, motion: Motion, state: dict[str, float], *, may_move: bool = True
    ) -> tuple[bool, str]:
        """Go on to the recorder when the arm is at ``motion``'s start; otherwise move there
        first (``move_to_start`` and ``may_move``) or refuse."""
        names = self._goal_names(motion)
        try:
            error, joint = _renamed(motion, names).start_error(state)
        except MotionError as err:
            return self._refuse(str(err))
        if error <= self.start_tolerance:
            self.motion_to_send = motion
            return self._start_recorder()
        if not (self.move_to_start and may_move):
            return self._refuse(
                f"the arm is {error:.3f} rad from the motion's start at {joint} (start_tolerance "
                f"{self.start_tolerance:g} rad); set move_to_start to move there first"
            )
        q_now = [state[j] for j in names]
        move = approach(names, q_now, motion.q[0], self.approach_speed, self.point_rate)
        self.motion_to_send = motion
        self._send(move, "moving_to_start", scale=False)
        return True, f"moving to the start ({move.duration:.1f} s), then the motion"

    def _refuse(self, reason: str) -> tuple[bool, str]:
        self._set("refused", reason)
        return False, reason

    # ------------------------------------------------------------------ the run
    def _start_recorder(self) -> tuple[bool, str]:
        if self.recorder_start is None:
            self._send_motion()
            return True, "moving"
        self._recorder_deadline = time.monotonic() + _RECORDER_WAIT_S
        self._pending = self.recorder_start.call_async(Trigger.Request())
        self._set("starting_recorder", "starting the recorder")
        return True, "starting the recorder, then the motion"

    def _recorder_refused(self, answer: str) -> None:
        """A refused start is asked again every ``_RECORDER_RETRY_S`` for ``_RECORDER_WAIT_S``
        (a recorder started beside the arm may not have its first joint state yet when the
        exciter has), then the run aborts with the recorder's answer."""
        now = time.monotonic()
        if now >= self._recorder_deadline:
            self._set("aborted", f"the recorder did not start: {answer}")
            return
        self._retry_at = now + _RECORDER_RETRY_S

    def _send_motion(self) -> None:
        self._send(self.motion_to_send, "moving", scale=True)

    def _send(self, motion: Motion, state: str, *, scale: bool) -> None:
        names = self._goal_names(motion)
        if scale:
            motion = motion.scaled(self.speed_scale)
        points = motion.thinned(self.point_rate)
        traj = JointTrajectory(joint_names=names)
        for k in range(points.t.size):
            if points.t[k] == 0.0:
                continue  # the controller starts from its current state
            traj.points.append(JointTrajectoryPoint(
                positions=points.q[k].tolist(), velocities=points.v[k].tolist(),
                accelerations=points.a[k].tolist(), time_from_start=_duration(points.t[k]),
            ))  # fmt: skip
        text = f"{len(traj.points)} points over {motion.duration:.2f} s"
        if self.traj_pub is not None:
            self.traj_pub.publish(traj)
            self._motion_end_s = self._now_s() + motion.duration
            self._pending = None
            self._set(state, f"published {text}")
            return
        goal = self.action_type.Goal(trajectory=traj)
        goal.goal_time_tolerance = _duration(self.tolerances["goal_time_tolerance"])
        for key in ("path_tolerance", "goal_tolerance"):
            if self.tolerances[key] > 0.0:
                setattr(goal, key, [_joint_tolerance(j, self.tolerances[key]) for j in names])
        assert self.client is not None
        self._goal = None
        self._pending = self.client.send_goal_async(goal)
        self._set(state, f"sent {text}")

    def _step(self) -> None:
        """Advance the run when what the current state waits for has come."""
        if self.autostart and self.state == "idle" and not self._missing() \
                and all(self.count_subscribers(t) for t in self.wait_topics):  # fmt: skip
            self.autostart = False  # one automatic run
            self._begin()
            return
        if self.state == "planning":
            self._after_planning()
        elif self.state == "starting_recorder" and self._pending is None \
                and time.monotonic() >= self._retry_at:  # fmt: skip
            assert self.recorder_start is not None
            self._pending = self.recorder_start.call_async(Trigger.Request())
        elif self.state == "starting_recorder" and self._pending is not None \
                and self._pending.done():  # fmt: skip
            answer = self._pending.result()
            self._pending = None
            self.recorder_answer = answer.message
            if not answer.success:
                self._recorder_refused(answer.message)
                return
            self._send_motion()
        elif self.state in ("moving_to_start", "moving"):
            self._follow()
        elif self.state == "stopping_recorder" and self._pending is not None \
                and self._pending.done():  # fmt: skip
            answer = self._pending.result()
            self._pending = None
            self.recorder_answer = answer.message
            final, reason = self._after_stop
            self._set(final, f"{reason}; recorder: {answer.message}")

    def _after_planning(self) -> None:
        if not self._plan_result:
            return
        result = self._plan_result[0]
        if isinstance(result, Exception):
            self._set("refused", f"planning failed: {result}")
            return
        self._check_start(result, self._joint_state())

    def _follow(self) -> None:
        """The motion's progress: topic mode by time, action mode by the goal's answers."""
        moving = self.state == "moving"
        if self.traj_pub is not None:
            if self._now_s() >= self._motion_end_s:
                self._finish_motion(moving, "succeeded", "the motion's duration has passed")
            return
        pending = self._pending
        if pending is None or not pending.done():
            return
        if self._goal is None:  # the goal response
            handle = pending.result()
            if not handle.accepted:
                self._pending = None
                self._finish_motion(moving, "aborted", "the controller rejected the goal")
                return
            self._goal = handle
            self._pending = handle.get_result_async()
            return
        answer = pending.result()
        self._pending, self._goal = None, None
        status = _GOAL_STATUS.get(answer.status, str(answer.status))
        code, text = answer.result.error_code, answer.result.error_string
        if status == "SUCCEEDED" and code == 0:
            if not moving:  # at the start: the motion itself
                self._check_start(self.motion_to_send, self._joint_state(), may_move=False)
                return
            self._finish_motion(moving, "succeeded", f"the motion ended: {text or 'SUCCEEDED'}")
            return
        self._finish_motion(moving, "aborted", f"the controller ended the goal {status} "
                            f"(error_code {code}): {text}")  # fmt: skip

    def _finish_motion(self, recorded: bool, final: str, reason: str) -> None:
        """End the run: stop the recorder if it was started (keeping its segment)."""
        if recorded and self.recorder_stop is not None:
            self._after_stop = (final, reason)
            self._pending = self.recorder_stop.call_async(Trigger.Request())
            self._set("stopping_recorder", reason)
            return
        self._set(final, reason)

    def _abort(self, reason: str) -> None:
        """Cancel whatever moves, stop the recorder if it runs, and say why."""
        state = self.state
        if self._goal is not None:
            self._cancel = self._goal.cancel_goal_async()
        elif state in ("moving_to_start", "moving") and self._pending is not None \
                and self.client is not None:  # fmt: skip
            # the goal response is still on its way: cancel the goal once it is accepted
            self._response = self._pending
            self._pending.add_done_callback(self._cancel_when_accepted)
        if self.traj_pub is not None and state in ("moving_to_start", "moving"):
            self.traj_pub.publish(
                JointTrajectory(joint_names=self._goal_names(self.motion_to_send))
            )
        self._goal = None
        self._pending = None
        # after a start call, stop what it began
        self._finish_motion(state in ("moving", "starting_recorder"), "aborted", reason)

    def _cancel_when_accepted(self, response: Future) -> None:
        handle = response.result()
        if handle is not None and handle.accepted:
            self._cancel = handle.cancel_goal_async()

    def _cancelling(self) -> bool:
        """Whether a cancel is still on its way: the goal's response or the cancel's answer."""
        waits = (self._response, self._cancel)
        return any(f is not None and not f.done() for f in waits) or (
            self._response is not None and self._response.done() and self._cancel is None
            and self._response.result().accepted
        )  # fmt: skip

    # ------------------------------------------------------------------ helpers
    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _set(self, state: str, message: str) -> None:
        self.state = state
        line = f"{state}: {message}"
        if state in ("aborted", "refused"):
            self.get_logger().warning(line)
        else:
            self.get_logger().info(line)
        report = {"state": state, "message": message, "recorder": self.recorder_answer}
        self.status_pub.publish(String(data=yaml.safe_dump(report, sort_keys=False)))

    def close(self) -> None:
        """On shutdown during a run: cancel the goal (also one whose acceptance is still on its
        way) and stop the recorder, waiting up to ``_CLOSE_S`` for their answers."""
        if not self._busy():
            return
        self._abort("shutting down")
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self)
        deadline = time.monotonic() + _CLOSE_S
        while (self._busy() or self._cancelling()) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.remove_node(self)
        executor.shutdown()


def _count(node: Node, name: str, default: int, text: str) -> int:
    """Declare an integer parameter that must be ≥ 1."""
    value = params.declare(node, name, default, text)
    if value < 1:
        raise ParameterError(f"parameter {name!r} must be ≥ 1, got {value!r}")
    return value


def _follow_joint_trajectory() -> type:
    """``control_msgs/action/FollowJointTrajectory``; ``ParameterError`` where not importable."""
    try:
        from control_msgs.action import FollowJointTrajectory
    except ImportError as err:
        raise ParameterError(
            f"parameter 'mode': action needs control_msgs (FollowJointTrajectory), which is not "
            f"importable: {err}; source a ROS 2 installation with ros2_control, or use mode topic"
        ) from err
    return FollowJointTrajectory


def _joint_tolerance(joint: str, position: float) -> Any:
    """A ``control_msgs/JointTolerance`` on ``joint``'s position (rad)."""
    from control_msgs.msg import JointTolerance

    return JointTolerance(name=joint, position=position)


def _duration(seconds: float) -> Duration:
    """``builtin_interfaces/Duration`` of ``seconds`` ≥ 0."""
    ns = round(seconds * 1e9)
    return Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _renamed(motion: Motion, names: list[str]) -> Motion:
    """``motion`` with its joints called ``names``."""
    return Motion(names, motion.t, motion.q, motion.v, motion.a)


def main(args: list[str] | None = None) -> None:
    """Console entry point ``exciter``."""
    run_node(Exciter, "exciter", (ParameterError,), args)


if __name__ == "__main__":
    main()
