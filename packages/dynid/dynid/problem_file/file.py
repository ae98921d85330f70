"""A problem file read and validated (:class:`ProblemFile`), and the :class:`dynid.problem.Problem`
built from it with its data."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynid.data.errors import DataSectionError
from dynid.data.pipeline import (
    DEFAULT_MAX_SKIPPED_PERCENT,
    derive_frame_points,
    preprocess_dataset,
    simulator_step,
)
from dynid.data.stream import ReadSummary
from dynid.data.trajectory import Dataset
from dynid.estimators.registry import EstimatorDefaults
from dynid.model.errors import ModelError
from dynid.model.params import ParameterSpec
from dynid.model.robot import RobotModel, robot_urdf
from dynid.problem import Problem, ProblemError
from dynid.problem_file.build import control_model, observation_model, simulator
from dynid.problem_file.errors import ProblemFileError
from dynid.problem_file.model import build_robot, build_spec
from dynid.problem_file.parse import parse_problem, read_yaml
from dynid.problem_file.scenarios import scalar_values
from dynid.problem_file.schema import ProblemConfig, ValidationSection
from dynid.problem_file.sources import DataSource, read_source

__all__ = ["ProblemFile", "load_problem", "read_problem_file"]


@dataclass
class ProblemFile:
    """A validated problem file: its sections parsed, the robot built, the data not yet read.

    Attributes:
        config: the typed sections.
        robot: the robot with its attachments.
        truth: known true values ``{name: value}`` or ``None`` (for a scenario source, filled
            from the scenario's truth by :meth:`load_dataset` when the file gives none).
        parameters: the free parameters with the groups expanded (``None``: ``config``'s).
        heldout: the trajectory tails :meth:`load_dataset` held out (``validation.fraction``).
        mapping: the file's sections as read (for the posterior's record of its model).
        read_summaries: what the reader of every bag :meth:`load_dataset` and
            :meth:`load_validation` read did with its messages, per topic (read, used, skipped
            and why; notes such as CRCs it could not verify), in reading order.
        max_skipped_percent: the limit on skipped messages :meth:`load_dataset` was given
            (``None``: ``data.max_skipped_percent``).
    """

    config: ProblemConfig
    robot: RobotModel
    truth: dict[str, float] | None = None
    parameters: ParameterSpec | None = None
    heldout: Dataset | None = None
    mapping: dict[str, Any] | None = None
    read_summaries: list[ReadSummary] = field(default_factory=list)
    max_skipped_percent: float | None = None

    @property
    def path(self) -> Path | None:
        """The file (``None`` for a mapping)."""
        return self.config.path

    @property
    def name(self) -> str:
        """Problem name."""
        return self.config.name

    @property
    def origin(self) -> str:
        """How messages refer to the file."""
        return self.config.origin

    @property
    def spec(self) -> ParameterSpec:
        """The free parameters (names checked against ``robot``, groups expanded)."""
        return self.parameters if self.parameters is not None else self.config.parameters

    @property
    def estimator(self) -> EstimatorDefaults:
        """The estimator defaults."""
        return self.config.estimator

    def model_mapping(self) -> dict[str, Any]:
        """The file's sections without the data paths and the validation section, the URDF path
        absolute: the model a posterior was fitted with, which ``dynid validate`` rebuilds
        (``posterior.meta["problem_file"]``)."""
        mapping = copy.deepcopy(dict(self.mapping or {}))
        mapping.pop("validation", None)
        if isinstance(mapping.get("data"), Mapping):
            mapping["data"] = {k: v for k, v in mapping["data"].items() if k != "path"}
        if self.config.robot.urdf is not None:
            mapping["robot"] = {**mapping["robot"], "urdf": str(self.config.robot.urdf.resolve())}
        mapping.setdefault("name", self.name)
        return mapping

    def source_urdf(self) -> str | None:
        """The URDF text the problem's robot was built from (``None`` when it cannot be found)."""
        section = self.config.robot
        if section.urdf is not None:
            return section.urdf.read_text(encoding="utf-8")
        try:
            return robot_urdf(str(section.name)).read_text(encoding="utf-8")
        except ModelError:
            return None

    def load_dataset(
        self,
        bag: str | Path | None = None,
        *,
        holdout: bool = True,
        max_skipped_percent: float | None = None,
    ) -> Dataset:
        """Read and preprocess the data (``bag`` overrides ``data.path`` for bag sources).

        ``bag`` comes from the command line or a node parameter, so a relative one is relative to
        the working directory; ``data.path`` inside the file is relative to the file. With
        ``validation.fraction`` the tail of each trajectory is held out (:meth:`load_validation`)
        unless ``holdout`` is false.

        A bag is refused when its reader skipped more than ``max_skipped_percent`` (default:
        ``data.max_skipped_percent``, 5 %) of one topic's messages; what it read, used and skipped
        is kept in :attr:`read_summaries` either way.

        Raises:
            ProblemFileError: missing file, missing topic or channel, bad preprocessing, or a
                ``bag`` given to a problem whose data come from elsewhere (it would be ignored).
            BagReadError: a topic of the bag lost more messages than allowed (one line naming
                the bag, the topic, its counts and the reasons).
        """
        recording = None if bag is None else Path(bag).expanduser()
        self.max_skipped_percent = max_skipped_percent
        dataset, truth, summaries = self._read(recording)
        if self.truth is None:
            values = scalar_values(truth)
            self.truth = {k: v for k, v in values.items() if k in self.spec.names} or None
        dataset = self._preprocess_read(dataset, summaries)
        return self.hold_out(dataset) if holdout else dataset

    @property
    def holds_out_tails(self) -> bool:
        """Whether the held-out data are tails of the fitted data (``validation.fraction``), so
        they change with every dataset :meth:`hold_out` splits."""
        validation = self.config.validation
        return validation is not None and validation.fraction is not None

    def hold_out(self, dataset: Dataset) -> Dataset:
        """``dataset`` (preprocessed) without the held-out tails: with ``validation.fraction`` the
        last fraction of each trajectory becomes :attr:`heldout` (what :meth:`load_validation`
        returns) and the rest is returned, no sample in both; else ``dataset`` unchanged."""
        validation = self.config.validation
        if validation is None or validation.fraction is None:
            return dataset
        kept, held = [], []
        for traj in dataset:
            cut = round((1.0 - validation.fraction) * traj.num_samples)
            kept.append(traj.take(slice(0, cut)))
            held.append(traj.take(slice(cut, None)))
        self.heldout = Dataset(held)
        return Dataset(kept)

    def hold_out_tails(self, fraction: float) -> None:
        """Hold out the last ``fraction`` of each trajectory, as ``validation: {fraction: ...}``
        does, for a file that names no held-out data of its own (one that does keeps them).

        Raises:
            ProblemFileError: ``fraction`` outside (0, 1).
        """
        if not 0.0 < fraction < 1.0:
            raise ProblemFileError(f"held-out fraction must lie in (0, 1), got {fraction}")
        if self.config.validation is None:
            section = ValidationSection(fraction=fraction)
            self.config = dataclasses.replace(self.config, validation=section)

    def load_validation(self) -> Dataset | None:
        """The held-out data of ``validation``: its bags, or its ``data`` (the source's keys
        replaced), read and preprocessed like the data, else the tails :meth:`load_dataset` held
        out; ``None`` without a validation section.

        Raises:
            ProblemFileError: a held-out bag or file is missing, or lacks a topic or channel.
        """
        validation = self.config.validation
        if validation is None:
            return None
        if validation.source is not None:
            dataset, _, summaries = self._read(None, validation.source)
            return self._preprocess_read(dataset, summaries)
        if not validation.bags:
            return self.heldout
        trajectories = []
        for bag in validation.bags:
            dataset, _, summaries = self._read(bag)
            trajectories += list(self._preprocess_read(dataset, summaries))
        return Dataset(trajectories)

    def _read(
        self, recording: Path | None, source: DataSource | None = None
    ) -> tuple[Dataset, Mapping[str, Any], list[ReadSummary]]:
        """:func:`read_source` of ``source`` (default: the data section's); the summaries of the
        bags read are kept (also when reading fails part-way) and checked against the limit on
        skipped messages."""
        summaries: list[ReadSummary] = []
        try:
            with self._data_errors():
                source = source or self.config.data.source
                dataset, truth = read_source(source, recording, summaries)
        finally:
            self.read_summaries += summaries
        limit = self.max_skipped_percent
        if limit is None:
            limit = getattr(source, "max_skipped_percent", DEFAULT_MAX_SKIPPED_PERCENT)
        hint = (
            f"; data.max_skipped_percent of {self.origin} (or dynid fit --max-skipped-percent) "
            "allows more"
        )
        for summary in summaries:
            summary.check_skipped(limit, hint)
        return dataset, truth, summaries

    def _preprocess_read(self, dataset: Dataset, summaries: list[ReadSummary]) -> Dataset:
        """:meth:`preprocess`; a failure also names the messages the bags' reader skipped (a
        stamp going backwards shows there, not in the step that tripped over the gap)."""
        try:
            return self.preprocess(dataset)
        except ProblemFileError as exc:
            skipped = [
                f"{summary.path}: {topic.describe()}"
                for summary in summaries
                for topic in summary.topics.values()
                if topic.skipped
            ]
            if not skipped:
                raise
            raise ProblemFileError(
                f"{exc}; the bag reader skipped messages: {'; '.join(skipped)}"
            ) from None

    def preprocess(self, dataset: Dataset) -> Dataset:
        """Apply ``data``'s window, low-pass, passive joints, velocities, step, split and
        selection (:func:`dynid.data.pipeline.preprocess_dataset`)."""
        with self._data_errors():
            return preprocess_dataset(dataset, self.config.data.preprocessing, self.robot)

    def build(
        self,
        dataset: Dataset,
        *,
        device: str | None = None,
        backend: str | None = None,
        truth: dict[str, float] | None = None,
    ) -> Problem:
        """The :class:`Problem` on ``dataset`` (already preprocessed).

        Args:
            dataset: the trajectories.
            device, backend: override the file's ``simulation`` section.
            truth: true parameter values to report against, in place of the file's (``None``:
                the file's, if any).

        Raises:
            ProblemFileError: the data lack a joint, observed channel or control channel, or are
                not on one uniform time grid.
        """
        config, origin = self.config, self.origin
        observe = observation_model(config.observe, self.robot, origin)
        with self._data_errors():
            points = config.observe.frame_points
            dataset = Dataset([derive_frame_points(tr, points) for tr in dataset])
        control, control_names = control_model(config.control, self.robot, origin)
        with self._data_errors():
            dt = simulator_step(dataset)
        sim = config.simulation
        try:
            return Problem(
                robot=self.robot,
                spec=self.spec,
                dataset=dataset,
                dt=dt,
                control=control,
                control_names=control_names,
                observe=observe,
                obs_names=observe.names,
                likelihood=config.likelihood,
                substeps=sim.substeps,
                backend=backend or sim.backend,
                device=device or sim.device,
                name=self.name,
                truth=self.truth if truth is None else truth,
                simulator=simulator(sim, self.robot, origin, dt),
            )
        except ProblemError as exc:
            raise ProblemFileError.at(origin, "data", exc) from None

    @contextmanager
    def _data_errors(self) -> Iterator[None]:
        """Report the data pipeline's errors as this file's."""
        try:
            yield
        except DataSectionError as exc:
            raise ProblemFileError.at(self.origin, exc.key, exc.reason) from None


def read_problem_file(source: str | Path | Mapping[str, Any]) -> ProblemFile:
    """Read and validate a problem file (everything except the data, which come later).

    Args:
        source: path of the YAML file, or the parsed mapping.

    Raises:
        ProblemFileError: unknown keys, unknown robot, URDF or joint, invalid attachment,
            unknown parameter names, reversed bounds, unknown estimator (one line each).
    """
    mapping, path = read_yaml(source)
    config = parse_problem(mapping, path)
    truth = None if config.truth is None else dict(config.truth)
    robot = build_robot(config)
    return ProblemFile(config, robot, truth, build_spec(config, robot), mapping=mapping)


def load_problem(
    source: str | Path | Mapping[str, Any],
    *,
    bag: str | Path | None = None,
    dataset: Dataset | None = None,
    device: str | None = None,
) -> tuple[Problem, ProblemFile]:
    """Read a problem file, load its data and build the :class:`Problem`.

    Args:
        source: problem file path or mapping.
        bag: recording to read instead of ``data.path`` (bag sources).
        dataset: already loaded trajectories (skips reading; still preprocessed).
        device: torch device overriding ``simulation.device``.

    Returns:
        ``(problem, problem_file)``; ``problem_file.estimator`` holds the estimator defaults.
    """
    pf = read_problem_file(source)
    data = pf.preprocess(dataset) if dataset is not None else pf.load_dataset(bag)
    return pf.build(data, device=device), pf
