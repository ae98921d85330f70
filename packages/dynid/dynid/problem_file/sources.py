"""Data sources: the kinds of a problem file's ``data.source``, and reading one.

A kind is a subclass of :class:`DataSource` registered under its ``kind`` in entry-point group
``dynid.data_sources`` (:mod:`dynid.plugins`). The parser checks the ``data`` keys against the
class's ``keys``, hands those keys to :meth:`DataSource.from_section` as a
:class:`SourceSection` (whose getters name the key of a bad value) and keeps the source;
:func:`read_source` reads it. dynid's own kinds: :class:`BagSource` (``bag``),
:class:`NpzSource` (``npz``), :class:`IbmPendulumSource` (``ibm_pendulum``),
:class:`ScenarioSource` (``scenario``) and :class:`PlanarDiceSource` (``planar_dice``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from dynid.data.bag import read_bag
from dynid.data.errors import DataError, DataSectionError
from dynid.data.ibm_pendulum import load_ibm_pendulum_runs
from dynid.data.pipeline import DEFAULT_MAX_SKIPPED_PERCENT
from dynid.data.planar_dice import load_dice_trajectories
from dynid.data.stream import ReadSummary
from dynid.data.topics import BagLayout, CommandTopic, JointStateTopic, MocapTopic, TfLookup
from dynid.data.trajectory import Dataset
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.scenarios import Simulate, load_scenario
from dynid.problem_file.values import as_int, as_ints, as_positive_ints

__all__ = [
    "BagSource",
    "DataSource",
    "IbmPendulumSource",
    "NpzSource",
    "PlanarDiceSource",
    "ScenarioSource",
    "SourceSection",
    "read_source",
]

_LAYOUT_KEYS = ("joint_states", "mocap", "tf", "commands", "stamps")


class _Checks(Protocol):
    """What :class:`SourceSection` asks of the problem-file parser (keys are full paths)."""

    origin: str

    def error(self, key: str, message: object) -> ProblemFileError: ...

    def mapping(self, value: Any, key: str) -> dict[str, Any]: ...

    def convert(
        self, function: Callable[[Any], Any], value: Any, key: str, expected: str
    ) -> Any: ...

    def fields(self, cls: Any, entry: Mapping[str, Any], key: str) -> dict[str, Any]: ...

    def positive(self, value: Any, key: str) -> float | None: ...

    def percent(self, value: Any, key: str) -> float: ...

    def resolve(self, value: Any) -> Path: ...


class SourceSection:
    """The keys of one data source as a problem file gives them, for
    :meth:`DataSource.from_section`. Every getter raises a :class:`ProblemFileError` naming the
    file and the key (``data.runs``, ``validation.data.drops``).

    Attributes:
        values: the source's keys as written (only those of the class's ``keys``).
        prefix: the section they are in (``data`` or ``validation.data``).
    """

    def __init__(self, values: Mapping[str, Any], prefix: str, checks: _Checks) -> None:
        self.values = dict(values)
        self.prefix = prefix
        self._checks = checks

    @property
    def origin(self) -> str:
        """The problem file (its path, or ``problem '<name>'``), for messages."""
        return self._checks.origin

    def key(self, name: str) -> str:
        """The full key of ``name`` (``data.<name>``)."""
        return f"{self.prefix}.{name}"

    def error(self, name: str, message: object) -> ProblemFileError:
        """An error about key ``name`` (raise it)."""
        return self._checks.error(self.key(name), message)

    def convert(
        self, name: str, function: Callable[[Any], Any], expected: str, default: Any = None
    ) -> Any:
        """``function`` of key ``name``'s value (``default`` when absent); a ``TypeError`` or
        ``ValueError`` becomes "expected <expected>, got <value>"."""
        value = self.values.get(name, default)
        return self._checks.convert(function, value, self.key(name), expected)

    def fields(self, cls: Any, entry: Mapping[str, Any], name: str) -> dict[str, Any]:
        """``entry`` (the value at key ``name``, e.g. ``mocap[0]``) checked against the
        constructor of ``cls``: known keys, the required ones present, values of the annotated
        types."""
        return self._checks.fields(cls, entry, self.key(name))

    def mapping(self, name: str) -> dict[str, Any]:
        """Key ``name`` as a mapping (``{}`` when absent)."""
        return self._checks.mapping(self.values.get(name), self.key(name))

    def positive(self, name: str) -> float | None:
        """Key ``name`` as a positive number, or ``None`` when absent."""
        return self._checks.positive(self.values.get(name), self.key(name))

    def percent(self, name: str) -> float:
        """Key ``name`` as a percentage in [0, 100]; absent: the default share of skipped
        messages (:data:`dynid.data.pipeline.DEFAULT_MAX_SKIPPED_PERCENT`)."""
        return self._checks.percent(self.values.get(name), self.key(name))

    def paths(self) -> tuple[Path, ...]:
        """Key ``path`` (one path or a list) resolved: relative to the problem file's folder,
        ``shared:...`` relative to the shared recordings; empty when absent."""
        given = self.values.get("path")
        if given is None:
            return ()
        if isinstance(given, list):
            if not given:
                raise self.error("path", "expected a path or a non-empty list of paths")
            return tuple(self._checks.resolve(p) for p in given)
        return (self._checks.resolve(given),)

    def path(self) -> Path | None:
        """Key ``path``, one path (resolved as :meth:`paths` does), or ``None`` when absent."""
        if isinstance(self.values.get("path"), list):
            raise self.error("path", "expected one path; a list of paths needs data.source bag")
        paths = self.paths()
        return paths[0] if paths else None


class DataSource(ABC):
    """One kind of ``data.source``.

    Attributes:
        kind: the name it is registered under in group ``dynid.data_sources`` (the value of
            ``data.source``).
        keys: the keys of the ``data`` section it reads (``source`` and the preprocessing keys
            are the parser's).
    """

    kind: ClassVar[str]
    keys: ClassVar[frozenset[str]]

    @classmethod
    @abstractmethod
    def from_section(cls, section: SourceSection) -> DataSource:
        """The source the problem file describes (its keys already checked against ``keys``).

        Raises:
            ProblemFileError: a bad value, from ``section``'s getters or ``section.error``.
        """

    @abstractmethod
    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        """The trajectories, and the true parameter values the source knows (``{name:
        value}``, a value may be a list with one entry per trajectory; empty when none).

        Raises:
            DataError: a file, topic or channel is missing or unreadable (a
                :class:`DataSectionError` names its key).
        """


@dataclass(frozen=True)
class BagSource(DataSource):
    """``source: bag``: ROS 2 bags (sqlite3 or mcap).

    Attributes:
        layout: the topics to read.
        path: the default recording (``dynid fit --bag`` gives another), or ``None``.
        rate: Hz: resample onto a uniform grid while reading, or ``None``.
        paths: every default recording (``path`` is the first); their trajectories are read one
            after the other.
        max_skipped_percent: the share of a topic's messages the reader may skip (invalid
            fields, stamps going backwards or repeated) before the recording is refused (%).
    """

    kind: ClassVar[str] = "bag"
    keys: ClassVar[frozenset[str]] = frozenset(
        {"path", *_LAYOUT_KEYS, "rate", "max_skipped_percent"}
    )
    layout: BagLayout
    path: Path | None = None
    rate: float | None = None
    paths: tuple[Path, ...] = ()
    max_skipped_percent: float = DEFAULT_MAX_SKIPPED_PERCENT

    @classmethod
    def from_section(cls, section: SourceSection) -> BagSource:
        _check_layout(section)
        values = section.values
        try:
            layout = BagLayout.from_mapping({k: values[k] for k in _LAYOUT_KEYS if k in values})
        except (TypeError, ValueError, DataError) as exc:
            raise ProblemFileError.at(
                section.origin, section.prefix, f"invalid topic description: {exc}"
            ) from None
        paths = section.paths()
        return cls(layout, paths[0] if paths else None, section.positive("rate"), paths,
                   section.percent("max_skipped_percent"))  # fmt: skip

    @property
    def recordings(self) -> tuple[Path, ...]:
        """The default recordings: ``paths``, else ``path`` (may be empty)."""
        return self.paths or ((self.path,) if self.path is not None else ())

    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        return self.read_bags(self.recordings, "data.path")

    def read_bags(
        self,
        recordings: tuple[Path, ...],
        key: str,
        summaries: list[ReadSummary] | None = None,
    ) -> tuple[Dataset, Mapping[str, Any]]:
        """The trajectories of ``recordings`` read with ``layout``, one bag after the other.

        Args:
            recordings: the bags (empty: an error naming ``key``).
            key: the key or flag that named them (``data.path``, ``--bag``).
            summaries: receives the read summary of every bag read.
        """
        trajectories = []
        for path in recordings or (None,):
            path = _existing(path, key, "pass --bag or set data.path")
            read, summary = read_bag(path, self.layout, rate=self.rate)
            trajectories += list(read)
            if summaries is not None:
                summaries.append(summary)
        return Dataset(trajectories), {}


def _check_layout(section: SourceSection) -> None:
    """The topic descriptions of a bag source, each checked against the dataclass it becomes
    (:class:`dynid.data.topics.JointStateTopic` ...), so that an error names its key."""
    values = section.values
    if "joint_states" in values:
        entry = values["joint_states"]
        if not isinstance(entry, Mapping):
            raise section.error("joint_states", f"expected a mapping, got {_kind_of(entry)}")
        section.fields(JointStateTopic, entry, "joint_states")
    for name, cls in (("mocap", MocapTopic), ("tf", TfLookup), ("commands", CommandTopic)):
        if name not in values:
            continue
        entries = values[name]
        if not isinstance(entries, list):
            raise section.error(name, f"expected a list, got {_kind_of(entries)}")
        for k, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise section.error(f"{name}[{k}]", f"expected a mapping, got {_kind_of(entry)}")
            section.fields(cls, entry, f"{name}[{k}]")
    stamps = values.get("stamps", "header")
    if stamps not in ("header", "receive"):
        raise section.error("stamps", f"expected header or receive, got {stamps!r}")


@dataclass(frozen=True)
class NpzSource(DataSource):
    """``source: npz``: a :meth:`dynid.data.Dataset.save_npz` file (``path``, or ``None``)."""

    kind: ClassVar[str] = "npz"
    keys: ClassVar[frozenset[str]] = frozenset({"path"})
    path: Path | None = None

    @classmethod
    def from_section(cls, section: SourceSection) -> NpzSource:
        return cls(section.path())

    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        return Dataset.load_npz(_existing(self.path, "data.path", "set data.path")), {}


@dataclass(frozen=True)
class IbmPendulumSource(DataSource):
    """``source: ibm_pendulum``: runs of the real IBM double-pendulum recordings.

    Attributes:
        runs: run numbers.
        start: first sample of each run.
        max_samples: samples per run (``None``: all).
    """

    kind: ClassVar[str] = "ibm_pendulum"
    keys: ClassVar[frozenset[str]] = frozenset({"runs", "start", "max_samples"})
    runs: tuple[int, ...] = (0,)
    start: int = 0
    max_samples: int | None = None

    @classmethod
    def from_section(cls, section: SourceSection) -> IbmPendulumSource:
        max_samples = section.values.get("max_samples")
        return cls(
            runs=section.convert("runs", as_ints, "a list of run numbers", [0]),
            start=section.convert("start", as_int, "an integer", 0),
            max_samples=None
            if max_samples is None
            else section.convert("max_samples", as_int, "an integer"),
        )

    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        runs = list(self.runs)
        return load_ibm_pendulum_runs(runs, start=self.start, max_samples=self.max_samples), {}


@dataclass(frozen=True)
class ScenarioSource(DataSource):
    """``source: scenario``: trajectories simulated on the fly by a registered scenario
    (:mod:`dynid.problem_file.scenarios`); the truth is the scenario's.

    Attributes:
        name: scenario name.
        simulate: its ``simulate(seed, **settings) -> (Dataset, truth)``.
        settings: keyword arguments of ``simulate`` (``seed`` defaults to 0).
    """

    kind: ClassVar[str] = "scenario"
    keys: ClassVar[frozenset[str]] = frozenset({"scenario", "settings"})
    name: str
    simulate: Simulate
    settings: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_section(cls, section: SourceSection) -> ScenarioSource:
        name = str(section.values.get("scenario"))
        simulate = load_scenario(name, f"{section.origin}: {section.key('scenario')}")
        return cls(name, simulate, section.mapping("settings"))

    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        try:
            dataset, truth = self.simulate(**{"seed": 0, **self.settings})
        except (TypeError, ValueError) as exc:
            raise DataSectionError("data.settings", str(exc)) from None
        return dataset, truth.get("parameters", {})


@dataclass(frozen=True)
class PlanarDiceSource(DataSource):
    """``source: planar_dice``: real planar dice drops of the residual-contact paper.

    Attributes:
        drops: drop numbers (1-based, ``traj_<i>.csv``).
        path: the directory holding ``real/`` (``None``: ``planar-dice/`` of the shared
            recordings, :func:`dynid.data.planar_dice.dice_dir`).
    """

    kind: ClassVar[str] = "planar_dice"
    keys: ClassVar[frozenset[str]] = frozenset({"drops", "path"})
    drops: tuple[int, ...]
    path: Path | None = None

    @classmethod
    def from_section(cls, section: SourceSection) -> PlanarDiceSource:
        drops = section.convert("drops", as_positive_ints, "drop numbers (a list, or 'a-b')")
        return cls(drops, section.path())

    def read(self) -> tuple[Dataset, Mapping[str, Any]]:
        return Dataset(load_dice_trajectories(self.drops, root=self.path)), {}


def read_source(
    source: DataSource,
    recording: Path | None = None,
    summaries: list[ReadSummary] | None = None,
) -> tuple[Dataset, Mapping[str, Any]]:
    """The trajectories of ``source``, and the true parameter values it knows.

    Args:
        source: the data source.
        recording: a bag read instead of the source's ``path`` (bag sources only).
        summaries: receives the read summary of every bag read (what was read, used and
            skipped per topic; :meth:`dynid.data.ReadSummary.check_skipped`).

    Returns:
        ``(dataset, truth)`` (:meth:`DataSource.read`).

    Raises:
        DataSectionError: missing file, topic or channel, bad scenario settings, or a
            ``recording`` given to a source that is not a bag (it would be ignored).
    """
    is_bag = isinstance(source, BagSource)
    if recording is not None and not is_bag:
        raise DataSectionError(
            "data.source",
            f"is {source.kind!r}, so the recording {str(recording)!r} would be ignored; a "
            "recording is read only by problems with data.source 'bag'",
        )
    try:
        if is_bag and recording is not None:
            return source.read_bags((recording,), "--bag", summaries)
        if is_bag:
            return source.read_bags(source.recordings, "data.path", summaries)
        return source.read()
    except DataSectionError:
        raise
    except DataError as exc:
        raise DataSectionError(f"data ({source.kind})", str(exc)) from None


def _existing(path: Path | None, key: str, hint: str) -> Path:
    if path is None:
        raise DataSectionError(key, f"no data file given ({hint})")
    if not path.exists():
        if str(path).startswith("shared:"):
            raise DataSectionError(
                key,
                f"{path}: the shared recordings were not found; set DYNID_DATA_DIR to the "
                "directory that holds them",
            )
        raise DataSectionError(key, f"data file {path} does not exist")
    return path


def _kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__
