"""Component-first algebra in torch: 3-vectors, 3×3 matrices, spatial vectors and inertias.

Layout: every quantity carries its components first and the flattened batch last, vectors
``[3, ...]``, matrices ``[3, 3, ...]``, spatial vectors ``[3, 2, ...]`` with (angular, linear) in
dim 1, and body inertias ``[10, ...]`` in Pinocchio's π order (m, h = m·c, Ī as xx, xy, yy, xz,
yz, zz). In the dynamics the trailing dims are ``[nv, Bt]`` (bodies, then Bt = N·prod(*B)
flattened batch entries), e.g. ``[3, nv, Bt]`` or ``[3, 2, nv, Bt]``. A 3×3 product, a dot or a
cross product is then a few fused multiply-adds on contiguous rows of the batch instead of a
batched ``matmul`` or ``cross`` over an innermost dim of size 3 (far slower on CPU for large
batches).

Destinations: every builder takes an optional ``out`` tensor of its result's shape. Given one
(outside autograd: ``out=`` arguments record no graph), each component is accumulated in place
in its row of ``out`` and ``out`` is returned, with no temporaries and no final stack (copy);
without one, the components are fresh tensors stacked at the end, which autograd (reverse and
forward mode, ``torch.func``) differentiates. :func:`sum_products` is the one place that
decides; the builders are written once for both.

Spatial vectors are ordered (ω, v_O) about the world origin, with the motion and force cross
products ×ₘ and ×* of Featherstone, *Rigid Body Dynamics Algorithms*, §2.9; ``tree_sum`` is the
ancestor or descendant sum over a kinematic tree used by RNEA and CRBA in base coordinates
(ibid. §5.3). Units follow the inputs (SI).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "SYM",
    "SYM_PAIRS",
    "Buffers",
    "apply_inertia",
    "cf_cross",
    "cf_dot",
    "cf_matmul",
    "cf_matvec",
    "cross_component",
    "cross_terms",
    "force_cross",
    "motion_cross",
    "rows",
    "spatial_dot",
    "spatial_from_parts",
    "spatial_parts",
    "spatial_rows",
    "stacked",
    "sum_products",
    "tree_sum",
]

Term = tuple[Tensor, Tensor, float]
"""(a, b, c): the product c·a·b of two broadcasting tensors and a constant."""


# --- destinations ---------------------------------------------------------------------------


class Buffers:
    """Destinations of the building blocks of one forward pass.

    Called with a name and a shape, it returns a tensor to write into or None (the block then
    builds fresh tensors that autograd can differentiate). Intermediates go to ``scratch``,
    reused from call to call. What the call returns and a backward pass reads later (asked for
    with ``tape=True``) goes to the ``tape`` dict: an empty dict per call gives fresh tensors, so
    no result aliases a reused buffer; ``tape`` None puts it in the scratch too (nothing of the
    call is kept). ``scratch`` None: no destinations at all.
    """

    def __init__(
        self, scratch: dict[tuple, Tensor] | None, like: Tensor, *, tape: dict | None
    ) -> None:
        self.scratch = scratch
        self.like = like
        self.tape = tape

    def __call__(self, name: str, *shape: int, tape: bool = False) -> Tensor | None:
        if self.scratch is None:
            return None
        store = self.tape if tape and self.tape is not None else self.scratch
        key = (name, shape)
        buffer = store.get(key)
        if buffer is None:
            buffer = store[key] = self.like.new_empty(shape)
        return buffer


def sum_products(
    terms: Sequence[Term], out: Tensor | None = None, base: Tensor | None = None
) -> Tensor:
    """base + Σ c·a·b over ``terms``: one ``mul`` (or ``addcmul`` onto ``base``), then one
    ``addcmul`` per further term (put a term with c = 1 first: no extra scaling).

    With ``out`` (the full broadcast shape; not under autograd) every step writes into ``out``
    and ``out`` is returned; ``base`` may be ``out`` itself (accumulation in place). Without,
    each step returns a fresh tensor (autograd-safe, inputs are never modified).
    """
    if base is None:
        a, b, c = terms[0]
        acc = torch.mul(a, b, out=out)
        if c != 1.0:
            acc = torch.mul(acc, c, out=out)
        rest = terms[1:]
    else:
        acc, rest = base, terms
        if not rest:
            return acc if out is None or acc is out else out.copy_(acc)
    for a, b, c in rest:
        acc = torch.addcmul(acc, a, b, value=c, out=out)
    return acc


def rows(out: Tensor | None, n: int) -> list[Tensor | None]:
    """The destinations of the ``n`` leading-dim rows of a result: views ``out[i]``, or Nones."""
    return [None] * n if out is None else list(out.unbind(0))


def spatial_rows(out: Tensor | None) -> tuple[list[Tensor | None], list[Tensor | None]]:
    """Destinations of the angular and linear components of a spatial vector [3, 2, ...]."""
    if out is None:
        return [None] * 3, [None] * 3
    parts = out.view(6, *out.shape[2:]).unbind(0)  # a view, never a copy: writes must land
    return list(parts[0::2]), list(parts[1::2])


def stacked(parts: Sequence[Tensor], out: Tensor | None, dim: int = 0) -> Tensor:
    """The result built from its parts: ``out`` (already written) or ``torch.stack(parts, dim)``."""
    return out if out is not None else torch.stack(list(parts), dim)


def spatial_from_parts(
    angular: Sequence[Tensor], linear: Sequence[Tensor], out: Tensor | None = None
) -> Tensor:
    """Spatial vector [3, 2, ...] from its components (``out`` if they were written into it)."""
    if out is not None:
        return out
    x = torch.stack([c for pair in zip(angular, linear, strict=True) for c in pair])
    return x.reshape(3, 2, *x.shape[1:])


# --- 3-vectors and 3×3 matrices ------------------------------------------------------------


def cf_dot(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """a · b over the leading component dim: [3, ...] × [3, ...] → [...] (broadcasting).

    Fused multiply-adds rather than a product and a sum: no [3, ...] temporary.
    """
    # one unbind (not three selects): one gradient buffer each
    return sum_products([(x, y, 1.0) for x, y in zip(a.unbind(0), b.unbind(0), strict=True)], out)


def cf_cross(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    """a × b over the leading component dim: [3, ...] × [3, ...] → [3, ...] (broadcasting)."""
    ax, bx = a.unbind(0), b.unbind(0)
    dest = rows(out, 3)
    return stacked([cross_component(ax, bx, i, out=dest[i]) for i in range(3)], out)


def cf_matmul(A: Tensor, B: Tensor, out: Tensor | None = None) -> Tensor:
    """A [3, 3, ...] times B [3, k, ...] → [3, k, ...]; both have the same number of dims."""
    return cf_dot(A.transpose(0, 1).unsqueeze(2), B.unsqueeze(1), out)


def cf_matvec(A: Tensor, x: Tensor, out: Tensor | None = None) -> Tensor:
    """A [3, 3, ...] times x [3, ...] → [3, ...]; A has one dim more than x."""
    return cf_dot(A.transpose(0, 1), x.unsqueeze(1), out)


# --- spatial vectors and inertias ----------------------------------------------------------


SYM = ((0, 1, 3), (1, 2, 4), (3, 4, 5))  # (xx, xy, yy, xz, yz, zz) index of 3×3 entry (a, b)
SYM_PAIRS = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # the 6 unique entries, in order


def tree_sum(mask: Tensor, x: Tensor, out: Tensor | None = None) -> Tensor:
    """Σ_j mask[k, j] x[..., j, :] over the body dim → [..., k, Bt] (ancestor or descendant sum)."""
    return torch.matmul(mask, x, out=out)


_CYCLE = ((1, 2), (2, 0), (0, 1))  # (j, k) with (a × b)_i = a_j b_k − a_k b_j


def cross_terms(a: Sequence[Tensor], b: Sequence[Tensor], i: int, c: float = 1.0) -> list[Term]:
    """The two products of c·(a × b)_i, from the components of a and b."""
    j, k = _CYCLE[i]
    return [(a[j], b[k], c), (a[k], b[j], -c)]


def cross_component(
    a: Sequence[Tensor],
    b: Sequence[Tensor],
    i: int,
    acc: Tensor | None = None,
    coefficient: float = 1.0,
    out: Tensor | None = None,
) -> Tensor:
    """acc + c·(a × b)_i from the components of a and b: two fused multiply-adds."""
    return sum_products(cross_terms(a, b, i, coefficient), out, acc)


def spatial_parts(x: Tensor) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Spatial vector [3, 2, ...] → its angular and linear components (3 tensors each)."""
    parts = x.flatten(0, 1).unbind(0)
    return parts[0::2], parts[1::2]


