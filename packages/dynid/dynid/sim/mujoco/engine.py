"""MuJoCo as a second physics engine: an arm compiled from its URDF, tracked at 1 kHz and sensed.

Nothing of dynid's dynamics makes these data. The URDF is compiled by MuJoCo's own importer
(``mujoco.MjSpec.from_string``) after three edits of the XML: visual and collision elements are
dropped (no meshes are read, no contacts exist), the joints to lock become ``fixed``, and the
inertials and joint friction a scenario perturbs are written into it. Fixed links stay bodies of
their own (``fusestatic="false"``), so the flange a payload is welded to exists in the compiled
model; the payload is a body with its own mass, centre of mass and full inertia, without a joint,
under that link. URDF ``<dynamics damping>`` becomes MuJoCo's joint damping (viscous, N·m·s/rad)
and ``friction`` its ``frictionloss`` (dry friction, N·m). :func:`compile_arm` checks that every
compiled body carries the mass, centre of mass and inertia the URDF (and the payload) gave it.

Integration: MuJoCo's 4th-order Runge–Kutta (:data:`INTEGRATOR`) at :data:`TIMESTEP` = 0.5 ms,
two engine steps per 1 ms control period, with the control torque held over the period.

Control (:func:`track`), as a joint impedance controller of a torque-controlled arm runs it at
1 kHz on the measured joint state ``(q_m, q̇_m)``::

    τ = K_p (q_d − q_m) + K_d (q̇_d − q̇_m) + c(q_m, q̇_m)

with ``c`` MuJoCo's gravity, Coriolis and centrifugal torques (``qfrc_bias``) of the
controller's own model of the arm: the URDF's, *without* the payload or any perturbation the
scenario simulates (the controller was not told the load). Given the desired accelerations
``q̈_d`` the controller also feeds them forward through its model's mass matrix, ``+ M(q_m)
q̈_d`` (a trajectory-tracking controller: the feedback then only corrects the model's error
instead of producing the whole inertial torque from a tracking error). A torque beyond a joint's
URDF effort limit stops the run, as it stops a real arm.

Sensors (:class:`Sensors`), sampled every control period: positions on an encoder grid of
``encoder_ticks`` per revolution; velocities with Gaussian noise; joint torques = the torque on
the sensor's side of the joint plus Gaussian noise plus a constant offset per joint (a torque
sensor's bias). The side (``torque_side``) is where the sensor sits on the drive train:

* ``"motor"``: the applied (commanded) torque, as an arm that estimates joint torque from its
  motor currents reports it (a UR): the joint's friction is in the reading;
* ``"link"``: the torque the joint transmits to the link, as a joint torque sensor after the
  gearbox measures it (the Panda's and FR3's ``tau_J``): the applied torque less the joint's
  friction, MuJoCo's joint damping (``qfrc_damper``) and dry friction (the force of the joint's
  ``frictionloss`` row of the constraint solver), at the sample. While no joint is at a
  position limit it equals the rigid-body torque ``M(q) q̈ + c(q, q̇) + g(q)`` of the links
  and payload beyond the joint (MuJoCo's ``mj_rne`` with the sampled acceleration).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from xml.etree.ElementTree import Element, SubElement, tostring

import defusedxml.ElementTree as SafeET
import numpy as np
from defusedxml import DefusedXmlException

from dynid.sim.common import Array, SimulationError, quantize, time_grid

if TYPE_CHECKING:
    import mujoco

ENGINE = "mujoco"
#: MuJoCo integrator (``mjtIntegrator`` member name) and its step (s).
INTEGRATOR = "RK4"
TIMESTEP = 5e-4
#: Control and sampling period (s): 1 kHz, like the Franka and UR real-time interfaces.
CONTROL_PERIOD = 1e-3
#: The ``likelihood.effort_delay`` (s) of a fit of these recordings: each torque is held over
#: its control period, so it acts on average half a period after its stamp.
EFFORT_DELAY = CONTROL_PERIOD / 2
#: ``solref`` (time constant s, damping ratio) of every joint's dry-friction (``frictionloss``)
#: row: the stiffest time constant MuJoCo integrates stably, two steps. MuJoCo's default (0.02 s)
#: regularises the row into a viscous law up to a speed inversely proportional to the joint's
#: inertia (about 0.1 rad/s on a 0.006 kg·m² wrist joint, where the row's force is still 7 %
#: below ``frictionloss``): a property of the solver, not of a joint. With this one the row
#: holds the stated dry friction from about 0.01 rad/s on every joint.
FRICTION_SOLREF = (2 * TIMESTEP, 1.0)
#: Encoder resolution (ticks per revolution): 2²⁰, a 6.0e-6 rad grid. Coarser than anything the
#: real Panda recording of Gaz et al. 2019 (shared data ``panda-gaz2019``) shows: its positions
#: move in 1e-6 rad steps, the precision they were logged with.
ENCODER_TICKS = 2**20
#: Relative and absolute tolerance of :func:`check_inertials`: MuJoCo stores an inertia as its
#: principal moments and axes, which rebuild the URDF's tensor to rounding.
INERTIAL_RTOL = 1e-9
INERTIAL_ATOL = 1e-12


def load_mujoco() -> ModuleType:
    """The ``mujoco`` package, imported on first use of the engine.

    Raises:
        SimulationError: ``mujoco`` is not installed.
    """
    try:
        return importlib.import_module("mujoco")
    except ModuleNotFoundError:
        raise SimulationError(
            "engine 'mujoco' needs the mujoco package (pinned in requirements/constraints.txt)"
        ) from None


@dataclass(frozen=True)
class Inertial:
    """A rigid body's inertial: ``mass`` (kg), ``com [3]`` (m, in the link frame) and ``inertia
    [3, 3]`` (kg·m², about the centre of mass, link-frame axes)."""

    mass: float
    com: Array
    inertia: Array


@dataclass(frozen=True)
class JointFriction:
    """A joint's friction: ``damping`` (viscous, N·m·s/rad) and ``coulomb`` (dry, N·m)."""

    damping: float
    coulomb: float


