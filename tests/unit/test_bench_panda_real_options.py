"""The ``panda_real`` benchmark's options: ``--cutoffs``, a comma list of cut-offs > 0 Hz, and
``--twin-seeds``, the twin realisations pooled into its records."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from dynid.data.trajectory import Trajectory
from dynid.sim.panda_payload import fourier_trajectory
from dynid_bench import panda_real


def _motion(t0: float = 12.5) -> Trajectory:
    """6.7 s at 1 kHz of a Fourier excitation, its clock starting at ``t0`` s."""
    rng = np.random.default_rng(7)
    t = np.arange(6701) / 1000.0
    q, v, _ = fourier_trajectory(t, rng.normal(size=7), *rng.normal(scale=0.3, size=(2, 7, 5)))
    return Trajectory(t=t + t0, q=q, joint_names=list(panda_real.JOINTS), dq=v,
                      effort=np.zeros_like(q))  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/bench panda_real")
    panda_real.add_arguments(parser)
    return parser


def test_cutoffs_parse_to_hz_and_default_to_no_sweep() -> None:
    parser = _parser()
    assert parser.parse_args([]).cutoffs == ()
    assert parser.parse_args(["--cutoffs", ""]).cutoffs == ()
    assert parser.parse_args(["--cutoffs", "2, 3.5,10,"]).cutoffs == (2.0, 3.5, 10.0)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("2,0,5", "cut-offs must be finite and > 0 Hz, got 0"),
        ("-3", "cut-offs must be finite and > 0 Hz, got -3"),
        ("nan,inf", "got nan, inf"),
        ("2;3", "not a comma list of numbers (Hz): '2;3'"),
    ],
)
def test_a_bad_cutoff_is_refused_naming_the_option_and_the_value(
    text: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args([f"--cutoffs={text}"])
    err = capsys.readouterr().err
    assert "argument --cutoffs:" in err, err
    assert says in err, err


def test_twin_seeds_default_to_twenty_and_refuse_less_than_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _parser().parse_args([]).twin_seeds == 20
    with pytest.raises(SystemExit):
        _parser().parse_args(["--twin-seeds", "0"])
    assert "argument --twin-seeds: must be ≥ 1, got 0" in capsys.readouterr().err


def test_the_twin_pools_its_realisations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors and coverage pooled over the realisations drawn with seeds ``seed``, ``seed + 1``…"""
    draws = {
        3: (np.array([0.01, 0.02, 0.03]), np.array([True, False])),
        4: (np.array([0.05]), np.array([True, True])),
    }
    seen = []

    def realisation(
        pf, truth, values, seed: int, noise, series, duration
    ) -> tuple[np.ndarray, ...]:
        seen.append(seed)
        return draws[seed]

    monkeypatch.setattr(panda_real, "_twin_realisation", realisation)
    args = argparse.Namespace(seed=3, quick=False, twin_seeds=2)
    value = {r.metric: r for r in panda_real._twin(args, np.full(7, 0.1), _motion())}
    assert seen == [3, 4]
    assert value["base_rel_err"].value == pytest.approx(0.025)  # median of 0.01, 0.02, 0.03, 0.05
    assert value["coverage_95"].value == pytest.approx(0.75)
    assert "per twin 0.02–0.05" in value["base_rel_err"].notes


def test_figaroh_rows_are_skipped_in_one_line_without_its_environment(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is installed at run time: without ``build/figaroh-venv`` the FIGAROH rows are left
    out, and the line printed names the setup command that installs FIGAROH."""
    python = tmp_path / "figaroh-venv" / "bin" / "python"
    monkeypatch.setattr(panda_real, "FIGAROH_PYTHON", python)
    methods = ["nominal", "figaroh", "consistent_lsq", "figaroh_physical"]
    assert panda_real.runnable_methods(methods) == ["nominal", "consistent_lsq"]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert "skipping figaroh, figaroh_physical" in lines[0]
    assert "scripts/setup --figaroh" in lines[0]
    assert not python.exists()
    assert panda_real.runnable_methods(["nominal"]) == ["nominal"]  # nothing to skip, no line
    assert capsys.readouterr().out == ""
    python.parent.mkdir(parents=True)
    python.touch()
    assert panda_real.runnable_methods(methods) == methods
