"""estimator node over real DDS running STEADY: a replayed segment of encoder readings is
filtered and learned from, and the node publishes the physical parameters as particles.

The problem is a double pendulum released from rest whose first link's mass is free; STEADY
reads only the joint positions (quantised to 1 mrad) and runs a few EM iterations with a few
dozen particles, so a run takes seconds on a busy CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from node_helpers import collect, output_of, start_estimator, wait_for

from dynid.data import Trajectory
from dynid_msgs.msg import EstimatorStatus, ParameterEstimate, ParticleSet, TrajectorySegment
from dynid_ros import qos
from dynid_ros.conversions import particle_set_to_posterior, trajectory_to_segment

ITERATIONS = 4


@pytest.fixture
def problem_file(tmp_path):
    config = {
        "name": "dp_steady_node_test",
        "robot": {"name": "double_pendulum"},
        "parameters": [{"name": "link1/mass", "lower": 0.5, "upper": 2.0, "unit": "kg"}],
        "data": {"source": "bag", "dt": 0.01},
        "control": {"type": "none"},
        "observe": {"joints": "all"},
        "likelihood": {"obs_std": 0.002},
        "estimator": {
            "name": "steady",
            "settings": {"num_particles": 32, "max_iterations": ITERATIONS, "anneal_steps": 2,
                         "validation_every": 2, "encoder_resolution": 0.001, "seed": 0},
        },
    }  # fmt: skip
    path = tmp_path / "dp_steady.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def segment() -> TrajectorySegment:
    """30 samples (0.3 s) of encoder readings of a pendulum falling from a tilted rest."""
    t = np.arange(30) * 0.01
    q = np.stack([0.6 - 2.0 * t**2, -0.2 + 1.0 * t**2], axis=1)
    q = np.round(q / 0.001) * 0.001
    traj = Trajectory(t=t, q=q, joint_names=["joint1", "joint2"], dq=np.zeros_like(q),
                      meta={"t0_ns": 1_700_000_000_000_000_000})  # fmt: skip
    return trajectory_to_segment(traj, source="test:encoders", frame_id="world")


def test_steady_run_publishes_the_physical_parameters_as_particles(
    test_node, spawn, tmp_path, problem_file
) -> None:
    proc, seg_pub, statuses = start_estimator(test_node, spawn, problem_file, tmp_path / "out")
    particles = collect(test_node, ParticleSet, "/estimator/particles", qos.reliable(10))
    estimates = collect(test_node, ParameterEstimate, "/estimator/estimate", qos.reliable(10))
    seg_pub.publish(segment())
    ended = (EstimatorStatus.CONVERGED, EstimatorStatus.FAILED)
    wait_for(test_node, lambda: bool(statuses) and statuses[-1].state in ended,
             "the run to end", proc, 300.0)  # fmt: skip
    assert statuses[-1].state == EstimatorStatus.CONVERGED, statuses[-1].message
    assert statuses[-1].iteration == ITERATIONS
    wait_for(test_node, lambda: bool(particles) and bool(estimates), "particles", proc)
    post = particle_set_to_posterior(particles[-1])
    assert post.names == ["link1/mass"]
    assert np.isfinite(post.particles).all()
    assert np.all((post.particles >= 0.5) & (post.particles <= 2.0))
    # the physical parameter's spread comes with it (the observed-information covariance)
    assert estimates[-1].covariance[0] > 0
    assert proc.poll() is None, output_of(proc)
