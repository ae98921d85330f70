"""CSVGD on a short double-pendulum problem: MDMM constraints, reproducibility, NaN particles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dynid.data.trajectory import Dataset, Trajectory
from dynid.estimators.base import EstimatorError, make_estimator
from dynid.estimators.csvgd import CSVGD, SVGD
from dynid.estimators.mdmm import MDMM, DefectForm, defect_constraint, limit_constraint
from dynid.estimators.svgd import median_bandwidth
from dynid.model.integrate import TorqueControl
from dynid.model.observe import JointObservation
from dynid.model.params import Parameter, ParameterSpec
from dynid.model.robot import load_robot
from dynid.objective import (
    PosteriorTarget,
    ShootingLikelihood,
    defect_log_density,
    simulate_dataset,
)
from dynid.posterior import Posterior
from dynid.problem import LikelihoodSettings, Problem

TRUTH = (1.5, 2.0)
OTHER = (1.0, 2.5)
STEPS, DT = 40, 0.01


def _problem(
    windows: int = 4,
    trajectories: int = 1,
    observe=None,
    truths: list | None = None,
    upper: tuple[float, float] = (2.5, 2.5),
) -> Problem:
    """Free swings from rest of the double pendulum; trajectory ``k`` simulated with link
    lengths ``truths[k]`` (default: all ``TRUTH``); link lengths limited to [1 m, ``upper``]."""
    robot = load_robot("double_pendulum")
    spec = ParameterSpec(
        [Parameter(f"link{i + 1}/length", 1.0, top) for i, top in enumerate(upper)]
    )
    control = TorqueControl(None)
    obs = JointObservation(robot, velocities=True)
    truth = Problem(
        robot=robot,
        spec=spec,
        dataset=Dataset(
            [_rest_trajectory(robot, q0) for q0 in (0.5 * math.pi, 0.3)[:trajectories]]
        ),
        dt=DT,
        control=control,
        control_names=["effort"],
        observe=obs,
        obs_names=obs.names,
    )
    thetas = torch.tensor(truths or [TRUTH] * trajectories, dtype=torch.float64)
    y = simulate_dataset(truth, thetas)  # [K, K, T + 1, 4]: trajectory k from thetas[k]
    trajs = [
        Trajectory(
            t=traj.t,
            q=y[k, k, :, :2].numpy(),
            joint_names=robot.joint_names,
            dq=y[k, k, :, 2:].numpy(),
            effort=np.zeros((STEPS + 1, 2)),
        )
        for k, traj in enumerate(truth.dataset)
    ]
    return Problem(
        robot=robot,
        spec=spec,
        dataset=Dataset(trajs),
        dt=DT,
        control=control,
        control_names=["effort"],
        observe=obs if observe is None else observe,
        obs_names=obs.names,
        likelihood=LikelihoodSettings(
            obs_std=(0.05, 0.05, 0.5, 0.5), shooting="multiple", windows=windows, defect_std=0.1
        ),
    )


def _rest_trajectory(robot, q0: float) -> Trajectory:
    return Trajectory(
        t=np.arange(STEPS + 1) * DT,
        q=np.tile([q0, 0.0], (STEPS + 1, 1)),
        joint_names=robot.joint_names,
        dq=np.zeros((STEPS + 1, 2)),
        effort=np.zeros((STEPS + 1, 2)),
    )


def test_likelihood_shapes_and_truth_is_best() -> None:
    problem = _problem(windows=4, trajectories=2)
    lik = ShootingLikelihood(problem)
    assert (lik.K, lik.W, lik.h, lik.dim) == (2, 4, 10, 2 + 2 * 3 * 4)
    theta = torch.tensor([TRUTH, (1.2, 2.3)], dtype=torch.float64)
    ev = lik.evaluate(lik.augment(theta))
    # recorded window starts are exact for the truth: zero defects, best likelihood
    assert float(ev.defects[0].abs().max()) < 1e-9
    assert float(ev.defects[1].abs().max()) > 1e-2
    assert float(ev.log_likelihood[0]) > float(ev.log_likelihood[1])
    # eq. 9 vs eq. 10 on the same per-trajectory terms
    prod = lik.evaluate(lik.augment(theta), aggregate="product").log_likelihood
    assert torch.allclose(prod, ev.per_trajectory.sum(-1))
    assert torch.allclose(ev.log_likelihood, torch.logsumexp(ev.per_trajectory, -1) - math.log(2))
    # single shooting with the truth equals multiple shooting with exact starts
    single = ShootingLikelihood(problem, shooting="single")
    ev1 = single.evaluate(single.augment(theta[:1]))
    assert torch.allclose(ev1.per_trajectory, ev.per_trajectory[:1], atol=1e-9)
    # defects enter the sampler target as Gaussian terms inside each trajectory's mixture
    # component (eq. 4 with eq. 6), up to a constant
    target = PosteriorTarget(lik, defect_std=0.1)
    z = lik.augment(theta)
    d = ev.defects.flatten(2) / 0.1  # [N, K, ...]
    component = ev.per_trajectory - 0.5 * (d * d).sum(-1)
    expected = torch.logsumexp(component, -1) + lik.log_prior(ev.theta)
    diff = target.log_prob(z) - expected
    assert torch.allclose(diff, diff[:1].expand(2))
    outside = ev.log_likelihood + lik.log_prior(ev.theta) - 0.5 * (d * d).sum((-1, -2))
    assert not torch.allclose(target.log_prob(z) - outside, diff)


def test_mdmm_constraint_functions() -> None:
    u = torch.tensor([[-0.2, 0.5, 1.3]])
    assert torch.allclose(limit_constraint(u), torch.tensor([[0.2, 0.0, -0.3]]))
    d = torch.ones(1, 2, 3, 4) * 0.1
    assert defect_constraint(d, 0.1, DefectForm.SQUARED_NORM).shape == (1, 6)
    assert torch.allclose(
        defect_constraint(d, 0.1, DefectForm.SQUARED_NORM), torch.full((1, 6), 4.0)
    )
    assert defect_constraint(d, 0.1, DefectForm.COMPONENTWISE).shape == (1, 24)
    # the bounded form asks ‖d‖²/σ² ≤ 2 nv as log(‖d‖²/σ²/2nv) ≤ 0: 1 σ in each of 4 components
    # meets it exactly, 2 σ exceeds it by log 4; closed windows stay finite
    bounded = defect_constraint(torch.cat([d, 2 * d, 0 * d]), 0.1, DefectForm.BOUNDED)
    assert torch.allclose(bounded[0], torch.zeros(6), atol=1e-6)
    assert torch.allclose(bounded[1], torch.full((6,), math.log(4.0)))
    assert torch.allclose(bounded[2], torch.full((6,), math.log(1e-12)))


def test_csvgd_closes_defects_and_keeps_particles_in_limits() -> None:
    problem = _problem()
    outside = Posterior(
        particles=np.array([[2.7, 1.8], [0.8, 2.2], [1.6, 2.6], [1.4, 0.9]]),
        names=problem.spec.names,
        units=problem.spec.units,
    )
    est = CSVGD(num_particles=8, learning_rate=0.03, shooting_learning_rate=0.03, seed=0)
    est.init(problem, warm_start=outside)
    first = est.step(1)
    assert first.metrics["max_limit_violation"] > 0.1
    # the warm start's particles beyond the limits are named and counted
    u0, _ = est.likelihood.split(est.augmented)
    beyond = ((u0 < 0.0) | (u0 > 1.0)).sum(0)
    expected = {n: int(k) for n, k in zip(problem.spec.names, beyond, strict=True) if k}
    assert expected
    assert est.posterior().meta["clamped_particles"] == expected
    assert first.metrics["max_defect"] > 0.3
    info = est.step(39)
    lik = est.likelihood
    ev = lik.evaluate(est.augmented)
    u, _ = lik.split(est.augmented)
    # MDMM is a soft constraint: the violation shrinks as the multipliers grow; what is
    # simulated and reported is the clamped particle, which never leaves the limits
    assert float(limit_constraint(u).abs().max()) < 0.2
    assert float(ev.defects.abs().max()) < 0.12
    assert info.metrics["nan_particles"] == 0
    post = est.posterior()
    assert post.particles.shape == (8, 2)
    assert np.all(post.particles >= 1.0)
    assert np.all(post.particles <= 2.5)
    assert np.isfinite(post.log_likelihood).all()


def test_limits_hold_where_the_likelihood_peaks_beyond_them() -> None:
    """The swing was simulated with a 1.5 m first link, beyond its 1.3 m limit: the likelihood
    drives every particle against that limit. Adam's momentum carries particles across it, and
    there their own likelihood gradient is zero (they are simulated clamped); the limit terms,
    stepped outside Adam, bring them back within about two Adam steps. Stepped through Adam,
    divided by the RMS of the likelihood's gradients, they left particles 0.2–0.44 beyond."""
    problem = _problem(upper=(1.3, 1.7))
    est = CSVGD(num_particles=16, learning_rate=0.05, seed=0)
    est.init(problem)
    worst = 0.0
    for _ in range(100):
        est.step()
        u, _ = est.likelihood.split(est.augmented)
        worst = max(worst, float(limit_constraint(u).abs().max()))
    assert worst < 2.5 * est.learning_rate
    assert bool((u[:, 0] > 0.9).all())  # piled against link1's upper limit
    assert float(est.limits.damping) == pytest.approx(10.0)
    post = est.posterior()
    assert post.particles[:, 0].max() == pytest.approx(1.3)
    assert np.all(post.particles <= [1.3, 1.7])


