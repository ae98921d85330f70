"""Levenberg–Marquardt on inverse-dynamics (torque) problems: the parameters alone, on the
problem's own effort residuals, with an interval that allows for their correlation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.signal import lfilter

from dynid.estimators.lm import LM, TorqueResiduals, _identify, _sandwich_covariance
from dynid.estimators.registry import make_estimator
from dynid.posterior import Posterior
from dynid.problem import Problem
from dynid.problem_file import load_problem
from dynid.resources import repo_root
from dynid.sim import panda_payload

pytestmark = pytest.mark.usefixtures("one_thread")

PROBLEM_FILE = repo_root() / "config" / "problems" / "panda_payload.yaml"


@pytest.fixture(scope="module")
def payload() -> tuple[Problem, np.ndarray]:
    """The payload problem file on 4 s of the simulated Panda (seed 0), and the truth."""
    data, truth = panda_payload.simulate(0, duration=4.0)
    problem, _ = load_problem(PROBLEM_FILE, dataset=data)
    return problem, np.array([truth["parameters"][n] for n in problem.spec.names])


def test_lm_reaches_the_least_squares_optimum_and_its_interval_holds_the_truth(payload) -> None:
    problem, truth = payload
    lm = make_estimator("lm").fit(problem)
    lsq = make_estimator("lsq").fit(problem)
    np.testing.assert_allclose(lm.map(), lsq.map(), rtol=1e-6, atol=1e-8)
    assert lm.meta["converged"]
    assert lm.meta["iterations"] <= 6
    assert lm.meta["residuals"] == "inverse_dynamics"
    inside = np.abs(lm.map() - truth) <= 1.96 * lm.std()
    assert inside.all(), f"truth outside the 95 % interval: {lm.map()} ± {1.96 * lm.std()}"


def test_residuals_and_jacobian_are_the_objectives(payload) -> None:
    problem, _ = payload
    lm = TorqueResiduals(problem)
    theta = problem.spec.nominal_theta(problem.robot).to(problem.dtype)
    xi = lm.initial(theta)
    r, J = lm.linearise(xi)
    objective = problem.objective
    np.testing.assert_allclose(r, objective.residuals(theta[None])[0].numpy(), rtol=1e-12)
    scale = (problem.spec.upper - problem.spec.lower).numpy()
    expected = objective.jacobian(theta[None])[0].numpy() * scale
    np.testing.assert_allclose(J.toarray(), expected, rtol=1e-12)
    assert lm.n_states == 0


def test_the_interval_is_never_narrower_than_the_stated_noise(payload) -> None:
    """Stated noise above the residuals' scale sets the interval; below, the residuals do."""
    problem, _ = payload

    def std(torque_std: float) -> np.ndarray:
        settings = replace(problem.likelihood, torque_std=torque_std)
        return LM().fit(replace(problem, likelihood=settings)).std()

    np.testing.assert_allclose(std(10.0), 10.0 * std(1.0), rtol=1e-6)
    np.testing.assert_allclose(std(1e-4), std(1e-5), rtol=1e-6)


def test_held_parameters_leave_nothing_to_estimate(payload) -> None:
    problem, _ = payload
    names = problem.spec.names
    theta = problem.spec.nominal_theta(problem.robot).numpy()
    warm = Posterior(particles=theta[None], names=list(names), units=list(problem.spec.units))
    est = LM(fixed_parameters=True)
    post = est.fit(problem, warm_start=warm)
    np.testing.assert_array_equal(post.map(), theta)
    np.testing.assert_array_equal(post.covariance, np.zeros((len(names), len(names))))
    assert post.meta["iterations"] == 0
    assert post.meta["converged"]


def test_sandwich_covers_the_truth_where_correlated_noise_fools_the_plain_hessian() -> None:
    """Linear least squares with noise correlated over neighbouring samples (AR(1), 0.4) and
    across the two rows of a sample: the sandwich's 95 % intervals hold the truth about 90 % of
    the time for every parameter, those of ``s² (JᵀJ)⁻¹`` about two times in three."""
    rng = np.random.default_rng(0)
    samples, rows, draws = 300, 2, 400
    t = np.linspace(0.0, 6.0, samples)
    basis = np.stack([np.sin(t), np.cos(0.7 * t), np.sin(1.3 * t) * np.cos(t)], axis=-1)
    J = np.repeat(basis, rows, axis=0) * np.tile([1.0, 0.5], samples)[:, None]
    truth = np.array([0.3, -0.2, 0.5])
    U, s, seen, _ = _identify(J.T @ J, ["a", "b", "c"], threshold=0.1)
    covered = {"sandwich": np.zeros(3), "plain": np.zeros(3)}
    for _ in range(draws):
        e = lfilter([1.0], [1.0, -0.4], rng.normal(size=samples))
        noise = (e[:, None] + 0.3 * rng.normal(size=(samples, rows))).reshape(-1)
        y = J @ truth + 0.1 * noise
        est, *_ = np.linalg.lstsq(J, y, rcond=None)
        r = y - J @ est
        sandwich = _sandwich_covariance(U, s, seen, J, r, rows)
        plain = np.linalg.inv(J.T @ J) * (r @ r) / (r.size - 3)
        for name, cov in (("sandwich", sandwich), ("plain", plain)):
            covered[name] += np.abs(est - truth) <= 1.96 * np.sqrt(np.diag(cov))
    assert (covered["sandwich"] / draws).min() >= 0.88
    assert (covered["plain"] / draws).max() < 0.75
