"""The ``dynid`` command in subprocesses: outputs of each subcommand, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_cli_fixtures import TRUTH, write_pendulum_problem

from dynid.cli import read_truth
from dynid.demo import demo_centroid_error, demo_weights_error, demo_weights_summary
from dynid.posterior import Posterior

ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0]
    return lines[0]


def test_fit_writes_posterior_urdf_and_report(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    problem = write_pendulum_problem(tmp_path, steps=20)
    out = tmp_path / "out"
    result = run_dynid("fit", "--problem", str(problem), "-o", str(out), "--no-progress",
                        "--seed", "3", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    for name in ("posterior.yaml", "particles.npz", "report.html", "history.json",
                 "double_pendulum_identified.urdf"):  # fmt: skip
        assert (out / name).is_file(), name
    summary = yaml.safe_load((out / "posterior.yaml").read_text())
    assert set(summary["parameters"]) == set(TRUTH)
    assert summary["num_particles"] == 4
    assert summary["iteration"] == 2
    assert summary["meta"]["seed"] == 3
    post = Posterior.load_npz(out / "particles.npz")
    assert post.particles.shape == (4, 2)
    assert "joint1/damping" in result.stdout
    assert "<dynamics" in (out / "double_pendulum_identified.urdf").read_text()


def test_bad_problem_file_names_the_key(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    bad = {"parameters": [{"name": "joint1/damping", "lower": 1.0, "upper": 0.5}]}
    problem = write_pendulum_problem(tmp_path, steps=5, **bad)
    line = _one_line_error(run_dynid("fit", "--problem", str(problem), cwd=tmp_path), "parameters")
    assert "joint1/damping" in line


def test_missing_bag_and_unknown_estimator(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    problem = write_pendulum_problem(tmp_path, steps=5, data={"source": "bag"})
    _one_line_error(
        run_dynid("fit", "--problem", str(problem), "--bag", "nope.mcap", cwd=tmp_path), "nope.mcap"
    )
    _one_line_error(
        run_dynid("fit", "--problem", str(problem), "--estimator", "oracle", cwd=tmp_path), "oracle"
    )


def test_another_estimator_starts_from_its_own_defaults(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """``--estimator emcee`` on a problem file whose settings are CSVGD's: those settings are not
    passed to emcee (it would refuse them); the flags still apply."""
    problem = write_pendulum_problem(
        tmp_path, steps=10, estimator={"name": "csvgd", "settings": {"learning_rate": 0.02}}
    )
    out = tmp_path / "out"
    result = run_dynid("fit", "--problem", str(problem), "--estimator", "emcee", "--particles", "6",
                        "--iterations", "2", "--seed", "1", "--no-progress", "-o", str(out),
                        cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    meta = yaml.safe_load((out / "posterior.yaml").read_text())["meta"]
    assert meta["estimator_name"] == "emcee"
    settings = meta["estimator_settings"]
    assert "learning_rate" not in settings
    assert (settings["num_particles"], settings["max_iterations"], settings["seed"]) == (6, 2, 1)
    assert settings["stretch"] == 2.0  # emcee's defaults file


def test_a_setting_the_estimator_does_not_take_names_the_flag(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    problem = write_pendulum_problem(tmp_path, steps=5)
    line = _one_line_error(
        run_dynid("fit", "--problem", str(problem), "--estimator", "emcee", "--set",
               "learning_rate=0.1", cwd=tmp_path),
        "--set", "estimator emcee: unknown setting 'learning_rate' (accepted: ",
    )  # fmt: skip
    assert "stretch" in line
    _one_line_error(
        run_dynid("fit", "--problem", str(problem), "--estimator", "proprio", "--particles", "3",
               cwd=tmp_path),
        "--particles", "estimator proprio: unknown setting 'num_particles'",
    )  # fmt: skip


def test_simulate_then_fit_a_bag_without_the_named_topic(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    bag = tmp_path / "dp"
    result = run_dynid("simulate", "double_pendulum", "-o", str(bag), "--set", "trajectories=1",
                        "--set", "steps=10", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert bag.is_dir()
    truth = read_truth(bag.with_name("dp.truth.yaml"))
    assert set(truth) == {"link1/length", "link2/length"}
    data = {"source": "bag", "mocap": [{"body": "tip", "topic": "/vicon/tip/tip"}]}
    problem = write_pendulum_problem(tmp_path, steps=5, data=data)
    _one_line_error(
        run_dynid("fit", "--problem", str(problem), "--bag", str(bag), cwd=tmp_path),
        "/vicon/tip/tip",
    )
    _one_line_error(
        run_dynid("simulate", "double_pendulum", "-o", str(bag), cwd=tmp_path), "exists"
    )
    _one_line_error(run_dynid("simulate", "moon_lander", "-o", "x", cwd=tmp_path), "moon_lander")


def test_simulate_hovercraft_writes_a_bag_that_reads_back(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """Every registered scenario is one ``dynid simulate`` can run (the hovercraft, whose arrays
    are not a recording, was refused with an error about ``--set``)."""
    from dynid.data import BagLayout, read_bag
    from dynid.sim import read_truth as read_truth_file

    bag = tmp_path / "hov"
    result = run_dynid("simulate", "hovercraft", "-o", str(bag), "--set", "runs=2",
                        "--set", "duration_s=1.0", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    truth = read_truth_file(bag)
    assert truth["scenario"] == "hovercraft"
    dataset, summary = read_bag(bag, BagLayout.from_mapping(truth["layout"]))
    assert summary.problems() == 0
    assert len(dataset) == 2
    assert dataset[0].joint_names == ["x", "y", "heading"]
    assert dataset[0].num_samples == 11
    assert dataset[0].command_names == ["left", "right"]


def test_simulate_refuses_a_setting_the_scenario_does_not_take(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    _one_line_error(
        run_dynid("simulate", "hovercraft", "-o", str(tmp_path / "a"), "--set", "wings=2",
               cwd=tmp_path),
        "--set: scenario 'hovercraft' takes no setting 'wings' (settings: duration_s, runs,",
    )  # fmt: skip
    _one_line_error(
        run_dynid("simulate", "hovercraft", "-o", str(tmp_path / "b"), "--set", "runs=two",
               cwd=tmp_path),
        "--set: scenario 'hovercraft': runs: expected an integer, got 'two'",
    )  # fmt: skip
    assert not (tmp_path / "a").exists()


def test_bench_is_not_a_dynid_command(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The benchmarks are their own package (``scripts/bench``), not part of the core's CLI."""
    result = run_dynid("bench", "csvgd", cwd=tmp_path)
    assert result.returncode == 2
    assert "invalid choice: 'bench'" in result.stderr


