"""What runs the loop on robot_sim outside a launch file: the ``loop`` benchmark and the ROS tests
share it.

- :func:`write_motion`: a seeded rest-to-rest Fourier motion from the Panda's home pose, written
  as ``dynid excite``'s ``trajectory.csv``;
- :func:`interfaces_env`: an environment in which the robot interface packages the loop speaks
  (``control_msgs``, ``franka_msgs``, ``tf2_msgs``, ``ur_msgs``) import: the real ones where
  installed, else the stand-ins under ``tests/ros/interfaces`` (the real definitions, field for
  field, so the wire types match a real robot's), built with colcon into one overlay;
- :func:`executable`: a dynid_ros console script of the colcon workspace.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dynid.excite import FourierMotion
from dynid.excite.output import write_trajectory_csv
from dynid.resources import repo_root
from dynid.sim.mujoco import panda_payload

__all__ = ["JOINTS", "STAND_INS", "executable", "interfaces_env", "write_motion"]

JOINTS = [f"panda_joint{k}" for k in range(1, 8)]
"""The Panda's joints, in the problem's order."""

STAND_INS = ("control_msgs", "franka_msgs", "tf2_msgs", "ur_msgs")
"""Interface packages with a stand-in under ``tests/ros/interfaces``."""


def write_motion(path: Path, seed: int, duration: float, amplitude: float) -> Path:
    """A seeded rest-to-rest Fourier motion of ``duration`` s (2 harmonics, coefficients uniform
    in ±``amplitude``) from the Panda's home pose, written to ``path`` as ``dynid excite``'s
    ``trajectory.csv`` at 1 kHz; returns ``path``."""
    rng = np.random.default_rng(seed)
    motion = FourierMotion(np.array(panda_payload.HOME), duration, 2, 1.0 / duration, 0.5)
    coefficients = rng.uniform(-amplitude, amplitude, motion.num_coefficients)
    t, q, v, a, _ = motion.sample(coefficients, 1000.0)
    write_trajectory_csv(path, JOINTS, t, q, v, a)
    return path


def executable(name: str) -> str:
    """Path of the dynid_ros console script ``name`` installed by ``colcon build``.

    Raises:
        FileNotFoundError: it is not built (``scripts/setup`` builds it).
    """
    path = repo_root() / "ros2_ws" / "install" / "dynid_ros" / "lib" / "dynid_ros" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"{path}: not built or not executable; run scripts/setup")
    return str(path)


def interfaces_env() -> dict[str, str]:
    """An environment for child processes in which every package of :data:`STAND_INS` imports.

    Each one that is not importable here is taken from ``tests/ros/interfaces/<package>``; all
    of those are built with colcon into one overlay, ``build/ros_test_interfaces/<digest>`` of
    the checkout, once per content, and the environment is this process's with that overlay
    sourced. Where every real package is importable it is this process's own.

    Raises:
        RuntimeError: the colcon build failed (its output's tail in the message).
    """
    env = dict(os.environ)
    missing = [name for name in STAND_INS if importlib.util.find_spec(name) is None]
    if not missing:
        return env
    interfaces = repo_root() / "tests" / "ros" / "interfaces"
    sources = sorted(p for name in missing for p in (interfaces / name).rglob("*") if p.is_file())
    digest = hashlib.sha256(
        b"".join(str(p.relative_to(interfaces)).encode() + p.read_bytes() for p in sources)
    ).hexdigest()[:12]
    base = repo_root() / "build" / "ros_test_interfaces" / digest
    setup = base / "install" / "local_setup.bash"
    if not setup.is_file():
        venv = os.environ.get("VIRTUAL_ENV", sys.prefix)
        done = subprocess.run(
            ["colcon", "--log-base", str(base / "log"), "build", "--base-paths", str(interfaces),
             "--packages-select", *missing,
             "--build-base", str(base / "build"), "--install-base", str(base / "install"),
             "--event-handlers", "console_cohesion-", "--cmake-args",
             f"-DPython3_EXECUTABLE={sys.executable}", f"-DCMAKE_PREFIX_PATH={venv}",
             "-DBUILD_TESTING=OFF"],
            capture_output=True, text=True, timeout=1800, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"building the interface stand-ins {missing} failed:\n{done.stdout[-3000:]}"
            )
    dump = subprocess.run(
        ["bash", "-c", f"source {setup} && env -0"],
        capture_output=True, timeout=60, check=True, env=env,
    )  # fmt: skip
    pairs = (item.split("=", 1) for item in dump.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)