@dataclass(frozen=True)
class Payload:
    """A rigid ``inertial`` welded to ``link`` (its frame is the link's frame)."""

    link: str
    inertial: Inertial


#: Where a joint torque sensor sits (:class:`Sensors`): ``motor`` reads the applied torque,
#: friction included; ``link`` the torque transmitted to the link, without the joint's friction.
TORQUE_SIDES = ("motor", "link")


@dataclass(frozen=True)
class Sensors:
    """Joint sensors: ``encoder_ticks`` per revolution, ``velocity_std`` (rad/s), ``torque_std``
    (N·m), ``torque_offset [n]`` (N·m, constant per joint) and ``torque_side`` (one of
    :data:`TORQUE_SIDES`, see the module docstring).

    Raises:
        SimulationError: ``torque_side`` is not one of :data:`TORQUE_SIDES`.
    """

    encoder_ticks: int
    velocity_std: float
    torque_std: float
    torque_offset: Array
    torque_side: str = "motor"

    def __post_init__(self) -> None:
        if self.torque_side not in TORQUE_SIDES:
            raise SimulationError(
                f"setting 'torque_side' must be one of {list(TORQUE_SIDES)}, got "
                f"{self.torque_side!r}"
            )

    def read_torque(self, sensed: Array, rng: np.random.Generator) -> Array:
        """What the torque sensors read of ``sensed [..., n]`` (N·m, on :attr:`torque_side`):
        plus the offset per joint and Gaussian noise of σ ``torque_std`` drawn from ``rng``."""
        return sensed + self.torque_offset + self.torque_std * rng.standard_normal(sensed.shape)


@dataclass(frozen=True)
class Recording:
    """What one run produced, ``[T, n]`` per joint at the sample times ``t [T]`` (s).

    ``q, v, acc``: the engine's true positions (rad), velocities (rad/s) and accelerations
    (rad/s²) at the sample; ``tau``: the torque applied over the following control period (N·m);
    ``q_measured, v_measured, tau_measured``: what the sensors read at the sample (the torque on
    the sensors' ``torque_side``, with noise and offset).
    """

    t: Array
    q: Array
    v: Array
    acc: Array
    tau: Array
    q_measured: Array
    v_measured: Array
    tau_measured: Array


