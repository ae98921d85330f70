"""Interpolation onto grids, slerp, quaternion helpers, TF chains, message definitions."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import get_types_from_msg

from dynid.data import BagReadError, DataError
from dynid.data import messages as m
from dynid.data import quaternion as quat
from dynid.data.align import (
    align_streams,
    interp_channels,
    interp_linear,
    quaternion_groups,
    slerp,
)
from dynid.data.tf import compose, invert, lookup


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_linear_interpolation_is_exact_and_refuses_extrapolation() -> None:
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 2, size=30))
    x = np.stack([1.0 + 2.0 * t, -3.0 * t], axis=1)
    tq = np.linspace(t[0], t[-1], 200)
    np.testing.assert_allclose(interp_linear(t, x, tq), np.stack([1 + 2 * tq, -3 * tq], 1),
                               atol=1e-13)  # fmt: skip
    np.testing.assert_array_equal(interp_linear(t, x, t), x)  # samples hit exactly
    with pytest.raises(DataError, match=r"mocap: query times .* extrapolation is refused"):
        interp_linear(t, x, np.array([t[-1] + 0.1]), what="mocap")


def test_slerp_constant_rate_rotation_and_unit_norm() -> None:
    t = np.array([0.0, 1.0, 2.0])
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    angles = np.array([0.0, 1.2, 2.4])
    q = np.concatenate([np.outer(np.sin(angles / 2), axis), np.cos(angles / 2)[:, None]], 1)
    q[1] *= -1  # same rotation, other hemisphere
    tq = np.linspace(0, 2, 41)
    out = slerp(t, q, tq)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-15)
    expected = np.concatenate([np.outer(np.sin(0.6 * tq), axis), np.cos(0.6 * tq)[:, None]], axis=1)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    rng = np.random.default_rng(1)
    random = quat.make_continuous(_unit(rng, 50))
    tr = np.arange(50.0)
    np.testing.assert_allclose(np.linalg.norm(slerp(tr, random, np.linspace(0, 49, 999)), axis=1),
                               1.0, atol=1e-14)  # fmt: skip
    np.testing.assert_array_equal(slerp(tr, random, tr), random)


def test_channel_interpolation_uses_slerp_for_pose_groups() -> None:
    names = ["a/x", "a/qx", "a/qy", "a/qz", "a/qw", "u"]
    assert quaternion_groups(names) == [("a", [1, 2, 3, 4])]
    assert quaternion_groups(["b/qx", "b/qy"]) == []
    t = np.array([0.0, 1.0])
    x = np.array([[0.0, 0, 0, 0, 1, 0], [1.0, 0, 0, 1, 0, 2]])  # 180 deg about z
    mid = interp_channels(t, x, names, np.array([0.5]))[0]
    np.testing.assert_allclose(mid[[0, 5]], [0.5, 1.0])
    np.testing.assert_allclose(mid[1:5], [0, 0, np.sqrt(0.5), np.sqrt(0.5)], atol=1e-15)


def test_quaternion_helpers_agree_with_rotation_matrices() -> None:
    rng = np.random.default_rng(2)
    a, b = _unit(rng, 100), _unit(rng, 100)
    v = rng.normal(size=(100, 3))
    Ra, Rb = quat.to_matrix(a), quat.to_matrix(b)
    np.testing.assert_allclose(quat.to_matrix(quat.multiply(a, b)), Ra @ Rb, atol=1e-14)
    np.testing.assert_allclose(quat.rotate(a, v), np.einsum("nij,nj->ni", Ra, v), atol=1e-14)
    back = quat.from_matrix(Ra)
    np.testing.assert_allclose(np.abs(np.einsum("ij,ij->i", back, a)), 1.0, atol=1e-14)
    assert (back[:, 3] >= 0).all()


def test_tf_chain_lookup_with_static_and_dynamic_edges() -> None:
    rng = np.random.default_rng(3)
    stamps = np.arange(0, 10, dtype=np.int64) * 10_000_000
    fine = np.arange(0, 19, dtype=np.int64) * 5_000_000
    world_odom = np.array([1.0, 2.0, 0.5, *_unit(rng, 1)[0]])
    odom_base = np.concatenate([rng.normal(size=(10, 3)), quat.make_continuous(_unit(rng, 10))], 1)
    world_cam = np.array([0.0, -1.0, 2.0, *_unit(rng, 1)[0]])
    base_tool = np.concatenate(
        [np.tile([0.1, 0, 0.3], (19, 1)), np.tile([0, 0, 0, 1.0], (19, 1))], 1
    )
    dynamic = {("odom", "base"): (stamps, odom_base), ("base", "tool"): (fine, base_tool)}
    static = {("world", "odom"): tuple(world_odom), ("world", "camera"): tuple(world_cam)}
    got_stamps, poses = lookup("camera", "tool", dynamic, static, where="test")
    np.testing.assert_array_equal(got_stamps, fine[fine <= stamps[-1]])
    even = got_stamps % 10_000_000 == 0
    expected = compose(
        invert(world_cam[None]), compose(world_odom[None], compose(odom_base, base_tool[:10]))
    )
    np.testing.assert_allclose(poses[even], expected, atol=1e-12)
    _, static_only = lookup("camera", "odom", {}, static, where="test")
    np.testing.assert_allclose(static_only, compose(invert(world_cam[None]), world_odom[None]))
    with pytest.raises(BagReadError, match=r"no tf chain from 'camera' to 'moon'"):
        lookup("camera", "moon", dynamic, static, where="test")


def test_segment_definition_constant_matches_the_interface_package() -> None:
    from dynid.resources import repo_root

    msg_file = repo_root() / "packages" / "dynid_msgs" / "msg" / "TrajectorySegment.msg"
    if not msg_file.is_file():
        pytest.skip(f"no source checkout of dynid_msgs ({msg_file})")
    from_file = get_types_from_msg(msg_file.read_text(), m.TRAJECTORY_SEGMENT)
    embedded = get_types_from_msg(m.TRAJECTORY_SEGMENT_DEFINITION, m.TRAJECTORY_SEGMENT)
    assert from_file == embedded


def test_align_streams_splits_commands_from_observations_in_order() -> None:
    origin = 5_000_000_000
    t = np.array([0.0, 0.5, 1.0])
    stamps = origin + np.array([0, 1_000_000_000], dtype=np.int64)
    streams = [
        ("/cmd", ["j1/effort"], stamps, np.array([[0.0], [2.0]]), True),
        ("/pose", ["box/x", "box/y"], stamps, np.array([[1.0, 0.0], [3.0, 4.0]]), False),
        ("/tf_static", ["base/z"], None, np.array([[0.7]]), False),  # constant
    ]
    command, cmd_names, obs, obs_names = align_streams(streams, t, origin)
    assert cmd_names == ["j1/effort"]
    assert obs_names == ["box/x", "box/y", "base/z"]
    np.testing.assert_allclose(command[:, 0], [0.0, 1.0, 2.0])
    np.testing.assert_allclose(obs, [[1.0, 0.0, 0.7], [2.0, 2.0, 0.7], [3.0, 4.0, 0.7]])
    none_cmd, _, _, _ = align_streams(streams[1:], t, origin)
    assert none_cmd is None
    with pytest.raises(DataError, match="/pose"):  # the grid reaches past the stream
        align_streams(streams[1:2], np.array([0.0, 1.5]), origin)
