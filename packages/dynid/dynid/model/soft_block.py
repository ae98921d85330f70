"""A small differentiable finite-element soft block squeezed by the prismatic gripper joint.

Proprio paper Sec. III-B (deformables): the block is a box divided into hexahedral cells, each cell
split into 5 linear tetrahedra; its elastodynamics ``ρ₀ φ̈ = ∇·P + ρ₀ b`` (eq. 3) is discretised
with lumped nodal masses and stepped with the same semi-implicit Euler scheme as the robot (eq. 2).
Two hyperelastic laws with Lamé parameters ``k_μ`` (μ) and ``k_λ`` (λ), both in Pa:

- Neo-Hookean, eq. 4:  ``Ψ = μ/2 (I_C − 3) − μ log J + λ/2 (log J)²``
  with ``I_C = tr(FᵀF)`` and ``J = det F``; ``P = μ (F − F⁻ᵀ) + λ log J F⁻ᵀ``;
- linear elastic:  ``Ψ = μ ε:ε + λ/2 tr(ε)²`` with ``ε = (F + Fᵀ)/2 − I``; ``P = 2μ ε + λ tr(ε) I``.

Coupling to the robot (:class:`GripperSqueeze`): one face of the block (normal along the squeeze
axis) is held by the fixed finger, the opposite face moves with the gripper's prismatic joint
(tight grip: the face nodes follow the finger in all three directions). The block pushes back on the
finger with the sum of the elastic forces on the moving face's nodes, which enters the joint as a
generalised force; the robot side is the shared :class:`dynid.model.dynamics` forward dynamics.

Shapes: ``P`` mesh nodes, ``E`` tetrahedra, ``N`` parameter particles. Positions in m, in the block
frame (origin at a corner, edges along x, y, z).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import torch

from dynid.model.errors import StateError

if TYPE_CHECKING:
    from dynid.model.integrate import ControlModel, ForwardDynamics
    from dynid.model.params import DynamicParameters

__all__ = [
    "GripperSqueeze",
    "Material",
    "TetMesh",
    "elastic_energy",
    "elastic_forces",
    "first_piola",
    "lame_from_young",
    "static_equilibrium",
    "strain_energy_density",
    "youngs_modulus",
]

# Split of a hexahedral cell (corners numbered i + 2j + 4k for the bits along x, y, z) into five
# tetrahedra: four corner tetrahedra around one diagonal tetrahedron. Neighbouring cells use the
# mirrored split so that the faces they share are cut along the same diagonal (conforming mesh).
_FIVE_TETS_EVEN = ((1, 2, 4, 7), (0, 1, 2, 4), (3, 1, 7, 2), (5, 1, 4, 7), (6, 2, 7, 4))
_FIVE_TETS_ODD = ((0, 3, 5, 6), (1, 0, 5, 3), (2, 0, 3, 6), (4, 0, 6, 5), (7, 3, 6, 5))
_MIN_J = 1.0e-8  # floor of det F inside log J: an inverted element has no Neo-Hookean energy


class Material(Enum):
    """Constitutive law of the block."""

    NEO_HOOKEAN = "neo_hookean"
    LINEAR = "linear"


@dataclass(frozen=True)
class TetMesh:
    """A linear tetrahedral mesh at rest.

    Attributes:
        rest: [P, 3] node rest positions (m).
        tets: [E, 4] node indices of each tetrahedron, positively oriented.
        rest_inv: [E, 3, 3] inverse of the rest edge matrix ``D_m = [X₁−X₀, X₂−X₀, X₃−X₀]``.
        volume: [E] rest volumes (m³).
    """

    rest: torch.Tensor
    tets: torch.Tensor
    rest_inv: torch.Tensor
    volume: torch.Tensor

    @classmethod
    def from_elements(cls, rest: torch.Tensor, tets: torch.Tensor) -> TetMesh:
        """Build from node positions ``[P, 3]`` and tetrahedra ``[E, 4]``; flips inverted ones."""
        rest = torch.as_tensor(rest, dtype=torch.float64)
        tets = torch.as_tensor(tets, dtype=torch.long).clone()
        if rest.dim() != 2 or rest.shape[1] != 3 or tets.dim() != 2 or tets.shape[1] != 4:
            raise StateError(
                f"mesh needs rest [P, 3] and tets [E, 4], got {tuple(rest.shape)} and "
                f"{tuple(tets.shape)}"
            )
        Dm = _edge_matrix(rest, tets)
        flip = torch.linalg.det(Dm) < 0.0
        tets[flip] = tets[flip][:, [0, 2, 1, 3]]
        Dm = _edge_matrix(rest, tets)
        det = torch.linalg.det(Dm)
        if bool((det <= 0.0).any()):
            raise StateError("mesh has degenerate tetrahedra (zero rest volume)")
        return cls(rest=rest, tets=tets, rest_inv=torch.linalg.inv(Dm), volume=det / 6.0)

    @classmethod
    def box(cls, size: Sequence[float], cells: Sequence[int]) -> TetMesh:
        """A box of ``size = (sx, sy, sz)`` (m) cut into ``cells = (nx, ny, nz)`` hexahedra."""
        if len(size) != 3 or len(cells) != 3 or min(size) <= 0.0 or min(cells) < 1:
            raise StateError(
                f"box mesh needs three positive sizes (m) and cell counts, got {size}, {cells}"
            )
        nx, ny, nz = (int(c) for c in cells)
        axes = [
            torch.linspace(0.0, float(s), int(c) + 1, dtype=torch.float64)
            for s, c in zip(size, cells, strict=True)
        ]
        gx, gy, gz = torch.meshgrid(*axes, indexing="ij")
        rest = torch.stack([gx, gy, gz], dim=-1).reshape(-1, 3)

        def node(i: int, j: int, k: int) -> int:
            return (i * (ny + 1) + j) * (nz + 1) + k

        tets = []
        for i in range(nx):
            for j in range(ny):
                for k in range(nz):
                    corners = [
                        node(i + (c & 1), j + ((c >> 1) & 1), k + ((c >> 2) & 1)) for c in range(8)
                    ]
                    split = _FIVE_TETS_EVEN if (i + j + k) % 2 == 0 else _FIVE_TETS_ODD
                    tets.extend([[corners[c] for c in tet] for tet in split])
        return cls.from_elements(rest, torch.tensor(tets, dtype=torch.long))

    @property
    def num_nodes(self) -> int:
        """``P``."""
        return int(self.rest.shape[0])

    def node_mass(self, density: float | torch.Tensor) -> torch.Tensor:
        """Lumped nodal masses ``[P]`` (kg), or ``[N, P]`` for a density tensor ``[N]`` (kg/m³)."""
        share = torch.zeros(self.num_nodes, dtype=self.rest.dtype)
        share.index_add_(0, self.tets.reshape(-1), (self.volume / 4.0).repeat_interleave(4))
        rho = torch.as_tensor(density, dtype=self.rest.dtype)
        return rho.unsqueeze(-1) * share if rho.dim() == 1 else rho * share

    def face_nodes(self, axis: int, upper: bool) -> torch.Tensor:
        """Indices of the nodes on the face ``axis = max`` (``upper``) or ``axis = min``."""
        coord = self.rest[:, axis]
        target = coord.max() if upper else coord.min()
        return torch.nonzero(torch.isclose(coord, target), as_tuple=False).reshape(-1)

    def total_volume(self) -> float:
        """Rest volume of the block (m³)."""
        return float(self.volume.sum())


def _edge_matrix(x: torch.Tensor, tets: torch.Tensor) -> torch.Tensor:
    """``[..., E, 3, 3]`` with columns ``x₁−x₀, x₂−x₀, x₃−x₀`` for positions ``x [..., P, 3]``."""
    corners = x[..., tets, :]  # [..., E, 4, 3]
    return (corners[..., 1:, :] - corners[..., :1, :]).transpose(-1, -2)


def deformation_gradient(mesh: TetMesh, x: torch.Tensor) -> torch.Tensor:
    """``F = D_s D_m⁻¹`` per tetrahedron: ``[..., E, 3, 3]`` for node positions ``[..., P, 3]``."""
    return _edge_matrix(x, mesh.tets) @ mesh.rest_inv.to(x)


def _lame(mu: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Lamé parameter as ``[..., 1, 1, 1]`` broadcasting over ``F [..., E, 3, 3]``."""
    t = torch.as_tensor(mu, dtype=like.dtype, device=like.device)
    return t.reshape(*t.shape, 1, 1, 1)


