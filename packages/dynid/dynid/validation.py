"""Held-out validation: how well an identified model predicts joint torques, or motion, it was not
fitted to.

For a problem with the torque (``inverse_dynamics``) likelihood, a model is scored on held-out
trajectories by the residuals of :func:`dynid.objective.torque.inverse_dynamics_residuals`:
measured efforts (through the problem's control model) against ``RNEA(q, q̇, q̈) + τ_friction(q̇)``,
with ``q, q̇, q̈, τ`` filtered, differentiated and trimmed as the problem's likelihood says, every
sample scored (``stride`` 1). The same residuals as the fit, so the friction model, the torque
offsets and the attachments the posterior was fitted with are the ones scored: the posterior's
``meta["problem_file"]`` (written by ``dynid fit``) holds the model, so scoring needs no other file.

Models compared (:func:`validate`): the identified one (the posterior's MAP), the nominal one
(the problem's robot at its nominal parameters: the URDF's inertials and ``<dynamics>``), and any
other URDF of the same joints (its own inertials and ``<dynamics>``). Where the posterior carries
the per-joint noise it was fitted with (``meta["noise_std"]``), the held-out RMSE over that σ (with
the parameters' own spread added for linear models) says whether its uncertainty is honest (close
to 1).

A problem with the shooting likelihood is scored by its simulation error instead
(:func:`simulation_residuals`): each held-out trajectory is rolled out once from its recorded first
state over its whole length (single shooting, whatever the fit's windows) and compared with the
recorded observations, per channel in the channel's unit; the overall figure is the RMS of the
residuals over the observation noise (``likelihood.obs_std``), so channels of different units
weigh as the likelihood weighs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import defusedxml.ElementTree as SafeET
import numpy as np
import torch

from dynid.errors import EstimatorError
from dynid.model.params import ParameterSpec
from dynid.model.robot import RobotModel
from dynid.objective.torque import TorqueSamples, inverse_dynamics_residuals

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.posterior import Posterior
    from dynid.problem import Problem

__all__ = [
    "Score",
    "ValidationReport",
    "heldout_samples",
    "sample_residuals",
    "simulation_residuals",
    "torque_residuals",
    "validate",
    "validate_recording",
]


@dataclass(frozen=True)
class Score:
    """One model's prediction error on the held-out data.

    Attributes:
        label: ``identified``, ``nominal`` or the URDF file.
        channels: what is scored: joint names (torques) or observed channels (simulation).
        rmse: ``[C]`` RMS residual per channel (torques: N·m or N; simulation: the channel's
            unit).
        overall: torques: RMS over every joint and sample; simulation: RMS of the residuals
            over ``likelihood.obs_std`` (dimensionless).
        samples: scored samples.
        sigma_ratio: ``[C]`` RMSE over the predicted σ per joint, or ``None`` (no σ known).
        residuals: the residuals behind ``rmse``, one ``[S_k, C]`` array per held-out trajectory
            in the order scored (not in :meth:`as_dict`).
    """

    label: str
    channels: tuple[str, ...]
    rmse: np.ndarray
    overall: float
    samples: int
    sigma_ratio: np.ndarray | None = None
    residuals: tuple[np.ndarray, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, Any]:
        """YAML/JSON-ready record."""
        out: dict[str, Any] = {
            "rmse": {j: float(r) for j, r in zip(self.channels, self.rmse, strict=True)},
            "rmse_overall": self.overall,
            "samples": self.samples,
        }
        if self.sigma_ratio is not None:
            out["rmse_over_predicted_sigma"] = {
                j: float(r) for j, r in zip(self.channels, self.sigma_ratio, strict=True)
            }
        return out


@dataclass
class ValidationReport:
    """The scores of every model on the same held-out data.

    Attributes:
        scores: label → score, the identified model first.
        data: what was scored (the held-out recordings).
        samples: torques: each held-out trajectory as scored (:func:`heldout_samples`), in
            order; empty for simulation (not in :meth:`as_dict`).
        quantity: ``"torque"`` (inverse-dynamics residuals) or ``"simulation"`` (rollouts
            against the recorded observations).
    """

    scores: dict[str, Score] = field(default_factory=dict)
    data: list[str] = field(default_factory=list)
    samples: list[TorqueSamples] = field(default_factory=list, repr=False)
    quantity: Literal["torque", "simulation"] = "torque"

    def as_dict(self) -> dict[str, Any]:
        """YAML/JSON-ready record (``posterior.meta["validation"]``)."""
        scores = {k: s.as_dict() for k, s in self.scores.items()}
        return {"data": list(self.data), "quantity": self.quantity, **scores}

    def table(self) -> str:
        """Per-channel and overall RMSE, one row per model."""
        first = next(iter(self.scores.values()))
        labels = {k: (k if len(k) <= 24 else "…" + k[-23:]) for k in self.scores}
        width = max(12, *(len(v) for v in labels.values()))
        if self.quantity == "torque":
            short = [j.rsplit("_", 1)[-1] for j in first.channels]  # panda_joint1 → joint1
            if len(set(short)) < len(short):  # shoulder_pan_joint → shoulder_pan
                short = [j.removesuffix("_joint") for j in first.channels]
            unit = "(torque RMSE, N·m)"
        else:
            short = list(first.channels)
            unit = "(simulation RMSE in channel units; overall: RMS of residual / obs_std)"
        col = max(9, *(len(j) + 1 for j in short))
        head = "".join(f"{j:>{col}}" for j in short)
        lines = [f"{'model':<{width}}{head}  {'overall':>8}  {unit}"]
        for key, score in self.scores.items():
            cells = "".join(f"{r:{col}.4f}" for r in score.rmse)
            lines.append(f"{labels[key]:<{width}}{cells}  {score.overall:8.4f}")
            if score.sigma_ratio is not None:
                ratio = "".join(f"{r:{col}.2f}" for r in score.sigma_ratio)
                lines.append(f"{'  / pred. σ':<{width}}{ratio}")
        return "\n".join(lines)


def heldout_samples(problem: Problem, trajectories: Sequence[Trajectory]) -> list[TorqueSamples]:
    """``trajectories`` filtered, differentiated and trimmed as the problem's likelihood says
    (``cutoff_hz``, ``trim_s``), every sample kept (``stride`` 1): what held-out torques are
    scored on.

    Raises:
        EstimatorError: not a torque likelihood, or data too short for the filter and trim.
    """
    if problem.likelihood.kind != "inverse_dynamics":
        raise EstimatorError(
            f"problem {problem.name!r}: held-out torque scores need likelihood.kind "
            "inverse_dynamics"
        )
    every = problem.with_likelihood(stride=1)
    return [TorqueSamples.of(every, traj) for traj in trajectories]


def sample_residuals(
    problem: Problem, theta: np.ndarray, samples: Sequence[TorqueSamples]
) -> list[np.ndarray]:
    """Measured minus predicted efforts of ``theta [M]``, one ``[S_k, nv]`` array per
    ``samples[k]`` (:func:`heldout_samples` of the problem)."""
    th = problem.tensor(np.asarray(theta, dtype=np.float64)[None])
    out = []
    with torch.no_grad():
        p = problem.parameters(th)
        for s in samples:
            q, v, u = s.q[None], s.v[None], s.u[None]
            tau = problem.control(p, q, v, u)
            r = inverse_dynamics_residuals(
                problem, th, q, v, s.a[None], tau, direction=s.direction[None]
            )
            out.append(r[0].cpu().numpy())
    return out


def torque_residuals(
    problem: Problem, theta: np.ndarray, trajectories: Sequence[Trajectory]
) -> np.ndarray:
    """Measured minus predicted efforts ``[S, nv]`` of ``theta [M]`` on ``trajectories``, every
    filtered sample scored (:func:`heldout_samples`).

    Raises:
        EstimatorError: not a torque likelihood, or data too short for the filter and trim.
    """
    return np.concatenate(sample_residuals(problem, theta, heldout_samples(problem, trajectories)))


def simulation_residuals(
    problem: Problem, theta: np.ndarray, trajectories: Sequence[Trajectory]
) -> np.ndarray:
    """Simulated minus recorded observations ``[S, k]`` (``problem.obs_names``, channel units) of
    ``theta [M]``, each trajectory rolled out once from its recorded first state over its whole
    length; the first sample (the start itself) is not scored.

    Raises:
        EstimatorError: the problem has no shooting likelihood.
        ProblemError: a trajectory lacks an observed channel.
    """
    if problem.likelihood.kind != "shooting":
        raise EstimatorError(
            f"problem {problem.name!r}: held-out simulation scores need likelihood.kind shooting"
        )
    th = problem.tensor(np.asarray(theta, dtype=np.float64)[None])
    out = []
    with torch.no_grad():
        for traj in trajectories:
            simulated = problem.objective.simulate(th, traj)[0]
            out.append((simulated - problem.targets(traj))[1:].cpu().numpy())
    return np.concatenate(out)


def _residuals(
    problem: Problem,
    theta: np.ndarray,
    trajectories: Sequence[Trajectory],
    samples: Sequence[TorqueSamples] | None = None,
) -> list[np.ndarray]:
    """The residuals of each trajectory, ``[S_k, C]``; torques on ``samples``, the
    trajectories' :func:`heldout_samples`, when given."""
    if problem.likelihood.kind == "shooting":
        return [simulation_residuals(problem, theta, [traj]) for traj in trajectories]
    if samples is None:
        samples = heldout_samples(problem, trajectories)
    return sample_residuals(problem, theta, samples)


