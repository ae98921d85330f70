"""Component-first algebra in torch: 3-vectors, 3×3 matrices, spatial vectors and inertias.

Layout: every quantity carries its components first and the flattened batch last, vectors
``[3, ...]``, matrices ``[3, 3, ...]``, spatial vectors ``[3, 2, ...]`` with (angular, linear) in
dim 1, and body inertias ``[10, ...]`` in Pinocchio's π order (m, h = m·c, Ī as xx, xy, yy, xz,
yz, zz). In the dynamics the trailing dims are ``[nv, Bt]`` (bodies, then Bt = N·prod(*B)
flattened batch entries), e.g. ``[3, nv, Bt]`` or ``[3, 2, nv, Bt]``. A 3×3 product, a dot or a
cross product is then a few fused multiply-adds on contiguous rows of the batch instead of a
batched ``matmul`` or ``cross`` over an innermost dim of size 3 (far slower on CPU for large
batches).

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
    "apply_inertia",
    "cf_cross",
    "cf_dot",
    "cf_matmul",
    "cf_matvec",
    "cross_component",
    "force_cross",
    "motion_cross",
    "spatial_dot",
    "spatial_from_parts",
    "spatial_parts",
    "tree_sum",
]

# --- 3-vectors and 3×3 matrices ------------------------------------------------------------


def cf_dot(a: Tensor, b: Tensor) -> Tensor:
    """a · b over the leading component dim: [3, ...] × [3, ...] → [...] (broadcasting).

    Fused multiply-adds rather than a product and a sum: no [3, ...] temporary.
    """
    a0, a1, a2 = a.unbind(0)  # one unbind (not three selects): one gradient buffer each
    b0, b1, b2 = b.unbind(0)
    return torch.addcmul(torch.addcmul(a0 * b0, a1, b1), a2, b2)


def cf_cross(a: Tensor, b: Tensor) -> Tensor:
    """a × b over the leading component dim: [3, ...] × [3, ...] → [3, ...] (broadcasting)."""
    ax, ay, az = a.unbind(0)
    bx, by, bz = b.unbind(0)
    return torch.stack(
        (
            torch.addcmul(ay * bz, az, by, value=-1.0),
            torch.addcmul(az * bx, ax, bz, value=-1.0),
            torch.addcmul(ax * by, ay, bx, value=-1.0),
        )
    )


def cf_matmul(A: Tensor, B: Tensor) -> Tensor:
    """A [3, 3, ...] times B [3, k, ...] → [3, k, ...]; both have the same number of dims."""
    return cf_dot(A.transpose(0, 1).unsqueeze(2), B.unsqueeze(1))


def cf_matvec(A: Tensor, x: Tensor) -> Tensor:
    """A [3, 3, ...] times x [3, ...] → [3, ...]; A has one dim more than x."""
    return cf_dot(A.transpose(0, 1), x.unsqueeze(1))


# --- spatial vectors and inertias ----------------------------------------------------------


SYM = ((0, 1, 3), (1, 2, 4), (3, 4, 5))  # (xx, xy, yy, xz, yz, zz) index of 3×3 entry (a, b)
SYM_PAIRS = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))  # the 6 unique entries, in order


def tree_sum(mask: Tensor, x: Tensor) -> Tensor:
    """Σ_j mask[k, j] x[..., j, :] over the body dim → [..., k, Bt] (ancestor or descendant sum)."""
    return torch.matmul(mask, x)


_CYCLE = ((1, 2), (2, 0), (0, 1))  # (j, k) with (a × b)_i = a_j b_k − a_k b_j


def cross_component(
    a: Sequence[Tensor],
    b: Sequence[Tensor],
    i: int,
    acc: Tensor | None = None,
    coefficient: float = 1.0,
) -> Tensor:
    """acc + c·(a × b)_i from the components of a and b: two fused multiply-adds."""
    j, k = _CYCLE[i]
    if acc is None:
        first = a[j] * b[k] if coefficient == 1.0 else coefficient * a[j] * b[k]
    else:
        first = torch.addcmul(acc, a[j], b[k], value=coefficient)
    return torch.addcmul(first, a[k], b[j], value=-coefficient)


def spatial_parts(x: Tensor) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Spatial vector [3, 2, ...] → its angular and linear components (3 tensors each)."""
    pairs = [c.unbind(0) for c in x.unbind(0)]
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def spatial_from_parts(angular: Sequence[Tensor], linear: Sequence[Tensor]) -> Tensor:
    """Angular and linear components (3 tensors each) → spatial vector [3, 2, ...]."""
    out = torch.stack([x for pair in zip(angular, linear, strict=True) for x in pair])
    return out.reshape(3, 2, *out.shape[1:])


def spatial_dot(a: Tensor, b: Tensor) -> Tensor:
    """Pairing of spatial vectors [3, 2, ...] × [3, 2, ...] → [...] (motion · force)."""
    return (a * b).sum((0, 1))


# The spatial products below are written per component (fused multiply-adds into one final
# stack) rather than as 3-vector cross products and matrix products: no [3, ...] temporaries,
# which at large batches are what costs (memory traffic), not the arithmetic.


def motion_cross(V: Tensor, s: Tensor) -> Tensor:
    """Spatial motion cross product V ×ₘ s = (ω × s_ω, ω × s_v + v × s_ω) of [3, 2, ...]."""
    w, v = spatial_parts(V)
    sw, sv = spatial_parts(s)
    angular = [cross_component(w, sw, i) for i in range(3)]
    linear = [cross_component(v, sw, i, cross_component(w, sv, i)) for i in range(3)]
    return spatial_from_parts(angular, linear)


def force_cross(
    pairs: Sequence[tuple[Tensor, Tensor, float]], base: Tensor | None = None
) -> Tensor:
    """base + Σ c · (V ×* f) over (V, f, c) in ``pairs``, spatial vectors [3, 2, ...].

    V ×* f = (ω × n + v × l, ω × l) is the spatial force cross product; the sum is accumulated
    component by component into one final stack.
    """
    angular: list[Tensor | None] = [None] * 3
    linear: list[Tensor | None] = [None] * 3
    if base is not None:
        base_n, base_l = spatial_parts(base)
        angular, linear = list(base_n), list(base_l)
    for V, f, coefficient in pairs:
        w, v = spatial_parts(V)
        n, lin = spatial_parts(f)
        for i in range(3):
            angular[i] = cross_component(w, n, i, angular[i], coefficient)
            angular[i] = cross_component(v, lin, i, angular[i], coefficient)
            linear[i] = cross_component(w, lin, i, linear[i], coefficient)
    return spatial_from_parts(angular, linear)  # type: ignore[arg-type]


def apply_inertia(bodies: Tensor, X: Tensor) -> Tensor:
    """Spatial inertia times motion: (Ī ω + h × v, m v − h × ω) for X [3, 2, *K, nv, Bt].

    bodies: [10, nv, Bt] world-frame inertias (``TorchDynamics._world_inertia`` of
    :mod:`dynid.model.dynamics`), broadcast over the extra dims *K of X (several motions at once).
    """
    w, v = spatial_parts(X)
    m, *h_and_inertia = bodies.unbind(0)
    h, i6 = h_and_inertia[:3], h_and_inertia[3:]
    angular = []
    for i, row in enumerate(SYM):
        rotational = torch.addcmul(
            torch.addcmul(i6[row[0]] * w[0], i6[row[1]], w[1]), i6[row[2]], w[2]
        )
        angular.append(cross_component(h, v, i, rotational))
    linear = [cross_component(w, h, i, m * v[i]) for i in range(3)]
    return spatial_from_parts(angular, linear)
