"""Preprocessing of trajectories: zero-phase low-pass filtering, finite differences,
segmentation by motion and excitation, and downsampling to a simulator step.

The low-pass filter is the one of the lm paper (Marklund et al., sec. 4.4): a second-order
Butterworth filter run forward and then backward, so the output has no lag; the filtered signal
is then downsampled to the simulator's time step. Times in s, frequencies in Hz.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from dynid.data.align import quaternion_groups
from dynid.data.errors import PreprocessError
from dynid.data.quaternion import make_continuous
from dynid.data.trajectory import Trajectory

Array = NDArray[np.float64]
Difference = Literal["central", "backward", "forward"]


def uniform_step(t: Array, *, rtol: float = 1e-6, what: str = "trajectory") -> float:
    """The common step (s) of a uniform time grid ``t [T]``; raises when it is not uniform."""
    t = np.asarray(t, dtype=np.float64)
    if t.size < 2:
        raise PreprocessError(f"{what}: need at least 2 samples, got {t.size}")
    steps = np.diff(t)
    dt = float(np.mean(steps))
    if np.max(np.abs(steps - dt)) > rtol * dt:
        raise PreprocessError(
            f"{what}: time grid is not uniform (steps {steps.min():.6g} .. {steps.max():.6g} s); "
            "resample it first (Trajectory.resample)"
        )
    return dt


def lowpass(x: Array, dt: float, cutoff_hz: float) -> Array:
    """Zero-phase second-order Butterworth low-pass of ``x [T, ...]`` sampled every ``dt`` s
    (axis 0).

    The filter (:func:`butterworth2`) runs forward and then backward, so the magnitude response
    is squared and the phase is zero (lm paper sec. 4.4). Before that, ``x`` is extended at both
    ends by its point reflection (odd extension) over about three periods of the cut-off, and
    each pass starts from the filter's steady state at its first sample, which keeps start-up
    transients out; the extension is cut off again. This is what
    ``scipy.signal.sosfiltfilt`` computes with odd padding of that length; each pass here is the
    filter's difference equation solved as one banded triangular system
    (:func:`scipy.linalg.solve_banded`), all channels at once.
    """
    fs = 1.0 / dt
    if not 0.0 < cutoff_hz < fs / 2:
        raise PreprocessError(
            f"lowpass: cut-off {cutoff_hz} Hz must lie in (0, {fs / 2:.6g}) Hz "
            f"(the Nyquist frequency at dt={dt} s)"
        )
    x = np.asarray(x, dtype=np.float64)
    b, a = butterworth2(cutoff_hz, fs)
    flat = x.reshape(x.shape[0], -1)
    pad = min(max(9, int(3.0 * fs / cutoff_hz)), x.shape[0] - 1)
    if pad > 0:
        head = 2.0 * flat[:1] - flat[pad:0:-1]
        tail = 2.0 * flat[-1:] - flat[-2 : -pad - 2 : -1]
        flat = np.concatenate([head, flat, tail])
    y = _difference_equation(b, a, _difference_equation(b, a, flat)[::-1])[::-1]
    return np.ascontiguousarray(y[pad : y.shape[0] - pad].reshape(x.shape))


def butterworth2(cutoff_hz: float, fs: float) -> tuple[Array, Array]:
    """Numerator ``b [3]`` and denominator ``a [3]`` (``a[0] = 1``) of the digital second-order
    Butterworth low-pass with cut-off ``cutoff_hz`` at sampling rate ``fs`` (Hz): the analog
    prototype ``1 / (s² + √2 s + 1)`` at the prewarped cut-off ``K = tan(π f_c / f_s)``,
    through the bilinear transform."""
    k = math.tan(math.pi * cutoff_hz / fs)
    norm = 1.0 / (1.0 + math.sqrt(2.0) * k + k * k)
    b = k * k * norm * np.array([1.0, 2.0, 1.0])
    a = np.array([1.0, 2.0 * (k * k - 1.0) * norm, (1.0 - math.sqrt(2.0) * k + k * k) * norm])
    return b, a


def _difference_equation(b: Array, a: Array, x: Array) -> Array:
    """``y [T, C]`` of ``y_n + a_1 y_{n-1} + a_2 y_{n-2} = b_0 x_n + b_1 x_{n-1} + b_2 x_{n-2}``
    on ``x [T, C]`` (T ≥ 2), started in the steady state of a constant input ``x_0``: the state
    of the transposed direct form is ``x_0 z`` with ``z`` that state for a unit input (DC gain
    ``g = Σb / Σa``: ``z = (b_1 + b_2 − (a_1 + a_2) g, b_2 − a_2 g)``)."""
    from scipy.linalg import solve_banded

    gain = b.sum() / a.sum()
    z = np.array([b[1] + b[2] - (a[1] + a[2]) * gain, b[2] - a[2] * gain])
    rhs = b[0] * x
    rhs[1:] += b[1] * x[:-1]
    rhs[2:] += b[2] * x[:-2]
    rhs[:2] += (z[:, None] * x[:1])[: x.shape[0]]
    bands = np.zeros((3, x.shape[0]))
    bands[0] = 1.0
    bands[1, :-1] = a[1]
    bands[2, :-2] = a[2]
    return solve_banded((2, 0), bands, rhs, overwrite_b=True, check_finite=False)


def _lowpass_channels(x: Array, names: Sequence[str], dt: float, cutoff_hz: float) -> Array:
    """Low-pass named channels; quaternion groups are made continuous and renormalised."""
    x = np.array(x, dtype=np.float64, copy=True)
    groups = quaternion_groups(names)
    for _, cols in groups:
        x[:, cols] = make_continuous(x[:, cols])
    out = lowpass(x, dt, cutoff_hz)
    for _, cols in groups:
        out[:, cols] /= np.linalg.norm(out[:, cols], axis=1, keepdims=True)
    return out


def filter_trajectory(traj: Trajectory, cutoff_hz: float, *, commands: bool = False) -> Trajectory:
    """Zero-phase low-pass of ``q``, ``dq``, ``effort`` and ``obs`` (and ``command`` if asked).

    The trajectory must be on a uniform grid. Quaternion observations stay unit quaternions.
    """
    dt = uniform_step(traj.t, what="filter_trajectory")

    def lp(x: Array | None) -> Array | None:
        return None if x is None else lowpass(x, dt, cutoff_hz)

    return traj.replace(
        q=lp(traj.q),
        dq=lp(traj.dq),
        effort=lp(traj.effort),
        command=lp(traj.command) if commands else traj.command,
        obs=None
        if traj.obs is None
        else _lowpass_channels(traj.obs, traj.obs_names, dt, cutoff_hz),
        meta={**traj.meta, "lowpass_hz": cutoff_hz},
    )


def differentiate(x: Array, t: Array, method: Difference = "central") -> Array:
    """Time derivative of ``x [T, d]`` sampled at ``t [T]`` (s) by finite differences.

    ``central``: second-order accurate on non-uniform grids (``numpy.gradient``), one-sided at the
    ends. ``backward``: ``(x[k] - x[k-1]) / (t[k] - t[k-1])``, the velocity semi-implicit Euler
    uses to step positions (lm eq. 4.3, csvgd eq. 12); the first sample takes the forward
    difference. ``forward``: ``(x[k+1] - x[k]) / (t[k+1] - t[k])``, last sample backward.
    """
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    if x.shape[0] != t.size or t.size < 2:
        raise PreprocessError(
            f"differentiate: need >= 2 samples with matching times, got x {x.shape}, t {t.shape}"
        )
    if method == "central":
        return np.gradient(x, t, axis=0, edge_order=2 if t.size > 2 else 1)
    slope = np.diff(x, axis=0) / np.diff(t).reshape(-1, *([1] * (x.ndim - 1)))
    if method == "backward":
        return np.concatenate([slope[:1], slope], axis=0)
    if method == "forward":
        return np.concatenate([slope, slope[-1:]], axis=0)
    raise PreprocessError(f"differentiate: unknown method {method!r} (central|backward|forward)")


def with_velocities(
    traj: Trajectory, *, cutoff_hz: float | None = None, method: Difference = "central"
) -> Trajectory:
    """``traj`` with ``dq`` from finite differences of ``q`` (low-passed first if a cut-off is
    given; ``q`` itself is returned filtered too in that case)."""
    q = traj.q
    if cutoff_hz is not None:
        q = lowpass(q, uniform_step(traj.t, what="with_velocities"), cutoff_hz)
    return traj.replace(q=q, dq=differentiate(q, traj.t, method), meta=dict(traj.meta))


def accelerations(
    traj: Trajectory, *, cutoff_hz: float | None = None, method: Difference = "central"
) -> Array:
    """Joint accelerations ``[T, nv]`` (rad/s²): differences of ``dq`` (or of ``q`` twice when
    velocities are absent), low-passed first when a cut-off is given."""
    dq = traj.dq if traj.dq is not None else differentiate(traj.q, traj.t, method)
    if cutoff_hz is not None:
        dq = lowpass(dq, uniform_step(traj.t, what="accelerations"), cutoff_hz)
    return differentiate(dq, traj.t, method)


class FilteredMotion(NamedTuple):
    """What :func:`filtered_motion` gives inverse dynamics, on the trimmed and thinned grid.

    Attributes:
        smooth: the filtered trajectory (``dq`` set; efforts and commands delayed).
        a: ``[S, nq]`` accelerations (rad/s² or m/s²).
        direction: ``[S, nq]`` the dry-friction direction ``tanh(v/ε)`` of the velocities
            before their low-pass, then low-passed like the efforts (with the filter's overshoot
            at a reversal, as the efforts have it).
    """

    smooth: Trajectory
    a: Array
    direction: Array


def filtered_motion(
    traj: Trajectory,
    cutoff_hz: float,
    *,
    trim_s: float = 0.0,
    stride: int = 1,
    measured_velocities: bool = True,
    effort_delay: float = 0.0,
    coulomb_smoothing: float = 1e-2,
) -> FilteredMotion:
    """The recorded motion prepared for inverse dynamics (equation error; lm paper sec. 4.4).

    Positions, efforts and commands are low-passed without phase lag at ``cutoff_hz``;
    velocities are the recorded ones (``measured_velocities`` and recorded) or central
    differences of the filtered positions, low-passed; accelerations are central differences
    of those velocities. The filtered efforts and commands are delayed by ``effort_delay``: the
    sample at ``t`` is their linear interpolation at ``t − effort_delay`` (held at the ends).

    Dry friction ``c tanh(v/ε)`` steps where a joint reverses, and the low-pass spreads that step
    in the efforts over the filter's length, into samples where the filtered velocity is already
    well away from zero; ``direction`` is therefore ``tanh(v/ε)`` of the velocities before their
    low-pass, low-passed like the efforts: the parallel filtering of both sides of the
    identification equation (IDIM), for the one term a low-pass does not commute with.

    Then ``trim_s`` seconds are cut at both ends, where the zero-phase filter, the one-sided
    differences and the delay's held ends are least accurate, and every ``stride``-th sample is
    kept.

    Args:
        traj: a trajectory on a uniform time grid.
        cutoff_hz: low-pass cut-off (Hz), below the Nyquist frequency.
        trim_s: seconds cut at each end (≥ 0).
        stride: keep every ``stride``-th sample (≥ 1).
        measured_velocities: use the recorded velocities where there are any.
        effort_delay: s after its stamp at which an effort or command acts on the motion
            (:class:`dynid.problem.LikelihoodSettings`), at most ``trim_s`` in magnitude.
        coulomb_smoothing: ε (rad/s or m/s) of ``direction``.

    Returns:
        :class:`FilteredMotion` ``(smooth, a, direction)``.

    Raises:
        PreprocessError: a non-uniform grid, a cut-off at or above Nyquist, bad ``trim_s``,
            ``stride``, ``effort_delay`` or ``coulomb_smoothing``, or fewer than 2 samples left.
    """
    dt = uniform_step(traj.t, what="filtered_motion")
    if not (trim_s >= 0.0 and int(stride) == stride and stride >= 1):
        raise PreprocessError(
            f"filtered_motion: need trim_s ≥ 0 and stride ≥ 1, got {trim_s}, {stride}"
        )
    if not abs(effort_delay) <= trim_s:
        raise PreprocessError(
            f"filtered_motion: effort_delay must be at most trim_s = {trim_s} s in magnitude, "
            f"got {effort_delay}"
        )
    if not coulomb_smoothing > 0.0:
        raise PreprocessError(
            f"filtered_motion: coulomb_smoothing must be > 0, got {coulomb_smoothing}"
        )
    trim = round(trim_s / dt)
    keep = slice(trim, traj.num_samples - trim, int(stride))
    if len(range(traj.num_samples)[keep]) < 2:
        raise PreprocessError(
            f"filtered_motion: {traj.num_samples} samples leave fewer than 2 after cutting "
            f"{trim_s} s at both ends"
        )
    q = lowpass(traj.q, dt, cutoff_hz)
    raw_v = traj.dq if measured_velocities and traj.dq is not None else differentiate(q, traj.t)
    v = lowpass(raw_v, dt, cutoff_hz)
    a = differentiate(v, traj.t)

    def lp(x: Array | None) -> Array | None:
        if x is None or x.shape[-1] == 0:
            return x
        return delayed(lowpass(x, dt, cutoff_hz), traj.t, effort_delay)

    smooth = traj.replace(
        q=q,
        dq=v,
        effort=lp(traj.effort),
        command=lp(traj.command),
        meta={**traj.meta, "lowpass_hz": cutoff_hz},
    ).take(keep)
    direction = lowpass(np.tanh(raw_v / coulomb_smoothing), dt, cutoff_hz)
    return FilteredMotion(smooth, a[keep], direction[keep])


def delayed(x: Array, t: Array, delay: float) -> Array:
    """``x [T, k]`` sampled at ``t [T]`` (s), delayed by ``delay`` s: row ``i`` is the linear
    interpolation of ``x`` at ``t[i] − delay``, held at the first and last samples."""
    if delay == 0.0:
        return x
    return np.stack([np.interp(t - delay, t, col) for col in x.T], axis=1)


def downsample(traj: Trajectory, dt: float, *, cutoff_hz: float | None = None) -> Trajectory:
    """Resample onto the simulator step ``dt`` (s) after an anti-aliasing zero-phase low-pass.

    The low-pass cut-off defaults to 0.8 × the new Nyquist frequency ``0.4 / dt``; it is skipped
    when the source is not uniform (resample first) or already coarser than the cut-off needs.
    """
    if not dt > 0.0:
        raise PreprocessError(f"downsample: dt must be positive, got {dt}")
    src_dt = uniform_step(traj.t, what="downsample")
    cutoff = 0.4 / dt if cutoff_hz is None else cutoff_hz
    filtered = traj if cutoff >= 0.5 / src_dt else filter_trajectory(traj, cutoff, commands=False)
    out = filtered.resample(dt)
    return out.replace(meta={**traj.meta, "downsampled_dt": dt})


def _runs(mask: NDArray[np.bool_]) -> list[tuple[int, int]]:
    """Half-open index ranges ``[a, b)`` of the ``True`` runs of ``mask``."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(),
                    strict=True))  # fmt: skip