def read_urdf(path: str | Path) -> Element:
    """The root ``<robot>`` element of the URDF at ``path`` (parsed with ``defusedxml``).

    Raises:
        SimulationError: the file cannot be read or is not a URDF.
    """
    try:
        root = SafeET.parse(str(path)).getroot()
    except (OSError, SafeET.ParseError, DefusedXmlException) as exc:
        raise SimulationError(f"URDF {path}: cannot be read ({exc})") from None
    if root.tag != "robot":
        raise SimulationError(f"URDF {path}: root element is <{root.tag}>, expected <robot>")
    return root


def _vector(element: Element | None, key: str) -> Array:
    """The 3-vector attribute ``key`` of ``element`` (zeros when absent)."""
    text = None if element is None else element.get(key)
    return np.zeros(3) if text is None else np.array([float(x) for x in text.split()])


def _rpy_matrix(rpy: Array) -> Array:
    """URDF's fixed-axis roll-pitch-yaw as a rotation matrix, ``R = Rz(y) Ry(p) Rx(r)``."""
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])  # fmt: skip


def urdf_inertials(root: Element) -> dict[str, Inertial]:
    """Inertial of every link with an ``<inertial>`` element, by link name, in the link frame."""
    out = {}
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin = inertial.find("origin")
        tensor = inertial.find("inertia")
        mass = inertial.find("mass")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        xx, xy, xz, yy, yz, zz = (
            0.0 if tensor is None else float(tensor.get(k, 0.0)) for k in keys
        )
        local = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
        rotation = _rpy_matrix(_vector(origin, "rpy"))
        out[link.get("name", "")] = Inertial(
            mass=0.0 if mass is None else float(mass.get("value", 0.0)),
            com=_vector(origin, "xyz"),
            inertia=rotation @ local @ rotation.T,
        )
    return out


def urdf_joint_limits(root: Element, joints: Sequence[str]) -> tuple[Array, Array, Array, Array]:
    """Lower and upper position limits (rad), velocity limits (rad/s) and effort limits (N·m)
    ``[n]`` of ``joints`` from their URDF ``<limit>`` elements.

    Raises:
        SimulationError: a joint is missing or has no ``<limit>`` with all four attributes.
    """
    by_name = {j.get("name"): j for j in root.findall("joint")}
    rows = []
    for name in joints:
        limit = by_name[name].find("limit") if name in by_name else None
        keys = ("lower", "upper", "velocity", "effort")
        if limit is None or any(limit.get(k) is None for k in keys):
            raise SimulationError(f"URDF joint {name!r}: expected a <limit> with {list(keys)}")
        rows.append([float(limit.get(k, "nan")) for k in keys])
    lower, upper, velocity, effort = np.array(rows).T
    return lower, upper, velocity, effort


def urdf_joint_friction(root: Element, joints: Sequence[str]) -> dict[str, JointFriction]:
    """The friction of ``joints`` as their URDF ``<dynamics damping friction>`` gives it (0 where
    an attribute or the element is absent), by joint name.

    Raises:
        SimulationError: a joint is not in the URDF.
    """
    by_name = {j.get("name"): j for j in root.findall("joint")}
    out = {}
    for name in joints:
        dynamics = _named(by_name, name, "joint").find("dynamics")
        values = {} if dynamics is None else dynamics.attrib
        out[name] = JointFriction(float(values.get("damping", 0.0)),
                                  float(values.get("friction", 0.0)))  # fmt: skip
    return out