def _score(problem: Problem, label: str, per_trajectory: list[np.ndarray]) -> Score:
    residuals = np.concatenate(per_trajectory)
    if problem.likelihood.kind == "shooting":
        channels = tuple(problem.obs_names)
        overall = residuals / problem.obs_std.cpu().numpy()
    else:
        channels, overall = tuple(problem.robot.joint_names), residuals
    return Score(
        label=label,
        channels=channels,
        rmse=np.sqrt(np.mean(residuals**2, axis=0)),
        overall=float(np.sqrt(np.mean(overall**2))),
        samples=int(residuals.shape[0]),
        residuals=tuple(per_trajectory),
    )


def _predicted_sigma(
    problem: Problem, posterior: Posterior, theta: np.ndarray, trajectories: Sequence[Trajectory]
) -> np.ndarray | None:
    """``[nv]`` RMS of the predicted σ per joint: the fitted noise ⊕ the parameters' spread
    (through the linear torque model, where the problem has one)."""
    noise = posterior.meta.get("noise_std")
    if not isinstance(noise, Mapping):
        return None
    joints = problem.robot.joint_names
    try:
        sigma = np.array([float(noise[j]) for j in joints])
    except (KeyError, TypeError, ValueError):
        return None
    variance = np.broadcast_to(sigma**2, (1, len(joints)))
    if posterior.covariance is not None:
        from dynid.objective.linear import linear_torque_model

        every = problem.with_likelihood(stride=1)
        try:
            model = linear_torque_model(every, trajectories)
        except EstimatorError:
            model = None
        if model is not None:
            G = model.layout.jacobian(theta)
            cov_x = G @ posterior.covariance @ G.T
            spread = np.einsum("rp,pq,rq->r", model.A, cov_x, model.A).reshape(-1, len(joints))
            variance = variance + spread
    return np.sqrt(np.mean(variance, axis=0))


