"""Where dynid finds the real recordings used by benchmarks and some tests.

The recordings are not part of the package. They are looked up in ``$DYNID_DATA_DIR`` if set,
otherwise in ``shared/data`` beside the repository checkout (``<repo>/../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[3]


def repo_root() -> Path:
    """The repository root of a source checkout (``packages/dynid/dynid/..`` × 3)."""
    return _REPO_ROOT


def shared_data_dir() -> Path:
    """Directory holding the real recordings (``ibm-double-pendulum/``, ``planar-dice/``, ...).

    Raises:
        FileNotFoundError: naming the directories that were tried and how to point elsewhere.
    """
    env = os.environ.get("DYNID_DATA_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(_REPO_ROOT.parent / "shared" / "data")
    for path in candidates:
        if path.is_dir():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(
        f"real recordings not found (tried {tried}); set DYNID_DATA_DIR to the data directory"
    )
