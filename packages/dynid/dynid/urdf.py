"""Write identified parameters back into URDF XML (an identified ``robot_description``).

:func:`apply_parameters` takes a URDF (parsed with ``defusedxml``), a ``{name: value}`` mapping in
dynid's parameter names and optionally the :class:`~dynid.model.robot.RobotModel` the names refer
to (with its attachments), and returns the updated XML with the names it applied and ignored:

- ``<link>/mass|com_x|com_y|com_z|ixx|…|izz``, ``<link>/log_cholesky_0..9`` and ``<link>/length``
  change the link's ``<inertial>``. Dynid's link parameters describe the whole moving body, i.e.
  the link with every link fixed to it (Pinocchio merges them), so the change of the body's
  dynamic parameters is written into the named link and the fixed links keep theirs — unless the
  named link would then not be a physical body (the identified body is lighter than the links
  fixed to it, e.g. a hand the recording did not carry): then the named link takes the whole
  identified body and the links fixed to it a negligible inertial (1e-9 kg), noted in ``notes``.
  The inertial is written with ``rpy="0 0 0"`` and the inertia about the centre of mass in link
  axes.
- ``<joint>/damping`` and ``<joint>/coulomb`` become ``<dynamics damping=… friction=…>``.
- ``<link>/length`` and ``<joint>/offset_x|y|z`` move the joint ``<origin>`` of a joint whose
  parent link carries the moving body directly.
- attachments (``box/*``, ``payload/*``, ``sphere/*``) appear as URDF elements: every movable
  joint of the model that the URDF lacks (a universal joint, a sphere's slides) is added with its
  child link, and a payload becomes a link on a fixed joint; their inertials carry the identified
  values.
- names without a URDF counterpart (``armature``, ``motor_gain``, Stribeck terms, gravity,
  contact constants) are listed in ``ignored``.

Units are SI (kg, m, kg·m², N·m·s/rad, N·m).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element, SubElement, tostring

import numpy as np
import pinocchio as pin
import torch

from dynid.errors import DynidError
from dynid.model.attachments import AttachedRobot, Payload
from dynid.model.errors import ModelError, UrdfError
from dynid.model.params import DynamicParameters, Parameter, ParameterSpec, nominal_parameters
from dynid.model.robot import JointKind, RobotModel, parse_urdf_xml

__all__ = ["UrdfUpdate", "UrdfWriteError", "apply_parameters"]

_INERTIAL_FIELDS = {
    "mass",
    "com_x",
    "com_y",
    "com_z",
    "ixx",
    "iyy",
    "izz",
    "ixy",
    "ixz",
    "iyz",
    "length",
    *(f"log_cholesky_{k}" for k in range(10)),
}
_DYNAMICS_FIELDS = {"damping": "damping", "coulomb": "friction"}
_OFFSET_FIELDS = {"offset_x", "offset_y", "offset_z"}


class UrdfWriteError(DynidError, ValueError):
    """The URDF or the parameter values cannot be combined (names the element or parameter)."""


@dataclass
class UrdfUpdate:
    """Result of :func:`apply_parameters`.

    Attributes:
        xml: the updated URDF.
        applied: parameter names written into the URDF.
        ignored: parameter names without a URDF counterpart, with the reason in ``reasons``.
        added: names of links and joints added for bodies the URDF lacked.
        reasons: parameter name → why it was ignored.
        notes: other changes than the parameters' own (links emptied, see the module notes).
    """

    xml: str
    applied: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _fmt(x: float) -> str:
    return f"{float(x):.12g}"


def _vec(values: np.ndarray) -> str:
    return " ".join(_fmt(v) for v in values)


def _parse(urdf_xml: str) -> Element:
    try:
        return parse_urdf_xml(urdf_xml, "URDF")
    except UrdfError as exc:
        raise UrdfWriteError(str(exc)) from exc


def _floats(text: str | None, count: int, default: float, where: str) -> np.ndarray:
    if text is None:
        return np.full(count, default)
    try:
        values = np.array([float(x) for x in text.split()], dtype=np.float64)
    except ValueError:
        raise UrdfWriteError(f"{where}: cannot read numbers from {text!r}") from None
    if values.shape != (count,):
        raise UrdfWriteError(f"{where}: expected {count} numbers, got {text!r}")
    return values


def _own_inertia(link: Element) -> np.ndarray:
    """``[10]`` dynamic parameters of a URDF link's own ``<inertial>`` in the link frame."""
    inertial = link.find("inertial")
    name = link.get("name")
    if inertial is None:
        return np.zeros(10)
    origin = inertial.find("origin")
    xyz = _floats(None if origin is None else origin.get("xyz"), 3, 0.0, f"link {name!r} origin")
    rpy = _floats(None if origin is None else origin.get("rpy"), 3, 0.0, f"link {name!r} origin")
    mass_el = inertial.find("mass")
    mass = float(mass_el.get("value", "0")) if mass_el is not None else 0.0
    tensor = inertial.find("inertia")
    keys = ("ixx", "ixy", "iyy", "ixz", "iyz", "izz")
    i6 = [float(tensor.get(k, "0")) if tensor is not None else 0.0 for k in keys]
    inertia = np.array([[i6[0], i6[1], i6[3]], [i6[1], i6[2], i6[4]], [i6[3], i6[4], i6[5]]])
    R = pin.rpy.rpyToMatrix(*rpy)
    body = pin.Inertia(mass, xyz, R @ inertia @ R.T)
    return np.asarray(body.toDynamicParameters(), dtype=np.float64).reshape(10)


