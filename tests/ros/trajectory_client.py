"""A FollowJointTrajectory client for the robot_sim tests, run as its own process (it needs
``control_msgs``, which the test process may lack: the stand-in overlay's environment).

Usage: python trajectory_client.py ACTION GOALS_JSON

``GOALS_JSON`` is a list of goals sent one after the other, each
``{"joints": [...], "points": [{"t": s, "q": [...], "v": [...]?}, ...], "path_tolerance": rad?,
"goal_tolerance": rad?, "goal_time_tolerance": s?, "cancel_after_s": s?}``. For each goal one line
``RESULT {"accepted", "status", "error_code", "error_string", "feedback"}`` is printed
(``feedback``: how many feedback messages came, and the last one's ``index``). An item
``{"set_load": {"mass", "center_of_mass", "load_inertia"}}`` calls Franka's ``SetLoad`` on
``/service_server/set_load`` instead and prints ``RESULT {"success", "error"}``.
"""

import json
import sys
import time

import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from franka_msgs.srv import SetLoad
from rclpy.action import ActionClient
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectoryPoint

STATUS = {GoalStatus.STATUS_SUCCEEDED: "SUCCEEDED", GoalStatus.STATUS_ABORTED: "ABORTED",
          GoalStatus.STATUS_CANCELED: "CANCELED"}  # fmt: skip


def duration(msg, seconds: float) -> None:
    msg.sec = int(seconds)
    msg.nanosec = round((seconds - int(seconds)) * 1e9)


def goal_of(spec: dict) -> FollowJointTrajectory.Goal:
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = spec["joints"]
    for p in spec["points"]:
        point = JointTrajectoryPoint(positions=p["q"], velocities=p.get("v", []))
        duration(point.time_from_start, p["t"])
        goal.trajectory.points.append(point)
    for key in ("path_tolerance", "goal_tolerance"):
        if key in spec:
            setattr(goal, key, [JointTolerance(name=j, position=spec[key])
                                for j in spec["joints"]])  # fmt: skip
    duration(goal.goal_time_tolerance, spec.get("goal_time_tolerance", 0.0))
    return goal


def spin_until(node: Node, future, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    return future.done()


def main() -> None:
    rclpy.init()
    node = Node("trajectory_client")
    client = ActionClient(node, FollowJointTrajectory, sys.argv[1])
    if not client.wait_for_server(timeout_sec=120.0):
        print("RESULT " + json.dumps({"error": "no action server"}), flush=True)
        return
    set_load = node.create_client(SetLoad, "/service_server/set_load")
    for spec in json.loads(sys.argv[2]):
        if "set_load" in spec:
            assert set_load.wait_for_service(timeout_sec=60.0), "no SetLoad service"
            answer = set_load.call_async(SetLoad.Request(**spec["set_load"]))
            assert spin_until(node, answer, 30.0), "SetLoad did not answer"
            response = answer.result()
            print("RESULT " + json.dumps({"success": response.success, "error": response.error}),
                  flush=True)  # fmt: skip
            continue
        feedback = {"count": 0, "index": None}

        def on_feedback(msg, feedback=feedback) -> None:
            feedback["count"] += 1
            feedback["index"] = msg.feedback.index

        sent = client.send_goal_async(goal_of(spec), feedback_callback=on_feedback)
        assert spin_until(node, sent, 30.0), "no goal response"
        handle = sent.result()
        if not handle.accepted:
            print("RESULT " + json.dumps({"accepted": False}), flush=True)
            continue
        result = handle.get_result_async()
        if "cancel_after_s" in spec:
            spin_until(node, result, spec["cancel_after_s"])
            cancel = handle.cancel_goal_async()
            assert spin_until(node, cancel, 30.0), "no cancel response"
        assert spin_until(node, result, 60.0), "no result"
        answer = result.result()
        print("RESULT " + json.dumps({
            "accepted": True, "status": STATUS.get(answer.status, answer.status),
            "error_code": answer.result.error_code, "error_string": answer.result.error_string,
            "feedback": feedback,
        }), flush=True)  # fmt: skip
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
