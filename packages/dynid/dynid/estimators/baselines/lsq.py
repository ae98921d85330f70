"""Nonlinear least squares on the problem's residuals: the classical baselines of the lm paper.

``scipy.optimize.least_squares`` (trust-region reflective, ``method="trf"``) minimises
``½ ‖r(θ)‖²`` of the whitened residuals of :meth:`dynid.objective.Objective.residuals` with their
analytic Jacobian (:meth:`dynid.objective.Objective.jacobian`), inside the parameter box. What the
residuals are is the problem's ``likelihood.kind``:

- ``shooting``: the observation errors of single-shooting rollouts from each trajectory's first
  recorded state — *simulation-error* minimisation, the baseline the lm paper sets joint state
  and parameter estimation against (its Sec. 1 and 5);
- ``inverse_dynamics``: the effort errors of the filtered, differentiated recording — the
  *equation-error* (regressor) least squares of classical identification (FIGAROH, Gaz et al.
  2019), nonlinear here only where the parameters enter nonlinearly (Stribeck rate, tilt).

The solve runs in the spec's normalised coordinates ``u = (θ − lower) / (upper − lower)`` for
conditioning, from the parameters' nominal values (or a warm start's MAP). One particle comes
back with the Gauss–Newton covariance ``(JᵀJ)⁻¹ s²`` at the solution, ``s² = ‖r‖² / (R − M)``
the residual variance estimate (``R`` residuals, ``M`` parameters); directions the Jacobian does
not see keep the whole normalised range as their spread and their parameters are named in
``meta["unidentified"]``. The covariance ignores active bounds.

``step`` runs the whole solve the first time it is called (``max_iterations`` bounds the
function evaluations) and reports convergence; later calls do nothing.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from scipy.optimize import OptimizeResult, least_squares

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["LeastSquares", "gauss_newton_covariance"]


def gauss_newton_covariance(
    J: np.ndarray, residual_variance: float, *, rcond: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(JᵀJ)⁻¹ s²`` by the singular value decomposition of ``J [R, M]``.

    Directions whose singular value is below ``rcond · s_max`` (default ``eps · max(R, M)``) are
    not seen by the data: they get variance 1 (the whole normalised range when ``J`` is in
    normalised coordinates) instead of an infinite one.

    Returns:
        ``(covariance [M, M], seen [M])`` with ``seen`` flagging the parameters that load mostly
        on seen directions.
    """
    R, M = J.shape
    if M == 0:
        return np.zeros((0, 0)), np.zeros(0, dtype=bool)
    _, s, Vt = np.linalg.svd(J, full_matrices=False)
    tol = (np.finfo(float).eps * max(R, M) if rcond is None else rcond) * (s[0] if s.size else 0)
    ok = s > max(tol, 1e-300)
    variance = np.ones_like(s)
    variance[ok] = residual_variance / s[ok] ** 2
    V = Vt.T
    cov = (V * variance) @ V.T
    if s.size < M:  # fewer residuals than parameters: the rest of the space is unseen too
        full = np.eye(M)
        cov = cov + (full - V @ V.T)
    unseen_load = (V[:, ~ok] ** 2).sum(axis=1) + (1.0 - (V**2).sum(axis=1))
    return cov, unseen_load <= 0.5


