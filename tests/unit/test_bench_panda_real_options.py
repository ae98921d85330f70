"""The ``panda_real`` benchmark's ``--cutoffs`` option: a comma list of cut-offs > 0 Hz."""

from __future__ import annotations

import argparse

import pytest

from dynid.benchmarks import panda_real


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dynid bench panda_real")
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