def segment_by_motion(
    traj: Trajectory,
    *,
    speed_threshold: float,
    min_duration: float,
    pad: float = 0.0,
    max_pause: float = 0.25,
    joints: Sequence[str] | None = None,
) -> list[Trajectory]:
    """Split ``traj`` into the stretches where the robot moves.

    A sample moves when the Euclidean norm of the selected joint velocities (``dq`` or central
    differences of ``q``) exceeds ``speed_threshold`` (rad/s). Pauses shorter than ``max_pause``
    s (turning points of an oscillation) do not split a stretch. Stretches are widened by ``pad``
    s on each side, merged where they overlap, and kept when they last at least ``min_duration``
    s.
    """
    if speed_threshold < 0.0 or min_duration < 0.0 or pad < 0.0:
        raise PreprocessError(
            "segment_by_motion: speed_threshold, min_duration and pad must be >= 0, got "
            f"{speed_threshold}, {min_duration}, {pad}"
        )
    cols = list(range(traj.nv))
    if joints is not None:
        unknown = [j for j in joints if j not in traj.joint_names]
        if unknown:
            raise PreprocessError(f"segment_by_motion: unknown joints {unknown}")
        cols = [traj.joint_names.index(j) for j in joints]
    dq = traj.dq if traj.dq is not None else differentiate(traj.q, traj.t)
    moving = np.linalg.norm(dq[:, cols], axis=1) > speed_threshold
    runs = _runs(moving)
    for (_, b), (a, _) in pairwise(runs):
        if traj.t[a] - traj.t[b - 1] <= max_pause:
            moving[b:a] = True
    if pad > 0.0:
        widened = np.zeros_like(moving)
        for a, b in _runs(moving):
            widened |= (traj.t >= traj.t[a] - pad) & (traj.t <= traj.t[b - 1] + pad)
        moving = widened
    return [
        traj.take(slice(a, b))
        for a, b in _runs(moving)
        if traj.t[b - 1] - traj.t[a] >= min_duration and b - a >= 2
    ]


