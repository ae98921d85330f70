"""Self- and environment collision of a robot's URDF collision geometry (Pinocchio + coal).

The geometry is the URDF's ``<collision>`` elements (meshes resolved against every directory
above the URDF, where ``package://`` paths point). Pairs that are never checked, as in MoveIt's
allowed collision matrix: geometries on the same body, geometries of adjacent bodies (one
body's joint is the other's parent joint, the fixed base included), and robot pairs already in
contact (distance ≤ 0) at the neutral configuration. The environment is a table (a large thin
box whose top face is the plane ``z = table_z`` of the world frame) and boxes fixed in the world;
every robot geometry except those on the base is checked against each of them. Attachments
(a payload) have no geometry in the URDF and are not checked. Distances in m.

The smallest distance over all pairs is found with the pairs' convex hulls as lower bounds
(the hull contains the mesh, so its distance is never larger): the meshes' exact distances are
computed in the order of those bounds until the next bound exceeds the smallest found. Distance
gradients come from the witness points and the joint Jacobians.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import coal
import numpy as np
import pinocchio as pin
from numpy.typing import NDArray

from dynid.excite.errors import ExcitationError
from dynid.model.robot import RobotModel

__all__ = ["CollisionModel", "Environment"]

Array = NDArray[np.float64]

_TABLE_HALF_WIDTH = 2.0  # m: the table box reaches this far from the base in x and y
_TABLE_THICKNESS = 0.05  # m
_HULL_SLACK = 1e-6  # m: a hull's distance may exceed its mesh's by coal's tolerance


@dataclass(frozen=True)
class Environment:
    """Fixed obstacles in the world frame.

    Attributes:
        table_z: height (m) of the table top the robot stands on or above, or ``None``.
        boxes: ``(centre [3], size [3])`` per axis-aligned box (m).
    """

    table_z: float | None = None
    boxes: tuple[tuple[tuple[float, float, float], tuple[float, float, float]], ...] = ()


class CollisionModel:
    """The robot's collision geometry with its checked pairs (module notes).

    Args:
        robot: the robot (its Pinocchio model; locked joints merged).
        urdf: the URDF file with ``<collision>`` elements.
        environment: obstacles, or ``None``.

    Raises:
        ExcitationError: the URDF's collision meshes cannot be loaded.
    """

    def __init__(self, robot: RobotModel, urdf: Path, environment: Environment | None = None):
        self.robot = robot
        model = robot.model
        dirs = [str(p) for p in Path(urdf).resolve().parents]
        try:
            geom = pin.buildGeomFromUrdf(
                model, str(urdf), pin.GeometryType.COLLISION, package_dirs=dirs
            )
        except (ValueError, RuntimeError) as exc:
            raise ExcitationError(f"{urdf}: collision geometry: {exc}") from None
        robot_geoms = list(range(geom.ngeoms))
        obstacles = []
        env = environment or Environment()
        if env.table_z is not None:
            size = (2 * _TABLE_HALF_WIDTH, 2 * _TABLE_HALF_WIDTH, _TABLE_THICKNESS)
            centre = (0.0, 0.0, env.table_z - _TABLE_THICKNESS / 2)
            obstacles.append(("table", centre, size))
        for k, (centre, size) in enumerate(env.boxes):
            obstacles.append((f"box{k}", centre, size))
        for name, centre, size in obstacles:
            placement = pin.SE3(np.eye(3), np.asarray(centre, dtype=float))
            obj = pin.GeometryObject(name, 0, placement, coal.Box(*map(float, size)))
            obstacles_index = geom.addGeometryObject(obj)
            for g in robot_geoms:
                if geom.geometryObjects[g].parentJoint != 0:
                    geom.addCollisionPair(pin.CollisionPair(g, obstacles_index))
        parents = list(model.parents)
        data = model.createData()
        for a in robot_geoms:
            for b in robot_geoms[a + 1 :]:
                ja = geom.geometryObjects[a].parentJoint
                jb = geom.geometryObjects[b].parentJoint
                if ja == jb or parents[ja] == jb or parents[jb] == ja:
                    continue
                geom.addCollisionPair(pin.CollisionPair(a, b))
        gdata = pin.GeometryData(geom)
        pin.computeDistances(model, data, geom, gdata, pin.neutral(model))
        touching = [
            k
            for k, pair in enumerate(geom.collisionPairs)
            if pair.second in robot_geoms and gdata.distanceResults[k].min_distance <= 0.0
        ]
        for k in reversed(touching):
            geom.removeCollisionPair(geom.collisionPairs[k])
        self.geometry = geom
        self._data = data
        self._gdata = pin.GeometryData(geom)
        hull = geom.copy()
        for obj in hull.geometryObjects:
            if isinstance(obj.geometry, coal.BVHModelBase):
                obj.geometry.buildConvexHull(True, "Qt")
                obj.geometry = obj.geometry.convex
        self._hull = hull
        self._hull_data = pin.GeometryData(hull)

    @property
    def pair_names(self) -> list[tuple[str, str]]:
        """The checked pairs by geometry name."""
        objs = self.geometry.geometryObjects
        return [(objs[p.first].name, objs[p.second].name) for p in self.geometry.collisionPairs]

    def distances(self, q: Array) -> Array:
        """``[S, K]`` distance (m, negative when penetrating) of every checked pair at every
        configuration ``q [S, nv]``."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out = np.empty((q.shape[0], len(self.geometry.collisionPairs)))
        for s, qs in enumerate(q):
            pin.computeDistances(self.robot.model, self._data, self.geometry, self._gdata, qs)
            out[s] = [r.min_distance for r in self._gdata.distanceResults]
        return out

    def pair_distance(self, q: Array, pair: int) -> float:
        """Distance (m) of one pair at one configuration ``q [nv]``."""
        pin.updateGeometryPlacements(
            self.robot.model, self._data, self.geometry, self._gdata, np.asarray(q, dtype=float)
        )
        return float(pin.computeDistance(self.geometry, self._gdata, int(pair)).min_distance)

    def pair_gradient(self, q: Array, pair: int, step: float = 1e-6) -> Array:
        """``∂d/∂q [nv]`` of one pair's distance at ``q [nv]`` (m/rad).

        With witness points ``p₁, p₂`` on the two geometries, ``d = nᵀ(p₂ − p₁)`` with ``n =
        (p₂ − p₁)/|p₂ − p₁|``, and moving the points with their bodies gives ``∂d/∂q = nᵀ(J₂(p₂)
        − J₁(p₁))``, ``J_k(p)`` the world-frame linear Jacobian of the point ``p`` fixed to
        geometry ``k``'s joint (exact where the witness points are unique). Where the
        geometries touch or penetrate (no witness direction) the gradient is taken by central
        differences with ``step`` (rad).
        """
        model, data, geom = self.robot.model, self._data, self.geometry
        q, pair = np.asarray(q, dtype=float), int(pair)
        pin.updateGeometryPlacements(model, data, geom, self._gdata, q)
        result = pin.computeDistance(geom, self._gdata, pair)
        p1, p2 = result.getNearestPoint1(), result.getNearestPoint2()
        gap = np.linalg.norm(p2 - p1)
        if result.min_distance <= 0.0 or gap < 1e-9:
            return self._pair_gradient_fd(q, pair, step)
        pin.computeJointJacobians(model, data, q)
        objects = geom.geometryObjects
        n = (p2 - p1) / gap
        collision_pair = geom.collisionPairs[pair]
        grad = np.zeros(model.nv)
        for index, point, sign in ((collision_pair.first, p1, -1.0),
                                   (collision_pair.second, p2, 1.0)):  # fmt: skip
            joint = objects[index].parentJoint
            if joint == 0:
                continue
            J = pin.getJointJacobian(model, data, joint, pin.LOCAL_WORLD_ALIGNED)
            lever = point - data.oMi[joint].translation
            grad += sign * (n @ (J[:3] - pin.skew(lever) @ J[3:]))
        return grad

    def _pair_gradient_fd(self, q: Array, pair: int, step: float) -> Array:
        grad = np.empty(q.size)
        for j in range(q.size):
            e = np.zeros(q.size)
            e[j] = step
            grad[j] = (self.pair_distance(q + e, pair) - self.pair_distance(q - e, pair)) / (
                2 * step
            )
        return grad

    def close_pairs(self, q: Array, clearance: float) -> list[tuple[int, int]]:
        """``(sample, pair)`` of every checked pair closer than ``clearance`` (m) at every
        configuration of ``q [S, nv]`` (coal's collision test with that security margin)."""
        geom, gdata = self.geometry, self._gdata
        for request in gdata.collisionRequests:
            request.security_margin = float(clearance)
        out = []
        for s, qs in enumerate(np.atleast_2d(np.asarray(q, dtype=float))):
            if pin.computeCollisions(self.robot.model, self._data, geom, gdata, qs, False):
                out += [(s, k) for k, r in enumerate(gdata.collisionResults) if r.isCollision()]
        return out

    def first_collision(self, q: Array, clearance: float) -> tuple[int, str, str] | None:
        """The first configuration of ``q [S, nv]`` where a checked pair is closer than
        ``clearance`` (m), as ``(sample, geometry, geometry)``; ``None`` if there is none."""
        geom, gdata = self.geometry, self._gdata
        for request in gdata.collisionRequests:
            request.security_margin = float(clearance)
        names = self.pair_names
        for s, qs in enumerate(np.atleast_2d(np.asarray(q, dtype=float))):
            if pin.computeCollisions(self.robot.model, self._data, geom, gdata, qs, True):
                k = next(i for i, r in enumerate(gdata.collisionResults) if r.isCollision())
                return s, *names[k]
        return None

    def min_distance(self, q: Array) -> tuple[Array, list[str]]:
        """``[S]`` smallest distance over the checked pairs at every configuration of ``q [S,
        nv]`` and, per sample, the pair's name (hull bounds, then exact distances: module
        notes)."""
        model, data = self.robot.model, self._data
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out, names = np.empty(q.shape[0]), []
        pair_names = self.pair_names
        for s, qs in enumerate(q):
            pin.computeDistances(model, data, self._hull, self._hull_data, qs)
            lower = np.array([r.min_distance for r in self._hull_data.distanceResults])
            pin.updateGeometryPlacements(model, data, self.geometry, self._gdata, qs)
            best, arg = np.inf, 0
            for k in np.argsort(lower):
                if lower[k] - _HULL_SLACK >= best:
                    break
                d = pin.computeDistance(self.geometry, self._gdata, int(k)).min_distance
                if d < best:
                    best, arg = d, int(k)
            out[s] = best
            names.append(" / ".join(pair_names[arg]))
        return out, names
