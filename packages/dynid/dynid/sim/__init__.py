"""Synthetic scenarios: deterministic simulated recordings with known parameters.

Each scenario is a function ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)``
(:mod:`dynid.sim.common`) registered as an entry point of group ``dynid.scenarios``
(:mod:`dynid.plugins`); problem files (``data.source: scenario``) and ``dynid simulate`` find
them there by name. Each scenario module also has a ``LAYOUT`` (``BagLayout``) that reads its
bags.
"""

from dynid.sim.common import SimulationError, read_truth, truth_path, write_truth

__all__ = ["SimulationError", "read_truth", "truth_path", "write_truth"]