class LeastSquares(Estimator):
    """Bounded nonlinear least squares on the problem's residuals (see the module notes).

    Args:
        ftol, xtol, gtol: ``scipy.optimize.least_squares`` tolerances (cost, step, gradient).
        max_iterations: the most residual evaluations (``max_nfev``).
        seed: unused (the method is deterministic); kept for the common interface.
    """

    kind = "lsq"
    defaults_file = resources.files("dynid.estimators") / "defaults/lsq.yaml"

    def __init__(
        self,
        *,
        ftol: float = 1e-10,
        xtol: float = 1e-10,
        gtol: float = 1e-10,
        max_iterations: int = 100,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        bad = [k for k, v in {"ftol": ftol, "xtol": xtol, "gtol": gtol}.items() if not v >= 0]
        if bad:
            raise EstimatorError(f"lsq settings must be ≥ 0: {bad}")
        self.ftol, self.xtol, self.gtol = float(ftol), float(xtol), float(gtol)
        self._problem: Problem | None = None

    # ------------------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Start from the nominal values (or ``warm_start``'s MAP), clipped into the box."""
        spec = problem.spec
        if warm_start is not None:
            theta0 = torch.as_tensor(warm_start.subset(spec.names).map(), dtype=torch.float64)
        else:
            theta0 = spec.nominal_theta(problem.robot)
        theta0 = spec.clamp(theta0.reshape(1, -1))[0]
        self._problem = problem
        self._scale = spec.coordinates.scale.numpy().copy()
        self._u = spec.to_unit(theta0).clamp(0.0, 1.0).numpy()
        self._result: OptimizeResult | None = None
        self._start = time.perf_counter()
        self._cost = 0.5 * float(np.sum(self._residuals(self._u) ** 2))

    def _require(self) -> Problem:
        if self._problem is None:
            raise EstimatorError("LeastSquares.step/posterior called before init(problem)")
        return self._problem

    def _theta(self, u: np.ndarray) -> torch.Tensor:
        problem = self._require()
        theta = problem.spec.from_unit(torch.as_tensor(u, dtype=torch.float64))
        return theta[None].to(dtype=problem.dtype, device=problem.device)

    def _residuals(self, u: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            r = self._require().objective.residuals(self._theta(u))[0]
        return r.detach().cpu().numpy().astype(float)

    def _jacobian(self, u: np.ndarray) -> np.ndarray:
        J = self._require().objective.jacobian(self._theta(u))[0]
        return J.detach().cpu().numpy().astype(float) * self._scale[None, :]

    # ------------------------------------------------------------------------------ solve
    def step(self, iterations: int = 1) -> StepInfo:
        """Run the whole bounded solve on the first call; later calls report the result."""
        self._require()
        if self._result is None:
            r0 = self._residuals(self._u)
            if not np.isfinite(r0).all():
                raise EstimatorError(
                    "lsq: the residuals are not finite at the initial parameters (a diverging "
                    "rollout?); start elsewhere (warm_start) or narrow the bounds"
                )
            self._result = least_squares(
                self._residuals,
                self._u,
                jac=self._jacobian,
                bounds=(np.zeros_like(self._u), np.ones_like(self._u)),
                method="trf",
                ftol=self.ftol or None,
                xtol=self.xtol or None,
                gtol=self.gtol or None,
                max_nfev=self.max_iterations,
            )
            self._u = np.clip(self._result.x, 0.0, 1.0)
            self._cost = float(self._result.cost)
        result = self._result
        return StepInfo(
            iteration=int(result.njev),
            loss=self._cost,
            wall_s=time.perf_counter() - self._start,
            converged=True,
            metrics={"nfev": float(result.nfev), "status": float(result.status)},
        )

    # ------------------------------------------------------------------------------ results
    def _samples(self, R: int) -> int:
        """Scored time samples behind ``R`` residuals (one row per channel and sample)."""
        problem = self._require()
        per_sample = problem.robot.nv if problem.objective.kind == "inverse_dynamics" else None
        per_sample = per_sample or len(problem.obs_names)
        return max(R // per_sample, 1)

    def covariance(self) -> tuple[np.ndarray, list[str], float]:
        """Gauss–Newton covariance (SI, ``[M, M]``) at the current estimate, the parameters the
        data do not determine, and the residual variance estimate ``s²`` (whitened units)."""
        problem = self._require()
        r = self._residuals(self._u)
        J = self._jacobian(self._u)
        R, M = J.shape
        s2 = float(r @ r) / max(R - M, 1)
        cov_u, seen = gauss_newton_covariance(J, s2)
        names = [n for n, ok in zip(problem.spec.names, seen, strict=True) if not ok]
        return cov_u * np.outer(self._scale, self._scale), names, s2

    def posterior(self) -> Posterior:
        """The estimate as one particle with its Gauss–Newton covariance."""
        problem = self._require()
        theta = self._theta(self._u)[0].detach().cpu().numpy()
        cov, unidentified, s2 = self.covariance()
        result = self._result
        R = int(problem.objective.residual_std().numel())
        meta: dict[str, Any] = {
            "problem": problem.name,
            "residuals": problem.objective.kind,
            "cost": self._cost,
            "mean_squared_residual": 2.0 * self._cost / self._samples(R),
            "residual_variance": s2,
            "unidentified": unidentified,
            "iterations": 0 if result is None else int(result.njev),
            "nfev": 0 if result is None else int(result.nfev),
            "status": None if result is None else int(result.status),
            "message": None if result is None else str(result.message),
            "active_bounds": [] if result is None else [
                n for n, a in zip(problem.spec.names, result.active_mask, strict=True) if a != 0
            ],
            "converged": result is not None and int(result.status) > 0,
            "wall_s": time.perf_counter() - self._start,
        }  # fmt: skip
        return Posterior(
            particles=theta[None],
            names=list(problem.spec.names),
            units=list(problem.spec.units),
            log_likelihood=np.array([-self._cost]),
            covariance=cov,
            estimator=self.kind,
            iteration=meta["iterations"],
            meta=meta,
        )