_NEGLIGIBLE = np.array([1e-9, 0.0, 0.0, 0.0, 1e-12, 0.0, 1e-12, 0.0, 0.0, 1e-12])
"""Dynamic parameters of a negligible body (the URDF checks want a positive mass)."""


def _physical(pi: np.ndarray) -> bool:
    """Whether ``pi [10]`` is a physically consistent body (pseudo-inertia positive definite)."""
    m, h, i6 = pi[0], pi[1:4], pi[4:10]
    inertia = np.array([[i6[0], i6[1], i6[3]], [i6[1], i6[2], i6[4]], [i6[3], i6[4], i6[5]]])
    sigma = 0.5 * np.trace(inertia) * np.eye(3) - inertia
    pseudo = np.block([[sigma, h[:, None]], [h[None, :], np.array([[m]])]])
    return bool(m > 0.0 and np.linalg.eigvalsh(pseudo)[0] > 0.0)


def _write_inertial(link: Element, pi: np.ndarray) -> None:
    """Replace ``link``'s ``<inertial>`` by the body with dynamic parameters ``pi [10]``."""
    mass = float(pi[0])
    if mass > 0.0:
        body = pin.Inertia.FromDynamicParameters(np.asarray(pi, dtype=np.float64))
        com, inertia = np.asarray(body.lever), np.asarray(body.inertia)
    else:
        com, inertia = np.zeros(3), np.zeros((3, 3))
    old = link.find("inertial")
    if old is not None:
        link.remove(old)
    inertial = Element("inertial")
    link.insert(0, inertial)
    SubElement(inertial, "origin", {"xyz": _vec(com), "rpy": "0 0 0"})
    SubElement(inertial, "mass", {"value": _fmt(mass)})
    SubElement(
        inertial,
        "inertia",
        {
            "ixx": _fmt(inertia[0, 0]),
            "ixy": _fmt(inertia[0, 1]),
            "ixz": _fmt(inertia[0, 2]),
            "iyy": _fmt(inertia[1, 1]),
            "iyz": _fmt(inertia[1, 2]),
            "izz": _fmt(inertia[2, 2]),
        },
    )


def _set_dynamics(joint: Element, attribute: str, value: float) -> None:
    dynamics = joint.find("dynamics")
    if dynamics is None:
        dynamics = SubElement(joint, "dynamics")
    dynamics.set(attribute, _fmt(value))


def _set_origin(element: Element, translation: np.ndarray, rotation: np.ndarray | None) -> None:
    origin = element.find("origin")
    if origin is None:
        origin = SubElement(element, "origin")
    origin.set("xyz", _vec(translation))
    if rotation is not None:
        origin.set("rpy", _vec(pin.rpy.matrixToRpy(rotation)))


