"""Property-based checks of the bag reader with generated damaged bags: bytes overwritten or the
file truncated anywhere in the storage file (mcap or sqlite3) or in ``metadata.yaml``.

Properties: every reader (``read_bag``, ``iter_joint_states``, ``read_segments``) raises nothing
but the project's own errors, each one line naming the bag; a dynid mcap (CRC-sealed) is never
read altered: each read either raises or returns exactly what was written. Examples are
derandomized (seeded) and few, so the suite is quick.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynid.data import (
    BagLayout,
    DataError,
    Dataset,
    MocapTopic,
    StorageFormat,
    Trajectory,
    iter_joint_states,
    read_bag,
    read_segments,
    write_bag,
)

SEEDED = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
T0 = 1_700_000_000_000_000_000
LAYOUT = BagLayout(mocap=(MocapTopic("box", "/mocap/box"),))


def _dataset() -> Dataset:
    parts = []
    for k in range(2):
        t = np.arange(150) * 0.01
        q = np.stack([np.sin(t + k), np.cos(t)], axis=1)
        half = 0.25 * t
        obs = np.stack([t, -t, 0 * t, 0 * t, 0 * t, np.sin(half), np.cos(half)], axis=1)
        parts.append(
            Trajectory(
                t=t, q=q, joint_names=["j1", "j2"], dq=np.cos(q), obs=obs,
                obs_names=[f"box/{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")],
                meta={"t0_ns": T0 + k * 3 * 10**9, "trial": k},
            )
        )  # fmt: skip
    return Dataset(parts)


class Bag:
    """A written bag, its pristine bytes and what reading it gives."""

    def __init__(self, root: Path, storage: StorageFormat) -> None:
        self.pristine = write_bag(
            _dataset(), root / f"pristine_{storage.value}", LAYOUT, storage=storage,
            segment_topic="/seg",
        )  # fmt: skip
        self.path = root / f"work_{storage.value}"
        shutil.copytree(self.pristine, self.path)
        (self.data_file,) = [f for f in self.path.iterdir() if f.suffix in (".mcap", ".db3")]
        self.meta_file = self.path / "metadata.yaml"
        self.original = {f: f.read_bytes() for f in (self.data_file, self.meta_file)}
        self.reference = self.read()

    def read(self) -> list[Any]:
        """What each reader returns, or its (one-line, project) error."""
        readers: list[Callable[[], Any]] = [
            lambda: read_bag(self.path, LAYOUT)[0],
            lambda: [c.q for c in iter_joint_states(self.path, chunk=64)],
            lambda: read_segments(self.path, "/seg")[0],
        ]
        out = []
        for reader in readers:
            try:
                out.append(reader())
            except DataError as err:
                text = str(err)
                assert "\n" not in text, text
                assert str(self.path) in text, text
                out.append(err)
        return out

    def damage(self, file: Path, edit: tuple[str, float, bytes]) -> bytes:
        """Restore both files, then overwrite bytes of ``file`` or truncate it; the new bytes."""
        for f, data in self.original.items():
            f.write_bytes(data)
        kind, where, run = edit
        data = self.original[file]
        pos = min(int(where * len(data)), len(data) - 1)
        new = data[:pos] if kind == "truncate" else data[:pos] + run + data[pos + len(run) :]
        file.write_bytes(new)
        return new


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Dataset):
        return isinstance(b, Dataset) and a.same_data(b)
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    return False


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[StorageFormat, Bag]:
    root = tmp_path_factory.mktemp("fuzz")
    return {storage: Bag(root, storage) for storage in StorageFormat}


#: ("overwrite" | "truncate", where as a fraction of the file, bytes written)
edits = st.tuples(
    st.sampled_from(["overwrite", "overwrite", "overwrite", "truncate"]),
    st.floats(0.0, 1.0),
    st.binary(min_size=1, max_size=16),
)


@SEEDED
@given(edit=edits)
def test_damaged_mcap_is_refused_or_read_unaltered(
    bags: dict[StorageFormat, Bag], edit: tuple[str, float, bytes]
) -> None:
    bag = bags[StorageFormat.MCAP]
    assert not any(isinstance(r, Exception) for r in bag.reference)
    new = bag.damage(bag.data_file, edit)
    results = bag.read()
    for got, want in zip(results, bag.reference, strict=True):
        assert isinstance(got, DataError) or _same(got, want), "damaged data read as whole"
    if new != bag.original[bag.data_file]:
        assert all(isinstance(r, DataError) for r in results)


@SEEDED
@given(edit=edits)
def test_damaged_sqlite3_raises_only_project_errors(
    bags: dict[StorageFormat, Bag], edit: tuple[str, float, bytes]
) -> None:
    """sqlite3 has no CRC: a damaged row may be read; nothing but the project's errors escape."""
    bag = bags[StorageFormat.SQLITE3]
    bag.damage(bag.data_file, edit)
    bag.read()


@SEEDED
@given(storage=st.sampled_from(list(StorageFormat)), edit=edits)
def test_damaged_metadata_raises_only_project_errors(
    bags: dict[StorageFormat, Bag], storage: StorageFormat, edit: tuple[str, float, bytes]
) -> None:
    bag = bags[storage]
    bag.damage(bag.meta_file, edit)
    bag.read()
