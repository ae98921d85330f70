"""Robot loading: URDF (file or ``robot_description`` string) → Pinocchio model and joint tables.

The URDF is pre-parsed with ``defusedxml`` and checked (joint types, inertials of moving links,
mimic joints, and every ``<inertial>``: finite numbers, mass > 0, inertia positive semi-definite
with the triangle inequality) before Pinocchio sees it, which would otherwise drop an inertial it
cannot parse with only a warning; continuous joints become revolute joints with wide limits so
that every movable joint has one position and one velocity coordinate (``nq == nv``).
"""

from __future__ import annotations

import importlib.metadata
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree.ElementTree import Element, tostring

import defusedxml.ElementTree as SafeET
import numpy as np
import pinocchio as pin
from defusedxml import DefusedXmlException

from dynid.model.errors import (
    UnknownFrameError,
    UnknownJointError,
    UnsupportedJointError,
    UrdfError,
)

if TYPE_CHECKING:
    from dynid.model.params import ParameterResolver

__all__ = [
    "FrameInfo",
    "JointKind",
    "RobotModel",
    "available_robots",
    "example_robot_data_urdf",
    "load_robot",
    "parse_urdf_xml",
    "robot_urdf",
    "urdf_path",
]

_URDF_DIR = Path(__file__).resolve().parent / "urdf"
_URDF_JOINT_TYPES = {"revolute", "continuous", "prismatic", "fixed"}
_CONTINUOUS_LIMIT = 1.0e4  # rad; a continuous joint becomes revolute within ±this angle
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # no nan, inf, hex or "_"
_INERTIA_ATTRS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
#: Principal moments may violate A + B >= C by this fraction of C (values rounded in the URDF).
_TRIANGLE_RTOL = 1e-3
#: kg·m² a principal moment may fall below zero (rounding of a point mass's zero inertia).
_INERTIA_ATOL = 1e-12


class JointKind(Enum):
    """Kind of a movable joint: rotation about or translation along a fixed axis."""

    REVOLUTE = "revolute"
    PRISMATIC = "prismatic"


_PIN_JOINT_KINDS: dict[str, tuple[JointKind, tuple[float, float, float] | None]] = {
    "JointModelRX": (JointKind.REVOLUTE, (1.0, 0.0, 0.0)),
    "JointModelRY": (JointKind.REVOLUTE, (0.0, 1.0, 0.0)),
    "JointModelRZ": (JointKind.REVOLUTE, (0.0, 0.0, 1.0)),
    "JointModelRevoluteUnaligned": (JointKind.REVOLUTE, None),
    "JointModelPX": (JointKind.PRISMATIC, (1.0, 0.0, 0.0)),
    "JointModelPY": (JointKind.PRISMATIC, (0.0, 1.0, 0.0)),
    "JointModelPZ": (JointKind.PRISMATIC, (0.0, 0.0, 1.0)),
    "JointModelPrismaticUnaligned": (JointKind.PRISMATIC, None),
}


@dataclass(frozen=True)
class FrameInfo:
    """A Pinocchio frame reduced to what kinematics needs.

    Attributes:
        name: frame name (link, joint or operational frame).
        parent: index of the movable joint it is rigidly attached to (into q/v), -1 for the base.
        rotation: [3, 3] orientation of the frame in its parent joint frame.
        translation: [3] position of the frame origin in its parent joint frame (m).
    """

    name: str
    parent: int
    rotation: np.ndarray
    translation: np.ndarray


