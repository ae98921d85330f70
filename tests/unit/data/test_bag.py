"""ROS 2 bag reading and writing: round trips, alignment, TF chains, commands, bad data."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, Writer
from rosbags.typesys import get_types_from_msg

from dynid.data import (
    BagLayout,
    BagReadError,
    BagWriteError,
    CommandTopic,
    JointStateTopic,
    MocapTopic,
    OutOfOrder,
    StampSource,
    StorageFormat,
    TfLookup,
    read_bag,
    read_segments,
    write_bag,
)
from dynid.data import messages as m
from dynid.data.quaternion import rotate

T0 = 1_700_000_000_000_000_000
JOINTS = ["fr3_joint1", "fr3_joint2", "fr3_joint3"]
STORAGES = list(StorageFormat)
# control_msgs/JointTrajectoryControllerState as of Humble and later, carried by the bag itself
CONTROLLER_STATE_DEF = """std_msgs/Header header
string[] joint_names
trajectory_msgs/JointTrajectoryPoint reference
trajectory_msgs/JointTrajectoryPoint feedback
trajectory_msgs/JointTrajectoryPoint error
trajectory_msgs/JointTrajectoryPoint output
string[] multi_dof_joint_names
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_reference
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_feedback
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_error
trajectory_msgs/MultiDOFJointTrajectoryPoint multi_dof_output
"""


def _header(types: dict[str, Any], ns: int, frame: str = "") -> Any:
    time = types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)
    return types["std_msgs/msg/Header"](stamp=time, frame_id=frame)


class RawBag:
    """Writes hand-made messages with rosbags, for bags with exactly the defects a test wants."""

    def __init__(self, path: Path, storage: StorageFormat = StorageFormat.MCAP) -> None:
        self.store = m.make_typestore()
        self.t = self.store.types
        self.writer = Writer(path, version=9, storage_plugin=storage.plugin)
        self.writer.open()
        self.conns: dict[str, Any] = {}
        self.path = path

    def header(self, ns: int, frame: str = "") -> Any:
        return _header(self.t, ns, frame)

    def write(self, topic: str, msgtype: str, msg: Any, log_ns: int) -> None:
        if topic not in self.conns:
            self.conns[topic] = self.writer.add_connection(topic, msgtype, typestore=self.store)
        self.writer.write(self.conns[topic], log_ns, self.store.serialize_cdr(msg, msgtype))

    def joint_state(self, topic: str, ns: int, names: list[str], pos, vel=(), eff=(), log=None):
        arr = [np.asarray(x, dtype=np.float64) for x in (pos, vel, eff)]
        msg = self.t[m.JOINT_STATE](
            header=self.header(ns), name=names, position=arr[0], velocity=arr[1], effort=arr[2]
        )
        self.write(topic, m.JOINT_STATE, msg, ns if log is None else log)

    def transform(self, row) -> Any:
        g = "geometry_msgs/msg/"
        return self.t[g + "Transform"](
            translation=self.t[g + "Vector3"](x=row[0], y=row[1], z=row[2]),
            rotation=self.t[g + "Quaternion"](x=row[3], y=row[4], z=row[5], w=row[6]),
        )

    def close(self) -> Path:
        self.writer.close()
        return self.path


def _quat_z(angle: np.ndarray | float) -> np.ndarray:
    angle = np.asarray(angle, dtype=np.float64)
    zero = np.zeros_like(angle)
    return np.stack([zero, zero, np.sin(angle / 2), np.cos(angle / 2)], axis=-1)


def _franka_bag(path: Path, storage: StorageFormat) -> Path:
    """100 Hz joint states (names shuffled, extra finger joint, one duplicate, one message late),
    50 Hz Vicon TransformStamped offset by 3 ms, 1 kHz-ish desired joint states, and /tf with a
    static world -> vicon frame and a dynamic vicon -> box edge."""
    bag = RawBag(path, storage)
    for k in range(200):
        ns = T0 + k * 10_000_000
        t = k * 0.01
        pos = [np.sin(t), 0.5 * t, -t]
        names = [*JOINTS, "fr3_finger_joint1"]
        values = [*pos, 0.04]
        if k % 3 == 1:  # another driver order
            names, values = names[::-1], values[::-1]
        bag.joint_state("/franka/joint_states", ns, names, values, values, values)
        if k == 50:  # duplicate
            bag.joint_state("/franka/joint_states", ns, names, values, values, values)
        bag.joint_state("/franka/desired_joint_states", ns + 1_000_000, JOINTS, pos, (), ())
    for k in range(100):
        ns = T0 + 3_000_000 + k * 20_000_000
        t = (ns - T0) * 1e-9
        row = [t, 2 * t, 0.1, *_quat_z(0.5 * t)]
        msg = bag.t[m.TRANSFORM_STAMPED](
            header=bag.header(ns, "world"), child_frame_id="box", transform=bag.transform(row)
        )
        bag.write("/vicon/box/box", m.TRANSFORM_STAMPED, msg, ns + 2_000_000)
        edge = bag.t[m.TRANSFORM_STAMPED](
            header=bag.header(ns, "vicon"), child_frame_id="box", transform=bag.transform(row)
        )
        bag.write("/tf", m.TF_MESSAGE, bag.t[m.TF_MESSAGE](transforms=[edge]), ns)
    static = bag.t[m.TRANSFORM_STAMPED](
        header=bag.header(T0, "world"),
        child_frame_id="vicon",
        transform=bag.transform([1.0, 0.0, 0.0, *_quat_z(np.pi / 2)]),
    )
    bag.write("/tf_static", m.TF_MESSAGE, bag.t[m.TF_MESSAGE](transforms=[static]), T0)
    return bag.close()


FRANKA = BagLayout(
    joint_states=JointStateTopic("/franka/joint_states", joints=tuple(JOINTS)),
    mocap=(MocapTopic("box", "/vicon/box/box", msgtype=m.TRANSFORM_STAMPED),),
    tf=(TfLookup("box_tf", parent="world", child="box"),),
    commands=(CommandTopic("/franka/desired_joint_states", label="desired"),),
)


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_dataset_bag_dataset_is_identical(tmp_path: Path, storage: StorageFormat) -> None:
    raw = _franka_bag(tmp_path / "raw", storage)
    first, summary = read_bag(raw, FRANKA)
    (traj,) = first
    js = summary.topics["/franka/joint_states"]
    assert (js.received, js.used, js.duplicated) == (201, 200, 1)
    # grid trimmed to where every stream has data: mocap spans 3 ms .. 1.983 s, commands 1 ms ..
    assert traj.t[0] == 0.0
    assert traj.meta["t0_ns"] == T0 + 10_000_000
    np.testing.assert_allclose(traj.q[:, 1], 0.5 * (0.01 + traj.t), atol=1e-12)
    # mocap linearly moving: interpolation exact up to rounding; quaternions unit
    pos, quat = traj.pose("box")
    t_abs = 0.01 + traj.t
    np.testing.assert_allclose(pos[:, 0], t_abs, atol=1e-12)
    np.testing.assert_allclose(quat, _quat_z(0.5 * t_abs), atol=1e-12)
    # the TF chain world -> vicon -> box: rotation of 90 deg about z and 1 m offset
    tf_pos, tf_quat = traj.pose("box_tf")
    expected = np.array([1.0, 0.0, 0.0]) + rotate(_quat_z(np.pi / 2), pos)
    np.testing.assert_allclose(tf_pos, expected, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(tf_quat, axis=1), 1.0, atol=1e-14)
    np.testing.assert_allclose(
        traj.command_channel("desired/fr3_joint1/position"), np.sin(t_abs - 0.001), atol=2e-5
    )

    written = write_bag(first, tmp_path / "again", FRANKA, storage=storage)
    second, summary2 = read_bag(written, FRANKA)
    assert second.same_data(first)
    assert summary2.problems() == 0
    assert {"source", "t0_ns"} <= second[0].meta.keys()

    with Reader(written) as reader:
        topics = reader.topics
        assert topics["/franka/joint_states"].msgtype == m.JOINT_STATE
        assert topics["/franka/joint_states"].msgcount == traj.num_samples
        assert topics["/vicon/box/box"].msgtype == m.TRANSFORM_STAMPED
        assert topics["/tf"].msgtype == m.TF_MESSAGE
        assert topics["/franka/desired_joint_states"].msgcount == traj.num_samples
        assert reader.message_count == 4 * traj.num_samples
        store = m.make_typestore()
        conn = topics["/franka/joint_states"].connections[0]
        _, stamp, raw = next(reader.messages(connections=[conn]))
        msg = store.deserialize_cdr(raw, m.JOINT_STATE)
        assert m.stamp_ns(msg.header.stamp) == stamp == T0 + 10_000_000
        assert list(msg.name) == JOINTS


@pytest.mark.parametrize("storage", STORAGES)
def test_multi_trajectory_dataset_and_segments(tmp_path: Path, storage: StorageFormat) -> None:
    raw = _franka_bag(tmp_path / "raw", storage)
    (traj,) = read_bag(raw, FRANKA)[0]
    parts = [traj.slice(0.0, 0.5), traj.slice(0.6, 1.2).replace(meta={"trial": 2})]
    from dynid.data import Dataset

    path = write_bag(
        Dataset(parts), tmp_path / "two", FRANKA, storage=storage, segment_topic="/seg"
    )
    back, summary = read_bag(path, FRANKA)
    assert len(back) == 2
    assert back[0].same_data(parts[0])
    assert back[1].meta["trial"] == 2
    np.testing.assert_array_equal(back[1].q, parts[1].q)
    assert summary.topics["/franka/joint_states"].dropped == 0
    merged, _ = read_bag(path, FRANKA, split_segments=False)
    assert len(merged) == 1
    segs, seg_summary = read_segments(path, "/seg")
    assert len(segs) == 2
    np.testing.assert_array_equal(segs[1].obs, parts[1].obs)
    assert seg_summary.topics["/seg"].used == 2


def test_receive_time_latency_and_uniform_rate(tmp_path: Path) -> None:
    raw = _franka_bag(tmp_path / "raw", StorageFormat.MCAP)
    late = BagLayout(
        joint_states=FRANKA.joint_states,
        mocap=(MocapTopic("box", "/vicon/box/box", stamps_latency_corrected=False, latency=0.002),),
    )
    (traj,) = read_bag(raw, late)[0]
    pos, _ = traj.pose("box")
    np.testing.assert_allclose(
        pos[:, 0], 0.002 + traj.meta["t0_ns"] * 0 + 0.01 + traj.t, atol=1e-12
    )
    (recv,) = read_bag(
        raw,
        FRANKA.__class__(
            joint_states=FRANKA.joint_states, mocap=FRANKA.mocap, stamps=StampSource.RECEIVE
        ),
    )[0]
    pos_r, _ = recv.pose("box")
    # receive time is 2 ms after the capture stamp: the pose seen at t is the one from t - 2 ms
    np.testing.assert_allclose(pos_r[:, 0], recv.t + 0.01 - 0.002, atol=1e-12)
    (uni,) = read_bag(raw, FRANKA, rate=50.0)[0]
    np.testing.assert_allclose(np.diff(uni.t), 0.02, atol=1e-12)
    np.testing.assert_allclose(uni.q[:, 1], 0.5 * (0.01 + uni.t), atol=1e-12)


def _simple_bag(path: Path, edit: Callable[[RawBag, int], bool] | None = None, n: int = 20) -> Path:
    bag = RawBag(path)
    for k in range(n):
        if edit is None or not edit(bag, k):
            ns = T0 + k * 10_000_000
            bag.joint_state("/joint_states", ns, ["a", "b"], [k, -k], [1.0, 1.0], [0.5, 2.0])
    return bag.close()


def test_missing_and_wrong_topics_are_named(tmp_path: Path) -> None:
    path = _simple_bag(tmp_path / "b")
    with pytest.raises(BagReadError, match=r"topic '/vicon/x/x' not in bag; available"):
        read_bag(path, BagLayout(mocap=(MocapTopic("x", "/vicon/x/x"),)))
    with pytest.raises(
        BagReadError, match=r"topic '/joint_states' has type .*JointState, expected"
    ):
        read_bag(path, BagLayout(mocap=(MocapTopic("x", "/joint_states"),)))
    with pytest.raises(BagReadError, match=r"cannot open bag"):
        read_bag(tmp_path / "nothing")


def test_unknown_joint_names_raise_with_topic(tmp_path: Path) -> None:
    path = _simple_bag(tmp_path / "b")
    layout = BagLayout(joint_states=JointStateTopic(joints=("a", "c")))
    with pytest.raises(
        BagReadError, match=r"'/joint_states'.*no usable message.*name: joint\(s\) \['c'\] missing"
    ):
        read_bag(path, layout)


def test_nan_fields_are_counted_and_skipped_or_raised(tmp_path: Path) -> None:
    def nan(bag: RawBag, k: int) -> bool:
        if k in (3, 7):
            bag.joint_state(
                "/joint_states",
                T0 + k * 10_000_000,
                ["a", "b"],
                [k, np.nan],
                [1.0, 1.0],
                [0.5, 2.0],
            )
            return True
        if k == 9:
            bag.joint_state(
                "/joint_states", T0 + k * 10_000_000, ["a", "b"], [k, -k], [1.0, np.inf], [0.5, 2.0]
            )
            return True
        if k == 11:
            bag.joint_state("/joint_states", T0 + k * 10_000_000, ["a", "b"], [k], [], [])
            return True
        if k == 13:  # infinities of both signs (their sum is NaN)
            bag.joint_state("/joint_states", T0 + k * 10_000_000, ["a", "b"],
                            [np.inf, -np.inf], [1.0, 1.0], [0.5, 2.0])  # fmt: skip
            return True
        return False

    path = _simple_bag(tmp_path / "b", nan)
    (traj,), summary = read_bag(path)
    s = summary.topics["/joint_states"]
    assert s.invalid == 5
    assert s.invalid_reasons["position: non-finite value"] == 3
    assert s.invalid_reasons["velocity: non-finite value"] == 1
    assert s.invalid_reasons["position: expected 2 values (one per name), got 1"] == 1
    assert traj.num_samples == 15
    assert np.isfinite(traj.q).all()
    # the missing samples show up as dropped in the gap estimate, too
    assert s.dropped == 5
    with pytest.raises(BagReadError, match=r"topic '/joint_states': position: non-finite"):
        read_bag(path, strict=True)


def test_stamps_going_backwards(tmp_path: Path) -> None:
    def backwards(bag: RawBag, k: int) -> bool:
        if k == 10:  # stamped 35 ms earlier than its neighbours, logged in order
            bag.joint_state(
                "/joint_states",
                T0 + 65_000_000,
                ["a", "b"],
                [6.5, -6.5],
                [1.0, 1.0],
                [0.5, 2.0],
                log=T0 + 100_000_000,
            )
            return True
        return False

    path = _simple_bag(tmp_path / "b", backwards)
    (traj,), summary = read_bag(path)
    assert summary.topics["/joint_states"].out_of_order == 1
    assert traj.num_samples == 19
    assert 6.5 not in traj.q[:, 0]
    (kept,), summary = read_bag(path, out_of_order=OutOfOrder.SORT)
    assert kept.num_samples == 20
    np.testing.assert_array_equal(kept.q[6:9, 0], [6.0, 6.5, 7.0])
    with pytest.raises(BagReadError, match=r"'/joint_states' field 'header.stamp' goes backwards"):
        read_bag(path, out_of_order=OutOfOrder.RAISE)


@pytest.mark.parametrize("storage", STORAGES)
def test_truncated_bag_raises_naming_the_file(tmp_path: Path, storage: StorageFormat) -> None:
    from dynid.data import Trajectory

    t = np.arange(2000) * 0.01
    traj = Trajectory(t=t, q=np.zeros((2000, 1)), joint_names=["a"], meta={"t0_ns": T0})
    path = write_bag(traj, tmp_path / "bag", storage=storage)
    (data_file,) = [f for f in path.iterdir() if f.suffix in (".mcap", ".db3")]
    size = data_file.stat().st_size
    with data_file.open("r+b") as fh:
        fh.truncate(size * 6 // 10)
    with pytest.raises(BagReadError, match=rf"{path}.*(truncated|corrupt)"):
        read_bag(path)


@pytest.mark.parametrize("storage", STORAGES)
def test_corrupt_bytes_anywhere_read_or_raise_naming_the_file(
    tmp_path: Path, storage: StorageFormat
) -> None:
    """Random byte runs overwritten anywhere in the storage file (index, chunks, messages): no
    storage-layer exception escapes. An mcap written by dynid carries CRCs, so every such read
    raises BagReadError naming the file; sqlite3 has none, so a read may instead succeed,
    counting the damaged messages it can tell as invalid."""
    from dynid.data import Trajectory

    t = np.arange(2000) * 0.01
    traj = Trajectory(t=t, q=np.sin(t)[:, None], joint_names=["a"], meta={"t0_ns": T0})
    path = write_bag(traj, tmp_path / "bag", storage=storage)
    (data_file,) = [f for f in path.iterdir() if f.suffix in (".mcap", ".db3")]
    original = data_file.read_bytes()
    rng = np.random.default_rng(0)
    errors: list[str] = []
    reads = invalid = 0
    for _ in range(60):
        damaged = bytearray(original)
        start, length = int(rng.integers(0, len(original) - 64)), int(rng.integers(1, 64))
        damaged[start : start + length] = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
        data_file.write_bytes(bytes(damaged))
        try:
            _, summary = read_bag(path)
        except BagReadError as err:
            errors.append(str(err))
        else:
            reads += 1
            invalid += summary.topics["/joint_states"].invalid
    assert errors
    assert all(str(path) in e and ("truncated" in e or "corrupt" in e) for e in errors)
    if storage is StorageFormat.MCAP:
        assert reads == 0
    else:
        assert reads > 0  # both kinds of damage were drawn
        assert invalid > 0


def test_effort_scale_and_float64_multiarray_and_trajectory_commands(tmp_path: Path) -> None:
    bag = RawBag(tmp_path / "omx")
    joints = ["joint1", "joint2"]
    layout_t = bag.t["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    for k in range(40):
        ns = T0 + k * 25_000_000  # 40 Hz
        bag.joint_state("/joint_states", ns, joints, [0.1 * k, 0.0], [0.0, 0.0], [100.0, -50.0])
        arr = bag.t[m.FLOAT64_MULTI_ARRAY](layout=layout_t, data=np.array([k, 2.0 * k]))
        bag.write("/effort_controller/commands", m.FLOAT64_MULTI_ARRAY, arr, ns)
    point = bag.t["trajectory_msgs/msg/JointTrajectoryPoint"]
    dur = bag.t["builtin_interfaces/msg/Duration"]
    for start, offset in ((T0, 0.0), (T0 + 500_000_000, 10.0)):  # second replaces the tail
        points = [
            point(
                positions=np.array([offset + i, -i], dtype=float),
                velocities=np.zeros(0),
                accelerations=np.zeros(0),
                effort=np.zeros(0),
                time_from_start=dur(sec=i // 4, nanosec=(i % 4) * 250_000_000),
            )
            for i in range(8)
        ]
        msg = bag.t[m.JOINT_TRAJECTORY](header=bag.header(start), joint_names=joints, points=points)
        bag.write("/arm_controller/joint_trajectory", m.JOINT_TRAJECTORY, msg, start)
    path = bag.close()
    layout = BagLayout(
        joint_states=JointStateTopic(effort_scale={"joint1": 2.69e-3, "joint2": 2.69e-3}),
        commands=(
            CommandTopic(
                "/effort_controller/commands",
                msgtype=m.FLOAT64_MULTI_ARRAY,
                names=("joint1/current", "joint2/current"),
            ),
            CommandTopic(
                "/arm_controller/joint_trajectory", msgtype=m.JOINT_TRAJECTORY, label="plan"
            ),
        ),
    )
    (traj,), summary = read_bag(path, layout)
    np.testing.assert_allclose(traj.effort[0], [0.269, -0.1345])
    assert traj.command_names == [
        "joint1/current",
        "joint2/current",
        "plan/joint1/position",
        "plan/joint2/position",
    ]
    np.testing.assert_array_equal(traj.command_channel("joint2/current"), 2.0 * np.arange(40))
    plan = traj.command_channel("plan/joint1/position")
    # points 0..1.75 s of the first plan until 0.5 s, then the second plan (offset 10)
    np.testing.assert_allclose(plan[traj.t <= 0.25], 4 * traj.t[traj.t <= 0.25], atol=1e-12)
    np.testing.assert_allclose(
        plan[traj.t >= 0.5], 10 + 4 * (traj.t[traj.t >= 0.5] - 0.5), atol=1e-12
    )
    assert any("Float64MultiArray has no header" in n for n in summary.notes)
    again = write_bag(traj, tmp_path / "again", layout)
    (back,), _ = read_bag(again, layout)
    np.testing.assert_allclose(back.effort, traj.effort, rtol=1e-15)
    np.testing.assert_array_equal(back.command, traj.command)


def test_controller_state_type_from_the_bag(tmp_path: Path) -> None:
    bag = RawBag(tmp_path / "jtc")
    bag.store.register(get_types_from_msg(CONTROLLER_STATE_DEF, m.CONTROLLER_STATE))
    point = bag.t["trajectory_msgs/msg/JointTrajectoryPoint"]
    multi = bag.t["trajectory_msgs/msg/MultiDOFJointTrajectoryPoint"]
    dur = bag.t["builtin_interfaces/msg/Duration"](sec=0, nanosec=0)
    empty = np.zeros(0)

    def pt(values: list[float]) -> Any:
        return point(
            positions=np.array(values, dtype=float),
            velocities=empty,
            accelerations=empty,
            effort=empty,
            time_from_start=dur,
        )

    no_multi = multi(transforms=[], velocities=[], accelerations=[], time_from_start=dur)
    for k in range(10):
        ns = T0 + k * 10_000_000
        bag.joint_state("/joint_states", ns, ["a"], [0.1 * k])
        msg = bag.t[m.CONTROLLER_STATE](
            header=bag.header(ns),
            joint_names=["a"],
            reference=pt([k]),
            feedback=pt([0.1 * k]),
            error=pt([0.9 * k]),
            output=pt([]),
            multi_dof_joint_names=[],
            multi_dof_reference=no_multi,
            multi_dof_feedback=no_multi,
            multi_dof_error=no_multi,
            multi_dof_output=no_multi,
        )
        bag.write("/jtc/controller_state", m.CONTROLLER_STATE, msg, ns)
    path = bag.close()
    cmd = CommandTopic(
        "/jtc/controller_state",
        msgtype=m.CONTROLLER_STATE,
        fields=("reference_position", "error_position"),
    )
    layout = BagLayout(commands=(cmd,))
    (traj,), _ = read_bag(path, layout)
    assert traj.command_names == ["a/reference_position", "a/error_position"]
    np.testing.assert_array_equal(traj.command[:, 0], np.arange(10.0))
    with pytest.raises(BagWriteError, match="not supported"):
        write_bag(traj, tmp_path / "out", layout)


def test_write_refuses_unmapped_channels_existing_paths_bad_folders(tmp_path: Path) -> None:
    path = _simple_bag(tmp_path / "b")
    (traj,), _ = read_bag(path)
    extra = traj.replace(obs=np.zeros((traj.num_samples, 1)), obs_names=["ball/x"])
    with pytest.raises(BagWriteError, match=r"channels \['ball/x'\] have no topic"):
        write_bag(extra, tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(BagWriteError, match="exists already"):
        write_bag(traj, path)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(BagWriteError, match="cannot create the bag's folder"):
        write_bag(traj, tmp_path / "file" / "bag")


def test_fast_joint_state_decoder_matches_rosbags() -> None:
    store = m.make_typestore()
    decoder = m.JointStateDecoder(store)
    rng = np.random.default_rng(4)
    for _ in range(200):
        n = int(rng.integers(0, 6))
        names = ["j" * int(rng.integers(1, 6)) + str(i) for i in range(n)]
        vel = rng.normal(size=n if rng.random() < 0.5 else 0)
        msg = store.types[m.JOINT_STATE](
            header=_header(
                store.types, int(rng.integers(0, 2**31 * 10**9)), "f" * int(rng.integers(0, 7))
            ),
            name=names,
            position=rng.normal(size=n),
            velocity=vel,
            effort=rng.normal(size=n),
        )
        raw = store.serialize_cdr(msg, m.JOINT_STATE)
        stamp, got_names, pos, v, eff = decoder.decode(raw)
        assert stamp == m.stamp_ns(msg.header.stamp)
        assert list(got_names) == names
        np.testing.assert_array_equal(pos, msg.position)
        np.testing.assert_array_equal(v, vel)
        np.testing.assert_array_equal(eff, msg.effort)


def test_bad_trajectory_segments_are_counted_or_raised(tmp_path: Path) -> None:
    bag = RawBag(tmp_path / "seg")
    seg = bag.t[m.TRAJECTORY_SEGMENT]

    def segment(ns: int, position: list[float], time: list[float]) -> Any:
        return seg(header=bag.header(ns, "world"), joint_names=["a", "b"],
                   time=np.array(time), position=np.array(position, dtype=float),
                   velocity=np.zeros(0), effort=np.zeros(0), command_names=[],
                   command=np.zeros(0), observation_names=[], observation=np.zeros(0),
                   source="live:recorder")  # fmt: skip

    bag.write("/recorder/segment", m.TRAJECTORY_SEGMENT, segment(T0, [0, 1, 2, 3], [0, 0.1]), T0)
    short = segment(T0 + 1, [0, 1, 2], [0, 0.1])
    backwards = segment(T0 + 2, [0, 1, 2, 3], [0.1, 0.0])
    for k, msg in enumerate((short, backwards)):
        bag.write("/recorder/segment", m.TRAJECTORY_SEGMENT, msg, T0 + 1 + k)
    path = bag.close()
    dataset, summary = read_segments(path)
    assert len(dataset) == 1
    assert dataset[0].meta["t0_ns"] == T0
    assert dataset[0].meta["origin"] == "live:recorder"
    reasons = summary.topics["/recorder/segment"].invalid_reasons
    assert reasons["position: expected 2 x 2 = 4 values, got 3"] == 1
    assert any(r.startswith("time: times must be strictly increasing") for r in reasons)
    with pytest.raises(BagReadError, match=r"'/recorder/segment': position: expected 2 x 2"):
        read_segments(path, strict=True)


def test_iter_joint_states_chunks_and_counts(tmp_path: Path) -> None:
    from dynid.data import ReadSummary, iter_joint_states

    def dup(bag: RawBag, k: int) -> bool:
        if k == 5:
            bag.joint_state(
                "/joint_states", T0 + 4 * 10_000_000, ["a", "b"], [4, -4], [1, 1], [0, 0]
            )
            return True
        return False

    path = _simple_bag(tmp_path / "b", dup, n=50)
    summary = ReadSummary(str(path), "mcap")
    chunks = list(iter_joint_states(path, chunk=16, summary=summary))
    assert [c.q.shape[0] for c in chunks] == [16, 16, 16, 1]
    stamps = np.concatenate([c.stamps_ns for c in chunks])
    assert np.all(np.diff(stamps) > 0)
    assert summary.topics["/joint_states"].duplicated == 1
    assert summary.topics["/joint_states"].used == 49
    np.testing.assert_array_equal(chunks[0].effort[0], [0.5, 2.0])


def test_layout_validation_and_mapping() -> None:
    from dynid.data import DataError

    with pytest.raises(DataError, match="Float64MultiArray; give the entry names"):
        BagLayout(commands=(CommandTopic("/c", msgtype=m.FLOAT64_MULTI_ARRAY),))
    with pytest.raises(DataError, match=r"unknown fields \['acceleration'\]"):
        BagLayout(commands=(CommandTopic("/c", fields=("acceleration",)),))
    with pytest.raises(DataError, match="body names must be unique"):
        BagLayout(mocap=(MocapTopic("a", "/x"), MocapTopic("a", "/y")))
    # an unknown msgtype was ignored (reading takes the bag's type): now refused, naming it
    with pytest.raises(DataError, match=r"mocap\[1\]\.msgtype: 'foo_msgs/msg/Bar' \(topic '/y'\)"):
        BagLayout(mocap=(MocapTopic("a", "/x"), MocapTopic("b", "/y", msgtype="foo_msgs/msg/Bar")))
    with pytest.raises(DataError, match=r"commands\[0\]\.msgtype: 'std_msgs/msg/String'"):
        BagLayout(commands=(CommandTopic("/c", msgtype="std_msgs/msg/String"),))
    layout = BagLayout.from_mapping(
        {"joint_states": {"topic": "/js", "joints": ["a"], "effort_scale": {"a": 2.0}},
         "mocap": [{"body": "box", "topic": "/vrpn_mocap/box/pose",
                    "stamps_latency_corrected": False, "latency": 0.01}],
         "commands": [{"topic": "/c", "fields": ["position", "velocity"]}],
         "stamps": "receive"}
    )  # fmt: skip
    assert layout.joint_states.joints == ("a",)
    assert layout.mocap[0].latency == 0.01
    assert layout.commands[0].fields == ("position", "velocity")
    assert layout.stamps is StampSource.RECEIVE
