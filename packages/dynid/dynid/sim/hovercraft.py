"""The hovercraft of the steady paper (Wei et al.): a planar vehicle with two thrusters and drag.

State ``x = (p_x, p_y, θ, v_x, v_y, ω)``: position (m) and heading (rad) in the world frame,
velocity (m/s) in the world frame and turn rate (rad/s). Controls ``u = (u_l, u_r)``: the left and
right thrust (N). Body-frame accelerations, with body velocity
``(v_x^b, v_y^b) = R(θ)ᵀ (v_x, v_y)``::

    a_x = (u_l + u_r − c_x v_x^b |v_x^b|) / m        c_x = 0.015
    a_y = −c_y v_y^b |v_y^b| / m                      c_y = 0.03
    α   = (u_r − u_l − c_ω ω) / m_r                   c_ω = 0.07,  m = m_r = 1.5

plus Gaussian disturbances ``σ = (0.08, 0.08, 0.05)`` (m/s², m/s², rad/s²) on the accelerations,
integrated by explicit Euler at ``dt = 0.1`` s over 0–10 s (101 states, 100 controls).

Controls are piecewise linear through knots ``(t, u_l, u_r)`` (:data:`KNOTS`); knots strictly inside
0.5–12 s are perturbed by ``0.5 σ N(0, 1)`` with ``σ_l = 0.2``, ``σ_r = 0.1`` (``0.2`` at 9 and
10 s), and with probability 0.6 the left and right thrust are swapped. Initial states: position
``N((0.5, 1), 2² I)``, heading ``N(π/5, π²)``, velocity ``(0.25 + 0.3 n, 0.1 + 0.2 n)``, turn rate
``π/50 + 0.1 π n`` with independent ``n ~ N(0, 1)``. The filters start from
:func:`initial_distribution` about the true initial state (the paper's code: position and
velocity std 0.2, heading 8°, turn rate 0.1). Observations: bearings to four landmarks
(:data:`LANDMARKS`) relative to the heading, with ``5°`` Gaussian noise.

The hovercraft is a vehicle, not a URDF robot: :func:`simulate` returns arrays, and
:class:`HovercraftDynamics` is the ground truth as a :class:`~dynid.estimators.steady.Kinodynamics`
(with ``drag=False`` and doubled noise it is the paper's hand-written model, *Hand*).
:func:`record` is the scenario ``hovercraft`` of ``dynid simulate``: the same runs as a bag.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynid.data import (
    BagLayout,
    CommandTopic,
    Dataset,
    JointStateTopic,
    StorageFormat,
    Trajectory,
)
from dynid.data import messages as msgs
from dynid.model.kinodynamics import PlanarKinodynamics
from dynid.sim.common import SIM_T0_NS, SimulationError, check_positive, finish, time_grid

__all__ = [
    "DRAG_COEFFICIENTS",
    "DT",
    "HAND_STD",
    "INITIAL_STD",
    "KNOTS",
    "LANDMARKS",
    "LAYOUT",
    "MASS",
    "SPLITS",
    "TRUE_STD",
    "HovercraftData",
    "HovercraftDynamics",
    "bearings_to",
    "controls",
    "initial_distribution",
    "initial_states",
    "record",
    "simulate",
]

DT = 0.1
"""Time step (s)."""
DURATION_S = 10.0
KNOTS = np.array(
    [
        [0.0, 0.0, 0.0],
        [0.5, 1.0, 0.4],
        [2.0, 0.0, 0.0],
        [3.0, 0.7, 0.5],
        [5.0, 1.1, 0.5],
        [6.0, 0.0, 0.0],
        [9.0, 0.4, 1.0],
        [10.0, 0.0, 0.5],
        [12.0, 0.0, 0.0],
        [15.0, 0.0, 0.0],
    ]
)
"""Control knots ``(t [s], u_l [N], u_r [N])``."""
LANDMARKS = np.array([[12.0, -8.0], [-6.0, -4.0], [-4.0, 10.0], [6.0, 7.0]])
"""Landmark positions (m, world frame)."""
BEARING_STD = math.radians(5.0)
TRUE_STD = (0.08, 0.08, 0.05)
"""Disturbance std of the true accelerations ``(a_x, a_y, α)``."""
HAND_STD = (0.2, 0.2, 0.1)
"""Disturbance std of the hand-written model (no drag)."""
MASS = 1.5
"""``m`` (kg) and ``m_r`` (kg·m²) of the true model."""
DRAG_COEFFICIENTS = (0.015, 0.03, 0.07)
"""``(c_x, c_y, c_ω)`` of the true model."""
SPLITS = {"hov": (16, 16, 32), "hov_plus": (160, 32, 32)}
"""Train / validation / test trajectories of the paper's two data sets."""
SCENARIO = "hovercraft"
POSE = ("x", "y", "heading")
"""The planar coordinates a recording names as joints: position (m) and heading (rad)."""
THRUSTS = ("left", "right")
LAYOUT = BagLayout(
    joint_states=JointStateTopic("/hovercraft/state", joints=POSE),
    commands=(CommandTopic("/hovercraft/thrust", msgs.FLOAT64_MULTI_ARRAY, names=THRUSTS),),
)
"""How :func:`record`'s bags are read."""


