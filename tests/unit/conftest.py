"""Fixtures shared by the core's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Torch on one thread for the test, then back to what it was: code of many tiny tensor
    operations (filters, integrators, regressors) runs fastest so, and the tests stay seeded
    reproducible on any core count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
