"""Record a bag from a simulated UR5 carrying a payload, as a user of a real arm would record one.

Stands in for ``ros2 bag record /joint_states`` on a torque-sensing arm: a UR5 (the URDF of
``example-robot-data``) carries a rigid payload on ``tool0`` through a Fourier excitation, and
``/joint_states`` (``sensor_msgs/msg/JointState``: position rad, velocity rad/s, effort N·m) is
written at 500 Hz with ``rosbags``. The efforts are the payload-carrying arm's inverse dynamics
computed by Pinocchio, plus sensor noise; nothing of dynid is used, so the fit that follows
sees only the bag and the problem file.

Usage::

    python record_ur5.py ur5_robot.urdf ur5_payload [--duration 20] [--seed 0]

The true payload is printed and written beside the bag as ``<bag>.truth.yaml``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)
HOME = np.array([0.0, -1.2, 1.4, -1.6, -1.57, 0.0])  # rad
#: The payload: mass (kg), centre of mass (m, tool0 frame), inertia about it (kg·m², tool0 axes).
MASS = 2.0
COM = np.array([0.01, -0.02, 0.08])
INERTIA = np.diag([4.0e-3, 5.0e-3, 3.0e-3])
RATE_HZ = 500.0
OMEGA = 0.1 * 2.0 * np.pi  # rad/s, base frequency of the excitation (10 s period)
HARMONICS = 5


def excitation(
    t: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, velocities, accelerations ``[T, 6]`` of a 5-harmonic Fourier excitation about
    ``HOME`` (at most 0.6 rad away, 1 rad/s per joint)."""
    k = np.arange(1, HARMONICS + 1)
    a = rng.standard_normal((6, HARMONICS)) / k
    b = rng.standard_normal((6, HARMONICS)) / k
    phase = OMEGA * k[None, :] * t[:, None]  # [T, L]
    q = np.sin(phase) @ a.T + np.cos(phase) @ b.T
    dq = (np.cos(phase) * OMEGA * k) @ a.T - (np.sin(phase) * OMEGA * k) @ b.T
    ddq = -(np.sin(phase) * (OMEGA * k) ** 2) @ a.T - (np.cos(phase) * (OMEGA * k) ** 2) @ b.T
    scale = np.minimum(0.6 / np.abs(q).max(axis=0), 1.0 / np.abs(dq).max(axis=0))
    return HOME + q * scale, dq * scale, ddq * scale


def arm_with_payload(urdf: Path) -> tuple[pin.Model, pin.Data]:
    """The URDF's arm with the payload welded to ``tool0``."""
    model = pin.buildModelFromUrdf(str(urdf))
    tool0 = model.frames[model.getFrameId("tool0")]
    payload = pin.Inertia(MASS, COM, INERTIA)
    model.appendBodyToJoint(tool0.parentJoint, payload, tool0.placement)
    return model, model.createData()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urdf", type=Path)
    parser.add_argument("bag", type=Path, help="bag directory to write (mcap storage)")
    parser.add_argument("--duration", type=float, default=20.0, help="s (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    t = np.arange(round(args.duration * RATE_HZ) + 1) / RATE_HZ
    q, dq, ddq = excitation(t, rng)
    model, data = arm_with_payload(args.urdf)
    tau = np.stack([pin.rnea(model, data, *x) for x in zip(q, dq, ddq, strict=True)])
    q_meas = q + 1e-4 * rng.standard_normal(q.shape)  # encoder noise, rad
    dq_meas = dq + 1e-3 * rng.standard_normal(q.shape)  # rad/s
    tau_meas = tau + 0.1 * rng.standard_normal(q.shape)  # torque noise, N·m

    store = get_typestore(Stores.ROS2_JAZZY)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    t0_ns = 1_700_000_000 * 10**9
    with Writer(args.bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=store)
        for k, tk in enumerate(t):
            stamp = t0_ns + round(tk * 1e9)
            msg = JointState(
                header=Header(stamp=Time(sec=stamp // 10**9, nanosec=stamp % 10**9), frame_id=""),
                name=list(JOINTS),
                position=q_meas[k],
                velocity=dq_meas[k],
                effort=tau_meas[k],
            )
            writer.write(conn, stamp, store.serialize_cdr(msg, JointState.__msgtype__))

    truth = {
        "parameters": {
            "payload/mass": MASS,
            **{f"payload/com_{axis}": float(c) for axis, c in zip("xyz", COM, strict=True)},
        }
    }
    Path(f"{args.bag}.truth.yaml").write_text(yaml.safe_dump(truth, sort_keys=False))
    print(f"wrote {args.bag}: {len(t)} /joint_states messages over {args.duration:g} s")
    print(f"true payload: {MASS} kg at {COM.tolist()} m in tool0")


if __name__ == "__main__":
    main()
