"""estimator node over real DDS on the planar dice problem file: a real drop replayed as a segment
is identified by Metropolis–Hastings (the residual-contact paper's (μ, ε)), the node publishes
the samples as particles and scores the run on the problem's held-out drops
(``validation.data``) by simulation error."""

from __future__ import annotations

import numpy as np
from node_helpers import collect, output_of, start_estimator, wait_for

from dynid.data.planar_dice import load_dice_trajectories
from dynid.resources import repo_root
from dynid_msgs.msg import EstimatorStatus, ParticleSet
from dynid_ros import qos
from dynid_ros.conversions import particle_set_to_posterior, trajectory_to_segment

PROBLEM = repo_root() / "config" / "problems" / "planar_dice.yaml"
ITERATIONS = 30


def test_metropolis_on_replayed_drops_publishes_samples_and_the_held_out_error(
    test_node, spawn, tmp_path, shared_recording
) -> None:
    root = shared_recording("planar-dice")
    settings = "{burn_in: 10, chains: 2, seed: 0}"
    proc, seg_pub, statuses = start_estimator(
        test_node, spawn, PROBLEM, tmp_path / "out", max_iterations=ITERATIONS,
        estimator_settings=settings,
    )  # fmt: skip
    particles = collect(test_node, ParticleSet, "/estimator/particles", qos.reliable(10))
    (traj,) = load_dice_trajectories([1], root=root)
    traj.meta["t0_ns"] = 1_700_000_000_000_000_000
    seg_pub.publish(trajectory_to_segment(traj, source="test:drop1", frame_id="world"))
    ended = (EstimatorStatus.CONVERGED, EstimatorStatus.FAILED)
    wait_for(test_node, lambda: bool(statuses) and statuses[-1].state in ended,
             "the run to end", proc, 300.0)  # fmt: skip
    message = statuses[-1].message
    assert statuses[-1].state == EstimatorStatus.CONVERGED, message
    assert "held-out simulation RMSE/σ" in message, message
    wait_for(test_node, lambda: bool(particles), "particles", proc)
    post = particle_set_to_posterior(particles[-1])
    assert post.names == ["dice/friction", "dice/restitution"]
    assert np.all((post.particles >= 0.0) & (post.particles <= 1.0))
    assert proc.poll() is None, output_of(proc)
