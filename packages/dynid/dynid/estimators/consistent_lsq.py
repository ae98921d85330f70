"""Physically consistent least squares: a convex fit of whole-body inertials and linear friction.

On a torque (``inverse_dynamics``) problem whose free parameters are whole bodies
(``<link>/log_cholesky_0..9``) and joint ``damping``, ``coulomb``, ``torque_offset`` and
``armature`` (rotor inertia), the efforts are linear in the standard parameters ``x``
(:mod:`dynid.objective.linear`: ``y ≈ A x``), and a body is physically consistent exactly when
its pseudo-inertia ``J(π_b) = [[½ tr(Ī) 1 − Ī, h], [hᵀ, m]]`` is positive definite (Wensing,
Kim and Slotine 2017), a linear matrix inequality in ``π_b``. The fit is the semidefinite program
(solved by Clarabel)

    min_x  ‖W (y − A x)‖² + (x − x̄)ᵀ Λ (x − x̄)
    s.t.   J(π_b) ⪰ ε_b 1  for every free body,   mass and centre-of-mass bounds,
           lower ≤ x_j ≤ upper for the joint coefficients,

with ``W`` the per-joint effort noise ``1/σ_j`` and the spec's prior as the pull ``Λ`` toward
``x̄``: each parameter's prior (a Gaussian's mean and std; a uniform one as the Gaussian of its
variance about the nominal value) linearised at its mean, ``Λ = (G Σ_θ Gᵀ)⁻¹`` with
``G = ∂x/∂θ``. Without such a pull the data leave the directions they do not excite free, and
the solution puts arbitrary mass there (hundreds of kilograms on a Panda's first links). The
margin ``ε_b = margin · tr J(π̄_b)`` keeps every pseudo-inertia strictly positive definite, so the
solution has log-Cholesky coordinates; bounds of ``log_cholesky_0`` (α = ½ ln m) and ``_7..9``
(the centre of mass) are linear in ``π`` and kept; the others (``_1..6``) are not constrained
(``meta["outside_bounds"]`` names any that end outside theirs).

**Slow rows.** dynid's dry friction is ``c tanh(v / ε)`` with ``ε`` 0.01 rad/s; a real joint's
reaches its level only after a pre-sliding and Stribeck region (Gaz et al. 2019's identified
Panda friction rises over 1/φ2 = 0.06–0.2 rad/s). Rows of that region bias the fitted Coulomb
coefficient low and the viscous one high by many σ. The rows of a joint whose ``coulomb`` is
free are left out of the fit while the joint moves slower than ``coulomb_min_speed`` (default
0.1 rad/s, m/s for a prismatic joint: ten times ``ε``, the upper end of the region above), as
classical identification leaves low-velocity samples out; a joint at rest (static friction,
anywhere in ``±c``) is left out with them. ``meta["slow_rows_left_out"]`` counts them per joint.
Held-out validation still scores every sample, so ``meta["noise_std"]`` (what
:mod:`dynid.validation` predicts a held-out sample's error with) and ``rmse_train`` are the RMS
of every training row, the slow ones included; ``scored_noise_std`` is the σ the fit weighted
its rows with.

``noise: estimate`` (default) re-solves with each joint's ``σ_j`` set to the RMS of its residual
(``max_iterations`` rounds in all); ``problem`` keeps the problem's ``torque_std``. The scored
samples are not independent: the torques are low-passed, and the model error the residual also
holds is smooth. With ``correlation: true`` (default) each joint's rows are weighted by
``1 / (σ_j² τ_j)``, ``τ_j = 1 + 2 Σ_k ρ_k`` the integrated autocorrelation of its residual over
consecutive scored samples (the sum up to the first lag whose autocorrelation is not positive),
so the data count as the ``S / τ_j`` independent samples they are worth — against the prior, and
in the covariance (on a synthetic Panda at stride 10, the 95 % intervals of the base parameters
covered the truth 77 % of the time without it).

**Mode in θ.** The convex program's prior is the linearisation ``Λ`` about the prior mean; away
from it (a body near its margin of consistency, where ``ln d`` moves x little) the solution
mapped to θ can sit several prior σ from the prior mean in a coordinate the data do not see,
while its covariance says the data left it at the prior. So after each solve the posterior's
mode in θ is sought from that solution: damped Gauss–Newton on
``½ ‖W (y − A x(θ))‖² + ½ ‖(θ − θ̄) / σ_θ‖²`` inside the spec's bounds (log-Cholesky θ is
consistent by construction), at most :data:`_MODE_ITERATIONS` steps. Mean and covariance then
describe the same point. Along the flat, curved valleys of coordinates the data leave at the
prior Gauss–Newton creeps: the last steps lower the cost by hundredths of a nat each, far
inside the posterior's spread, and the search may end on the step limit there.

The posterior is one particle (the mode's log-Cholesky coordinates and friction coefficients)
with the Laplace covariance in θ, ``(Jᵀ AᵀW² A J + Σ_θ⁻¹)⁻¹``, ``J = ∂x/∂θ`` at the
solution and ``Σ_θ`` the spec's prior in θ as given (not its linearisation ``Λ``, which the convex
fit pulls with): every θ's σ stays within its prior σ. The standard and base parameters' σ in
``meta`` come from the Laplace covariance in x, ``(AᵀW²A + Λ)⁻¹``. (That one mapped to θ by
``J⁻¹`` does not serve θ: near a body's margin its ``ln d`` coordinates barely move x, ``J`` is
nearly singular, and the mapped σ of ``ln d`` grows without bound.) Inequality constraints,
active or not, are not part of either covariance; rows are taken as independent, so
``likelihood.stride`` should thin the samples to about the residual's correlation time. ``meta``
carries the standard parameters with their σ, the base parameters of the stacked regressor
(:class:`dynid.model.base_parameters.BaseParameters`: which combinations the data fix, their σ
against the prior's, which standard parameters the data fix only in combination and which not at
all), the training RMSE per joint, the noise estimate, and in ``unidentified`` the spec
parameters whose posterior σ exceeds ``identified_below`` of their prior σ (they stay at the
prior).
"""

