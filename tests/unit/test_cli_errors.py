"""``dynid`` refuses bad input before it fits, in one line (exit 2) that blames the flag, file
or key at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_fixtures import write_pendulum_problem

from dynid.cli import main


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``dynid argv`` in this process; the one line it printed on stderr (exit status 2)."""
    status = main(list(argv))
    err = capsys.readouterr().err
    assert status == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"dynid {argv[0]}: error: ")
    return lines[0].removeprefix(f"dynid {argv[0]}: error: ")


def test_a_refused_flag_value_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--particles 0`` and friends named no flag (or the problem file's estimator.settings)."""
    problem = str(write_pendulum_problem(tmp_path, steps=5))
    fit = ("fit", "--problem", problem, "-o", str(tmp_path / "out"))
    line = _error(capsys, *fit, "--particles", "0")
    assert line.startswith("--particles: estimator csvgd: num_particles must be ≥ 1, got 0")
    line = _error(capsys, *fit, "--iterations", "0")
    assert line.startswith("--iterations: estimator csvgd: max_iterations must be ≥ 1")
    line = _error(capsys, *fit, "--set", "bogus=1")
    assert line.startswith("--set: estimator csvgd: unknown setting 'bogus'")
    line = _error(capsys, *fit, "--set", "num_particles=2.5")
    assert line == "--set: estimator csvgd: setting 'num_particles' must be an integer, got 2.5"
    line = _error(capsys, *fit, "--set", "learning_rate=-1")
    assert line.startswith("--set: estimator csvgd: learning_rate must be > 0")
    assert not (tmp_path / "out").exists()


def test_a_problem_file_setting_that_is_not_an_integer_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``num_particles: 2.5`` in the problem file ran with 2 particles."""
    estimator = {"name": "csvgd", "settings": {"num_particles": 2.5, "max_iterations": 2}}
    problem = write_pendulum_problem(tmp_path, steps=5, estimator=estimator)
    line = _error(capsys, "fit", "--problem", str(problem), "-o", str(tmp_path / "out"))
    assert line == (
        f"{problem}: estimator.settings: estimator csvgd: setting 'num_particles' must be an "
        "integer, got 2.5"
    )


def test_an_output_that_is_a_file_is_refused_before_fitting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o`` naming a file fitted first and then failed with '[Errno 17] File exists'."""
    problem = str(write_pendulum_problem(tmp_path, steps=5))
    taken = tmp_path / "taken"
    taken.write_text("not a directory\n")
    line = _error(capsys, "fit", "--problem", problem, "-o", str(taken))
    assert line == f"-o: {taken} is a file; name a directory for the outputs"
    line = _error(capsys, "fit", "--problem", problem, "-o", str(taken / "sub"))
    assert (
        line == f"-o: {taken / 'sub'} lies under the file {taken}; name a directory for the outputs"
    )
    line = _error(capsys, "demo", "-o", str(taken))
    assert line.startswith(f"-o: {taken} is a file")
    assert taken.read_text() == "not a directory\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "parameters: {joint1/damping: abc}\n",
            "parameters.joint1/damping: expected a finite number or a list of them, got 'abc'",
        ),
        ("parameters: {joint1/damping: [0.1, abc]}\n", "parameters.joint1/damping: expected"),
        ("parameters: {joint1/damping: {a: 1}}\n", "parameters.joint1/damping: expected"),
        ("parameters: {joint1/damping: .nan}\n", "got nan"),
        ("parameters: {joint1/damping: []}\n", "got []"),
        ("parameters: [1, 2]\n", "parameters: expected a mapping of name: value"),
        ("parameters: {joint1/damping: [oops\n", "invalid YAML"),
        (b"\xff\xfe garbage", "cannot read"),
    ],
    ids=["word", "list_with_word", "mapping", "nan", "empty", "list", "bad_yaml", "not_utf8"],
)
def test_a_truth_file_with_garbage_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, needle: str
) -> None:
    """``--truth`` with a value that is not a number ended in a numpy traceback."""
    problem = str(write_pendulum_problem(tmp_path, steps=5))
    truth = tmp_path / "truth.yaml"
    if isinstance(text, bytes):
        truth.write_bytes(text)
    else:
        truth.write_text(text)
    line = _error(capsys, "fit", "--problem", problem, "--truth", str(truth),
                  "-o", str(tmp_path / "out"))  # fmt: skip
    assert line.startswith(f"--truth: {truth}: ")
    assert needle in line
    assert not (tmp_path / "out").exists()


