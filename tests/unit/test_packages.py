"""The ROS 2 package manifests validate and agree with the layout of the repository."""

from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["dynid_msgs", "dynid_ros", "dynid_bringup"]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_xml_validates(name: str) -> None:
    pkg = parse_package(ROOT / "packages" / name / "package.xml")
    pkg.validate()  # raises InvalidPackage with the reason
    assert pkg.name == name
    assert pkg.package_format == 3
    build_type = pkg.get_build_type()
    assert build_type == ("ament_cmake" if name == "dynid_msgs" else "ament_python")


def test_dependency_direction() -> None:
    """dynid_bringup -> dynid_ros -> dynid_msgs, never the other way."""
    deps = {
        name: {d.name for d in parse_package(ROOT / "packages" / name / "package.xml").exec_depends}
        for name in PACKAGES
    }
    assert "dynid_msgs" in deps["dynid_ros"]
    assert "dynid_ros" in deps["dynid_bringup"]
    assert not deps["dynid_msgs"] & {"dynid_ros", "dynid_bringup"}
    assert "dynid_bringup" not in deps["dynid_ros"]


@pytest.mark.parametrize("name", PACKAGES)
def test_workspace_links_to_package(name: str) -> None:
    link = ROOT / "ros2_ws" / "src" / name
    assert link.is_symlink()
    assert link.resolve() == (ROOT / "packages" / name).resolve()


def test_ament_python_resource_markers() -> None:
    for name in ("dynid_ros", "dynid_bringup"):
        assert (ROOT / "packages" / name / "resource" / name).is_file()


def test_messages_declared_in_cmake() -> None:
    cmake = (ROOT / "packages" / "dynid_msgs" / "CMakeLists.txt").read_text()
    msgs = sorted(p.name for p in (ROOT / "packages" / "dynid_msgs" / "msg").glob("*.msg"))
    assert msgs == sorted(
        ["EstimatorStatus.msg", "ParameterEstimate.msg", "ParticleSet.msg", "TrajectorySegment.msg"]
    )
    for msg in msgs:
        assert f'"msg/{msg}"' in cmake


def test_core_never_imports_ros() -> None:
    core = ROOT / "packages" / "dynid" / "dynid"
    offenders = [
        str(p.relative_to(ROOT))
        for p in core.rglob("*.py")
        if any(
            line.lstrip().startswith(
                (
                    "import rclpy",
                    "from rclpy",
                    "import dynid_msgs",
                    "from dynid_msgs",
                    "import dynid_ros",
                    "from dynid_ros",
                )
            )
            for line in p.read_text().splitlines()
        )
    ]
    assert offenders == []
