"""Run reports: one self-contained HTML file per identification run.

The report answers what its problem asks first; its sections, in order (PNG figures embedded as
base64, no external resources; each section an HTML ``<section>`` with the id given):

- ``summary``: how the run ended; the held-out RMSE per joint (torque problems) or per observed
  channel (shooting problems) of the identified model beside the nominal one
  (``meta["validation"]``); whether the stated uncertainty is honest (held-out RMSE over the
  predicted σ, the truth inside the 95 % intervals when known, physical consistency); what the
  data did not excite (``meta["unidentified"]``, ``meta["identifiability"]``);
- ``physical``: per link, payload or joint the physical quantities (mass, centre of mass,
  inertia, friction, ...), nominal beside identified with σ and the prior's σ
  (:func:`dynid.physical.physical_rows`);
- ``fit``: for torque (inverse-dynamics) problems, measured against predicted torque per joint on
  the held-out data (on the fitted data when there is none); for shooting problems, the
  trajectory density of single-shooting rollouts of the particles against the recording
  (csvgd paper Fig. 5 style). A torque problem gets no rollouts: an open-loop simulation under
  the measured torques drifts whatever the model and says nothing of the fit;
- ``base``: the base parameters with their σ against the prior's (``meta["identifiability"]``);
- ``progress``: loss and trajectory-MMD curves, when the run took more than one iteration;
- ``recordings``: per bag and topic the messages read, used and skipped with the reasons, and the
  reader's notes (``meta["recordings"]``);
- ``coordinates``: the estimator's own coordinates (mean ± std, MAP, 95 % interval, bounds,
  units, truth and whether it lies inside the interval) and, for a posterior of several
  particles, their pair plot;
- ``run``: run metadata (versions, seed, device, wall time, settings).
"""

from __future__ import annotations

import base64
import html
import io
import math
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynid.atomic import atomic_write_text
from dynid.metrics import mmd
from dynid.physical import PhysicalRow, physical_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from dynid.estimators.base import StepInfo
    from dynid.estimators.impact_belief import TrajectoryBelief
    from dynid.objective.torque import TorqueSamples
    from dynid.online.recording import TrackRun
    from dynid.posterior import Posterior
    from dynid.problem import Problem
    from dynid.validation import ValidationReport

__all__ = [
    "REPORT_STYLE",
    "History",
    "ParameterRow",
    "belief_plot",
    "every_point",
    "figure_html",
    "heldout_plot",
    "page_html",
    "parameter_rows",
    "rollout_mmd",
    "rollout_observations",
    "section_html",
    "track_plot",
    "trajectory_mmd",
    "versions",
    "write_belief_report",
    "write_report",
    "write_track_report",
]

_MAX_PAIR_DIMS = 10
_MAX_CHANNELS = 12
_MAX_POINTS = 1500  # samples drawn per curve: enough for a figure a few hundred pixels wide
_CREDIBLE = 0.95


@dataclass
class History:
    """Per-iteration progress of a run, for the loss and MMD curves.

    Attributes:
        iterations: iteration number after each recorded step.
        loss: the estimator's loss at those iterations.
        metrics: further per-step figures by name (``StepInfo.metrics``).
        mmd_iterations: iterations at which the trajectory MMD was evaluated.
        mmd: squared trajectory MMD (simulated vs recorded) at those iterations.
    """

    iterations: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    mmd_iterations: list[int] = field(default_factory=list)
    mmd: list[float] = field(default_factory=list)

    def record(self, info: StepInfo) -> None:
        """Append one ``StepInfo``."""
        self.iterations.append(int(info.iteration))
        self.loss.append(float(info.loss))
        for key, value in info.metrics.items():
            self.metrics.setdefault(key, []).append(float(value))

    def record_mmd(self, iteration: int, value: float) -> None:
        """Append one trajectory-MMD evaluation."""
        self.mmd_iterations.append(int(iteration))
        self.mmd.append(float(value))

    def as_dict(self) -> dict[str, Any]:
        """A JSON/YAML-ready copy."""
        return {
            "iterations": list(self.iterations),
            "loss": list(self.loss),
            "metrics": {k: list(v) for k, v in self.metrics.items()},
            "mmd_iterations": list(self.mmd_iterations),
            "mmd": list(self.mmd),
        }


@dataclass
class ParameterRow:
    """One line of the parameter table (SI units).

    Attributes:
        name, unit: parameter name and unit.
        mean, std, map: posterior mean, standard deviation and MAP particle value.
        q_low, q_high: bounds of the central 95 % credible interval of the marginal: particle
            quantiles, or mean ± 1.96 std where the estimator supplies a covariance (LM, the
            proprioceptive fit).
        lower, upper: prior bounds (``nan`` when unknown).
        truth: true value or ``None``.
        identified: ``False`` when the estimator reports that the data did not excite the
            parameter (``posterior.meta["unidentified"]``): its value is the start, not an
            estimate.
    """

    name: str
    unit: str
    mean: float
    std: float
    map: float
    q_low: float
    q_high: float
    lower: float = math.nan
    upper: float = math.nan
    truth: float | None = None
    identified: bool = True

    @property
    def truth_inside(self) -> bool | None:
        """Whether the truth lies in the 95 % credible interval (widened by 1e-9 relative)."""
        if self.truth is None:
            return None
        slack = 1e-9 * max(1.0, abs(self.truth))
        return self.q_low - slack <= self.truth <= self.q_high + slack


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(x)
    cdf = np.cumsum(w[order])
    cdf /= cdf[-1]
    return float(x[order][min(int(np.searchsorted(cdf, q)), x.size - 1)])


