"""Scenarios simulated by MuJoCo (``dynid simulate <scenario> --engine mujoco``).

Each scenario module offers ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)``
like those of :mod:`dynid.sim` and writes the same topics and truth file; the robot is compiled
from its URDF and simulated by MuJoCo (:mod:`dynid.sim.mujoco.engine`), never by dynid's model.
The ``mujoco`` package is imported only when a scenario runs.
"""
