"""Learned weights as plain state dicts: written with ``torch.save`` (tensors only, on the CPU,
with the integer sizes the module's constructor needs) and read with
``torch.load(weights_only=True)``, so nothing is unpickled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

__all__ = ["load_state", "save_state"]

M = TypeVar("M", bound=nn.Module)


def save_state(module: nn.Module, path: str | Path, **sizes: int) -> Path:
    """Write ``module``'s state dict and ``sizes`` (its constructor's integer arguments) to
    ``path``, creating the parent folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    state.update({k: torch.tensor(int(v)) for k, v in sizes.items()})
    torch.save(state, path)
    return path


def load_state(path: str | Path, build: Callable[..., M], what: str, sizes: Sequence[str]) -> M:
    """The module ``build(**sizes)`` with the weights a :func:`save_state` file holds.

    Args:
        path: the file.
        build: the module's constructor, called with the saved ``sizes`` as keywords.
        what: what the file should hold, for the error message.
        sizes: names of the saved constructor arguments.

    Raises:
        ValueError: the file is not such a state dict (naming the file and the missing or
            unexpected entries).
        pickle.UnpicklingError: the file holds objects other than tensors.
    """
    state = torch.load(Path(path), map_location="cpu", weights_only=True)
    absent = [k for k in sizes if not isinstance(state, dict) or k not in state]
    if absent:
        raise ValueError(f"{path}: not a {what} state dict (no {absent} entry)")
    module = build(**{k: int(state.pop(k)) for k in sizes})
    missing, unexpected = module.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: missing keys {missing}, unexpected keys {unexpected}")
    return module