def test_seeded_runs_reproduce_exactly() -> None:
    problem = _problem()

    def run() -> np.ndarray:
        est = make_estimator("csvgd", num_particles=6, learning_rate=0.05, seed=3)
        est.init(problem)
        est.step(3)
        return est.posterior().particles

    a, b = run(), run()
    assert np.array_equal(a, b)
    other = CSVGD(num_particles=6, learning_rate=0.05, seed=4)
    other.init(problem)
    other.step(3)
    assert not np.array_equal(a, other.posterior().particles)


def test_nan_likelihood_particles_are_reported_and_excluded() -> None:
    obs = JointObservation(load_robot("double_pendulum"), velocities=True)

    def unstable(dyn, p, q, v):
        y = obs(dyn, p, q, v)
        link1 = -p.joint_translation[:, 1, 2]  # joint2 sits link1's length below joint1
        bad = (link1 > 2.0).reshape(-1, *([1] * (y.dim() - 1)))
        return torch.where(bad, torch.full_like(y, math.nan), y)

    problem = _problem(observe=unstable)
    est = SVGD(num_particles=8, learning_rate=0.02, shooting="multiple", seed=0)
    est.init(problem)
    start = est.augmented
    info = est.step(2)
    post = est.posterior()
    bad = post.meta["nan_particles"]
    assert info.metrics["nan_particles"] == len(bad) > 0
    u1 = start[:, 0]
    assert sorted(bad) == sorted(int(i) for i in torch.nonzero(u1 > (2.0 - 1.0) / 1.5))
    keep = [i for i in range(8) if i not in bad]
    assert np.isneginf(post.log_weights[bad]).all()
    assert np.isfinite(post.log_weights[keep]).all()
    moved = est.augmented
    assert torch.equal(moved[bad], start[bad])  # frozen
    assert bool((moved[keep] != start[keep]).any(-1).all())  # the others go on
    assert np.isfinite(post.mean()).all()


