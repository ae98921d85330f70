"""An identified payload in the terms a robot controller takes, and the checks before sending it.

A payload problem (a ``payload`` attachment welded to a link, its ``<name>/mass`` and
``<name>/com_x|y|z`` free, optionally its ``<name>/ixx|ixy|iyy|ixz|iyz|izz``) gives a
:class:`~dynid.posterior.Posterior` in the frame of the link it is welded to. A controller takes
the load in its flange frame:

* Franka (libfranka ``setLoad``; franka_ros2 ``franka_msgs/srv/SetLoad``): ``mass`` (kg),
  ``center_of_mass`` [3] (m) in the flange frame F (``panda_link8`` / ``fr3_link8``), and
  ``load_inertia`` [9], the 3×3 inertia about the centre of mass in flange axes, column-major
  (kg·m²);
* Universal Robots (``ur_msgs/srv/SetPayload`` of ur_robot_driver): ``mass`` (kg),
  ``center_of_gravity`` (m) from the tool flange ``tool0``, and (ur_msgs ≥ 2.6) ``ixx, iyy, izz,
  ixy, ixz, iyz`` about the centre of mass in tool-flange axes (kg·m²).

:func:`identified_payload` reads the posterior (MAP values, σ from its covariance; what is not
free keeps the problem file's nominal value), :meth:`PayloadEstimate.in_frame` moves it to the
flange frame through the fixed joints between the two links (both must be on one moving body),
:func:`franka_load` and :func:`ur_payload` give the services' fields, and :func:`check_gates`
decides whether it may be sent (:func:`decide` does all of it): σ of the mass and of each
centre-of-mass coordinate below their thresholds, the identified model's held-out torque RMSE
below the nominal model's (the fit's ``meta["validation"]``, :func:`dynid.validation.validate`),
the mass within the robot's rated payload (:data:`RATED_PAYLOAD_KG`), and an inertia a rigid
body can have (free inertia entries are bounded, not constrained to be physical).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pinocchio as pin

from dynid.errors import DynidError
from dynid.model.attachments import AttachedRobot, Payload
from dynid.posterior import Posterior

__all__ = [
    "APPLY_TARGETS",
    "RATED_PAYLOAD_KG",
    "Decision",
    "Gate",
    "GateSettings",
    "PayloadError",
    "PayloadEstimate",
    "check_gates",
    "decide",
    "franka_load",
    "identified_payload",
    "ur_payload",
]

APPLY_TARGETS = ("none", "franka", "ur")
"""Where an identified payload may be sent: nowhere, Franka ``SetLoad``, UR ``SetPayload``."""

RATED_PAYLOAD_KG: Mapping[str, float] = {
    "panda": 3.0,  # Franka Emika Panda datasheet: payload 3 kg
    "fr3": 3.0,  # Franka Research 3 datasheet: payload 3 kg
    "ur3e": 3.0,  # UR3e datasheet: payload 3 kg
    "ur5e": 5.0,  # UR5e datasheet: payload 5 kg
    "ur5": 5.0,  # UR5 (CB3) datasheet: payload 5 kg
    "ur10e": 12.5,  # UR10e datasheet: payload 12.5 kg
    "ur16e": 16.0,  # UR16e datasheet: payload 16 kg
}
"""Rated payload (kg) of the arms dynid applies loads to, from the makers' datasheets."""

_INERTIA_FIELDS = ("ixx", "ixy", "iyy", "ixz", "iyz", "izz")
_INERTIA_INDEX = {"ixx": (0, 0), "ixy": (0, 1), "iyy": (1, 1), "ixz": (0, 2), "iyz": (1, 2),
                  "izz": (2, 2)}  # fmt: skip


class PayloadError(DynidError, ValueError):
    """A posterior that is not of a payload problem, or a frame the payload cannot be moved to."""


@dataclass(frozen=True)
class PayloadEstimate:
    """An identified payload in ``frame``.

    Attributes:
        frame: the frame of ``com`` and of the inertia's axes.
        mass: kg.
        com: ``[3]`` centre of mass in ``frame`` (m).
        inertia: ``[3, 3]`` rotational inertia about the centre of mass, ``frame`` axes (kg·m²).
        mass_std: σ of the mass (kg).
        com_std: ``[3]`` σ of the centre of mass along ``frame``'s axes (m).
        inertia_free: whether the inertia was identified (else it is the problem's nominal).
    """

    frame: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    mass_std: float
    com_std: np.ndarray
    inertia_free: bool

    def in_frame(self, robot: AttachedRobot, frame: str) -> PayloadEstimate:
        """The same payload in ``frame``, a frame of ``robot`` rigidly attached to the payload's
        link (the same moving body, through fixed joints).

        The centre of mass is moved by the rigid transform, the inertia and the centre of mass'
        covariance rotated (the σ of the result is that of the rotated diagonal covariance).

        Raises:
            PayloadError: ``frame`` is not a frame of ``robot``, or moves relative to the
                payload's link.
        """
        if frame == self.frame:
            return self
        source, target = (_frame(robot, f) for f in (self.frame, frame))
        if source.parentJoint != target.parentJoint:
            raise PayloadError(
                f"frame {frame!r} is not on the body of {self.frame!r} (another joint moves "
                "between them); the payload can only be given in a frame fixed to its link"
            )
        # target <- source: (joint <- target)^-1 (joint <- source)
        placement = target.placement.inverse() * source.placement
        rotation = np.array(placement.rotation)
        cov = rotation @ np.diag(self.com_std**2) @ rotation.T
        return PayloadEstimate(
            frame=frame,
            mass=self.mass,
            com=rotation @ self.com + np.array(placement.translation),
            inertia=rotation @ self.inertia @ rotation.T,
            mass_std=self.mass_std,
            com_std=np.sqrt(np.diag(cov)),
            inertia_free=self.inertia_free,
        )


