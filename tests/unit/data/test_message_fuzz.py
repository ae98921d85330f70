"""Property-based checks of the bag message validators (``decode.py`` handlers and
``messages.segment_to_trajectory``) with generated bad messages: NaN and infinite values, wrong
and huge array lengths, bad joint names, stamps with ``nanosec >= 1e9`` or a negative ``sec``,
and damaged CDR bytes.

Properties: no exception but the project's own escapes; each refused message is counted under a
reason that starts with the message field it names (or raised as one line naming the topic and
the field when the read is strict); every kept sample is finite, unit-quaternion where it is a
pose, and validly stamped. Examples are derandomized (seeded) and few, so the suite is quick.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynid.data import BagReadError, CommandTopic, JointStateTopic, MocapTopic, OutOfOrder
from dynid.data import messages as m
from dynid.data.decode import (
    CommandHandler,
    Handler,
    JointStateHandler,
    MocapHandler,
    SegmentHandler,
    TfHandler,
)
from dynid.data.errors import SegmentError
from dynid.data.topics import StampSource

SEEDED = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
STORE = m.make_typestore()
T = STORE.types
PATH = "fuzz.mcap"
T0 = 1_700_000_000_000_000_000
SPECIAL = [math.nan, math.inf, -math.inf, 1e308, -0.0]


def _time(sec: int, nanosec: int, kind: str = "builtin_interfaces/msg/Time") -> Any:
    return T[kind](sec=sec, nanosec=nanosec)


def _header(stamp: tuple[int, int], frame: str = "world") -> Any:
    return T["std_msgs/msg/Header"](stamp=_time(*stamp), frame_id=frame)


def _valid_stamp(stamp: tuple[int, int]) -> bool:
    return stamp[0] >= 0 and stamp[1] < 1_000_000_000


#: (sec, nanosec): mostly good and increasing, sometimes negative or with nanosec >= 1e9
stamps = st.one_of(
    st.integers(0, 10_000).map(lambda k: (T0 // 10**9 + k // 100, (k % 100) * 10_000_000)),
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**32 - 1)),
    st.tuples(st.integers(0, 2**31 - 1), st.integers(1_000_000_000, 2**32 - 1)),
)
values = st.one_of(st.floats(-10, 10), st.sampled_from(SPECIAL))
#: (x, y, z, w): mostly unit quaternions, sometimes not normalised or not finite
quaternions = st.one_of(
    st.sampled_from([(0.0, 0.0, 0.0, 1.0), (0.5, 0.5, 0.5, 0.5), (1.0, 0.0, 0.0, 0.0)]),
    st.tuples(values, values, values, values),
)


@st.composite
def vectors(draw: st.DrawFn, n: int) -> np.ndarray:
    """Mostly ``n`` long, sometimes short, long or huge (100 000); a few special values."""
    length = draw(st.sampled_from([n, n, n, 0, n - 1, n + 1, 100_000]))
    out = np.full(max(length, 0), draw(st.floats(-10, 10)))
    for _ in range(draw(st.integers(0, 2))):
        if out.size:
            out[draw(st.integers(0, out.size - 1))] = draw(values)
    return out


names = st.one_of(
    st.just(["a", "b"]),
    st.just(["b", "a", "extra"]),
    st.lists(st.sampled_from(["a", "b", "", "ä", "a b"]), max_size=4),
)


@st.composite
def damaged(draw: st.DrawFn, raw: bytes) -> bytes:
    """``raw`` truncated, or with a run of bytes overwritten."""
    if draw(st.booleans()):
        return raw[: draw(st.integers(0, len(raw)))]
    pos = draw(st.integers(0, len(raw) - 1))
    run = draw(st.binary(min_size=1, max_size=12))
    return raw[:pos] + run + raw[pos + len(run) :]


def _serialized(draw: st.DrawFn, msg: Any, msgtype: str, stamp_ok: bool) -> tuple[bytes, bool]:
    """The message's CDR bytes, damaged one time in five (its stamp is then unknown: ok)."""
    raw = bytes(STORE.serialize_cdr(msg, msgtype))
    if draw(st.integers(0, 4)) == 0:
        return draw(damaged(raw)), True
    return raw, stamp_ok


