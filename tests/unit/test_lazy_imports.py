"""What a command loads: the command line imports no plotting, filtering or distance library
until it uses one, and scoring a torque problem loads none of torch's compiler stack."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap


def _loaded(script: str, modules: list[str]) -> list[str]:
    """The ``modules`` a fresh interpreter has loaded after running ``script``."""
    probe = (
        textwrap.dedent(script)
        + f"\nimport sys\nprint([m for m in {modules!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_the_command_line_loads_no_plotting_filtering_or_distance_library() -> None:
    heavy = ["matplotlib", "scipy.signal", "scipy.spatial"]
    assert _loaded("import dynid.cli", heavy) == []


def test_scoring_a_torque_problem_loads_no_compiler_stack() -> None:
    """Residuals, their Jacobian (LM) and the likelihood's gradient (CSVGD) on a torque problem:
    no forward-mode pass (whose mixed dual/plain operations import ``torch._dynamo``) and no
    ``torch.broadcast_shapes`` (which imports sympy)."""
    script = """
        import numpy as np, torch
        from dynid.data.trajectory import Dataset, Trajectory
        from dynid.model.integrate import TorqueControl
        from dynid.model.observe import JointObservation
        from dynid.model.params import Parameter, ParameterSpec
        from dynid.model.robot import load_robot
        from dynid.problem import LikelihoodSettings, Problem

        robot = load_robot("double_pendulum")
        t = np.arange(2001) * 1e-3
        q = np.stack([0.8 * np.sin(3.0 * t), 0.5 * np.cos(2.0 * t)], axis=1)
        dq = np.stack([2.4 * np.cos(3.0 * t), -1.0 * np.sin(2.0 * t)], axis=1)
        traj = Trajectory(t=t, q=q, dq=dq, joint_names=robot.joint_names, effort=np.ones_like(q))
        obs = JointObservation(robot, velocities=True)
        spec = ParameterSpec([Parameter("link1/mass", 0.5, 2.0), Parameter("joint2/damping", 0, 1)])
        problem = Problem(
            robot=robot, spec=spec, dataset=Dataset([traj]), dt=1e-3,
            control=TorqueControl(None), control_names=["effort"], observe=obs,
            obs_names=obs.names,
            likelihood=LikelihoodSettings(kind="inverse_dynamics", torque_std=0.01, stride=10),
        )
        theta = torch.tensor([[1.0, 0.1]], dtype=torch.float64)
        objective = problem.objective
        objective.residuals(theta)
        objective.jacobian(theta)
        lik = objective.torque_likelihood
        z = lik.augment(theta).requires_grad_(True)
        lik.evaluate(z).log_likelihood.sum().backward()
        assert z.grad is not None and bool(torch.isfinite(z.grad).all())
    """
    assert _loaded(script, ["torch._dynamo", "sympy", "scipy.signal"]) == []
