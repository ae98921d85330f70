"""STEADY on a ``Problem``: hybrid physics plus neural residual, learned from encoders alone.

The state ``(q, v)`` of every trajectory is never taken from the recording: it is filtered from
the problem's observed joint positions, read as encoders with Gaussian noise (the problem's
``likelihood.obs_std``) and quantisation (``encoder_resolution``). The kinodynamic model is
:class:`~dynid.estimators.steady.hybrid.HybridKinodynamics`: the problem's rigid-body
physics with its free parameters θ (``problem.objective.transition``) plus a learned
acceleration residual, trained by STEADY's EM loop (:mod:`dynid.estimators.steady.em`). θ and
the network share the M step, θ with its own learning rate.

Trajectories are cut to the shortest one. With two or more, the last quarter (at least one)
validates and the rest train; with one, it does both (its validation filter sees every
``validation_stride``-th reading only).

The posterior is one particle, θ, with the inverse of its observed information by Louis'
identity (Louis 1982), ``I_obs = E[I_c | y] − Cov[S_c | y]``, as its covariance
(:meth:`STEADY.information`, :func:`louis_information`). For each training trajectory the
filter of the current model draws ``M = num_trajectories`` paths by ancestral trace-back; on a
path, the complete-data score and information of θ under the model's Gaussian transition are
``S_c = Σ_t Jᵀ diag(σ_φ⁻²)(a_t − μ_t)`` and ``I_c = Σ_t Jᵀ diag(σ_φ⁻²) J``, with ``a_t`` the
path's acceleration, ``μ_t`` the physics plus the residual mean and ``J = ∂μ_t/∂θ`` (forward-mode
autograd). ``E[I_c | y]`` is the mean over the ``M`` paths and ``Cov[S_c | y]`` their unbiased
covariance, both per trajectory, summed over trajectories. ``I_c`` is the Gauss–Newton one: the
curvature term ``Σ_t (a_t − μ_t)ᵀ diag(σ_φ⁻²) ∂²μ_t/∂θ²``, zero-mean under the model, is
dropped. Ancestral traces share their early parts (they collapse onto few distinct paths where
the filter resampled often), so the draws under-spread and the missing information is
underestimated: the covariance is still too narrow, less so than the complete-data one, and the
more so the fewer the draws. With few draws ``I_obs`` can come out indefinite; it is then
floored (:func:`louis_information`). The posterior's ``meta`` gives the share of each
parameter's variance that the complete-data information misses
(``missing_information_fraction``), the floored directions (``louis_floored_directions``) and
``M`` (``louis_draws``).

The network's weights are not physical parameters: :meth:`STEADY.save_residual` writes them
beside the posterior as a state file (``torch.save`` of the network's state dict and the names of
its features; read back with ``weights_only=True`` by :meth:`STEADY.load_residual`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.estimators.steady.em import EMSettings, Sequences, SteadyEM
from dynid.estimators.steady.filter import particle_filter, trace_trajectories
from dynid.estimators.steady.hybrid import (
    RESIDUAL_INPUTS,
    HybridKinodynamics,
    check_residual_inputs,
)
from dynid.estimators.steady.observation import EncoderObservation

if TYPE_CHECKING:
    from dynid.posterior import Posterior
    from dynid.problem import Problem, TrajectoryTensors

__all__ = ["STEADY", "LouisInformation", "louis_information"]


class LouisInformation(NamedTuple):
    """θ's observed information and what came with it (:func:`louis_information`).

    Attributes:
        observed: ``[P, P]`` the observed information after the floor (SI: the inverse of the
            product of the two parameters' units).
        covariance: ``[P, P]`` its inverse (SI).
        missing_fraction: ``[P]`` per parameter, ``1 − (I_c⁻¹)_ii / (I_obs⁻¹)_ii``: the share
            of the parameter's variance that the complete-data information misses, in
            ``[0, 1 − floor]``.
        floored: directions where the subtraction left less than ``floor`` of the
            complete-data information (``I_c − C`` indefinite or nearly so), floored there.
    """

    observed: torch.Tensor
    covariance: torch.Tensor
    missing_fraction: torch.Tensor
    floored: int


def louis_information(
    scores: torch.Tensor, complete: torch.Tensor, floor: float = 1e-3
) -> LouisInformation:
    """Louis' identity ``I_obs = I_c − Σ_k Cov_m[S_km]``, kept positive definite.

    Args:
        scores: ``[K, M, P]`` complete-data scores of θ, ``M ≥ 2`` smoothing draws of each of
            ``K`` independent sequences (SI: the inverse of θ's units).
        complete: ``[P, P]`` the complete-data information ``E[I_c | y]``, summed over the
            sequences (symmetric positive semidefinite).
        floor: in ``(0, 1)``; no direction keeps less than this fraction of its complete-data
            information.

    Returns:
        The covariance of each sequence's scores over its draws (unbiased, ``1/(M − 1)``) is
        summed over the sequences to ``C``. In the metric of ``I_c`` (its eigenvalues floored
        at ``1e-12`` of the largest), ``C`` has eigenvalues ``ρ``: the fractions of information
        missing along its eigen-directions. They are clamped to ``[0, 1 − floor]``, so
        ``floor · I_c ≤ I_obs ≤ I_c`` (Loewner order); when nothing is clamped ``I_obs = I_c −
        C`` exactly.

    Raises:
        EstimatorError: the shapes disagree, ``M < 2`` or ``floor`` is outside ``(0, 1)``.
    """
    if (
        scores.ndim != 3
        or scores.shape[1] < 2
        or complete.shape != (scores.shape[2], scores.shape[2])
        or not 0.0 < floor < 1.0
    ):
        raise EstimatorError(
            "louis_information: need scores [K, M ≥ 2, P], complete [P, P] and 0 < floor < 1, "
            f"got {tuple(scores.shape)}, {tuple(complete.shape)}, {floor}"
        )
    centred = scores - scores.mean(1, keepdim=True)
    spread = torch.einsum("kmp,kmq->pq", centred, centred) / (scores.shape[1] - 1)
    values, vectors = torch.linalg.eigh(0.5 * (complete + complete.T))
    values = values.clamp_min(1e-12 * max(float(values.abs().max()), 1e-300))
    root, inverse_root = vectors * values.sqrt(), vectors / values.sqrt()  # I_c = root rootᵀ
    ratio = inverse_root.T @ spread @ inverse_root
    rho, directions = torch.linalg.eigh(0.5 * (ratio + ratio.T))
    kept = rho.clamp(0.0, 1.0 - floor)
    basis, inverse_basis = root @ directions, inverse_root @ directions
    observed = basis @ torch.diag(1.0 - kept) @ basis.T
    covariance = inverse_basis @ torch.diag(1.0 / (1.0 - kept)) @ inverse_basis.T
    complete_variance = (inverse_root * inverse_root).sum(1)
    missing = 1.0 - complete_variance / covariance.diagonal()
    return LouisInformation(observed, covariance, missing, int((rho > 1.0 - floor).sum()))


class STEADY(Estimator):
    """STEADY (module notes). Settings (defaults in ``defaults/steady.yaml``):

    Args:
        num_particles: particles of the E step.
        num_trajectories: trajectories traced per E step, and per training trajectory for θ's
            covariance (``M ≥ 2``; more draws, a less understated spread).
        learning_rate: Adam's rate for the residual network (the paper's 1e-4).
        lr_drops: times a run out of patience, or diverged, goes on from its best validated
            model with both learning rates divided by 10 (the paper: 0).
        weight_average: decay of the moving average of the weights (residual and θ) taken after
            every M step, which validation scores and the run keeps (0: none, the paper).
        std_scales: factors tried on the residual's learned std of each joint when the run
            ends, kept where they raise the validation likelihood
            (:meth:`~dynid.estimators.steady.em.SteadyEM.calibrate_std`; empty: none, the paper).
        parameter_learning_rate: Adam's rate for θ (in the logit of its bounds).
        weight_decay: Adam's L2 weight decay of the network and θ, or with ``decoupled_decay``
            the shrinkage of the network's weight matrices by ``1 − weight_decay`` per M step
            (θ and the biases untouched).
        decoupled_decay: see ``weight_decay`` (the reference implementation's decay).
        obs_weight_start: first observation weight; it grows linearly to 1 over
            ``anneal_steps`` iterations.
        anneal_steps: see ``obs_weight_start``.
        validation_every: iterations between validations (early stopping).
        validation_stride: the validation filter sees every this-many-th reading.
        patience: validations without improvement before stopping.
        encoder_resolution: quantisation step of the position readings (rad or m per count;
            0: none).
        initial_velocity_std: std of the initial velocities about the recorded (or zero) ones.
        residual: learn the residual mean (``False``: physics plus learned noise only).
        residual_inputs: the residual's features, of ``("position", "velocity", "control")``
            (:class:`~dynid.estimators.steady.hybrid.HybridKinodynamics`).
        hidden, std_floor, initial_std: of the residual network (std in rad/s² or m/s²).
        max_iterations, seed: of :class:`~dynid.estimators.base.Estimator`.
    """

    kind = "steady"
    defaults_file = resources.files("dynid.estimators") / "defaults/steady.yaml"

    def __init__(
        self,
        *,
        num_particles: int = 1000,
        num_trajectories: int = 10,
        learning_rate: float = 1e-4,
        lr_drops: int = 0,
        weight_average: float = 0.0,
        std_scales: Sequence[float] = (),
        parameter_learning_rate: float = 1e-2,
        weight_decay: float = 1e-4,
        decoupled_decay: bool = True,
        obs_weight_start: float = 1e-3,
        anneal_steps: int = 200,
        validation_every: int = 50,
        validation_stride: int = 10,
        patience: int = 30,
        encoder_resolution: float = 0.0,
        initial_velocity_std: float = 0.1,
        residual: bool = True,
        residual_inputs: Sequence[str] = RESIDUAL_INPUTS,
        hidden: int = 64,
        std_floor: float = 1e-3,
        initial_std: float = 1.0,
        max_iterations: int = 1000,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        self.settings = EMSettings(
            num_particles=num_particles,
            num_trajectories=num_trajectories,
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            decoupled_decay=decoupled_decay,
            lr_drops=lr_drops,
            weight_average=weight_average,
            std_scales=tuple(std_scales),
            obs_weight_start=obs_weight_start,
            anneal_steps=anneal_steps,
            validation_every=validation_every,
            validation_stride=validation_stride,
            validation_particles=num_particles,
            patience=patience,
        )
        if (
            parameter_learning_rate <= 0
            or initial_velocity_std <= 0
            or encoder_resolution < 0
            or num_trajectories < 2
        ):
            raise EstimatorError(
                "steady: parameter_learning_rate and initial_velocity_std must be > 0, "
                "encoder_resolution ≥ 0 and num_trajectories ≥ 2, got "
                f"{parameter_learning_rate}, {initial_velocity_std}, {encoder_resolution}, "
                f"{num_trajectories}"
            )
        self.parameter_learning_rate = float(parameter_learning_rate)
        self.encoder_resolution = float(encoder_resolution)
        self.initial_velocity_std = float(initial_velocity_std)
        self.residual = bool(residual)
        self.network = {
            "inputs": check_residual_inputs(residual_inputs),
            "hidden": hidden,
            "std_floor": std_floor,
            "initial_std": initial_std,
        }
        self._em: SteadyEM | None = None
        self._problem: Problem | None = None

    # ------------------------------------------------------------------ set-up
    def _encoder_indices(self, problem: Problem) -> list[int]:
        joints = list(problem.robot.joint_names)
        indices = []
        for name in problem.obs_names:
            joint, _, quantity = name.rpartition("/")
            if quantity != "position" or joint not in joints:
                raise EstimatorError(
                    f"steady: problem {problem.name!r} observes {name!r}; STEADY reads joint "
                    f"encoders '<joint>/position' of {joints}"
                )
            indices.append(joints.index(joint))
        return indices

    def sequences(
        self, problem: Problem, data: Sequence[TrajectoryTensors] | None = None
    ) -> Sequences:
        """``data`` (default: the problem's, ``problem.objective.data``) as filter sequences:
        controls, the encoder readings, and the initial-state distribution about the first
        reading (std ``sqrt(σ² + r²/12)``) and the recorded first velocity
        (``initial_velocity_std``); cut to the shortest trajectory."""
        indices = self._encoder_indices(problem)
        data = problem.objective.data if data is None else data
        length = min(d.num_samples for d in data)
        controls = torch.stack([d.controls[: length - 1] for d in data])
        readings = torch.stack([d.targets[:length] for d in data])
        nv = problem.robot.nv
        q0 = torch.stack([d.initial_state()[0] for d in data])
        v0 = torch.stack([d.initial_state()[1] for d in data])
        q0[:, indices] = torch.where(torch.isnan(readings[:, 0]), q0[:, indices], readings[:, 0])
        obs_std = problem.obs_std.cpu().numpy()
        q_std = torch.full((nv,), float(np.max(obs_std)), dtype=q0.dtype, device=q0.device)
        q_std[indices] = torch.as_tensor(np.sqrt(obs_std**2 + self.encoder_resolution**2 / 12)).to(
            q0
        )
        v_std = self.initial_velocity_std

        def initial(k: int, n: int, generator: torch.Generator) -> torch.Tensor:
            noise = torch.randn((n, 2 * nv), generator=generator, dtype=q0.dtype)
            return torch.cat([q0[k] + q_std * noise[:, :nv], v0[k] + v_std * noise[:, nv:]], -1)

        return Sequences(controls, readings, initial, problem.dt)

    def observation(self, problem: Problem) -> EncoderObservation:
        """The encoder model of ``problem``'s readings (``likelihood.obs_std``,
        ``encoder_resolution``)."""
        indices = self._encoder_indices(problem)
        return EncoderObservation(indices, problem.obs_std.cpu().numpy(), self.encoder_resolution)

    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Build the hybrid model at the nominal parameters (or ``warm_start``'s MAP), the
        encoder model and the EM loop.

        Raises:
            EstimatorError: the problem observes something other than joint positions, its
                simulation is not the rigid one with one substep.
        """
        spec = problem.spec
        indices = self._encoder_indices(problem)
        data = problem.objective.data
        if warm_start is not None:
            theta0 = torch.as_tensor(warm_start.subset(spec.names).map())
        else:
            theta0 = spec.nominal_theta(problem.robot)
        theta0 = spec.clamp(theta0.reshape(1, -1))[0]
        torch.manual_seed(self.seed)
        model = HybridKinodynamics(problem, theta0, residual=self.residual, **self.network)
        n_valid = max(1, len(data) // 4) if len(data) > 1 else 0
        train = self.sequences(problem, data[: len(data) - n_valid])
        valid = self.sequences(problem, data[-n_valid:]) if n_valid else train
        self.normalise_features(model, train, indices)
        obs = self.observation(problem)
        net = [p for p in model.network.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(
            [
                {"params": net, "lr": self.settings.learning_rate},
                {"params": [model.z], "lr": self.parameter_learning_rate},
            ],
            weight_decay=self.settings.adam_weight_decay,
        )
        self._problem = problem
        self._em = SteadyEM(model, obs, train, valid, self.settings, self.seed, optimizer)
        self._start = time.perf_counter()

    @staticmethod
    def normalise_features(model: HybridKinodynamics, train: Sequences, indices: list[int]) -> None:
        """Feature scales from the data: the readings as positions, their differences as
        velocities (joints without readings: 0 ± 1), and the controls."""
        y = torch.nan_to_num(train.observations)
        nv = model.nv
        q = y.reshape(-1, y.shape[-1])
        v = (torch.diff(y, dim=1) / train.dt).reshape(-1, y.shape[-1])
        k, steps, nu = train.controls.shape
        u = train.controls.reshape(k * steps, nu)
        mean = torch.zeros(2 * nv + u.shape[1], dtype=y.dtype)
        std = torch.ones_like(mean)
        if q.shape[0] > 1:
            cols = torch.tensor(indices)
            mean[cols], std[cols] = q.mean(0), q.std(0)
            mean[cols + nv], std[cols + nv] = v.mean(0), v.std(0)
            if u.shape[1]:
                mean[2 * nv :], std[2 * nv :] = u.mean(0), u.std(0)
        model.set_normalisation(mean.to(model.z), std.to(model.z))

    def _require(self) -> SteadyEM:
        if self._em is None:
            raise EstimatorError("STEADY.step/posterior called before init(problem)")
        return self._em

    # ------------------------------------------------------------------ iterations
    def step(self, iterations: int = 1) -> StepInfo:
        """Run ``iterations`` EM iterations (fewer when early stopping fires or
        ``max_iterations`` is reached). When the run ends (early stopping, divergence or
        ``max_iterations``) the model goes back to the best validated one and, with
        ``std_scales``, is calibrated (``SteadyEM.finish``); later calls change nothing."""
        em = self._require()

        def ended() -> bool:
            return em.converged or em.iteration >= self.max_iterations

        for _ in range(int(iterations)):
            if ended():
                break
            em.step()
        if ended():
            em.finish()
        return StepInfo(
            iteration=em.iteration,
            loss=em.last_loss,
            wall_s=time.perf_counter() - self._start,
            converged=em.converged,
            metrics={
                "obs_weight": em.obs_weight(),
                "best_valid_log_likelihood": em.best_log_likelihood,
            },
        )

    # ------------------------------------------------------------------ results
    @property
    def model(self) -> HybridKinodynamics:
        """The hybrid model being learned."""
        model = self._require().model
        assert isinstance(model, HybridKinodynamics)
        return model

    def information(self) -> LouisInformation:
        """θ's observed information by Louis' identity over ``num_trajectories`` paths traced
        per training trajectory with the current model (module notes; seeded by ``seed``).

        Raises:
            EstimatorError: the filter lost every particle.
        """
        em = self._require()
        gen = torch.Generator().manual_seed(self.seed + 2)
        size = self.model.theta.numel()
        scores, complete = [], torch.zeros((size, size), dtype=self.model.z.dtype)
        for k in range(len(em.train)):
            x0 = em.train.initial(k, em.settings.num_particles, gen)
            result = particle_filter(
                self.model, em.observation, x0, em.train.controls[k], em.train.observations[k],
                em.train.dt, generator=gen,
            )  # fmt: skip
            paths = trace_trajectories(result, em.settings.num_trajectories, gen)
            score, information = self.complete_data(paths, em.train.controls[k], em.train.dt)
            scores.append(score)
            complete += information.mean(0)
        return louis_information(torch.stack(scores), complete)

    def complete_data(
        self, paths: torch.Tensor, controls: torch.Tensor, dt: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """θ's complete-data score ``[B, P]`` and Gauss–Newton information ``[B, P, P]`` (SI) of
        each of ``paths [B, T + 1, 2 nv]`` under controls ``[T, nu]`` held over ``dt`` (s): the
        model's transition density, ``J`` by forward-mode autograd (module notes)."""
        model, nv = self.model, self.model.nv
        theta = model.theta.detach()
        x, u = paths[:, :-1], controls.to(paths).expand(paths.shape[0], -1, -1)

        def acceleration(th: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
            physics, mean, std = model._parts(x, u, dt, th)
            return physics[..., nv:] / dt, (physics[..., nv:], mean, std)

        with torch.no_grad():  # one forward-mode pass per parameter
            columns = [
                torch.func.jvp(acceleration, (theta,), (e,), has_aux=True)
                for e in torch.eye(theta.numel(), dtype=theta.dtype)
            ]
            jacobian = torch.stack([c[1] for c in columns], -1)  # [B, T, nv, P]: ∂μ_t/∂θ
            velocity, mean, std = columns[0][2]
            error = (paths[:, 1:, nv:] - velocity) / dt - mean  # a_t − μ_t
            weight = std**-2
            score = torch.einsum("btip,bti->bp", jacobian, weight * error)
            information = torch.einsum("btip,bti,btiq->bpq", jacobian, weight, jacobian)
        return score, information

    def covariance(self) -> np.ndarray:
        """``[P, P]`` the inverse observed information of θ (SI; :meth:`information`)."""
        return self.information().covariance.cpu().numpy()

    def posterior(self) -> Posterior:
        """θ as one particle with :meth:`covariance`; the EM progress and the missing
        information (module notes) in ``meta``."""
        from dynid.posterior import Posterior

        em = self._require()
        problem = self._problem
        assert problem is not None
        theta = self.model.theta.detach().cpu().numpy()
        information = self.information()
        return Posterior(
            particles=theta[None],
            names=list(problem.spec.names),
            units=list(problem.spec.units),
            covariance=information.covariance.cpu().numpy(),
            estimator=self.kind,
            iteration=em.iteration,
            meta={
                "problem": problem.name,
                "iterations": em.iteration,
                "converged": em.converged,
                "diverged": em.diverged,
                "lr_drops": list(em.drop_reasons),
                "std_calibration": dict(em.calibration),
                "obs_weight": em.obs_weight(),
                "best_valid_log_likelihood": em.best_log_likelihood,
                "best_iteration": em.best_iteration,
                "residual": self.residual,
                "residual_parameters": sum(p.numel() for p in self.model.network.parameters()),
                "encoder_resolution": self.encoder_resolution,
                "missing_information_fraction": information.missing_fraction.tolist(),
                "louis_floored_directions": information.floored,
                "louis_draws": self.settings.num_trajectories,
                "history": [dict(h) for h in em.history],
                "wall_s": time.perf_counter() - self._start,
            },
        )

    def save_residual(self, path: str | Path) -> Path:
        """Write the residual to ``path`` (``torch.save``): ``{"inputs": [feature names],
        "network": the network's state dict}``."""
        path = Path(path)
        state = {
            "inputs": list(self.model.residual_inputs),
            "network": self.model.network.state_dict(),
        }
        torch.save(state, path)
        return path

    def load_residual(self, path: str | Path) -> None:
        """Load a residual written by :meth:`save_residual` (``weights_only=True``).

        Raises:
            EstimatorError: the file is missing, was trained on other ``residual_inputs``, or
                does not fit the network.
        """
        try:
            state = torch.load(Path(path), weights_only=True)
            inputs = tuple(state["inputs"])
            if inputs != self.model.residual_inputs:  # an EstimatorError passes the except
                raise EstimatorError(
                    f"steady: residual state {path} was trained on the features "
                    f"{list(inputs)}; this estimator's residual_inputs are "
                    f"{list(self.model.residual_inputs)}"
                )
            self.model.network.load_state_dict(state["network"])
        except (OSError, RuntimeError, KeyError, TypeError) as exc:
            text = " ".join(str(exc).split())
            raise EstimatorError(f"steady: residual state {path}: {text}") from None
