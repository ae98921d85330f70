"""``Trajectory`` (one recorded or simulated time series of a robot) and ``Dataset`` (several).

All arrays are numpy float64 with time on axis 0. Times ``t`` are in seconds (any origin; the
absolute start of a recording is kept in ``meta["t0_ns"]`` when known). Joint positions are in
rad (revolute) or m (prismatic), velocities in rad/s or m/s, efforts in N·m or N. Mocap
observations are named ``"<body>/x|y|z"`` (m, world frame) and ``"<body>/qx|qy|qz|qw"``
(unit quaternion, ROS order).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from dynid.atomic import atomic_open
from dynid.data.align import interp_channels, interp_linear, uniform_grid
from dynid.data.errors import TrajectoryError

Array = NDArray[np.float64]

_MATRIX_FIELDS = (("dq", "joint_names"), ("effort", "joint_names"),
                  ("command", "command_names"), ("obs", "obs_names"))  # fmt: skip


def _as_matrix(value: Any, name: str, rows: int, cols: int) -> Array:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (rows, cols):
        raise TrajectoryError(
            f"Trajectory.{name}: expected shape [{rows}, {cols}], got {arr.shape}"
        )
    return arr


def _stamp(ns: int) -> str:
    """Integer nanoseconds as exact seconds ``"<s>.<9 digits>"``."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1_000_000_000}.{abs(ns) % 1_000_000_000:09d}"


def _check_names(names: Sequence[str], field_name: str) -> list[str]:
    names = [str(n) for n in names]
    seen: set[str] = set()
    dup = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dup:
        raise TrajectoryError(f"Trajectory.{field_name}: names must be unique, repeated: {dup}")
    if any(not n for n in names):
        raise TrajectoryError(f"Trajectory.{field_name}: empty name")
    return names


def _check_finite(arr: Array, name: str, channel_names: Sequence[str] | None) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        row, *rest = np.argwhere(bad)[0]
        col = f" channel {channel_names[rest[0]]!r}" if channel_names and rest else ""
        raise TrajectoryError(
            f"Trajectory.{name}: {int(bad.sum())} non-finite value(s), first at sample {row}{col}"
        )


def _atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_open(path, "wb") as fh:
        np.savez(fh, **arrays)  # type: ignore[arg-type]


