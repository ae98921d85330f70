"""Message conversions, ring buffer and segmenter of dynid_ros, without DDS (fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from dynid.data import CommandTopic, Trajectory
from dynid.posterior import Posterior
from dynid_ros import conversions as cv
from dynid_ros.errors import BadMessageError
from dynid_ros.ring import RingBuffer
from dynid_ros.segmenter import Segmenter, SegmentMode

rng = np.random.default_rng(3)


def _js(names, pos, vel=(), eff=(), ns=5) -> JointState:
    msg = JointState(name=list(names), position=list(pos), velocity=list(vel), effort=list(eff))
    msg.header.stamp = cv.ns_to_stamp(ns)
    return msg


def test_joint_states_are_selected_reordered_scaled_and_validated() -> None:
    conv = cv.JointStateConverter(["b", "a"], [2.0, 10.0])
    s = conv(_js(["a", "b", "grip"], [1.0, 2.0, 3.0], [0.1, 0.2, 0.3], [1.0, 1.0, 1.0], ns=7))
    assert s.stamp_ns == 7
    np.testing.assert_array_equal(s.position, [2.0, 1.0])
    np.testing.assert_array_equal(s.velocity, [0.2, 0.1])
    np.testing.assert_array_equal(s.effort, [2.0, 10.0])
    cases = [
        (_js(["a", "b"], [1.0]), "position: expected 2 values (one per name), got 1"),
        (_js(["a", "b"], [1.0, math.nan], [0, 0], [0, 0]),
         "position: non-finite value for joint 'b'"),
        (_js(["a", "b", "grip"], [1.0, 2.0, 3.0], [0, 0, 0], [0, math.inf, 0]),
         "effort: non-finite value for joint 'b'"),
        (_js(["a", "c"], [1.0, 2.0], [0, 0], [0, 0]), "name: joints ['b'] missing"),
        (_js(["a", "a"], [1.0, 2.0]), "name: empty or repeated joint names"),
        (_js(["a", "b"], [1.0, 2.0], [], [0, 0]),
         "velocity: missing (earlier messages carried it)"),
    ]  # fmt: skip
    for msg, key in cases:
        with pytest.raises(BadMessageError) as err:
            conv(msg)
        assert err.value.key == key
    # a joint that is not recorded may carry NaN (an interface its driver lacks)
    s = conv(_js(["a", "b", "grip"], [1.0, 2.0, math.nan], [0.1, 0.2, math.nan], [1, 1, math.nan]))
    np.testing.assert_array_equal(s.position, [2.0, 1.0])


def test_mocap_frames_other_than_the_world_frame_are_refused() -> None:
    for frame in ("world", "/world", ""):
        cv.check_frame(frame, "world")
    with pytest.raises(BadMessageError) as err:
        cv.check_frame("map", "world")
    assert err.value.key == "header.frame_id: expected 'world' (world_frame), got 'map'"


def test_commands_follow_the_data_layer_channel_names() -> None:
    arr = cv.CommandConverter(CommandTopic("/u", cv.FLOAT64_MULTI_ARRAY, names=("x", "y")))
    assert arr.channels == ["x", "y"]
    assert arr(Float64MultiArray(data=[1.0, 2.0]), 42)[0][0] == 42
    with pytest.raises(BadMessageError, match="data: expected 2 values"):
        arr(Float64MultiArray(data=[1.0]), 43)
    js = cv.CommandConverter(CommandTopic("/d", label="desired", fields=("position", "velocity")))
    (stamp, row), = js(_js(["j1", "j2"], [1.0, 2.0], [3.0, 4.0], ns=9), 0)  # fmt: skip
    assert stamp == 9
    assert js.channels == ["desired/j1/position", "desired/j2/position",
                           "desired/j1/velocity", "desired/j2/velocity"]  # fmt: skip
    np.testing.assert_array_equal(row, [1.0, 2.0, 3.0, 4.0])
    picked = cv.CommandConverter(CommandTopic("/p", names=("j2",)))
    (_, row), = picked(_js(["j1", "j2"], [math.nan, 2.0], ns=10), 0)  # fmt: skip
    np.testing.assert_array_equal(row, [2.0])
    with pytest.raises(BadMessageError, match="position: non-finite value for joint 'j2'"):
        picked(_js(["j1", "j2"], [1.0, math.nan], ns=11), 0)


def test_trajectory_segment_round_trip_and_bad_lengths() -> None:
    T = 12
    traj = Trajectory(
        t=0.5 + np.arange(T) * 0.01, q=rng.normal(size=(T, 3)), joint_names=["a", "b", "c"],
        dq=rng.normal(size=(T, 3)), command=rng.normal(size=(T, 1)), command_names=["u"],
        obs=rng.normal(size=(T, 2)), obs_names=["p/x", "p/y"], meta={"t0_ns": 10**18},
    )  # fmt: skip
    msg = cv.trajectory_to_segment(traj, source="s", frame_id="world")
    assert cv.stamp_ns(msg.header.stamp) == 10**18 + 500_000_000
    back = cv.segment_to_trajectory(msg)
    np.testing.assert_array_equal(back.q, traj.q)
    np.testing.assert_allclose(back.t, traj.t - 0.5)
    assert back.meta["t0_ns"] == 10**18 + 500_000_000
    assert back.effort is None
    msg.observation = msg.observation[:-1]
    with pytest.raises(BadMessageError, match="observation: expected 12 x 2 = 24 values, got 23"):
        cv.segment_to_trajectory(msg)
    msg = cv.trajectory_to_segment(traj, source="s", frame_id="world")
    msg.time = [0.0, 0.0, *msg.time[2:]]
    with pytest.raises(BadMessageError, match="strictly increasing"):
        cv.segment_to_trajectory(msg)


def _posterior(n: int = 16) -> Posterior:
    names = ["box/weight1_x", "box/weight1_y", "payload/com_x", "payload/com_y",
             "payload/com_z", "joint2/damping"]  # fmt: skip
    logw = rng.normal(size=n)
    return Posterior(particles=rng.normal(size=(n, len(names))), names=names,
                     units=["m"] * 5 + ["N*m*s/rad"], log_weights=logw - np.log(np.exp(logw).sum()),
                     estimator="csvgd", iteration=7)  # fmt: skip


def test_particle_set_round_trip_estimate_markers_and_covariance() -> None:
    post = _posterior()
    stamp = cv.ns_to_stamp(123)
    msg = cv.posterior_to_particle_set(post, stamp=stamp, frame_id="world")
    back = cv.particle_set_to_posterior(msg)
    np.testing.assert_array_equal(back.particles, post.particles)
    np.testing.assert_allclose(back.log_weights, post.log_weights)
    est = cv.posterior_to_estimate(post, stamp=stamp, frame_id="world")
    np.testing.assert_allclose(np.reshape(est.covariance, (6, 6)), post.cov())
    markers = cv.posterior_markers(post, stamp=stamp, frames={"payload": "link5"},
                                   scatter_frame="params")  # fmt: skip
    by_ns = {m.ns: m for m in markers.markers}
    assert set(by_ns) == {"box/weight1", "payload/com", "scatter/joint2/damping"}
    assert all(len(m.points) == post.num_particles for m in markers.markers)
    assert by_ns["payload/com"].header.frame_id == "link5"
    assert by_ns["box/weight1"].header.frame_id == "box"
    assert [p.z for p in by_ns["box/weight1"].points] == [0.0] * post.num_particles
    heaviest = int(np.argmax(post.log_weights))
    assert by_ns["box/weight1"].colors[heaviest].r == pytest.approx(1.0)
    cov = cv.point_covariance(post, stamp=stamp, frames={"payload": "link5"})
    assert cov.header.frame_id == "link5"  # the COM group is preferred
    np.testing.assert_allclose(
        np.reshape(cov.pose.covariance, (6, 6))[:3, :3], post.cov()[2:5, 2:5]
    )
    msg.values = msg.values[:-1]
    with pytest.raises(BadMessageError, match="values"):
        cv.particle_set_to_posterior(msg)


def test_ring_buffer_is_bounded_ordered_and_ages_out() -> None:
    ring = RingBuffer(2, capacity=5, max_age_ns=100)
    for k in range(8):
        assert ring.push(k * 10, np.array([k, -k], dtype=float))
    assert not ring.push(70, np.zeros(2))  # not after the newest
    stamps, rows = ring.window()
    np.testing.assert_array_equal(stamps, [30, 40, 50, 60, 70])
    np.testing.assert_array_equal(rows[:, 0], [3, 4, 5, 6, 7])
    assert ring.overwritten == 3
    assert ring.last_overwritten_ns == 20  # the newest sample pushed out by capacity
    np.testing.assert_array_equal(ring.window(45, 65)[0], [50, 60])
    assert ring.truncate_after(60) == 2
    assert ring.last_stamp == 50
    ring.push(500, np.zeros(2))
    np.testing.assert_array_equal(ring.window()[0], [500])  # older than 100 ns behind: aged out


def test_segmenter_cuts_by_motion_rest_and_length() -> None:
    seg = Segmenter(SegmentMode.AUTO, threshold=0.1, quiet_s=0.5, pre_s=0.1,
                    min_duration_s=0.2, max_duration_s=10.0)  # fmt: skip
    ms = 1_000_000
    cuts = []
    for k in range(3000):  # rest, move 1 s, rest 2 s
        cuts += seg.update(k * ms, 1.0 if 500 <= k < 1500 else 0.0)
    assert [(c.start_ns, c.end_ns, c.reason) for c in cuts] == [
        (400 * ms, 1999 * ms, "joints at rest")  # 0.5 s after the last motion (k = 1499)
    ]
    seg = Segmenter(SegmentMode.SERVICE, threshold=0.1, quiet_s=0.5, pre_s=0.0,
                    min_duration_s=0.2, max_duration_s=1.0)  # fmt: skip
    assert seg.start(0)
    assert not seg.start(5)
    cuts = [c for k in range(2500) for c in seg.update(k * ms, None)]
    assert [(c.start_ns, c.end_ns) for c in cuts] == [(0, 1000 * ms), (1000 * ms, 2000 * ms)]
    assert seg.stop(2499 * ms).start_ns == 2000 * ms