from __future__ import annotations

import math
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from dynid.estimators.base import Estimator, EstimatorError, StepInfo
from dynid.model.base_parameters import BaseParameters
from dynid.objective.linear import (
    PSEUDO_BASIS,
    LinearTorqueModel,
    linear_torque_model,
    pseudo_inertia,
)
from dynid.objective.sandwich import correlation_time, sandwich_covariance, with_floor
from dynid.posterior import Posterior

if TYPE_CHECKING:
    from dynid.problem import Problem

__all__ = ["ConsistentLeastSquares"]

_NOISE = ("estimate", "problem")
_FAR = 1e3
"""A linear bound more than this many prior standard deviations away is not passed to the
solver (it cannot be active, and its size would spoil the conditioning)."""
_MODE_ITERATIONS = 100
"""The most Gauss–Newton steps from the convex solution to the posterior's mode in θ."""
_MODE_FTOL = 1e-12
"""Relative cost decrease below which the mode is taken as reached."""
# the PSD-triangle cone's order: upper triangle column by column, off-diagonals scaled by √2
_TRIANGLE = [(i, j) for j in range(4) for i in range(j + 1)]
_SVEC = np.array([[1.0 if i == j else math.sqrt(2.0) for i, j in _TRIANGLE]])
_SVEC_BASIS = np.stack([[PSEUDO_BASIS[k, i, j] for i, j in _TRIANGLE] for k in range(10)], 1)
_SVEC_BASIS = _SVEC_BASIS * _SVEC.T  # [10 entries, 10 π] : svec(J(π)) = _SVEC_BASIS @ π