def test_demo_with_tiny_settings(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    out = tmp_path / "demo"
    result = run_dynid("demo", "-o", str(out), "--particles", "2", "--iterations", "1",
                        "--hold", "0.1", "--no-progress", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "box/weight1_x" in result.stdout
    assert "up to swapping" in result.stdout
    for name in ("posterior.yaml", "particles.npz", "report.html", "panda_identified.urdf"):
        assert (out / name).is_file(), name
    assert "box_joint_x" in (out / "panda_identified.urdf").read_text()


def _demo_figures(stdout: str) -> dict[str, str]:
    """The demo's summary lines ``<text>: <value> ...`` keyed by their leading words."""
    keys = {"largest weight-position error": "weights", "centroid": "centroid",
            "truth inside the posterior": "inside"}  # fmt: skip
    out = {}
    for line in stdout.splitlines():
        for needle, key in keys.items():
            if needle in line:
                out[key] = line.rsplit(":", 1)[1].split()[0]
    return out


def test_demo_with_fast_settings_lands_the_weights(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """8 particles, 60 iterations (about a minute): the weights' centroid (the box's COM shift)
    within 1.5 cm, each weight position (up to swapping) within 5 cm, the truth inside the
    particles' 2-σ band. Measured: 0.3 cm, 3.4 cm. A wrong box model or likelihood leaves the
    particles at their spread over the limits (centroid error ~6 cm for this seed)."""
    out = tmp_path / "demo"
    result = run_dynid("demo", "-o", str(out), "--no-progress", "--particles", "8",
                        "--iterations", "60", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = _demo_figures(result.stdout)
    assert float(figures["centroid"]) < 0.015
    assert float(figures["weights"]) < 0.05
    assert figures["inside"] == "yes"


@pytest.mark.bench
def test_demo_identifies_the_weights(
    tmp_path: Path, run_dynid: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    """The demo's default settings (12 particles, 120 iterations): centroid within 1 cm, each
    weight (up to swapping) within 4 cm, truth inside the 2-σ band (measured 0.1 cm, 2.9 cm)."""
    out = tmp_path / "demo"
    result = run_dynid("demo", "-o", str(out), "--no-progress", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    figures = _demo_figures(result.stdout)
    assert float(figures["centroid"]) < 0.01
    assert float(figures["weights"]) < 0.04
    assert figures["inside"] == "yes"


def test_weights_error_is_invariant_to_swapping() -> None:
    truth = {"box/weight1_x": 0.1, "box/weight1_y": 0.02, "box/weight2_x": -0.1,
             "box/weight2_y": -0.02}  # fmt: skip
    swapped = np.array([[-0.1, -0.02, 0.1, 0.02]])
    names = list(truth)
    post = Posterior(particles=swapped, names=names, units=["m"] * 4)
    assert demo_weights_error(post, truth) == pytest.approx(0.0)
    post = Posterior(particles=swapped + 0.01, names=names, units=["m"] * 4)
    assert demo_weights_error(post, truth) == pytest.approx(0.01)


def test_weights_summary_removes_label_switching() -> None:
    """Particles in both mirrored modes: relabelled to the most likely particle's order, their
    mean is the truth (up to swapping) and the truth lies in the 2-σ band."""
    truth = {"box/weight1_x": 0.1, "box/weight1_y": 0.02, "box/weight2_x": -0.1,
             "box/weight2_y": -0.04}  # fmt: skip
    true = np.array(list(truth.values()))
    rng = np.random.default_rng(0)
    particles = true + 0.005 * rng.standard_normal((10, 4))
    particles[::2] = particles[::2][:, [2, 3, 0, 1]]  # half of them in the swapped mode
    log_lik = np.linspace(0.0, 1.0, 10)  # the most likely particle (last) is unswapped
    post = Posterior(particles=particles, names=list(truth), units=["m"] * 4,
                     log_likelihood=log_lik)  # fmt: skip
    summary = demo_weights_summary(post, truth)
    assert np.abs(summary.mean - true).max() < 0.01
    assert summary.std.max() < 0.01
    assert summary.inside is not None
    assert summary.inside.all()
    assert demo_weights_error(post, truth) == pytest.approx(summary.error)
    naive = particles.mean(0)  # mixing the modes puts both weights near the centroid
    assert np.abs(naive - true).max() > 0.05
    far = dict(truth, **{"box/weight1_x": 0.05})
    assert not demo_weights_summary(post, far).inside.all()


def test_centroid_error_ignores_how_the_weights_are_split() -> None:
    truth = {"box/weight1_x": 0.1, "box/weight1_y": 0.02, "box/weight2_x": -0.1,
             "box/weight2_y": -0.04}  # fmt: skip
    names = list(truth)
    # both weights at the true centroid (0, -0.01): positions wrong, COM shift right
    post = Posterior(particles=np.array([[0.0, -0.01, 0.0, -0.01]]), names=names, units=["m"] * 4)
    assert demo_centroid_error(post, truth) == pytest.approx(0.0)
    assert demo_weights_error(post, truth) == pytest.approx(0.1)
    post = Posterior(particles=np.array([[0.0, 0.01, 0.0, -0.01]]), names=names, units=["m"] * 4)
    assert demo_centroid_error(post, truth) == pytest.approx(0.01)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_writes_the_posterior_reached(tmp_path: Path, signame: str) -> None:
    """SIGINT, or SIGTERM (``timeout``, a container stop), after the first iterations: exit 130,
    posterior and report still written."""
    import signal
    import threading
    import time

    problem = write_pendulum_problem(tmp_path, steps=20)
    out = tmp_path / "out"
    budget = 100000  # far more iterations than the run gets before SIGINT
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dynid.cli",
            "fit",
            "--problem",
            str(problem),
            "-o",
            str(out),
            "--iterations",
            str(budget),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stderr.read(1), b"")))
    reader.start()
    deadline = time.monotonic() + 500
    while b"loss=" not in b"".join(chunks) and time.monotonic() < deadline:
        time.sleep(0.5)
    proc.send_signal(getattr(signal, signame))
    proc.wait(timeout=500)
    reader.join()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 130, b"".join(chunks).decode()
    summary = yaml.safe_load((out / "posterior.yaml").read_text())
    assert summary["meta"]["interrupted"] is True
    assert 1 <= summary["iteration"] < budget  # stopped by Ctrl-C, not by the budget
    assert (out / "report.html").is_file()
    assert b"Traceback" not in b"".join(chunks)


def test_failure_part_way_keeps_the_posterior_reached(tmp_path: Path) -> None:
    """A diverging simulation at iteration 3 ends the fit with the iteration-2 posterior."""
    from dynid.estimators.base import Estimator, StepInfo
    from dynid.estimators.registry import resolve_estimator
    from dynid.fit import Fit
    from dynid.model.errors import StateError
    from dynid.problem_file import load_problem

    class Diverging(Estimator):
        kind = "csvgd"

        def init(self, problem, warm_start=None) -> None:
            self.k = 0

        def step(self, iterations: int = 1) -> StepInfo:
            if self.k == 2:
                raise StateError("q has non-finite values for joints ['joint1']")
            self.k += 1
            return StepInfo(iteration=self.k, loss=1.0 / self.k, wall_s=0.0)

        def posterior(self) -> Posterior:
            return Posterior(particles=np.full((2, 2), 0.1 * self.k), names=list(TRUTH),
                             units=["", ""], iteration=self.k)  # fmt: skip

    problem, pf = load_problem(write_pendulum_problem(tmp_path, steps=5))
    fit = Fit(pf, problem, resolve_estimator("csvgd", pf.estimator))
    result = fit.run(estimator=Diverging(max_iterations=10))
    assert result.error is not None
    assert not result.interrupted
    assert "joint1" in result.error
    assert result.posterior.iteration == 2
    assert result.history.iterations == [1, 2]


def test_demo_printout_flags_particles_clamped_at_a_limit(capsys: pytest.CaptureFixture) -> None:
    """Particles that CSVGD reports at a limit (beyond it internally) are named in the printout:
    their zero spread there is the limit's, not an uncertainty."""
    from dynid.cli import _print_weights

    names = ["box/weight1_x", "box/weight1_y", "box/weight2_x", "box/weight2_y"]
    particles = np.random.default_rng(0).uniform(-0.1, 0.1, (6, 4))
    particles[:, 1] = 0.08
    post = Posterior(particles=particles, names=names, units=["m"] * 4,
                     meta={"clamped_particles": {"box/weight1_y": 6}})  # fmt: skip
    _print_weights(post, None)
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1
    assert "6 of 6 particles" in notes[0]
    assert "box/weight1_y" in notes[0]