@dataclass
class Trajectory:
    """One time series of a robot, validated on construction.

    Attributes:
        t: ``[T]`` sample times (s), finite and strictly increasing.
        q: ``[T, nq]`` joint positions (rad or m), columns in ``joint_names`` order.
        joint_names: ``nq`` unique movable-joint names.
        dq: ``[T, nv]`` joint velocities (rad/s or m/s) or ``None`` when not measured.
        effort: ``[T, nv]`` joint efforts (N·m or N) or ``None``.
        command: ``[T, nc]`` control signals in ``command_names`` order, or ``None``.
        command_names: ``nc`` unique channel names (e.g. ``"panda_joint6/position"``).
        obs: ``[T, k]`` further observations (mocap poses, points), or ``None``.
        obs_names: ``k`` unique channel names (``"<body>/x|y|z|qx|qy|qz|qw"`` for poses).
        meta: JSON-serialisable information: robot, source bag, topics, ``t0_ns``, ...
    """

    t: Array
    q: Array
    joint_names: list[str]
    dq: Array | None = None
    effort: Array | None = None
    command: Array | None = None
    command_names: list[str] = field(default_factory=list)
    obs: Array | None = None
    obs_names: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.t = np.asarray(self.t, dtype=np.float64)
        if self.t.ndim != 1 or self.t.size == 0:
            raise TrajectoryError(
                f"Trajectory.t: expected a non-empty [T] array, got {self.t.shape}"
            )
        _check_finite(self.t, "t", None)
        steps = np.diff(self.t)
        if (steps <= 0.0).any():
            i = int(np.argmax(steps <= 0.0))
            raise TrajectoryError(
                f"Trajectory.t: times must be strictly increasing; t[{i}]={self.t[i]!r} s is "
                f"followed by t[{i + 1}]={self.t[i + 1]!r} s"
            )
        self.joint_names = _check_names(self.joint_names, "joint_names")
        self.command_names = _check_names(self.command_names, "command_names")
        self.obs_names = _check_names(self.obs_names, "obs_names")
        T = self.t.size
        self.q = _as_matrix(self.q, "q", T, len(self.joint_names))
        _check_finite(self.q, "q", self.joint_names)
        for name, names_field in _MATRIX_FIELDS:
            value = getattr(self, name)
            names = getattr(self, names_field)
            if value is None:
                if name in ("command", "obs") and names:
                    raise TrajectoryError(
                        f"Trajectory.{names_field}: {len(names)} names given but {name} is None"
                    )
                continue
            arr = _as_matrix(value, name, T, len(names))
            _check_finite(arr, name, names)
            setattr(self, name, arr)
        if not isinstance(self.meta, dict):
            raise TrajectoryError(f"Trajectory.meta: expected a dict, got {type(self.meta)}")

    # -- sizes -------------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        """Number of samples ``T``."""
        return int(self.t.size)

    @property
    def nq(self) -> int:
        """Number of joint positions."""
        return len(self.joint_names)

    @property
    def nv(self) -> int:
        """Number of joint velocities (equal to ``nq`` for revolute/prismatic joints)."""
        return len(self.joint_names)

    @property
    def duration(self) -> float:
        """``t[-1] - t[0]`` in s."""
        return float(self.t[-1] - self.t[0])

    def describe(self) -> str:
        """Where the trajectory came from and what it holds, for messages: its source and
        joint-state topic (``meta``), its sample count and its first and last stamps (absolute,
        in s, when ``meta["t0_ns"]`` is known)."""
        where = " ".join(
            str(self.meta[k]) for k in ("source", "joint_states_topic") if self.meta.get(k)
        )
        n = self.num_samples
        text = f"{where or 'trajectory'}: {n} sample{'' if n == 1 else 's'}"
        if n == 0:
            return text
        t0 = self.meta.get("t0_ns")
        if isinstance(t0, int) and not isinstance(t0, bool):
            first, last = (_stamp(t0 + round(float(x) * 1e9)) for x in (self.t[0], self.t[-1]))
            return f"{text}, stamps {first} .. {last} s"
        return f"{text}, t {float(self.t[0]):.6g} .. {float(self.t[-1]):.6g} s"

    # -- channels ----------------------------------------------------------------------------
    def obs_channel(self, name: str) -> Array:
        """Column ``[T]`` of observation channel ``name``."""
        if self.obs is None or name not in self.obs_names:
            raise TrajectoryError(f"Trajectory.obs_names: no channel {name!r} in {self.obs_names}")
        return self.obs[:, self.obs_names.index(name)]

    def command_channel(self, name: str) -> Array:
        """Column ``[T]`` of command channel ``name``."""
        if self.command is None or name not in self.command_names:
            raise TrajectoryError(
                f"Trajectory.command_names: no channel {name!r} in {self.command_names}"
            )
        return self.command[:, self.command_names.index(name)]

    def pose(self, body: str) -> tuple[Array, Array]:
        """Mocap pose of ``body``: positions ``[T, 3]`` (m) and quaternions ``[T, 4]`` (xyzw)."""
        pos = np.stack([self.obs_channel(f"{body}/{c}") for c in ("x", "y", "z")], axis=1)
        quat = np.stack([self.obs_channel(f"{body}/{c}") for c in ("qx", "qy", "qz", "qw")], 1)
        return pos, quat

    # -- transformations ---------------------------------------------------------------------
    def replace(self, **changes: Any) -> Trajectory:
        """A validated copy with some fields replaced (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def take(self, index: NDArray[np.intp] | slice) -> Trajectory:
        """The samples at ``index`` (a slice or increasing indices), times unchanged."""
        return self.replace(
            t=self.t[index],
            q=self.q[index],
            dq=None if self.dq is None else self.dq[index],
            effort=None if self.effort is None else self.effort[index],
            command=None if self.command is None else self.command[index],
            obs=None if self.obs is None else self.obs[index],
            meta=dict(self.meta),
        )

    def slice(self, t0: float, t1: float) -> Trajectory:
        """Samples with ``t0 <= t <= t1`` (s); times keep their origin."""
        keep = np.flatnonzero((self.t >= t0) & (self.t <= t1))
        if keep.size == 0:
            raise TrajectoryError(
                f"Trajectory.slice: no sample in [{t0}, {t1}] s (data spans "
                f"[{self.t[0]}, {self.t[-1]}] s)"
            )
        return self.take(slice(int(keep[0]), int(keep[-1]) + 1))

    def interpolate(self, t_query: Array) -> Trajectory:
        """The trajectory at times ``t_query [Q]`` inside ``[t[0], t[-1]]``.

        Linear interpolation for joint signals, commands and positions; slerp for the
        ``<body>/qx..qw`` observation groups. Samples hit exactly are copied unchanged.
        """
        t_query = np.asarray(t_query, dtype=np.float64)

        def lin(x: Array | None, what: str) -> Array | None:
            return None if x is None else interp_linear(self.t, x, t_query, what=what)

        obs = None
        if self.obs is not None:
            obs = interp_channels(self.t, self.obs, self.obs_names, t_query, what="obs")
        return self.replace(
            t=t_query,
            q=lin(self.q, "q"),
            dq=lin(self.dq, "dq"),
            effort=lin(self.effort, "effort"),
            command=lin(self.command, "command"),
            obs=obs,
            meta=dict(self.meta),
        )

    def resample(self, dt: float) -> Trajectory:
        """The trajectory on the uniform grid ``t[0] + k dt`` (s) covering ``[t[0], t[-1]]``."""
        if not dt > 0.0:
            raise TrajectoryError(f"Trajectory.resample: dt must be positive, got {dt}")
        return self.interpolate(uniform_grid(float(self.t[0]), float(self.t[-1]), dt))

    def same_data(self, other: Trajectory) -> bool:
        """Whether both trajectories hold bit-identical arrays and names (``meta`` ignored)."""
        if (self.joint_names, self.command_names, self.obs_names) != (
            other.joint_names,
            other.command_names,
            other.obs_names,
        ):
            return False
        for name in ("t", "q", "dq", "effort", "command", "obs"):
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None) or (a is not None and not np.array_equal(a, b)):
                return False
        return True

    # -- files -------------------------------------------------------------------------------
    def _arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        try:
            meta = json.dumps(self.meta, sort_keys=True)
        except TypeError as err:
            raise TrajectoryError(f"Trajectory.meta is not JSON-serialisable: {err}") from err
        out: dict[str, np.ndarray] = {
            f"{prefix}t": self.t,
            f"{prefix}q": self.q,
            f"{prefix}joint_names": np.array(self.joint_names, dtype=str),
            f"{prefix}command_names": np.array(self.command_names, dtype=str),
            f"{prefix}obs_names": np.array(self.obs_names, dtype=str),
            f"{prefix}meta": np.array(meta),
        }
        for name in ("dq", "effort", "command", "obs"):
            value = getattr(self, name)
            if value is not None:
                out[f"{prefix}{name}"] = value
        return out

    @classmethod
    def _from_arrays(cls, data: Any, prefix: str, source: str) -> Trajectory:
        try:
            kwargs: dict[str, Any] = {
                "t": data[f"{prefix}t"],
                "q": data[f"{prefix}q"],
                "joint_names": data[f"{prefix}joint_names"].tolist(),
                "command_names": data[f"{prefix}command_names"].tolist(),
                "obs_names": data[f"{prefix}obs_names"].tolist(),
                "meta": json.loads(str(data[f"{prefix}meta"])),
            }
        except KeyError as err:
            raise TrajectoryError(f"{source}: missing array {err.args[0]!r}") from err
        for name in ("dq", "effort", "command", "obs"):
            key = f"{prefix}{name}"
            kwargs[name] = data[key] if key in data.files else None
        return cls(**kwargs)

    def save_npz(self, path: str | Path) -> Path:
        """Write the trajectory atomically to an ``.npz`` file (no pickles) and return its path."""
        path = Path(path)
        _atomic_savez(path, self._arrays())
        return path

    @classmethod
    def load_npz(cls, path: str | Path) -> Trajectory:
        """Read a trajectory written by ``save_npz`` (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as data:
            return cls._from_arrays(data, "", str(path))


@dataclass
class Dataset(Sequence[Trajectory]):
    """Several trajectories of the same robot (same ``joint_names``, in the same order)."""

    trajectories: list[Trajectory]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.trajectories = list(self.trajectories)
        for i, traj in enumerate(self.trajectories):
            if not isinstance(traj, Trajectory):
                raise TrajectoryError(f"Dataset.trajectories[{i}]: not a Trajectory ({type(traj)})")
            if traj.joint_names != self.trajectories[0].joint_names:
                raise TrajectoryError(
                    f"Dataset.trajectories[{i}].joint_names {traj.joint_names} differ from "
                    f"trajectories[0].joint_names {self.trajectories[0].joint_names}"
                )

    def __len__(self) -> int:
        return len(self.trajectories)

    @overload
    def __getitem__(self, index: int) -> Trajectory: ...
    @overload
    def __getitem__(self, index: slice) -> Dataset: ...
    def __getitem__(self, index: int | slice) -> Trajectory | Dataset:
        if isinstance(index, slice):
            return Dataset(self.trajectories[index], dict(self.meta))
        return self.trajectories[index]

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.trajectories)

    @property
    def joint_names(self) -> list[str]:
        """Joint names shared by all trajectories (empty for an empty dataset)."""
        return list(self.trajectories[0].joint_names) if self.trajectories else []

    def same_data(self, other: Dataset) -> bool:
        """Whether both datasets hold the same number of bit-identical trajectories."""
        return len(self) == len(other) and all(
            a.same_data(b) for a, b in zip(self, other, strict=True)
        )

    def save_npz(self, path: str | Path) -> Path:
        """Write all trajectories atomically into one ``.npz`` file and return its path."""
        arrays: dict[str, np.ndarray] = {
            "count": np.array(len(self)),
            "meta": np.array(json.dumps(self.meta, sort_keys=True)),
        }
        for i, traj in enumerate(self):
            arrays.update(traj._arrays(prefix=f"{i}/"))
        path = Path(path)
        _atomic_savez(path, arrays)
        return path

    @classmethod
    def load_npz(cls, path: str | Path) -> Dataset:
        """Read a dataset written by ``Dataset.save_npz`` (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as data:
            if "count" not in data.files:
                raise TrajectoryError(f"{path}: not a dataset file (no 'count' array)")
            trajs = [
                Trajectory._from_arrays(data, f"{i}/", str(path)) for i in range(int(data["count"]))
            ]
            return cls(trajs, json.loads(str(data["meta"])))