class ConsistentLeastSquares(Estimator):
    """Convex physically consistent least squares (see the module notes).

    Args:
        margin: ``ε_b`` as a fraction of the trace of the prior mean's pseudo-inertia.
        noise: ``estimate`` (re-estimate each joint's σ from the residuals) or ``problem``.
        correlation: weight each joint by its residual's correlation time (module notes).
        identified_below: a parameter whose posterior σ exceeds this fraction of its prior σ is
            reported as staying at the prior.
        rank_tol: relative tolerance of the base-parameter analysis.
        max_iterations: solves (the first with the problem's σ, each next one with the
            re-estimated σ when ``noise`` is ``estimate``).
        coulomb_min_speed: rad/s (m/s): a joint's rows are left out while it moves slower than
            this, where its ``coulomb`` is free (module notes); 0 scores every row.
        seed: unused (the method is deterministic); kept for the common interface.
    """

    kind = "consistent_lsq"
    defaults_file = resources.files("dynid.estimators") / "defaults/consistent_lsq.yaml"

    def __init__(
        self,
        *,
        margin: float = 1e-6,
        noise: str = "estimate",
        correlation: bool = True,
        identified_below: float = 0.5,
        rank_tol: float = 1e-8,
        max_iterations: int = 2,
        coulomb_min_speed: float = 0.1,
        seed: int = 0,
    ) -> None:
        super().__init__(max_iterations=max_iterations, seed=seed)
        if noise not in _NOISE:
            raise EstimatorError(f"consistent_lsq: noise must be one of {_NOISE}, got {noise!r}")
        if not (
            margin >= 0.0
            and 0.0 < identified_below <= 1.0
            and rank_tol > 0.0
            and coulomb_min_speed >= 0.0
        ):
            raise EstimatorError(
                "consistent_lsq: need margin ≥ 0, 0 < identified_below ≤ 1, rank_tol > 0 and "
                "coulomb_min_speed ≥ 0"
            )
        self.coulomb_min_speed = float(coulomb_min_speed)
        self.margin = float(margin)
        self.noise = noise
        self.correlation = bool(correlation)
        self.identified_below = float(identified_below)
        self.rank_tol = float(rank_tol)
        self._problem: Problem | None = None

    # ------------------------------------------------------------------------------ set-up
    def init(self, problem: Problem, warm_start: Posterior | None = None) -> None:
        """Build the linear torque model and the prior (a warm start changes nothing: the
        problem is convex)."""
        try:
            import clarabel  # noqa: F401
        except ImportError:
            raise EstimatorError("consistent_lsq needs clarabel (pip install clarabel)") from None
        self._start = time.perf_counter()
        self._problem = problem
        self.model = linear_torque_model(problem)
        layout, spec = self.model.layout, problem.spec
        nominal = spec.nominal_theta(problem.robot).numpy()
        gaussian = [p.prior == "gaussian" for p in spec.parameters]
        lower, upper = spec.lower.numpy(), spec.upper.numpy()
        self._theta_mean = np.array(
            [p.mean if g else n for p, g, n in zip(spec.parameters, gaussian, nominal, strict=True)]
        )
        self._theta_std = np.array([p.prior_std for p in spec.parameters])
        G = layout.jacobian(self._theta_mean)  # ∂x/∂θ [P, M]
        self._x_mean = layout.x_of_theta(self._theta_mean)
        self._prior_cov_x = G @ np.diag(self._theta_std**2) @ G.T
        self._prior_precision = _inverse_spd(self._prior_cov_x)
        self._lower, self._upper = lower, upper
        self._nominal = nominal
        dry = [j for j, field, _ in layout.joint_terms if field == "coulomb"]
        self._scored = ~(
            np.isin(self.model.joint, dry) & (self.model.speed < self.coulomb_min_speed)
        )
        self._sigma = self.model.torque_std.copy()
        self._tau = np.ones_like(self._sigma)
        self._x: np.ndarray | None = None
        self._theta: np.ndarray | None = None
        self._rounds = 0
        self._status = ""

    def _require(self) -> tuple[Problem, LinearTorqueModel]:
        if self._problem is None:
            raise EstimatorError("ConsistentLeastSquares.step/posterior called before init")
        return self._problem, self.model

    # ------------------------------------------------------------------------------ solve
    def _solve(self) -> np.ndarray:
        """One solve of the semidefinite program with the current noise σ (module notes), in
        the scaled coordinates ``x = x̄ + S z`` (``S`` the prior standard deviations of x)."""
        import clarabel
        import scipy.sparse as sp

        _, model = self._require()
        layout = model.layout
        w = self._weights()
        Aw = model.A * w[:, None]
        scale = np.sqrt(np.diag(self._prior_cov_x))
        AS = Aw * scale[None, :]
        H = AS.T @ AS + scale[:, None] * self._prior_precision * scale[None, :]
        g = AS.T @ (model.y * w - Aw @ self._x_mean)  # minimise ½ zᵀ H z − gᵀ z
        P = H.shape[0]
        rows: list[np.ndarray] = []  # constraints A z + s = b, s in the cones
        rhs: list[np.ndarray] = []
        cones = []

        def nonnegative(a: np.ndarray, b: float) -> None:  # a·z ≤ b, rows of unit norm
            norm = float(np.linalg.norm(a))
            if b / norm > _FAR:  # a bound far beyond the prior's reach: left out (conditioning)
                return
            rows.append(a[None, :] / norm)
            rhs.append(np.array([b / norm]))
            cones.append(clarabel.NonnegativeConeT(1))

        x0 = self._x_mean
        for k, (_, _, cols) in enumerate(layout.bodies):
            block = slice(10 * k, 10 * k + 10)
            eps = self.margin * float(np.trace(pseudo_inertia(x0[block])))
            # svec(J(x̄ + S z) − ε 1) ∈ PSD:  −B S z + s = B x̄ − ε svec(1)
            a = np.zeros((10, P))
            a[:, block] = -_SVEC_BASIS * scale[block][None, :]
            rows.append(a)
            eye = np.array([1.0 if i == j else 0.0 for i, j in _TRIANGLE])
            rhs.append(_SVEC_BASIS @ x0[block] - eps * eye)
            cones.append(clarabel.PSDTriangleConeT(4))
            lo, hi = self._lower[list(cols)], self._upper[list(cols)]
            i_m = 10 * k
            e = np.zeros(P)
            e[i_m] = scale[i_m]
            nonnegative(-e, x0[i_m] - math.exp(2.0 * lo[0]))  # m ≥ e^{2 α_lo}
            nonnegative(e, math.exp(2.0 * hi[0]) - x0[i_m])  # m ≤ e^{2 α_hi}
            for axis in range(3):  # lo·m ≤ h ≤ hi·m
                i_h = i_m + 1 + axis
                for bound, sign in ((lo[7 + axis], -1.0), (hi[7 + axis], 1.0)):
                    a1 = np.zeros(P)
                    a1[i_h] = sign * scale[i_h]
                    a1[i_m] = -sign * bound * scale[i_m]
                    nonnegative(a1, -sign * (x0[i_h] - bound * x0[i_m]))
        for k, (_, _, col) in enumerate(layout.joint_terms):
            i = layout.num_inertial + k
            e = np.zeros(P)
            e[i] = scale[i]
            nonnegative(-e, x0[i] - self._lower[col])
            nonnegative(e, self._upper[col] - x0[i])
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        solver = clarabel.DefaultSolver(
            sp.csc_matrix(np.triu(H)),
            -g,
            sp.csc_matrix(np.concatenate(rows)),
            np.concatenate(rhs),
            cones,
            settings,
        )
        solution = solver.solve()
        self._status = str(solution.status)
        if self._status not in ("Solved", "AlmostSolved"):
            raise EstimatorError(
                f"consistent_lsq: no solution ({self._status}); are the bounds of the "
                "log-Cholesky masses and centres of mass compatible with the prior?"
            )
        return x0 + scale * np.asarray(solution.x, dtype=np.float64)

    def step(self, iterations: int = 1) -> StepInfo:
        """Run the remaining solves (noise re-estimation rounds) and report the fit."""
        _, model = self._require()
        while self._rounds < self.max_iterations:
            self._theta = self._mode(self._solve())
            self._x = model.layout.x_of_theta(self._theta)
            self._rounds += 1
            if self.noise == "problem":
                break
            self._sigma = np.maximum(self._rmse(self._x)[0], 1e-9)
            if self.correlation:
                self._tau = correlation_time(self._residuals(self._x), model.samples)
        assert self._x is not None
        assert self._theta is not None
        return StepInfo(
            iteration=self._rounds,
            loss=self._cost(self._theta),
            wall_s=time.perf_counter() - self._start,
            converged=True,
            metrics={"rmse": self._rmse(self._x)[1]},
        )

    def _mode(self, x: np.ndarray) -> np.ndarray:
        """The posterior's mode in θ from the convex solution ``x`` (module notes): damped
        Gauss–Newton on :meth:`_cost` inside the spec's bounds, started at θ(x)."""
        _, model = self._require()
        layout = model.layout
        w = self._weights()
        Aw = model.A * w[:, None]
        H_x, b = Aw.T @ Aw, Aw.T @ (model.y * w)
        precision = self._theta_std**-2.0
        theta = np.clip(layout.theta_of_x(x, self._nominal), self._lower, self._upper)
        cost, damping = self._cost(theta), 1e-3
        for _ in range(_MODE_ITERATIONS):
            G = layout.jacobian(theta)
            gradient = G.T @ (H_x @ layout.x_of_theta(theta) - b)
            gradient += precision * (theta - self._theta_mean)
            H = G.T @ H_x @ G + np.diag(precision)
            d = 1.0 / np.sqrt(np.diag(H))
            scaled = H * d[:, None] * d[None, :]
            step = -d * np.linalg.solve(scaled + damping * np.eye(d.size), d * gradient)
            trial = np.clip(theta + step, self._lower, self._upper)
            trial_cost = self._cost(trial)
            if trial_cost < cost:
                decrease = cost - trial_cost
                theta, cost, damping = trial, trial_cost, max(damping / 3.0, 1e-9)
                if decrease <= _MODE_FTOL * max(cost, 1.0):
                    break
            else:
                damping *= 4.0
                if damping > 1e8:
                    break
        return theta

    def _weights(self) -> np.ndarray:
        """``[R]`` row weights ``1 / (σ_j √τ_j)``, 0 on the rows left out (module notes)."""
        _, model = self._require()
        return self._scored / (self._sigma * np.sqrt(self._tau))[model.joint]

    def _residuals(self, x: np.ndarray) -> np.ndarray:
        """``[S, nv]`` residuals at ``x``, 0 on the rows left out."""
        _, model = self._require()
        return model.residuals(x) * self._scored.reshape(-1, model.nv)

    def _rmse(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """Per-joint ``[nv]`` and overall RMS of the scored residuals at ``x``."""
        _, model = self._require()
        r2 = self._residuals(x) ** 2
        counts = np.maximum(self._scored.reshape(-1, model.nv).sum(axis=0), 1)
        return np.sqrt(r2.sum(axis=0) / counts), float(np.sqrt(r2.sum() / counts.sum()))

    def _cost(self, theta: np.ndarray) -> float:
        """The negative log posterior in θ: ``½ ‖W (y − A x(θ))‖² + ½ ‖(θ − θ̄) / σ_θ‖²``."""
        _, model = self._require()
        r = self._residuals(model.layout.x_of_theta(theta)) / (self._sigma * np.sqrt(self._tau))
        return 0.5 * float(
            np.sum(r**2) + np.sum(((theta - self._theta_mean) / self._theta_std) ** 2)
        )

    # ------------------------------------------------------------------------------ results
    def posterior(self) -> Posterior:
        """The solution as one particle with its Laplace covariance (module notes)."""
        problem, model = self._require()
        if self._x is None:
            self.step()
        x, theta = self._x, self._theta
        assert x is not None
        assert theta is not None
        layout, spec = model.layout, problem.spec
        Aw, rw = self._weighted_rows(x)
        cov_x = self._laplace_covariance(Aw, rw, self._prior_precision)
        AJ = Aw @ layout.jacobian(theta)  # ∂(W y)/∂θ at the solution
        cov_theta = self._laplace_covariance(AJ, rw, np.diag(self._theta_std**-2.0))
        std_theta = np.sqrt(np.clip(np.diag(cov_theta), 0.0, None))
        unidentified = [
            n
            for n, s, s0 in zip(spec.names, std_theta, self._theta_std, strict=True)
            if s > self.identified_below * s0
        ]
        outside = [
            n
            for n, v, lo, hi in zip(spec.names, theta, self._lower, self._upper, strict=True)
            if not lo <= v <= hi
        ]
        rms, overall = model.rmse(x)  # every row: a held-out sample is scored on all of them
        joints = problem.robot.joint_names
        noise = self._sigma if self.noise == "problem" else np.maximum(self._sigma, rms)
        meta: dict[str, Any] = {
            "problem": problem.name,
            "residuals": "inverse_dynamics",
            "consistent": True,
            "noise": self.noise,
            "noise_std": {j: float(s) for j, s in zip(joints, noise, strict=True)},
            "scored_noise_std": {j: float(s) for j, s in zip(joints, self._sigma, strict=True)},
            "correlation_time": {j: float(t) for j, t in zip(joints, self._tau, strict=True)},
            "rmse_train": {**{j: float(r) for j, r in zip(joints, rms, strict=True)},
                           "overall": overall},
            "samples": int(sum(model.samples)),
            "coulomb_min_speed": self.coulomb_min_speed,
            "slow_rows_left_out": {
                j: int(n)
                for j, n in zip(
                    joints, (~self._scored).reshape(-1, model.nv).sum(axis=0), strict=True
                )
            },
            "solver_status": self._status,
            "min_pseudo_inertia_eigenvalue": {
                link: float(np.linalg.eigvalsh(pseudo_inertia(x[10 * k : 10 * k + 10]))[0])
                for k, (_, link, _) in enumerate(layout.bodies)
            },
            "standard_parameters": _standard_meta(layout.names, layout.units, x, cov_x,
                                                  self._x_mean, self._prior_cov_x),
            "identifiability": self.identifiability(x, cov_x),
            "unidentified": unidentified,
            "outside_bounds": outside,
            "iterations": self._rounds,
            "converged": True,
            "wall_s": time.perf_counter() - self._start,
        }  # fmt: skip
        return Posterior(
            particles=theta[None],
            names=list(spec.names),
            units=list(spec.units),
            log_likelihood=np.array([-self._cost(theta)]),
            covariance=cov_theta,
            estimator=self.kind,
            iteration=self._rounds,
            meta=meta,
        )

    def _weighted_rows(self, x: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, int]]:
        """``(W A [R, P], (W (y − A x) [R], nv))``: the weighted rows and residuals at ``x``
        (``W`` 0 on the rows left out), as :func:`sandwich_covariance` takes them."""
        _, model = self._require()
        w = self._weights()
        return model.A * w[:, None], (model.residuals(x).reshape(-1) * w, model.nv)

    def standard_covariance(self) -> np.ndarray:
        """``[P, P]`` Laplace covariance of the standard parameters ``x`` at the solution
        (:mod:`dynid.objective.linear` order and units), ``(AᵀW²A + Λ)⁻¹`` with the residuals'
        sandwich as its floor (module notes); solves first if :meth:`step` has not run."""
        if self._x is None:
            self.step()
        assert self._x is not None
        return self._laplace_covariance(*self._weighted_rows(self._x), self._prior_precision)

    def _laplace_covariance(
        self, J: np.ndarray, rw: tuple[np.ndarray, int], prior_precision: np.ndarray
    ) -> np.ndarray:
        """``[P, P]`` covariance of the parameters whose weighted-residual Jacobian is
        ``J [R, P]``: ``(JᵀJ + prior_precision)⁻¹`` with the sandwich of the weighted residuals
        ``rw`` (as :meth:`_weighted_rows` gives them) as its floor (module notes)."""
        _, model = self._require()
        return with_floor(
            sandwich_covariance(J, *rw, segments=model.samples, prior_precision=prior_precision),
            _inverse_spd(J.T @ J + prior_precision),
        )

    def identifiability(self, x: np.ndarray, cov_x: np.ndarray) -> dict[str, Any]:
        """The base-parameter report of ``meta["identifiability"]`` at ``x`` with ``cov_x``."""
        _, model = self._require()
        names = model.layout.names
        # the structure is that of the scored rows; the problem's σ only scales the joints
        w = self._scored / model.torque_std[model.joint]
        base = BaseParameters.of(model.A * w[:, None], names, tol=self.rank_tol)
        self.base_parameters = base
        values = base.values(x)
        std = np.sqrt(np.clip(np.diag(base.covariance(cov_x)), 0.0, None))
        prior_std = np.sqrt(np.clip(np.diag(base.covariance(self._prior_cov_x)), 0.0, None))
        rows = []
        at_prior: set[int] = set(base.unexcited)
        for k in range(base.rank):
            identified = bool(std[k] <= self.identified_below * prior_std[k])
            if not identified:
                at_prior.update(base.members(k))
            rows.append({
                "expression": base.expression(k),
                "value": float(values[k]),
                "std": float(std[k]),
                "prior_std": float(prior_std[k]),
                "identified": identified,
            })  # fmt: skip
        return {
            "rank": base.rank,
            "num_standard": len(names),
            "base_parameters": rows,
            "alone": [names[i] for i in base.alone()],
            "combined": [names[i] for i in base.combined()],
            "unexcited": [names[i] for i in base.unexcited],
            "at_prior": [names[i] for i in sorted(at_prior)],
        }