@dataclass
class RobotModel:
    """A fixed-base robot with revolute and prismatic joints, wrapping a Pinocchio model.

    The wrapped model is the nominal model; dynid never mutates it in place (per-particle
    parameters live in :class:`dynid.model.params.DynamicParameters`).

    Attributes:
        name: robot name.
        model: the Pinocchio model (universe + ``nv`` one-dof joints).
        joint_names: movable joints in q/v order.
        nq, nv: configuration and velocity dimensions (equal).
        body_names: link attached to each movable joint, same order as ``joint_names``.
        gravity: [3] gravity vector in the world frame (m/s²).
        joint_kinds: revolute or prismatic, per movable joint.
        joint_axes: [nv, 3] unit axis of each joint in its own joint frame.
        parents: [nv] index of each joint's parent movable joint, -1 for the base.
        placement_rotations: [nv, 3, 3] rotation of each joint placement in its parent frame.
        placement_translations: [nv, 3] translation of each joint placement in its parent
            frame (m); link lengths of the nominal model.
    """

    name: str
    model: pin.Model
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    joint_names: list[str] = field(init=False)
    nq: int = field(init=False)
    nv: int = field(init=False)
    body_names: list[str] = field(init=False)
    joint_kinds: list[JointKind] = field(init=False)
    joint_axes: np.ndarray = field(init=False)
    parents: np.ndarray = field(init=False)
    placement_rotations: np.ndarray = field(init=False)
    placement_translations: np.ndarray = field(init=False)
    _frames: dict[str, FrameInfo] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        model = self.model
        if model.nq != model.nv:
            raise UnsupportedJointError(
                f"robot {self.name!r}: nq={model.nq} != nv={model.nv}; only one-dof revolute and "
                "prismatic joints are supported"
            )
        self.gravity = np.asarray(self.gravity, dtype=np.float64).reshape(3).copy()
        model.gravity = pin.Motion(self.gravity, np.zeros(3))
        kinds, axes, parents, rots, trans = [], [], [], [], []
        for jid in range(1, model.njoints):
            joint = model.joints[jid]
            jname = model.names[jid]
            short = joint.shortname()
            if short not in _PIN_JOINT_KINDS:
                raise UnsupportedJointError(
                    f"robot {self.name!r}: joint {jname!r} has unsupported type {short}; "
                    "expected revolute, prismatic or fixed"
                )
            if joint.idx_v != jid - 1:
                raise UnsupportedJointError(
                    f"robot {self.name!r}: joint {jname!r} is not at velocity index {jid - 1}"
                )
            kind, axis = _PIN_JOINT_KINDS[short]
            if axis is None:
                axis = tuple(np.asarray(joint.extract().axis, dtype=np.float64).tolist())
            kinds.append(kind)
            axes.append(axis)
            parents.append(model.parents[jid] - 1)
            placement = model.jointPlacements[jid]
            rots.append(np.array(placement.rotation))
            trans.append(np.array(placement.translation))
        self.joint_names = [str(n) for n in list(model.names)[1:]]
        self.nq = model.nq
        self.nv = model.nv
        self.joint_kinds = kinds
        self.joint_axes = np.asarray(axes, dtype=np.float64).reshape(self.nv, 3)
        self.parents = np.asarray(parents, dtype=np.int64)
        self.placement_rotations = np.asarray(rots, dtype=np.float64).reshape(self.nv, 3, 3)
        self.placement_translations = np.asarray(trans, dtype=np.float64).reshape(self.nv, 3)
        self._frames = {}
        for frame in model.frames:
            if frame.name in self._frames:
                continue
            self._frames[frame.name] = FrameInfo(
                name=frame.name,
                parent=int(frame.parentJoint) - 1,
                rotation=np.array(frame.placement.rotation),
                translation=np.array(frame.placement.translation),
            )
        self.body_names = [self._body_of_joint(jid) for jid in range(1, model.njoints)]

    def _body_of_joint(self, jid: int) -> str:
        for frame in self.model.frames:
            if frame.type == pin.FrameType.BODY and frame.parentJoint == jid:
                return str(frame.name)
        return str(self.model.names[jid])

    @classmethod
    def from_urdf(
        cls,
        source: str | Path,
        *,
        name: str | None = None,
        locked_joints: Mapping[str, float] | None = None,
        gravity: Sequence[float] = (0.0, 0.0, -9.81),
    ) -> RobotModel:
        """Load a URDF from a file path or an XML string (e.g. a ``robot_description``).

        Args:
            source: path to a ``.urdf`` file, or the URDF XML itself (a string starting with
                ``<``).
            name: robot name; defaults to the URDF's ``<robot name=...>``.
            locked_joints: joints to lock at the given position (rad or m), e.g. fingers.
            gravity: [3] world gravity (m/s²).

        Raises:
            UrdfError: unreadable or malformed XML, a moving link without ``<inertial>``, or an
                inertial that is not physical (see :func:`_check_inertials`), naming the link.
            UnsupportedJointError: a joint type other than revolute/continuous/prismatic/fixed, or
                an unlocked mimic joint.
            UnknownJointError: a locked joint name that the URDF does not have.
        """
        xml, origin = _read_source(source)
        root = parse_urdf_xml(xml, origin)
        _check_inertials(root, origin)
        _check_and_normalise(root, origin, set(locked_joints or {}))
        try:
            model = pin.buildModelFromXML(tostring(root, encoding="unicode"))
        except (RuntimeError, ValueError) as exc:
            raise UrdfError(f"{origin}: Pinocchio could not build the model: {exc}") from exc
        if locked_joints:
            model = _lock_joints(model, locked_joints, origin)
        return cls(name=name or root.get("name", "robot"), model=model, gravity=np.asarray(gravity))

    def frame_id(self, name: str) -> int:
        """Pinocchio frame index of ``name`` (link, joint or operational frame)."""
        if not self.model.existFrame(name):
            raise UnknownFrameError(
                f"robot {self.name!r} has no frame {name!r}; frames: {sorted(self._frames)}"
            )
        return int(self.model.getFrameId(name))

    def frame(self, name: str) -> FrameInfo:
        """Parent joint and fixed placement of frame ``name``."""
        try:
            return self._frames[name]
        except KeyError:
            raise UnknownFrameError(
                f"robot {self.name!r} has no frame {name!r}; frames: {sorted(self._frames)}"
            ) from None

    @property
    def frame_names(self) -> list[str]:
        """All frame names of the model, in Pinocchio order (first occurrence)."""
        return list(self._frames)

    def joint_index(self, name: str) -> int:
        """Index of movable joint ``name`` into q and v."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise UnknownJointError(
                f"robot {self.name!r} has no movable joint {name!r}; joints: {self.joint_names}"
            ) from None

    def body_index(self, link: str) -> int:
        """Index (into q/v order) of the movable joint that carries link ``link``."""
        try:
            return self.body_names.index(link)
        except ValueError:
            raise UnknownFrameError(
                f"robot {self.name!r} has no moving link {link!r}; links: {self.body_names}"
            ) from None

    @property
    def resolvers(self) -> dict[str, ParameterResolver]:
        """Parameter-name prefix → resolver of attachment parameters (none on a bare robot)."""
        return {}

    def nominal_inertia(self) -> np.ndarray:
        """[nv, 10] nominal dynamic parameters per moving body.

        Pinocchio order (m, m·c_x, m·c_y, m·c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz), SI units,
        expressed in the joint frame about its origin.
        """
        return np.stack(
            [
                np.asarray(self.model.inertias[j].toDynamicParameters()).reshape(10)
                for j in range(1, self.model.njoints)
            ]
        )

    def replace(
        self, model: pin.Model, joint_names: Sequence[str] | None = None, *, name: str | None = None
    ) -> RobotModel:
        """A new robot around ``model`` with this robot's gravity (``self`` is untouched).

        Args:
            model: the new Pinocchio model (e.g. with an attached object and extra joints).
            joint_names: expected movable joints of ``model`` in q/v order, checked if given.
            name: name of the new robot; defaults to this robot's.
        """
        robot = RobotModel(name=name or self.name, model=model, gravity=self.gravity.copy())
        if joint_names is not None and list(joint_names) != robot.joint_names:
            raise UnknownJointError(
                f"robot {robot.name!r}: joint names {list(joint_names)} do not match the model's "
                f"movable joints {robot.joint_names}"
            )
        return robot

    def neutral(self) -> np.ndarray:
        """[nq] neutral configuration (zeros for revolute and prismatic joints)."""
        return np.asarray(pin.neutral(self.model), dtype=np.float64)


def _read_source(source: str | Path) -> tuple[str, str]:
    """Return (xml text, description of where it came from)."""
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return source, "robot_description string"
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except OSError as exc:
        raise UrdfError(f"cannot read URDF file {path}: {exc}") from exc


def parse_urdf_xml(xml: str, origin: str) -> Element:
    """The ``<robot>`` root of URDF text, parsed without entity expansion or external
    references (``defusedxml``).

    Raises:
        UrdfError: not well-formed or unsafe XML, or a root other than ``<robot>``, the message
            starting with ``origin`` (a file name, or ``"URDF"``).
    """
    try:
        root = SafeET.fromstring(xml)
    except (SafeET.ParseError, DefusedXmlException) as exc:
        raise UrdfError(f"{origin}: not a safe, well-formed XML document: {exc}") from exc
    if root.tag != "robot":
        raise UrdfError(f"{origin}: root element is <{root.tag}>, expected <robot>")
    return root


def _number(text: str | None) -> float | None:
    """A finite decimal number, or ``None`` (``nan``, ``inf``, ``nan7.9e-02``, ``""``, ...)."""
    if text is None or not _NUMBER.fullmatch(text.strip()):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _check_inertials(root: Element, origin: str) -> None:
    """Refuse, naming the link, any ``<inertial>`` that is not a physical rigid body.

    Every number must be finite; the mass positive, its rotational inertia about the centre of
    mass positive semi-definite and its principal moments A, B, C must satisfy the triangle
    inequality A + B >= C (to ``_TRIANGLE_RTOL``). Zero moments are idealisations dynid itself
    writes (a point-mass payload, a thin rod) and are accepted; so is a mass of 0 with all-zero
    inertia, a massless frame (a flange or TCP link).
    """
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        where = f"{origin}: link {link.get('name')!r}: <inertial>"
        pose = inertial.find("origin")
        for attr in ("xyz", "rpy"):
            text = None if pose is None else pose.get(attr)
            if text is not None:
                parts = text.split()
                if len(parts) != 3 or any(_number(x) is None for x in parts):
                    raise UrdfError(f"{where} origin {attr}={text!r} is not three finite numbers")
        mass_el = inertial.find("mass")
        if mass_el is None:
            raise UrdfError(f"{where} has no <mass>")
        mass = _number(mass_el.get("value"))
        if mass is None:
            raise UrdfError(f"{where} mass value={mass_el.get('value')!r} is not a finite number")
        if mass < 0:
            raise UrdfError(f"{where} mass {mass:g} kg is negative")
        inertia_el = inertial.find("inertia")
        if inertia_el is None:
            if mass == 0:
                continue
            raise UrdfError(f"{where} has no <inertia>")
        values = {}
        for attr in _INERTIA_ATTRS:
            value = _number(inertia_el.get(attr))
            if value is None:
                raise UrdfError(
                    f"{where} inertia {attr}={inertia_el.get(attr)!r} is not a finite number"
                )
            values[attr] = value
        ixx, ixy, ixz, iyy, iyz, izz = (values[a] for a in _INERTIA_ATTRS)
        matrix = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        if mass == 0:
            if np.any(matrix):
                raise UrdfError(f"{where} mass is 0 kg but the inertia is not zero")
            continue
        moments = np.linalg.eigvalsh(matrix)  # ascending
        shown = ", ".join(f"{x:.6g}" for x in moments)
        slack = _INERTIA_ATOL + 1e-9 * abs(moments[2])  # rounding of a zero moment
        if moments[0] < -slack:
            raise UrdfError(
                f"{where} inertia is not positive semi-definite (principal moments [{shown}] kg·m²)"
            )
        if moments[0] + moments[1] < moments[2] * (1 - _TRIANGLE_RTOL) - slack:
            raise UrdfError(
                f"{where} inertia violates the triangle inequality A + B >= C of a rigid body "
                f"(principal moments [{shown}] kg·m²)"
            )


def _check_and_normalise(root: Element, origin: str, locked: set[str]) -> None:
    """Check joint types, inertials and mimics; turn continuous joints into revolute ones."""
    links = {link.get("name"): link for link in root.findall("link")}
    for joint in root.findall("joint"):
        jname = joint.get("name")
        jtype = joint.get("type")
        if jtype not in _URDF_JOINT_TYPES:
            raise UnsupportedJointError(
                f"{origin}: joint {jname!r} has unsupported type {jtype!r}; expected one of "
                f"{sorted(_URDF_JOINT_TYPES)}"
            )
        if jtype == "fixed":
            continue
        if joint.find("mimic") is not None and jname not in locked:
            raise UnsupportedJointError(
                f"{origin}: joint {jname!r} is a mimic joint; lock it (locked_joints) or model it "
                "as an independent joint"
            )
        child = joint.find("child")
        child_name = child.get("link") if child is not None else None
        link = links.get(child_name)
        if link is None:
            raise UrdfError(f"{origin}: joint {jname!r} names unknown child link {child_name!r}")
        if link.find("inertial") is None and jname not in locked:
            raise UrdfError(
                f"{origin}: link {child_name!r} (moved by joint {jname!r}) has no <inertial>"
            )
        if jtype == "continuous":
            joint.set("type", "revolute")
            limit = joint.find("limit")
            if limit is None:
                limit = Element("limit", {"effort": "1e9", "velocity": "1e9"})
                joint.append(limit)
            limit.set("lower", str(-_CONTINUOUS_LIMIT))
            limit.set("upper", str(_CONTINUOUS_LIMIT))


def _lock_joints(model: pin.Model, locked: Mapping[str, float], origin: str) -> pin.Model:
    q_ref = pin.neutral(model)
    ids = []
    for jname, value in locked.items():
        if not model.existJointName(jname):
            raise UnknownJointError(
                f"{origin}: cannot lock joint {jname!r}; joints: {list(model.names)[1:]}"
            )
        jid = model.getJointId(jname)
        if model.joints[jid].nq != 1:
            raise UnsupportedJointError(f"{origin}: cannot lock multi-dof joint {jname!r}")
        q_ref[model.joints[jid].idx_q] = float(value)
        ids.append(jid)
    return pin.buildReducedModel(model, sorted(ids), q_ref)


def urdf_path(filename: str) -> Path:
    """Path of one of dynid's own URDFs (``dynid/model/urdf/<filename>``)."""
    path = _URDF_DIR / filename
    if not path.is_file():
        raise UrdfError(f"dynid has no URDF {filename!r} in {_URDF_DIR}")
    return path


