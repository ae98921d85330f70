"""The demo problem (``dynid demo``, the Panda box benchmark) and its summaries.

The Panda shakes a box holding two 500 g weights (csvgd V-C); the weights' positions are
identified. The problem is embedded (:data:`DEMO_PROBLEM`) so that the demo needs no file; the
weights are interchangeable, so their summaries remove the label switching first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynid.posterior import Posterior, match_labels

__all__ = [
    "DEMO_PROBLEM",
    "WeightSummary",
    "demo_centroid_error",
    "demo_parameter_names",
    "demo_weights_error",
    "demo_weights_summary",
]

#: The demo's excitation (joint, offset rad), at 30 % of the joint limits: larger and faster than
#: the paper's two 0.1 rad moves at 10 % (App. II-E), so that the box swings ~0.5 rad about both
#: axes and its inertia, not only its COM, shapes the motion.
_DEMO_MOVES = (("panda_joint6", 0.3), ("panda_joint7", -0.6), ("panda_joint5", 0.3),
               ("panda_joint6", -0.3))  # fmt: skip

DEMO_PROBLEM: dict[str, Any] = {
    "name": "panda_box_demo",
    "description": "Panda shaking a box with two 500 g weights (csvgd V-C); identify the weights.",
    "robot": {"name": "panda"},
    "attachments": [
        {
            "type": "universal_box",
            "flange_frame": "panda_link8",
            "box_mass": 0.92,
            "size": [0.3, 0.18, 0.3],
            "weights": 2,
            "weight_mass": 0.5,
            "damping": [0.06, 0.04],
            "name": "box",
        }
    ],
    "parameters": [
        {"name": "box/weight1_x", "lower": -0.14, "upper": 0.14, "unit": "m"},
        {"name": "box/weight1_y", "lower": -0.08, "upper": 0.08, "unit": "m"},
        {"name": "box/weight2_x", "lower": -0.14, "upper": 0.14, "unit": "m"},
        {"name": "box/weight2_y", "lower": -0.08, "upper": 0.08, "unit": "m"},
    ],
    "data": {
        "source": "scenario",
        "scenario": "panda_box",
        "settings": {
            "settle": 3.0,
            "settle_damping": 3.0,
            "moves": [list(move) for move in _DEMO_MOVES],
            "velocity_scaling": 0.3,
        },
        "passive_joints": {"joints": ["box_joint_x", "box_joint_y"], "frame": "box", "body": "box"},
        "lowpass_hz": 8.0,
    },
    "control": {"type": "prescribed", "actuated": [f"panda_joint{i}" for i in range(1, 8)]},
    "observe": {"joints": "none", "frame_points": [{"frame": "box", "body": "box"}]},
    "likelihood": {"obs_std": 0.003, "shooting": "multiple", "windows": 50},
    "simulation": {"substeps": 1},
    "estimator": {
        "name": "csvgd",
        "settings": {"num_particles": 12, "max_iterations": 120, "learning_rate": 0.2},
    },
}
"""The demo's problem (embedded, so ``dynid demo`` needs no file); ``config/problems/
panda_box.yaml`` describes the same model for recorded bags. Deviations from the paper's
experiment (csvgd V-C): the arm's recorded motion is prescribed instead of simulating its PD loop
(:class:`dynid.model.integrate.PrescribedMotion`), the excitation is stronger
(``_DEMO_MOVES``), the box starts at rest (``settle_damping``), and ``obs_std`` is the mocap
noise at the box's points 1 m out (~3 mm from 3 mrad) instead of 1 cm."""

_DEMO_WEIGHTS = (("box/weight1_x", "box/weight1_y"), ("box/weight2_x", "box/weight2_y"))


@dataclass
class WeightSummary:
    """The demo's weight positions: particles relabelled, truth matched up to swapping.

    Attributes:
        names: the four coordinates ``box/weight1_x, box/weight1_y, box/weight2_x, box/weight2_y``.
        particles: ``[n, 4]`` finite-weight particles (m), each particle's two weights ordered
            like those of the pivot particle (its highest log-likelihood one, else the first).
        mean, std: ``[4]`` mean and standard deviation of ``particles`` (m).
        truth: ``[4]`` true coordinates (m) in the order (direct or swapped) closest to ``mean``,
            or ``None``.
        error: largest ``|mean − truth|`` (m), or ``None``.
        inside: per coordinate, ``|mean − truth| ≤ 2 std`` (the truth lies in the particles'
            2-σ band), or ``None``.
    """

    names: list[str]
    particles: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    truth: np.ndarray | None
    error: float | None
    inside: np.ndarray | None


def demo_weights_summary(
    posterior: Posterior, truth: Mapping[str, float] | None = None
) -> WeightSummary:
    """Mean ± std of the weight positions with the label switching of the two weights removed.

    The two weights are interchangeable (csvgd App. II-E), so the posterior has two mirrored
    modes and a plain particle mean mixes them: the particles are relabelled first
    (:meth:`dynid.posterior.Posterior.relabelled`), and the truth is compared in its ordering
    closest to the resulting mean.
    """
    names = [n for pair in _DEMO_WEIGHTS for n in pair]
    relabelled = posterior.relabelled(_DEMO_WEIGHTS)
    alive = np.isfinite(relabelled.log_weights)
    x = relabelled.particles[alive][:, [relabelled.names.index(n) for n in names]]
    mean, std = x.mean(0), x.std(0)
    if truth is None:
        return WeightSummary(names, x, mean, std, None, None, None)
    true = match_labels(np.array([truth[n] for n in names]), mean, [[0, 1], [2, 3]])
    error = float(np.abs(mean - true).max())
    return WeightSummary(names, x, mean, std, true, error, np.abs(mean - true) <= 2.0 * std)


def demo_weights_error(posterior: Posterior, truth: Mapping[str, float]) -> float:
    """Largest error (m) of the mean weight positions, up to swapping the two weights (the mean
    of the relabelled particles of :func:`demo_weights_summary`)."""
    error = demo_weights_summary(posterior, truth).error
    assert error is not None
    return error


def demo_centroid_error(posterior: Posterior, truth: Mapping[str, float]) -> float:
    """Error (m) of the weights' mean position (x, y): the box's COM shift, which the swinging
    box pins down even where the two positions themselves form symmetric modes."""
    mean = posterior.as_dict()
    true = np.mean([[truth[x], truth[y]] for x, y in _DEMO_WEIGHTS], axis=0)
    est = np.mean([[mean[x], mean[y]] for x, y in _DEMO_WEIGHTS], axis=0)
    return float(np.abs(est - true).max())


def demo_parameter_names() -> list[str]:
    """The demo's free parameters (the four weight coordinates)."""
    return [p["name"] for p in DEMO_PROBLEM["parameters"]]
