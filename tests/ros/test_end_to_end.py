"""End to end over real DDS: bag_player replays a synthetic Panda-box bag -> recorder (the
Panda node configuration) -> estimator (CSVGD, small settings) -> this test.

Checks the issue's list: a ParticleSet arrives, the status reaches CONVERGED, the MarkerArray has
one point per particle for each weight, and the identified robot_description carries box weights
that moved from the prior centre toward the truth.
"""

from __future__ import annotations

import numpy as np
import pytest
from node_helpers import (
    ROOT,
    call_trigger,
    collect,
    executable,
    latched_history,
    output_of,
    ros_args,
    wait_for,
)
from std_msgs.msg import String
from visualization_msgs.msg import MarkerArray

from dynid.sim.common import read_truth
from dynid_msgs.msg import EstimatorStatus, ParticleSet, TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import particle_set_to_posterior, stamp_ns

NUM_PARTICLES = 6
ITERATIONS = 6  # each CSVGD iteration on the Panda box costs seconds on a 2-core CPU
WEIGHTS = ["box/weight1_x", "box/weight1_y", "box/weight2_x", "box/weight2_y"]


@pytest.fixture(scope="module")
def panda_box_bag(tmp_path_factory):
    from dynid.sim.panda_box import simulate

    path = tmp_path_factory.mktemp("e2e") / "panda_box"
    simulate(0, path, hold=0.2)  # short holds: about 1.5 s of data
    return path


def test_replayed_panda_box_bag_is_identified_online(test_node, spawn, tmp_path, panda_box_bag):
    nodes = ROOT / "config" / "nodes"
    player = spawn(
        executable("bag_player"),
        *ros_args({"bag": str(panda_box_bag), "start_paused": True, "clock": True}),
    )
    recorder = spawn(
        executable("recorder"), "--ros-args", "--params-file", str(nodes / "panda_recorder.yaml"),
        *ros_args({"output_dir": str(tmp_path / "segments"), "auto_quiet_s": 0.8,
                   "use_sim_time": True})[1:],
    )  # fmt: skip
    estimator = spawn(
        executable("estimator"), "--ros-args", "--params-file",
        str(nodes / "panda_estimator.yaml"),
        *ros_args({
            "output_dir": str(tmp_path / "identified"), "publish_every": 2,
            "use_sim_time": True,
            "estimator_settings": f"{{num_particles: {NUM_PARTICLES}, "
                                  f"max_iterations: {ITERATIONS}, learning_rate: 0.1, seed: 0}}",
        })[1:],
        "-r", "segment:=/recorder/segment",
    )  # fmt: skip
    procs = {"player": player, "recorder": recorder, "estimator": estimator}
    segments = collect(test_node, TrajectorySegment, "/recorder/segment", qos.reliable(10))
    statuses = collect(test_node, EstimatorStatus, "/estimator/status", latched_history())
    particles = collect(test_node, ParticleSet, "/estimator/particles", qos.reliable(10))
    markers = collect(test_node, MarkerArray, "/estimator/markers", qos.reliable(10))
    urdfs = collect(test_node, String, "/estimator/robot_description", qos.latched())
    # every node is up: the estimator listens to the recorder's segments, the recorder to joints
    wait_for(test_node, lambda: test_node.count_subscribers("/recorder/segment") >= 2,
             "the estimator's segment subscription", estimator, 180.0)  # fmt: skip
    wait_for(test_node, lambda: test_node.count_subscribers("/franka/joint_states") >= 1,
             "the recorder", recorder, 60.0)  # fmt: skip
    # both sim-time nodes must hear /clock from the first message, or they stamp with time 0
    wait_for(test_node, lambda: test_node.count_subscribers("/clock") >= 2,
             "the recorder's and estimator's /clock subscriptions", estimator, 60.0)  # fmt: skip
    assert call_trigger(test_node, "/bag_player/resume").success
    wait_for(test_node, lambda: segments, "a segment from the recorder", recorder, 60.0)
    assert (tmp_path / "segments").is_dir()
    assert any(p.name.startswith("segment_") for p in (tmp_path / "segments").iterdir())

    def finished() -> bool:
        return bool(statuses) and statuses[-1].state in (
            EstimatorStatus.CONVERGED,
            EstimatorStatus.FAILED,
        )

    wait_for(test_node, finished, "the end of the run", estimator, 600.0)
    assert statuses[-1].state == EstimatorStatus.CONVERGED, (
        f"{statuses[-1].message}\n{output_of(estimator)}"
    )
    wait_for(test_node, lambda: particles and urdfs, "particles and URDF", estimator)
    post = particle_set_to_posterior(particles[-1])
    # use_sim_time: stamped with the bag's /clock (the bag starts at the simulator's t0)
    seg_t0 = stamp_ns(segments[0].header.stamp)
    assert seg_t0 <= stamp_ns(particles[-1].header.stamp) <= seg_t0 + 10**10
    assert post.num_particles == NUM_PARTICLES
    spheres = [m for m in markers[-1].markers if m.ns.startswith("box/weight")]
    assert [len(m.points) for m in spheres] == [NUM_PARTICLES, NUM_PARTICLES]
    assert {m.header.frame_id for m in spheres} == {"box"}
    truth = read_truth(panda_box_bag)["parameters"]
    true_w = np.array([truth[n] for n in WEIGHTS])
    mean = post.subset(WEIGHTS).mean()
    # the prior is centred on the box floor (0, 0): the estimate moved toward the truth
    assert np.linalg.norm(mean - true_w) < np.linalg.norm(true_w)
    assert "box" in urdfs[-1].data
    for name, proc in procs.items():
        assert proc.poll() is None, f"{name} died:\n{output_of(proc)}"