def example_robot_data_urdf(relative: str) -> Path:
    """Locate a URDF shipped by the ``example-robot-data`` wheel (not copied into dynid) by the
    end of its path, e.g. ``"ur_description/urdf/ur5_robot.urdf"``.

    Raises:
        UrdfError: the package is not installed or has no such file.
    """
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError as exc:
        raise UrdfError("the example-robot-data package is not installed") from exc
    for file in dist.files or []:
        if str(file).endswith(relative):
            return Path(str(dist.locate_file(file)))
    raise UrdfError(f"example-robot-data has no file ending in {relative!r}")


_PANDA_URDF = "panda_description/urdf/panda.urdf"


def _load_panda(**kwargs: Any) -> RobotModel:
    kwargs.setdefault("locked_joints", {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})
    kwargs.setdefault("name", "panda")
    return RobotModel.from_urdf(example_robot_data_urdf(_PANDA_URDF), **kwargs)


def _own_robot(filename: str, default_name: str) -> Callable[..., RobotModel]:
    def load(**kwargs: Any) -> RobotModel:
        kwargs.setdefault("name", default_name)
        return RobotModel.from_urdf(urdf_path(filename), **kwargs)

    return load


_ROBOTS = {
    "panda": _load_panda,
    "open_manipulator_x": _own_robot("open_manipulator_x.urdf", "open_manipulator_x"),
    "double_pendulum": _own_robot("double_pendulum.urdf", "double_pendulum"),
    "furuta": _own_robot("furuta.urdf", "furuta"),
    "planar_dice": _own_robot("planar_dice.urdf", "planar_dice"),
}


