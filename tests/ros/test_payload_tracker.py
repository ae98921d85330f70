"""The payload_tracker node over real DDS: a MuJoCo stream of the Panda releasing its payload is
published on /joint_states; the node publishes the change event and the new estimate, and counts
the malformed messages slipped into the stream without stopping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from node_helpers import ROOT, STARTUP_S, collect, executable, ros_args, wait_for
from ros_helpers import spin_until
from sensor_msgs.msg import JointState

from dynid.sim.mujoco import panda_payload
from dynid_msgs.msg import ParameterEstimate
from dynid_ros.conversions import ns_to_stamp
from dynid_ros.qos import reliable

PROBLEM = ROOT / "config" / "problems" / "panda_payload_track.yaml"
RELEASE_S = 3.5
T0_NS = 1_700_000_000 * 10**9


def _message(traj, k: int) -> JointState:
    msg = JointState()
    msg.header.stamp = ns_to_stamp(T0_NS + round(traj.t[k] * 1e9))
    msg.name = list(traj.joint_names)
    msg.position = traj.q[k].tolist()
    msg.velocity = traj.dq[k].tolist()
    msg.effort = traj.effort[k].tolist()
    return msg


def _values(status: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


@pytest.fixture(scope="module")
def stream():
    dataset, truth = panda_payload.simulate(0, duration=6.0, release_time=RELEASE_S)
    return dataset.trajectories[0], truth


def test_the_tracker_reports_a_release_and_the_estimate_after_it(test_node, spawn, stream) -> None:
    traj, truth = stream
    proc = spawn(
        executable("payload_tracker"),
        *ros_args({"problem": str(PROBLEM), "sample_rate": 1000.0, "rate": 50.0}),
    )
    pub = test_node.create_publisher(JointState, "/joint_states", reliable(1000))
    events = collect(test_node, DiagnosticStatus, "/payload_tracker/events", reliable(50))
    estimates = collect(test_node, ParameterEstimate, "/payload_tracker/estimate", reliable(100))
    inertias = collect(test_node, InertiaStamped, "/payload_tracker/inertia", reliable(100))
    diagnostics = collect(test_node, DiagnosticArray, "/diagnostics", reliable(50))
    wait_for(test_node, lambda: pub.get_subscription_count() > 0, "payload_tracker", proc,
             STARTUP_S)  # fmt: skip
    spin_until(test_node, lambda: False, 0.5)  # let the subscription match back
    bad_length, bad_value = _message(traj, 0), _message(traj, 0)
    bad_length.effort = bad_length.effort[:6]
    bad_value.effort = [math.nan, *bad_value.effort[1:]]

    def reached(k: int) -> bool:  # the node has published an update up to sample k
        if not estimates:
            return False
        stamp = estimates[-1].header.stamp
        return stamp.sec * 10**9 + stamp.nanosec >= T0_NS + round(traj.t[k] * 1e9)

    chunk = 100
    for k in range(len(traj.t)):
        pub.publish(_message(traj, k))
        if k == 1000:
            pub.publish(bad_length)
            pub.publish(bad_value)
        if k % chunk == chunk - 1:
            # flow control on the node's own output, not on the wall clock: at most three
            # chunks in flight, far below its queue, however loaded the machine is
            if k >= 3 * chunk:
                wait_for(test_node, lambda k=k: reached(k - 3 * chunk), "the node's updates",
                         proc, 60.0)  # fmt: skip
            spin_until(test_node, lambda: False, 0.005, step_s=0.001)

    def settled() -> bool:
        return any(_values(e).get("kind") == "settled" for e in events)

    wait_for(test_node, settled, "the settled change event", proc, 60.0)
    release_stamp = T0_NS * 1e-9 + RELEASE_S
    detected = [_values(e) for e in events if _values(e)["kind"] == "detected"]
    assert len(detected) == 1, [e.message for e in events]
    first = detected[0]
    assert 0.0 <= float(first["detect_time"]) - release_stamp <= 0.5
    mass = truth["parameters"]["payload/mass"]
    assert float(first["before/payload/mass"]) == pytest.approx(mass, rel=0.01)
    after = next(_values(e) for e in events if _values(e)["kind"] == "settled")
    assert abs(float(after["after/payload/mass"])) < 0.01 * mass
    # the published estimate: carried before the release, gone after it
    wait_for(test_node, lambda: bool(estimates) and estimates[-1].header.stamp.sec
             >= int(release_stamp + 2.0), "estimates after the release", proc)  # fmt: skip
    stamps = np.array([e.header.stamp.sec + 1e-9 * e.header.stamp.nanosec for e in estimates])
    masses = np.array([e.mean[e.names.index("payload/mass")] for e in estimates])
    carried = (stamps > release_stamp - 1.0) & (stamps < release_stamp)
    assert carried.any()
    assert np.allclose(masses[carried], mass, rtol=0.01)
    assert abs(masses[-1]) < 0.01 * mass
    assert len(estimates[-1].covariance) == len(estimates[-1].names) ** 2
    last = inertias[-1]
    same = [e for e in estimates if e.header.stamp == last.header.stamp]
    assert last.header.frame_id == "panda_link8"
    assert same  # published together with an estimate of the same update
    assert last.inertia.m == pytest.approx(same[0].mean[0], abs=1e-12)
    # the two malformed messages were counted and skipped
    wait_for(test_node, lambda: _rejected(diagnostics) >= 2, "the rejected count", proc)
    assert proc.poll() is None


def _rejected(diagnostics: list[DiagnosticArray]) -> int:
    counts = [
        int(_values(s)["rejected"])
        for array in diagnostics
        for s in array.status
        if s.name.endswith(": /joint_states")
    ]
    return max(counts, default=0)
