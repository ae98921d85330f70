"""The identified payload in a robot's flange frame, the Franka and UR service fields, the gates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynid.model.attachments import attach_payload
from dynid.model.robot import load_robot
from dynid.posterior import Posterior
from dynid.robot_payload import (
    GateSettings,
    PayloadError,
    PayloadEstimate,
    check_gates,
    decide,
    franka_load,
    identified_payload,
    ur_payload,
)

NOMINAL_INERTIA = np.array([[2e-3, 1e-4, -2e-4], [1e-4, 3e-3, 3e-4], [-2e-4, 3e-4, 4e-3]])
NAMES = ["payload/mass", "payload/com_x", "payload/com_y", "payload/com_z"]
VALUES = np.array([1.2, 0.03, -0.02, 0.06])
STD = np.array([0.004, 0.001, 0.002, 0.0015])
GOOD_META = {"validation": {"quantity": "torque", "identified": {"rmse_overall": 0.05},
                            "nominal": {"rmse_overall": 0.4}}}  # fmt: skip
_UNITS = {"mass": "kg", "com_x": "m", "com_y": "m", "com_z": "m"}
SETTINGS = GateSettings(max_mass_std=0.02, max_com_std=0.005, rated_payload=3.0)


@pytest.fixture(scope="module")
def robot():
    return attach_payload(load_robot("panda"), "panda_link8", mass=1.0, com=[0.0, 0.0, 0.05],
                          inertia=NOMINAL_INERTIA)  # fmt: skip


def posterior(values=VALUES, std=STD, names=NAMES) -> Posterior:
    return Posterior(particles=np.asarray(values)[None], names=list(names),
                     units=[_UNITS.get(n.split("/")[1], "kg*m^2") for n in names],
                     covariance=np.diag(np.asarray(std) ** 2))  # fmt: skip


def rz(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def test_the_posterior_gives_mass_and_com_and_the_nominal_inertia_where_not_free(robot) -> None:
    payload = identified_payload(posterior(), robot)
    assert payload.frame == "panda_link8"
    assert payload.mass == pytest.approx(1.2)
    np.testing.assert_allclose(payload.com, [0.03, -0.02, 0.06])
    np.testing.assert_allclose(payload.inertia, NOMINAL_INERTIA)
    assert payload.mass_std == pytest.approx(0.004)
    np.testing.assert_allclose(payload.com_std, [0.001, 0.002, 0.0015])
    assert not payload.inertia_free


def test_free_inertia_entries_replace_the_nominal_ones_symmetrically(robot) -> None:
    names = [*NAMES, "payload/ixx", "payload/ixy", "payload/iyy", "payload/ixz", "payload/iyz",
             "payload/izz"]  # fmt: skip
    values = [*VALUES, 5e-3, 4e-4, 6e-3, -3e-4, 2e-4, 7e-3]
    payload = identified_payload(posterior(values, [*STD, *[1e-4] * 6], names), robot)
    expected = np.array([[5e-3, 4e-4, -3e-4], [4e-4, 6e-3, 2e-4], [-3e-4, 2e-4, 7e-3]])
    np.testing.assert_allclose(payload.inertia, expected)
    assert payload.inertia_free


def test_the_payload_moves_to_a_frame_fixed_to_its_link(robot) -> None:
    payload = identified_payload(posterior(), robot)
    # panda_link8 sits 0.107 m along panda_link7's z (panda_joint8), no rotation
    on7 = payload.in_frame(robot, "panda_link7")
    np.testing.assert_allclose(on7.com, [0.03, -0.02, 0.06 + 0.107], atol=1e-12)
    np.testing.assert_allclose(on7.inertia, NOMINAL_INERTIA, atol=1e-15)
    # panda_hand is panda_link8 turned -45° about z (panda_hand_joint): coordinates in the hand
    # frame are R^T x with R = Rz(-π/4), the inertia R^T I R
    hand = payload.in_frame(robot, "panda_hand")
    rotation = rz(-math.pi / 4)
    np.testing.assert_allclose(hand.com, rotation.T @ payload.com, atol=1e-12)
    np.testing.assert_allclose(hand.inertia, rotation.T @ NOMINAL_INERTIA @ rotation, atol=1e-15)
    cov = rotation.T @ np.diag(STD[1:] ** 2) @ rotation
    np.testing.assert_allclose(hand.com_std, np.sqrt(np.diag(cov)), atol=1e-15)
    back = hand.in_frame(robot, "panda_link8")
    np.testing.assert_allclose(back.com, payload.com, atol=1e-12)
    np.testing.assert_allclose(back.inertia, payload.inertia, atol=1e-15)


def test_a_frame_on_another_body_or_unknown_is_refused(robot) -> None:
    payload = identified_payload(posterior(), robot)
    with pytest.raises(PayloadError, match="not on the body of 'panda_link8'"):
        payload.in_frame(robot, "panda_link6")
    with pytest.raises(PayloadError, match="no frame 'tool0'"):
        payload.in_frame(robot, "tool0")


def test_not_a_payload_problem_or_com_not_free_is_refused(robot) -> None:
    with pytest.raises(PayloadError, match="no payload attachment 'box'"):
        identified_payload(posterior(), robot, name="box")
    with pytest.raises(PayloadError, match=r"does not identify \['payload/com_z'\]"):
        identified_payload(posterior(VALUES[:3], STD[:3], NAMES[:3]), robot)


def test_franka_load_inertia_is_column_major_about_the_com() -> None:
    inertia = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]])
    payload = PayloadEstimate(
        frame="panda_link8", mass=1.5, com=np.array([0.1, 0.2, 0.3]), inertia=inertia,
        mass_std=0.0, com_std=np.zeros(3), inertia_free=True,
    )  # fmt: skip
    load = franka_load(payload)
    assert load["mass"] == 1.5
    assert load["center_of_mass"] == [0.1, 0.2, 0.3]
    # column j of the matrix is entries 3j..3j+2 (libfranka's std::array<double, 9> layout)
    assert load["load_inertia"] == [1.0, 2.0, 3.0, 2.0, 4.0, 5.0, 3.0, 5.0, 6.0]
    np.testing.assert_array_equal(np.reshape(load["load_inertia"], (3, 3), order="F"), inertia)
    ur = ur_payload(payload)
    assert (ur["ixx"], ur["iyy"], ur["izz"], ur["ixy"], ur["ixz"], ur["iyz"]) == (
        1.0, 4.0, 6.0, 2.0, 3.0, 5.0)  # fmt: skip
    assert ur["center_of_gravity"] == [0.1, 0.2, 0.3]


def test_gates_pass_only_when_every_check_holds(robot) -> None:
    payload = identified_payload(posterior(), robot)
    assert all(g.passed for g in check_gates(payload, GOOD_META, SETTINGS))

    def failed(p, meta, settings=SETTINGS) -> list[str]:
        return [g.name for g in check_gates(p, meta, settings) if not g.passed]

    assert failed(identified_payload(posterior(std=[0.05, *STD[1:]]), robot), GOOD_META) == [
        "mass_std"
    ]
    assert failed(identified_payload(posterior(std=[*STD[:3], 0.01]), robot), GOOD_META) == [
        "com_std"
    ]
    assert failed(payload, {}) == ["heldout_rmse"]
    worse = {"validation": {"quantity": "torque", "identified": {"rmse_overall": 0.5},
                            "nominal": {"rmse_overall": 0.4}}}  # fmt: skip
    assert failed(payload, worse) == ["heldout_rmse"]
    assert failed(payload, GOOD_META, GateSettings(0.02, 0.005, rated_payload=1.0)) == [
        "rated_payload"
    ]
    names = [*NAMES, "payload/ixx", "payload/iyy", "payload/izz"]
    flat = identified_payload(posterior([*VALUES, 1e-3, 1e-3, 5e-3], [*STD, 1e-4, 1e-4, 1e-4],
                                        names), robot)  # fmt: skip
    assert failed(flat, GOOD_META) == ["inertia"]  # 5e-3 > 1e-3 + 1e-3: no rigid body
    detail = {g.name: g.detail for g in check_gates(payload, {}, SETTINGS)}
    assert "validation" in detail["heldout_rmse"]


def test_decide_gives_the_services_fields_in_the_flange_frame_and_the_gates(robot) -> None:
    decision = decide(posterior(), robot, "ur", "panda_link7", SETTINGS)
    assert decision.payload.frame == "panda_link7"
    np.testing.assert_allclose(decision.fields["center_of_gravity"], [0.03, -0.02, 0.167])
    assert decision.fields["ixy"] == pytest.approx(NOMINAL_INERTIA[0, 1])
    assert not decision.passed  # no held-out validation in this posterior's meta
    assert [g.name for g in decision.failed] == ["heldout_rmse"]
    assert [g.name for g in decision.gates] == [
        "mass_std", "com_std", "heldout_rmse", "rated_payload", "inertia"]  # fmt: skip
    franka = decide(posterior(), robot, "franka", "panda_link8", SETTINGS)
    assert franka.fields["center_of_mass"] == pytest.approx([0.03, -0.02, 0.06])
    with pytest.raises(PayloadError, match="target 'kuka'"):
        decide(posterior(), robot, "kuka", "panda_link8", SETTINGS)