def test_a_diverging_particle_does_not_abort_the_batch() -> None:
    """A window start far outside the data (a particle whose simulation blows up) turns that
    particle's likelihood non-finite; the others are scored exactly as they are alone."""
    lik = ShootingLikelihood(_problem(windows=4))
    theta = torch.tensor([TRUTH, (1.2, 2.3)], dtype=torch.float64)
    z = lik.augment(theta)
    alone = lik.evaluate(z[:1]).log_likelihood
    z[1, lik.M :] = 1e300  # overflows to inf, then NaN, inside the rollout
    ev = lik.evaluate(z)
    assert not math.isfinite(float(ev.log_likelihood[1]))
    assert torch.equal(ev.log_likelihood[:1], alone)


def test_errors_name_the_setting() -> None:
    with pytest.raises(EstimatorError, match="num_particles"):
        CSVGD(num_particles=0)
    with pytest.raises(EstimatorError, match="before init"):
        CSVGD().step()
    with pytest.raises(EstimatorError, match="unconstrained"):
        SVGD(constrained=True)


def test_kernel_acts_on_the_parameters_only() -> None:
    """eq. 1's kernel is over θ: two particles with equal parameters get the same parameter
    direction however far apart their shooting variables are, and each particle's shooting
    variables take its own gradient (no kernel average over particles)."""
    est = CSVGD(num_particles=4, seed=0)
    est.init(_problem(windows=4))
    lik = est.likelihood
    gen = torch.Generator().manual_seed(1)
    z = est.augmented
    z[1, : lik.M] = z[0, : lik.M]
    z[1, lik.M :] += 50.0 * torch.randn(lik.n_shoot, generator=gen, dtype=z.dtype)
    grad = torch.randn(z.shape, generator=gen, dtype=z.dtype)
    grad[1, : lik.M] = grad[0, : lik.M]
    phi, figures = est._direction(z, grad)
    assert torch.allclose(phi[0, : lik.M], phi[1, : lik.M])
    assert torch.equal(phi[:, lik.M :], grad[:, lik.M :])
    u = z[:, : lik.M]
    sq = ((u[:, None] - u[None]) ** 2).sum(-1)
    assert figures["bandwidth"] == pytest.approx(float(median_bandwidth(sq)))
    assert figures["svgd_repulsive"] > 0.0