class _Writer:
    """State of one :func:`apply_parameters` call."""

    def __init__(self, root: Element, robot: RobotModel, values: Mapping[str, float]) -> None:
        self.root = root
        self.robot = robot
        self.values = dict(values)
        self.links = {link.get("name"): link for link in root.findall("link")}
        self.joints = {joint.get("name"): joint for joint in root.findall("joint")}
        self.update = UrdfUpdate(xml="")
        self.base = nominal_parameters(robot)

    def ignore(self, name: str, reason: str) -> None:
        self.update.ignored.append(name)
        self.update.reasons[name] = reason

    def apply(self, names: list[str]) -> DynamicParameters:
        """Dynamic parameters with ``names`` set to their values (others nominal)."""
        if not names:
            return self.base
        spec = ParameterSpec(
            [Parameter(n, self.values[n] - 1.0, self.values[n] + 1.0) for n in names]
        )
        theta = torch.tensor([[self.values[n] for n in names]], dtype=torch.float64)
        try:
            return spec.apply(self.robot, theta)
        except ModelError as exc:
            raise UrdfWriteError(f"cannot apply parameters {names}: {exc}") from exc

    def classify(self) -> tuple[list[str], list[str]]:
        """Split names into (link/joint names of the URDF, attachment names, rest)."""
        robot = self.robot
        own, attached = [], []
        for name in self.values:
            prefix, _, fld = name.rpartition("/")
            if prefix in robot.resolvers:
                attached.append(name)
            elif prefix in robot.body_names and fld in _INERTIAL_FIELDS:
                if prefix in self.links:
                    own.append(name)
                else:
                    attached.append(name)
            elif prefix in robot.joint_names and fld in _DYNAMICS_FIELDS:
                (own if prefix in self.joints else attached).append(name)
            elif prefix in robot.joint_names and fld in _OFFSET_FIELDS:
                own.append(name)
            else:
                self.ignore(name, "no URDF element holds this quantity")
        return own, attached

    def write_links(self, own: list[str]) -> None:
        """Inertials, joint origins and joint dynamics of links and joints the URDF has."""
        p = self.apply(own)
        touched: set[int] = set()
        for name in own:
            prefix, _, fld = name.rpartition("/")
            if prefix in self.robot.body_names and fld in _INERTIAL_FIELDS:
                touched.add(self.robot.body_index(prefix))
                if fld == "length":
                    self._write_child_origins(self.robot.body_index(prefix), p)
            elif fld in _DYNAMICS_FIELDS:
                _set_dynamics(self.joints[prefix], _DYNAMICS_FIELDS[fld], self.values[name])
            elif not self._write_origin(self.robot.joint_index(prefix), p):
                self.ignore(name, "the joint's parent link is not the moving body's own link")
                continue
            self.update.applied.append(name)
        for b in sorted(touched):
            link_name = self.robot.body_names[b]
            if link_name not in self.links:
                continue
            delta = (p.inertia[0, b] - self.base.inertia[0, b]).numpy()
            own = _own_inertia(self.links[link_name]) + delta
            fixed = self._fixed_descendants(link_name)
            if fixed and not _physical(own):
                own = p.inertia[0, b].numpy()
                for child in fixed:
                    _write_inertial(self.links[child], _NEGLIGIBLE)
                self.update.notes.append(
                    f"{link_name} takes the whole identified body and {fixed} a negligible "
                    "inertial: the identified body is lighter than the links fixed to it"
                )
            _write_inertial(self.links[link_name], own)

    def _fixed_descendants(self, link: str) -> list[str]:
        """Links attached to ``link`` by fixed or locked joints, recursively (the links Pinocchio
        merges into its body)."""
        out, stack = [], [link]
        while stack:
            parent = stack.pop()
            for name, joint in self.joints.items():
                parent_el, child_el = joint.find("parent"), joint.find("child")
                merged = joint.get("type") == "fixed" or name not in self.robot.joint_names
                if (merged and parent_el is not None and child_el is not None
                        and parent_el.get("link") == parent):  # fmt: skip
                    child = str(child_el.get("link"))
                    if child in self.links:
                        out.append(child)
                        stack.append(child)
        return out

    def _write_child_origins(self, b: int, p: DynamicParameters) -> None:
        for c in np.nonzero(self.robot.parents == b)[0]:
            self._write_origin(int(c), p)

    def _write_origin(self, j: int, p: DynamicParameters) -> bool:
        joint = self.joints.get(self.robot.joint_names[j])
        parent = joint.find("parent") if joint is not None else None
        parent_index = int(self.robot.parents[j])
        parent_link = self.robot.body_names[parent_index] if parent_index >= 0 else None
        if joint is None or parent is None or parent.get("link") != parent_link:
            return False
        _set_origin(joint, p.joint_translation[0, j].numpy(), None)
        return True

    def write_attachments(self, attached: list[str]) -> None:
        """Links and joints for the robot's bodies the URDF lacks, with identified values."""
        p = self.apply(attached)
        robot = self.robot
        for j, joint_name in enumerate(robot.joint_names):
            if joint_name not in self.joints:
                self._add_joint(j, p)
        if isinstance(robot, AttachedRobot):
            for attachment in robot.attachments:
                if isinstance(attachment, Payload):
                    self._add_payload(attachment)
        for name in attached:
            if name not in self.update.ignored:
                self.update.applied.append(name)

    def _link_of(self, j: int) -> str:
        body = self.robot.body_names[j]
        return body if body != self.robot.joint_names[j] else f"{body}_link"

    def _add_joint(self, j: int, p: DynamicParameters) -> None:
        robot = self.robot
        name = robot.joint_names[j]
        parent_index = int(robot.parents[j])
        if parent_index < 0:
            raise UrdfWriteError(f"joint {name!r} is not in the URDF and hangs from the base")
        parent = self._link_of(parent_index)
        if parent not in self.links:
            raise UrdfWriteError(f"joint {name!r}: its parent link {parent!r} is not in the URDF")
        child = self._link_of(j)
        kind = "revolute" if robot.joint_kinds[j] is JointKind.REVOLUTE else "prismatic"
        joint = SubElement(self.root, "joint", {"name": name, "type": kind})
        SubElement(joint, "parent", {"link": parent})
        SubElement(joint, "child", {"link": child})
        _set_origin(joint, p.joint_translation[0, j].numpy(), robot.placement_rotations[j])
        SubElement(joint, "axis", {"xyz": _vec(robot.joint_axes[j])})
        lower, upper = robot.model.lowerPositionLimit[j], robot.model.upperPositionLimit[j]
        limit = {"effort": "1e9", "velocity": "1e9"}
        if np.isfinite(lower) and np.isfinite(upper):
            limit.update(lower=_fmt(lower), upper=_fmt(upper))
        else:
            limit.update(lower="-1e4", upper="1e4")
        SubElement(joint, "limit", limit)
        SubElement(
            joint,
            "dynamics",
            {"damping": _fmt(p.damping[0, j]), "friction": _fmt(p.coulomb[0, j])},
        )
        link = self.links.get(child)
        if link is None:
            link = SubElement(self.root, "link", {"name": child})
            self.links[child] = link
            self.update.added.append(child)
        _write_inertial(link, p.inertia[0, j].numpy())
        self.joints[name] = joint
        self.update.added.append(name)

    def _add_payload(self, payload: Payload) -> None:
        values = payload.nominal_values()
        values.update({k: v for k, v in self.values.items() if k in values})
        prefix = payload.name
        com = np.array([values[f"{prefix}/com_{a}"] for a in "xyz"])
        i6 = [values[f"{prefix}/{k}"] for k in ("ixx", "ixy", "iyy", "ixz", "iyz", "izz")]
        inertia = np.array([[i6[0], i6[1], i6[3]], [i6[1], i6[2], i6[4]], [i6[3], i6[4], i6[5]]])
        pi = pin.Inertia(values[f"{prefix}/mass"], com, inertia).toDynamicParameters()
        link_name = f"{prefix}_link" if prefix in self.links else prefix
        if payload.link not in self.links:
            raise UrdfWriteError(f"payload {prefix!r}: link {payload.link!r} is not in the URDF")
        link = self.links.get(link_name)
        if link is None:
            link = SubElement(self.root, "link", {"name": link_name})
            self.links[link_name] = link
            joint = SubElement(self.root, "joint", {"name": f"{prefix}_joint", "type": "fixed"})
            SubElement(joint, "parent", {"link": payload.link})
            SubElement(joint, "child", {"link": link_name})
            SubElement(joint, "origin", {"xyz": "0 0 0", "rpy": "0 0 0"})
            self.update.added += [link_name, f"{prefix}_joint"]
        _write_inertial(link, np.asarray(pi, dtype=np.float64).reshape(10))


