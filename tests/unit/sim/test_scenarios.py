"""Synthetic scenarios: determinism, bags and truth files, and the physics each one must show."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from rosbags.rosbag2 import Reader

from dynid.data import BagLayout, StorageFormat, read_bag
from dynid.data import messages as m
from dynid.model.attachments import attach_payload
from dynid.model.robot import load_robot
from dynid.problem_file import available_scenarios, load_scenario
from dynid.problem_file.scenarios import engines
from dynid.sim import (
    SimulationError,
    double_pendulum,
    furuta,
    hovercraft,
    omx_payload,
    panda_box,
    panda_payload,
    read_truth,
    truth_path,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _read_back(path: Path, truth: dict):
    dataset, summary = read_bag(path, BagLayout.from_mapping(truth["layout"]))
    assert summary.problems() == 0
    return dataset


def test_double_pendulum_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    settings = {"trajectories": 3, "steps": 40, "position_noise": 0.0, "velocity_noise": 0.0}
    data, truth = double_pendulum.simulate(7, tmp_path / "dp", **settings)
    again, truth_again = double_pendulum.simulate(7, None, **settings)
    other, _ = double_pendulum.simulate(8, None, **settings)
    assert again.same_data(data)
    assert truth_again["parameters"] == truth["parameters"]
    assert not other.same_data(data)
    assert _read_back(tmp_path / "dp", truth).same_data(data)
    assert read_truth(tmp_path / "dp") == truth
    assert truth_path(tmp_path / "dp").name == "dp.truth.yaml"
    lengths = np.array([truth["parameters"]["link1/length"], truth["parameters"]["link2/length"]])
    for i, traj in enumerate(data):
        assert traj.meta["truth"]["link1/length"] == lengths[0, i]
        np.testing.assert_array_equal(traj.q[0], [np.pi / 2, 0.0])
        assert traj.num_samples == 41
    # different link lengths swing differently
    assert np.abs(data[0].q[-1] - data[1].q[-1]).max() > 1e-3


def test_double_pendulum_length_distribution() -> None:
    rng = np.random.default_rng(0)
    cov = double_pendulum.length_covariance((0.15, 0.15), -0.94)
    draws = double_pendulum.draw_lengths(rng, 4000, (1.5, 2.0), cov)
    np.testing.assert_allclose(draws.mean(axis=0), [1.5, 2.0], atol=0.01)
    assert np.corrcoef(draws.T)[0, 1] == pytest.approx(-0.94, abs=0.01)
    with pytest.raises(SimulationError, match="correlation"):
        double_pendulum.length_covariance((0.1, 0.1), -1.0)


def test_double_pendulum_conserves_energy_without_noise() -> None:
    data, truth = double_pendulum.simulate(
        0, trajectories=1, steps=300, position_noise=0.0, velocity_noise=0.0
    )
    (traj,) = data
    l1, l2 = truth["parameters"]["link1/length"][0], truth["parameters"]["link2/length"][0]
    q1, q2 = traj.q[:, 0], traj.q[:, 0] + traj.q[:, 1]
    w1, w2 = traj.dq[:, 0], traj.dq[:, 0] + traj.dq[:, 1]
    # point masses of 1 kg at the link tips, hanging along -z at q = 0, rotating about y
    z1, z2 = -l1 * np.cos(q1), -l1 * np.cos(q1) - l2 * np.cos(q2)
    vx1, vz1 = l1 * np.cos(q1) * w1, l1 * np.sin(q1) * w1
    vx2, vz2 = vx1 + l2 * np.cos(q2) * w2, vz1 + l2 * np.sin(q2) * w2
    energy = 0.5 * (vx1**2 + vz1**2 + vx2**2 + vz2**2) + 9.81 * (z1 + z2)
    # symplectic Euler at dt = 0.01 s: bounded energy error, a few percent of m g (l1 + l2)
    assert np.ptp(energy) < 0.1 * 9.81 * (l1 + l2)
    assert abs(energy[0]) < 1e-9  # both links start sideways (q2 is relative), at rest


def test_panda_box(tmp_path: Path) -> None:
    data, truth = panda_box.simulate(3, tmp_path / "pb", settle=0.3, hold=0.2)
    (traj,) = data
    params = truth["parameters"]
    for i in (1, 2):
        assert abs(params[f"box/weight{i}_x"]) <= 0.14
        assert abs(params[f"box/weight{i}_y"]) <= 0.08
    assert params["box/mass"] == pytest.approx(0.92)
    # joint 6 moves +0.1 rad, then joint 7 -0.1 rad (PD tracking leaves a small lag)
    delta = traj.q[-1] - traj.q[0]
    assert delta[5] == pytest.approx(0.1, abs=0.01)
    assert delta[6] == pytest.approx(-0.1, abs=0.01)
    assert np.abs(delta[:5]).max() < 0.01
    desired = traj.command_channel("desired/panda_joint6/position")
    assert desired[-1] - desired[0] == pytest.approx(0.1, abs=1e-9)
    pos, quat = traj.pose("box")
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-12)
    assert np.ptp(pos, axis=0).max() > 1e-3  # the box swings
    points = panda_box.vicon_points(traj).reshape(-1, 4, 3)
    np.testing.assert_array_equal(points[:, 0], pos)
    np.testing.assert_allclose(np.linalg.norm(points[:, 1:] - points[:, :1], axis=2), 1.0)
    assert _read_back(tmp_path / "pb", truth).same_data(data)
    with Reader(tmp_path / "pb") as reader:
        assert reader.topics["/vicon/box/box"].msgtype == m.TRANSFORM_STAMPED
        assert reader.topics["/franka/joint_states"].msgcount == traj.num_samples
    with pytest.raises(SimulationError, match="rate"):
        panda_box.simulate(0, rate=300.0)
    with pytest.raises(SimulationError, match="mocap"):
        panda_box.layout("optitrack")


def test_panda_box_with_vrpn_receive_stamps(tmp_path: Path) -> None:
    data, truth = panda_box.simulate(3, tmp_path / "vrpn", settle=0.1, hold=0.1, mocap="vrpn")
    assert truth["layout"]["mocap"][0]["topic"] == "/vrpn_mocap/box/pose"
    with Reader(tmp_path / "vrpn") as reader:
        conn = reader.topics["/vrpn_mocap/box/pose"].connections[0]
        _, log_ns, raw = next(reader.messages(connections=[conn]))
        msg = m.make_typestore().deserialize_cdr(raw, m.POSE_STAMPED)
        assert m.stamp_ns(msg.header.stamp) == log_ns == data[0].meta["t0_ns"] + 8_000_000
    assert _read_back(tmp_path / "vrpn", truth).same_data(data)


def test_trapezoid_profile() -> None:
    pos, vel = panda_box.trapezoid(0.1, 0.261, 2.0, 1e-3)
    assert pos[-1] == pytest.approx(0.1)
    assert vel.max() <= 0.261 + 1e-12
    np.testing.assert_allclose(np.cumsum(vel[1:]) * 1e-3, pos[1:], atol=2e-3)
    neg, _ = panda_box.trapezoid(-0.1, 0.261, 2.0, 1e-3)
    np.testing.assert_allclose(neg, -pos)


def test_omx_payload(tmp_path: Path) -> None:
    data, truth = omx_payload.simulate(
        1, tmp_path / "omx", payload_masses=(0.05, 0.25), duration=1.5,
        storage=StorageFormat.SQLITE3,
    )  # fmt: skip
    light, _ = data
    assert light.joint_names == ["joint3"]
    assert truth["parameters"]["payload/mass"] == [0.05, 0.25]
    step = omx_payload.XM430_W350.position_resolution
    np.testing.assert_allclose(light.q / step, np.round(light.q / step), atol=1e-9)
    counts = light.effort / omx_payload.COUNT_TO_TORQUE
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
    # the current step lifts the payload (the elbow angle drops), the heavier one less
    lift = [traj.q[0, 0] - traj.q[:, 0].min() for traj in data]
    assert lift[0] > lift[1] > 0.1
    back = _read_back(tmp_path / "omx", truth)
    for a, b in zip(back, data, strict=True):
        np.testing.assert_array_equal(a.q, b.q)
        np.testing.assert_allclose(a.effort, b.effort, rtol=1e-12)
    with Reader(tmp_path / "omx") as reader:  # the bag carries all five joints
        conn = reader.topics["/joint_states"].connections[0]
        _, _, raw = next(reader.messages(connections=[conn]))
        msg = m.make_typestore().deserialize_cdr(raw, m.JOINT_STATE)
        assert list(msg.name) == list(omx_payload.ALL_JOINTS)
        assert float(msg.effort[2]).is_integer()


def test_furuta_experiments(tmp_path: Path) -> None:
    data, truth = furuta.simulate(2, tmp_path / "fu", duration=1.5)
    release, swing, pulse = data
    assert [t.meta["experiment"] for t in data] == ["release", "swing_up", "pulse"]
    step = 2 * np.pi / furuta.ENCODER_TICKS
    np.testing.assert_allclose(swing.q / step, np.round(swing.q / step), atol=1e-9)
    assert release.q[0, 1] == pytest.approx(np.pi - 0.1, abs=0.01)
    assert release.q[-1, 1] < 2.5  # it falls
    u = pulse.command[:, 0]
    assert np.count_nonzero(u) == 100
    assert u.max() == pytest.approx(0.5)
    half = swing.num_samples // 2
    # energy pumping: the swings grow
    assert np.abs(swing.q[half:, 1]).max() > max(1.2, np.abs(swing.q[:half, 1]).max())
    assert truth["parameters"]["gravity/tilt_y"] == furuta.TRUE_PARAMETERS["gravity/tilt_y"]
    assert _read_back(tmp_path / "fu", truth).same_data(data)
    with pytest.raises(SimulationError, match="experiments"):
        furuta.simulate(0, experiments=("balance",))


def test_panda_payload(tmp_path: Path) -> None:
    data, truth = panda_payload.simulate(4, tmp_path / "pp", duration=3.0)
    clean, _ = panda_payload.simulate(
        4, duration=3.0, joint_position_noise=0.0, joint_velocity_noise=0.0, torque_noise=0.0
    )
    (traj,), (exact,) = data, clean
    back = _read_back(tmp_path / "pp", truth)
    assert back.same_data(data)
    assert back[0].joint_names == [f"panda_joint{i}" for i in range(1, 8)]
    np.testing.assert_allclose(np.diff(back[0].t), 1e-3, rtol=1e-9)  # 1 kHz
    assert back[0].num_samples == 3001
    assert truth_path(tmp_path / "pp").is_file()
    assert read_truth(tmp_path / "pp") == truth
    params = truth["parameters"]
    assert params["payload/mass"] == pytest.approx(panda_payload.PAYLOAD_MASS)
    assert [params[f"payload/com_{a}"] for a in "xyz"] == list(panda_payload.PAYLOAD_COM)
    inertia = np.array(truth["attachments"]["payload"]["inertia"])
    assert params["payload/ixy"] == inertia[0, 1] != 0.0
    assert np.linalg.eigvalsh(inertia).min() > 0.0
    with Reader(tmp_path / "pp") as reader:
        assert reader.topics["/franka/joint_states"].msgcount == 3001
        assert reader.topics["/franka/desired_joint_states"].msgcount == 3001
    # the arm stays within its position, velocity and torque limits and moves every joint
    robot = attach_payload(
        load_robot("panda"), "panda_link8", mass=params["payload/mass"],
        com=[params[f"payload/com_{a}"] for a in "xyz"], inertia=inertia,
    )  # fmt: skip
    model = robot.model
    assert np.all(exact.q >= model.lowerPositionLimit)
    assert np.all(exact.q <= model.upperPositionLimit)
    assert np.all(np.abs(exact.dq) <= model.velocityLimit)
    assert np.all(np.abs(exact.effort) <= model.effortLimit)
    assert np.ptp(exact.q, axis=0).min() > 0.2
    np.testing.assert_array_equal(exact.dq[0], 0.0)  # from rest
    # efforts are the true model's inverse dynamics (semi-implicit Euler: a_k = (v_k+1 − v_k)/dt)
    acc = np.diff(exact.dq, axis=0) / 1e-3
    data_pin = model.createData()
    for k in range(0, exact.num_samples - 1, 97):
        tau = (
            pin.rnea(model, data_pin, exact.q[k], exact.dq[k], acc[k]) + model.damping * exact.dq[k]
        )
        np.testing.assert_allclose(exact.effort[k], tau, atol=1e-8)
    # sensor noise on top of the same motion
    noise = traj.effort - exact.effort
    assert noise.std() == pytest.approx(0.05, rel=0.05)
    assert (traj.q - exact.q).std() == pytest.approx(1e-4, rel=0.05)
    with pytest.raises(SimulationError, match="velocity_scaling"):
        panda_payload.simulate(0, velocity_scaling=1.5)


def test_panda_payload_drawn_payload_and_excitation() -> None:
    rng = np.random.default_rng(3)
    mass, com, inertia = panda_payload.drawn_payload(rng)
    ranges = panda_payload.DRAWN_RANGES
    assert ranges["mass"][0] <= mass <= ranges["mass"][1]
    for axis, c in zip("xyz", com, strict=True):
        assert ranges[f"com_{axis}"][0] <= c <= ranges[f"com_{axis}"][1]
    assert np.linalg.eigvalsh(inertia).min() > 0.0
    a, b = panda_payload.excitation_coefficients(
        rng, panda_payload.panda_limits(load_robot("panda")), 10.0
    )
    assert a.shape == b.shape == (7, 5)
    t = np.linspace(0.0, 10.0, 2001)
    q, v, acc = panda_payload.fourier_trajectory(t, np.array(panda_payload.HOME), a, b)
    np.testing.assert_allclose(v[0], 0.0, atol=1e-12)  # starts at rest
    np.testing.assert_allclose(acc[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.gradient(q, t, axis=0)[1:-1], v[1:-1], atol=1e-3)
    np.testing.assert_allclose(np.gradient(v, t, axis=0)[1:-1], acc[1:-1], atol=1e-3)
    assert np.all(np.abs(q - panda_payload.HOME).max(axis=0) <= 1.0 + 1e-12)


def test_the_fourier_fit_recovers_a_series_from_positions_alone() -> None:
    """fit_fourier_coefficients inverts fourier_trajectory: exactly on exact positions, to the
    noise on positions with 0.1 mrad of noise."""
    rng = np.random.default_rng(7)
    q0, a, b = rng.normal(size=7), *rng.normal(scale=0.3, size=(2, 7, 5))
    t = np.arange(6701) / 1000.0
    q, _, _ = panda_payload.fourier_trajectory(t, q0, a, b)
    for got, want in zip(panda_payload.fit_fourier_coefficients(t, q), (q0, a, b), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-9)
    noisy = q + 1e-4 * rng.normal(size=q.shape)
    for got, want in zip(panda_payload.fit_fourier_coefficients(t, noisy), (q0, a, b),
                         strict=True):  # fmt: skip
        np.testing.assert_allclose(got, want, atol=5e-3)


def test_registry_names_every_scenario() -> None:
    """dynid's scenarios are registered (group ``dynid.scenarios``) by their functions."""
    modules = (double_pendulum, furuta, omx_payload, panda_box, panda_payload)
    expected = {module.SCENARIO: module.simulate for module in modules}
    expected["hovercraft"] = hovercraft.record
    assert set(expected) <= set(available_scenarios())
    for name, simulate in expected.items():
        assert load_scenario(name, "test") is simulate, name
    assert available_scenarios("mujoco") == ["panda_payload", "panda_whole_arm", "ur5_payload"]
    assert engines() == ["dynid", "mujoco"]
