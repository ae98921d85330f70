"""Reading joint-state bags keeps memory bounded: streaming is independent of the bag length,
a full read costs its output arrays plus a constant."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np

from dynid.data import BagLayout, JointStateTopic, StorageFormat, iter_joint_states, read_bag
from dynid_bench.data import JOINTS, PERIOD_NS, T0_NS, write_joint_state_bag

SPEC = JointStateTopic("/franka/joint_states")


def _peak(fn) -> tuple[int, object]:
    tracemalloc.start()
    try:
        result = fn()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_streaming_memory_does_not_grow_with_bag_length(tmp_path: Path) -> None:
    small = write_joint_state_bag(tmp_path / "small", 4_000, StorageFormat.MCAP)
    large = write_joint_state_bag(tmp_path / "large", 16_000, StorageFormat.MCAP)

    def stream(path: Path) -> int:
        return sum(c.q.shape[0] for c in iter_joint_states(path, SPEC, chunk=1024))

    peak_small, n_small = _peak(lambda: stream(small))
    peak_large, n_large = _peak(lambda: stream(large))
    assert (n_small, n_large) == (4_000, 16_000)
    # 4x the messages, (almost) the same peak: chunk buffers + decoder state only
    assert peak_large < 1.25 * peak_small + 256 * 1024
    assert peak_large < 4 * 2**20


def test_full_read_costs_its_output_plus_a_constant(tmp_path: Path) -> None:
    n = 10_000
    path = write_joint_state_bag(tmp_path / "bag", n, StorageFormat.SQLITE3)
    peak, (dataset, summary) = _peak(lambda: read_bag(path, BagLayout(joint_states=SPEC)))
    (traj,) = dataset
    assert traj.num_samples == n
    assert traj.joint_names == JOINTS
    assert summary.problems() == 0
    np.testing.assert_array_equal(traj.t, np.arange(n) * PERIOD_NS * 1e-9)
    assert traj.meta["t0_ns"] == T0_NS
    output = n * (8 + 3 * len(JOINTS) * 8)
    assert peak < 1.5 * output + 2**20  # rows are sliced, never copied