def strain_energy_density(
    F: torch.Tensor, mu: float | torch.Tensor, lam: float | torch.Tensor, material: Material
) -> torch.Tensor:
    """Energy density ``Ψ(F)`` (J/m³) ``[..., E]``; ``mu``, ``lam`` (Pa) scalars or ``[N]``."""
    m = _lame(mu, F)[..., 0, 0]
    la = _lame(lam, F)[..., 0, 0]
    eye = torch.eye(3, dtype=F.dtype, device=F.device)
    if material is Material.LINEAR:
        eps = 0.5 * (F + F.transpose(-1, -2)) - eye
        tr = eps.diagonal(dim1=-2, dim2=-1).sum(-1)
        return m * (eps * eps).sum((-1, -2)) + 0.5 * la * tr * tr
    logJ = torch.log(torch.linalg.det(F).clamp_min(_MIN_J))
    ic = (F * F).sum((-1, -2))
    return 0.5 * m * (ic - 3.0) - m * logJ + 0.5 * la * logJ * logJ


def first_piola(
    F: torch.Tensor, mu: float | torch.Tensor, lam: float | torch.Tensor, material: Material
) -> torch.Tensor:
    """First Piola–Kirchhoff stress ``P = ∂Ψ/∂F`` (Pa) ``[..., E, 3, 3]``."""
    m = _lame(mu, F)
    la = _lame(lam, F)
    eye = torch.eye(3, dtype=F.dtype, device=F.device)
    if material is Material.LINEAR:
        eps = 0.5 * (F + F.transpose(-1, -2)) - eye
        tr = eps.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None]
        return 2.0 * m * eps + la * tr * eye
    F_inv_T = torch.linalg.inv(F).transpose(-1, -2)
    logJ = torch.log(torch.linalg.det(F).clamp_min(_MIN_J))[..., None, None]
    return m * (F - F_inv_T) + la * logJ * F_inv_T


