"""Objects added to a robot's tree: payloads, a box on a universal joint, a sphere in a box.

Every attachment extends the Pinocchio model itself (``addJoint``, ``appendBodyToJoint``,
``addBodyFrame``/``addFrame``) and returns a new :class:`AttachedRobot`, so the torch and the
Pinocchio dynamics backends both see the extended tree; the input robot is never mutated. The
nominal model carries the attachment at its nominal parameter values. Per-particle attachment
parameters (``payload/mass``, ``box/weight1_x``, ``sphere/stiffness``, ...) are resolved by the
attachment that created them: an :class:`AttachedRobot` lists its attachments in
``robot.resolvers`` and ``ParameterSpec.apply`` hands each one the parameters under its prefix.

- payloads, boxes and weights change the 10 dynamic parameters of the body they sit on, which are
  linear in the mass distribution, so ``π_row ← π_row − π(nominal) + π(θ)`` is exact;
- contact constants go to ``DynamicParameters.extra``.

Dynamic parameters follow Pinocchio's order ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz,
I_zz)`` about the origin of the carrying joint's frame (kg, kg·m, kg·m²).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pinocchio as pin
import torch
from torch import Tensor

from dynid.model.errors import ModelError, ParameterSpecError, StateError
from dynid.model.robot import RobotModel
from dynid.model.spatial import dynamic_params_from_body, inertia_from_vector

if TYPE_CHECKING:
    from dynid.model.params import DynamicParameters

__all__ = [
    "CSVGD_BOX_SIZE",
    "AttachedRobot",
    "Attachment",
    "AttachmentError",
    "ForceAttachment",
    "Payload",
    "SphereInContainer",
    "UniversalBox",
    "attach_payload",
    "attach_universal_box",
    "point_mass_parameters",
    "sphere_in_container",
]


class AttachmentError(ModelError, ValueError):
    """An attachment was requested with invalid geometry, masses or names."""


def point_mass_parameters(mass: Tensor, position: Tensor) -> Tensor:
    """Dynamic parameters ``[..., 10]`` of point masses ``mass [...]`` (kg) at ``position``
    ``[..., 3]`` (m)."""
    zeros = torch.zeros(*position.shape, 3, dtype=position.dtype, device=position.device)
    return dynamic_params_from_body(mass, position, zeros)


# --------------------------------------------------------------------------------------------
# Attachments and the robot that carries them


class Attachment(ABC):
    """An object added to the tree; the resolver of the parameters named ``"<name>/<field>"``.

    Implements :class:`dynid.model.params.ParameterResolver`, so ``ParameterSpec.apply`` hands it
    every parameter under its prefix.
    """

    name: str

    @abstractmethod
    def nominal_values(self) -> dict[str, float]:
        """Nominal value (SI) of each parameter this attachment owns, by full name."""

    def parameter_names(self) -> list[str]:
        """Full names of the parameters this attachment owns."""
        return list(self.nominal_values())

    def nominal(self, robot: RobotModel, name: str) -> float:
        """Nominal value of parameter ``name`` (full name)."""
        values = self.nominal_values()
        if name not in values:
            raise ParameterSpecError(
                f"attachment {self.name!r} of robot {robot.name!r} has no parameter {name!r}; "
                f"its parameters: {list(values)}"
            )
        return values[name]

    @abstractmethod
    def apply(
        self, robot: RobotModel, values: Mapping[str, Tensor], params: DynamicParameters
    ) -> DynamicParameters:
        """``params`` with the owned parameters in ``values`` (each ``[N]``) applied."""

    def _batch(
        self, robot: RobotModel, ref: Tensor, values: Mapping[str, Tensor], names: Sequence[str]
    ) -> Tensor:
        """``[N, len(names)]`` values of ``names`` (nominal where absent), like ``ref``."""
        unknown = sorted(set(values) - set(self.nominal_values()))
        if unknown:
            raise ParameterSpecError(
                f"attachment {self.name!r} of robot {robot.name!r} has no parameters {unknown}; "
                f"its parameters: {self.parameter_names()}"
            )
        columns = []
        for name in names:
            if name in values:
                value = torch.as_tensor(values[name], dtype=ref.dtype, device=ref.device)
                if value.dim() != 1:
                    raise StateError(
                        f"attachment parameter {name!r} must be a [N] tensor, got shape "
                        f"{tuple(value.shape)}"
                    )
            else:
                value = torch.full(
                    (1,), self.nominal(robot, name), dtype=ref.dtype, device=ref.device
                )
            columns.append(value)
        return torch.stack(torch.broadcast_tensors(*columns), dim=-1)


class ForceAttachment(Attachment):
    """An attachment that also exerts a state-dependent generalised force on the tree."""

    @abstractmethod
    def __call__(self, p: DynamicParameters, q: Tensor, v: Tensor) -> Tensor:
        """Generalised forces ``[N, *B, nv]`` (N·m or N) for states ``[N, *B, nv]``."""


def _add_to_row(p: DynamicParameters, row: int, delta: Tensor) -> DynamicParameters:
    """``p`` with ``delta [N, 10]`` added to body ``row`` of ``p.inertia [N, nv, 10]``."""
    inertia = p.inertia
    n = max(inertia.shape[0], delta.shape[0])
    inertia = inertia.expand(n, *inertia.shape[1:])
    onehot = torch.zeros(inertia.shape[1], 1, dtype=inertia.dtype, device=inertia.device)
    onehot[row] = 1.0
    return dataclasses.replace(p, inertia=inertia + onehot * delta[:, None, :])


@dataclass(eq=False)
class AttachedRobot(RobotModel):
    """A :class:`RobotModel` whose Pinocchio model has attachments appended.

    Attributes:
        attachments: the attachments, in the order they were added; they keep working when the
            robot is extended again (:meth:`replace`), as new joints are appended at the end of
            q/v.
    """

    attachments: tuple[Attachment, ...] = field(default=())

    @property
    def resolvers(self) -> dict[str, Attachment]:
        """Parameter prefix → attachment (``ParameterSpec`` resolves ``"<prefix>/..."`` here)."""
        return {a.name: a for a in self.attachments}

    @property
    def generalized_forces(self) -> tuple[ForceAttachment, ...]:
        """Attachments that add state-dependent generalised forces (penalty contact); the
        integrator (:mod:`dynid.model.integrate`) applies them by default."""
        return tuple(a for a in self.attachments if isinstance(a, ForceAttachment))

    def replace(
        self, model: pin.Model, joint_names: Sequence[str] | None = None, *, name: str | None = None
    ) -> AttachedRobot:
        """A new robot around ``model`` keeping this robot's gravity and attachments."""
        base = RobotModel.replace(self, model, joint_names, name=name)
        return _with_attachments(base, self.attachments)

    def attachment(self, name: str) -> Attachment:
        """The attachment called ``name``."""
        try:
            return self.resolvers[name]
        except KeyError:
            raise AttachmentError(
                f"robot {self.name!r} has no attachment {name!r}; "
                f"attachments: {[a.name for a in self.attachments]}"
            ) from None


