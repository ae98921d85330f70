"""The loop's test inputs, shared by the DDS test (tests/ros/test_exciter_loop.py) and the
launch test of panda_sim.launch.py: a payload, a short excitation in ``trajectory.csv`` layout,
and the payload problem with a held-out recording of that payload."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from dynid.excite import FourierMotion
from dynid.excite.output import csv_header
from dynid.sim.mujoco import panda_payload

ROOT = Path(__file__).resolve().parents[2]
JOINTS = [f"panda_joint{k}" for k in range(1, 8)]
MASS = 0.85  # kg, on panda_link8 (the flange)
COM = [0.025, -0.015, 0.07]  # m, flange frame
INERTIA = [2e-3, 2.5e-3, 1.5e-3, 0.0, 0.0, 0.0]  # ixx iyy izz ixy ixz iyz about the COM


def write_motion(path: Path, seed: int, duration: float, amplitude: float) -> Path:
    """A seeded rest-to-rest Fourier motion from the Panda's home pose, written as ``dynid
    excite``'s ``trajectory.csv`` at 1 kHz."""
    rng = np.random.default_rng(seed)
    motion = FourierMotion(np.array(panda_payload.HOME), duration, 2, 1.0 / duration, 0.5)
    coefficients = rng.uniform(-amplitude, amplitude, motion.num_coefficients)
    t, q, v, a, _ = motion.sample(coefficients, 1000.0)
    with path.open("w") as fh:
        fh.write(",".join(csv_header(JOINTS)) + "\n")
        np.savetxt(fh, np.column_stack([t, q, v, a]), delimiter=",", fmt="%.10g")
    return path


def problem_with_heldout(
    folder: Path, name: str, mass: float = MASS, com: list[float] = COM
) -> Path:
    """panda_payload.yaml with ``lm`` and a held-out recording of the payload ``mass`` (kg) at
    ``com`` (m, flange), written to ``folder / name``."""
    heldout = folder / "heldout"
    inertia = np.diag(INERTIA[:3])
    panda_payload.simulate(7, heldout, duration=3.0, payload_mass=mass, payload_com=com,
                           payload_inertia=inertia, torque_offset=0.0)  # fmt: skip
    config = yaml.safe_load((ROOT / "config" / "problems" / "panda_payload.yaml").read_text())
    config["validation"] = {"bags": [str(heldout)]}
    config["estimator"] = {"name": "lm", "settings": {"max_iterations": 20}}
    path = folder / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
