"""ament_python package installing dynid's launch files, configuration and the launch helper
module ``dynid_bringup.robot_launch``.

The files live at the repository top level (``launch/`` and ``config/``), shared with the
core's tools; ``launch`` and ``config`` in this package are symlinks to them, so colcon (with or
without ``--symlink-install``) and a source checkout see the same files.
"""

from pathlib import Path

from setuptools import setup

PACKAGE = "dynid_bringup"
HERE = Path(__file__).resolve().parent


def _tree(folder: str, pattern: str = "*") -> list[tuple[str, list[str]]]:
    """data_files entries installing ``folder`` (and sub-folders) under share/<package>."""
    files = sorted(p for p in (HERE / folder).rglob(pattern) if p.is_file())
    by_dir: dict[Path, list[str]] = {}
    for path in files:
        rel = path.relative_to(HERE)
        by_dir.setdefault(rel.parent, []).append(str(rel))
    return [(f"share/{PACKAGE}/{d}", names) for d, names in sorted(by_dir.items())]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=[PACKAGE],
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *_tree("launch", "*.launch.py"),
        *_tree("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="dynid developers",
    maintainer_email="dynid@users.noreply.github.com",
    description="Launch files, parameter YAML and RViz configuration for dynid",
    license="Apache-2.0",
)