def test_an_unknown_mocap_msgtype_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown mocap ``msgtype`` was ignored (the bag's type was read whatever it said)."""
    mocap = [{"body": "tip", "topic": "/vicon/tip/tip", "msgtype": "foo_msgs/msg/Bar"}]
    problem = write_pendulum_problem(tmp_path, steps=5, data={"source": "bag", "mocap": mocap})
    line = _error(capsys, "fit", "--problem", str(problem), "-o", str(tmp_path / "out"))
    assert line.startswith(f"{problem}: data")
    assert "mocap[0].msgtype: 'foo_msgs/msg/Bar' (topic '/vicon/tip/tip') is not one of" in line


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"attachments": [{"type": "universal_box", "flange_frame": "link2", "size": "big"}]},
            "attachments[0].size: universal_box: expected a list of numbers, got 'big'",
        ),
        (
            {"attachments": [{"type": "payload", "link": "link2", "mass": 0.1, "com": [0, 0]}]},
            "attachments[0] (payload): ",  # the function's own check, one line
        ),
        (
            {"attachments": [{"type": "universal_box", "flange_frame": "link2", "weights": 2.5}]},
            "attachments[0].weights: universal_box: expected an integer, got 2.5",
        ),
        (
            {"attachments": [{"type": "payload", "link": "link2", "com": [0, 0, 0]}]},
            "attachments[0].mass: payload: is required",
        ),
        ({"simulation": {"substeps": 0}}, "simulation.substeps: expected an integer ≥ 1, got 0"),
        (
            {"simulation": {"substeps": 2.5}},
            "simulation.substeps: expected an integer ≥ 1, got 2.5",
        ),
        (
            {"data": {"source": "npz", "path": "dp.npz", "trajectories": [0.5]}},
            "data.trajectories: expected a list of indices, got [0.5]",
        ),
    ],
    ids=[
        "size_big",
        "com_short",
        "weights_float",
        "mass_missing",
        "substeps_0",
        "substeps_float",
        "trajectory_float",
    ],
)
def test_a_bad_problem_file_value_names_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, expected: str
) -> None:
    """``size: big`` ended in a numpy traceback; ``substeps: 0`` was blamed on ``data``; a
    fractional index or substep count was cut to an integer."""
    problem = write_pendulum_problem(tmp_path, steps=5, **changes)
    line = _error(capsys, "fit", "--problem", str(problem), "-o", str(tmp_path / "out"))
    assert line.startswith(f"{problem}: {expected}")


def test_a_problem_path_that_is_a_directory_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory given as ``--problem`` was reported as 'does not exist'."""
    line = _error(capsys, "fit", "--problem", str(tmp_path), "-o", str(tmp_path / "out"))
    assert line == f"problem file {tmp_path} is a directory, not a YAML file"


def test_a_urdf_path_that_is_a_directory_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory given as ``robot.urdf`` was reported as 'does not exist'."""
    (tmp_path / "robots").mkdir()
    problem = write_pendulum_problem(tmp_path, steps=5, robot={"urdf": "robots"})
    line = _error(capsys, "fit", "--problem", str(problem), "-o", str(tmp_path / "out"))
    assert line == f"{problem}: robot.urdf: {tmp_path / 'robots'} is a directory, not a URDF file"