def validate(
    problem: Problem,
    posterior: Posterior,
    trajectories: Sequence[Trajectory],
    *,
    urdfs: Sequence[str | Path] = (),
    data: Sequence[str] = (),
) -> ValidationReport:
    """Score the identified model, the nominal model and each URDF in ``urdfs`` on
    ``trajectories``: torques for the inverse-dynamics likelihood, simulation for the shooting one
    (see the module notes).

    Args:
        problem: the problem the posterior was fitted on (its robot, control model, likelihood
            settings); its own data are not used.
        posterior: the fit; its MAP is scored (its parameters must be the problem's).
        trajectories: the held-out recordings.
        urdfs: other models of the same robot, scored with their own inertials and
            ``<dynamics>`` damping and friction.
        data: names of the held-out recordings, for the report.

    Raises:
        EstimatorError: the posterior's parameters are not the problem's, or a URDF's model
            cannot be simulated by the problem's simulation model.
        ModelError: a URDF that does not load or lacks the problem's joints.
    """
    names = problem.spec.names
    if list(posterior.names) != list(names):
        missing = sorted(set(names) - set(posterior.names))
        raise EstimatorError(
            f"the posterior's parameters are not the problem's (missing {missing[:5]}"
            f"{' …' if len(missing) > 5 else ''})"
        )
    shooting = problem.likelihood.kind == "shooting"
    theta = posterior.map()
    report = ValidationReport(
        data=list(data),
        samples=[] if shooting else heldout_samples(problem, trajectories),
        quantity="simulation" if shooting else "torque",
    )
    samples = report.samples
    identified = _score(problem, "identified", _residuals(problem, theta, trajectories, samples))
    sigma = None if shooting else _predicted_sigma(problem, posterior, theta, trajectories)
    if sigma is not None:
        identified = replace(identified, sigma_ratio=identified.rmse / sigma)
    report.scores["identified"] = identified
    nominal = problem.spec.nominal_theta(problem.robot).numpy()
    report.scores["nominal"] = _score(
        problem, "nominal", _residuals(problem, nominal, trajectories, samples)
    )
    for urdf in urdfs:
        other = _urdf_problem(problem, Path(urdf))
        residuals = _residuals(other, np.zeros(0), trajectories)
        report.scores[str(urdf)] = _score(other, str(urdf), residuals)
    return report


