"""Rewrite the foreign include directories baked into the ROS 2 message wheels' CMake exports.

The PyPI wheels of ROS 2 message packages were built in a manylinux container; their exported
CMake targets name that container's Python and NumPy include directories
(``/opt/python/cp311-cp311/include/python3.11`` and ``.../numpy/_core/include``). CMake refuses
to configure a package that depends on such a target (e.g. ``dynid_msgs`` on ``std_msgs``).
This script replaces them, inside the given prefix only, with this interpreter's directories.
It is idempotent: a second run finds nothing to change.

Usage: python repair_ros_wheels.py <prefix>   (the virtual environment)
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

import numpy as np

_FOREIGN_NUMPY = re.compile(
    r"/opt/python/cp\d+-cp\d+/lib/python3\.\d+/site-packages/numpy/_core/include"
)
_FOREIGN_PYTHON = re.compile(r"/opt/python/cp\d+-cp\d+/include/python3\.\d+")


def repair(prefix: Path) -> list[Path]:
    """Rewrite every ``*.cmake`` file below ``prefix/share``; return the files changed."""
    python_inc = sysconfig.get_paths()["include"]
    numpy_inc = np.get_include()
    changed = []
    for path in sorted((prefix / "share").glob("*/cmake/*.cmake")):
        text = path.read_text()
        if "/opt/python/" not in text:
            continue
        new = _FOREIGN_PYTHON.sub(python_inc, _FOREIGN_NUMPY.sub(numpy_inc, text))
        if new != text:
            tmp = path.with_suffix(".cmake.tmp")
            tmp.write_text(new)
            tmp.replace(path)
            changed.append(path)
    return changed


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    changed = repair(Path(sys.argv[1]))
    print(f"repaired include paths in {len(changed)} CMake export file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
