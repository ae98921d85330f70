"""ament_python package installing dynid's launch files and configuration.

The files live at the repository top level (``launch/`` and ``config/``) so that they are
found the same way from a source checkout and from an installed workspace.
"""

import os
from pathlib import Path

from setuptools import setup

PACKAGE = "dynid_bringup"
HERE = Path(__file__).resolve().parent
TOP = HERE.parent.parent  # packages/dynid_bringup -> repository root


def _files(folder: str, pattern: str) -> list[str]:
    """Files below the repository's ``folder`` matching ``pattern``, relative to this package."""
    return sorted(os.path.relpath(p, HERE) for p in (TOP / folder).glob(pattern))


def _tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries installing ``folder`` with its sub-folders under share/<package>."""
    entries = []
    for sub in sorted({p.parent for p in (TOP / folder).rglob("*") if p.is_file()}):
        rel = sub.relative_to(TOP)
        files = sorted(os.path.relpath(p, HERE) for p in sub.iterdir() if p.is_file())
        entries.append((f"share/{PACKAGE}/{rel}", files))
    return entries


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", _files("launch", "*.launch.py")),
        *_tree("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="dynid developers",
    maintainer_email="dynid@users.noreply.github.com",
    description="Launch files, parameter YAML and RViz configuration for dynid",
    license="Apache-2.0",
)