def _feed(handler: Handler, messages: list[tuple[bytes, bool]], fields: set[str]) -> None:
    """Feed ``(raw, stamp valid)`` messages; check the counts, the reasons and the samples kept."""
    topic = handler.summary.topic
    for k, (raw, stamp_ok) in enumerate(messages):
        kept = len(handler.stream) if handler.stream is not None else 0
        error = _error(lambda raw=raw, k=k: handler.handle(raw, T0 + k))
        if error is not None:
            assert handler.strict
            assert error.startswith(f"{PATH}: topic {topic!r}: ")
            assert error.removeprefix(f"{PATH}: topic {topic!r}: ").split(":")[0] in fields
            return
        now = len(handler.stream) if handler.stream is not None else 0
        if not stamp_ok and handler.stamps is StampSource.HEADER:
            assert now == kept, "a message with a bad stamp was kept"
    summary = handler.summary
    assert summary.received == len(messages)
    assert summary.invalid == sum(summary.invalid_reasons.values())
    for reason in summary.invalid_reasons:
        assert "\n" not in reason
        assert reason.split(":")[0] in fields, reason
    result: list[tuple[np.ndarray, np.ndarray]] = []
    error = _error(lambda: result.append(handler.finish()))
    if error is not None:
        assert error.startswith(f"{PATH}: topic {topic!r}")
        return
    ((stamps_ns, rows),) = result
    assert np.all(np.isfinite(rows))
    assert np.all(np.diff(stamps_ns) > 0)


def _error(call: Any, kind: type[Exception] = BagReadError) -> str | None:
    """The one-line message of the ``kind`` error ``call()`` raises (``None`` if it returns)."""
    try:
        call()
    except kind as err:
        text = str(err)
        assert "\n" not in text
        return text
    return None


def _handler_args(strict: bool) -> dict[str, Any]:
    return {"path": PATH, "stamps": StampSource.HEADER, "strict": strict,
            "policy": OutOfOrder.SKIP, "capacity": 16}  # fmt: skip


@st.composite
def joint_states(draw: st.DrawFn) -> tuple[bytes, bool]:
    stamp = draw(stamps)
    msg = T[m.JOINT_STATE](
        header=_header(stamp), name=draw(names), position=draw(vectors(2)),
        velocity=draw(vectors(2)), effort=draw(vectors(2)),
    )  # fmt: skip
    return _serialized(draw, msg, m.JOINT_STATE, _valid_stamp(stamp))


JOINT_FIELDS = {"header.stamp", "name", "position", "velocity", "effort", "data"}


@SEEDED
@given(st.lists(joint_states(), min_size=1, max_size=6), st.booleans(), st.booleans())
def test_joint_state_validator(
    messages: list[tuple[bytes, bool]], strict: bool, named: bool
) -> None:
    spec = JointStateTopic(joints=("a", "b") if named else None)
    handler = JointStateHandler(spec, STORE, **_handler_args(strict))
    _feed(handler, messages, JOINT_FIELDS)
    if handler.stream is not None and len(handler.stream):
        parts = 1 + bool(handler.has_velocity) + bool(handler.has_effort)
        assert handler.stream.width == parts * len(handler.joints)


