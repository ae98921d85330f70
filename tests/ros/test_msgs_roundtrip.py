"""Every dynid_msgs message crosses DDS between two processes and comes back unchanged."""

from __future__ import annotations

import math

import numpy as np
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
from ros_helpers import HERE, PYTHON, spin_until

from dynid_msgs.msg import EstimatorStatus, ParameterEstimate, ParticleSet, TrajectorySegment

QOS = QoSProfile(
    depth=10,
    reliability=QoSReliabilityPolicy.RELIABLE,
    durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
)
rng = np.random.default_rng(7)


def _segment() -> TrajectorySegment:
    T, n, c, k = 50, 7, 2, 7
    msg = TrajectorySegment()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000, 123_456_789
    msg.header.frame_id = "world"
    msg.joint_names = [f"fr3_joint{i}" for i in range(1, n + 1)]
    msg.time = (np.arange(T) * 1e-3).tolist()
    msg.position = rng.normal(size=T * n).tolist()
    msg.velocity = rng.normal(size=T * n).tolist()
    msg.effort = []
    msg.command_names = ["fr3_joint6/position_desired", "fr3_joint7/position_desired"]
    msg.command = rng.normal(size=T * c).tolist()
    msg.observation_names = [f"box/{a}" for a in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    msg.observation = rng.normal(size=T * k).tolist()
    msg.source = "sim:panda_box"
    return msg


def _particles() -> ParticleSet:
    N, M = 64, 4
    msg = ParticleSet()
    msg.header.frame_id = "box"
    msg.estimator = "csvgd"
    msg.parameter_names = ["box/weight1_x", "box/weight1_y", "box/weight2_x", "box/weight2_y"]
    msg.units = ["m"] * M
    msg.num_particles = N
    msg.values = rng.uniform(-0.1, 0.1, size=N * M).tolist()
    msg.log_weights = [-math.log(N)] * N
    msg.log_likelihood = rng.normal(size=N).tolist()
    msg.iteration = 500
    return msg


def _estimate() -> ParameterEstimate:
    M = 3
    msg = ParameterEstimate()
    msg.names = ["link5/mass", "link5/com_x", "joint2/damping"]
    msg.mean = [0.05, 0.01, 0.2]
    msg.std = [1e-3, 2e-3, 0.05]
    a = rng.normal(size=(M, M))
    msg.covariance = (a @ a.T).reshape(-1).tolist()
    msg.map = [0.051, 0.009, 0.21]
    return msg


def _status() -> EstimatorStatus:
    msg = EstimatorStatus()
    msg.estimator = "csvgd"
    msg.state = EstimatorStatus.CONVERGED
    msg.iteration = 42
    msg.loss = 123.25
    msg.elapsed_s = 3.5
    msg.message = "max defect 3.1e-05 < 1e-04"
    return msg


MESSAGES = {
    "TrajectorySegment": _segment(),
    "ParticleSet": _particles(),
    "ParameterEstimate": _estimate(),
    "EstimatorStatus": _status(),
}


def test_status_states_are_distinct() -> None:
    states = {EstimatorStatus.IDLE, EstimatorStatus.RUNNING, EstimatorStatus.CONVERGED}
    assert len(states | {EstimatorStatus.FAILED}) == 4


def test_every_message_round_trips_between_processes(test_node, spawn) -> None:
    echo = spawn(PYTHON, str(HERE / "echo_node.py"), *MESSAGES)
    received: dict[str, object] = {}
    pubs = {}
    subs = []
    for name, msg in MESSAGES.items():
        pubs[name] = test_node.create_publisher(type(msg), f"{name}/in", QOS)
        subs.append(
            test_node.create_subscription(
                type(msg), f"{name}/out", lambda m, n=name: received.setdefault(n, m), QOS
            )
        )
    # wait until the echo process has matched every publisher, then publish
    assert spin_until(
        test_node, lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 30.0
    ), f"echo node never subscribed; its output:\n{echo.stdout.read() if echo.poll() else ''}"
    for name, msg in MESSAGES.items():
        pubs[name].publish(msg)
    assert spin_until(test_node, lambda: len(received) == len(MESSAGES), 30.0), (
        f"received only {sorted(received)}"
    )
    for name, msg in MESSAGES.items():
        assert received[name] == msg, f"{name} changed on the way"
    # flattened matrices keep their row-major layout and exact float64 values
    seg = received["TrajectorySegment"]
    pos = np.asarray(seg.position).reshape(len(seg.time), len(seg.joint_names))
    np.testing.assert_array_equal(
        pos, np.asarray(MESSAGES["TrajectorySegment"].position).reshape(50, 7)
    )