def _frame(robot: AttachedRobot, name: str) -> pin.Frame:
    if not robot.model.existFrame(name):
        raise PayloadError(f"robot {robot.name!r} has no frame {name!r}")
    return robot.model.frames[robot.model.getFrameId(name)]


def identified_payload(
    posterior: Posterior, robot: AttachedRobot, name: str = "payload"
) -> PayloadEstimate:
    """The payload ``name`` of ``robot`` (the problem's robot) as ``posterior`` identified it.

    Values are the posterior's MAP and σ the square roots of its covariance's diagonal; inertia
    entries not in the posterior keep the attachment's nominal values.

    Raises:
        PayloadError: ``robot`` has no payload attachment ``name``, or the posterior lacks
            ``<name>/mass`` or one of ``<name>/com_x|y|z`` (they must be free to be applied).
    """
    attachment = getattr(robot, "resolvers", {}).get(name)
    if not isinstance(attachment, Payload):
        raise PayloadError(
            f"the problem's robot has no payload attachment {name!r}: not a payload problem"
        )
    required = [f"{name}/{f}" for f in ("mass", "com_x", "com_y", "com_z")]
    missing = [n for n in required if n not in posterior.names]
    if missing:
        raise PayloadError(
            f"the posterior does not identify {missing}; a payload is applied only when its mass "
            "and centre of mass are free parameters"
        )
    index = {n: i for i, n in enumerate(posterior.names)}
    values, std = posterior.map(), posterior.std()
    inertia = np.array(attachment.inertia, dtype=np.float64)
    free = [f for f in _INERTIA_FIELDS if f"{name}/{f}" in index]
    for field in free:
        r, c = _INERTIA_INDEX[field]
        inertia[r, c] = inertia[c, r] = values[index[f"{name}/{field}"]]
    coms = [index[n] for n in required[1:]]
    return PayloadEstimate(
        frame=attachment.link,
        mass=float(values[index[required[0]]]),
        com=values[coms].astype(np.float64),
        inertia=inertia,
        mass_std=float(std[index[required[0]]]),
        com_std=std[coms].astype(np.float64),
        inertia_free=len(free) == len(_INERTIA_FIELDS),
    )


def franka_load(payload: PayloadEstimate) -> dict[str, Any]:
    """The fields of ``franka_msgs/srv/SetLoad``: ``mass`` (kg), ``center_of_mass`` [3] (m) and
    ``load_inertia`` [9] (kg·m², about the centre of mass, column-major), in ``payload.frame``
    (give it in the flange frame, :meth:`PayloadEstimate.in_frame`)."""
    return {
        "mass": float(payload.mass),
        "center_of_mass": [float(v) for v in payload.com],
        "load_inertia": [float(v) for v in np.asarray(payload.inertia).flatten(order="F")],
    }


def ur_payload(payload: PayloadEstimate) -> dict[str, Any]:
    """The fields of ``ur_msgs/srv/SetPayload``: ``mass`` (kg), ``center_of_gravity`` [3] (m)
    and ``ixx, iyy, izz, ixy, ixz, iyz`` (kg·m², about the centre of mass), in
    ``payload.frame`` (give it in ``tool0``, :meth:`PayloadEstimate.in_frame`)."""
    i = np.asarray(payload.inertia)
    return {
        "mass": float(payload.mass),
        "center_of_gravity": [float(v) for v in payload.com],
        "ixx": float(i[0, 0]),
        "iyy": float(i[1, 1]),
        "izz": float(i[2, 2]),
        "ixy": float(i[0, 1]),
        "ixz": float(i[0, 2]),
        "iyz": float(i[1, 2]),
    }