def parameter_rows(
    posterior: Posterior,
    *,
    lower: Sequence[float] | None = None,
    upper: Sequence[float] | None = None,
    truth: Mapping[str, float] | None = None,
) -> list[ParameterRow]:
    """The parameter table of ``posterior`` with bounds and truth where given."""
    mean, std, best = posterior.mean(), posterior.std(), posterior.map()
    w = posterior.weights
    alive = w > 0
    rows = []
    tail = (1.0 - _CREDIBLE) / 2.0
    z = float(NormalDist().inv_cdf(1.0 - tail))
    unidentified = set(posterior.meta.get("unidentified", ()))
    for j, name in enumerate(posterior.names):
        x = posterior.particles[alive, j]
        if posterior.covariance is not None:
            q_low, q_high = float(mean[j] - z * std[j]), float(mean[j] + z * std[j])
        else:
            q_low = _weighted_quantile(x, w[alive], tail)
            q_high = _weighted_quantile(x, w[alive], 1.0 - tail)
        rows.append(
            ParameterRow(
                name=name,
                unit=posterior.units[j],
                mean=float(mean[j]),
                std=float(std[j]),
                map=float(best[j]),
                q_low=q_low,
                q_high=q_high,
                lower=float(lower[j]) if lower is not None else math.nan,
                upper=float(upper[j]) if upper is not None else math.nan,
                truth=None if truth is None or name not in truth else float(truth[name]),
                identified=name not in unidentified,
            )
        )
    return rows


