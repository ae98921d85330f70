"""The files ``dynid excite`` writes: ``trajectory.csv``, ``trajectory.yaml``, ``excitation.yaml``
and ``report.html`` (all written atomically).

- ``trajectory.csv``: header ``time``, one column per joint named as in the URDF (positions, rad
  or m), then ``<joint>/velocity`` and ``<joint>/acceleration`` columns in the same joint order;
  one row per sample at the design's rate, ``time`` in s from 0.
- ``trajectory.yaml``: the fields of ``trajectory_msgs/JointTrajectory`` (``joint_names``,
  ``points`` with ``positions``, ``velocities``, ``accelerations`` and ``time_from_start``
  ``{sec, nanosec}``) at :data:`TRAJECTORY_MSG_RATE` Hz, which a joint trajectory controller
  interpolates with quintic splines between points (position, velocity and acceleration given).
- ``excitation.yaml``: the motion's definition (start, duration, harmonics, base frequency,
  ramp, coefficients per joint), the criteria with and without the prior, the predicted σ, the
  limits and clearance checked, and the planning settings.
- ``report.html``: q, q̇, q̈ and τ against their limits, the smallest distance over time, the
  predicted σ.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.figure import Figure

from dynid.atomic import atomic_open, atomic_write_text
from dynid.excite.design import Excitation
from dynid.report import every_point, figure_html, page_html, section_html

__all__ = [
    "OUTPUT_FILES",
    "TRAJECTORY_MSG_RATE",
    "csv_header",
    "excitation_mapping",
    "predicted_rows",
    "prediction_basis",
    "write_outputs",
    "write_trajectory_csv",
]

OUTPUT_FILES = ("trajectory.csv", "trajectory.yaml", "excitation.yaml", "report.html")
TRAJECTORY_MSG_RATE = 100.0
"""Hz of the points of ``trajectory.yaml``."""

_DISPLAY = {"kg": ("g", 1e3), "m": ("mm", 1e3)}


def csv_header(joint_names: list[str]) -> list[str]:
    """The columns of ``trajectory.csv``."""
    return (
        ["time", *joint_names]
        + [f"{j}/velocity" for j in joint_names]
        + [f"{j}/acceleration" for j in joint_names]
    )


def prediction_basis(exc: Excitation) -> str:
    """What the predicted σ rest on, in words."""
    noise = exc.sensor_noise
    if noise is None:
        return "Cramér–Rao under likelihood.torque_std"
    velocity = "not recorded" if noise.velocity is None else f"{noise.velocity:g} rad/s"
    return (
        f"sensor noise (position {noise.position:g} rad, velocity {velocity}, effort "
        f"{noise.effort:g} N·m) through the likelihood's filter, differentiation and stride"
    )


def predicted_rows(exc: Excitation) -> list[dict[str, Any]]:
    """One row per coordinate: ``name``, ``sigma`` (SI), ``unit`` and, for kg and m, the σ in g
    or mm (``sigma_display``, ``display_unit``)."""
    rows = []
    for name, unit, sigma in zip(exc.names, exc.units, exc.sigma, strict=True):
        row: dict[str, Any] = {"name": name, "sigma": float(sigma), "unit": unit}
        if unit in _DISPLAY:
            shown, factor = _DISPLAY[unit]
            row["sigma_display"] = float(sigma * factor)
            row["display_unit"] = shown
        rows.append(row)
    return rows


def write_trajectory_csv(
    path: Path, joint_names: list[str], t: np.ndarray, q: np.ndarray, v: np.ndarray, a: np.ndarray
) -> None:
    """Write ``trajectory.csv`` atomically: :func:`csv_header`, then one row per time ``t [T]``
    (s) of the positions, velocities and accelerations ``q, v, a [T, n]`` (rad, rad/s, rad/s²)
    of ``joint_names``."""
    with atomic_open(path) as fh:
        fh.write(",".join(csv_header(joint_names)) + "\n")
        np.savetxt(fh, np.column_stack([t, q, v, a]), delimiter=",", fmt="%.10g")


def _trajectory_msg(exc: Excitation) -> dict[str, Any]:
    step = max(round((exc.t.size - 1) / (exc.motion.duration * TRAJECTORY_MSG_RATE)), 1)
    keep = np.arange(0, exc.t.size, step)
    if keep[-1] != exc.t.size - 1:
        keep = np.append(keep, exc.t.size - 1)
    points = []
    for k in keep:
        ns = round(float(exc.t[k]) * 1e9)
        points.append(
            {
                "positions": [float(x) for x in exc.q[k]],
                "velocities": [float(x) for x in exc.v[k]],
                "accelerations": [float(x) for x in exc.a[k]],
                "effort": [],
                "time_from_start": {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000},
            }
        )
    return {"header": {"frame_id": ""}, "joint_names": list(exc.joint_names), "points": points}


def _coefficients(exc: Excitation) -> dict[str, Any]:
    nj, H = exc.motion.num_joints, exc.motion.harmonics
    c = exc.coefficients.reshape(2, nj, H)
    return {
        name: {"a": [float(x) for x in c[0, j]], "b": [float(x) for x in c[1, j]]}
        for j, name in enumerate(exc.joint_names)
    }


def excitation_mapping(exc: Excitation) -> dict[str, Any]:
    """The content of ``excitation.yaml``."""
    m = exc.motion
    return {
        "problem": exc.problem_name,
        "robot": exc.robot_name,
        "joints": list(exc.joint_names),
        "start": [float(x) for x in m.start],
        "duration_s": m.duration,
        "harmonics": m.harmonics,
        "base_frequency_hz": m.base_frequency,
        "ramp_s": m.ramp,
        "rate_hz": float(round((exc.t.size - 1) / m.duration, 9)),
        "trajectory": (
            "q_j(t) = start_j + w(t) f_j(t), f_j(t) = sum_l a_lj/(l w_f) sin(l w_f t) - "
            "b_lj/(l w_f) cos(l w_f t) + sum_l b_lj/(l w_f), w_f = 2 pi base_frequency_hz, "
            "w(t) the septic ramp over ramp_s at both ends (dynid.excite.fourier)"
        ),
        "coefficients": _coefficients(exc),
        "criterion": exc.criterion,
        "criteria": exc.criteria.as_dict(),
        "criteria_motion_only": exc.criteria_motion.as_dict(),
        "scored_samples": exc.scored_samples,
        "predicted_sigma": predicted_rows(exc),
        "predicted_sigma_basis": prediction_basis(exc),
        "limits": exc.limits.as_dict(),
        "min_distance_m": exc.min_distance,
        "closest_distance_m": float(exc.distance.min()),
        "amplitude_scale": exc.scale,
        "seed": exc.seed,
        "starts": exc.starts,
        "planning_s": exc.planning_s,
    }


def _joint_figure(exc: Excitation, values: np.ndarray, limit: np.ndarray, label: str,
                  lower: np.ndarray | None = None) -> Figure:  # fmt: skip
    nv = values.shape[1]
    keep = every_point(values.shape[0])
    t = exc.t[keep]
    cols = 2
    rows = -(-nv // cols)
    width, height = 10.0, 1.8 * rows
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.45 / height, top=1.0 - 0.3 / height,
                        wspace=0.2, hspace=0.9)  # fmt: skip
    low = -limit if lower is None else lower
    for j in range(nv):
        ax = fig.add_subplot(rows, cols, j + 1)
        ax.plot(t, values[keep, j], color="k", lw=1.0)
        for bound in (low[j], limit[j]):
            if np.isfinite(bound):
                ax.axhline(bound, color="tab:red", lw=0.8, ls="--")
        ax.set_title(f"{exc.joint_names[j]} {label}", fontsize=9)
        ax.set_xlabel("t (s)")
    return fig


def _distance_figure(exc: Excitation) -> Figure:
    fig = Figure(figsize=(10.0, 2.6))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.2, top=0.88)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(exc.distance_t, exc.distance, color="k", lw=1.0)
    ax.axhline(exc.min_distance, color="tab:red", lw=0.8, ls="--")
    ax.set_title("smallest distance between checked geometries (m)", fontsize=9)
    ax.set_xlabel("t (s)")
    return fig


def _shown(row: dict[str, Any]) -> str:
    if "sigma_display" not in row:
        return ""
    return f"{row['sigma_display']:.4g} {row['display_unit']}"


def _report(exc: Excitation) -> str:
    lim = exc.limits
    rows = "".join(
        f"<tr><td class='name'>{html.escape(r['name'])}</td><td>{r['sigma']:.4g}</td>"
        f"<td>{html.escape(r['unit'])}</td><td>{_shown(r)}</td></tr>"
        for r in predicted_rows(exc)
    )
    crit = exc.criteria.as_dict()
    summary = (
        f"<p>Problem <b>{html.escape(exc.problem_name)}</b>, robot {html.escape(exc.robot_name)}: "
        f"{exc.motion.duration:g} s, {exc.motion.harmonics} harmonics at "
        f"{exc.motion.base_frequency:.4g} Hz, criterion {exc.criterion}; every limit and a "
        f"clearance of {exc.min_distance:g} m checked at all {exc.t.size} samples. "
        f"log det F = {crit['log_det']:.4g}, cond(F) = {crit['condition_number']:.4g}, "
        f"λ_min = {crit['min_eigenvalue']:.4g} over {exc.scored_samples} scored samples. "
        f"Planned in {exc.planning_s:.1f} s.</p>"
        "<p>Run it first at reduced speed (<code>--speed-scale</code>) and in simulation "
        "(docs/guide/recording.md).</p>"
    )
    figs = [
        figure_html("q", "positions against the limits less the margin",
                    _joint_figure(exc, exc.q, lim.upper, "q (rad)", lim.lower)),
        figure_html("dq", "velocities", _joint_figure(exc, exc.v, lim.velocity, "q̇ (rad/s)")),
        figure_html("ddq", "accelerations",
                    _joint_figure(exc, exc.a, lim.acceleration, "q̈ (rad/s²)")),
        figure_html("tau", "torques of the nominal model",
                    _joint_figure(exc, exc.tau, lim.effort, "τ (N·m)")),
        figure_html("distance", "smallest distance over time", _distance_figure(exc)),
    ]  # fmt: skip
    table = (
        "<table id='sigma'><tr><th>parameter</th><th>σ</th><th>unit</th><th>σ (g, mm)</th></tr>"
        f"{rows}</table>"
    )
    body = (
        section_html("summary", "Summary", summary)
        + section_html("prediction", f"Predicted σ ({prediction_basis(exc)})", table)
        + section_html("motion", "Motion against the limits", *figs)
    )
    return page_html(f"dynid excite: {exc.problem_name}", body)


def write_outputs(exc: Excitation, out_dir: str | Path) -> list[Path]:
    """Write :data:`OUTPUT_FILES` into ``out_dir`` (created); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in OUTPUT_FILES]
    write_trajectory_csv(paths[0], exc.joint_names, exc.t, exc.q, exc.v, exc.a)
    # libyaml's emitter where the build has it: the message has tens of thousands of numbers
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    atomic_write_text(paths[1], yaml.dump(_trajectory_msg(exc), Dumper=dumper, sort_keys=False))
    atomic_write_text(paths[2], yaml.safe_dump(excitation_mapping(exc), sort_keys=False,
                                               allow_unicode=True))  # fmt: skip
    atomic_write_text(paths[3], _report(exc))
    return paths