@dataclass(frozen=True)
class GateSettings:
    """Thresholds of :func:`check_gates`.

    Attributes:
        max_mass_std: largest σ of the mass (kg).
        max_com_std: largest σ of each centre-of-mass coordinate (m).
        rated_payload: the robot's rated payload (kg, :data:`RATED_PAYLOAD_KG`).
    """

    max_mass_std: float
    max_com_std: float
    rated_payload: float


@dataclass(frozen=True)
class Gate:
    """One check: ``name`` (``mass_std``, ``com_std``, ``heldout_rmse``, ``rated_payload``,
    ``inertia``),
    whether it ``passed``, and ``detail``, a line saying what was compared."""

    name: str
    passed: bool
    detail: str


def check_gates(
    payload: PayloadEstimate, meta: Mapping[str, Any], settings: GateSettings
) -> list[Gate]:
    """Every gate on ``payload`` (identified by a fit whose posterior ``meta`` is given): σ of
    the mass and of the centre of mass, the held-out RMSE, the rated payload, and a physically
    consistent inertia (what is sent must be a rigid body's).

    The held-out gate reads ``meta["validation"]`` (torque validation: ``identified`` and
    ``nominal`` ``rmse_overall``, N·m); a fit without it (no ``validation`` section in the problem
    file, or a failed scoring) fails the gate.
    """
    return [
        Gate("mass_std", bool(payload.mass_std <= settings.max_mass_std),
             f"σ(mass) {payload.mass_std:.4g} kg, at most {settings.max_mass_std:g} kg"),
        Gate("com_std", bool(np.all(payload.com_std <= settings.max_com_std)),
             f"σ(centre of mass) {np.round(payload.com_std, 6).tolist()} m, each at most "
             f"{settings.max_com_std:g} m"),
        _heldout_gate(meta),
        Gate("rated_payload", bool(0.0 < payload.mass <= settings.rated_payload),
             f"mass {payload.mass:.4g} kg, within (0, {settings.rated_payload:g}] kg rated"),
        _inertia_gate(payload.inertia),
    ]  # fmt: skip


def _inertia_gate(inertia: np.ndarray) -> Gate:
    """A rigid body's inertia about its centre of mass: symmetric, principal moments ≥ 0 and
    each at most the sum of the other two (the triangle inequality of a physical body)."""
    inertia = np.asarray(inertia, dtype=np.float64)
    moments = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = 1e-12 * max(1.0, float(np.abs(moments).max()))
    physical = bool(
        np.allclose(inertia, inertia.T, atol=tol)
        and moments.min() >= -tol
        and np.all(moments <= moments.sum() - moments + tol)
    )
    return Gate("inertia", physical, f"principal moments {np.round(moments, 8).tolist()} kg·m², "
                "each ≥ 0 and at most the sum of the other two")  # fmt: skip


def _heldout_gate(meta: Mapping[str, Any]) -> Gate:
    validation = meta.get("validation")
    try:
        quantity = validation["quantity"]
        identified = float(validation["identified"]["rmse_overall"])
        nominal = float(validation["nominal"]["rmse_overall"])
    except (TypeError, KeyError, ValueError):
        why = meta.get("validation_error", "the fit has no held-out validation (give the problem "
                       "file a 'validation' section)")  # fmt: skip
        return Gate("heldout_rmse", False, f"no held-out torque RMSE: {why}")
    if quantity != "torque":
        return Gate("heldout_rmse", False, f"held-out validation of {quantity}, not of torques")
    return Gate(
        "heldout_rmse",
        bool(np.isfinite(identified) and identified < nominal),
        f"held-out torque RMSE {identified:.4g} N·m identified, {nominal:.4g} N·m nominal",
    )


@dataclass(frozen=True)
class Decision:
    """What to send for a fit: the ``payload`` in the flange frame, the service's ``fields``
    (:func:`franka_load` or :func:`ur_payload`) and every ``gate``."""

    payload: PayloadEstimate
    fields: dict[str, Any]
    gates: list[Gate]

    @property
    def passed(self) -> bool:
        """Every gate passed."""
        return all(g.passed for g in self.gates)

    @property
    def failed(self) -> list[Gate]:
        """The gates that failed."""
        return [g for g in self.gates if not g.passed]


def decide(
    posterior: Posterior,
    robot: AttachedRobot,
    target: str,
    flange: str,
    settings: GateSettings,
    name: str = "payload",
) -> Decision:
    """The payload ``name`` that ``posterior`` identified on ``robot``, in ``flange``, as the
    fields of ``target``'s service (``franka`` or ``ur``), and the gates on it.

    Raises:
        PayloadError: not a payload posterior, a flange not fixed to the payload's link, or an
            unknown target.
    """
    convert = {"franka": franka_load, "ur": ur_payload}.get(target)
    if convert is None:
        raise PayloadError(f"target {target!r} is not one of {['franka', 'ur']}")
    payload = identified_payload(posterior, robot, name).in_frame(robot, flange)
    return Decision(payload, convert(payload), check_gates(payload, posterior.meta, settings))
