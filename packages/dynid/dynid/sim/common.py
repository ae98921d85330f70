"""Shared pieces of the synthetic scenarios: truth files, rollouts, sensor models, bag output.

Every scenario module offers ``simulate(seed, out_path=None, **settings) -> (Dataset, truth)``:
deterministic under ``seed``, it writes a ROS 2 bag (mcap unless ``storage`` says otherwise) at
``out_path`` with the topic names a real setup uses, and the true parameters beside it in
``<bag>.truth.yaml``. ``truth`` is a plain mapping (YAML-ready) with at least ``scenario``,
``seed``, ``robot``, ``parameters`` (true values by dynid parameter name, SI units),
``settings`` and ``layout`` (the ``BagLayout`` mapping that reads the bag back).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from numpy.typing import NDArray

from dynid.atomic import atomic_open
from dynid.data import BagLayout, Dataset, StorageFormat, write_bag
from dynid.errors import DynidError
from dynid.model.integrate import ControlModel, rollout
from dynid.model.params import DynamicParameters

Array = NDArray[np.float64]

#: Absolute time (ns) of ``t = 0`` in simulated bags: 2024-01-01T00:00:00Z.
SIM_T0_NS = 1_704_067_200_000_000_000


class SimulationError(DynidError, ValueError):
    """Invalid scenario settings; the message names the setting and the accepted range."""


def truth_path(bag: str | Path) -> Path:
    """``<bag>.truth.yaml`` beside the bag directory."""
    bag = Path(bag)
    return bag.with_name(bag.name + ".truth.yaml")


def plain(value: Any) -> Any:
    """``value`` with numpy/torch scalars and arrays turned into Python floats and lists."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def write_truth(bag: str | Path, truth: Mapping[str, Any]) -> Path:
    """Write ``truth`` atomically as YAML beside ``bag`` and return the file."""
    path = truth_path(bag)
    with atomic_open(path) as fh:
        yaml.safe_dump(plain(truth), fh, sort_keys=False)
    return path


def read_truth(bag: str | Path) -> dict[str, Any]:
    """Load ``<bag>.truth.yaml`` (``yaml.safe_load``)."""
    with truth_path(bag).open(encoding="utf-8") as fh:
        return dict(yaml.safe_load(fh))


def layout_mapping(layout: BagLayout) -> dict[str, Any]:
    """The YAML mapping of ``layout`` that ``BagLayout.from_mapping`` reads back."""
    js = layout.joint_states
    return {
        "joint_states": {
            "topic": js.topic,
            "joints": None if js.joints is None else list(js.joints),
            "effort_scale": dict(js.effort_scale),
        },
        "mocap": [
            {
                "body": m.body,
                "topic": m.topic,
                "msgtype": m.msgtype,
                "stamps_latency_corrected": m.stamps_latency_corrected,
                "latency": m.latency,
            }
            for m in layout.mocap
        ],
        "commands": [
            {
                "topic": c.topic,
                "msgtype": c.msgtype,
                "label": c.label,
                "fields": list(c.fields),
                "names": None if c.names is None else list(c.names),
            }
            for c in layout.commands
        ],
        "stamps": layout.stamps.value,
    }


def finish(
    dataset: Dataset,
    truth: dict[str, Any],
    layout: BagLayout,
    out_path: str | Path | None,
    storage: StorageFormat | str,
    *,
    recorded: Dataset | None = None,
    write_layout: BagLayout | None = None,
) -> tuple[Dataset, dict[str, Any]]:
    """Attach the reading layout to ``truth``; write bag and truth file when ``out_path`` is set.

    ``recorded`` (written with ``write_layout``) is what the bag holds when it carries more than
    the returned dataset, e.g. locked joints that ``layout`` does not select.
    """
    truth["layout"] = layout_mapping(layout)
    truth = plain(truth)
    if out_path is not None:
        write_bag(
            recorded if recorded is not None else dataset,
            out_path,
            write_layout if write_layout is not None else layout,
            storage=storage,
            source=f"sim:{truth['scenario']}",
        )
        write_truth(out_path, truth)
    return dataset, truth


def simulate_rollout(
    dyn: Any,
    p: DynamicParameters,
    q0: Array,
    v0: Array,
    u: Array,
    dt: float,
    control: ControlModel,
    substeps: int = 1,
) -> tuple[Array, Array]:
    """Roll out ``u [N|1, T, nu]`` from ``q0, v0 [N|1, nv]``; numpy ``q, v [N, T+1, nv]``."""

    def t(x: Array) -> torch.Tensor:
        return torch.as_tensor(np.asarray(x, dtype=np.float64))

    with torch.no_grad():
        q, v = rollout(dyn, p, t(q0), t(v0), t(u), dt, control, substeps)
    q_np, v_np = q.numpy(), v.numpy()
    if not (np.isfinite(q_np).all() and np.isfinite(v_np).all()):
        raise SimulationError("the rollout diverged (non-finite state); reduce dt or the gains")
    return q_np, v_np


def time_grid(n: int, dt: float) -> Array:
    """``n`` sample times ``k dt`` (s) computed from integer nanoseconds, so that a bag (stamps
    in ns) read back reproduces them bit for bit."""
    return (np.arange(n, dtype=np.int64) * round(dt * 1e9)) * 1e-9


def quantize(x: Array, ticks_per_rev: int) -> Array:
    """Angles (rad) rounded to an encoder of ``ticks_per_rev`` ticks per revolution."""
    step = 2.0 * np.pi / ticks_per_rev
    return np.round(np.asarray(x) / step) * step


def check_positive(name: str, value: float) -> float:
    """``value`` as float when finite and > 0, else ``SimulationError`` naming the setting."""
    value = float(value)
    if not (np.isfinite(value) and value > 0.0):
        raise SimulationError(f"setting {name!r} must be a positive finite number, got {value}")
    return value
