"""Robot models: URDF loading, parameter specs, batched torch dynamics, Pinocchio backend,
attachments, integration and observation functions.

Names are imported on first use, so ``import dynid.model.errors`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "errors": (
        "ModelError",
        "ParameterSpecError",
        "StateError",
        "UnknownFrameError",
        "UnknownJointError",
        "UnsupportedGradientError",
        "UnsupportedJointError",
        "UrdfError",
    ),
    "robot": (
        "FrameInfo",
        "JointKind",
        "RobotModel",
        "available_robots",
        "load_robot",
        "robot_urdf",
        "urdf_path",
    ),
    "params": (
        "DynamicParameters",
        "Parameter",
        "ParameterResolver",
        "ParameterSpec",
        "nominal_parameters",
    ),
    "dynamics": ("DEFAULT_COULOMB_SMOOTHING", "TorchDynamics", "friction_torque"),
    "pinocchio_backend": ("PinocchioDynamics",),
    "attachments": (
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
    ),
    "integrate": (
        "ControlModel",
        "CurrentControl",
        "ForwardDynamics",
        "GeneralizedForce",
        "PDControl",
        "TorqueControl",
        "Unactuated",
        "rollout",
        "shoot_windows",
        "split_windows",
        "step",
    ),
    "observe": (
        "AXIS_POINTS",
        "FrameKinematics",
        "FramePointObservation",
        "FramePoseObservation",
        "JointObservation",
        "Observation",
        "ObservationModel",
        "frame_points",
        "frame_poses",
        "joint_positions",
        "joint_velocities",
        "rotation_to_quaternion",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    try:
        module = _MODULE_OF[name]
    except KeyError:
        raise AttributeError(f"module 'dynid.model' has no attribute {name!r}") from None
    return getattr(importlib.import_module(f"dynid.model.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