def spatial_dot(a: Tensor, b: Tensor) -> Tensor:
    """Pairing of spatial vectors [3, 2, ...] × [3, 2, ...] → [...] (motion · force)."""
    aw, av = spatial_parts(a)
    bw, bv = spatial_parts(b)
    return sum_products([(x, y, 1.0) for x, y in zip(aw + av, bw + bv, strict=True)])


def motion_cross(V: Tensor, s: Tensor, out: Tensor | None = None) -> Tensor:
    """Spatial motion cross product V ×ₘ s = (ω × s_ω, ω × s_v + v × s_ω) of [3, 2, ...]."""
    w, v = spatial_parts(V)
    sw, sv = spatial_parts(s)
    dest_w, dest_v = spatial_rows(out)
    angular = [cross_component(w, sw, i, out=dest_w[i]) for i in range(3)]
    linear = [
        sum_products(cross_terms(w, sv, i) + cross_terms(v, sw, i), dest_v[i]) for i in range(3)
    ]
    return spatial_from_parts(angular, linear, out)


def force_cross(
    pairs: Sequence[tuple[Tensor, Tensor, float]],
    base: Tensor | None = None,
    out: Tensor | None = None,
) -> Tensor:
    """base + Σ c · (V ×* f) over (V, f, c) in ``pairs``, spatial vectors [3, 2, ...].

    V ×* f = (ω × n + v × l, ω × l) is the spatial force cross product; each component is one
    chain of fused multiply-adds (``base`` may be ``out``: accumulation in place).
    """
    angular_terms: list[list[Term]] = [[] for _ in range(3)]
    linear_terms: list[list[Term]] = [[] for _ in range(3)]
    for V, f, c in pairs:
        w, v = spatial_parts(V)
        n, lin = spatial_parts(f)
        for i in range(3):
            angular_terms[i] += cross_terms(w, n, i, c) + cross_terms(v, lin, i, c)
            linear_terms[i] += cross_terms(w, lin, i, c)
    base_w, base_v = spatial_parts(base) if base is not None else ([None] * 3, [None] * 3)
    dest_w, dest_v = spatial_rows(out)
    angular = [sum_products(angular_terms[i], dest_w[i], base_w[i]) for i in range(3)]
    linear = [sum_products(linear_terms[i], dest_v[i], base_v[i]) for i in range(3)]
    return spatial_from_parts(angular, linear, out)


def apply_inertia(bodies: Tensor, X: Tensor, out: Tensor | None = None) -> Tensor:
    """Spatial inertia times motion: (Ī ω + h × v, m v − h × ω) for X [3, 2, *K, nv, Bt].

    bodies: [10, nv, Bt] world-frame inertias (``TorchDynamics._world_inertia`` of
    :mod:`dynid.model.dynamics`), broadcast over the extra dims *K of X (several motions at once).
    """
    w, v = spatial_parts(X)
    m, *h_and_inertia = bodies.unbind(0)
    h, i6 = h_and_inertia[:3], h_and_inertia[3:]
    dest_w, dest_v = spatial_rows(out)
    angular = [
        sum_products([(i6[row[k]], w[k], 1.0) for k in range(3)] + cross_terms(h, v, i), dest_w[i])
        for i, row in enumerate(SYM)
    ]
    linear = [sum_products([(m, v[i], 1.0), *cross_terms(w, h, i)], dest_v[i]) for i in range(3)]
    return spatial_from_parts(angular, linear, out)
