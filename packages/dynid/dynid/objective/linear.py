"""The torque likelihood as a linear model: measured efforts ``≈ A x + c`` over the scored samples.

Inverse dynamics is linear in every body's ten dynamic parameters (:mod:`dynid.model.regressor`)
and dynid's viscous, Coulomb and offset terms are linear in their coefficients, so when a
problem frees only those — whole bodies through ``<link>/log_cholesky_0..9`` and joint
``damping``, ``coulomb``, ``torque_offset`` and ``armature`` — the residuals of
:mod:`dynid.objective.torque` are exactly ``y − A x``, with

- ``x [P]`` the *standard parameters*: per free body ``π_b`` in Pinocchio's order about the
  joint origin in joint axes, named ``<link>/m`` (kg), ``<link>/mx|my|mz`` (kg·m),
  ``<link>/XX|XY|YY|XZ|YZ|ZZ`` (kg·m²; Khalil's notation), then the free joint coefficients under
  their own names (``<joint>/damping`` N·m·s/rad, ``<joint>/coulomb`` N·m along the samples'
  filtered direction of :class:`~dynid.objective.torque.TorqueSamples`,
  ``<joint>/torque_offset`` N·m, ``<joint>/armature`` kg·m², the rotor inertia on the
  mass-matrix diagonal);
- ``A [R, P]`` the stacked regressor (``pinocchio.computeJointTorqueRegressor`` columns of the
  free bodies and the joint columns ``v``, the direction, ``1``, ``q̈``), one row per scored
  sample and joint (sample-major, ``R = S nv``);
- ``y [R]`` the applied efforts of the control model minus everything the free parameters do not
  touch (the other bodies, armature, the friction terms held fixed), evaluated through the
  problem's own inverse dynamics at the nominal parameters.

The construction checks the identity ``residual(θ) = y − A x(θ)`` at a second parameter vector,
so a problem whose efforts depend on its parameters in another way (a fitted motor gain,
gravity, contact forces) is refused instead of being fitted wrongly. Estimators built on it:
:mod:`dynid.estimators.consistent_lsq`; validation: :mod:`dynid.validation`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import NDArray

from dynid.errors import EstimatorError
from dynid.model.regressor import joint_torque_regressor
from dynid.objective.torque import TorqueSamples, inverse_dynamics_residuals

if TYPE_CHECKING:
    from dynid.data.trajectory import Trajectory
    from dynid.problem import Problem

__all__ = [
    "INERTIAL_NAMES",
    "LINEAR_JOINT_FIELDS",
    "LinearLayout",
    "LinearTorqueModel",
    "linear_torque_model",
    "log_cholesky_from_pi",
    "pi_from_log_cholesky",
    "pi_jacobian",
    "pseudo_inertia",
]

Array = NDArray[np.float64]

INERTIAL_NAMES = ("m", "mx", "my", "mz", "XX", "XY", "YY", "XZ", "YZ", "ZZ")
"""Names of a body's standard parameters ``π_b`` (Pinocchio order, joint frame, joint origin)."""

LINEAR_JOINT_FIELDS = ("damping", "coulomb", "torque_offset", "armature")
"""Joint parameters the efforts are linear in."""

_LINEARITY_RTOL = 1e-7

# pseudo-inertia J = Σ_k π_k E_k, π = (m, mx, my, mz, XX, XY, YY, XZ, YZ, ZZ)
PSEUDO_BASIS = np.zeros((10, 4, 4))
PSEUDO_BASIS[0, 3, 3] = 1.0
for _k in range(3):
    PSEUDO_BASIS[1 + _k, _k, 3] = PSEUDO_BASIS[1 + _k, 3, _k] = 1.0
# Σ = ½ tr(Ī) 1 − Ī with Ī = [[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]]
for _k, _a in zip((4, 6, 9), (0, 1, 2), strict=True):
    PSEUDO_BASIS[_k, :3, :3] += 0.5 * np.eye(3)
    PSEUDO_BASIS[_k, _a, _a] -= 1.0
for _k, (_a, _b) in zip((5, 7, 8), ((0, 1), (0, 2), (1, 2)), strict=True):
    PSEUDO_BASIS[_k, _a, _b] = PSEUDO_BASIS[_k, _b, _a] = -1.0
# π from J: m = J33, h = J[:3, 3], Ī = tr(Σ) 1 − Σ
_PI_OF_J = np.linalg.pinv(PSEUDO_BASIS.reshape(10, 16).T)  # [10, 16]