def _standard_meta(
    names: tuple[str, ...],
    units: tuple[str, ...],
    x: np.ndarray,
    cov: np.ndarray,
    prior_mean: np.ndarray,
    prior_cov: np.ndarray,
) -> dict[str, dict[str, Any]]:
    std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    prior_std = np.sqrt(np.clip(np.diag(prior_cov), 0.0, None))
    return {
        n: {"value": float(v), "std": float(s), "prior_mean": float(m), "prior_std": float(s0),
            "unit": u}
        for n, u, v, s, m, s0 in zip(names, units, x, std, prior_mean, prior_std, strict=True)
    }  # fmt: skip


def _inverse_spd(H: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive definite matrix, scaled to unit diagonal first (the
    standard parameters span many orders of magnitude: kg against kg·m²)."""
    H = 0.5 * (H + H.T)
    d = 1.0 / np.sqrt(np.clip(np.diag(H), 1e-300, None))
    scaled = H * d[:, None] * d[None, :]
    try:
        factor = np.linalg.cholesky(scaled)
        inv = np.linalg.inv(factor)
        inverse = inv.T @ inv
    except np.linalg.LinAlgError:
        raise EstimatorError(
            "consistent_lsq: the information matrix is singular (a parameter with neither data "
            "nor prior?)"
        ) from None
    return inverse * d[:, None] * d[None, :]