def _with_attachments(robot: RobotModel, attachments: Sequence[Attachment]) -> AttachedRobot:
    return AttachedRobot(
        name=robot.name,
        model=robot.model,
        gravity=robot.gravity.copy(),
        attachments=tuple(attachments),
    )


def _extend(robot: RobotModel, model: pin.Model, attachment: Attachment) -> AttachedRobot:
    existing = robot.attachments if isinstance(robot, AttachedRobot) else ()
    if any(a.name == attachment.name for a in existing):
        raise AttachmentError(f"robot {robot.name!r} already has an attachment {attachment.name!r}")
    extended = RobotModel.replace(robot, model)
    return _with_attachments(extended, (*existing, attachment))


def _finite_positive(value: float, what: str, *, allow_zero: bool = False) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0.0 or (value == 0.0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise AttachmentError(f"{what} must be a finite {bound} number, got {value!r}")
    return value


def _vector3(value: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    if array.shape != (3,) or not np.all(np.isfinite(array)):
        raise AttachmentError(f"{what} must be 3 finite numbers, got {value!r}")
    return array


def _inertia3(value: Sequence[Sequence[float]] | np.ndarray | None, what: str) -> np.ndarray:
    """A symmetric positive semi-definite [3, 3] inertia (zeros for ``None``)."""
    array = np.zeros((3, 3)) if value is None else np.asarray(value, dtype=np.float64)
    if (
        array.shape != (3, 3)
        or not np.all(np.isfinite(array))
        or not np.allclose(array, array.T)
        or np.linalg.eigvalsh(array).min() < -1e-12
    ):
        raise AttachmentError(
            f"{what} must be a symmetric positive semi-definite [3, 3] matrix (kg·m²), "
            f"got {value!r}"
        )
    return array


def _check_new_names(robot: RobotModel, names: Sequence[str]) -> None:
    clashes = [n for n in names if robot.model.existFrame(n) or robot.model.existJointName(n)]
    if clashes:
        raise AttachmentError(
            f"robot {robot.name!r} already has frames or joints named {clashes}; choose another "
            "attachment name"
        )


def _parent_of(robot: RobotModel, frame: str) -> tuple[int, pin.SE3, int]:
    """(Pinocchio joint id, placement in that joint's frame, frame id) of ``frame``."""
    fid = robot.frame_id(frame)
    f = robot.model.frames[fid]
    return int(f.parentJoint), pin.SE3(f.placement), fid


_BODY_FIELDS = ("mass", "com_x", "com_y", "com_z", "ixx", "ixy", "iyy", "ixz", "iyz", "izz")
"""Rigid-body parameter fields (kg, m, kg·m² about the centre of mass), inertia in Pinocchio's
(xx, xy, yy, xz, yz, zz) order."""


def _body_nominal(prefix: str, mass: float, com: np.ndarray, inertia: np.ndarray) -> dict:
    """Nominal values of the rigid-body fields ``<prefix>/mass|com_*|i**``."""
    i6 = (inertia[0, 0], inertia[0, 1], inertia[1, 1], inertia[0, 2], inertia[1, 2], inertia[2, 2])
    return {f"{prefix}/{f}": float(v) for f, v in zip(_BODY_FIELDS, (mass, *com, *i6), strict=True)}


def _body_from_columns(theta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Columns ``[N, 10]`` in :data:`_BODY_FIELDS` order → mass, com ``[N, 3]``, inertia."""
    return theta[:, 0], theta[:, 1:4], inertia_from_vector(theta[:, 4:10])


# --------------------------------------------------------------------------------------------
# Fixed payload (proprio III-B "fixed joint"; OpenManipulator-X gripper)


@dataclass(frozen=True, eq=False)
class Payload(Attachment):
    """A rigid payload welded to a link; merged into the carrying body's dynamic parameters.

    Parameters (link frame, SI, as URDF's ``<inertial>``): ``<name>/mass`` (kg),
    ``<name>/com_x|y|z`` (m), ``<name>/ixx|ixy|iyy|ixz|iyz|izz`` (kg·m², about the payload's
    centre of mass, link axes).

    Attributes:
        name: parameter prefix and name of the payload's frame (at its nominal centre of mass).
        link: link the payload is welded to.
        row: index of the carrying body in ``DynamicParameters.inertia`` (q/v order).
        rotation, translation: placement of the link frame in the carrying joint frame.
        mass, com, inertia: nominal mass (kg), centre of mass in the link frame (m) and
            rotational inertia about it in link axes (kg·m²).
    """

    name: str
    link: str
    row: int
    rotation: np.ndarray
    translation: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def nominal_values(self) -> dict[str, float]:
        """Mass, centre of mass and inertia of the payload, by full parameter name."""
        return _body_nominal(self.name, self.mass, self.com, self.inertia)

    def joint_frame_parameters(self, mass: Tensor, com: Tensor, inertia: Tensor) -> Tensor:
        """``[N, 10]`` parameters in the carrying joint frame of a payload with ``mass [N]``,
        link-frame centre of mass ``com [N, 3]`` and inertia ``[N, 3, 3]`` about it."""
        R = torch.as_tensor(self.rotation, dtype=com.dtype, device=com.device)
        t = torch.as_tensor(self.translation, dtype=com.dtype, device=com.device)
        return dynamic_params_from_body(mass, com @ R.T + t, R @ inertia @ R.T)

    def apply(
        self, robot: RobotModel, values: Mapping[str, Tensor], params: DynamicParameters
    ) -> DynamicParameters:
        """Replace the nominal payload in the carrying body's row by the per-particle one."""
        names = [f"{self.name}/{f}" for f in _BODY_FIELDS]
        theta = self._batch(robot, params.inertia, values, names)
        nominal = self._batch(robot, params.inertia, {}, names)
        delta = self.joint_frame_parameters(
            *_body_from_columns(theta)
        ) - self.joint_frame_parameters(*_body_from_columns(nominal))
        return _add_to_row(params, self.row, delta)


def attach_payload(
    robot: RobotModel,
    link: str,
    *,
    mass: float,
    com: Sequence[float],
    inertia: Sequence[Sequence[float]] | np.ndarray | None = None,
    name: str = "payload",
) -> AttachedRobot:
    """Weld a rigid payload to ``link`` (a fixed joint, proprio III-B).

    Args:
        robot: the robot (not modified).
        link: link (or any frame) the payload is fixed to, e.g. the OpenManipulator-X's
            ``end_effector_link``.
        mass: payload mass (kg), > 0.
        com: [3] payload centre of mass in the ``link`` frame (m).
        inertia: [3, 3] rotational inertia about the centre of mass in ``link`` axes (kg·m²),
            symmetric positive semi-definite; ``None`` for a point mass.
        name: parameter prefix (``"<name>/mass"``, ``"<name>/com_x"``...) and name of a new frame
            at the payload's centre of mass.

    Returns:
        The extended robot; the carrying body's inertia includes the payload.
    """
    mass = _finite_positive(mass, f"payload {name!r} mass (kg)")
    com_array = _vector3(com, f"payload {name!r} centre of mass (m)")
    inertia_array = _inertia3(inertia, f"payload {name!r} inertia")
    _check_new_names(robot, [name])
    joint_id, placement, frame_id = _parent_of(robot, link)
    if joint_id == 0:
        raise AttachmentError(
            f"link {link!r} of robot {robot.name!r} is fixed to the base; a payload there does "
            "not change the dynamics"
        )
    model = robot.model.copy()
    model.appendBodyToJoint(joint_id, pin.Inertia(mass, com_array, inertia_array), placement)
    com_placement = placement * pin.SE3(np.eye(3), com_array)
    model.addFrame(pin.Frame(name, joint_id, frame_id, com_placement, pin.FrameType.OP_FRAME))
    attachment = Payload(
        name=name,
        link=link,
        row=joint_id - 1,
        rotation=np.array(placement.rotation),
        translation=np.array(placement.translation),
        mass=mass,
        com=com_array,
        inertia=inertia_array,
    )
    return _extend(robot, model, attachment)


# --------------------------------------------------------------------------------------------
# Box on a passive universal joint with point weights (csvgd V-C, App. II-E, Tab. IV)

CSVGD_BOX_SIZE: tuple[float, float, float] = (0.30, 0.18, 0.30)
"""Box used for the csvgd Panda experiment (m, x × y × z), our choice: the paper gives no
dimensions; Tab. IVb bounds the weights to x ∈ ±0.14 m, y ∈ ±0.08 m, so the floor is at least
0.28 × 0.16 m; a 0.30 m height puts the empty box's centre of mass 0.15 m below the lid, inside
Tab. IVa's COM-z range 0.1–0.4 m."""


@dataclass(frozen=True, eq=False)
class UniversalBox(Attachment):
    """A box hanging from a universal joint, with point weights lying on its floor.

    The box frame has its origin at the centre of the lid, where the universal joint sits, and its
    z axis pointing down into the box (the flange's z); the floor is at ``z = height``.
    Parameters (box frame, SI): the empty box's ``<name>/mass``, ``<name>/com_x|y|z`` and
    ``<name>/ixx|ixy|iyy|ixz|iyz|izz`` (about its centre of mass; csvgd Tab. IVa) and the weight
    positions ``<name>/weight<i>_x|y`` (m, ``i = 1..count``; Tab. IVb).

    Attributes:
        name: parameter prefix, name of the box link/frame.
        row: index of the box body in ``DynamicParameters.inertia`` (the universal joint's second
            dof).
        mass, com, inertia: nominal empty box (kg, m, kg·m² about its centre of mass).
        weight_mass: mass of each weight (kg).
        height: depth of the floor below the lid (m).
        positions: ``[count, 2]`` nominal planar positions of the weights (m).
    """

    name: str
    row: int
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    weight_mass: float
    height: float
    positions: np.ndarray

    def weight_names(self) -> list[str]:
        """``<name>/weight<i>_x``, ``<name>/weight<i>_y`` for every weight, in order."""
        return [
            f"{self.name}/weight{i + 1}_{axis}"
            for i in range(self.positions.shape[0])
            for axis in "xy"
        ]

    def nominal_values(self) -> dict[str, float]:
        """Empty-box body and weight positions, by full parameter name."""
        weights = dict(zip(self.weight_names(), self.positions.reshape(-1).tolist(), strict=True))
        return {**_body_nominal(self.name, self.mass, self.com, self.inertia), **weights}

    def weights_parameters(self, xy: Tensor) -> Tensor:
        """``[N, 10]`` summed dynamic parameters of the weights at ``xy [N, count, 2]`` (m)."""
        z = torch.full_like(xy[..., :1], self.height)
        mass = torch.full_like(xy[..., 0], self.weight_mass)
        return point_mass_parameters(mass, torch.cat([xy, z], dim=-1)).sum(dim=-2)

    def box_parameters(self, robot: RobotModel, values: Mapping[str, Tensor], like: Tensor):
        """Dynamic parameters ``[N, 10]`` of the box body (empty box + weights) in the box frame.

        Args:
            robot: the robot carrying the box (for error messages).
            values: ``{full name: [N]}``; parameters not given take their nominal values.
            like: a tensor whose dtype and device the result takes.
        """
        body = self._batch(robot, like, values, [f"{self.name}/{f}" for f in _BODY_FIELDS])
        xy = self._batch(robot, like, values, self.weight_names())
        empty = dynamic_params_from_body(*_body_from_columns(body))
        return empty + self.weights_parameters(xy.reshape(xy.shape[0], -1, 2))

    def apply(
        self, robot: RobotModel, values: Mapping[str, Tensor], params: DynamicParameters
    ) -> DynamicParameters:
        """Replace the nominal box body (box and weights) by the per-particle one."""
        delta = self.box_parameters(robot, values, params.inertia) - self.box_parameters(
            robot, {}, params.inertia
        )
        return _add_to_row(params, self.row, delta)


def attach_universal_box(
    robot: RobotModel,
    flange_frame: str,
    *,
    box_mass: float = 0.920,
    size: Sequence[float] = CSVGD_BOX_SIZE,
    weights: int = 2,
    damping: float | Sequence[float] = 0.0,
    weight_mass: float = 0.5,
    weight_positions: Sequence[Sequence[float]] | None = None,
    box_com: Sequence[float] | None = None,
    box_inertia: Sequence[Sequence[float]] | np.ndarray | None = None,
    name: str = "box",
) -> AttachedRobot:
    """Hang a box from ``flange_frame`` through a passive universal joint (csvgd V-C).

    The universal joint is two revolute joints ``<name>_joint_x`` (about the flange x axis) and
    ``<name>_joint_y`` (about the rotated y axis) at the flange origin; they carry no actuator and
    get viscous ``damping`` (csvgd Tab. IVa "U-Joint friction", N·m·s/rad, stored in
    ``model.damping``, identified as ``"<name>_joint_x/damping"``). The box body ``<name>`` hangs
    below (flange +z); ``weights`` point masses of ``weight_mass`` lie on its floor.

    Args:
        robot: the robot (not modified), e.g. the Panda.
        flange_frame: frame the joint is mounted at (``panda_link8`` flange or ``panda_hand``).
        box_mass: empty box mass (kg); the paper measured 0.920 kg.
        size: outer box dimensions (x, y, z) in m, see :data:`CSVGD_BOX_SIZE`.
        weights: number of point weights (Tab. IVb: 2 of 500 g).
        damping: viscous damping of the two universal-joint dofs, scalar or [2].
        weight_mass: mass of each weight (kg).
        weight_positions: ``[weights, 2]`` nominal (x, y) of each weight on the floor (m);
            default: evenly spaced along x on the box's centre line.
        box_com: [3] empty-box centre of mass in the box frame (m); default the geometric centre
            ``(0, 0, size_z / 2)``.
        box_inertia: [3, 3] empty-box inertia about its centre of mass (kg·m²); default a solid
            cuboid of ``size`` and ``box_mass``.
        name: name of the box link and frame, prefix of the attachment's parameters.

    Returns:
        The extended robot with ``nv + 2`` dofs; its last movable body is the box.
    """
    box_mass = _finite_positive(box_mass, f"box {name!r} mass (kg)")
    size_array = _vector3(size, f"box {name!r} size (m)")
    if np.any(size_array <= 0.0):
        raise AttachmentError(f"box {name!r} size must be positive in x, y, z, got {size!r}")
    weight_mass = _finite_positive(weight_mass, f"box {name!r} weight mass (kg)")
    if int(weights) != weights or weights < 0:
        raise AttachmentError(
            f"box {name!r}: weights must be a non-negative integer, got {weights}"
        )
    damping_array = np.broadcast_to(np.asarray(damping, dtype=np.float64), (2,)).copy()
    if not np.all(np.isfinite(damping_array)) or np.any(damping_array < 0.0):
        raise AttachmentError(f"box {name!r} universal-joint damping must be ≥ 0, got {damping!r}")
    half = size_array / 2.0
    if weight_positions is None:
        xs = (np.arange(weights) + 0.5) / max(weights, 1) * size_array[0] - half[0]
        positions = np.stack([xs, np.zeros(weights)], axis=-1)
    else:
        positions = np.asarray(weight_positions, dtype=np.float64)
    if positions.shape != (weights, 2) or not np.all(np.isfinite(positions)):
        raise AttachmentError(
            f"box {name!r}: weight_positions must be [{weights}, 2] finite (x, y) in m, got "
            f"{weight_positions!r}"
        )
    if np.any(np.abs(positions) > half[:2]):
        raise AttachmentError(
            f"box {name!r}: weight positions {positions.tolist()} lie outside the "
            f"{size_array[0]} × {size_array[1]} m floor"
        )
    com = np.array([0.0, 0.0, half[2]]) if box_com is None else _vector3(box_com, "box_com (m)")
    if box_inertia is None:
        sx, sy, sz = size_array**2
        inertia = box_mass / 12.0 * np.diag([sy + sz, sx + sz, sx + sy])
    else:
        inertia = _inertia3(box_inertia, f"box {name!r} inertia")
    joint_x, joint_y = f"{name}_joint_x", f"{name}_joint_y"
    weight_frames = [f"{name}/weight{i + 1}" for i in range(weights)]
    _check_new_names(robot, [joint_x, joint_y, name, *weight_frames])
    parent, placement, _ = _parent_of(robot, flange_frame)
    model = robot.model.copy()
    jx = model.addJoint(parent, pin.JointModelRX(), placement, joint_x)
    model.addJointFrame(jx)
    jy = model.addJoint(jx, pin.JointModelRY(), pin.SE3.Identity(), joint_y)
    frame_y = model.addJointFrame(jy)
    model.damping[model.joints[jx].idx_v] = damping_array[0]
    model.damping[model.joints[jy].idx_v] = damping_array[1]
    model.appendBodyToJoint(jy, pin.Inertia(box_mass, com, inertia), pin.SE3.Identity())
    body = model.addBodyFrame(name, jy, pin.SE3.Identity(), frame_y)
    for frame_name, (x, y) in zip(weight_frames, positions, strict=True):
        at = pin.SE3(np.eye(3), np.array([x, y, size_array[2]]))
        model.appendBodyToJoint(jy, pin.Inertia(weight_mass, np.zeros(3), np.zeros((3, 3))), at)
        model.addFrame(pin.Frame(frame_name, jy, body, at, pin.FrameType.OP_FRAME))
    attachment = UniversalBox(
        name=name,
        row=jy - 1,
        mass=box_mass,
        com=com,
        inertia=inertia,
        weight_mass=weight_mass,
        height=float(size_array[2]),
        positions=positions,
    )
    return _extend(robot, model, attachment)


# --------------------------------------------------------------------------------------------
# Sphere in a container with penalty contact (proprio III-B "contacts and collisions")

_AXES = "xyz"
_TRANSLATION_JOINTS = {"x": pin.JointModelPX, "y": pin.JointModelPY, "z": pin.JointModelPZ}
_ROTATION_JOINTS = {"x": pin.JointModelRX, "y": pin.JointModelRY, "z": pin.JointModelRZ}
_CONTACT_FIELDS = ("stiffness", "damping", "friction_stiffness", "friction")


@dataclass(frozen=True, eq=False)
class SphereInContainer(ForceAttachment):
    """A sphere moving inside a box-shaped cavity of a link, coupled by penalty contact.

    The sphere's centre moves along prismatic joints parented to the container (its position
    relative to the cavity centre, container axes); in the planar case an extra revolute joint
    about the plane normal lets it roll. The contact between sphere and wall ``k`` (outward normal
    ``n_k``, penetration ``d_k``) follows proprio III-B::

        f_n = k_e d − k_d v_n              (v_n: separating normal velocity; zero if d ≤ 0, ≥ 0)
        f_t = −min(k_f |v_t|, μ f_n) v_t / |v_t|

    Because the force acts between the container (parent) and the sphere (child), its generalised
    force lives only on the sphere's own dofs (the robot feels it through the coupled mass
    matrix); :mod:`dynid.model.integrate` applies it by default. The explicit
    (semi-implicit Euler) step needs ``h < 2 / sqrt(k_e / m)`` and ``h < 2 m / k_f`` (sub-step
    ``h``, sphere mass ``m``), otherwise the stiff penalty or viscous friction oscillates.

    Parameters: ``<name>/mass`` (kg), ``<name>/stiffness`` k_e (N/m), ``<name>/damping`` k_d
    (N·s/m), ``<name>/friction_stiffness`` k_f (N·s/m), ``<name>/friction`` μ (–). Contact
    constants are read from ``DynamicParameters.extra["<name>/<field>"]`` ``[N]`` when present.

    Attributes:
        name: prefix; the sphere body/frame name.
        axes: container axes the sphere translates along (``"xyz"``, or two of them).
        roll_axis: axis of the rolling dof (planar case) or ``None``.
        dofs: q/v indices of the translation dofs then the rolling dof.
        row: index of the sphere body in ``DynamicParameters.inertia``.
        radius: sphere radius (m); half_extents: [3] cavity half sizes (m).
        mass: nominal mass (kg); contact: nominal contact constants by field.
    """

    name: str
    axes: str
    roll_axis: str | None
    dofs: tuple[int, ...]
    row: int
    radius: float
    half_extents: np.ndarray
    mass: float
    contact: Mapping[str, float]

    def nominal_values(self) -> dict[str, float]:
        """Mass and contact constants by full parameter name."""
        return {
            f"{self.name}/mass": self.mass,
            **{f"{self.name}/{k}": float(self.contact[k]) for k in _CONTACT_FIELDS},
        }

    def sphere_parameters(self, mass: Tensor) -> Tensor:
        """``[N, 10]`` parameters of a solid sphere of ``mass [N]`` (kg) about its centre."""
        eye = torch.eye(3, dtype=mass.dtype, device=mass.device)
        centre = torch.zeros(*mass.shape, 3, dtype=mass.dtype, device=mass.device)
        return dynamic_params_from_body(
            mass, centre, 0.4 * self.radius**2 * mass[..., None, None] * eye
        )

    def apply(
        self, robot: RobotModel, values: Mapping[str, Tensor], params: DynamicParameters
    ) -> DynamicParameters:
        """Sphere mass into its body row; contact constants into ``params.extra`` (``[N]``)."""
        mass_name = f"{self.name}/mass"
        theta = self._batch(robot, params.inertia, values, [mass_name])[:, 0]
        nominal = self._batch(robot, params.inertia, {}, [mass_name])[:, 0]
        delta = self.sphere_parameters(theta) - self.sphere_parameters(nominal)
        params = _add_to_row(params, self.row, delta)
        contact = [k for k in values if k != mass_name]
        if contact:
            extra = dict(params.extra)
            extra.update(
                zip(contact, self._batch(robot, params.inertia, values, contact).T, strict=True)
            )
            params = dataclasses.replace(params, extra=extra)
        return params

    def _constant(self, p: DynamicParameters, field: str, like: Tensor) -> Tensor:
        """Contact constant ``field`` as ``[N|1, 1, ..., 1]`` broadcasting against ``like``."""
        key = f"{self.name}/{field}"
        value = p.extra.get(key)
        if value is None:
            value = torch.tensor([self.contact[field]], dtype=like.dtype, device=like.device)
        return value.reshape(value.shape[0], *([1] * (like.dim() - 1)))

    @cached_property
    def _geometry(self) -> dict[str, np.ndarray]:
        """Constant tables: translation axes ``[nt, 3]``, roll axis ``[3]``, wall normals ``[K, 3]``
        (outward, two per translation axis) and wall distances ``[K]`` from the cavity centre."""
        eye = np.eye(3)
        translation = np.stack([eye[_AXES.index(a)] for a in self.axes])
        roll = eye[_AXES.index(self.roll_axis)] if self.roll_axis is not None else np.zeros(3)
        normals = np.concatenate([translation, -translation], axis=0)
        distance = np.abs(normals) @ self.half_extents
        return {"translation": translation, "roll": roll, "normals": normals, "distance": distance}

    def _table(self, key: str, like: Tensor) -> Tensor:
        return torch.as_tensor(self._geometry[key], dtype=like.dtype, device=like.device)

    def _state(self, q: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Centre position, velocity and angular velocity ``[N, *B, 3]`` in the container frame."""
        n_t = len(self.axes)
        translation = self._table("translation", q)
        dofs = list(self.dofs)
        centre = q[..., dofs[:n_t]] @ translation
        velocity = v[..., dofs[:n_t]] @ translation
        if self.roll_axis is None:
            omega = torch.zeros_like(velocity)
        else:
            omega = v[..., dofs[-1], None] * self._table("roll", v)
        return centre, velocity, omega

    def contact_force(
        self, p: DynamicParameters, q: Tensor, v: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per-wall contact forces on the sphere.

        Args:
            p: per-particle parameters (contact constants from ``p.extra`` or nominal).
            q, v: robot + sphere state ``[N, *B, nv]``.

        Returns:
            ``(force [N, *B, K, 3], depth [N, *B, K], torque [N, *B, 3])``: force on the sphere
            from each wall in container axes (N), penetration depth (m, negative when apart) and
            the total friction torque on the sphere about its centre (N·m); ``K`` = 2 walls per
            translation axis.
        """
        centre, velocity, omega = self._state(q, v)
        normals, distance = self._table("normals", centre), self._table("distance", centre)
        depth = centre @ normals.T + self.radius - distance
        rate = velocity @ normals.T  # penetration rate = −(separating normal velocity)
        ke = self._constant(p, "stiffness", depth)
        kd = self._constant(p, "damping", depth)
        kf = self._constant(p, "friction_stiffness", depth)[..., None]
        mu = self._constant(p, "friction", depth)[..., None]
        f_n = torch.where(depth > 0.0, torch.relu(ke * depth + kd * rate), depth.new_zeros(()))
        lever = self.radius * normals
        v_contact = velocity[..., None, :] + torch.linalg.cross(
            omega[..., None, :].expand(*omega.shape[:-1], normals.shape[0], 3),
            lever.expand(*omega.shape[:-1], *lever.shape),
        )
        v_t = v_contact - (v_contact * normals).sum(-1, keepdim=True) * normals
        speed_sq = (v_t * v_t).sum(-1, keepdim=True)
        sliding = speed_sq > 0.0
        speed = torch.sqrt(torch.where(sliding, speed_sq, torch.ones_like(speed_sq)))
        gain = torch.where(
            sliding,
            torch.minimum(kf.expand_as(speed), mu * f_n[..., None] / speed),
            kf.expand_as(speed),
        )
        gain = torch.where(f_n[..., None] > 0.0, gain, torch.zeros_like(gain))
        f_t = -gain * v_t
        force = -f_n[..., None] * normals + f_t
        torque = torch.linalg.cross(lever.expand_as(f_t), f_t).sum(-2)
        return force, depth, torque

    def __call__(self, p: DynamicParameters, q: Tensor, v: Tensor) -> Tensor:
        """Generalised contact forces ``[N, *B, nv]`` (nonzero on the sphere's dofs only)."""
        force, _, torque = self.contact_force(p, q, v)
        total = force.sum(-2)
        columns = [total[..., _AXES.index(a)] for a in self.axes]
        if self.roll_axis is not None:
            columns.append(torque[..., _AXES.index(self.roll_axis)])
        tau_s = torch.stack(columns, dim=-1)
        shape = np.broadcast_shapes(q.shape, (*tau_s.shape[:-1], q.shape[-1]))
        index = torch.tensor(self.dofs, dtype=torch.long, device=q.device)
        return tau_s.new_zeros(shape).index_copy(
            -1, index, tau_s.expand(*shape[:-1], len(self.dofs))
        )


def sphere_in_container(
    robot: RobotModel,
    container_frame: str,
    *,
    inner_size: Sequence[float],
    radius: float,
    mass: float,
    stiffness: float,
    damping: float,
    friction_stiffness: float,
    friction: float,
    cavity_center: Sequence[float] = (0.0, 0.0, 0.0),
    axes: str = "xyz",
    rolling: bool = False,
    name: str = "sphere",
) -> AttachedRobot:
    """Put a sphere into a box-shaped cavity of ``container_frame`` (proprio III-B, Fig. 2b).

    The sphere is given its own dofs — prismatic joints ``<name>_x|y|z`` along the container axes
    (its centre relative to the cavity centre) and, for a planar model (two axes), optionally a
    revolute ``<name>_roll`` about the plane normal — instead of a free-floating joint, because
    dynid's dynamics use one-dof joints with ``nq == nv``: translations are exact and singularity
    free, and a penalty contact between parent and child is then a plain generalised force on the
    sphere's dofs (see :class:`SphereInContainer`). The sphere's orientation follows the
    container except for the planar rolling dof; spin about other axes is not modelled.

    Args:
        robot: the robot (not modified), e.g. the OpenManipulator-X holding a container.
        container_frame: frame of the container (its axes are the cavity axes).
        inner_size: [3] cavity size (x, y, z) in m.
        radius: sphere radius (m), smaller than half of every cavity size.
        mass: sphere mass (kg).
        stiffness, damping: normal contact stiffness k_e (N/m) and damping k_d (N·s/m).
        friction_stiffness, friction: friction stiffness k_f (N·s/m) and coefficient μ.
        cavity_center: [3] cavity centre in ``container_frame`` (m); the sphere starts there
            (q = 0).
        axes: the translation axes modelled, ``"xyz"`` or two of them (planar motion).
        rolling: add the rolling dof (only with two axes).
        name: prefix of joints, frame and parameters.

    Returns:
        The extended robot; ``robot.attachment(name)`` is the :class:`SphereInContainer`.
    """
    if not axes or len(set(axes)) != len(axes) or any(a not in _AXES for a in axes):
        raise AttachmentError(
            f"sphere {name!r}: axes must be distinct letters of 'xyz', got {axes!r}"
        )
    axes = "".join(sorted(axes, key=_AXES.index))
    if rolling and len(axes) != 2:
        raise AttachmentError(
            f"sphere {name!r}: rolling needs a planar model with two axes, got axes {axes!r}"
        )
    size = _vector3(inner_size, f"sphere {name!r} container inner_size (m)")
    radius = _finite_positive(radius, f"sphere {name!r} radius (m)")
    if np.any(size <= 2.0 * radius):
        raise AttachmentError(
            f"sphere {name!r}: cavity {size.tolist()} m must exceed the sphere's diameter "
            f"{2 * radius} m in every direction"
        )
    mass = _finite_positive(mass, f"sphere {name!r} mass (kg)")
    contact = {
        "stiffness": _finite_positive(stiffness, f"sphere {name!r} stiffness (N/m)"),
        "damping": _finite_positive(damping, f"sphere {name!r} damping (N·s/m)", allow_zero=True),
        "friction_stiffness": _finite_positive(
            friction_stiffness, f"sphere {name!r} friction_stiffness (N·s/m)", allow_zero=True
        ),
        "friction": _finite_positive(friction, f"sphere {name!r} friction", allow_zero=True),
    }
    center = _vector3(cavity_center, f"sphere {name!r} cavity_center (m)")
    roll_axis = next(a for a in _AXES if a not in axes) if rolling else None
    joint_names = [f"{name}_{a}" for a in axes] + ([f"{name}_roll"] if rolling else [])
    _check_new_names(robot, [*joint_names, name])
    parent, placement, _ = _parent_of(robot, container_frame)
    model = robot.model.copy()
    joint_id = parent
    joint_placement = placement * pin.SE3(np.eye(3), center)
    dofs = []
    kinds = [_TRANSLATION_JOINTS[a] for a in axes]
    kinds += [_ROTATION_JOINTS[roll_axis]] if roll_axis is not None else []
    for joint_name, kind in zip(joint_names, kinds, strict=True):
        joint_id = model.addJoint(joint_id, kind(), joint_placement, joint_name)
        last_frame = model.addJointFrame(joint_id)
        dofs.append(model.joints[joint_id].idx_v)
        joint_placement = pin.SE3.Identity()
    inertia = pin.Inertia(mass, np.zeros(3), 0.4 * mass * radius**2 * np.eye(3))
    model.appendBodyToJoint(joint_id, inertia, pin.SE3.Identity())
    model.addBodyFrame(name, joint_id, pin.SE3.Identity(), last_frame)
    attachment = SphereInContainer(
        name=name,
        axes=axes,
        roll_axis=roll_axis,
        dofs=tuple(int(d) for d in dofs),
        row=joint_id - 1,
        radius=radius,
        half_extents=size / 2.0,
        mass=mass,
        contact=contact,
    )
    return _extend(robot, model, attachment)