def pseudo_inertia(pi: Array) -> Array:
    """The pseudo-inertia ``[..., 4, 4]`` of dynamic parameters ``π [..., 10]`` (Pinocchio
    order about the frame origin): ``[[½ tr(Ī) 1 − Ī, h], [hᵀ, m]]``, positive definite exactly
    for a physically consistent body (Wensing, Kim and Slotine 2017)."""
    return np.einsum("...k,kij->...ij", np.asarray(pi, dtype=np.float64), PSEUDO_BASIS)


def _upper(theta: Array) -> Array:
    """``V [4, 4]`` of log-Cholesky ``θ [10]``: ``U = e^α V`` (Rucker and Wensing 2022)."""
    _, d1, d2, d3, s12, s23, s13, t1, t2, t3 = theta
    return np.array(
        [
            [np.exp(d1), s12, s13, t1],
            [0.0, np.exp(d2), s23, t2],
            [0.0, 0.0, np.exp(d3), t3],
            [0.0, 0.0, 0.0, 1.0],
        ]
    )


def pi_from_log_cholesky(theta: Array) -> Array:
    """``π [10]`` of log-Cholesky ``θ [10]`` (``pinocchio.LogCholeskyParameters`` order α, d1,
    d2, d3, s12, s23, s13, t1, t2, t3; :func:`dynid.model.spatial.dynamic_params_from_log_cholesky`
    in numpy)."""
    theta = np.asarray(theta, dtype=np.float64)
    V = _upper(theta)
    return _PI_OF_J @ (np.exp(2.0 * theta[0]) * (V @ V.T)).reshape(16)


def pi_jacobian(theta: Array) -> Array:
    """``∂π/∂θ [10, 10]`` of :func:`pi_from_log_cholesky`."""
    theta = np.asarray(theta, dtype=np.float64)
    V = _upper(theta)
    scale = np.exp(2.0 * theta[0])
    J = scale * (V @ V.T)
    out = np.empty((10, 10))
    out[:, 0] = _PI_OF_J @ (2.0 * J).reshape(16)
    entries = {1: (0, 0), 2: (1, 1), 3: (2, 2), 4: (0, 1), 5: (1, 2), 6: (0, 2), 7: (0, 3),
               8: (1, 3), 9: (2, 3)}  # fmt: skip
    for k, (a, b) in entries.items():
        dV = np.zeros((4, 4))
        dV[a, b] = V[a, b] if k <= 3 else 1.0
        dJ = scale * (dV @ V.T + V @ dV.T)
        out[:, k] = _PI_OF_J @ dJ.reshape(16)
    return out


def log_cholesky_from_pi(pi: Array) -> Array:
    """Log-Cholesky ``θ [10]`` of a physically consistent ``π [10]`` (inverse of
    :func:`pi_from_log_cholesky`: ``J = U Uᵀ`` with ``U`` upper triangular).

    Raises:
        numpy.linalg.LinAlgError: the pseudo-inertia is not positive definite.
    """
    J = pseudo_inertia(pi)
    U = np.linalg.cholesky(J[::-1, ::-1])[::-1, ::-1]  # upper triangular, U Uᵀ = J
    e = U[3, 3]
    V = U / e
    return np.array(
        [np.log(e), np.log(V[0, 0]), np.log(V[1, 1]), np.log(V[2, 2]), V[0, 1], V[1, 2],
         V[0, 2], V[0, 3], V[1, 3], V[2, 3]]
    )  # fmt: skip


