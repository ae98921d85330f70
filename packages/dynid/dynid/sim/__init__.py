"""Synthetic scenarios: deterministic simulated recordings with known parameters.

Each scenario module has ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)`` and a
``LAYOUT`` (``BagLayout``) that reads its bags; ``SCENARIOS`` maps names to ``simulate``.
"""

from collections.abc import Callable
from typing import Any

from dynid.sim import double_pendulum, furuta, omx_payload, panda_box, panda_payload
from dynid.sim.common import SimulationError, read_truth, truth_path, write_truth

SCENARIOS: dict[str, Callable[..., Any]] = {
    "double_pendulum": double_pendulum.simulate,
    "panda_box": panda_box.simulate,
    "omx_payload": omx_payload.simulate,
    "furuta": furuta.simulate,
    "panda_payload": panda_payload.simulate,
}

__all__ = [
    "SCENARIOS",
    "SimulationError",
    "double_pendulum",
    "furuta",
    "omx_payload",
    "panda_box",
    "panda_payload",
    "read_truth",
    "truth_path",
    "write_truth",
]