def rollout_observations(
    problem: Problem, posterior: Posterior, *, max_particles: int = 32, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Single-shooting rollouts of posterior particles on the problem's first trajectory.

    Particles are drawn by weight (without replacement when enough carry weight).

    Returns:
        ``(sim [n, T, k], data [T, k], t [T])``: simulated and recorded observations (channel
        units) and times from the trajectory start (s).
    """
    traj = problem.dataset[0]
    one = problem.with_dataset([traj])
    w = posterior.weights
    alive = np.flatnonzero(w > 0)
    rng = np.random.default_rng(seed)
    n = min(max_particles, alive.size)
    pick = rng.choice(alive, size=n, replace=False, p=w[alive] / w[alive].sum())
    cols = [posterior.names.index(name) for name in problem.spec.names]
    theta = torch.as_tensor(posterior.particles[np.ix_(pick, cols)], dtype=torch.float64)
    with torch.no_grad():
        sim = one.objective.simulate(theta, traj).cpu().numpy()
    data = one.targets(traj).cpu().numpy()
    return sim, data, traj.t - traj.t[0]


def rollout_mmd(problem: Problem, sim: np.ndarray, data: np.ndarray) -> float:
    """Squared MMD between rollouts ``sim [n, T, k]`` and the recording ``data [T, k]``.

    Channels are scaled by the observation noise ``obs_std`` so that they weigh alike; diverged
    (non-finite) rollouts are dropped, and the MMD is ``nan`` when none is left.
    """
    scale = problem.obs_std.cpu().numpy()
    ok = np.isfinite(sim).all(axis=(1, 2))
    if not ok.any():
        return math.nan
    return mmd(sim[ok] / scale, (data / scale)[None])


def trajectory_mmd(problem: Problem, posterior: Posterior, *, max_particles: int = 32) -> float:
    """Squared MMD (:func:`rollout_mmd`) of the particles' rollouts on the first trajectory."""
    sim, data, _ = rollout_observations(problem, posterior, max_particles=max_particles)
    return rollout_mmd(problem, sim, data)


def versions() -> dict[str, str]:
    """Versions of Python and the libraries a run depends on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("dynid", "torch", "pin", "numpy", "scipy", "matplotlib"):
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


# ------------------------------------------------------------------------------------ figures
def every_point(samples: int) -> slice:
    """A slice keeping at most :data:`_MAX_POINTS` of ``samples`` evenly spaced points."""
    return slice(None, None, max(1, math.ceil(samples / _MAX_POINTS)))


def _new_figure(**kwargs: Any) -> Figure:
    """A matplotlib figure on the Agg canvas; matplotlib is imported on the first figure, so a
    program that draws none never loads it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def pair_plot(posterior: Posterior, truth: Mapping[str, float] | None = None) -> Figure:
    """Pair plot of the (first ten) parameters: histograms on the diagonal, scatter below."""
    names = posterior.names[:_MAX_PAIR_DIMS]
    m = len(names)
    size = max(2.2 * m, 3.0)
    fig = _new_figure(figsize=(size, size))
    # fixed margins (inches) instead of a layout engine, which would take most of the drawing time
    fig.subplots_adjust(left=0.9 / size, right=1.0 - 0.2 / size, bottom=0.7 / size,
                        top=1.0 - 0.6 / size, wspace=0.35, hspace=0.35)  # fmt: skip
    w = posterior.weights
    alive = w > 0
    x = posterior.particles[alive]
    for i in range(m):
        for j in range(i + 1):
            ax = fig.add_subplot(m, m, i * m + j + 1)
            if i == j:
                ax.hist(x[:, i], bins=min(30, max(5, x.shape[0] // 2)), weights=w[alive],
                        color="tab:blue", alpha=0.8)  # fmt: skip
                if truth and names[i] in truth:
                    ax.axvline(truth[names[i]], color="tab:red", lw=2)
                ax.set_yticks([])
            else:
                ax.scatter(x[:, j], x[:, i], s=8, alpha=0.6, color="tab:blue")
                if truth and names[i] in truth and names[j] in truth:
                    ax.scatter([truth[names[j]]], [truth[names[i]]], marker="*", s=160,
                               color="tab:red", edgecolor="k", zorder=3)  # fmt: skip
            if i == m - 1:
                ax.set_xlabel(f"{names[j]} [{posterior.units[j]}]", fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(f"{names[i]} [{posterior.units[i]}]", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle("posterior particles (red: truth)")
    return fig


def density_plot(sim: np.ndarray, data: np.ndarray, t: np.ndarray, names: Sequence[str]) -> Figure:
    """Trajectory density: 5–95 % and 25–75 % bands and the rollouts against the recording."""
    k = min(len(names), _MAX_CHANNELS)
    cols = min(3, k)
    rows = math.ceil(k / cols)
    fig = _new_figure(figsize=(4.2 * cols, 2.6 * rows), layout="constrained")
    finite = np.isfinite(sim).all(axis=(1, 2))
    keep = every_point(t.size)
    sim, data, t = sim[finite][:, keep], data[keep], t[keep]
    for c in range(k):
        ax = fig.add_subplot(rows, cols, c + 1)
        if sim.shape[0]:
            lo, q1, q3, hi = np.percentile(sim[:, :, c], [5, 25, 75, 95], axis=0)
            ax.fill_between(t, lo, hi, color="tab:red", alpha=0.2, lw=0)
            ax.fill_between(t, q1, q3, color="tab:red", alpha=0.35, lw=0)
            for run in sim[: min(16, sim.shape[0]), :, c]:
                ax.plot(t, run, color="tab:red", lw=0.5, alpha=0.4)
        ax.plot(t, data[:, c], color="k", lw=1.2)
        ax.set_title(names[c], fontsize=8)
        ax.tick_params(labelsize=7)
        if c >= k - cols:
            ax.set_xlabel("t [s]", fontsize=8)
    fig.suptitle(f"rollouts of {sim.shape[0]} particles (red) vs data (black)")
    return fig


def curves_plot(history: History) -> Figure:
    """Loss (and trajectory MMD, when evaluated) over the iterations."""
    has_mmd = bool(history.mmd)
    fig = _new_figure(figsize=(10 if has_mmd else 5.5, 3.4), layout="constrained")
    ax = fig.add_subplot(1, 2 if has_mmd else 1, 1)
    loss = np.asarray(history.loss, dtype=np.float64)
    ax.plot(history.iterations, loss, color="tab:blue")
    if np.all(loss[np.isfinite(loss)] > 0) and np.isfinite(loss).any():
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss (−log posterior)")
    ax.set_title("loss")
    if has_mmd:
        ax2 = fig.add_subplot(1, 2, 2)
        ax2.plot(history.mmd_iterations, history.mmd, marker="o", color="tab:green")
        ax2.set_xlabel("iteration")
        ax2.set_ylabel("MMD² (sim vs data)")
        ax2.set_title("trajectory MMD")
    return fig


# --------------------------------------------------------------------------------------- HTML
REPORT_STYLE = """
body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 8px;
text-align:right}th{background:#eee}td.name{text-align:left;font-family:monospace}
img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}.no{color:#b00}.yes{color:#070}
"""


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.6g}"


def _table(rows: list[ParameterRow]) -> str:
    head = (
        "<tr><th>parameter</th><th>unit</th><th>mean</th><th>± std</th><th>MAP</th>"
        "<th>95 % interval</th><th>lower</th><th>upper</th><th>truth</th><th>truth inside</th>"
        "<th>identified</th></tr>"
    )
    body = []
    for r in rows:
        inside = r.truth_inside
        mark = "—" if inside is None else ("yes" if inside else "no")
        css = "" if inside is None else (" class='yes'" if inside else " class='no'")
        seen = "yes" if r.identified else "<span class='no'>not excited by the data</span>"
        body.append(
            f"<tr><td class='name'>{html.escape(r.name)}</td><td>{html.escape(r.unit)}</td>"
            f"<td>{_num(r.mean)}</td><td>{_num(r.std)}</td><td>{_num(r.map)}</td>"
            f"<td>[{_num(r.q_low)}, {_num(r.q_high)}]</td><td>{_num(r.lower)}</td>"
            f"<td>{_num(r.upper)}</td><td>{_num(r.truth)}</td><td{css}>{mark}</td>"
            f"<td>{seen}</td></tr>"
        )
    return f"<table id='parameters'>{head}{''.join(body)}</table>"


def _meta_table(meta: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td class='name'>{html.escape(str(k))}</td>"
        f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
        for k, v in meta.items()
    )
    return f"<table id='metadata'><tr><th>key</th><th>value</th></tr>{rows}</table>"


def _recordings(recordings: Sequence[Mapping[str, Any]]) -> str:
    """The bags read (``meta["recordings"]``, :meth:`dynid.data.ReadSummary.as_dict`): per
    topic what was read, used and skipped and why, then the reader's notes."""
    head = (
        "<tr><th>bag</th><th>topic</th><th>type</th><th>read</th><th>used</th><th>skipped</th>"
        "<th>skipped because</th><th>missing in gaps</th><th>Hz</th></tr>"
    )
    rows, notes = [], []
    for record in recordings:
        bag = html.escape(str(record.get("path", "")))
        topics = record.get("topics") or {}
        for topic, counts in topics.items() if isinstance(topics, Mapping) else ():
            reasons = counts.get("skipped_reasons") or {}
            why = "<br>".join(
                f"{html.escape(str(reason))}: {n}" for reason, n in dict(reasons).items()
            )
            skipped = counts.get("skipped", 0)
            css = " class='no'" if skipped else ""
            rate = counts.get("rate_hz")
            rows.append(
                f"<tr><td class='name'>{bag}</td><td class='name'>{html.escape(str(topic))}</td>"
                f"<td class='name'>{html.escape(str(counts.get('msgtype', '')))}</td>"
                f"<td>{counts.get('received', '')}</td><td>{counts.get('used', '')}</td>"
                f"<td{css}>{skipped}</td><td style='text-align:left'>{why}</td>"
                f"<td>{counts.get('missing_in_gaps', '')}</td>"
                f"<td>{'—' if rate is None else _num(float(rate))}</td></tr>"
            )
        notes += [f"{bag}: {html.escape(str(n))}" for n in record.get("notes") or ()]
        if record.get("announced_messages") is not None:
            notes.append(f"{bag}: truncated: {record['announced_messages']} messages announced")
    table = f"<table id='recordings'>{head}{''.join(rows)}</table>"
    return table + ("<ul>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>" if notes else "")


def _validation(validation: Mapping[str, Any]) -> str:
    """Held-out torque (or simulation) RMSE per model and joint (or channel),
    ``meta["validation"]``."""
    scores = {k: v for k, v in validation.items() if isinstance(v, Mapping) and "rmse" in v}
    if not scores:
        return ""
    joints = list(next(iter(scores.values()))["rmse"])
    head = "<tr><th>model</th>" + "".join(f"<th>{html.escape(j)}</th>" for j in joints)
    rows = [head + "<th>overall</th></tr>"]
    for label, score in scores.items():
        cells = "".join(f"<td>{_num(float(score['rmse'][j]))}</td>" for j in joints)
        rows.append(f"<tr><td class='name'>{html.escape(str(label))}</td>{cells}"
                    f"<td>{_num(float(score['rmse_overall']))}</td></tr>")  # fmt: skip
        ratio = score.get("rmse_over_predicted_sigma")
        if isinstance(ratio, Mapping):
            cells = "".join(f"<td>{_num(float(ratio[j]))}</td>" for j in joints)
            rows.append(f"<tr><td class='name'>… / predicted σ</td>{cells}<td></td></tr>")
    data = ", ".join(html.escape(str(d)) for d in validation.get("data") or ())
    what = (
        "simulation RMSE (channel units; overall: RMS of residual / obs_std)"
        if validation.get("quantity") == "simulation"
        else "torque RMSE (N·m or N)"
    )
    return (f"<p>{what} on {data or 'the held-out data'}</p>"
            f"<table id='validation'>{''.join(rows)}</table>")  # fmt: skip


def _identifiability(ident: Mapping[str, Any]) -> str:
    """The base parameters (``meta["identifiability"]``): value, σ, prior σ, identified."""
    rows = ["<tr><th>base parameter</th><th>value</th><th>± std</th><th>prior std</th>"
            "<th>identified</th></tr>"]  # fmt: skip
    for r in ident.get("base_parameters") or ():
        seen = "yes" if r.get("identified") else "<span class='no'>at the prior</span>"
        rows.append(
            f"<tr><td class='name'>{html.escape(str(r['expression']))}</td>"
            f"<td>{_num(float(r['value']))}</td><td>{_num(float(r['std']))}</td>"
            f"<td>{_num(float(r['prior_std']))}</td><td>{seen}</td></tr>"
        )
    text = (f"<p>{ident.get('rank')} combinations of {ident.get('num_standard')} standard "
            "parameters are determined by the data (numerical base parameters, QR of the "
            "stacked regressor).</p>")  # fmt: skip
    for key, label in (("unexcited", "no effect on the data (they stay at the prior)"),
                       ("combined", "known only in combination"),
                       ("at_prior", "stay at the prior")):  # fmt: skip
        names = ident.get(key) or ()
        if names:
            text += f"<p><b>{label}:</b> {html.escape(', '.join(map(str, names)))}</p>"
    return text + f"<table id='base-parameters'>{''.join(rows)}</table>"


def _physical(rows: Sequence[PhysicalRow]) -> str:
    """Nominal beside identified, one group of rows per link, attachment or joint
    (:func:`physical_rows`)."""
    head = (
        "<tr><th>link / joint</th><th>quantity</th><th>unit</th><th>nominal</th>"
        "<th>identified</th><th>± std</th><th>prior std</th></tr>"
    )
    size: dict[str, int] = {}
    for r in rows:
        size[r.owner] = size.get(r.owner, 0) + 1
    body, previous = [], None
    for r in rows:
        owner = ""
        if r.owner != previous:
            owner = f"<td class='name' rowspan='{size[r.owner]}'>{html.escape(r.owner)}</td>"
            previous = r.owner
        seen = "" if r.identified else " <span class='no'>(not excited by the data)</span>"
        body.append(
            f"<tr>{owner}<td class='name'>{html.escape(r.quantity)}{seen}</td>"
            f"<td>{html.escape(r.unit)}</td><td>{_num(r.nominal)}</td><td>{_num(r.value)}</td>"
            f"<td>{_num(r.std)}</td><td>{_num(r.prior_std)}</td></tr>"
        )
    return f"<table id='physical-parameters'>{head}{''.join(body)}</table>"


def _by_owner(names: Sequence[str], among: Sequence[str] = ()) -> str:
    """``a/x, a/y, b/z`` as ``a: x, y; b: z`` (escaped); an owner with more than three names
    as ``a: k of n`` when ``among`` (every name) holds its ``n``."""
    groups: dict[str, list[str]] = {}
    for name in names:
        owner, _, quantity = str(name).rpartition("/")
        groups.setdefault(owner, []).append(quantity)
    total: dict[str, int] = {}
    for name in among:
        owner = str(name).rpartition("/")[0]
        total[owner] = total.get(owner, 0) + 1
    out = []
    for owner, quantities in groups.items():
        listed = ", ".join(quantities)
        if len(quantities) > 3 and owner in total:
            listed = f"{len(quantities)} of {total[owner]}"
        out.append(f"{owner}: {listed}" if owner else listed)
    return html.escape("; ".join(out))


def _summary(posterior: Posterior, info: Mapping[str, Any], rows: Sequence[ParameterRow]) -> str:
    """How the run ended, the held-out scores, the honesty of the uncertainty and what the data
    did not excite (module docstring)."""
    ran = (
        f"{html.escape(str(posterior.estimator))}: {posterior.iteration} iterations, "
        f"{posterior.num_particles} particle{'s' if posterior.num_particles != 1 else ''}"
    )
    parts = [f"<p>{ran}.</p>"]
    if info.get("error"):
        parts.append(
            f"<p class='no'>The run failed: {html.escape(str(info['error']))}; the "
            "posterior shown is the last one reached.</p>"
        )
    elif info.get("interrupted"):
        parts.append(
            "<p class='no'>The run was interrupted; the posterior shown is the one reached.</p>"
        )
    validation = info.get("validation")
    if isinstance(validation, Mapping):
        parts.append(_validation(validation))
        ratio = (validation.get("identified") or {}).get("rmse_over_predicted_sigma")
        if isinstance(ratio, Mapping) and ratio:
            low, high = min(map(float, ratio.values())), max(map(float, ratio.values()))
            parts.append(
                f"<p>Held-out RMSE over the predicted σ: {_num(low)} to {_num(high)} "
                "per joint (about 1 when the stated uncertainty is honest).</p>"
            )
    elif info.get("validation_error"):
        parts.append(
            "<p class='no'>The held-out data could not be scored: "
            f"{html.escape(str(info['validation_error']))}</p>"
        )
    else:
        parts.append(
            "<p>No held-out data were scored (the problem file has no "
            "<code>validation</code> section).</p>"
        )
    judged = [r.truth_inside for r in rows if r.truth_inside is not None]
    if judged:
        parts.append(
            f"<p>The truth lies inside the 95 % interval for {sum(judged)} of "
            f"{len(judged)} parameters.</p>"
        )
    eigen = info.get("min_pseudo_inertia_eigenvalue")
    if isinstance(eigen, Mapping) and eigen:
        least = min(map(float, eigen.values()))
        verdict = "physically consistent" if least > 0 else "not physically consistent"
        parts.append(f"<p>Bodies {verdict}: smallest pseudo-inertia eigenvalue {_num(least)}.</p>")
    unexcited = list(info.get("unidentified") or ())
    if unexcited:
        parts.append(
            f"<p><b>Not excited by the data</b> ({len(unexcited)} of {posterior.dim} "
            f"coordinates, at their start or prior): {_by_owner(unexcited, posterior.names)}</p>"
        )
    ident = info.get("identifiability")
    if isinstance(ident, Mapping) and ident.get("unexcited"):
        parts.append(
            "<p><b>Standard parameters with no effect on the data:</b> "
            f"{_by_owner(ident['unexcited'])}</p>"
        )
    return "".join(parts)


def heldout_plot(
    problem: Problem,
    posterior: Posterior,
    samples: TorqueSamples,
    residuals: tuple[np.ndarray, np.ndarray] | None = None,
) -> Figure:
    """Measured against predicted torque per joint on one trajectory (held out, or one fitted
    on) for a torque problem: the identified model (the posterior's MAP) and the nominal one,
    every sample of the filtered data, at most :data:`_MAX_POINTS` of them drawn.

    ``samples``: the trajectory filtered as scored (:func:`dynid.validation.heldout_samples`);
    ``residuals``: the identified and the nominal model's ``[S, nv]`` residuals on them when
    already scored (:attr:`dynid.validation.Score.residuals`); computed here otherwise.
    """
    from dynid.validation import sample_residuals

    p = problem.parameters(problem.tensor(posterior.map()[None]))
    with torch.no_grad():
        measured = problem.control(p, samples.q[None], samples.v[None], samples.u[None])[0]
    measured = measured.cpu().numpy()
    if residuals is None:
        nominal_theta = problem.spec.nominal_theta(problem.robot).numpy()
        residuals = (
            sample_residuals(problem, posterior.map(), [samples])[0],
            sample_residuals(problem, nominal_theta, [samples])[0],
        )
    fitted, nominal = measured - residuals[0], measured - residuals[1]
    keep = every_point(measured.shape[0])
    t = (np.arange(measured.shape[0]) * problem.dt)[keep]
    measured, fitted, nominal = measured[keep], fitted[keep], nominal[keep]
    nv = measured.shape[1]
    cols = min(2, nv)
    rows = math.ceil(nv / cols)
    width, height = 5.0 * cols, 1.9 * rows
    fig = _new_figure(figsize=(width, height))
    # fixed margins (inches) instead of a layout engine, which would triple the drawing time
    fig.subplots_adjust(left=0.6 / width, right=1.0 - 0.15 / width, bottom=0.45 / height,
                        top=1.0 - 0.3 / height, wspace=0.2, hspace=0.9)  # fmt: skip
    for j in range(nv):
        ax = fig.add_subplot(rows, cols, j + 1)
        ax.plot(t, measured[:, j], color="k", lw=1.2, label="measured")
        ax.plot(t, fitted[:, j], color="tab:red", lw=0.9, label="identified")
        ax.plot(t, nominal[:, j], color="tab:blue", lw=0.7, ls="--", label="nominal")
        ax.set_title(problem.robot.joint_names[j], fontsize=9)
        ax.set_xlabel("t (s)")
        if j == 0:
            ax.legend(fontsize=7)
    return fig


def figure_html(fig_id: str, caption: str, fig: Figure) -> str:
    """A ``<figure>`` with ``fig`` as an inline PNG and ``caption``."""
    return (
        f"<figure id='{fig_id}'><img alt='{html.escape(caption)}' "
        f"src='data:image/png;base64,{_png(fig)}'><figcaption>{html.escape(caption)}"
        "</figcaption></figure>"
    )


def belief_plot(belief: TrajectoryBelief, observed: np.ndarray, title: str = "") -> Figure:
    """Residual-contact paper Fig. 1 style: the recorded path of the square's centre in the
    ``x``-``z`` plane with the belief's particles, coloured by dynamic step (contact to contact).

    Args:
        belief: trajectory particles of :func:`dynid.estimators.impact_belief.propagate_belief`.
        observed: ``[T + 1, ≥2]`` recorded states (``x, z`` first, m).
        title: figure title.
    """
    fig = _new_figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    states = belief.states
    segments = belief.dynamic_steps()
    colours = ["tab:red", "tab:green", "tab:blue", "tab:orange", "tab:purple", "tab:brown"]
    for i, (first, last) in enumerate(segments):
        xs = states[:, first : last + 1, 0].ravel()
        zs = states[:, first : last + 1, 1].ravel()
        ax.scatter(xs, zs, s=2, alpha=0.25, color=colours[i % len(colours)], lw=0)
    ax.plot(observed[:, 0], observed[:, 1], color="k", lw=1.2, label="recorded")
    ax.axhline(0.0, color="0.4", lw=0.8)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("z [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title or f"{states.shape[0]} particles, colour: dynamic step", fontsize=9)
    return fig


def write_belief_report(
    path: str | Path,
    beliefs: Sequence[tuple[str, TrajectoryBelief, np.ndarray]],
    *,
    title: str = "dynid stochastic simulation",
) -> Path:
    """Write an HTML page of :func:`belief_plot` figures, one per ``(caption, belief,
    observed)``, atomically, and return its path."""
    figures = (
        figure_html(f"belief-{i}", caption, belief_plot(belief, observed, caption))
        for i, (caption, belief, observed) in enumerate(beliefs)
    )
    return atomic_write_text(path, page_html(title, *figures))


def track_plot(run: TrackRun, truth: Mapping[str, float] | None = None) -> Figure:
    """The payload tracker's running estimate (:func:`dynid.online.recording.track_trajectory`):
    mass and centre of mass over time with their 95 % band, the detected changes as vertical
    lines (solid: detection, dotted: estimated change time) and the true values where known.
    The axes span the values while the quantity was excited (an unexcited one is the prior's).
    """
    names = run.names[:4]
    times = np.array([u.estimate.time for u in run.updates])
    values = np.array([u.estimate.values[:4] for u in run.updates])
    std = np.array([u.estimate.std[:4] for u in run.updates])
    z = NormalDist().inv_cdf(0.5 + _CREDIBLE / 2)
    fig = _new_figure(figsize=(7.5, 6.0), layout="constrained")
    for k, name in enumerate(names):
        ax = fig.add_subplot(len(names), 1, k + 1)
        ax.fill_between(times, values[:, k] - z * std[:, k], values[:, k] + z * std[:, k],
                        color="tab:blue", alpha=0.25, lw=0, label="95 % band")  # fmt: skip
        ax.plot(times, values[:, k], color="tab:blue", lw=1.0, label="estimate")
        if truth is not None and name in truth:
            ax.axhline(truth[name], color="k", lw=0.8, ls="--", label="truth (carried)")
        for event in run.events:
            ax.axvline(event.detect_time, color="tab:red", lw=0.8)
            ax.axvline(event.change_time, color="tab:red", lw=0.8, ls=":")
        excited = np.array([name not in u.estimate.unexcited for u in run.updates])
        low, high = np.nanpercentile(values[excited, k] if excited.any() else values[:, k], [1, 99])
        pad = 0.2 * (high - low) + 1e-3
        ax.set_ylim(low - pad, high + pad)
        ax.set_ylabel(name.split("/")[-1] + (" [kg]" if k == 0 else " [m]"), fontsize=8)
        if k == 0:
            ax.legend(loc="upper right", fontsize=7)
    ax.set_xlabel("time [s]")
    return fig


def write_track_report(
    path: str | Path, run: TrackRun, *, title: str, truth: Mapping[str, float] | None = None
) -> Path:
    """Write the tracker's HTML page (:func:`track_plot`, the changes detected, the final
    estimate and the speed) atomically, and return its path."""
    final = run.updates[-1].estimate
    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{_num(v)}</td><td>{_num(s)}</td>"
        f"<td>{'' if truth is None or n not in truth else _num(truth[n])}</td>"
        f"<td>{'unexcited' if n in final.unexcited else ''}</td></tr>"
        for n, v, s in zip(run.names, final.values, final.std, strict=True)
    )
    events = "".join(
        f"<li>change at {e.change_time:.3f} s, detected at {e.detect_time:.3f} s on "
        f"{html.escape(e.joint)}: mass {e.before.mass:.4g} kg before, "
        + ("the recording ended first" if e.after is None else f"{e.after.mass:.4g} kg after")
        + "</li>"
        for e in run.events
    )
    speed = run.duration_s / max(run.cpu_s, 1e-9)
    page = page_html(
        title,
        figure_html(
            "track",
            "running estimate with its 95 % band; red: detected changes",
            track_plot(run, truth),
        ),
        section_html("events", "Detected changes", f"<ul>{events or '<li>none</li>'}</ul>"),
        section_html(
            "final",
            f"Estimate at {final.time:.3f} s",
            "<table><tr><th>parameter</th><th>value</th><th>σ</th><th>truth</th><th></th>"
            f"</tr>{rows}</table>",
        ),
        section_html(
            "speed",
            "Speed",
            f"<p>{run.samples} samples, {run.duration_s:.1f} s of "
            f"recording in {run.wall_s:.2f} s wall, {run.cpu_s:.2f} s CPU: {speed:.1f}× real "
            "time on one core.</p>",
        ),
    )
    return atomic_write_text(path, page)


def section_html(section_id: str, heading: str, *body: str) -> str:
    """A ``<section>`` with a heading and the HTML ``body`` parts."""
    return f"<section id='{section_id}'><h2>{html.escape(heading)}</h2>{''.join(body)}</section>"


def page_html(title: str, *parts: str) -> str:
    """A self-contained HTML page: ``title`` (plain text, escaped here) as the page title and
    the ``<h1>``, :data:`REPORT_STYLE` inline, then the HTML ``parts`` in order, one a line."""
    head = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{REPORT_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
    )
    return "\n".join([head, *parts, "</body></html>"])


def _fit_figure(
    problem: Problem,
    posterior: Posterior,
    heldout: ValidationReport | None,
    rollouts: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    max_rollouts: int,
) -> str:
    """The ``fit`` section's figure: torques on held-out (else fitted) data for a torque
    problem, the rollouts' trajectory density for a shooting one."""
    if problem.likelihood.kind == "inverse_dynamics":
        if heldout is not None and heldout.quantity == "torque" and heldout.samples:
            fig_id, samples, where = "heldout", heldout.samples[0], "held-out data"
            scores = heldout.scores
            residuals = (scores["identified"].residuals[0], scores["nominal"].residuals[0])
        else:
            from dynid.validation import heldout_samples

            fig_id, where = "fitted-torques", "the fitted data"
            samples = heldout_samples(problem, [problem.dataset[0]])[0]
            residuals = None
        return figure_html(
            fig_id,
            f"measured against predicted torque on {where}",
            heldout_plot(problem, posterior, samples, residuals),
        )
    sim, data, t = rollouts or rollout_observations(problem, posterior, max_particles=max_rollouts)
    return figure_html(
        "trajectory-density",
        "trajectory density of posterior rollouts against the fitted data",
        density_plot(sim, data, t, problem.obs_names),
    )


def write_report(
    path: str | Path,
    posterior: Posterior,
    *,
    problem: Problem | None = None,
    history: History | None = None,
    truth: Mapping[str, float] | None = None,
    meta: Mapping[str, Any] | None = None,
    title: str = "dynid identification report",
    max_rollouts: int = 32,
    rollouts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    heldout: ValidationReport | None = None,
) -> Path:
    """Write the HTML report of one run (sections in the module docstring's order) atomically
    and return its path.

    Args:
        path: output ``.html`` file.
        posterior: the estimator's posterior.
        problem: the problem it was fitted on (bounds, nominal values, the ``fit`` figure);
            without it the report has no ``physical`` and no ``fit`` section.
        history: per-iteration progress (loss / MMD figure).
        truth: true values ``{name: value}``; default ``problem.truth``.
        meta: extra run metadata shown in the metadata table (seed, device, wall time, ...);
            its ``recordings`` (the bags' read summaries) get a table of their own.
        title: page title.
        max_rollouts: particles rolled out for the trajectory density (shooting problems).
        rollouts: ``(sim, data, t)`` of :func:`rollout_observations` when already computed
            (shooting problems; a torque problem's report shows none).
        heldout: the torque validation of ``posterior`` (:func:`dynid.validation.validate`):
            measured against predicted torque on its first held-out trajectory, from the
            residuals it scored.

    Raises:
        PosteriorError: ``posterior`` lacks a parameter of ``problem`` (named).
        OSError: the file could not be written.
    """
    if truth is None and problem is not None:
        truth = problem.truth
    lower = upper = None
    if problem is not None and list(problem.spec.names) == list(posterior.names):
        lower, upper = problem.spec.lower.tolist(), problem.spec.upper.tolist()
    rows = parameter_rows(posterior, lower=lower, upper=upper, truth=truth)
    info: dict[str, Any] = {
        "estimator": posterior.estimator,
        "iterations": posterior.iteration,
        "particles": posterior.num_particles,
    }
    info.update(posterior.meta)
    info.update(meta or {})
    info.update(versions())
    parts = [section_html("summary", "Summary", _summary(posterior, info, rows))]
    for key in ("validation", "validation_error", "unidentified", "standard_parameters"):
        info.pop(key, None)
    if problem is not None:
        physical = physical_rows(posterior, problem.spec, problem.robot)
        parts += [
            section_html("physical", "Physical parameters", _physical(physical)),
            section_html(
                "fit", "Fit", _fit_figure(problem, posterior, heldout, rollouts, max_rollouts)
            ),
        ]
    ident = info.pop("identifiability", None)
    if isinstance(ident, Mapping) and "base_parameters" in ident:
        parts.append(section_html("base", "Base parameters", _identifiability(ident)))
    if history is not None and len(history.iterations) > 1:
        parts.append(
            section_html(
                "progress", "Progress", figure_html("curves", "loss and MMD", curves_plot(history))
            )
        )
    recordings = info.pop("recordings", None)
    if isinstance(recordings, Sequence) and not isinstance(recordings, str) and recordings:
        parts.append(section_html("recordings", "Recordings", _recordings(recordings)))
    coordinates = [_table(rows)]
    if int(np.count_nonzero(posterior.weights > 0)) > 1:
        coordinates.append(
            figure_html(
                "pair-plot", "pair plot of the posterior particles", pair_plot(posterior, truth)
            )
        )
    parts.append(section_html("coordinates", "Coordinates", *coordinates))
    info.pop("problem_file", None)
    parts.append(section_html("run", "Run", _meta_table(info)))
    return atomic_write_text(path, page_html(title, *parts))
