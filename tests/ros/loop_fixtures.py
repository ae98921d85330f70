"""The loop's test payload, shared by the DDS test (tests/ros/test_exciter_loop.py) and the
exciter's test; the motion comes from :func:`dynid_bench.robot_loop.write_motion`."""

from __future__ import annotations

MASS = 0.85  # kg, on panda_link8 (the flange)
COM = [0.025, -0.015, 0.07]  # m, flange frame
INERTIA = [2e-3, 2.5e-3, 1.5e-3, 0.0, 0.0, 0.0]  # ixx iyy izz ixy ixz iyz about the COM