class HovercraftDynamics(PlanarKinodynamics):
    """The hovercraft's body-frame accelerations (module notes) as a planar kinodynamic model.

    Args:
        drag: include the drag terms (``False``: the hand-written model).
        std: disturbance std ``(a_x, a_y, α)``.
        mass, rot_mass: ``m`` (kg) and ``m_r`` (kg·m²).
        drag_coefficients: ``(c_x, c_y, c_ω)``.
    """

    def __init__(
        self,
        *,
        drag: bool = True,
        std: tuple[float, float, float] = TRUE_STD,
        mass: float = MASS,
        rot_mass: float = MASS,
        drag_coefficients: tuple[float, float, float] = DRAG_COEFFICIENTS,
    ) -> None:
        super().__init__()
        self.drag = bool(drag)
        self.mass = check_positive("mass", mass)
        self.rot_mass = check_positive("rot_mass", rot_mass)
        self.register_buffer("coefficients", torch.tensor(drag_coefficients, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32))

    def acceleration(
        self, heading: torch.Tensor, body_velocity: torch.Tensor, control: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        vx, vy, w = body_velocity.unbind(-1)
        ul, ur = control.unbind(-1)
        cx, cy, cw = self.coefficients.to(body_velocity).unbind(-1)
        k = 1.0 if self.drag else 0.0
        ax = (ul + ur - k * cx * vx * vx.abs()) / self.mass
        ay = -k * cy * vy * vy.abs() / self.mass
        alpha = (ur - ul - k * cw * w) / self.rot_mass
        mean = torch.stack([ax, ay, alpha], dim=-1)
        return mean, self.std.to(mean).expand_as(mean)


@dataclass
class HovercraftData:
    """Simulated runs.

    Attributes:
        states: ``[K, T + 1, 6]`` true states (module notes).
        controls: ``[K, T, 2]`` thrusts ``(u_l, u_r)`` (N) held over each step.
        observations: ``[K, T + 1, 4]`` noisy bearings (rad) to :data:`LANDMARKS`.
        dt: time step (s).
    """

    states: np.ndarray
    controls: np.ndarray
    observations: np.ndarray
    dt: float = DT

    def split(self, sizes: tuple[int, ...]) -> list[HovercraftData]:
        """Consecutive parts of ``sizes`` runs each (e.g. train / validation / test)."""
        if sum(sizes) > self.states.shape[0]:
            raise SimulationError(f"split {sizes} needs {sum(sizes)} runs, have {len(self)}")
        edges = np.cumsum([0, *sizes])
        return [
            HovercraftData(self.states[a:b], self.controls[a:b], self.observations[a:b], self.dt)
            for a, b in itertools.pairwise(edges)
        ]

    def __len__(self) -> int:
        return int(self.states.shape[0])


def controls(rng: np.random.Generator, times: np.ndarray) -> np.ndarray:
    """``[len(times), 2]`` thrusts of one run: the perturbed, possibly swapped knots
    (module notes) interpolated linearly at ``times`` (s)."""
    knots = KNOTS.copy()
    inner = (knots[:, 0] >= 0.5) & (knots[:, 0] <= 12.0)
    sigma_r = np.where(np.isin(knots[:, 0], (9.0, 10.0)), 0.2, 0.1)
    noise = rng.standard_normal((len(knots), 2))
    knots[inner, 1] += 0.5 * 0.2 * noise[inner, 0]
    knots[inner, 2] += 0.5 * sigma_r[inner] * noise[inner, 1]
    if rng.random() < 0.6:
        knots[:, [1, 2]] = knots[:, [2, 1]]
    return np.stack([np.interp(times, knots[:, 0], knots[:, c]) for c in (1, 2)], axis=-1)


def initial_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """``[n, 6]`` initial states drawn from the scenario's distribution (module notes)."""
    z = rng.standard_normal((n, 6))
    return np.stack(
        [
            0.5 + 2.0 * z[:, 0],
            1.0 + 2.0 * z[:, 1],
            math.pi / 5 + math.pi * z[:, 2],
            0.25 + 0.3 * z[:, 3],
            0.1 + 0.2 * z[:, 4],
            math.pi / 50 + 0.1 * math.pi * z[:, 5],
        ],
        axis=-1,
    )


INITIAL_STD = (0.2, 0.2, math.radians(8.0), 0.2, 0.2, 0.1)
"""Std of the filters' initial-state distribution about the true initial state."""


def initial_distribution(
    x0: torch.Tensor, n: int, generator: torch.Generator | None
) -> torch.Tensor:
    """``[n, 6]`` draws about the true initial state ``x0 [6]`` (std :data:`INITIAL_STD`)."""
    noise = torch.randn((n, 6), generator=generator, dtype=x0.dtype)
    return x0 + noise * torch.tensor(INITIAL_STD, dtype=x0.dtype)


def simulate(seed: int, runs: int, *, duration_s: float = DURATION_S) -> HovercraftData:
    """``runs`` hovercraft runs of ``duration_s`` at :data:`DT`, deterministic under ``seed``.

    Raises:
        SimulationError: ``runs`` < 1 or a non-positive duration.
    """
    if runs < 1:
        raise SimulationError(f"runs must be ≥ 1, got {runs}")
    steps = round(check_positive("duration_s", duration_s) / DT)
    rng = np.random.default_rng(seed)
    times = np.arange(steps) * DT
    u = np.stack([controls(rng, times) for _ in range(runs)])
    x0 = initial_states(rng, runs)
    model = HovercraftDynamics().double()
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    states = [torch.as_tensor(x0)]
    u_t = torch.as_tensor(u)
    with torch.no_grad():
        for t in range(steps):
            states.append(model.sample(states[-1], u_t[:, t], DT, generator))
    x = torch.stack(states, dim=1).numpy()
    bearings = bearings_to(x, LANDMARKS)
    bearings = bearings + BEARING_STD * rng.standard_normal(bearings.shape)
    return HovercraftData(x, u, np.angle(np.exp(1j * bearings)))


def bearings_to(states: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """``[..., L]`` bearings (rad, in ``(−π, π]``) of ``landmarks [L, 2]`` seen from
    ``states [..., ≥ 3]`` (position, heading)."""
    dx = landmarks[:, 0] - states[..., :1]
    dy = landmarks[:, 1] - states[..., 1:2]
    return np.angle(np.exp(1j * (np.arctan2(dy, dx) - states[..., 2:3])))


def record(
    seed: int,
    out_path: str | Path | None = None,
    *,
    runs: int = 16,
    duration_s: float = DURATION_S,
    storage: StorageFormat | str = StorageFormat.MCAP,
) -> tuple[Dataset, dict[str, Any]]:
    """The runs of :func:`simulate` as a recording (the scenario ``hovercraft``).

    Each run is one trajectory at :data:`DT`: the true pose as the joint states of the planar
    coordinates :data:`POSE` (``/hovercraft/state``: position in m, heading in rad; velocities in
    m/s and rad/s, world frame) and the thrusts (N) held over each step on
    ``/hovercraft/thrust`` (``Float64MultiArray`` entries ``left``, ``right``; the last sample
    repeats the last step's). The bearings are not recorded.

    Args:
        seed: seeds the runs as in :func:`simulate`.
        out_path: bag directory to write (with ``<bag>.truth.yaml``); ``None`` writes nothing.
        runs, duration_s: how many runs, and how long each is (s).
        storage: bag storage format.

    Returns:
        The dataset and the truth mapping (``parameters``: the true model's mass, rotational
        mass, drag coefficients and disturbance std).

    Raises:
        SimulationError: ``runs`` < 1 or a non-positive duration.
    """
    data = simulate(seed, runs, duration_s=duration_s)
    t = time_grid(data.states.shape[1], DT)
    gap_ns = round((t[-1] + 1.0) * 1e9)
    trajectories = []
    for k in range(len(data)):
        thrust = np.concatenate([data.controls[k], data.controls[k, -1:]])
        trajectories.append(
            Trajectory(t=t, q=data.states[k, :, :3], joint_names=list(POSE),
                       dq=data.states[k, :, 3:], command=thrust, command_names=list(THRUSTS),
                       meta={"robot": SCENARIO, "scenario": SCENARIO,
                             "t0_ns": SIM_T0_NS + k * gap_ns})
        )  # fmt: skip
    drag = dict(zip(("x", "y", "turn"), DRAG_COEFFICIENTS, strict=True))
    std = dict(zip(("a_x", "a_y", "alpha"), TRUE_STD, strict=True))
    truth = {
        "scenario": SCENARIO,
        "seed": seed,
        "robot": SCENARIO,
        "parameters": {
            "mass": MASS,
            "rot_mass": MASS,
            **{f"drag/{axis}": value for axis, value in drag.items()},
            **{f"std/{axis}": value for axis, value in std.items()},
        },
        "settings": {"runs": runs, "duration_s": duration_s, "dt": DT},
    }
    return finish(Dataset(trajectories, {"scenario": SCENARIO}), truth, LAYOUT, out_path, storage)