def elastic_energy(
    mesh: TetMesh,
    x: torch.Tensor,
    mu: float | torch.Tensor,
    lam: float | torch.Tensor,
    material: Material,
) -> torch.Tensor:
    """Total elastic energy ``Σ_e V_e Ψ(F_e)`` (J) ``[...]`` for node positions ``[..., P, 3]``."""
    psi = strain_energy_density(deformation_gradient(mesh, x), mu, lam, material)
    return (psi * mesh.volume.to(x)).sum(-1)


def elastic_forces(
    mesh: TetMesh,
    x: torch.Tensor,
    mu: float | torch.Tensor,
    lam: float | torch.Tensor,
    material: Material,
) -> torch.Tensor:
    """Nodal elastic forces ``f = −∂E/∂x`` (N) ``[..., P, 3]`` for positions ``[..., P, 3]``.

    Per tetrahedron ``H = −V P D_m⁻ᵀ`` gives the forces on nodes 1..3 as its columns; node 0 gets
    minus their sum.
    """
    P = first_piola(deformation_gradient(mesh, x), mu, lam, material)
    H = -mesh.volume.to(x)[:, None, None] * (P @ mesh.rest_inv.to(x).transpose(-1, -2))
    f123 = H.transpose(-1, -2)  # [..., E, 3 nodes, 3 xyz]
    f_tet = torch.cat([-f123.sum(-2, keepdim=True), f123], dim=-2)  # [..., E, 4, 3]
    out = torch.zeros(*x.shape[:-2], mesh.num_nodes, 3, dtype=x.dtype, device=x.device)
    idx = mesh.tets.reshape(-1).to(x.device)
    return out.index_add(-2, idx, f_tet.reshape(*f_tet.shape[:-3], -1, 3))


def youngs_modulus(mu: float, lam: float) -> float:
    """Young's modulus ``E = μ (3λ + 2μ) / (λ + μ)`` (Pa) of Lamé parameters (Pa)."""
    return mu * (3.0 * lam + 2.0 * mu) / (lam + mu)


def lame_from_young(young: float, poisson: float) -> tuple[float, float]:
    """Lamé parameters ``(μ, λ)`` (Pa) from Young's modulus (Pa) and Poisson's ratio."""
    if not (young > 0.0 and -1.0 < poisson < 0.5):
        raise StateError(
            f"need Young's modulus > 0 Pa and Poisson ratio in (-1, 0.5), got {young}, {poisson}"
        )
    mu = young / (2.0 * (1.0 + poisson))
    lam = young * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
    return mu, lam