def _urdf_problem(problem: Problem, urdf: Path) -> Problem:
    """``problem`` on the robot of ``urdf`` with nothing free (its nominal model); movable
    joints the problem does not have (fingers) are locked at 0."""
    try:
        root = SafeET.fromstring(urdf.read_text(encoding="utf-8"))
    except (OSError, SafeET.ParseError) as exc:
        raise EstimatorError(f"URDF {urdf}: cannot read it: {exc}") from None
    movable = {"revolute", "continuous", "prismatic"}
    extra = {
        str(j.get("name")): 0.0
        for j in root.findall("joint")
        if j.get("type") in movable and j.get("name") not in problem.robot.joint_names
    }
    robot = RobotModel.from_urdf(
        urdf, locked_joints=extra or None, gravity=tuple(problem.robot.gravity)
    )
    missing = [j for j in problem.robot.joint_names if j not in robot.joint_names]
    if missing or robot.nv != problem.robot.nv:
        raise EstimatorError(
            f"URDF {urdf}: its movable joints {robot.joint_names} are not the problem's "
            f"{problem.robot.joint_names}"
        )
    return replace(problem, robot=robot, spec=ParameterSpec([]))


def validate_recording(
    posterior: str | Path,
    bag: str | Path,
    *,
    urdfs: Sequence[str | Path] = (),
    problem: str | Path | None = None,
) -> ValidationReport:
    """:func:`validate` a ``posterior.yaml`` on a recording (``dynid validate``).

    Args:
        posterior: a posterior.yaml written by ``dynid fit`` (its ``meta["problem_file"]`` is
            the model).
        bag: the held-out recording, read with the problem's topics and preprocessing.
        urdfs: other URDFs to score beside it.
        problem: a problem file to use instead of the posterior's record (posteriors written
            before it was recorded).

    Raises:
        PosteriorError, ProblemFileError, EstimatorError, ModelError: one line naming the file.
    """
    from dynid.posterior import Posterior
    from dynid.problem_file import read_problem_file

    post = Posterior.from_summary(posterior)
    source = problem if problem is not None else post.meta.get("problem_file")
    if source is None:
        raise EstimatorError(
            f"{posterior}: it does not record its problem file (meta.problem_file); pass --problem"
        )
    pf = read_problem_file(source)
    dataset = pf.load_dataset(bag, holdout=False)
    built = pf.build(dataset)
    return validate(built, post, list(dataset), urdfs=urdfs, data=[str(bag)])
