"""``robot_tf`` node: the robot's TF from joint states and mocap poses, for RViz in replay.

Where ``robot_state_publisher`` runs (a live robot) it publishes the robot's TF; on a replayed
bag nothing does, and RViz cannot place markers given in the robot's links. This node fills in:

* ``/tf`` (``tf2_msgs/TFMessage``): ``world_frame`` -> every link of the robot's URDF, by
  Pinocchio forward kinematics of the joint states (stamped with each message's stamp, at most
  ``max_rate_hz``; joints a message does not name stay at 0);
* ``/tf``: ``world_frame`` -> ``<frame>`` for each mocap topic (``TransformStamped`` as received,
  ``PoseStamped`` with the frame of ``mocap_frames``): a tracked object such as the box;
* ``/tf_static``: ``world_frame`` -> ``scatter_frame`` shifted by ``scatter_offset`` (m), the
  frame of the estimator's scatter of non-spatial parameters.

A message that cannot be used (unknown lengths, non-finite values, another parent frame) is
skipped with a throttled warning naming the topic and the field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
from geometry_msgs.msg import PoseStamped, TransformStamped
from numpy.typing import NDArray
from rclpy.node import Node
from sensor_msgs.msg import JointState

from dynid.model.robot import available_robots, robot_urdf
from dynid_ros import params, qos
from dynid_ros.conversions import stamp_ns
from dynid_ros.errors import ParameterError
from dynid_ros.run import run_node

#: one rigid transform: parent frame, child frame, translation (m), quaternion (x, y, z, w)
Transform = tuple[str, str, NDArray[np.float64], NDArray[np.float64]]


class LinkTransforms:
    """World -> link transforms of a URDF robot for named joint positions.

    Args:
        urdf: the URDF document (every joint is kept, none locked).
        world_frame: parent frame of every transform; a link of that name is skipped.

    Raises:
        ValueError: the URDF cannot be parsed by Pinocchio.
    """

    def __init__(self, urdf: str, world_frame: str = "world") -> None:
        self.model = pin.buildModelFromXML(urdf)
        self.data = self.model.createData()
        self.world_frame = world_frame
        # configuration index and size of each one-dof joint: 1 (revolute, prismatic) or 2
        # (continuous: cos, sin of the angle)
        self._index = {
            name: (self.model.joints[j].idx_q, self.model.joints[j].nq)
            for j, name in enumerate(self.model.names)
            if j > 0 and self.model.joints[j].nv == 1
        }
        self.links = [f.name for f in self.model.frames
                      if f.type == pin.FrameType.BODY and f.name != world_frame]  # fmt: skip
        self._frame_ids = [self.model.getFrameId(n) for n in self.links]

    @property
    def joint_names(self) -> list[str]:
        """The one-dof joints of the model (revolute, prismatic, continuous)."""
        return list(self._index)

    def __call__(self, names: Sequence[str], positions: Sequence[float]) -> list[Transform]:
        """``(world_frame, link, xyz, xyzw)`` of every link; ``names`` not in the model are
        ignored, joints not in ``names`` are at 0.

        Raises:
            ValueError: ``names`` and ``positions`` differ in length, or a used position is not
                finite.
        """
        if len(names) != len(positions):
            raise ValueError(f"{len(names)} names for {len(positions)} positions")
        q = pin.neutral(self.model)
        for name, value in zip(names, positions, strict=True):
            found = self._index.get(name)
            if found is None:
                continue
            if not math.isfinite(value):
                raise ValueError(f"position of {name!r} is {value}")
            index, nq = found
            if nq == 1:
                q[index] = value
            else:
                q[index : index + 2] = math.cos(value), math.sin(value)
        pin.framesForwardKinematics(self.model, self.data, q)
        out = []
        for link, fid in zip(self.links, self._frame_ids, strict=True):
            placement = self.data.oMf[fid]
            xyzw = pin.Quaternion(placement.rotation).coeffs()  # x, y, z, w
            out.append((self.world_frame, link, placement.translation.copy(), np.array(xyzw)))
        return out


def transform_msg(stamp: Any, transform: Transform) -> TransformStamped:
    """``geometry_msgs/TransformStamped`` of ``transform`` stamped ``stamp``."""
    parent, child, xyz, xyzw = transform
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = (float(v) for v in xyz)
    r.x, r.y, r.z, r.w = (float(v) for v in xyzw)
    return msg


class RobotTf(Node):
    """The robot_tf node (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("robot_tf", **kwargs)
        try:  # tf2_msgs comes with a system ROS; the Python wheels here lack it
            from tf2_msgs.msg import TFMessage
        except ImportError as err:
            raise ParameterError(
                f"needs tf2_msgs (TFMessage), which is not importable: {err}; source a "
                "ROS 2 installation"
            ) from err
        self._tf_type = TFMessage
        d = params.declare
        robot = d(self, "robot", "panda", f"dynid robot whose URDF is used: {available_robots()}")
        urdf_file = d(self, "urdf_file", "", "URDF file instead of the robot's")
        self.world = d(self, "world_frame", "world", "parent frame of every transform")
        js_topic = d(self, "joint_state_topic", "/joint_states", "sensor_msgs/JointState topic")
        self.period_ns = round(1e9 / params.positive("max_rate_hz", d(
            self, "max_rate_hz", 50.0, "most joint-state transforms per second (by stamp)"))
        )  # fmt: skip
        mocap_topics = d(self, "mocap_topics", [], "mocap pose topics put on /tf", item=str)
        mocap_types = d(self, "mocap_types", [], "PoseStamped | TransformStamped per mocap topic",
                        item=str)  # fmt: skip
        mocap_frames = d(self, "mocap_frames", [], "child frame per mocap topic (PoseStamped; "
                         "TransformStamped keeps its own)", item=str)  # fmt: skip
        params.same_length({"mocap_topics": mocap_topics, "mocap_types": mocap_types,
                            "mocap_frames": mocap_frames})  # fmt: skip
        scatter = d(self, "scatter_frame", "dynid_parameters",
                    "static frame of the estimator's parameter scatter; empty: none")  # fmt: skip
        offset = d(self, "scatter_offset", [0.0, -1.0, 0.0],
                   "position (m) of scatter_frame in world_frame", item=float)  # fmt: skip
        if len(offset) != 3:
            raise ParameterError(f"parameter 'scatter_offset' needs 3 values, got {offset}")
        try:
            if urdf_file:
                urdf = Path(urdf_file).expanduser().read_text(encoding="utf-8")
            else:
                urdf = robot_urdf(params.choice("robot", robot, available_robots())).read_text(
                    encoding="utf-8"
                )
            self.links = LinkTransforms(urdf, self.world)
        except (OSError, ValueError, RuntimeError) as err:
            source = f"parameter 'urdf_file': {urdf_file}" if urdf_file else f"robot {robot!r}"
            raise ParameterError(f"{source}: cannot build the robot's model: {err}") from err
        self._last_ns: int | None = None
        self.tf_pub = self.create_publisher(TFMessage, "/tf", qos.reliable(100))
        self.static_pub = self.create_publisher(TFMessage, "/tf_static", qos.latched())
        self.create_subscription(JointState, js_topic, self._on_joint_states, qos.sensor(100))
        for topic, kind, frame in zip(mocap_topics, mocap_types, mocap_frames, strict=True):
            msg_type = {"PoseStamped": PoseStamped, "TransformStamped": TransformStamped}.get(kind)
            if msg_type is None:
                raise ParameterError(f"parameter 'mocap_types': {kind!r} is not PoseStamped or "
                                     "TransformStamped")  # fmt: skip
            self.create_subscription(msg_type, topic, partial(self._on_mocap, topic, frame),
                                     qos.sensor(100))  # fmt: skip
        if scatter:
            static = (self.world, scatter, np.array(offset), np.array([0.0, 0.0, 0.0, 1.0]))
            self.static_pub.publish(
                TFMessage(transforms=[transform_msg(self.get_clock().now().to_msg(), static)])
            )
        self.get_logger().info(
            f"TF of {len(self.links.links)} links of {urdf_file or robot} from {js_topic}, "
            f"{len(mocap_topics)} mocap frame(s), static {scatter or 'none'} in {self.world}"
        )

    def _skip(self, topic: str, why: str) -> None:
        self.get_logger().warning(f"{topic}: message skipped: {why}", throttle_duration_sec=5.0)

    def _on_joint_states(self, msg: JointState) -> None:
        stamp = stamp_ns(msg.header.stamp)
        if self._last_ns is not None and 0 <= stamp - self._last_ns < self.period_ns:
            return
        try:
            transforms = self.links(list(msg.name), list(msg.position))
        except ValueError as err:
            self._skip("joint states", f"name/position: {err}")
            return
        self._last_ns = stamp
        self.tf_pub.publish(self._tf_type(
            transforms=[transform_msg(msg.header.stamp, t) for t in transforms]))  # fmt: skip

    def _on_mocap(self, topic: str, frame: str, msg: Any) -> None:
        if isinstance(msg, TransformStamped):
            out = msg
        else:
            p, o = msg.pose.position, msg.pose.orientation
            xyzw = np.array([o.x, o.y, o.z, o.w])
            xyz = np.array([p.x, p.y, p.z])
            out = transform_msg(msg.header.stamp, (msg.header.frame_id, frame, xyz, xyzw))
        if out.header.frame_id.lstrip("/") != self.world:
            self._skip(topic, f"header.frame_id {out.header.frame_id!r}, expected {self.world!r}")
            return
        self.tf_pub.publish(self._tf_type(transforms=[out]))

    def close(self) -> None:
        """Nothing to finish: transforms are published as messages arrive."""


def main(args: list[str] | None = None) -> None:
    """Console entry point ``robot_tf``."""
    run_node(RobotTf, "robot_tf", (ParameterError,), args)


if __name__ == "__main__":
    main()
