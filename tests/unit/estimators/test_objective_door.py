"""The estimators score parameters through ``problem.objective`` only.

None reads the problem's dynamics, control or observation models, its raw trajectories or
their per-trajectory conversions: what they need
(residuals, Jacobians, likelihoods, transitions, the data as tensors, the coordinates) comes from
the objective.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ESTIMATORS = Path(__file__).resolve().parents[3] / "packages" / "dynid" / "dynid" / "estimators"
BEHIND_THE_OBJECTIVE = re.compile(
    r"\bproblem\.(dynamics|control|observe|dataset|targets|controls|states|initial_state|tensor)\b"
)


@pytest.mark.parametrize(
    "path",
    sorted(ESTIMATORS.rglob("*.py")),
    ids=lambda p: str(p.relative_to(ESTIMATORS)),
)
def test_estimator_reads_the_problem_through_its_objective(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in BEHIND_THE_OBJECTIVE.finditer(text)})
    assert not found, f"{path.name} reads {found}; take them from problem.objective"
