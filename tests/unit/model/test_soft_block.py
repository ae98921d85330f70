"""The FEM soft block: forces are energy gradients, rest shape, Lamé-driven stiffness."""

from __future__ import annotations

import pytest
import torch

from dynid.model.soft_block import (
    Material,
    TetMesh,
    elastic_energy,
    elastic_forces,
    lame_from_young,
    static_equilibrium,
    youngs_modulus,
)

SIZE = (0.03, 0.03, 0.03)


@pytest.fixture(scope="module")
def mesh() -> TetMesh:
    return TetMesh.box(SIZE, (2, 2, 2))


def test_box_mesh_is_conforming_and_fills_the_box(mesh: TetMesh) -> None:
    assert mesh.num_nodes == 27
    assert mesh.tets.shape == (40, 4)
    assert bool((mesh.volume > 0).all())
    assert mesh.total_volume() == pytest.approx(0.03**3, rel=1e-12)
    # Every interior face is shared by exactly two tetrahedra (conforming split).
    faces: dict[tuple[int, ...], int] = {}
    for tet in mesh.tets.tolist():
        for drop in range(4):
            key = tuple(sorted(tet[:drop] + tet[drop + 1 :]))
            faces[key] = faces.get(key, 0) + 1
    assert max(faces.values()) == 2
    boundary = sum(1 for c in faces.values() if c == 1)
    assert boundary == 6 * 4 * 2  # 6 box faces × 4 squares × 2 triangles
    assert mesh.node_mass(800.0).sum() == pytest.approx(800.0 * 0.03**3, rel=1e-12)


@pytest.mark.parametrize("material", list(Material))
def test_forces_are_minus_energy_gradient(mesh: TetMesh, material: Material) -> None:
    gen = torch.Generator().manual_seed(3)
    x = mesh.rest + 2e-3 * torch.randn(mesh.rest.shape, generator=gen, dtype=torch.float64)
    x.requires_grad_(True)
    energy = elastic_energy(mesh, x, 2000.0, 1500.0, material)
    (grad,) = torch.autograd.grad(energy, x)
    forces = elastic_forces(mesh, x.detach(), 2000.0, 1500.0, material)
    torch.testing.assert_close(forces, -grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("material", list(Material))
def test_rest_shape_has_no_energy_and_no_force(mesh: TetMesh, material: Material) -> None:
    assert float(elastic_energy(mesh, mesh.rest, 5000.0, 5000.0, material)) == pytest.approx(
        0.0, abs=1e-15
    )
    assert float(elastic_forces(mesh, mesh.rest, 5000.0, 5000.0, material).abs().max()) < 1e-12


@pytest.mark.parametrize("material", list(Material))
def test_block_returns_to_rest_shape_without_load(mesh: TetMesh, material: Material) -> None:
    fixed = torch.zeros_like(mesh.rest, dtype=torch.bool)
    fixed[mesh.face_nodes(1, upper=False)] = True  # held by one finger only: no load
    gen = torch.Generator().manual_seed(0)
    start = mesh.rest + 1e-3 * torch.randn(mesh.rest.shape, generator=gen, dtype=torch.float64)
    start[fixed] = mesh.rest[fixed]
    x = static_equilibrium(mesh, 3000.0, 2000.0, material, fixed, start)
    torch.testing.assert_close(x, mesh.rest, rtol=0.0, atol=1e-9)


@pytest.mark.parametrize(
    ("material", "strain", "rel"),
    [(Material.LINEAR, 1e-2, 1e-9), (Material.NEO_HOOKEAN, 1e-4, 1e-3)],
)
@pytest.mark.parametrize(("mu", "lam"), [(749.6, 264.3), (5097.6, 5430.4)])
def test_force_displacement_slope_follows_lame_parameters(
    mesh: TetMesh, material: Material, strain: float, rel: float, mu: float, lam: float
) -> None:
    # Uniaxial compression between frictionless plates (symmetry planes x = 0 and z = 0): the
    # exact solution is a homogeneous strain, which linear tetrahedra represent exactly, and the
    # plate force is E · A · δ / L with E = μ (3λ + 2μ) / (λ + μ).
    L = SIZE[1]
    delta = strain * L
    fixed = torch.zeros_like(mesh.rest, dtype=torch.bool)
    low, high = mesh.face_nodes(1, upper=False), mesh.face_nodes(1, upper=True)
    fixed[low, 1] = True
    fixed[high, 1] = True
    fixed[mesh.face_nodes(0, upper=False), 0] = True
    fixed[mesh.face_nodes(2, upper=False), 2] = True
    start = mesh.rest.clone()
    start[high, 1] -= delta
    x = static_equilibrium(mesh, mu, lam, material, fixed, start)
    reaction = float(elastic_forces(mesh, x, mu, lam, material)[high, 1].sum())
    expected = youngs_modulus(mu, lam) * SIZE[0] * SIZE[2] * delta / L
    assert reaction == pytest.approx(expected, rel=rel)


def test_lame_round_trip() -> None:
    mu, lam = lame_from_young(12_000.0, 0.3)
    assert youngs_modulus(mu, lam) == pytest.approx(12_000.0, rel=1e-12)
