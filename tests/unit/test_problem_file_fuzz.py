"""Property-based suite (hypothesis) for the problem-file schema: generated bad problem mappings
— values of the wrong type, missing and extra keys, bad numbers, nested garbage — are refused
with a :class:`ProblemFileError` only, each on one line naming the key concerned."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynid.problem_file import ProblemFileError, read_problem_file

JOINT_STATE = "sensor_msgs/msg/JointState"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"

#: A valid problem that uses every section (and most keys) of the schema.
BASE: dict[str, Any] = {
    "name": "fuzz",
    "description": "a double pendulum with a payload, every section used",
    "robot": {"name": "double_pendulum", "locked_joints": {}, "gravity": [0.0, 0.0, -9.81]},
    "attachments": [{"type": "payload", "link": "link2", "mass": 0.1, "com": [0.0, 0.0, 0.0]}],
    "parameters": [
        {"name": "joint1/damping", "lower": 0.0, "upper": 1.0, "unit": "N·m·s/rad"},
        {
            "name": "joint2/damping",
            "lower": 0.0,
            "upper": 1.0,
            "prior": "gaussian",
            "mean": 0.5,
            "std": 0.2,
        },
    ],
    "truth": {"joint1/damping": 0.3},
    "data": {
        "source": "bag",
        "path": "run.mcap",
        "joint_states": {"topic": "/joint_states", "joints": ["joint1", "joint2"]},
        "mocap": [{"body": "tip", "topic": "/vicon/tip/tip", "msgtype": POSE_STAMPED}],
        "commands": [
            {
                "topic": "/desired",
                "msgtype": JOINT_STATE,
                "label": "desired",
                "fields": ["position", "velocity"],
            }
        ],
        "stamps": "header",
        "rate": 100.0,
        "max_skipped_percent": 5.0,
        "window": [0.0, 1.0],
        "lowpass_hz": 8.0,
        "velocities": "central",
        "dt": 0.01,
        "split": 0.5,
        "trajectories": [0],
    },
    "control": {
        "type": "pd",
        "actuated": ["joint1", "joint2"],
        "inputs": [
            "desired/joint1/position",
            "desired/joint2/position",
            "desired/joint1/velocity",
            "desired/joint2/velocity",
        ],
        "kp": [10.0, 5.0],
        "kd": 1.0,
    },
    "observe": {
        "joints": "all",
        "velocities": False,
        "frame_points": [{"frame": "tip", "body": "tip", "points": [[0.0, 0.0, 0.0]]}],
        "frame_poses": [],
    },
    "likelihood": {"obs_std": 0.01, "shooting": "multiple", "windows": 3, "defect_std": 0.1},
    "simulation": {"substeps": 1, "backend": "torch", "device": "cpu", "model": "rigid"},
    "estimator": {"name": "csvgd", "settings": {"num_particles": 4, "max_iterations": 2}},
}

#: Other sources and control types, so that their keys are generated too.
VARIANTS: list[dict[str, Any]] = [
    BASE,
    {**BASE, "data": {"source": "npz", "path": "dp.npz", "velocities": "measured"},
     "control": {"type": "torque", "actuated": ["joint1"]},
     "likelihood": {"kind": "inverse_dynamics", "torque_std": [0.1, 0.2], "cutoff_hz": 10.0,
                    "stride": 2, "trim_s": 0.1}},
    {**BASE, "data": {"source": "scenario", "scenario": "double_pendulum",
                      "settings": {"trajectories": 1, "steps": 10}, "split": 0.05},
     "control": {"type": "none"}, "simulation": {"substeps": 2, "backend": "pinocchio"}},
    {**BASE, "data": {"source": "ibm_pendulum", "runs": [0, 1], "start": 10, "max_samples": 100},
     "control": {"type": "prescribed", "actuated": ["joint1"]},
     "estimator": {"name": "lm", "settings": {"stride": 2, "fixed_parameters": False}}},
]  # fmt: skip

Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path to a value inside ``value`` (mapping keys and list indices)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


PATHS = _paths(BASE)


def _at(config: Any, path: Path) -> Any:
    for part in path:
        config = config[part]
    return config


scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(["big", "all", "none", "nan", "-1", "1e3", "[", "{a: [}", "\n", "\u2028"])
    # values that switch branches of the schema: other sources, controls, models, priors
    | st.sampled_from(
        [
            "bag",
            "npz",
            "scenario",
            "ibm_pendulum",
            "double_pendulum",
            "torque",
            "current",
            "prescribed",
            "soft_block",
            "pinocchio",
            "gaussian",
            "receive",
            "inverse_dynamics",
            "single",
            "payload",
            "universal_box",
            "lm",
        ]
    )
)
garbage = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def bad_problems(draw: st.DrawFn) -> tuple[dict[str, Any], str, Path, str]:
    """``(mapping, kind, path, new_key)``: one of the valid ``VARIANTS`` with one value replaced
    by garbage, one key deleted, or one unknown key added."""
    config = copy.deepcopy(draw(st.sampled_from(VARIANTS)))
    paths = _paths(config)
    kind = draw(st.sampled_from(["replace", "delete", "add"]))
    new_key = ""
    if kind == "add":
        path = draw(st.sampled_from([p for p in [(), *paths] if isinstance(_at(config, p), dict)]))
        new_key = draw(st.text(min_size=1, max_size=6))
        target = _at(config, path)
        if new_key in target:
            new_key += "_x"
        target[new_key] = draw(garbage)
        return config, kind, path, new_key
    path = draw(st.sampled_from(paths))
    parent = _at(config, path[:-1])
    if kind == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(garbage)
    return config, kind, path, new_key


def _named(message: str, kind: str, path: Path, new_key: str) -> bool:
    """Whether the message names the key concerned: the innermost key on the path (``msgtype``
    for ``data.mocap[0].msgtype``, ``settings`` for a key added to ``estimator.settings``), the
    attachment entry for the checks an attachment makes of its own values (``attachments[0]``),
    a sibling key that no longer fits it (``estimator.settings`` when ``estimator.name`` is gone
    or names another estimator), or, for a key added at the top level, that key."""
    if not path:
        return repr(new_key) in message
    keys = [part for part in path if isinstance(part, str)]
    if path[0] == "attachments" and len(path) > 2 and f"attachments[{path[1]}]" in message:
        return True
    if len(keys) > 1 and isinstance(path[-1], str):  # or a sibling that no longer fits it
        return keys[-1] in message or f"{keys[-2]}." in message
    return keys[-1] in message


def _error(config: dict[str, Any]) -> str | None:
    """The message of the :class:`ProblemFileError` reading ``config`` raises (``None``: it is
    accepted); any other exception propagates and fails the test."""
    try:
        read_problem_file(config)
    except ProblemFileError as exc:
        return str(exc)
    return None


@settings(
    max_examples=1000,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(bad_problems())
def test_bad_problem_mappings_are_one_line_errors_naming_the_key(
    problem: tuple[dict[str, Any], str, Path, str],
) -> None:
    config, kind, path, new_key = problem
    message = _error(config)
    if message is None:
        return
    assert len(message.splitlines()) == 1, message
    assert message.startswith("problem 'fuzz': ") or path == ("name",), message
    assert _named(message, kind, path, new_key), (kind, path, message)


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_the_valid_variants_are_valid(variant: int) -> None:
    pf = read_problem_file(copy.deepcopy(VARIANTS[variant]))
    assert pf.spec.names == ["joint1/damping", "joint2/damping"]


@pytest.mark.parametrize("section", list(BASE))
def test_every_section_holding_garbage_is_named(section: str) -> None:
    """The deterministic corner: each top-level key replaced by a mapping of garbage."""
    config = copy.deepcopy(BASE)
    config[section] = {"zz": [None, {"a": float("nan")}]}
    message = _error(config)
    if message is not None:
        assert len(message.splitlines()) == 1, message
        assert section in message