def prepared_urdf(
    root: Element,
    *,
    locked: Sequence[str] = (),
    inertials: Mapping[str, Inertial] | None = None,
    friction: Mapping[str, JointFriction] | None = None,
) -> Element:
    """A copy of the URDF ``root`` ready for MuJoCo's importer.

    Visual and collision elements are removed, the ``locked`` joints become ``fixed`` (at their
    zero position), the links in ``inertials`` get those inertials (centre of mass as the
    ``<inertial>`` origin, no rotation) and the joints in ``friction`` that ``<dynamics>``; a
    ``<mujoco><compiler>`` element keeps fixed links as bodies and every inertia as given.

    Raises:
        SimulationError: a named link or joint is not in the URDF.
    """
    root = SafeET.fromstring(tostring(root, encoding="unicode"))
    links = {link.get("name"): link for link in root.findall("link")}
    joints = {joint.get("name"): joint for joint in root.findall("joint")}
    for link in links.values():
        for tag in ("visual", "collision"):
            for element in link.findall(tag):
                link.remove(element)
    for name in locked:
        _named(joints, name, "joint").set("type", "fixed")
    for name, inertial in (inertials or {}).items():
        link = _named(links, name, "link")
        for element in link.findall("inertial"):
            link.remove(element)
        element = SubElement(link, "inertial")
        SubElement(element, "origin", xyz=" ".join(_text(c) for c in inertial.com), rpy="0 0 0")
        SubElement(element, "mass", value=_text(inertial.mass))
        i = inertial.inertia
        SubElement(element, "inertia", ixx=_text(i[0, 0]), ixy=_text(i[0, 1]), ixz=_text(i[0, 2]),
                   iyy=_text(i[1, 1]), iyz=_text(i[1, 2]), izz=_text(i[2, 2]))  # fmt: skip
    for name, value in (friction or {}).items():
        joint = _named(joints, name, "joint")
        for element in joint.findall("dynamics"):
            joint.remove(element)
        SubElement(joint, "dynamics", damping=_text(value.damping), friction=_text(value.coulomb))
    extension = SubElement(root, "mujoco")
    SubElement(extension, "compiler", fusestatic="false", discardvisual="true",
               balanceinertia="false", inertiafromgeom="false")  # fmt: skip
    return root


def _text(value: float) -> str:
    """``value`` as URDF text that reads back to the same double."""
    return repr(float(value))


def _named(elements: Mapping[str | None, Element], name: str, kind: str) -> Element:
    if name not in elements:
        known = sorted(str(k) for k in elements)
        raise SimulationError(f"URDF has no {kind} {name!r}; its {kind}s: {known}")
    return elements[name]


def compile_arm(urdf: Element, payload: Payload | None = None) -> mujoco.MjModel:
    """Compile the prepared URDF (:func:`prepared_urdf`) with ``payload`` welded to its link.

    The model integrates with :data:`INTEGRATOR` at :data:`TIMESTEP`, without contacts, under
    MuJoCo's default gravity (−9.81 m/s² along world z), its joints' dry friction with
    :data:`FRICTION_SOLREF`; its inertials are checked against the URDF's by
    :func:`check_inertials`.

    Raises:
        SimulationError: MuJoCo rejects the model, the payload's link is not a body, or a
            compiled inertial differs from the URDF's.
    """
    mj = load_mujoco()
    try:
        spec = mj.MjSpec.from_string(tostring(urdf, encoding="unicode"))
    except ValueError as exc:
        raise SimulationError(f"MuJoCo cannot import the URDF: {exc}") from None
    spec.option.timestep = TIMESTEP
    spec.option.integrator = getattr(mj.mjtIntegrator, f"mjINT_{INTEGRATOR}")
    spec.option.disableflags |= mj.mjtDisableBit.mjDSBL_CONTACT
    expected = urdf_inertials(urdf)
    if payload is not None:
        check_payload(payload.inertial)
        parent = spec.body(payload.link)
        if parent is None:
            raise SimulationError(f"payload link {payload.link!r} is not a body of the URDF")
        body = parent.add_body(name="payload")
        i = payload.inertial.inertia
        body.explicitinertial = True
        body.mass = payload.inertial.mass
        body.ipos = payload.inertial.com
        body.fullinertia = [i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]]
        expected["payload"] = payload.inertial
    for joint in spec.joints:
        joint.solref_friction = list(FRICTION_SOLREF)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise SimulationError(f"MuJoCo cannot compile the URDF: {exc}") from None
    check_inertials(model, expected)
    return model


