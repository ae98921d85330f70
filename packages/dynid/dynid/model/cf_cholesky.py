"""Cholesky solves of symmetric positive-definite systems in the component-first layout.

A batch of n×n systems is stored ``[n, n (+ 1), Bt]``: matrix entries first, the flattened batch
last (the layout of :mod:`dynid.model.cf_algebra`), so each step of the factorisation is an
elementwise operation on contiguous rows of length Bt, without the transposes to and from a
batch-first LAPACK call. The dynamics solve M(q) q̈ = τ − b with it (CRBA + Cholesky,
Featherstone, *Rigid Body Dynamics Algorithms*, §6.2) and reuse the factor for the
backward pass (λ = M⁻¹ ḡ). Units follow the inputs.

The per-column loop costs a fixed overhead per operation, so for small batches LAPACK's batched
``potrf``/``potrs`` (``torch.linalg.cholesky_ex``, ``torch.cholesky_solve``), transposes
included, is faster: :func:`spd_solve_` and :func:`spd_apply_inverse` pick the solver from the
flattened batch size (:data:`LAPACK_BELOW`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "LAPACK_BELOW",
    "cf_cholesky_apply_inverse",
    "cf_cholesky_solve_",
    "spd_apply_inverse",
    "spd_solve_",
]

LAPACK_BELOW = 512
"""Flattened batch size Bt below which :func:`spd_solve_` uses LAPACK: for the 9-dof Panda + box,
LAPACK's batched Cholesky is the faster below it and the component-first one above
(``dynid_bench.model``)."""


def spd_solve_(system: Tensor) -> tuple[Tensor, Tensor]:
    """Solve M x = b for a batch of symmetric positive-definite M; returns (x [n, Bt], factor).

    system: [n, n + 1, Bt] as for :func:`cf_cholesky_solve_` (M_ij, i ≤ j, in the upper
    triangle, b in column n). For Bt ≥ :data:`LAPACK_BELOW` it is factorised in place and is the
    returned factor; below, the factor is LAPACK's lower Cholesky factor L [Bt, n, n]
    (M = L Lᵀ; the transposed upper triangle is M's lower one, the only part LAPACK reads) and
    ``system`` is left untouched. Either factor goes to :func:`spd_apply_inverse`. Entries whose
    M is not positive definite give non-finite x in both paths. Not differentiable by autograd.
    """
    n, bt = system.shape[0], system.shape[-1]
    if bt >= LAPACK_BELOW:
        return cf_cholesky_solve_(system), system
    lower, info = torch.linalg.cholesky_ex(system[:, :n].permute(2, 1, 0))
    lower = lower.masked_fill((info > 0)[:, None, None], float("nan"))
    return spd_apply_inverse(lower, system[:, n]), lower


def spd_apply_inverse(factor: Tensor, b: Tensor) -> Tensor:
    """x = M⁻¹ b [n, Bt] for b [n, Bt] with a factor returned by :func:`spd_solve_`.

    The layout of the factor says which solver made it: [n, n + 1, Bt] component-first,
    [Bt, n, n] LAPACK.
    """
    n = b.shape[0]
    if factor.shape[1] == n + 1:
        return cf_cholesky_apply_inverse(factor, b)
    return torch.cholesky_solve(b.T.unsqueeze(-1), factor).squeeze(-1).T


def cf_cholesky_solve_(A: Tensor) -> Tensor:
    """Solve M x = b for symmetric positive-definite M, in place, component-first.

    A: [n, n + 1, ...] holding M_ij (i ≤ j) in its upper triangle and b in column n; the strict
    lower triangle is never read. Overwritten with the upper Cholesky factor U (M = UᵀU) in
    ``A[:, :n]`` (upper triangle) and y = U⁻ᵀ b in ``A[:, n]``: pass it to
    :func:`cf_cholesky_apply_inverse` to solve with M again. The forward substitution rides along
    the factorisation as the extra column (outer-product form: one ``sqrt``, one division and one
    rank-1 update of the trailing block per column). Returns x [n, ...] (a fresh tensor). Not
    differentiable by autograd (in place); use it under ``torch.no_grad``.
    """
    n = A.shape[0]
    for j in range(n):
        pivot = A[j, j].sqrt_()
        row = A[j, j + 1 :].div_(pivot)
        if j + 1 < n:
            A[j + 1 :, j + 1 :].addcmul_(
                row[: n - j - 1].unsqueeze(1), row.unsqueeze(0), value=-1.0
            )
    return _back_substitute_(A[:, :n], A[:, n].clone())


def cf_cholesky_apply_inverse(U: Tensor, b: Tensor) -> Tensor:
    """x = M⁻¹ b [n, ...] for M = UᵀU, U the factor left by :func:`cf_cholesky_solve_`.

    U: [n, n (+ 1), ...] (upper triangle read); b: [n, ...] broadcasting with U's batch.
    Forward then back substitution, in place in one fresh tensor.
    """
    n = U.shape[0]
    x = b.expand(np.broadcast_shapes(b.shape, U[:, 0].shape)).clone()
    for j in range(n):  # Uᵀ y = b
        y = x[j].div_(U[j, j])
        if j + 1 < n:
            x[j + 1 :].addcmul_(U[j, j + 1 : n], y, value=-1.0)
    return _back_substitute_(U[:, :n], x)


def _back_substitute_(U: Tensor, y: Tensor) -> Tensor:
    """x [n, ...] with U x = y for upper-triangular U [n, n, ...], in place in ``y``."""
    n = U.shape[0]
    for j in reversed(range(n)):
        x = y[j].div_(U[j, j])
        if j:
            y[:j].addcmul_(U[:j, j], x, value=-1.0)
    return y
