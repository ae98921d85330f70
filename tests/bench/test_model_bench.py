"""Smoke run of the ``model`` benchmark with small sizes."""

from __future__ import annotations

import argparse

import pytest

from dynid_bench import model


@pytest.mark.bench
def test_model_benchmark_quick(tmp_path) -> None:
    args = argparse.Namespace(
        sizes=[1, 8],
        repeats=2,
        rollout_steps=6,
        rollout_particles=2,
        checkpoint_every=3,
        threads=1,
        pinocchio_max_n=8,
        quick=True,
        device="cpu",
        out_dir=str(tmp_path),
    )
    records = model.run(args)
    found = {(r.case, r.metric): r.value for r in records}
    for n in (1, 8):
        for backend in ("torch", "torch_eager", "torch_aba", "pinocchio"):
            case = f"panda_box/N={n}/{backend}"
            for metric in ("forward_step", "forward_backward_step"):
                assert 0 < found[(case, f"{metric}_min_ms")] <= found[(case, f"{metric}_ms")]
        bare = found[(f"panda_box/N={n}/abaInParallel", "forward_step_ms")]
        assert bare > 0
        ratio = found[(f"panda_box/N={n}/torch", "forward_step_over_aba_in_parallel")]
        assert ratio == pytest.approx(found[(f"panda_box/N={n}/torch", "forward_step_ms")] / bare)
    for quantity in ("rnea", "mass_matrix", "forward_dynamics", "frame_kinematics"):
        assert found[(f"panda_box/{quantity}", "max_abs_err_vs_pinocchio")] < 1e-9
    assert found[("panda_box/dqdd_dparams", "max_abs_err_vs_pinocchio")] < 1e-8
    rollout = "panda_box/rollout/T=6/N=2/cpu"
    ratio = found[(rollout, "backward_over_forward")]
    assert 0 < ratio == pytest.approx(found[(rollout, "forward_backward_over_forward")] - 1.0)
