"""Named free parameters (``ParameterSpec``) and the per-particle dynamic parameters they set.

A particle batch ``theta[N, M]`` (one row per particle, one column per named parameter) is mapped
onto the nominal robot to give :class:`DynamicParameters` — per-particle body inertias, joint
placement translations (link lengths), friction, armature, motor gains and gravity — that both
dynamics backends consume. Parameter names:

- ``<link>/mass`` (kg), ``<link>/com_x|y|z`` (m, link frame), ``<link>/ixx|iyy|izz|ixy|ixz|iyz``
  (kg·m², about the centre of mass, link-frame axes, as in URDF);
- ``<link>/log_cholesky_0..9``: the body's full dynamic parameters through the log-Cholesky
  parametrisation (physically consistent for every value; ``pinocchio.LogCholeskyParameters``
  order α, d1, d2, d3, s12, s23, s13, t1, t2, t3);
- ``<link>/length`` (m): scales the link's centre of mass and its child joints' placement
  translations about the link origin so that the first child joint (or, for a leaf link, the
  centre of mass) lies at the given distance (csvgd paper V-A identifies link lengths);
- ``<joint>/damping`` (N·m·s/rad), ``<joint>/coulomb`` (N·m), ``<joint>/armature`` (kg·m²),
  ``<joint>/motor_gain`` (N·m per command unit), ``<joint>/stribeck_delta`` (N·m) and
  ``<joint>/stribeck_rate`` (s/rad) (lm paper eq. 4.1), ``<joint>/torque_offset`` (N·m, a
  constant joint torque: the bias of a joint torque sensor), ``<joint>/sigmoid_scale`` (N·m),
  ``<joint>/sigmoid_rate`` (s/rad) and ``<joint>/sigmoid_shift`` (rad/s) (the sigmoid friction
  of Gaz et al. 2019, :func:`dynid.model.dynamics.friction_torque`), ``<joint>/offset_x|y|z`` (m,
  placement translation of the joint in its parent frame);
- ``gravity/x|y|z`` (m/s²), ``gravity/tilt_x|tilt_y`` (rad, rotation of the nominal gravity about
  the world x then y axis: the stand tilt of the lm paper §4.6);
- ``<prefix>/<field>`` for a prefix in ``robot.resolvers`` (``payload``, ``box``, ``sphere``, ...;
  see :mod:`dynid.model.attachments`): resolved by the attachment that created it.

Normalised coordinates u ∈ [0, 1]ᴹ (csvgd paper App. I-C) map the box [lower, upper] affinely.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import torch
import yaml
from torch import Tensor

from dynid.model.coordinates import Coordinates
from dynid.model.errors import ParameterSpecError, StateError
from dynid.model.spatial import (
    axis_angle_rotation,
    body_from_dynamic_params,
    dynamic_params_from_body,
    dynamic_params_from_log_cholesky,
    inertia_from_vector,
    log_cholesky_from_dynamic_params,
    vector_from_inertia,
)

if TYPE_CHECKING:
    from dynid.model.robot import RobotModel

__all__ = [
    "DynamicParameters",
    "InertialGroup",
    "JointGroup",
    "Parameter",
    "ParameterResolver",
    "ParameterSpec",
    "nominal_parameters",
]

_LINK_FIELDS: dict[str, str] = {
    "mass": "kg",
    "com_x": "m",
    "com_y": "m",
    "com_z": "m",
    "ixx": "kg*m^2",
    "iyy": "kg*m^2",
    "izz": "kg*m^2",
    "ixy": "kg*m^2",
    "ixz": "kg*m^2",
    "iyz": "kg*m^2",
    "length": "m",
    **{f"log_cholesky_{k}": "" for k in range(10)},
}
_JOINT_FIELDS: dict[str, str] = {
    "damping": "N*m*s/rad",
    "coulomb": "N*m",
    "armature": "kg*m^2",
    "motor_gain": "N*m/unit",
    "stribeck_delta": "N*m",
    "stribeck_rate": "s/rad",
    "torque_offset": "N*m",
    "sigmoid_scale": "N*m",
    "sigmoid_rate": "s/rad",
    "sigmoid_shift": "rad/s",
    "offset_x": "m",
    "offset_y": "m",
    "offset_z": "m",
}
_GRAVITY_FIELDS: dict[str, str] = {
    "x": "m/s^2",
    "y": "m/s^2",
    "z": "m/s^2",
    "tilt_x": "rad",
    "tilt_y": "rad",
}
_AXIS = {"x": 0, "y": 1, "z": 2}
# Pinocchio 6-vector index of each URDF inertia field: (xx, xy, yy, xz, yz, zz).
_INERTIA_INDEX = {"ixx": 0, "ixy": 1, "iyy": 2, "ixz": 3, "iyz": 4, "izz": 5}
_JOINT_VECTOR_FIELDS = (
    "damping",
    "coulomb",
    "armature",
    "motor_gain",
    "stribeck_delta",
    "stribeck_rate",
    "torque_offset",
    "sigmoid_scale",
    "sigmoid_rate",
    "sigmoid_shift",
)
_BIAS_FIELDS = ("torque_offset", "sigmoid_scale", "sigmoid_rate", "sigmoid_shift")
_ENTRY_KEYS = {"name", "lower", "upper", "unit", "prior", "mean", "std", "nominal"}


@dataclass
class DynamicParameters:
    """Per-particle dynamic parameters; torch tensors with leading batch dim N (N may be 1).

    Attributes:
        inertia: [N, nv, 10] per moving body, Pinocchio dynamic-parameter order, about the joint
            frame origin in joint-frame axes (SI).
        joint_translation: [N, nv, 3] translation of each joint placement in its parent joint
            frame (m); placement rotations stay those of the model.
        damping: [N, nv] viscous friction (N·m·s/rad, or N·s/m for prismatic joints).
        coulomb: [N, nv] kinetic Coulomb friction (N·m or N), smoothed by tanh in the dynamics.
        armature: [N, nv] rotor inertia added to the mass-matrix diagonal (kg·m²).
        motor_gain: [N, nv] torque per unit of command (used by control models).
        stribeck_delta: [N, nv] static minus kinetic friction, Δ of lm eq. 4.1 (N·m).
        stribeck_rate: [N, nv] Stribeck transition rate ξ of lm eq. 4.1 (s/rad).
        gravity: [N, 3] world gravity (m/s²).
        extra: attachment and contact parameters, name → [N, ...] (e.g. ``"sphere/stiffness"``).
        torque_offset: [N, nv] constant joint torque added to the model's (N·m or N): the bias
            of a joint torque sensor; zeros when not given.
        sigmoid_scale, sigmoid_rate, sigmoid_shift: [N, nv] φ1 (N·m), φ2 (s/rad) and φ3 (rad/s)
            of the sigmoid friction of Gaz et al. 2019; zeros when not given.
    """

    inertia: Tensor
    joint_translation: Tensor
    damping: Tensor
    coulomb: Tensor
    armature: Tensor
    motor_gain: Tensor
    stribeck_delta: Tensor
    stribeck_rate: Tensor
    gravity: Tensor
    extra: dict[str, Tensor] = field(default_factory=dict)
    torque_offset: Tensor | None = None
    sigmoid_scale: Tensor | None = None
    sigmoid_rate: Tensor | None = None
    sigmoid_shift: Tensor | None = None

    def __post_init__(self) -> None:
        for name in _BIAS_FIELDS:
            if getattr(self, name) is None:
                setattr(self, name, torch.zeros_like(self.damping))

    @property
    def n(self) -> int:
        """Batch size N."""
        return int(self.inertia.shape[0])

    def map(self, fn: Callable[[Tensor], Tensor]) -> DynamicParameters:
        """Apply ``fn(tensor) -> tensor`` to every field (including ``extra``)."""
        values = {f.name: fn(getattr(self, f.name)) for f in fields(self) if f.name != "extra"}
        return DynamicParameters(**values, extra={k: fn(v) for k, v in self.extra.items()})

    def to(self, *args: Any, **kwargs: Any) -> DynamicParameters:
        """``Tensor.to`` on every field (device and/or dtype)."""
        return self.map(lambda t: t.to(*args, **kwargs))

    def detach(self) -> DynamicParameters:
        """A copy cut from the autograd graph."""
        return self.map(lambda t: t.detach())

    def index(self, idx: int | slice | Tensor) -> DynamicParameters:
        """Select particles along the batch dim (keeps the dim for an int index)."""
        if isinstance(idx, int):
            idx = slice(idx, idx + 1)
        return self.map(lambda t: t[idx])

    def expand(self, n: int) -> DynamicParameters:
        """Broadcast a batch of one to N particles (a view; no copy)."""
        if self.n == n:
            return self
        if self.n != 1:
            raise StateError(f"DynamicParameters: cannot expand batch {self.n} to {n}")
        return self.map(lambda t: t.expand(n, *t.shape[1:]))


def nominal_parameters(
    robot: RobotModel,
    n: int = 1,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> DynamicParameters:
    """The robot's nominal :class:`DynamicParameters` repeated for ``n`` particles.

    Damping, Coulomb friction and armature come from the URDF ``<dynamics>`` tags as Pinocchio
    reads them (``model.damping``, ``model.friction``, ``model.armature``); motor gains are 1,
    the Stribeck and sigmoid terms and the torque offsets 0.
    """
    nv = robot.nv

    def t(x: Any) -> Tensor:
        arr = torch.as_tensor(np.asarray(x, dtype=np.float64), dtype=dtype, device=device)
        return arr.unsqueeze(0).repeat(n, *([1] * arr.dim()))

    model = robot.model
    return DynamicParameters(
        inertia=t(robot.nominal_inertia()),
        joint_translation=t(robot.placement_translations),
        damping=t(np.asarray(model.damping).reshape(nv)),
        coulomb=t(np.asarray(model.friction).reshape(nv)),
        armature=t(np.asarray(model.armature).reshape(nv)),
        motor_gain=t(np.ones(nv)),
        stribeck_delta=t(np.zeros(nv)),
        stribeck_rate=t(np.zeros(nv)),
        gravity=t(robot.gravity),
    )


class ParameterResolver(Protocol):
    """Maps the parameters under one name prefix (e.g. ``box/*``) onto dynamic parameters.

    An attachment is the resolver of the names it creates; ``robot.resolvers`` maps each prefix
    to its resolver.
    """

    def nominal(self, robot: RobotModel, name: str) -> float:
        """Nominal value of parameter ``name`` (full name, prefix included)."""
        ...

    def apply(
        self, robot: RobotModel, values: Mapping[str, Tensor], params: DynamicParameters
    ) -> DynamicParameters:
        """Return ``params`` updated with ``values`` (full name → [N] tensor)."""
        ...


@dataclass
class Parameter:
    """One named free parameter with its bounds and prior.

    Attributes:
        name: stable name (module docstring), e.g. ``"link2/mass"``.
        lower, upper: bounds (SI, in ``unit``); the uniform prior's support.
        unit: unit string; defaults to the field's SI unit.
        prior: ``"uniform"`` on [lower, upper] (csvgd IV-D) or ``"gaussian"`` (N(mean, std²)
            truncated to [lower, upper]).
        mean, std: Gaussian prior mean and standard deviation.
        nominal: value used by ``nominal_theta``; defaults to the robot's nominal value.
    """

    name: str
    lower: float
    upper: float
    unit: str = ""
    prior: Literal["uniform", "gaussian"] = "uniform"
    mean: float | None = None
    std: float | None = None
    nominal: float | None = None

    def __post_init__(self) -> None:
        if "/" not in self.name or self.name.endswith("/") or self.name.startswith("/"):
            raise ParameterSpecError(
                f"parameter name {self.name!r} must look like '<link|joint|prefix>/<field>'"
            )
        self.lower = float(self.lower)
        self.upper = float(self.upper)
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ParameterSpecError(f"parameter {self.name!r}: bounds must be finite")
        if not self.lower < self.upper:
            raise ParameterSpecError(
                f"parameter {self.name!r}: lower {self.lower} must be < upper {self.upper}"
            )
        if self.prior not in ("uniform", "gaussian"):
            raise ParameterSpecError(
                f"parameter {self.name!r}: prior {self.prior!r} is not 'uniform' or 'gaussian'"
            )
        if self.prior == "gaussian":
            if self.mean is None or self.std is None or not float(self.std) > 0.0:
                raise ParameterSpecError(
                    f"parameter {self.name!r}: a gaussian prior needs 'mean' and 'std' > 0"
                )
            self.mean, self.std = float(self.mean), float(self.std)
        if not self.unit:
            self.unit = _default_unit(self.name)

    @property
    def prior_std(self) -> float:
        """Standard deviation of the prior (unit): ``std`` for a Gaussian (before truncation),
        ``(upper − lower) / √12`` for the uniform."""
        if self.prior == "gaussian" and self.std is not None:  # a Gaussian always has one
            return self.std
        return (self.upper - self.lower) / math.sqrt(12.0)

    @property
    def prefix(self) -> str:
        """Link, joint or resolver prefix (everything before the last '/')."""
        return self.name.rsplit("/", 1)[0]

    @property
    def field(self) -> str:
        """Field after the last '/', e.g. ``"mass"``."""
        return self.name.rsplit("/", 1)[1]


def _default_unit(name: str) -> str:
    prefix, fld = name.rsplit("/", 1)
    if prefix == "gravity":
        return _GRAVITY_FIELDS.get(fld, "")
    return _LINK_FIELDS.get(fld) or _JOINT_FIELDS.get(fld, "")


class ParameterSpec:
    """An ordered set of named parameters: bounds, priors, normalisation and the map to physics.

    Attributes:
        parameters: the :class:`Parameter` list, in column order of ``theta``.
        names: their names; ``dim`` = M.
        lower, upper: [M] float64 bounds.
        coordinates: the maps between θ, the unit box and unconstrained values
            (:class:`~dynid.model.coordinates.Coordinates`).
    """

    def __init__(self, parameters: Sequence[Parameter]) -> None:
        self.parameters = list(parameters)
        self.names = [p.name for p in self.parameters]
        dupes = sorted({n for n in self.names if self.names.count(n) > 1})
        if dupes:
            raise ParameterSpecError(f"parameter names appear more than once: {dupes}")
        self.dim = len(self.parameters)
        self.lower = torch.tensor([p.lower for p in self.parameters], dtype=torch.float64)
        self.upper = torch.tensor([p.upper for p in self.parameters], dtype=torch.float64)
        self.coordinates = Coordinates(self.lower, self.upper)
        self.units = [p.unit for p in self.parameters]
        gauss = [p.prior == "gaussian" for p in self.parameters]
        self._gaussian = torch.tensor(gauss, dtype=torch.bool)
        self._mean = torch.tensor(
            [p.mean if p.mean is not None else 0.0 for p in self.parameters], dtype=torch.float64
        )
        self._std = torch.tensor(
            [p.std if p.std is not None else 1.0 for p in self.parameters], dtype=torch.float64
        )

    def __repr__(self) -> str:
        return f"ParameterSpec({self.names})"

    def __len__(self) -> int:
        return self.dim

    def index(self, name: str) -> int:
        """Column of parameter ``name`` in ``theta``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ParameterSpecError(
                f"no parameter {name!r} in the spec; parameters: {self.names}"
            ) from None

    # --- YAML -----------------------------------------------------------------------------

    @classmethod
    def from_yaml(cls, source: str | Path | Mapping[str, Any]) -> ParameterSpec:
        """Load from a YAML file, YAML text, or an already parsed mapping.

        Schema: a mapping with key ``parameters`` (other keys, such as a problem's, are ignored),
        or a bare list, of entries ``{name, lower, upper, unit?, prior?, mean?, std?, nominal?}``::

            parameters:
              - {name: link1/mass, lower: 0.5, upper: 2.0, unit: kg}
              - {name: joint1/damping, lower: 0.0, upper: 0.1, prior: gaussian,
                 mean: 0.05, std: 0.01}
        """
        origin = "mapping"
        data: Any = source
        if isinstance(source, Path | str) and not isinstance(source, Mapping):
            text, origin = _yaml_text(source)
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ParameterSpecError(f"{origin}: invalid YAML: {exc}") from exc
        entries = data.get("parameters") if isinstance(data, Mapping) else data
        if not isinstance(entries, list) or not entries:
            raise ParameterSpecError(f"{origin}: expected a non-empty list under 'parameters'")
        params = []
        for k, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise ParameterSpecError(f"{origin}: parameters[{k}] is not a mapping")
            unknown = sorted(set(entry) - _ENTRY_KEYS)
            missing = sorted({"name", "lower", "upper"} - set(entry))
            if unknown or missing:
                raise ParameterSpecError(
                    f"{origin}: parameters[{k}] ({entry.get('name')!r}) has unknown keys "
                    f"{unknown} / missing keys {missing}"
                )
            try:
                params.append(Parameter(**dict(entry)))
            except (TypeError, ValueError) as exc:
                raise ParameterSpecError(f"{origin}: parameters[{k}]: {exc}") from exc
        return cls(params)

    def to_mapping(self) -> dict[str, Any]:
        """The YAML-ready mapping that :meth:`from_yaml` reads back."""
        out = []
        for p in self.parameters:
            entry: dict[str, Any] = {"name": p.name, "lower": p.lower, "upper": p.upper}
            entry["unit"] = p.unit
            entry["prior"] = p.prior
            for key in ("mean", "std", "nominal"):
                if getattr(p, key) is not None:
                    entry[key] = getattr(p, key)
            out.append(entry)
        return {"parameters": out}

    # --- normalisation and priors ---------------------------------------------------------

    def _bounds(self, like: Tensor) -> tuple[Tensor, Tensor]:
        return self.lower.to(like), self.upper.to(like)

    def _check_last_dim(self, theta: Tensor, what: str) -> None:
        if theta.shape[-1:] != (self.dim,):
            raise StateError(f"{what}: last dim is {tuple(theta.shape)}, expected M={self.dim}")

    def to_unit(self, theta: Tensor) -> Tensor:
        """θ [..., M] → u = (θ − lower) / (upper − lower) (csvgd App. I-C); see
        :meth:`Coordinates.to_unit <dynid.model.coordinates.Coordinates.to_unit>`."""
        return self.coordinates.to_unit(theta)

    def from_unit(self, u: Tensor) -> Tensor:
        """u [..., M] → θ = lower + u (upper − lower); exact inverse of :meth:`to_unit`."""
        return self.coordinates.from_unit(u)

    def clamp(self, theta: Tensor) -> Tensor:
        """θ [..., M] clipped into [lower, upper]."""
        return self.coordinates.clamp(theta)

    def _gauss_cdf_bounds(self) -> tuple[Tensor, Tensor]:
        a = (self.lower - self._mean) / self._std
        b = (self.upper - self._mean) / self._std
        return torch.special.ndtr(a), torch.special.ndtr(b)

    def sample_prior(self, n: int, generator: torch.Generator) -> Tensor:
        """[n, M] float64 draws from the prior (Gaussian priors truncated to the bounds).

        Args:
            n: number of samples.
            generator: the seeded source of randomness (CPU generator).
        """
        u = torch.rand(n, self.dim, generator=generator, dtype=torch.float64)
        uniform = self.from_unit(u)
        fa, fb = self._gauss_cdf_bounds()
        p = (fa + u * (fb - fa)).clamp(1e-300, 1.0 - 1e-16)
        gaussian = (self._mean + self._std * torch.special.ndtri(p)).clamp(self.lower, self.upper)
        return torch.where(self._gaussian, gaussian, uniform)

    def log_prior(self, theta: Tensor) -> Tensor:
        """Log prior density of θ [..., M] → [...]; −inf outside [lower, upper]."""
        self._check_last_dim(theta, "log_prior(theta)")
        lo, hi = self._bounds(theta)
        mean, std = self._mean.to(theta), self._std.to(theta)
        fa, fb = (x.to(theta) for x in self._gauss_cdf_bounds())
        log_uniform = -torch.log(hi - lo).expand_as(theta)
        z = (theta - mean) / std
        log_gauss = -0.5 * z**2 - torch.log(std * math.sqrt(2.0 * math.pi)) - torch.log(fb - fa)
        dens = torch.where(self._gaussian.to(theta.device), log_gauss, log_uniform)
        inside = (theta >= lo) & (theta <= hi)
        dens = torch.where(inside, dens, torch.full_like(dens, -math.inf))
        return dens.sum(-1)

    # --- physics --------------------------------------------------------------------------

    def nominal_theta(self, robot: RobotModel) -> Tensor:
        """[M] float64: each parameter's ``nominal`` if given, else the robot's nominal value."""
        base = nominal_parameters(robot)
        values = []
        for p in self.parameters:
            if p.nominal is not None:
                values.append(float(p.nominal))
            else:
                values.append(_nominal_value(robot, p, base))
        return torch.tensor(values, dtype=torch.float64)

    def apply(self, robot: RobotModel, theta: Tensor) -> DynamicParameters:
        """Per-particle dynamic parameters for θ [N, M] (or [M] for N = 1), differentiable.

        Parameters not in the spec keep the robot's nominal values. Order of application:
        joint offsets, link (mass, com, inertia, length), log-Cholesky bodies, joint friction
        and actuation, gravity, then attachment resolvers.

        Raises:
            StateError: θ has the wrong shape or non-finite entries (named).
            ParameterSpecError: a name that fits neither the robot nor a resolver prefix, or
                conflicting parameters for the same body (e.g. ``mass`` and ``log_cholesky_*``).
        """
        if theta.dim() == 1:
            theta = theta.unsqueeze(0)
        if theta.dim() != 2 or theta.shape[1] != self.dim:
            raise StateError(
                f"theta has shape {tuple(theta.shape)}, expected [N, {self.dim}] for {self.names}"
            )
        bad = ~torch.isfinite(theta).all(0)
        if bool(bad.any()):
            names = [self.names[i] for i in torch.nonzero(bad).flatten().tolist()]
            raise StateError(f"theta has non-finite values for parameters {names}")
        n = theta.shape[0]
        base = nominal_parameters(robot, n, dtype=theta.dtype, device=theta.device)
        groups = _group(robot, self.parameters)
        cols = {p.name: theta[:, i] for i, p in enumerate(self.parameters)}
        translation = base.joint_translation.clone()
        for (j, fld), name in groups.joint.items():
            if fld.startswith("offset_"):
                translation[:, j, _AXIS[fld[-1]]] = cols[name]
        inertia = _apply_links(robot, groups, cols, base.inertia, translation)
        joint_values = {f: getattr(base, f).clone() for f in _JOINT_VECTOR_FIELDS}
        for (j, fld), name in groups.joint.items():
            if fld in joint_values:
                joint_values[fld][:, j] = cols[name]
        gravity = _apply_gravity(groups, cols, base.gravity)
        params = replace(
            base, inertia=inertia, joint_translation=translation, gravity=gravity, **joint_values
        )
        for prefix, names in groups.resolved.items():
            params = robot.resolvers[prefix].apply(robot, {k: cols[k] for k in names}, params)
        return params


def _yaml_text(source: str | Path) -> tuple[str, str]:
    path = Path(source)
    is_file = False
    try:
        is_file = path.is_file()
    except OSError:
        is_file = False
    if is_file:
        return path.read_text(encoding="utf-8"), str(path)
    if isinstance(source, str) and ("\n" in source or ":" in source):
        return source, "YAML text"
    raise ParameterSpecError(f"parameter spec file {source} does not exist")


@dataclass
class _Groups:
    """Parameter names sorted by what they act on (robot-bound view of a spec)."""

    link: dict[tuple[int, str], str] = field(default_factory=dict)
    joint: dict[tuple[int, str], str] = field(default_factory=dict)
    gravity: dict[str, str] = field(default_factory=dict)
    resolved: dict[str, list[str]] = field(default_factory=dict)


def _group(robot: RobotModel, parameters: Sequence[Parameter]) -> _Groups:
    groups = _Groups()
    resolvers = robot.resolvers
    for p in parameters:
        prefix, fld = p.prefix, p.field
        if prefix in resolvers:
            groups.resolved.setdefault(prefix, []).append(p.name)
        elif prefix == "gravity" and fld in _GRAVITY_FIELDS:
            groups.gravity[fld] = p.name
        elif prefix in robot.body_names and fld in _LINK_FIELDS:
            groups.link[(robot.body_names.index(prefix), fld)] = p.name
        elif prefix in robot.joint_names and fld in _JOINT_FIELDS:
            groups.joint[(robot.joint_names.index(prefix), fld)] = p.name
        else:
            raise ParameterSpecError(
                f"parameter {p.name!r} does not match robot {robot.name!r}: moving links "
                f"{robot.body_names} take {sorted(_LINK_FIELDS)}, joints {robot.joint_names} "
                f"take {sorted(_JOINT_FIELDS)}, 'gravity' takes {sorted(_GRAVITY_FIELDS)}, "
                f"resolver prefixes {sorted(resolvers)}"
            )
    for b in {b for (b, _) in groups.link}:
        fields_b = {f for (bb, f) in groups.link if bb == b}
        link = robot.body_names[b]
        if any(f.startswith("log_cholesky_") for f in fields_b) and any(
            not f.startswith("log_cholesky_") for f in fields_b
        ):
            raise ParameterSpecError(
                f"link {link!r}: log_cholesky_* parameters cannot be combined with "
                f"{sorted(f for f in fields_b if not f.startswith('log_cholesky_'))}"
            )
        if "length" in fields_b:
            com_fields = sorted(f for f in fields_b if f.startswith("com_"))
            children = _children(robot, b)
            offsets = sorted(
                groups.joint[(c, f)]
                for c in children
                for f in ("offset_x", "offset_y", "offset_z")
                if (c, f) in groups.joint
            )
            if com_fields or offsets:
                raise ParameterSpecError(
                    f"link {link!r}: 'length' cannot be combined with {com_fields + offsets}"
                )
    return groups


def _children(robot: RobotModel, b: int) -> list[int]:
    return [int(c) for c in np.nonzero(robot.parents == b)[0]]


def _nominal_length(robot: RobotModel, b: int) -> tuple[float, np.ndarray]:
    """(nominal length, [3] unit direction) of link b (first child joint, else the COM)."""
    children = _children(robot, b)
    if children:
        vec = robot.placement_translations[children[0]]
    else:
        pi = robot.nominal_inertia()[b]
        vec = pi[1:4] / pi[0]
    length = float(np.linalg.norm(vec))
    if length <= 0.0:
        raise ParameterSpecError(
            f"link {robot.body_names[b]!r}: nominal length is zero; 'length' is undefined"
        )
    return length, vec / length


def _apply_links(
    robot: RobotModel,
    groups: _Groups,
    cols: Mapping[str, Tensor],
    nominal_inertia: Tensor,
    translation: Tensor,
) -> Tensor:
    """Updated [N, nv, 10] inertias; also rescales ``translation`` in place for ``length``."""
    if not groups.link:
        return nominal_inertia
    inertia = nominal_inertia.clone()
    for b in sorted({b for (b, _) in groups.link}):
        fields_b = {f: name for (bb, f), name in groups.link.items() if bb == b}
        if any(f.startswith("log_cholesky_") for f in fields_b):
            theta_lc = log_cholesky_from_dynamic_params(nominal_inertia[:, b]).clone()
            for f, name in fields_b.items():
                theta_lc[:, int(f.rsplit("_", 1)[1])] = cols[name]
            inertia[:, b] = dynamic_params_from_log_cholesky(theta_lc)
            continue
        mass, com, inertia_com = body_from_dynamic_params(nominal_inertia[:, b])
        mass, com = mass.clone(), com.clone()
        i6 = vector_from_inertia(inertia_com)
        for f, name in fields_b.items():
            if f == "mass":
                mass = cols[name]
            elif f.startswith("com_"):
                com[:, _AXIS[f[-1]]] = cols[name]
            elif f in _INERTIA_INDEX:
                i6[:, _INERTIA_INDEX[f]] = cols[name]
        if "length" in fields_b:
            length0, _ = _nominal_length(robot, b)
            scale = (cols[fields_b["length"]] / length0).unsqueeze(-1)
            com = com * scale
            for c in _children(robot, b):
                translation[:, c] = translation[:, c].clone() * scale
        inertia[:, b] = dynamic_params_from_body(mass, com, inertia_from_vector(i6))
    return inertia


def _apply_gravity(groups: _Groups, cols: Mapping[str, Tensor], gravity: Tensor) -> Tensor:
    if not groups.gravity:
        return gravity
    g = gravity.clone()
    for axis in ("x", "y", "z"):
        if axis in groups.gravity:
            g[:, _AXIS[axis]] = cols[groups.gravity[axis]]
    for fld, axis in (("tilt_x", (1.0, 0.0, 0.0)), ("tilt_y", (0.0, 1.0, 0.0))):
        if fld in groups.gravity:
            rot = axis_angle_rotation(torch.tensor(axis).to(g), cols[groups.gravity[fld]])
            g = (rot @ g.unsqueeze(-1)).squeeze(-1)
    return g


def _nominal_value(robot: RobotModel, p: Parameter, base: DynamicParameters) -> float:
    """Nominal value of one parameter on ``robot`` (no explicit ``nominal`` given)."""
    groups = _group(robot, [p])
    fld = p.field
    if groups.resolved:
        return float(robot.resolvers[p.prefix].nominal(robot, p.name))
    if groups.gravity:
        return 0.0 if fld.startswith("tilt_") else float(base.gravity[0, _AXIS[fld]])
    if groups.joint:
        ((j, _),) = groups.joint
        if fld.startswith("offset_"):
            return float(base.joint_translation[0, j, _AXIS[fld[-1]]])
        return float(getattr(base, fld)[0, j])
    ((b, _),) = groups.link
    pi = base.inertia[0, b]
    if fld.startswith("log_cholesky_"):
        return float(log_cholesky_from_dynamic_params(pi)[int(fld.rsplit("_", 1)[1])])
    if fld == "length":
        return _nominal_length(robot, b)[0]
    mass, com, inertia_com = body_from_dynamic_params(pi)
    if fld == "mass":
        return float(mass)
    if fld.startswith("com_"):
        return float(com[_AXIS[fld[-1]]])
    return float(vector_from_inertia(inertia_com)[_INERTIA_INDEX[fld]])


@dataclass(frozen=True)
class InertialGroup:
    """Every listed moving link's whole body free, physically consistent: the parameters
    ``<link>/log_cholesky_0..9`` with Gaussian priors about the robot's values.

    The log-Cholesky coordinates (:func:`dynid.model.spatial.dynamic_params_from_log_cholesky`)
    are α = ½ ln m and the logarithms d1..d3 of the diagonal of the body's scaled Cholesky factor
    (dimensionless), then s12, s23, s13 and the centre of mass t (m, joint frame).

    Attributes:
        links: the links (``None``: every moving link of the robot).
        log_std: prior standard deviation of α and d1..d3 (``log_cholesky_0..3``); 0.5 lets the
            mass vary by a factor e^{±1} at one σ.
        length_std: prior standard deviation (m) of s12, s23, s13 and t (``log_cholesky_4..9``).
        width: the bounds lie at the prior mean ± ``width`` standard deviations.
    """

    links: tuple[str, ...] | None = None
    log_std: float = 0.5
    length_std: float = 0.05
    width: float = 6.0

    def __post_init__(self) -> None:
        if not (self.log_std > 0 and self.length_std > 0 and self.width > 0):
            raise ParameterSpecError(
                "inertials group: log_std, length_std and width must be > 0, got "
                f"{self.log_std}, {self.length_std}, {self.width}"
            )

    def parameters(self, robot: RobotModel) -> list[Parameter]:
        """The group's parameters on ``robot``.

        Raises:
            ParameterSpecError: a link that is not a moving link of ``robot``.
        """
        links = list(self.links) if self.links is not None else list(robot.body_names)
        unknown = [link for link in links if link not in robot.body_names]
        if unknown:
            raise ParameterSpecError(
                f"inertials group: {unknown} are not moving links of robot {robot.name!r} "
                f"(has {robot.body_names})"
            )
        inertia = torch.as_tensor(robot.nominal_inertia(), dtype=torch.float64)
        out = []
        for link in links:
            theta = log_cholesky_from_dynamic_params(inertia[robot.body_names.index(link)])
            for k, mean in enumerate(theta.tolist()):
                std = self.log_std if k < 4 else self.length_std
                out.append(
                    Parameter(
                        f"{link}/log_cholesky_{k}",
                        mean - self.width * std,
                        mean + self.width * std,
                        prior="gaussian",
                        mean=mean,
                        std=std,
                    )
                )
        return out


@dataclass(frozen=True)
class JointGroup:
    """The same joint parameters free on every listed joint.

    Attributes:
        joints: the joints (``None``: every movable joint of the robot).
        fields: field (``damping``, ``coulomb``, ``torque_offset``, ...) → the keys of a
            parameter entry other than its name (``lower``, ``upper``, ``unit``, ``prior``,
            ``mean``, ``std``, ``nominal``); a Gaussian prior without ``mean`` is centred on the
            robot's value.
    """

    fields: Mapping[str, Mapping[str, Any]]
    joints: tuple[str, ...] | None = None

    def parameters(self, robot: RobotModel) -> list[Parameter]:
        """The group's parameters on ``robot``.

        Raises:
            ParameterSpecError: an unknown joint or field, or an invalid entry.
        """
        joints = list(self.joints) if self.joints is not None else list(robot.joint_names)
        unknown = [j for j in joints if j not in robot.joint_names]
        if unknown:
            raise ParameterSpecError(
                f"joints group: {unknown} are not movable joints of robot {robot.name!r} "
                f"(has {robot.joint_names})"
            )
        bad = sorted(set(self.fields) - set(_JOINT_FIELDS))
        if bad:
            raise ParameterSpecError(
                f"joints group: fields {bad} are not joint parameters ({sorted(_JOINT_FIELDS)})"
            )
        base = nominal_parameters(robot)
        out = []
        for joint in joints:
            for fld, entry in self.fields.items():
                keys = sorted(set(entry) - (_ENTRY_KEYS - {"name"}))
                if keys:
                    raise ParameterSpecError(f"joints group: field {fld!r}: unknown keys {keys}")
                values = dict(entry)
                name = f"{joint}/{fld}"
                if values.get("prior") == "gaussian" and values.get("mean") is None:
                    probe = Parameter(name, 0.0, 1.0)
                    values["mean"] = _nominal_value(robot, probe, base)
                try:
                    out.append(Parameter(name, **values))
                except TypeError as exc:
                    raise ParameterSpecError(f"joints group: field {fld!r}: {exc}") from None
        return out
