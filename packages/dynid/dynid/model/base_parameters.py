"""Numerical base parameters of a linear-in-parameters model (Gautier and Khalil; Gautier 1990).

A serial arm's inverse dynamics ``τ = W x`` is linear in its standard parameters ``x``
(:mod:`dynid.objective.linear`), but the stacked regressor ``W [R, P]`` has rank ``r < P``: some
columns are zero (parameters with no effect on the joint torques, e.g. the mass of the first link
of an arm whose first axis is vertical) and others are linear combinations of the rest (a link's
``ZZ`` and the next link's ``YY`` act only through their sum). The data then fix ``r`` *base
parameters* ``β = T x``; each is one standard parameter plus a combination of others.

The numerical method, as in FIGAROH (``tools/qrdecomposition.py``): columns with (relatively)
zero norm are set aside as unexcited; the others are scaled to unit norm and factored by QR with
column pivoting, ``W Π = Q R``; the rank ``r`` is the number of diagonal entries of ``R`` above
``tol · |R_00|``; the first ``r`` pivoted columns are the independent set ``B``, the rest ``D``,
and ``W_D = W_B K`` with ``K = R_11⁻¹ R_12`` (in the original units), so
``W x = W_B (x_B + K x_D)``: ``β = x_B + K x_D``. Coefficients below ``tol`` (relative to the
largest of their row) are exact zeros of the structure and are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from dynid.model.errors import StateError

__all__ = ["BaseParameters"]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class BaseParameters:
    """The base parameters of a regressor (module notes).

    Attributes:
        names: ``P`` standard-parameter names (columns of the regressor).
        base: ``r`` indices of the independent standard parameters (ascending): the leading
            member of each base parameter.
        dependent: indices of the excited standard parameters outside ``base``.
        unexcited: indices of the columns with no effect on the data.
        T: ``[r, P]`` base parameters ``β = T x`` (``T[:, base]`` is the identity).
    """

    names: tuple[str, ...]
    base: tuple[int, ...]
    dependent: tuple[int, ...]
    unexcited: tuple[int, ...]
    T: Array

    @property
    def rank(self) -> int:
        """Number of base parameters ``r``."""
        return len(self.base)

    @classmethod
    def of(cls, W: Array, names: Sequence[str], *, tol: float = 1e-8) -> BaseParameters:
        """The base parameters of ``W [R, P]`` with column names ``names``.

        Args:
            W: stacked regressor (any consistent row scaling, e.g. whitened).
            names: one name per column.
            tol: relative tolerance of the column norms, of the rank test on ``|R_ii|`` and of
                the coefficients kept.

        Raises:
            StateError: shapes that do not match, or non-finite entries.
        """
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2 or W.shape[1] != len(names):
            raise StateError(f"regressor of shape {W.shape} for {len(names)} parameter names")
        if not np.all(np.isfinite(W)):
            raise StateError("the regressor has non-finite entries")
        norms = np.linalg.norm(W, axis=0)
        top = float(norms.max()) if norms.size else 0.0
        excited = np.flatnonzero(norms > tol * top) if top > 0 else np.zeros(0, dtype=int)
        unexcited = tuple(int(i) for i in np.setdiff1d(np.arange(W.shape[1]), excited))
        P = W.shape[1]
        if excited.size == 0:
            return cls(tuple(names), (), (), unexcited, np.zeros((0, P)))
        scale = norms[excited]
        Wn = W[:, excited] / scale
        R, piv = scipy.linalg.qr(Wn, mode="r", pivoting=True)
        diag = np.abs(np.diag(R))
        r = int(np.sum(diag > tol * diag[0]))
        R11, R12 = R[:r, :r], R[:r, r : excited.size]
        K = scipy.linalg.solve_triangular(R11, R12) if R12.size else np.zeros((r, 0))
        base = excited[piv[:r]]
        dependent = excited[piv[r:]]
        # back to original units: β = x_B + diag(1/s_B) K diag(s_D) x_D
        K = K / scale[piv[:r], None] * scale[piv[r:]][None, :]
        T = np.zeros((r, P))
        T[np.arange(r), base] = 1.0
        T[:, dependent] = K
        row_max = np.abs(T).max(axis=1, keepdims=True)
        T[np.abs(T) < tol * row_max] = 0.0
        order = np.argsort(base)  # rows in the order of their leading standard parameter
        base, T = base[order], T[order]
        return cls(
            tuple(names),
            tuple(int(i) for i in base),
            tuple(int(i) for i in dependent),
            unexcited,
            T,
        )

    def values(self, x: Array) -> Array:
        """``β = T x [r]`` of standard parameters ``x [P]``."""
        return self.T @ np.asarray(x, dtype=np.float64)

    def covariance(self, cov_x: Array) -> Array:
        """``T Σ Tᵀ [r, r]`` for a covariance ``Σ [P, P]`` of ``x``."""
        return self.T @ np.asarray(cov_x, dtype=np.float64) @ self.T.T

    def members(self, k: int) -> list[int]:
        """Standard-parameter indices of base parameter ``k`` (its own first)."""
        own = self.base[k]
        others = [int(i) for i in np.flatnonzero(self.T[k]) if i != own]
        return [own, *others]

    def expression(self, k: int, digits: int = 4) -> str:
        """Base parameter ``k`` as text, e.g. ``"link2/ZZ + link3/YY + 0.0625 link3/m"``."""
        terms = []
        for i in self.members(k):
            c = float(self.T[k, i])
            name = self.names[i]
            if abs(c - 1.0) < 1e-12:
                terms.append(("+", name))
            elif abs(c + 1.0) < 1e-12:
                terms.append(("-", name))
            else:
                terms.append(("-" if c < 0 else "+", f"{abs(c):.{digits}g} {name}"))
        text = terms[0][1] if terms[0][0] == "+" else f"-{terms[0][1]}"
        return text + "".join(f" {sign} {term}" for sign, term in terms[1:])

    def alone(self) -> list[int]:
        """Standard parameters that are base parameters by themselves (no other member)."""
        combined = set(self.combined())
        return [i for i in self.base if i not in combined]

    def combined(self) -> list[int]:
        """Standard parameters the data fix only in combination with others (sorted)."""
        out: set[int] = set()
        for k in range(self.rank):
            members = self.members(k)
            if len(members) > 1:
                out.update(members)
        return sorted(out)
