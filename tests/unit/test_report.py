"""The HTML report: figures embedded as real PNGs, parameter table, metadata, the sections in the
order of what the problem answers; parsed back, and rendered by a headless browser."""

from __future__ import annotations

import base64
import math
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_cli_fixtures import TRUTH, pendulum_config, pendulum_dataset, write_pendulum_problem

import dynid.fit
import dynid.report
from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.base import StepInfo
from dynid.estimators.impact_belief import TrajectoryBelief
from dynid.estimators.registry import resolve_estimator
from dynid.fit import Fit
from dynid.objective.torque import TorqueSamples
from dynid.posterior import Posterior
from dynid.problem_file import load_problem
from dynid.report import (
    REPORT_STYLE,
    History,
    page_html,
    parameter_rows,
    trajectory_mmd,
    write_belief_report,
    write_report,
)
from dynid.validation import validate


class _Page(HTMLParser):
    """Collects figures (id → PNG bytes), table cells by table id, the order of the sections
    and the figures in each, and external references."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, bytes] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.external: list[str] = []
        self.sections: list[str] = []  # "title" for the h1, then each section's id in order
        self.section_figures: dict[str, list[str]] = {}
        self._figure: str | None = None
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "h1":
            self.sections.append("title")
        elif tag == "section":
            self.sections.append(a.get("id") or "")
        elif tag == "figure":
            self._figure = a.get("id")
            where = self.sections[-1] if self.sections else ""
            self.section_figures.setdefault(where, []).append(self._figure or "")
        elif tag == "img":
            src = a.get("src") or ""
            prefix = "data:image/png;base64,"
            if src.startswith(prefix) and self._figure:
                self.figures[self._figure] = base64.b64decode(src[len(prefix) :])
            else:
                self.external.append(src)
        elif tag in ("script", "link"):
            self.external.append(a.get("src") or a.get("href") or tag)
        elif tag == "table":
            self._table = a.get("id")
            self.tables[self._table or ""] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "figure":
            self._figure = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def problem(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("report")
    problem, _ = load_problem(write_pendulum_problem(directory, steps=20))
    return problem


@pytest.fixture(scope="module")
def torque_problem_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The free double pendulum as a torque (inverse-dynamics) problem: its joints carry no
    effort, 2 s at 100 Hz, fitted with lsq."""
    directory = tmp_path_factory.mktemp("torque")
    free = pendulum_dataset(steps=200)[0]
    traj = Trajectory(t=free.t, q=free.q, dq=free.dq, effort=np.zeros_like(free.q),
                      joint_names=free.joint_names)  # fmt: skip
    Dataset([traj]).save_npz(directory / "dp.npz")
    config = pendulum_config(
        control={"type": "torque"},
        observe={"joints": "all"},
        likelihood={"kind": "inverse_dynamics", "torque_std": 0.01, "cutoff_hz": 20.0,
                    "stride": 2, "trim_s": 0.1},
        estimator={"name": "lsq"},
    )  # fmt: skip
    path = directory / "dp.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def torque_problem(torque_problem_file: Path):
    problem, _ = load_problem(torque_problem_file)
    return problem


def _posterior(seed: int = 0) -> Posterior:
    rng = np.random.default_rng(seed)
    particles = np.column_stack([rng.normal(0.3, 0.02, 12), rng.normal(0.5, 0.02, 12)])
    return Posterior(
        particles=particles,
        names=list(TRUTH),
        units=["N*m*s/rad"] * 2,
        estimator="csvgd",
        iteration=3,
        meta={"seed": seed},
    )


def test_report_has_figures_table_and_metadata(problem, tmp_path: Path) -> None:
    history = History()
    for k in range(1, 4):
        history.record(StepInfo(iteration=k, loss=10.0 / k, wall_s=0.1 * k, metrics={"d": 1.0}))
    history.record_mmd(3, 0.2)
    path = write_report(
        tmp_path / "r" / "report.html",
        _posterior(),
        problem=problem,
        history=history,
        meta={"device": "cpu", "wall_s": 1.5},
        max_rollouts=6,
    )
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    assert page.external == []
    assert set(page.figures) == {"pair-plot", "trajectory-density", "curves"}
    for fig, data in page.figures.items():
        width, height = _png_size(data)
        assert width > 300, fig
        assert height > 150, fig
    rows = {r[0]: r for r in page.tables["parameters"][1:]}
    assert set(rows) == set(TRUTH)
    header = page.tables["parameters"][0]
    inside = header.index("truth inside")
    assert rows["joint1/damping"][inside] == "yes"  # particles around the truth 0.3
    assert rows["joint2/damping"][inside] == "no"  # particles around 0.5, truth 0.1
    assert rows["joint1/damping"][header.index("lower")] == "0"
    assert rows["joint1/damping"][header.index("upper")] == "1"
    meta = {r[0]: r[1] for r in page.tables["metadata"][1:]}
    assert meta["device"] == "cpu"
    assert meta["seed"] == "0"
    assert meta["estimator"] == "csvgd"
    assert {"torch", "pin", "numpy", "python"} <= set(meta)