@st.composite
def poses(draw: st.DrawFn, msgtype: str) -> tuple[bytes, bool]:
    stamp = draw(stamps)
    p = [draw(values) for _ in range(3)]
    q = draw(quaternions)
    g = "geometry_msgs/msg/"
    quat = T[g + "Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3])
    if msgtype == m.POSE_STAMPED:
        pose = T[g + "Pose"](position=T[g + "Point"](x=p[0], y=p[1], z=p[2]), orientation=quat)
        msg = T[msgtype](header=_header(stamp), pose=pose)
    else:
        tf = T[g + "Transform"](translation=T[g + "Vector3"](x=p[0], y=p[1], z=p[2]), rotation=quat)
        msg = T[msgtype](header=_header(stamp), child_frame_id="box", transform=tf)
    return _serialized(draw, msg, msgtype, _valid_stamp(stamp))


POSE_FIELDS = {"header.stamp", "data", "pose.position", "pose.orientation",
               "transform.translation", "transform.rotation"}  # fmt: skip


@SEEDED
@given(
    st.sampled_from([m.POSE_STAMPED, m.TRANSFORM_STAMPED]).flatmap(
        lambda t: st.tuples(st.just(t), st.lists(poses(t), min_size=1, max_size=6))
    ),
    st.booleans(),
)
def test_mocap_validator(case: tuple[str, list[tuple[bytes, bool]]], strict: bool) -> None:
    msgtype, messages = case
    spec = MocapTopic("box", "/mocap/box", msgtype=msgtype)
    handler = MocapHandler(spec, msgtype, STORE, **_handler_args(strict))
    _feed(handler, messages, POSE_FIELDS)
    if handler.stream is not None and len(handler.stream):
        _, rows = handler.stream.finish()
        np.testing.assert_allclose(np.linalg.norm(rows[:, 3:], axis=1), 1.0, atol=1e-3)


@st.composite
def tf_messages(draw: st.DrawFn) -> tuple[bytes, bool]:
    g = "geometry_msgs/msg/"
    transforms = []
    for _ in range(draw(st.integers(0, 3))):
        p = [draw(values) for _ in range(3)]
        q = draw(quaternions)
        transforms.append(
            T[m.TRANSFORM_STAMPED](
                header=_header(draw(stamps), draw(st.sampled_from(["world", "/world", ""]))),
                child_frame_id=draw(st.sampled_from(["box", "tool", ""])),
                transform=T[g + "Transform"](
                    translation=T[g + "Vector3"](x=p[0], y=p[1], z=p[2]),
                    rotation=T[g + "Quaternion"](x=q[0], y=q[1], z=q[2], w=q[3]),
                ),
            )
        )
    msg = T[m.TF_MESSAGE](transforms=transforms)
    return _serialized(draw, msg, m.TF_MESSAGE, True)


TF_FIELDS = {"data", "header.stamp", "transforms.header.stamp", "transforms.transform.translation",
             "transforms.transform.rotation", "transforms.header.frame_id"}  # fmt: skip


@SEEDED
@given(st.lists(tf_messages(), min_size=1, max_size=5), st.booleans(), st.booleans())
def test_tf_validator(messages: list[tuple[bytes, bool]], strict: bool, static: bool) -> None:
    handler = TfHandler("/tf", STORE, static=static, **_handler_args(strict))
    for k, (raw, _) in enumerate(messages):
        error = _error(lambda raw=raw, k=k: handler.handle(raw, T0 + k))
        if error is not None:
            assert strict
            assert error.split("'/tf': ")[1].split(":")[0] in TF_FIELDS
            return
    for reason in handler.summary.invalid_reasons:
        assert "\n" not in reason
        assert reason.split(":")[0] in TF_FIELDS, reason
    for stream in handler.edges.values():
        if len(stream):
            stamps_ns, rows = stream.finish()
            assert np.all(np.isfinite(rows))
            assert np.all(np.diff(stamps_ns) > 0)
    for row in handler.static_edges.values():
        assert all(map(math.isfinite, row))


@st.composite
def commands(draw: st.DrawFn, msgtype: str) -> tuple[bytes, bool]:
    if msgtype == m.FLOAT64_MULTI_ARRAY:
        layout = T["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        msg = T[msgtype](layout=layout, data=draw(vectors(2)))
        return _serialized(draw, msg, msgtype, True)
    stamp = draw(stamps)
    points = []
    for _ in range(draw(st.integers(0, 3))):
        sec, nanosec = draw(st.sampled_from([(0, 0), (0, 10_000_000), (1, 0)]) | stamps)
        points.append(
            T["trajectory_msgs/msg/JointTrajectoryPoint"](
                positions=draw(vectors(2)), velocities=np.zeros(0), accelerations=np.zeros(0),
                effort=np.zeros(0),
                time_from_start=_time(sec, nanosec, "builtin_interfaces/msg/Duration"),
            )
        )  # fmt: skip
    msg = T[msgtype](header=_header(stamp), joint_names=draw(names), points=points)
    return _serialized(draw, msg, msgtype, _valid_stamp(stamp) or stamp == (0, 0))


COMMAND_FIELDS = {"data", "header.stamp", "name", "position", "points",
                  "points.time_from_start"}  # fmt: skip


@SEEDED
@given(
    st.sampled_from([m.FLOAT64_MULTI_ARRAY, m.JOINT_TRAJECTORY]).flatmap(
        lambda t: st.tuples(st.just(t), st.lists(commands(t), min_size=1, max_size=5))
    ),
    st.booleans(),
)
def test_command_validator(case: tuple[str, list[tuple[bytes, bool]]], strict: bool) -> None:
    msgtype, messages = case
    names_ = ("u1", "u2") if msgtype == m.FLOAT64_MULTI_ARRAY else None
    spec = CommandTopic("/cmd", msgtype=msgtype, names=names_, fields=("position",))
    handler = CommandHandler(spec, msgtype, STORE, **_handler_args(strict))
    if msgtype == m.JOINT_TRAJECTORY:  # points are kept until finish: bad stamps checked there
        messages = [(raw, True) for raw, _ in messages]
    _feed(handler, messages, COMMAND_FIELDS)


SEGMENT_FIELDS = {"header.stamp", "time", "joint_names", "position", "velocity", "effort",
                  "command", "command_names", "observation", "observation_names"}  # fmt: skip


@st.composite
def segments(draw: st.DrawFn) -> Any:
    n = draw(st.integers(0, 3))
    time = np.sort(draw(vectors(n))) if draw(st.booleans()) else draw(vectors(n))
    joints = draw(names)
    return T[m.TRAJECTORY_SEGMENT](
        header=_header(draw(stamps)), joint_names=joints, time=time,
        position=draw(vectors(n * len(joints))), velocity=draw(vectors(n * len(joints))),
        effort=np.zeros(0), command_names=draw(st.sampled_from([[], ["u"], ["u", "u"]])),
        command=draw(vectors(n)), observation_names=[], observation=np.zeros(0),
        source="fuzz",
    )  # fmt: skip


@SEEDED
@given(segments())
def test_segment_validator(msg: Any) -> None:
    result = []
    error = _error(lambda: result.append(m.segment_to_trajectory(msg, {})), SegmentError)
    if error is not None:
        assert error.split(": ")[0] in SEGMENT_FIELDS, error
        return
    (traj,) = result
    assert np.all(np.isfinite(traj.q))
    assert np.all(np.diff(traj.t) > 0)
    assert _valid_stamp((msg.header.stamp.sec, msg.header.stamp.nanosec))


@SEEDED
@given(
    segments().flatmap(lambda msg: damaged(bytes(STORE.serialize_cdr(msg, m.TRAJECTORY_SEGMENT))))
)
def test_segment_handler_with_damaged_bytes(raw: bytes) -> None:
    handler = SegmentHandler("/seg", STORE, path=PATH, strict=False)
    handler.handle(raw, T0)
    for reason in handler.summary.invalid_reasons:
        assert "\n" not in reason
        assert reason.split(":")[0] in SEGMENT_FIELDS | {"data"}, reason
    assert handler.summary.received == 1


@pytest.mark.parametrize("nanosec", [1_000_000_000, 2**32 - 1])
def test_stamp_nanosec_beyond_a_second_is_refused(nanosec: int) -> None:
    """A stamp with nanosec >= 1e9 would alias a later second; it is one bad message."""
    handler = JointStateHandler(JointStateTopic(), STORE, **_handler_args(False))
    for k, stamp in enumerate([0, nanosec]):
        msg = T[m.JOINT_STATE](
            header=_header((T0 // 10**9, stamp)), name=["a"], position=np.zeros(1),
            velocity=np.zeros(0), effort=np.zeros(0),
        )  # fmt: skip
        handler.handle(STORE.serialize_cdr(msg, m.JOINT_STATE), T0 + k)
    assert handler.summary.invalid == 1
    (reason,) = handler.summary.invalid_reasons
    assert reason.startswith("header.stamp: nanosec")
