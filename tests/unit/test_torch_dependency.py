"""dynid's hold on torch: torch's internals are used in one module only."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "packages" / "dynid" / "dynid"


_PRIVATE = re.compile(r"torch(\.\w+)*\._\w|\._schema\b|\._version\b|_python_dispatch")


def test_torch_internals_are_used_only_by_the_operator_replay():
    users = {
        str(path.relative_to(CORE))
        for path in CORE.rglob("*.py")
        if _PRIVATE.search(path.read_text(encoding="utf-8"))
    }
    assert users == {"model/op_replay.py"}
