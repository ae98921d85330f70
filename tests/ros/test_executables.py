"""The executables installed by ``colcon build`` start, take ``--ros-args`` parameters (and the
node parameter files of config/nodes), expose them, and refuse bad ones with a message."""

from __future__ import annotations

import subprocess

import pytest
from node_helpers import ROOT, STARTUP_S, call_service, executable, output_of, ros_args
from rcl_interfaces.srv import GetParameters


def _get(test_node, node: str, names: list[str], proc) -> list:
    request = GetParameters.Request(names=names)
    service = f"/{node}/get_parameters"
    return call_service(test_node, GetParameters, service, request, STARTUP_S, proc).values


def test_recorder_takes_a_parameter_file_and_overrides(test_node, spawn, tmp_path) -> None:
    proc = spawn(
        executable("recorder"), "--ros-args", "--params-file",
        str(ROOT / "config" / "nodes" / "panda_recorder.yaml"),
        *ros_args({"output_dir": str(tmp_path), "rate_hz": 250.0})[1:],
    )  # fmt: skip
    topic, mocap, rate, out = _get(
        test_node, "recorder", ["joint_state_topic", "mocap_types", "rate_hz", "output_dir"], proc
    )
    assert topic.string_value == "/franka/joint_states"
    assert list(mocap.string_array_value) == ["TransformStamped"]
    assert rate.double_value == 250.0
    assert out.string_value == str(tmp_path)


def test_estimator_and_bag_player_answer_their_parameters(test_node, spawn, tmp_path) -> None:
    from dynid.data import Trajectory, write_bag

    bag = write_bag(Trajectory(t=[0.0, 0.01], q=[[0.0], [0.1]], joint_names=["j"]),
                    tmp_path / "tiny")  # fmt: skip
    player = spawn(executable("bag_player"),
                   *ros_args({"bag": str(bag), "rate": 0.5, "start_paused": True}))  # fmt: skip
    estimator = spawn(
        executable("estimator"), "--ros-args", "--params-file",
        str(ROOT / "config" / "nodes" / "panda_estimator.yaml"),
        *ros_args({"output_dir": str(tmp_path / "out"), "publish_every": 3})[1:],
    )  # fmt: skip
    (rate,) = _get(test_node, "bag_player", ["rate"], player)
    assert rate.double_value == 0.5
    name, every, frames = _get(
        test_node, "estimator", ["estimator", "publish_every", "marker_frames"], estimator
    )
    assert name.string_value == "csvgd"
    assert every.integer_value == 3
    assert list(frames.string_array_value) == ["box:box"]


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("recorder", {"segment_mode": "sometimes"}, "parameter 'segment_mode' must be one of"),
        ("recorder", {"joints": ["a", "b"], "effort_scale": [1.0]}, "'effort_scale' has 1"),
        ("recorder", {"mocap_topics": ["/x"]}, "must have one entry each"),
        ("estimator", {"estimator": "magic"}, "parameter 'estimator' must be one of"),
        ("estimator", {"problem": "no_such_problem"}, "parameter 'problem'"),
        (
            "estimator",
            {"estimator": "emcee", "estimator_settings": "{learning_rate: 0.1}"},
            "estimator emcee: unknown setting 'learning_rate' (accepted: ",
        ),
        ("payload_tracker", {"rate": 0.0}, "parameter 'rate' must be finite and > 0"),
        ("payload_tracker", {"problem": "panda_whole_arm"}, "exactly one attachment of type"),
        ("payload_tracker", {"change_rate": -1.0}, "'change_rate' must be a number > 0"),
    ],
)
def test_bad_parameters_are_refused_with_a_message(spawn, name, params, message) -> None:
    proc = spawn(executable(name), *ros_args(params))
    assert proc.wait(timeout=STARTUP_S) == 2
    assert message in output_of(proc)


def _refused(name: str, *args: str) -> str:
    """The one line that executable ``name`` prints on stderr when it refuses ``args`` (exit
    status 2, nothing on stdout, no traceback)."""
    done = subprocess.run(
        [executable(name), *args], capture_output=True, text=True, timeout=STARTUP_S, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("recorder", "max_buffer_s:=abc", "must be a floating-point number, got 'abc' (a string)"),
        ("recorder", "max_buffer_s:=60", "must be a floating-point number, got 60 (an integer; "),
        ("estimator", "publish_every:=abc", "must be an integer, got 'abc' (a string)"),
    ],
)
def test_a_parameter_of_the_wrong_type_is_one_line(name, override, message) -> None:
    parameter = override.split(":=")[0]
    line = _refused(name, "--ros-args", "-p", override)
    assert line.startswith(f"{name}: parameter {parameter!r} {message}")


def test_ros_arguments_rcl_cannot_parse_are_one_line(tmp_path) -> None:
    line = _refused("recorder", "--ros-args", "-p", "max_buffer_s:=[1")
    assert "Couldn't parse parameter override rule: '-p max_buffer_s:=[1'" in line
    broken = tmp_path / "broken.yaml"
    broken.write_text("recorder:\n  ros__parameters:\n    max_buffer_s: {a: 1\n")
    line = _refused("recorder", "--ros-args", "--params-file", str(broken))
    assert line.startswith(f"recorder: failed to initialize rcl: Couldn't parse params file: "
                           f"'--params-file {broken}'")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"size": "big"}, "attachments[0].size: universal_box: expected a list of numbers"),
        ({"weights": 2.5}, "attachments[0].weights: universal_box: expected an integer, got 2.5"),
    ],
    ids=["size_big", "weights_float"],
)
def test_a_problem_with_a_bad_attachment_is_one_line(spawn, tmp_path, change, message) -> None:
    """The estimator node loads its problem file at start: a bad attachment value ended in a
    numpy traceback there; it is one line naming the file and the key (exit status 2)."""
    import yaml

    config = yaml.safe_load((ROOT / "config" / "problems" / "panda_box.yaml").read_text())
    config["attachments"][0].update(change)
    problem = tmp_path / "bad_attachment.yaml"
    problem.write_text(yaml.safe_dump(config))
    proc = spawn(executable("estimator"), *ros_args({"problem": str(problem)}))
    assert proc.wait(timeout=STARTUP_S) == 2
    lines = [line for line in output_of(proc).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"estimator: parameter 'problem': {problem}: {message}")
