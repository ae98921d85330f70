"""Levenberg–Marquardt joint state and parameter estimation on a torque-driven double pendulum,
and what it reports about parameters the data did not excite."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml

from dynid.cli import _print_table
from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.lm import LM, LMProblem
from dynid.estimators.registry import make_estimator
from dynid.model.integrate import TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.problem import LikelihoodSettings, Problem
from dynid.report import _table, parameter_rows

TRUTH = {"link1/mass": 1.2, "link2/mass": 0.8, "joint2/damping": 0.05, "link2/com_y": 0.0}
BOUNDS = {
    "link1/mass": (0.5, 2.0),
    "link2/mass": (0.4, 1.6),
    "joint2/damping": (0.0, 0.2),
    "link2/com_y": (-0.5, 0.5),
}
SETTINGS = LikelihoodSettings(obs_std=(1e-4, 1e-4), torque_std=0.01)


def _problem(
    names=("link1/mass", "link2/mass", "joint2/damping"),
    steps: int = 200,
    bounds: dict | None = None,
    noise: float = 0.0,
    dt: float = 0.01,
) -> tuple[Problem, np.ndarray]:
    """Recorded joint positions of the pendulum driven by known torques (``dt`` steps),
    simulated at the truth, and the true states ``[T, 4]``."""
    robot = load_robot("double_pendulum")
    limits = {**BOUNDS, **(bounds or {})}
    spec = ParameterSpec([Parameter(n, *limits[n]) for n in names])
    t = np.arange(steps + 1) * dt
    effort = np.stack([3.0 * np.sin(2 * t), 1.5 * np.cos(3 * t)], axis=1)
    traj = Trajectory(
        t=t,
        q=np.tile([0.6, -0.2], (t.size, 1)),
        joint_names=robot.joint_names,
        dq=np.zeros((t.size, 2)),
        effort=effort,
    )
    obs = JointObservation(robot)
    problem = Problem(
        robot=robot,
        spec=spec,
        dataset=Dataset([traj]),
        dt=dt,
        control=TorqueControl(None),
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
        likelihood=SETTINGS,
    )
    truth = torch.tensor([[TRUTH[n] for n in names]], dtype=torch.float64)
    both = JointObservation(robot, velocities=True)
    states = replace(problem, observe=both, obs_names=both.names, likelihood=LikelihoodSettings())
    states = states.objective.simulate(truth, traj)[0]
    x = states.numpy()
    rng = np.random.default_rng(0)
    recorded = traj.replace(q=x[:, :2] + rng.normal(0.0, noise, size=(t.size, 2)), dq=None)
    return problem.with_dataset([recorded]), x


def _theta(names) -> torch.Tensor:
    return torch.tensor([TRUTH[n] for n in names], dtype=torch.float64)


def test_truth_is_a_fixed_point_and_lm_recovers_it_from_a_30_percent_perturbation() -> None:
    problem, x = _problem()
    names = problem.spec.names
    lm = LMProblem(problem, initial_state_std=1e6)
    xi = lm.initial(_theta(names))
    xi[: lm.n_states] = torch.as_tensor(x).reshape(-1)
    r, _ = lm.linearise(xi)
    assert np.abs(r).max() < 1e-6  # noiseless: every impulse and observation residual vanishes
    est = LM(initial_state_std=1e6, cutoff_hz=0)
    est.init(problem, warm_start=_point(names, _theta(names)))
    est._xi = xi.clone()
    est.step(3)  # LM does not leave a fixed point
    np.testing.assert_allclose(est.posterior().map(), _theta(names).numpy(), rtol=1e-9)

    start = _theta(names) * torch.tensor([1.3, 0.7, 1.3], dtype=torch.float64)
    warm = make_estimator("lm", max_iterations=40, cutoff_hz=0).fit(
        problem, warm_start=_point(names, start)
    )
    np.testing.assert_allclose(warm.map(), _theta(names).numpy(), rtol=1e-5, atol=1e-6)
    assert warm.meta["converged"]
    assert warm.meta["iterations"] <= 15
    assert warm.meta["unidentified"] == []


def _point(names, theta: torch.Tensor):
    from dynid.posterior import Posterior

    return Posterior(particles=theta.numpy()[None], names=list(names), units=[""] * len(names))


def test_sparse_jacobian_equals_dense_finite_differences() -> None:
    problem, _ = _problem(steps=12)
    lm = LMProblem(problem)
    xi = lm.initial(_theta(problem.spec.names) * 1.1)
    xi = xi + 0.01 * torch.sin(torch.arange(xi.numel(), dtype=torch.float64))
    _, J = lm.linearise(xi)
    h = 1e-6
    dense = np.stack(
        [
            ((lm.residuals(xi + h * e) - lm.residuals(xi - h * e)) / (2 * h)).numpy()
            for e in torch.eye(xi.numel(), dtype=torch.float64)
        ],
        axis=1,
    )
    np.testing.assert_allclose(J.toarray(), dense, rtol=1e-6, atol=1e-5)
    # block structure of eq. 3.21: an impulse row touches two consecutive states and the parameters
    first = J[0].indices
    assert set(first) <= set(range(8)) | set(range(lm.n_states, lm.dim))


def test_jacobian_in_small_batches_equals_one_batch(monkeypatch) -> None:
    """The Jacobian–vector products run on copies of the inputs, at most ``JVP_BATCH`` rows per
    call; splitting them into more calls changes nothing."""
    from dynid.estimators import lm as lm_module

    problem, _ = _problem(steps=12)
    lm = LMProblem(problem)
    xi = lm.initial(_theta(problem.spec.names) * 1.1)
    _, whole = lm.linearise(xi)
    monkeypatch.setattr(lm_module, "JVP_BATCH", 12)  # one coordinate per call
    _, split = lm.linearise(xi)
    np.testing.assert_array_equal(split.toarray(), whole.toarray())


def test_covariance_is_the_parameter_block_of_the_inverse_gauss_newton_hessian() -> None:
    problem, _ = _problem(steps=40, noise=1e-4)
    est = LM(max_iterations=30, cutoff_hz=0)
    est.fit(problem)
    cov, _, scales = est.covariance()
    lm = est._lm
    r, J = lm.linearise(est._xi)
    groups = lm.group_rows()
    w = np.ones(r.size)
    w[groups == 0] = 1.0 / scales["impulse"]
    w[groups == 1] = 1.0 / scales["observation"]
    Jw = J.toarray() * w[:, None]
    H = Jw.T @ Jw
    d = 1.0 / np.sqrt(np.diag(H))  # Jacobi scaling keeps the dense inverse accurate
    full = (np.linalg.inv(H * np.outer(d, d)) * np.outer(d, d))[lm.n_states :, lm.n_states :]
    scale = lm.range.numpy()
    np.testing.assert_allclose(cov, full * np.outer(scale, scale), rtol=1e-6)
    # the noise the data carry is found again: 1e-4 rad against obs_std 1e-4
    assert 0.5 < scales["observation"] < 2.0


def test_bounds_hold_at_every_iterate() -> None:
    problem, _ = _problem(bounds={"link1/mass": (0.5, 1.0)})  # the truth 1.2 lies beyond
    est = LM(max_iterations=20, cutoff_hz=0)
    est.init(problem)
    for _ in range(20):
        info = est.step()
        u = est._lm.split(est._xi)[1]
        assert bool(((u >= 0.0) & (u <= 1.0)).all())
        if info.converged:
            break
    post = est.posterior()
    assert post.map()[0] == pytest.approx(1.0)


def test_a_parameter_the_data_cannot_excite_is_reported() -> None:
    names = ("link1/mass", "link2/mass", "link2/com_y")  # com_y lies along the joint axes
    problem, _ = _problem(names=names)
    post = LM(max_iterations=30, cutoff_hz=0).fit(problem)
    assert post.meta["unidentified"] == ["link2/com_y"]
    assert post.std()[2] > 0.1  # not given a confident value
    np.testing.assert_allclose(post.map()[:2], [1.2, 0.8], rtol=1e-4)


def test_unexcited_parameters_are_named_in_every_output(tmp_path, capsys) -> None:
    problem, _ = _problem(names=("link1/mass", "link2/mass", "link2/com_y"), steps=120, noise=1e-4)
    post = LM(max_iterations=30, cutoff_hz=0).fit(problem)

    saved = yaml.safe_load(post.to_yaml(tmp_path / "posterior.yaml").read_text())
    assert saved["meta"]["unidentified"] == ["link2/com_y"]

    rows = parameter_rows(post, truth={"link1/mass": 1.2, "link2/mass": 0.8})
    assert [r.identified for r in rows] == [True, True, False]
    # one particle with a covariance: the interval is mean ± 1.96 std, and it holds the truth
    assert rows[0].q_low < 1.2 < rows[0].q_high
    np.testing.assert_allclose(rows[0].q_high - rows[0].q_low, 2 * 1.959964 * rows[0].std)
    assert "not excited by the data" in _table(rows)

    _print_table(post, problem, None)
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("link2/com_y") and "not identified" in line for line in out)
    assert not any(line.startswith("link1/mass") and "not identified" in line for line in out)


def test_state_estimation_with_fixed_parameters_scores_a_model_on_other_data() -> None:
    """``fixed_parameters``: only the states are unknowns (the cross-validation of Sec. 4.5);
    the true model explains the data better than a wrong one."""
    problem, x = _problem(steps=60, noise=1e-4)
    names = problem.spec.names
    costs = {}
    for label, theta in (("truth", _theta(names)), ("wrong", _theta(names) * 1.2)):
        est = LM(fixed_parameters=True, cutoff_hz=0, max_iterations=30)
        post = est.fit(problem, warm_start=_point(names, theta))
        assert est._lm.dim == est._lm.n_states == x.size
        np.testing.assert_array_equal(post.map(), theta.numpy())
        np.testing.assert_array_equal(post.covariance, np.zeros((3, 3)))
        assert post.meta["fixed_parameters"]
        assert post.meta["unidentified"] == []
        assert post.meta["converged"]
        costs[label] = post.meta["mean_squared_residual"]
        if label == "truth":
            assert np.abs(est.states()[0][:, :2] - x[:, :2]).max() < 5e-4
    assert costs["wrong"] > 10.0 * costs["truth"]


def test_symmetric_solve_matches_dense_and_falls_back_to_pivoting() -> None:
    """The normal equations are factorised without row pivoting (a banded matrix stays banded);
    a zero diagonal pivot falls back to partial pivoting."""
    import scipy.sparse as sp

    from dynid.estimators.lm import _solve_spd

    rng = np.random.default_rng(0)
    J = sp.random(60, 20, density=0.2, random_state=1) + sp.eye(60, 20)
    A = (J.T @ J + 1e-3 * sp.eye(20)).tocsc()
    b = rng.normal(size=20)
    np.testing.assert_allclose(_solve_spd(A, b), np.linalg.solve(A.toarray(), b), rtol=1e-8)
    swap = sp.csc_matrix(np.array([[0.0, 2.0], [2.0, 0.0]]))
    np.testing.assert_allclose(_solve_spd(swap, np.array([2.0, 4.0])), [2.0, 1.0])


def test_default_stride_keeps_the_estimation_step_at_most_10_ms() -> None:
    """Recorded at 1 kHz, the states are estimated on a 10 ms grid unless ``stride`` says."""
    problem, _ = _problem(steps=60, dt=0.001)
    est = LM(max_iterations=1, cutoff_hz=0)
    est.init(problem)
    assert est.posterior().meta["step_s"] == pytest.approx(0.01)
    assert est.states()[0].shape == (7, 4)
    explicit = LM(stride=3, max_iterations=1, cutoff_hz=0)
    explicit.init(problem)
    assert explicit.posterior().meta["step_s"] == pytest.approx(0.003)