@dataclass(frozen=True)
class LinearLayout:
    """How a problem's free parameters θ map onto standard parameters x.

    Attributes:
        bodies: ``(body index, link name, [10] spec columns of log_cholesky_0..9)`` per free body.
        joint_terms: ``(joint index, field, spec column)`` per free linear joint coefficient.
        names: ``P`` standard-parameter names (module notes), bodies first.
        units: their units.
    """

    bodies: tuple[tuple[int, str, tuple[int, ...]], ...]
    joint_terms: tuple[tuple[int, str, int], ...]
    names: tuple[str, ...]
    units: tuple[str, ...]

    @property
    def num_inertial(self) -> int:
        """``10 ×`` the number of free bodies: the inertial block of x comes first."""
        return 10 * len(self.bodies)

    @classmethod
    def of(cls, problem: Problem) -> LinearLayout:
        """The layout of ``problem``'s spec.

        Raises:
            EstimatorError: a free parameter other than whole log-Cholesky bodies and joint
                ``damping``, ``coulomb``, ``torque_offset``, ``armature`` (named).
        """
        spec, robot = problem.spec, problem.robot
        bodies: dict[int, dict[int, int]] = {}
        joint_terms = []
        other = []
        for col, name in enumerate(spec.names):
            prefix, _, field = name.rpartition("/")
            if prefix in robot.body_names and field.startswith("log_cholesky_"):
                b = robot.body_names.index(prefix)
                bodies.setdefault(b, {})[int(field.rsplit("_", 1)[1])] = col
            elif prefix in robot.joint_names and field in LINEAR_JOINT_FIELDS:
                joint_terms.append((robot.joint_names.index(prefix), field, col))
            else:
                other.append(name)
        partial = [robot.body_names[b] for b, cols in bodies.items() if len(cols) != 10]
        if other or partial:
            raise EstimatorError(
                f"problem {problem.name!r}: the linear torque model takes whole bodies "
                "(<link>/log_cholesky_0..9) and joint damping, coulomb, torque_offset and "
                "armature; "
                f"{other or ''}{' ' if other and partial else ''}"
                f"{f'bodies with only some log_cholesky_* free: {partial}' if partial else ''}"
                " — fit those with lm or lsq"
            )
        body_list = tuple(
            (b, robot.body_names[b], tuple(cols[k] for k in range(10)))
            for b, cols in sorted(bodies.items())
        )
        joint_terms.sort(key=lambda t: (LINEAR_JOINT_FIELDS.index(t[1]), t[0]))
        units_inertial = ("kg", "kg*m", "kg*m", "kg*m", *("kg*m^2",) * 6)
        names: list[str] = []
        units: list[str] = []
        for _, link, _ in body_list:
            names += [f"{link}/{k}" for k in INERTIAL_NAMES]
            units += units_inertial
        for j, field, col in joint_terms:
            names.append(f"{robot.joint_names[j]}/{field}")
            units.append(spec.units[col])
        return cls(body_list, tuple(joint_terms), tuple(names), tuple(units))

    def x_of_theta(self, theta: Array) -> Array:
        """Standard parameters ``x [P]`` of the spec values ``theta [M]``."""
        theta = np.asarray(theta, dtype=np.float64)
        parts = [pi_from_log_cholesky(theta[list(cols)]) for _, _, cols in self.bodies]
        parts.append(np.array([theta[col] for _, _, col in self.joint_terms]))
        return np.concatenate(parts) if parts else np.zeros(0)

    def theta_of_x(self, x: Array, theta: Array) -> Array:
        """``theta [M]`` with the free coordinates set from ``x [P]`` (inertial blocks must be
        physically consistent: pseudo-inertia positive definite)."""
        out = np.array(theta, dtype=np.float64, copy=True)
        for k, (_, _, cols) in enumerate(self.bodies):
            out[list(cols)] = log_cholesky_from_pi(np.asarray(x[10 * k : 10 * k + 10]))
        for k, (_, _, col) in enumerate(self.joint_terms):
            out[col] = x[self.num_inertial + k]
        return out

    def jacobian(self, theta: Array) -> Array:
        """``∂x/∂θ [P, M]`` at ``theta`` (block diagonal in the free bodies)."""
        theta = np.asarray(theta, dtype=np.float64)
        J = np.zeros((len(self.names), theta.size))
        for k, (_, _, cols) in enumerate(self.bodies):
            J[10 * k : 10 * k + 10, list(cols)] = pi_jacobian(theta[list(cols)])
        for k, (_, _, col) in enumerate(self.joint_terms):
            J[self.num_inertial + k, col] = 1.0
        return J


@dataclass(frozen=True)
class LinearTorqueModel:
    """Scored efforts ``y ≈ A x`` of a problem's trajectories (module notes).

    Attributes:
        layout: the map between spec values θ and standard parameters x.
        A: ``[R, P]`` stacked regressor (SI units; rows sample-major, ``R = S nv``).
        y: ``[R]`` applied efforts minus the part the free parameters do not touch (N·m or N).
        joint: ``[R]`` joint index of each row.
        speed: ``[R]`` the filtered speed ``|q̇_j|`` of each row's joint (rad/s or m/s).
        torque_std: ``[nv]`` the problem's effort noise standard deviations.
        samples: scored samples per trajectory.
    """

    layout: LinearLayout
    A: Array
    y: Array
    joint: NDArray[np.int64]
    speed: Array
    torque_std: Array
    samples: tuple[int, ...]

    @property
    def nv(self) -> int:
        """Joints per sample."""
        return int(self.torque_std.size)

    def residuals(self, x: Array) -> Array:
        """``y − A x`` reshaped ``[S, nv]`` (N·m or N)."""
        return (self.y - self.A @ x).reshape(-1, self.nv)

    def rmse(self, x: Array) -> tuple[Array, float]:
        """Per-joint ``[nv]`` and overall RMS of the residuals at ``x``."""
        r = self.residuals(x)
        return np.sqrt(np.mean(r**2, axis=0)), float(np.sqrt(np.mean(r**2)))