def static_equilibrium(
    mesh: TetMesh,
    mu: float,
    lam: float,
    material: Material,
    fixed: torch.Tensor,
    x_fixed: torch.Tensor,
    *,
    tol: float = 1.0e-10,
    max_iter: int = 50,
) -> torch.Tensor:
    """Node positions ``[P, 3]`` that minimise the elastic energy with some coordinates held.

    Newton's method on the free coordinates with the exact (autograd) Hessian; meant for small
    meshes (checks, initial states, force–displacement curves), not for use inside a rollout.

    Args:
        mesh: the block.
        mu, lam: Lamé parameters (Pa).
        material: constitutive law.
        fixed: [P, 3] bool, the coordinates held at ``x_fixed``.
        x_fixed: [P, 3] positions (m); the free coordinates are the Newton start.
        tol: stop when the free-force norm falls below ``tol`` (N).
        max_iter: Newton iterations at most.

    Raises:
        StateError: wrong shapes, or no convergence within ``max_iter``.
    """
    if fixed.shape != mesh.rest.shape or x_fixed.shape != mesh.rest.shape:
        raise StateError(
            f"fixed and x_fixed must be [P, 3] = {tuple(mesh.rest.shape)}, got "
            f"{tuple(fixed.shape)} and {tuple(x_fixed.shape)}"
        )
    free = ~fixed.reshape(-1)
    x = x_fixed.detach().clone().to(torch.float64).reshape(-1)

    def energy(z: torch.Tensor) -> torch.Tensor:
        full = x.clone()
        full[free] = z
        return elastic_energy(mesh, full.reshape(-1, 3), mu, lam, material)

    z = x[free].clone()
    for _ in range(max_iter):
        grad = torch.autograd.functional.jacobian(energy, z)
        if float(grad.norm()) < tol:
            x[free] = z
            return x.reshape(-1, 3)
        hess = torch.autograd.functional.hessian(energy, z)
        step = torch.linalg.solve(hess, grad)
        # Backtrack so that no element inverts and the energy decreases.
        e0 = energy(z)
        alpha = 1.0
        while alpha > 1e-6:
            cand = z - alpha * step
            full = x.clone()
            full[free] = cand
            J = torch.linalg.det(deformation_gradient(mesh, full.reshape(-1, 3)))
            if bool((J > 0).all()) and float(energy(cand)) <= float(e0) + 1e-15:
                break
            alpha *= 0.5
        z = z - alpha * step
    raise StateError(
        f"static equilibrium of the block did not converge in {max_iter} Newton iterations "
        f"(μ={mu} Pa, λ={lam} Pa)"
    )


