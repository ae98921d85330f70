"""The STEADY benchmark's model diagnostic: predicted disturbance std and mean-acceleration
error of a model against the true hovercraft, on the test runs' true states; its helpers
(particle sweep, std scan, restarts)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dynid.estimators.steady.em import transition_loss
from dynid.sim import hovercraft as hov
from dynid_bench import steady


def _by_metric(model: hov.HovercraftDynamics) -> dict[str, float]:
    test = hov.simulate(3, 2)
    return {r.metric: r.value for r in steady.acceleration_errors(model, test)}


def test_the_true_model_has_no_mean_error_and_its_own_std() -> None:
    by = _by_metric(hov.HovercraftDynamics())
    for c, (name, _) in enumerate(steady.COMPONENTS):
        assert by[f"accel_mean_err_{name}"] == pytest.approx(0.0, abs=1e-7)
        assert by[f"accel_std_{name}"] == pytest.approx(hov.TRUE_STD[c])


def test_hand_is_off_by_the_drag_and_reports_its_wider_std() -> None:
    test = hov.simulate(3, 2)
    by = {r.metric: r.value for r in steady.acceleration_errors(hov.HovercraftDynamics(
        drag=False, std=hov.HAND_STD), test)}  # fmt: skip
    # the angular drag alone: α misses c_ω ω / m_r
    omega = test.states[:, :-1, 5].ravel()
    expected = np.sqrt(np.mean((0.07 * omega / 1.5) ** 2))
    assert by["accel_mean_err_theta"] == pytest.approx(expected, rel=1e-4)
    assert by["accel_mean_err_x"] > 0.0
    assert [by[f"accel_std_{name}"] for name, _ in steady.COMPONENTS] == pytest.approx(hov.HAND_STD)


def _noise_gradient(
    sample_std: tuple[float, float, float], start: float | None = None
) -> np.ndarray:
    """The M-step gradient on the noise-only model's log std (started at ``start``, default the
    true std) from transitions of the true states drawn with ``sample_std``."""
    gen = torch.Generator().manual_seed(5)
    runs = hov.simulate(4, 4)
    x = torch.as_tensor(runs.states[:, :-1], dtype=torch.float32).reshape(-1, 6)
    u = torch.as_tensor(runs.controls, dtype=torch.float32).reshape(-1, 2)
    x = x.repeat(50, 1)
    u = u.repeat(50, 1)
    drawn = hov.HovercraftDynamics(std=sample_std).sample(x, u, hov.DT, gen)
    model = steady._LearnedNoise(start)
    transition_loss(model, torch.stack([x, drawn], dim=1), u.unsqueeze(1), hov.DT).backward()
    return model.log_std.grad.numpy()


def test_the_noise_only_model_has_the_true_std_as_its_fixed_point() -> None:
    # transitions drawn with the model's own std: no pull (mean-zero gradient, 20,000 draws)
    assert np.abs(_noise_gradient(hov.TRUE_STD)).max() < 0.03
    # drawn with twice the std: the loss falls as the std grows (E[z²] = 4, d/dlog σ = 1 − 4)
    assert _noise_gradient(tuple(2 * s for s in hov.TRUE_STD)) == pytest.approx([-3.0] * 3, abs=0.1)
    # started at 1 in every component, transitions at the true std: d/dlog σ = 1 − (σ_true / 1)²
    expected = [1.0 - s**2 for s in hov.TRUE_STD]
    assert _noise_gradient(hov.TRUE_STD, start=1.0) == pytest.approx(expected, abs=0.01)


def _quick_args(*options: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    steady.add_arguments(parser)
    args = parser.parse_args(["--particles", "100", *options])
    args.quick = True
    return args


def test_the_particle_sweep_starts_every_run_from_its_seeds_weights() -> None:
    def learned(args: argparse.Namespace) -> dict[tuple[str, str], float]:
        return {(r.case, r.metric): r.value for r in steady.particle_sweep(args)
                if r.metric != "wall_s_to_best"}  # fmt: skip

    args = _quick_args("--sweep", "50")
    first = learned(args)
    torch.rand(7)  # the global generator moves on between the runs
    assert learned(args) == first
    assert learned(_quick_args("--sweep", "50", "--seed", "1")) != first


def test_the_std_scan_scores_the_true_std_above_a_tenfold_one() -> None:
    by = {(r.case, r.metric): r.value for r in steady.std_scan(_quick_args("--std-scan", "1,10"))}
    assert set(by) == {(f"hov/true_std_scale/x{f}", f"valid_log_likelihood_{rate}")
                       for f in (1, 10) for rate in ("1hz", "10hz")}  # fmt: skip
    assert (
        by[("hov/true_std_scale/x1", "valid_log_likelihood_1hz")]
        > by[("hov/true_std_scale/x10", "valid_log_likelihood_1hz")]
    )


def test_steady_restarts_draw_their_own_weights_and_leave_the_global_generator() -> None:
    def train() -> SimpleNamespace:  # stands in for a STEADY run: one draw of initial weights
        return SimpleNamespace(weights=torch.rand(3), best_log_likelihood=0.0)

    args = _quick_args("--seed", "3")
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = steady.steady_restart(1, args, train).weights
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(steady.steady_restart(1, args, train).weights, first)
    assert not torch.equal(steady.steady_restart(2, args, train).weights, first)
    steady.steady_restart(0, args, train)  # restart 0 draws where the benchmark's order left it
    assert not torch.equal(torch.get_rng_state(), state)


def test_each_networks_weight_decay_has_its_own_options_and_the_notes_name_them() -> None:
    args = _quick_args()
    assert (args.weight_decay, args.decoupled_decay) == (1e-3, True)
    assert (args.supervised_weight_decay, args.supervised_decoupled_decay) == (1e-3, True)
    assert (args.robot_weight_decay, args.robot_decoupled_decay) == (1e-4, False)
    note = steady._em_note(args)
    assert "weight matrices decayed by 0.001 per step" in note
    assert note.endswith("supervised fits: weight matrices decayed by 0.001 per step")
    args = _quick_args("--no-decoupled-decay", "--weight-decay", "1e-4",
                       "--no-supervised-decoupled-decay", "--robot-decoupled-decay")  # fmt: skip
    assert (args.weight_decay, args.decoupled_decay) == (1e-4, False)
    assert not args.supervised_decoupled_decay
    assert args.robot_decoupled_decay
    assert "Adam weight decay 0.0001" in steady._em_note(args)
    assert steady._em_note(args).endswith("supervised fits: Adam weight decay 0.001")