def test_report_without_problem_or_history(tmp_path: Path) -> None:
    path = write_report(tmp_path / "report.html", _posterior(), truth=TRUTH)
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    assert set(page.figures) == {"pair-plot"}
    assert not list(tmp_path.glob(".report.html*"))  # no temporary left behind


def test_every_page_is_built_on_one_skeleton_with_its_title_escaped() -> None:
    page = page_html("fit <a> & b", "<section id='one'></section>", "<section id='two'></section>")
    parsed = _Page()
    parsed.feed(page)
    assert parsed.sections == ["title", "one", "two"]
    assert page.startswith("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    assert "<title>fit &lt;a&gt; &amp; b</title>" in page
    assert "<h1>fit &lt;a&gt; &amp; b</h1>" in page
    assert f"<style>{REPORT_STYLE}</style>" in page
    assert page.endswith("</body></html>")


def test_the_belief_report_shows_one_figure_per_belief(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    states = rng.normal(0.0, 0.01, (5, 9, 6)) + np.linspace(0.0, 0.4, 9)[None, :, None]
    belief = TrajectoryBelief(states=states, radius_of_gyration=0.05, boundaries=(4,))
    observed = states.mean(axis=0)
    path = write_belief_report(
        tmp_path / "belief.html", [("first", belief, observed), ("second", belief, observed)]
    )
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    assert page.sections == ["title"]
    assert list(page.figures) == ["belief-0", "belief-1"]
    assert all(_png_size(png)[0] > 100 for png in page.figures.values())
    assert page.external == []


def test_parameter_rows_use_weights() -> None:
    post = Posterior(
        particles=np.array([[0.0], [1.0], [2.0]]),
        names=["a/mass"],
        units=["kg"],
        log_weights=np.log([0.0005, 0.999, 0.0005]),
    )
    (row,) = parameter_rows(post, lower=[0.0], upper=[3.0], truth={"a/mass": 1.0})
    assert row.mean == pytest.approx(1.0)
    assert row.q_low == row.q_high == 1.0
    assert row.truth_inside
    (row,) = parameter_rows(post, truth={"a/mass": 1.5})
    assert row.truth_inside is False
    assert math.isnan(row.lower)


def test_trajectory_mmd_is_smaller_near_the_truth(problem) -> None:
    near = Posterior(particles=np.array([[0.3, 0.1]] * 3), names=list(TRUTH), units=["", ""])
    far = Posterior(particles=np.array([[0.9, 0.9]] * 3), names=list(TRUTH), units=["", ""])
    assert trajectory_mmd(problem, near) < 1e-6
    assert trajectory_mmd(problem, far) > 10 * trajectory_mmd(problem, near) + 1e-3


def test_report_lists_the_recordings_read_with_skipped_messages(tmp_path: Path) -> None:
    """A partly invalid bag is not fitted silently: the report shows, per topic, the messages
    read, used and skipped with the reasons, and the reader's notes."""
    reasons = {"position: non-finite value": 3, "header.stamp earlier than the previous one": 1}
    recording = {
        "path": "run.mcap",
        "storage": "mcap",
        "topics": {
            "/joint_states": {
                "msgtype": "sensor_msgs/msg/JointState",
                "received": 40,
                "used": 36,
                "skipped": 4,
                "skipped_reasons": reasons,
                "missing_in_gaps": 4,
                "rate_hz": 100.0,
            },
            "/vicon/box/box": {
                "msgtype": "geometry_msgs/msg/PoseStamped",
                "received": 40,
                "used": 40,
                "skipped": 0,
                "skipped_reasons": {},
                "missing_in_gaps": 0,
            },
        },
        "notes": ["run.mcap: 1 of 1 chunks carry no CRC <unverified>"],
    }
    path = write_report(tmp_path / "report.html", _posterior(), meta={"recordings": [recording]})
    text = path.read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    header, *rows = page.tables["recordings"]
    assert header[:6] == ["bag", "topic", "type", "read", "used", "skipped"]
    by_topic = {row[1]: row for row in rows}
    js = by_topic["/joint_states"]
    assert js[3:6] == ["40", "36", "4"]
    assert "position: non-finite value: 3" in js[6]
    assert by_topic["/vicon/box/box"][5] == "0"
    assert by_topic["/vicon/box/box"][-1] == "—"
    assert "carry no CRC &lt;unverified&gt;" in text
    assert "recordings" not in {row[0] for row in page.tables["metadata"][1:]}


def _no_rollouts(*args: object, **kwargs: object) -> None:
    raise AssertionError("a torque problem was rolled out")


def _sections(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_the_report_answers_first_and_lists_coordinates_last(problem, tmp_path: Path) -> None:
    path = write_report(tmp_path / "report.html", _posterior(), problem=problem, max_rollouts=4)
    page = _sections(path.read_text(encoding="utf-8"))
    assert page.sections[:4] == ["title", "summary", "physical", "fit"]
    assert page.sections[-2:] == ["coordinates", "run"]
    assert page.section_figures["fit"] == ["trajectory-density"]
    assert page.section_figures["coordinates"] == ["pair-plot"]
    header, *rows = page.tables["physical-parameters"]
    assert header[:5] == ["link / joint", "quantity", "unit", "nominal", "identified"]
    assert [row[:2] for row in rows] == [["joint1", "damping"], ["joint2", "damping"]]


def test_a_torque_fit_writes_its_report_without_rollouts(
    torque_problem_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fit.write for a torque problem: no open-loop simulation anywhere, the torques predicted
    on the fitted data in the fit section, no trajectory MMD in the history."""
    monkeypatch.setattr(dynid.fit, "rollout_observations", _no_rollouts)
    monkeypatch.setattr(dynid.report, "rollout_observations", _no_rollouts)
    problem, pf = load_problem(torque_problem_file)
    fit = Fit(pf, problem, resolve_estimator("lsq", pf.estimator), mmd_every=1)
    result = fit.run()
    files = fit.write(result, tmp_path / "fit")
    page = _sections(files["report"].read_text(encoding="utf-8"))
    assert page.sections[:4] == ["title", "summary", "physical", "fit"]
    assert page.section_figures["fit"] == ["fitted-torques"]
    assert "trajectory-density" not in page.figures
    assert result.history.mmd == []


def test_the_held_out_figure_draws_the_data_validation_filtered(
    torque_problem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held-out trajectory is filtered once, by validation, for every model it scores and
    for the report's figure."""
    free = pendulum_dataset(steps=120)[0]
    held = Trajectory(t=free.t, q=free.q, dq=free.dq, effort=0.1 * np.ones_like(free.q),
                      joint_names=free.joint_names)  # fmt: skip
    filtered: list[Trajectory] = []
    of = TorqueSamples.of

    def counted(cls: type[TorqueSamples], problem, traj: Trajectory) -> TorqueSamples:
        filtered.append(traj)
        return of(problem, traj)

    monkeypatch.setattr(TorqueSamples, "of", classmethod(counted))
    posterior = _posterior()
    heldout = validate(torque_problem, posterior, [held], data=["held"])
    path = write_report(tmp_path / "report.html", posterior, problem=torque_problem,
                        heldout=heldout)  # fmt: skip
    assert sum(traj is held for traj in filtered) == 1
    page = _sections(path.read_text(encoding="utf-8"))
    assert page.section_figures["fit"] == ["heldout"]
    assert _png_size(page.figures["heldout"])[0] > 300


def _render(path: Path, profile: Path) -> str:
    """The DOM of ``path`` as headless chromium builds it (``--dump-dom``)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (scripts/setup installs Debian's chromium as root)")
    out = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", f"--user-data-dir={profile}", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return out.stdout


@pytest.mark.parametrize("kind", ["inverse_dynamics", "shooting"])
def test_a_browser_shows_the_summary_first(
    kind: str, problem, torque_problem, tmp_path: Path
) -> None:
    """Rendered by headless chromium, the first section after the title is the summary, the
    physical parameters come before the raw coordinates, and a torque problem's report has no
    rollouts."""
    fitted = torque_problem if kind == "inverse_dynamics" else problem
    path = write_report(tmp_path / "report.html", _posterior(), problem=fitted, max_rollouts=4)
    page = _sections(_render(path, tmp_path / "profile"))
    assert page.sections[:2] == ["title", "summary"]
    assert page.sections.index("physical") < page.sections.index("coordinates")
    has_rollouts = "trajectory-density" in page.figures
    assert has_rollouts is (kind == "shooting")


def test_the_summary_holds_the_held_out_scores_and_what_was_not_excited(
    problem, tmp_path: Path
) -> None:
    score = {"rmse_overall": 0.15, "samples": 10}
    validation = {
        "data": ["held.mcap"],
        "quantity": "torque",
        "identified": {**score, "rmse": {"joint1": 0.1, "joint2": 0.2},
                       "rmse_over_predicted_sigma": {"joint1": 0.9, "joint2": 1.1}},
        "nominal": {**score, "rmse": {"joint1": 0.7, "joint2": 0.8}},
    }  # fmt: skip
    posterior = _posterior()
    posterior.meta.update({"validation": validation, "unidentified": ["joint2/damping"]})
    path = write_report(tmp_path / "report.html", posterior, problem=problem, max_rollouts=2)
    text = path.read_text(encoding="utf-8")
    summary = text[: text.index("<section id='physical'>")]
    page = _sections(summary)
    assert [row[0] for row in page.tables["validation"][1:]] == [
        "identified",
        "… / predicted σ",
        "nominal",
    ]
    assert "held.mcap" in summary
    assert "0.9 to 1.1 per joint" in summary
    assert "(1 of 2 coordinates, at their start or prior): joint2: damping" in summary
    assert "truth lies inside the 95 % interval for 1 of 2 parameters" in summary