def excitation(traj: Trajectory, window: float, *, hop: float | None = None) -> tuple[Array, Array]:
    """Excitation score of sliding windows: the geometric mean over joints of the standard
    deviation of joint velocity (rad/s) within each window.

    A window scores high only when every joint moves, which is what identifying every joint's
    parameters needs. Returns window start times ``[W]`` (s) and scores ``[W]``.
    """
    hop = window if hop is None else hop
    if not (window > 0.0 and hop > 0.0):
        raise PreprocessError(f"excitation: window and hop must be positive, got {window}, {hop}")
    dq = traj.dq if traj.dq is not None else differentiate(traj.q, traj.t)
    starts = np.arange(traj.t[0], traj.t[-1] - window + 1e-12, hop)
    scores = np.empty(starts.size)
    for i, s in enumerate(starts):
        sel = (traj.t >= s) & (traj.t < s + window)
        std = dq[sel].std(axis=0) if sel.sum() > 1 else np.zeros(traj.nv)
        scores[i] = float(np.exp(np.mean(np.log(np.maximum(std, 1e-300)))))
    return starts, scores


def segment_by_excitation(
    traj: Trajectory, *, window: float, min_score: float, hop: float | None = None
) -> list[Trajectory]:
    """Windows of ``window`` s whose ``excitation`` score reaches ``min_score`` (rad/s), with
    consecutive or overlapping selected windows merged into one segment."""
    starts, scores = excitation(traj, window, hop=hop)
    keep = np.zeros(traj.num_samples, dtype=bool)
    for s in starts[scores >= min_score]:
        keep |= (traj.t >= s) & (traj.t <= s + window)
    return [traj.take(slice(a, b)) for a, b in _runs(keep) if b - a >= 2]


def split_windows(traj: Trajectory, window: float, *, hop: float | None = None) -> list[Trajectory]:
    """Fixed-length windows of ``window`` s every ``hop`` s (default: back to back, sharing the
    boundary sample), e.g. shooting windows or segments for online estimation."""
    hop = window if hop is None else hop
    if not (window > 0.0 and hop > 0.0):
        raise PreprocessError(
            f"split_windows: window and hop must be positive, got {window}, {hop}"
        )
    out = []
    for s in np.arange(traj.t[0], traj.t[-1] - window + 1e-9, hop):
        sel = np.flatnonzero((traj.t >= s - 1e-12) & (traj.t <= s + window + 1e-12))
        if sel.size >= 2:
            out.append(traj.take(slice(int(sel[0]), int(sel[-1]) + 1)))
    return out
