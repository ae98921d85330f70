"""Cholesky solves of symmetric positive-definite systems in the component-first layout.

A batch of n×n systems is stored ``[n, n (+ 1), Bt]``: matrix entries first, the flattened batch
last (the layout of :mod:`dynid.model.cf_algebra`), so each step of the factorisation is an
elementwise operation on contiguous rows of length Bt, without the transposes to and from a
batch-first LAPACK call. The dynamics solve M(q) q̈ = τ − b with it (CRBA + Cholesky,
Featherstone, *Rigid Body Dynamics Algorithms*, §6.2) and reuse the factor for the
backward pass (λ = M⁻¹ ḡ). Units follow the inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["cf_cholesky_apply_inverse", "cf_cholesky_solve_"]


def cf_cholesky_solve_(A: Tensor) -> Tensor:
    """Solve M x = b for symmetric positive-definite M, in place, component-first.

    A: [n, n + 1, ...] holding M_ij (i ≤ j) in its upper triangle and b in column n; the strict
    lower triangle is never read. Overwritten with the upper Cholesky factor U (M = UᵀU) in
    ``A[:, :n]`` (upper triangle) and y = U⁻ᵀ b in ``A[:, n]``: pass it to
    :func:`cf_cholesky_apply_inverse` to solve with M again. The forward substitution rides along
    the factorisation as the extra column (outer-product form: one ``sqrt``, one division and one
    rank-1 update of the trailing block per column). Returns x [n, ...]. Not differentiable by
    autograd (in-place); use it under ``torch.no_grad``.
    """
    n = A.shape[0]
    for j in range(n):
        pivot = A[j, j].sqrt_()
        row = A[j, j + 1 :].div_(pivot)
        if j + 1 < n:
            A[j + 1 :, j + 1 :].addcmul_(
                row[: n - j - 1].unsqueeze(1), row.unsqueeze(0), value=-1.0
            )
    return _back_substitute(A[:, :n], A[:, n])


def cf_cholesky_apply_inverse(U: Tensor, b: Tensor) -> Tensor:
    """x = M⁻¹ b [n, ...] for M = UᵀU, U the factor left by :func:`cf_cholesky_solve_`.

    U: [n, n (+ 1), ...] (upper triangle read); b: [n, ...] broadcasting with U's batch.
    """
    n = U.shape[0]
    rest = b + torch.zeros_like(U[:, 0])  # a fresh tensor with the batch of both
    ys = []
    for j in range(n):
        y = rest[j] / U[j, j]
        ys.append(y)
        if j + 1 < n:
            rest[j + 1 :] -= U[j, j + 1 : n] * y
    return _back_substitute(U[:, :n], torch.stack(ys))


def _back_substitute(U: Tensor, y: Tensor) -> Tensor:
    """x [n, ...] with U x = y for upper-triangular U [n, n, ...]."""
    n = U.shape[0]
    rest = y.clone()
    xs: list[Tensor] = [rest[0]] * n
    for j in reversed(range(n)):
        xs[j] = rest[j] / U[j, j]
        if j:
            rest[:j] -= U[:j, j] * xs[j]
    return torch.stack(xs)