def check_payload(inertial: Inertial) -> None:
    """A payload's mass is positive, its centre of mass a finite ``[3]`` and its inertia a
    symmetric positive-definite ``[3, 3]``.

    Raises:
        SimulationError: naming the setting (``payload_mass``, ``payload_com`` or
            ``payload_inertia``) and what it got.
    """
    com, inertia = np.asarray(inertial.com), np.asarray(inertial.inertia)
    if not (np.isfinite(inertial.mass) and inertial.mass > 0.0):
        raise SimulationError(f"setting 'payload_mass' must be > 0 kg, got {inertial.mass!r}")
    if com.shape != (3,) or not np.isfinite(com).all():
        raise SimulationError(f"setting 'payload_com' must be 3 finite numbers (m), got {com!r}")
    symmetric = inertia.shape == (3, 3) and np.allclose(inertia, inertia.T)
    if not (symmetric and np.isfinite(inertia).all() and np.linalg.eigvalsh(inertia).min() > 0):
        raise SimulationError(
            "setting 'payload_inertia' must be a symmetric positive-definite [3, 3] matrix "
            f"(kg·m²), got {inertia.tolist()}"
        )


def compiled_inertial(model: mujoco.MjModel, body: str) -> Inertial:
    """The inertial MuJoCo compiled for ``body``, in the body frame (= the URDF link frame)."""
    mj = load_mujoco()
    b = model.body(body)
    rotation = np.zeros(9)
    mj.mju_quat2Mat(rotation, b.iquat)
    rotation = rotation.reshape(3, 3)
    return Inertial(
        mass=float(b.mass[0]),
        com=np.array(b.ipos, dtype=np.float64),
        inertia=rotation @ np.diag(b.inertia) @ rotation.T,
    )


def check_inertials(model: mujoco.MjModel, expected: Mapping[str, Inertial]) -> None:
    """Every body in ``expected`` has its mass (kg), centre of mass (m) and inertia (kg·m²) in
    ``model`` to :data:`INERTIAL_RTOL` / :data:`INERTIAL_ATOL`.

    Raises:
        SimulationError: naming the first body and field that differ, with both values.
    """
    for name, want in expected.items():
        got = compiled_inertial(model, name)
        for field in ("mass", "com", "inertia"):
            a, b = np.asarray(getattr(got, field)), np.asarray(getattr(want, field))
            if not np.allclose(a, b, rtol=INERTIAL_RTOL, atol=INERTIAL_ATOL):
                raise SimulationError(
                    f"MuJoCo compiled body {name!r} with {field} {a.tolist()}, the URDF gives "
                    f"{b.tolist()}"
                )


def joint_indices(model: mujoco.MjModel, joints: Sequence[str]) -> tuple[Array, Array]:
    """Position and velocity addresses ``[n]`` of the 1-dof ``joints`` in ``model``.

    Raises:
        SimulationError: a joint is missing, or the model has other degrees of freedom.
    """
    names = [model.joint(j).name for j in range(model.njnt)]
    missing = [j for j in joints if j not in names]
    if missing or model.nv != len(joints):
        raise SimulationError(
            f"the compiled model's joints {names} are not the scenario's {list(joints)}"
        )
    qpos = np.array([model.joint(j).qposadr[0] for j in joints])
    dof = np.array([model.joint(j).dofadr[0] for j in joints])
    return qpos, dof


@dataclass(frozen=True)
class Sample:
    """One control period of :class:`ImpedanceLoop`, ``[n]`` per joint: the true ``q, v``
    (rad, rad/s) and ``acc`` (rad/s²) at the sample, the torque ``tau`` (N·m) applied over the
    period, the measured ``q_measured, v_measured``, and ``tau_sensed`` (N·m), the torque on the
    sensors' ``torque_side`` at the sample: ``tau`` for ``motor``, ``tau`` less the joint
    friction for ``link``; torque noise and offset are the caller's."""

    q: Array
    v: Array
    acc: Array
    tau: Array
    q_measured: Array
    v_measured: Array
    tau_sensed: Array