def available_robots() -> list[str]:
    """Names accepted by :func:`load_robot`."""
    return sorted(_ROBOTS)


def load_robot(name: str, **kwargs: Any) -> RobotModel:
    """Load a known robot by name.

    ``"panda"`` (example-robot-data, fingers locked at 0), ``"open_manipulator_x"``,
    ``"double_pendulum"`` (csvgd paper V-A, link lengths 1.5 m and 2.0 m), ``"furuta"`` (lm paper
    §4.3/4.6), ``"planar_dice"`` (the residual-contact paper's square, joints ``x, z, theta``).
    Keyword arguments go to :meth:`RobotModel.from_urdf` (``locked_joints``,
    ``gravity``, ``name``).
    """
    try:
        loader = _ROBOTS[name]
    except KeyError:
        raise UrdfError(f"unknown robot {name!r}; known robots: {available_robots()}") from None
    return loader(**kwargs)


def robot_urdf(name: str) -> Path:
    """Path of the URDF that ``load_robot(name)`` builds the robot from.

    Raises:
        UrdfError: ``name`` is not a known robot, or its URDF cannot be found.
    """
    if name not in _ROBOTS:
        raise UrdfError(f"unknown robot {name!r}; known robots: {available_robots()}")
    if name == "panda":
        return example_robot_data_urdf(_PANDA_URDF)
    return urdf_path(f"{name}.urdf")