def test_shooting_variables_take_their_own_step_size() -> None:
    """Adam's first step moves every coordinate by its step size: the parameters by
    ``learning_rate``, the window starts by ``shooting_learning_rate`` (default 0.4 ×)."""
    problem = _problem(windows=4)
    est = CSVGD(num_particles=4, learning_rate=0.05, seed=0)
    assert est.shooting_learning_rate == pytest.approx(0.02)
    est.init(problem)
    start = est.augmented
    est.step(1)
    step = (est.augmented - start).abs()
    M = est.likelihood.M
    moved_u, moved_s = step[:, :M], step[:, M:]
    assert torch.allclose(moved_u[moved_u > 0], torch.tensor(0.05, dtype=step.dtype), rtol=1e-6)
    assert torch.allclose(moved_s[moved_s > 0], torch.tensor(0.02, dtype=step.dtype), rtol=1e-6)
    with pytest.raises(EstimatorError, match="shooting_learning_rate"):
        CSVGD(shooting_learning_rate=0.0)


def test_step_sizes_decay_by_the_factor_per_iteration() -> None:
    """``learning_rate_decay`` scales both Adam step sizes after every iteration: the first
    step moves the parameters by ``learning_rate``, the fourth is taken at ``γ³`` of it."""
    problem = _problem(windows=4)
    est = CSVGD(num_particles=4, learning_rate=0.05, learning_rate_decay=0.5, seed=0)
    est.init(problem)
    start = est.augmented
    est.step(1)
    M = est.likelihood.M
    moved = (est.augmented - start)[:, :M].abs()
    assert torch.allclose(moved[moved > 0], torch.tensor(0.05, dtype=moved.dtype), rtol=1e-6)
    est.step(2)
    assert [g["lr"] for g in est.optimizer.param_groups] == pytest.approx([0.05 / 8, 0.02 / 8])
    constant = CSVGD(num_particles=4, learning_rate=0.05, seed=0)
    constant.init(problem)
    constant.step(3)
    assert [g["lr"] for g in constant.optimizer.param_groups] == pytest.approx([0.05, 0.02])
    for bad in (0.0, 1.5):
        with pytest.raises(EstimatorError, match="learning_rate_decay"):
            CSVGD(learning_rate_decay=bad)


def test_defects_act_through_their_trajectory_responsibility() -> None:
    """With the mixture of eq. 9, the defects of a trajectory a particle does not explain (here
    simulated with other link lengths; its shooting variables start at its recorded states)
    barely act on the particle's parameters, as under the gradient of eq. 4 with eq. 6: the
    MDMM penalty's parameter gradient is close to the one of the explained trajectory alone
    (unweighted it is 200 times larger, of opposite sign). The product (eq. 10) weighs every
    trajectory's defects fully."""
    near = np.array([(1.48, 2.03)])

    def penalty_gradient(problem: Problem) -> tuple[torch.Tensor, torch.Tensor]:
        est = CSVGD(num_particles=1, seed=0)
        start = Posterior(particles=near, names=problem.spec.names, units=problem.spec.units)
        est.init(problem, warm_start=start)
        z = est.augmented.requires_grad_(True)
        _, penalty, _, figures = est._objective(z)
        assert figures["max_defect_explained"] <= figures["max_defect"]
        ev = est.likelihood.evaluate(z.detach())
        weights = est.likelihood.responsibilities(
            ev.per_trajectory + defect_log_density(ev.defects, est._sigma_def)
        )
        return torch.autograd.grad(penalty.sum(), z)[0][0, : est.likelihood.M], weights

    both, weights = penalty_gradient(_problem(windows=2, trajectories=2, truths=[TRUTH, OTHER]))
    alone, _ = penalty_gradient(_problem(windows=2, trajectories=1))
    assert float(weights[0, 1]) < 0.1 < 0.9 < float(weights[0, 0])
    assert torch.allclose(weights.sum(-1), torch.ones(1, dtype=weights.dtype))
    assert float((both - alone).norm()) < 0.15 * float(alone.norm())
    problem = _problem(windows=2, trajectories=2, truths=[TRUTH, OTHER])
    lik = ShootingLikelihood(problem)
    # the particle explains trajectory 0, whose windows connect better than trajectory 1's
    ev = lik.evaluate(lik.augment(torch.tensor(near)))
    assert float(ev.defects[0, 0].abs().max()) < float(ev.defects[0, 1].abs().max())
    # unconstrained SVGD with multiple shooting scores exactly the samplers' target
    svgd = SVGD(num_particles=1, shooting="multiple", seed=0)
    svgd.init(problem, warm_start=Posterior(near, problem.spec.names, problem.spec.units))
    objective, _, _, _ = svgd._objective(svgd.augmented)
    target = PosteriorTarget(svgd.likelihood).log_prob(svgd.augmented)
    assert torch.allclose(objective, target, rtol=0, atol=1e-9)
    per_traj = torch.tensor([[3.0, -50.0]], dtype=torch.float64)
    assert torch.equal(lik.responsibilities(per_traj, "product"), torch.ones_like(per_traj))