class ImpedanceLoop:
    """The joint impedance controller of the module docstring on ``model``, one
    :data:`CONTROL_PERIOD` at a time, from rest at ``q0 [n]`` (rad).

    ``controller_model`` is the arm the controller compensates (without the payload); ``kp``
    (N·m/rad) and ``kd`` (N·m·s/rad) are per joint; ``effort_limit [n]`` (N·m) bounds the
    torque; ``sensors`` quantise the positions, give the velocity noise's σ and the side
    (``torque_side``) the sampled torque ``tau_sensed`` is taken on.

    Raises:
        SimulationError: the engine step does not divide the control period, or a joint is not
            in a model.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        controller_model: mujoco.MjModel,
        joints: Sequence[str],
        kp: Sequence[float],
        kd: Sequence[float],
        sensors: Sensors,
        effort_limit: Array,
        q0: Array,
    ) -> None:
        self._mj = load_mujoco()
        self.steps = round(CONTROL_PERIOD / model.opt.timestep)
        if not np.isclose(self.steps * model.opt.timestep, CONTROL_PERIOD):
            raise SimulationError(
                f"engine step {model.opt.timestep} s does not divide the {CONTROL_PERIOD} s period"
            )
        self.model, self.joints = model, tuple(joints)
        self.qadr, self.dadr = joint_indices(model, joints)
        self.data = self._mj.MjData(model)
        self.data.qpos[self.qadr] = q0
        self.kp, self.kd = np.asarray(kp, dtype=np.float64), np.asarray(kd, dtype=np.float64)
        self.sensors, self.effort_limit = sensors, np.asarray(effort_limit, dtype=np.float64)
        self.set_controller_model(controller_model)
        self._friction_row = self._mj.mjtConstraint.mjCNSTR_FRICTION_DOF
        #: control periods run so far; the next sample is at ``periods * CONTROL_PERIOD`` (s)
        self.periods = 0

    def set_controller_model(self, controller_model: mujoco.MjModel) -> None:
        """Compensate with ``controller_model`` from the next period on (a load the controller
        was told)."""
        self.controller_model = controller_model
        self.cqadr, self.cdadr = joint_indices(controller_model, self.joints)
        self.cdata = self._mj.MjData(controller_model)

    def period(
        self,
        q_d: Array,
        v_d: Array,
        rng: np.random.Generator,
        *,
        advance: bool = True,
        a_d: Array | None = None,
    ) -> Sample:
        """Sample the sensors, apply the controller's torque for the desired ``q_d, v_d [n]``
        (rad, rad/s) and, with ``a_d [n]`` (rad/s²), the feed-forward of the desired
        accelerations, and when ``advance``, integrate one control period. ``rng`` draws the
        velocity noise.

        Raises:
            SimulationError: the controller exceeded a joint's effort limit (naming the joint
                and the time; nothing is applied), or the state became non-finite.
        """
        mj, data, cdata = self._mj, self.data, self.cdata
        n, time_s = len(self.joints), self.periods * CONTROL_PERIOD
        q, v = data.qpos[self.qadr].copy(), data.qvel[self.dadr].copy()
        q_m = quantize(q, self.sensors.encoder_ticks)
        v_m = v + self.sensors.velocity_std * rng.standard_normal(n)
        cdata.qpos[self.cqadr], cdata.qvel[self.cdadr] = q_m, v_m
        mj.mj_forward(self.controller_model, cdata)
        tau = self.kp * (q_d - q_m) + self.kd * (v_d - v_m) + cdata.qfrc_bias[self.cdadr]
        if a_d is not None:
            acc_d = np.zeros(self.controller_model.nv)
            acc_d[self.cdadr] = a_d
            inertial = np.zeros(self.controller_model.nv)
            mj.mj_mulM(self.controller_model, cdata, inertial, acc_d)
            tau = tau + inertial[self.cdadr]
        over = np.flatnonzero(np.abs(tau) > self.effort_limit)
        if over.size:
            j = over[0]
            raise SimulationError(
                f"the controller asked {tau[j]:.1f} N·m of joint {self.joints[j]!r} at t = "
                f"{time_s:.3f} s, beyond its {self.effort_limit[j]:g} N·m limit"
            )
        data.qfrc_applied[self.dadr] = tau
        mj.mj_forward(self.model, data)
        acc = data.qacc[self.dadr].copy()
        sensed = tau.copy()
        if self.sensors.torque_side == "link":
            sensed += self.joint_friction()[self.dadr]
        if advance:
            mj.mj_step(self.model, data, nstep=self.steps)
            self.periods += 1
        if not (np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()):
            raise SimulationError(f"the MuJoCo run diverged at t = {time_s:.3f} s")
        return Sample(q, v, acc, tau, q_m, v_m, sensed)

    def joint_friction(self) -> Array:
        """The joints' friction torques ``[nv]`` (N·m, signed as they act on the joint, i.e.
        against its motion) in the state of the last ``mj_forward``: MuJoCo's joint damping
        (``qfrc_damper``) plus the force of each joint's dry-friction (``frictionloss``) row of
        the constraint solver."""
        data = self.data
        friction = data.qfrc_damper.copy()
        rows = np.flatnonzero(data.efc_type[: data.nefc] == self._friction_row)
        np.add.at(friction, data.efc_id[rows], data.efc_force[rows])
        return friction


def track(
    model: mujoco.MjModel,
    controller_model: mujoco.MjModel,
    joints: Sequence[str],
    q_d: Array,
    v_d: Array,
    kp: Sequence[float],
    kd: Sequence[float],
    sensors: Sensors,
    effort_limit: Array,
    rng: np.random.Generator,
    *,
    before_sample: Callable[[int, mujoco.MjModel], None] | None = None,
    a_d: Array | None = None,
) -> Recording:
    """Run the joint impedance controller (:class:`ImpedanceLoop`) on ``model`` along
    ``q_d, v_d [T, n]`` (rad, rad/s, one row per :data:`CONTROL_PERIOD`; with ``a_d [T, n]``
    (rad/s²) fed forward) from rest at ``q_d[0]``, and sample the sensors (torques on their
    ``torque_side``); ``rng`` draws the sensor noise (every velocity sample's, then the
    torques'). ``before_sample(k, model)``, when given, is called before sample ``k`` is taken and
    may change ``model``'s parameters in place (e.g. a payload grasped or released at that
    sample).

    Raises:
        SimulationError: the state became non-finite, or the controller exceeded a joint's
            effort limit (naming the joint and the time).
    """
    loop = ImpedanceLoop(model, controller_model, joints, kp, kd, sensors, effort_limit, q_d[0])
    n_samples = q_d.shape[0]
    samples = []
    for k in range(n_samples):
        if before_sample is not None:
            before_sample(k, model)
        acc = None if a_d is None else a_d[k]
        samples.append(loop.period(q_d[k], v_d[k], rng, advance=k + 1 < n_samples, a_d=acc))
    q, v, acc, tau, q_m, v_m, sensed = (
        np.stack([getattr(s, f) for s in samples])
        for f in ("q", "v", "acc", "tau", "q_measured", "v_measured", "tau_sensed")
    )
    tau_measured = sensors.read_torque(sensed, rng)
    return Recording(
        t=time_grid(n_samples, CONTROL_PERIOD),
        q=q,
        v=v,
        acc=acc,
        tau=tau,
        q_measured=q_m,
        v_measured=v_m,
        tau_measured=tau_measured,
    )


def engine_info() -> dict[str, Any]:
    """The engine's name, version, integrator, step (s) and control period (s), for truth files."""
    return {
        "name": ENGINE,
        "version": load_mujoco().__version__,
        "integrator": INTEGRATOR,
        "timestep": TIMESTEP,
        "control_period": CONTROL_PERIOD,
    }