def linear_torque_model(
    problem: Problem, trajectories: Sequence[Trajectory] | None = None
) -> LinearTorqueModel:
    """The linear torque model of ``problem`` on ``trajectories`` (default: its data set).

    The samples are filtered, differentiated, trimmed and thinned as the problem's likelihood
    says (:class:`~dynid.objective.torque.TorqueSamples`).

    Raises:
        EstimatorError: not a torque (``inverse_dynamics``) likelihood, free parameters that are
            not linear (:meth:`LinearLayout.of`), or efforts that do not follow ``y − A x``.
    """
    if problem.likelihood.kind != "inverse_dynamics":
        raise EstimatorError(
            f"problem {problem.name!r}: the linear torque model needs likelihood.kind "
            f"inverse_dynamics, not {problem.likelihood.kind!r}"
        )
    layout = LinearLayout.of(problem)
    robot, spec = problem.robot, problem.spec
    theta0 = spec.nominal_theta(robot).numpy()
    x0 = layout.x_of_theta(theta0)
    theta1 = _probe(problem, theta0)
    x1 = layout.x_of_theta(theta1)
    nv = robot.nv
    blocks, ys, speeds, counts = [], [], [], []
    for traj in trajectories if trajectories is not None else problem.dataset:
        s = TorqueSamples.of(problem, traj)
        q, v, a = (t.detach().cpu().numpy().astype(np.float64) for t in (s.q, s.v, s.a))
        A = _regressor(robot, layout, q, v, a, s.direction.detach().cpu().numpy())
        thetas = problem.tensor(np.stack([theta0, theta1]))
        p = problem.parameters(thetas)
        with torch.no_grad():
            applied = problem.control(p, s.q.expand(2, -1, -1), s.v.expand(2, -1, -1), s.u)
            r = inverse_dynamics_residuals(
                problem, thetas, s.q, s.v, s.a, applied, direction=s.direction
            )
        r_np = r.cpu().numpy().reshape(2, -1)
        y = r_np[0] + A @ x0  # applied − c with c = predicted(θ0) − A x0
        predicted1 = y - A @ x1
        scale = max(float(np.abs(A @ x1).max()), float(np.abs(applied.cpu().numpy()).max()), 1.0)
        if float(np.abs(predicted1 - r_np[1]).max()) > _LINEARITY_RTOL * scale:
            raise EstimatorError(
                f"problem {problem.name!r}: the efforts are not linear in the free parameters "
                "(the control model, gravity or an attachment depends on them); fit with lm or lsq"
            )
        blocks.append(A)
        ys.append(y)
        speeds.append(np.abs(v).reshape(-1))
        counts.append(q.shape[0])
    A = np.concatenate(blocks)
    stds = np.atleast_1d(np.asarray(problem.likelihood.torque_std, dtype=float))
    return LinearTorqueModel(
        layout=layout,
        A=A,
        y=np.concatenate(ys),
        joint=np.tile(np.arange(nv), A.shape[0] // nv),
        speed=np.concatenate(speeds),
        torque_std=np.broadcast_to(stds, (nv,)).astype(np.float64).copy(),
        samples=tuple(counts),
    )


def _regressor(
    robot, layout: LinearLayout, q: Array, v: Array, a: Array, direction: Array
) -> Array:
    """``A [S nv, P]``: the free bodies' regressor columns, then the joint columns (the
    Coulomb column the dry-friction ``direction [S, nv]``)."""
    S, nv = q.shape
    Y = joint_torque_regressor(robot, q, v, a)
    cols = [Y[:, :, 10 * b : 10 * b + 10] for b, _, _ in layout.bodies]
    for j, field, _ in layout.joint_terms:
        column = np.zeros((S, nv, 1))
        if field == "damping":
            column[:, j, 0] = v[:, j]
        elif field == "coulomb":
            column[:, j, 0] = direction[:, j]
        elif field == "armature":
            column[:, j, 0] = a[:, j]
        else:
            column[:, j, 0] = 1.0
        cols.append(column)
    if not cols:
        return np.zeros((S * nv, 0))
    return np.concatenate(cols, axis=2).reshape(S * nv, -1)


def _probe(problem: Problem, theta0: Array) -> Array:
    """A second parameter vector inside the bounds, away from ``theta0`` in every coordinate."""
    lower, upper = problem.spec.lower.numpy(), problem.spec.upper.numpy()
    rng = np.random.default_rng(0)
    u = rng.uniform(0.2, 0.4, size=theta0.size)
    return np.clip(theta0 + u * (upper - lower) * np.where(theta0 > 0.5 * (lower + upper), -1, 1),
                   lower, upper)  # fmt: skip