@dataclass
class GripperSqueeze:
    """The soft block between the fixed finger and the gripper's prismatic joint (proprio V-C).

    The block's face ``axis = 0`` is held by the fixed finger and its face ``axis = max`` by the
    moving finger (all coordinates of those nodes follow the finger: tight grip). When the gripper
    joint moves by ``Δq`` the moving face moves by ``direction · Δq`` along ``axis``. Gravity on the
    block is carried by the grip and left out; the block's own mass and a mass-proportional damping
    act on its free nodes. The reaction on the finger is the elastic force on the moving face's
    nodes (their own inertia is neglected there).

    Attributes:
        mesh: the block at rest, in the block frame.
        joint: index (into q/v) of the gripper's prismatic joint.
        material: constitutive law.
        axis: squeeze axis of the block frame (0, 1 or 2).
        direction: +1 if a positive joint displacement moves the face towards ``axis = max``
            (opening), −1 otherwise.
        density: kg/m³.
        damping: mass-proportional nodal damping (1/s).
        mass_scaling: factor on the nodal masses (≥ 1). Explicit time stepping is stable only for
            ``h < 2/ω_max`` with ``ω_max² ~ E / (ρ h_e²)``; scaling the block's masses (standard
            mass scaling of explicit FEM) lowers ``ω_max`` when the block's own inertia is
            negligible next to the finger's, as it is for a servo-driven gripper.
    """

    mesh: TetMesh
    joint: int
    material: Material = Material.NEO_HOOKEAN
    axis: int = 1
    direction: float = 1.0
    density: float = 500.0
    damping: float = 50.0
    mass_scaling: float = 1.0

    def __post_init__(self) -> None:
        if self.axis not in (0, 1, 2) or self.direction not in (1.0, -1.0):
            raise StateError(
                f"squeeze axis must be 0, 1 or 2 and direction ±1, got {self.axis}, "
                f"{self.direction}"
            )
        if not self.mass_scaling >= 1.0:
            raise StateError(f"block mass_scaling must be ≥ 1, got {self.mass_scaling!r}")
        self._fixed_face = self.mesh.face_nodes(self.axis, upper=False)
        self._moving_face = self.mesh.face_nodes(self.axis, upper=True)
        free = torch.ones(self.mesh.num_nodes, dtype=torch.bool)
        free[self._fixed_face] = False
        free[self._moving_face] = False
        self._free = free
        self._mass = self.mesh.node_mass(self.density) * self.mass_scaling

    def _place_moving_face(self, x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        """Node positions with the moving face at rest + ``shift [N]`` (m) along ``axis``."""
        face = self.mesh.rest[self._moving_face].to(x)
        offset = torch.zeros(3, dtype=x.dtype, device=x.device)
        offset[self.axis] = 1.0
        placed = face.unsqueeze(0) + shift[:, None, None] * offset
        x = x.clone()
        x[:, self._moving_face] = placed
        return x

    def finger_force(self, x: torch.Tensor, mu: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        """Force of the block on the gripper joint ``[N]`` (N) for nodes ``x [N, P, 3]`` (m)."""
        return self._reaction(elastic_forces(self.mesh, x, mu, lam, self.material))

    def _reaction(self, f_nodes: torch.Tensor) -> torch.Tensor:
        """Generalised force on the joint ``[N]`` from nodal elastic forces ``[N, P, 3]``."""
        return self.direction * f_nodes[:, self._moving_face, self.axis].sum(-1)

    def rollout(
        self,
        dyn: ForwardDynamics,
        p: DynamicParameters,
        q0: torch.Tensor,
        v0: torch.Tensor,
        u: torch.Tensor,
        dt: float,
        control: ControlModel,
        mu: torch.Tensor,
        lam: torch.Tensor,
        substeps: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Simulate robot and block together with semi-implicit Euler (proprio eq. 2).

        Args:
            dyn: forward dynamics of the robot (shared model).
            p: per-particle robot parameters (leading dim ``N``).
            q0, v0: robot state ``[N|1, nv]`` with the block at rest (fingers touching).
            u: controls ``[N|1, T, nu]``, held over each sample.
            dt: control period (s); ``substeps`` equal sub-steps per sample.
            control: control model (e.g. current → torque).
            mu, lam: Lamé parameters ``[N]`` (Pa).

        Returns:
            ``(q [N, T + 1, nv], v [N, T + 1, nv], x [N, P, 3])`` — robot states at the samples and
            the block's node positions at the end (m).
        """
        if q0.dim() != 2 or u.dim() != 3:
            raise StateError(
                f"q0 must be [N, nv] and u [N|1, T, nu], got {tuple(q0.shape)}, {tuple(u.shape)}"
            )
        n = max(q0.shape[0], u.shape[0], mu.reshape(-1).shape[0], p.inertia.shape[0])
        dtype = q0.dtype
        q = q0.expand(n, -1)
        v = v0.expand(n, -1)
        mu = mu.reshape(-1).to(dtype).expand(n)
        lam = lam.reshape(-1).to(dtype).expand(n)
        x = self.mesh.rest.to(q).unsqueeze(0).expand(n, -1, -1)
        xd = torch.zeros_like(x)
        q_start = q[:, self.joint]
        free = self._free.to(q.device)[None, :, None]
        mass = self._mass.to(q)[None, :, None]
        h = dt / substeps
        unit = torch.zeros(q.shape[-1], dtype=dtype, device=q.device)
        unit[self.joint] = 1.0
        qs, vs = [q], [v]
        for k in range(u.shape[-2]):
            uk = u[:, k]
            for _ in range(int(substeps)):
                f_nodes = elastic_forces(self.mesh, x, mu, lam, self.material)
                reaction = self._reaction(f_nodes)
                tau = control(p, q, v, uk) + reaction[:, None] * unit
                a = dyn.forward_dynamics(p, q, v, tau)
                v = v + h * a
                q = q + h * v
                xdd = f_nodes / mass - self.damping * xd
                xd = torch.where(free, xd + h * xdd, torch.zeros_like(xd))
                x = torch.where(free, x + h * xd, x)
                x = self._place_moving_face(x, self.direction * (q[:, self.joint] - q_start))
            qs.append(q)
            vs.append(v)
        return torch.stack(qs, dim=-2), torch.stack(vs, dim=-2), x