def test_mdmm_penalty_weights() -> None:
    mdmm = MDMM(damping=2.0, multiplier_lr=0.1)
    g = torch.tensor([[1.0, 2.0]])
    lam = torch.tensor([[0.5, -1.0]])
    assert torch.allclose(mdmm.penalty(g, lam), torch.tensor([0.5 + 1.0 - 2.0 + 4.0]))
    w = torch.tensor([[1.0, 0.25]])
    assert torch.allclose(mdmm.penalty(g, lam, w), torch.tensor([1.5 + 0.25 * 2.0]))
    with pytest.raises(EstimatorError, match="weights"):
        mdmm.penalty(g, lam, torch.ones(1, 3))


def test_mdmm_inequality_penalty_and_multipliers() -> None:
    """``g ≤ 0``: the equality terms where ``λ + c g ≥ 0``, no force where the bound holds with
    room, and multipliers that fall back to zero (never below) once it holds."""
    ineq, eq = MDMM(damping=2.0, multiplier_lr=0.5, inequality=True), MDMM(2.0, 0.5)
    lam = torch.tensor([[1.0, 1.0, 0.0]])
    g = torch.tensor([[0.5, -0.25, -1.0]], requires_grad=True)
    pen = ineq.penalty(g, lam)
    (grad,) = torch.autograd.grad(pen.sum(), g)
    # λ + c g = 2, 0.5, −2: the first two as the equality, the third constant (−λ²/2c = 0)
    expected = eq.penalty(g.detach()[:, :2], lam[:, :2]).sum()
    assert torch.allclose(pen.detach(), expected.reshape(1))
    assert torch.allclose(grad, torch.tensor([[2.0, 0.5, 0.0]]))
    lam = ineq.ascend(lam, g)
    assert torch.allclose(lam, torch.tensor([[1.25, 0.875, 0.0]]))
    for _ in range(20):
        lam = ineq.ascend(lam, torch.full_like(lam, -0.3))
    assert torch.equal(lam, torch.zeros_like(lam))
    assert torch.allclose(eq.ascend(torch.zeros(1, 1), torch.tensor([[-0.3]])), torch.tensor(-0.15))


def test_bounded_defect_multipliers_fall_once_the_windows_close() -> None:
    """The paper's squared-norm defects are never negative, so their multipliers only grow; the
    bounded form closes the windows to its bound (χ² ≤ 2 nv) and its multipliers fall back."""
    peaks, finals, closure = {}, {}, {}
    for form in ("squared_norm", "bounded"):
        est = CSVGD(num_particles=8, learning_rate=0.03, seed=0, defect_form=form)
        est.init(_problem())
        peak = torch.zeros_like(est.lam_def)
        for _ in range(50):
            before = est.lam_def.clone()
            est.step()
            if form == "squared_norm":
                assert bool((est.lam_def >= before).all())
            peak = torch.maximum(peak, est.lam_def)
        defects = est.likelihood.evaluate(est.augmented).defects
        chi2 = (defects * defects).sum(-1) / 0.1**2
        peaks[form], finals[form] = float(peak.max()), float(est.lam_def.max())
        closure[form] = float(chi2.max()) / defects.shape[-1]
        assert bool((est.lam_def >= 0).all())
    assert finals["squared_norm"] == pytest.approx(peaks["squared_norm"])
    assert peaks["bounded"] > 1.0
    assert finals["bounded"] < 0.2 * peaks["bounded"]
    assert closure["bounded"] < 1.5  # within the bound, up to the soft constraint's slack
    assert closure["squared_norm"] < closure["bounded"]  # the growing multipliers close tighter