def apply_parameters(
    urdf_xml: str, values: Mapping[str, float], robot: RobotModel | None = None
) -> UrdfUpdate:
    """The URDF ``urdf_xml`` with identified ``values`` written in (module docstring).

    Args:
        urdf_xml: the URDF document (e.g. a ``robot_description``).
        values: ``{parameter name: value}`` in SI units.
        robot: the model the names refer to, attachments included; default: the URDF itself
            (then attachment names are ignored).

    Returns:
        The updated XML and the names applied / ignored / the elements added.

    Raises:
        UrdfWriteError: malformed URDF, non-finite values, or a body that cannot be placed.
    """
    bad = sorted(k for k, v in values.items() if not np.isfinite(float(v)))
    if bad:
        raise UrdfWriteError(f"parameter values of {bad} are not finite")
    root = _parse(urdf_xml)
    if robot is None:
        try:
            robot = RobotModel.from_urdf(urdf_xml)
        except ModelError as exc:
            raise UrdfWriteError(
                f"cannot build a model from the URDF ({exc}); pass the robot the names refer to"
            ) from exc
    writer = _Writer(root, robot, values)
    own, attached = writer.classify()
    writer.write_links(own)
    writer.write_attachments(attached)
    writer.update.xml = tostring(root, encoding="unicode")
    return writer.update
