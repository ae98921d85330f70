"""Residual point-contact learner on the real planar dice drops (residual-contact paper, Fig. 4).

``scripts/bench residual``. One seeded permutation of drops 1–380 splits them (:func:`split`):
its first 300 drops are the training pool (the first ``n`` train, so smaller sets are subsets of
larger ones); its last 80 and drops 381–400 are the validation set of 100 drops on which every
setting of the learners is chosen (never trained on); drops 401–450 are the test set, scored
once with the chosen settings:

1. identification (V-A): Metropolis–Hastings over (μ, ε) (proposal ``N(r, 0.05 I)``,
   ``--mh-chains`` chains of ``--mh-samples`` samples after ``--mh-burn-in`` each, prior
   draws as starts, likelihood ``-½ Σ_k MSE_k / σ²`` over ``(x, z, r_g θ)`` with
   ``σ = --position-std``) on the first ``--id-drops`` training drops, medians as point values;
   CSVGD on the same problem for comparison (its posterior mean); both scored by their
   training-drop RMSE;
2. Fig. 4: for each training size ``n`` (``--sizes``) the residual impulse policy is trained
   with nevergrad (a score summed over all ``n`` drops in every evaluation, or over ``--batch``
   drops drawn afresh) once per training score of ``--scores`` (eq. 5 over 2 draws per drop,
   the energy score of the trajectory draws, or the error of their mean trajectory, over
   ``--score-samples`` draws per drop), output unit of
   ``--impulse-speeds`` and nevergrad mutation scale of ``--mutation-stds`` (method
   ``residual``; the residual wrench learner of Fig. 4, which also corrects the angular
   impulse, with the same grid: method ``residual_wrench``), and
   by Adam through the simulator (``--adam-steps`` steps, output unit ``--adam-speed``) once per
   learning rate of ``--adam-rates`` (method ``residual_adam``), and the earlier GP residual of
   III-B is fitted on the contact events of the training drops (method ``residual_gp``,
   :mod:`dynid.estimators.baselines.gp_residual`, ``--gp-restarts`` restarts of its
   marginal-likelihood optimiser); for each method the setting and the point prediction (the mean
   residual, or the mean trajectory of ``--draws`` policy draws) with the lowest validation RMSE
   are kept; for ``residual``, ``residual_wrench`` and ``residual_adam`` only if that is below
   the analytical
   simulator's, else the zero residual (the simulator alone) is kept in the policy's place. The
   generic residual (GRU correcting every step)
   keeps the weights of its lowest validation RMSE over its Adam steps. A control that learns
   nothing, the hedged simulator (method ``simulator_hedged``), predicts the mean trajectory
   of ``--draws`` simulations with a random impulse at every contact, its spread chosen on
   validation from ``--hedge-stds``: what a mean over outcomes gains without a residual. The
   analytical simulator, the learners and the authors' PyBullet rollouts are scored on the
   test drops by
   the RMSE over ``(x, z, 0.0245 θ)`` from each drop's first recorded state, averaged over
   drops; ``rmse_draws`` is the expected RMSE of a single policy draw (the expectation of eq. 5);
3. uncertainty: the belief of each residual policy (``--particles`` particles, IV) with an
   extra impulse spread added in quadrature (``--extra-stds``, in policy output units; for the
   GP, units of 0.1 m/s × mass), and the
   predictive distribution of an observation, the belief convolved with an observation error
   ``N(0, σ² I)`` on ``(x, z, r_g θ)`` (``σ`` from ``--observation-stds``, m; 0: the belief
   alone); the pair whose validation coverage is nearest the nominal levels
   (``|c₅₀ - 0.5| + |c₉₀ - 0.9|`` smallest) is kept; the fraction of test samples inside its
   50 % and 90 % regions, and inside those of the belief alone; the same pair's regions
   recalibrated on the validation samples (split-conformal: the region of level ``a`` is the
   predictive's highest-density region that held a share ``a`` of the validation samples,
   :func:`~dynid.estimators.impact_belief.recalibrated_thresholds`) and the fraction of test samples
   inside them; a Fig. 1 style figure of one test drop (nevergrad policy, largest ``n``) in
   ``<out>/residual_belief.html``.

``--methods`` runs a subset of the methods (the identification always runs).

Records: ``real_dice/<method>/n=<n>`` with ``rmse`` (m), for ``simulator_hedged`` also
``validation_rmse``, and, for ``residual``, ``residual_wrench``,
``residual_adam`` and ``residual_gp``, ``validation_rmse``, ``rmse_draws``,
``calibration_std`` (N·s), ``observation_std`` (m), ``coverage_50``, ``coverage_90``,
``belief_coverage_50``, ``belief_coverage_90``, ``recalibrated_coverage_50``,
``recalibrated_coverage_90`` and the levels of the predictive's regions they use,
``recalibrated_level_50`` and ``recalibrated_level_90``; ``real_dice/pybullet`` ``rmse``;
``real_dice/identification/<estimator>`` with ``friction``, ``restitution`` and
``train_rmse``. The learned weights go to ``<out>/residual/`` (``<method>_n<n>.pt``,
``generic_n<n>.pt``; the GP's training events and kernel hyper-parameters in
``residual_gp_n<n>.pt``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from dynid.data.planar_dice import load_dice_states, load_dice_trajectories
from dynid.estimators.baselines.generic_residual import (
    GenericTraining,
    save_generic_residual,
    train_generic_residual,
)
from dynid.estimators.baselines.gp_residual import train_gp_residual
from dynid.estimators.impact_belief import covered, propagate_belief, recalibrated_thresholds
from dynid.estimators.registry import resolve_estimator
from dynid.estimators.residual_contact import (
    SCORES,
    PolicyTraining,
    median_coefficients,
    train_residual_policy,
)
from dynid.model.gp_residual import GPSettings, save_gp_residual
from dynid.model.impulse_residual import DensityNetwork, ResidualContact, save_policy
from dynid.model.planar_impact import ImpulseResidual, PlanarImpactSimulator
from dynid.objective.impact import FRICTION, RESTITUTION, dice_problem
from dynid.records import Record
from dynid.report import write_belief_report
from dynid_bench.fitting import run_fit

PAPER_PYBULLET_RMSE = 0.055
"""The authors' PyBullet rollouts against the real drops (m, REFERENCE-FACTS)."""

PAPER_MH = {"friction": 0.11, "restitution": 0.48}
"""The paper's MH medians (V-A)."""

IMPROVEMENT_TARGET = 0.25
"""The issue's target: ≥ 25 % lower RMSE than the simulator after ≤ 30 training drops."""


PERMUTED = 380
"""Drops 1–380 are permuted by the seed and split into training pool and validation drops."""

POOL = 300
"""Training drops: the first ``POOL`` of the permutation."""

HELD_OUT = tuple(range(381, 401))
"""Validation drops outside the permutation; with its last ``PERMUTED - POOL`` drops they form
the validation set."""

METHODS = (
    "simulator",
    "simulator_hedged",
    "residual",
    "residual_wrench",
    "residual_adam",
    "generic_residual",
    "residual_gp",
)
"""The Fig. 4 methods ``--methods`` chooses from."""

HEDGE_SPEED = 0.1
"""Unit of the hedged simulator's impulse spreads as a velocity change of the body (m/s)."""

GP_SPREAD_SPEED = 0.1
"""Unit of the GP residual's calibration spreads as a velocity change of the body (m/s): the
spreads are ``--extra-stds`` times this times the body mass (N·s)."""

LEVELS = (0.5, 0.9)
"""Probability levels of the predictive regions whose coverage is scored."""

P = TypeVar("P", bound=ImpulseResidual)


def _known(what: str, known: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """The parser of an option taking a comma list of ``known`` names (``what``: the option's
    noun in its error message)."""

    def parse(text: str) -> tuple[str, ...]:
        chosen = tuple(m.strip() for m in text.split(",") if m.strip())
        if not chosen or any(m not in known for m in chosen):
            raise argparse.ArgumentTypeError(f"{what} from {', '.join(known)}; got {text!r}")
        return chosen

    return parse


def _sizes(text: str) -> tuple[int, ...]:
    """``--sizes``: a comma list of training drop counts, each within the training pool."""
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        sizes = ()
    if not sizes or not all(1 <= n <= POOL for n in sizes):
        raise argparse.ArgumentTypeError(f"training drop counts in 1–{POOL}; got {text!r}")
    return sizes


def _floats(text: str) -> tuple[float, ...]:
    """A comma list of numbers (the grids of ``--impulse-speeds``, ``--mutation-stds``, …)."""
    try:
        values = tuple(float(s) for s in text.split(",") if s.strip())
    except ValueError:
        values = ()
    if not values:
        raise argparse.ArgumentTypeError(f"a comma list of numbers; got {text!r}")
    return values


def _at_least_two(text: str) -> int:
    """An integer ≥ 2 (``--score-samples``: the energy and mean scores compare draws)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"an integer ≥ 2; got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's own options."""
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=(1, 5, 10, 30, 100),
        help=f"comma list of training drop counts, each 1–{POOL} (default: 1,5,10,30,100)",
    )
    parser.add_argument(
        "--methods",
        type=_known("methods", METHODS),
        default=METHODS,
        help=f"comma list of the methods run, from {','.join(METHODS)} (default: all)",
    )
    parser.add_argument("--id-drops", type=int, default=20, help="training drops used by MH")
    parser.add_argument("--position-std", type=float, default=0.05, help="likelihood σ (m)")
    parser.add_argument("--mh-chains", type=int, default=4)
    parser.add_argument("--mh-samples", type=int, default=750, help="samples per chain")
    parser.add_argument("--mh-burn-in", type=int, default=250, help="burn-in per chain")
    parser.add_argument("--csvgd-iterations", type=int, default=10)
    parser.add_argument("--csvgd-particles", type=int, default=16)
    parser.add_argument("--budget", type=int, default=150, help="nevergrad evaluations")
    parser.add_argument(
        "--mutation-stds",
        type=_floats,
        default="1,0.2",
        help="nevergrad's mutation scales of the policy weights tried (1: nevergrad's default)",
    )
    parser.add_argument(
        "--scores",
        type=_known("scores", SCORES),
        default="error,energy",
        help="training scores of the nevergrad policy tried: error (eq. 5), energy (the energy "
        "score of the trajectory draws), mean (the error of the draws' mean trajectory)",
    )
    parser.add_argument(
        "--score-samples",
        type=_at_least_two,
        default=4,
        help="policy draws per training drop in each evaluation of the energy and mean scores "
        "(≥ 2; eq. 5 uses 2)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="training drops per policy evaluation or Adam step, drawn afresh (default: all)",
    )
    parser.add_argument(
        "--impulse-speeds",
        type=_floats,
        default="0.05,0.1,0.2",
        help="policy output units (m/s) tried",
    )
    parser.add_argument(
        "--hedge-stds",
        type=_floats,
        default="1,2,3,4,6,8",
        help=f"impulse spreads of the hedged simulator tried ({HEDGE_SPEED} m/s x mass units)",
    )
    parser.add_argument(
        "--extra-stds",
        type=_floats,
        default="0,1,4,16,64",
        help="extra impulse spreads tried in calibration (output units)",
    )
    parser.add_argument(
        "--observation-stds",
        type=_floats,
        default="0,0.005,0.01,0.02,0.03,0.05,0.08",
        help="observation error σ (m) of the predictive tried in calibration",
    )
    parser.add_argument("--adam-steps", type=int, default=20, help="Adam steps of the policy")
    parser.add_argument(
        "--adam-rates", type=_floats, default="0.01,0.03", help="Adam learning rates tried"
    )
    parser.add_argument(
        "--adam-speed", type=float, default=0.1, help="output unit (m/s) of the Adam policy"
    )
    parser.add_argument("--generic-epochs", type=int, default=60, help="Adam steps of the GRU")
    parser.add_argument(
        "--gp-restarts", type=int, default=3, help="restarts of the GP hyper-parameter optimiser"
    )
    parser.add_argument(
        "--draws", type=int, default=32, help="policy draws per drop of the mean trajectory"
    )
    parser.add_argument("--particles", type=int, default=32, help="belief particles")
    parser.add_argument("--coverage-every", type=int, default=10, help="sample stride")
    parser.add_argument("--test-drops", type=int, default=50, help="drops 401… scored")
    parser.add_argument("--seed", type=int, default=0)


def split(seed: int) -> tuple[list[int], list[int]]:
    """``(training pool, validation drops)``: the first :data:`POOL` drops of the seeded
    permutation of drops 1–:data:`PERMUTED` in that order, and its other drops with
    :data:`HELD_OUT`, ascending."""
    order = (np.random.default_rng(seed).permutation(PERMUTED) + 1).tolist()
    return order[:POOL], sorted(order[POOL:] + list(HELD_OUT))


def _rmse(pred: torch.Tensor, obs: torch.Tensor, rg: float) -> torch.Tensor:
    """``[*B]`` per-drop RMSE (m) over all samples and the three components ``(x, z, r_g θ)``."""
    d = (pred[..., :3] - obs[..., :3]) * pred.new_tensor([1.0, 1.0, rg])
    return torch.sqrt((d * d).mean((-1, -2)))


def _states(indices: list[int]) -> torch.Tensor:
    return torch.from_numpy(np.stack(load_dice_states(indices)))


def _predict(
    sim: PlanarImpactSimulator,
    obs: torch.Tensor,
    mu: float,
    eps: float,
    policy: ImpulseResidual,
    draws: int,
    seed: int,
    extra_std: float = 0.0,
    mean: bool = True,
) -> dict[str, torch.Tensor]:
    """The residual learner's predictions of drops ``obs [K, T + 1, 6]``: ``"draws"`` the mean
    trajectory of ``draws`` policy draws (their spread widened by ``extra_std`` N·s in
    quadrature), ``"all"`` the draws, and, if ``mean``, ``"mean"`` the mean residual's."""
    steps = obs.shape[1] - 1
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        every = sim.rollout(
            obs[:, 0].expand(draws, *obs[:, 0].shape),
            steps,
            mu,
            eps,
            ResidualContact(policy, gen, extra_std=extra_std),
        )
        pred = {"draws": every.mean(0), "all": every}
        if mean:
            pred["mean"] = sim.rollout(obs[:, 0], steps, mu, eps, ResidualContact(policy))
    return pred


def run(args: argparse.Namespace) -> list[Record]:
    """Run the benchmark and return its records (see the module notes)."""
    torch.set_num_threads(1)
    sizes = list(args.sizes)
    speeds, mutations = list(args.impulse_speeds), list(args.mutation_stds)
    extras, stds, rates = list(args.extra_stds), list(args.observation_stds), list(args.adam_rates)
    hedges = list(args.hedge_stds)
    adam_steps = args.adam_steps
    id_drops, mh_samples, mh_burn = args.id_drops, args.mh_samples, args.mh_burn_in
    budget, epochs, test_drops = args.budget, args.generic_epochs, args.test_drops
    csvgd_iters, particles = args.csvgd_iterations, args.particles
    order, val_ids = split(args.seed)
    if args.quick:
        sizes, id_drops, mh_samples, mh_burn = [1, 2], 2, 30, 10
        budget, epochs, test_drops, csvgd_iters, particles = 6, 2, 3, 2, 8
        speeds, extras, val_ids, hedges = speeds[:2], extras[:2], val_ids[:2], hedges[:2]
        stds, rates, adam_steps = stds[:3], rates[:1], 2
    out = Path(args.out_dir)
    test_ids = list(range(401, 401 + test_drops))
    records: list[Record] = []

    # --- identification of (μ, ε) on training drops (V-A), MH and CSVGD
    problem = dice_problem(load_dice_trajectories(order[:id_drops]), position_std=args.position_std)
    train_obs = _states(order[:id_drops])
    sim = problem.simulator.simulator
    rg = sim.body.radius_of_gyration
    note = f"{id_drops} training drops, σ = {args.position_std} m, seed {args.seed}"
    estimates = {}
    for name, overrides in (
        (
            "metropolis",
            {
                "max_iterations": mh_samples,
                "burn_in": mh_burn,
                "chains": args.mh_chains,
                "seed": args.seed,
            },
        ),
        (
            "csvgd",
            {
                "num_particles": args.csvgd_particles,
                "max_iterations": csvgd_iters,
                "shooting": "single",
                "seed": args.seed,
            },
        ),
    ):
        result = run_fit(resolve_estimator(name, None, overrides), problem)
        posterior, wall = result.posterior, result.wall_s
        if name == "metropolis":
            mu, eps = median_coefficients(posterior, [FRICTION, RESTITUTION])
            how = (
                f"median of {args.mh_chains} chains x {mh_samples - mh_burn} samples after "
                f"{mh_burn} burn-in each, acceptance {posterior.meta['acceptance']:.3f}"
            )
        else:
            mean = posterior.as_dict(posterior.mean())
            mu, eps = mean[FRICTION], mean[RESTITUTION]
            how = f"posterior mean, {args.csvgd_particles} particles, {csvgd_iters} iterations"
        estimates[name] = (mu, eps)
        with torch.no_grad():
            pred = sim.rollout(train_obs[:, 0], train_obs.shape[1] - 1, mu, eps)
            train_rmse = float(_rmse(pred, train_obs, rg).mean())
        case = f"real_dice/identification/{name}"
        extra = f"{note}; {how}; {wall:.0f} s wall"
        records += [
            Record(case, "friction", mu, paper=PAPER_MH["friction"], notes=extra),
            Record(case, "restitution", eps, paper=PAPER_MH["restitution"], notes=extra),
            Record(case, "train_rmse", train_rmse, unit="m", notes=extra),
        ]
    mu, eps = estimates["metropolis"]

    # --- Fig. 4: settings chosen on the validation drops, the test drops scored once
    val = _states(val_ids)
    test = _states(test_ids)
    pybullet = torch.from_numpy(np.stack(load_dice_states(test_ids, source="pybullet")))
    records.append(
        Record(
            "real_dice/pybullet",
            "rmse",
            float(_rmse(pybullet, test, rg).mean()),
            unit="m",
            paper=PAPER_PYBULLET_RMSE,
            notes=f"the authors' PyBullet rollouts of drops {test_ids[0]}-{test_ids[-1]}",
        )
    )
    steps = test.shape[1] - 1
    with torch.no_grad():
        sim_rmse = float(_rmse(sim.rollout(test[:, 0], steps, mu, eps), test, rg).mean())
        sim_val = float(_rmse(sim.rollout(val[:, 0], steps, mu, eps), val, rg).mean())
    target = (1.0 - IMPROVEMENT_TARGET) * sim_rmse
    methods = args.methods
    if "simulator_hedged" in methods:
        unit = HEDGE_SPEED * sim.body.mass
        hedge, hedge_val, hedge_rmse = _hedged_simulator(
            sim, val, test, mu, eps, [h * unit for h in hedges], args
        )
        hedge_note = (
            f"the analytical model with a random impulse N(0, s² I) at every contact, the mean "
            f"trajectory of {args.draws} draws; s = {hedge / unit:g} units of {HEDGE_SPEED} m/s "
            f"x mass ({hedge:.4f} N·s) of {hedges[0]:g}–{hedges[-1]:g} chosen on validation; "
            f"validation RMSE {hedge_val:.4f} m"
        )
    adam = [
        PolicyTraining(
            budget=adam_steps,
            seed=args.seed,
            method="adam",
            learning_rate=rate,
            impulse_speed=args.adam_speed,
            batch=args.batch,
        )
        for rate in rates
    ]
    nevergrad = [
        PolicyTraining(
            budget=budget,
            seed=args.seed,
            impulse_speed=speed,
            batch=args.batch,
            mutation_std=mutation,
            score=score,
            samples=2 if score == "error" else args.score_samples,
        )
        for score in args.scores
        for mutation in mutations
        for speed in speeds
    ]
    for n in sizes:
        obs = _states(order[:n])
        common = f"seed {args.seed}; (μ, ε) = ({mu:.3f}, {eps:.3f}) from MH"
        if "simulator" in methods:
            records.append(
                Record(
                    f"real_dice/simulator/n={n}",
                    "rmse",
                    sim_rmse,
                    unit="m",
                    paper=None,
                    notes=f"{common}; validation RMSE {sim_val:.4f} m",
                )
            )
        if "simulator_hedged" in methods:
            note = f"{common}; {hedge_note}"
            records += [
                Record(f"real_dice/simulator_hedged/n={n}", metric, value, unit="m", notes=note)
                for metric, value in (("rmse", hedge_rmse), ("validation_rmse", hedge_val))
            ]
        scoring = (sim, val, test, mu, eps, (extras, stds), target if n <= 30 else None, common)

        learners = (
            ("residual", nevergrad),
            ("residual_wrench", [replace(c, wrench=True) for c in nevergrad]),
            ("residual_adam", adam),
        )
        for method, candidates in learners:
            if method not in methods:
                continue
            found, policy, spread = _residual_records(
                f"real_dice/{method}/n={n}",
                *scoring,
                _policies(sim, obs, mu, eps, candidates),
                args,
                particles,
                fallback=_zero_residual(sim),
            )
            save_policy(policy, out / "residual" / f"{method}_n{n}.pt")
            records += found
            if method == "residual" and n == sizes[-1]:
                belief = propagate_belief(
                    sim,
                    test[0, 0],
                    steps,
                    mu,
                    eps,
                    policy,
                    particles=particles,
                    seed=args.seed,
                    extra_std=spread,
                )
                write_belief_report(
                    out / "residual_belief.html",
                    [(f"drop {test_ids[0]}, residual policy n={n}", belief, test[0].numpy())],
                    title="planar dice: propagated belief against the recorded drop",
                )

        if "residual_gp" in methods:
            found, gp, _ = _residual_records(
                f"real_dice/residual_gp/n={n}",
                *scoring,
                _gp_residuals(sim, obs, mu, eps, GPSettings(args.gp_restarts, args.seed)),
                args,
                particles,
            )
            save_gp_residual(gp, out / "residual" / f"residual_gp_n{n}.pt")
            records += found

        if "generic_residual" not in methods:
            continue
        start = time.perf_counter()
        net, _ = train_generic_residual(
            sim, obs, mu, eps, GenericTraining(epochs=epochs, seed=args.seed), validation=val
        )
        wall = time.perf_counter() - start
        save_generic_residual(net, out / "residual" / f"generic_n{n}.pt")
        with torch.no_grad():
            gen_rmse = float(_rmse(net.rollout(sim, test[:, 0], steps, mu, eps), test, rg).mean())
        records.append(
            Record(
                f"real_dice/generic_residual/n={n}",
                "rmse",
                gen_rmse,
                unit="m",
                notes=(
                    f"{common}; GRU, Adam {epochs} steps, the weights of the best validation "
                    f"RMSE; {wall:.0f} s training"
                ),
            )
        )
    return records


def _policies(
    sim: PlanarImpactSimulator,
    obs: torch.Tensor,
    mu: float,
    eps: float,
    candidates: list[PolicyTraining],
) -> Iterator[tuple[DensityNetwork, str, float]]:
    """The density-network policy trained on ``obs`` with each candidate setting, with how it
    was trained and its output unit (N·s)."""
    for settings in candidates:
        policy, _ = train_residual_policy(sim, obs, mu, eps, settings)
        speed, score = settings.impulse_speed, settings.score
        if settings.method == "adam":
            trained = (
                f"Adam through the simulator, {settings.budget} steps, learning rate "
                f"{settings.learning_rate} chosen on validation, unit {speed} m/s x mass"
            )
        else:
            what = "wrench" if settings.wrench else "impulse"
            trained = (
                f"{what} residual, nevergrad {settings.optimizer} budget {settings.budget} per "
                f"unit, {score} score ({settings.samples} draws per drop), mutation scale "
                f"{settings.mutation_std} and unit {speed} m/s x mass chosen on validation"
            )
        yield policy, trained, float(policy.impulse_scale)


def _hedged_simulator(
    sim: PlanarImpactSimulator,
    val: torch.Tensor,
    test: torch.Tensor,
    mu: float,
    eps: float,
    spreads: list[float],
    args: argparse.Namespace,
) -> tuple[float, float, float]:
    """The simulator hedged between outcomes, a control that learns nothing: the zero residual
    with an impulse spread (N·s) of ``spreads`` added at every contact, predicting the mean
    trajectory of ``args.draws`` draws; the spread of the lowest validation RMSE, that RMSE and
    the test RMSE (m)."""
    rg = sim.body.radius_of_gyration
    zero = _zero_residual(sim)

    def score(drops: torch.Tensor, spread: float) -> float:
        pred = _predict(
            sim, drops, mu, eps, zero, args.draws, args.seed + 7, extra_std=spread, mean=False
        )
        return float(_rmse(pred["draws"], drops, rg).mean())

    found = {spread: score(val, spread) for spread in spreads}
    kept = min(found, key=found.__getitem__)
    return kept, found[kept], score(test, kept)


def _zero_residual(sim: PlanarImpactSimulator) -> DensityNetwork:
    """A density network with every weight zero: mean residual 0, the analytical contact model
    alone, in output units of 0.1 m/s × the body's mass."""
    policy = DensityNetwork(impulse_scale=0.1 * sim.body.mass)
    policy.set_parameter_vector(torch.zeros_like(policy.parameter_vector()))
    return policy


def _gp_residuals(
    sim: PlanarImpactSimulator,
    obs: torch.Tensor,
    mu: float,
    eps: float,
    settings: GPSettings,
) -> Iterator[tuple[ImpulseResidual, str, float]]:
    """The GP residual (III-B) fitted on the contact events of ``obs`` (one candidate), with how
    it was fitted and the unit (N·s) of its calibration spreads."""
    gp, events = train_gp_residual(sim, obs, mu, eps, settings)
    trained = (
        f"GP on {events.step.numel()} single-corner contact events of the training drops "
        f"({events.multi} two-corner events left out), p_opt by constrained least squares over "
        f"the velocity change v(t+2) - v(t); c RBF(ARD) + white kernel, {settings.restarts} "
        "optimiser restarts"
    )
    yield gp, trained, GP_SPREAD_SPEED * sim.body.mass


def _residual_records(
    case: str,
    sim: PlanarImpactSimulator,
    val: torch.Tensor,
    test: torch.Tensor,
    mu: float,
    eps: float,
    grids: tuple[list[float], list[float]],
    target: float | None,
    common: str,
    learners: Iterable[tuple[P, str, float]],
    args: argparse.Namespace,
    particles: int,
    fallback: DensityNetwork | None = None,
) -> tuple[list[Record], P | DensityNetwork, float]:
    """Keep the learner of ``learners`` and the point prediction with the lowest validation
    RMSE, calibrate its belief on ``val`` over the grids ``(extra spreads in its units,
    observation stds in m)`` and score it on ``test``.

    Args:
        learners: ``(residual policy, how it was trained, spread unit in N·s)``; trained as they
            are drawn, so the training time counts in the records' notes.
        fallback: a policy of zero mean residual (:func:`_zero_residual`), scored by its mean
            (the analytical simulator) and kept, with its spread unit, unless a learner's
            point prediction validates strictly lower; ``None``: a learner is always kept.

    Returns:
        The records of ``case``, the kept policy and its calibrated extra spread (N·s).
    """
    rg = sim.body.radius_of_gyration
    best = None
    start = time.perf_counter()
    for policy, trained, unit in learners:
        pred = _predict(sim, val, mu, eps, policy, args.draws, args.seed + 7)
        for kind in ("mean", "draws"):
            score = float(_rmse(pred[kind], val, rg).mean())
            if best is None or score < best[0]:
                best = (score, trained, unit, kind, policy)
    if best is None:
        raise ValueError(f"{case}: no learner to score")
    wall = time.perf_counter() - start
    if fallback is not None:
        pred = _predict(sim, val, mu, eps, fallback, args.draws, args.seed + 7)
        score = float(_rmse(pred["mean"], val, rg).mean())
        if score <= best[0]:
            trained = (
                f"no residual (the analytical contact model alone): no trained policy "
                f"validated below it (best {best[0]:.4f} m against {score:.4f} m; "
                f"{best[1]})"
            )
            best = (score, trained, float(fallback.impulse_scale), "mean", fallback)
    val_rmse, trained, unit, kind, policy = best
    pred = _predict(sim, test, mu, eps, policy, args.draws, args.seed + 7)
    res_rmse = float(_rmse(pred[kind], test, rg).mean())
    draw_rmse = float(_rmse(pred["all"], test.expand_as(pred["all"]), rg).mean())
    extras, stds = grids
    spread, std, val_ranks = _calibrate(
        sim, val, mu, eps, policy, [e * unit for e in extras], stds, args, particles
    )
    ranks = _ranks(sim, test, mu, eps, policy, particles, args, spread, (0.0, std))
    cover = {sd: covered(r, LEVELS) for sd, r in ranks.items()}
    thresholds = recalibrated_thresholds(val_ranks, LEVELS)
    recal = covered(ranks[std], LEVELS, thresholds)
    what = "the mean residual" if kind == "mean" else f"the mean of {args.draws} draws"
    how = f"{common}; {trained}; {wall:.0f} s training"
    chosen = (
        f"{how}; extra spread {spread / unit:g} units of {extras[0]:g}–{extras[-1]:g} and "
        f"observation σ {std:g} m of {stds[0]:g}–{stds[-1]:g} chosen on validation coverage"
    )
    belief = f"{chosen}; the belief alone, without the observation error"
    recalibrated = (
        f"the predictive's region of the level that held the nominal share of the "
        f"{len(val_ranks)} validation samples (split-conformal recalibration)"
    )
    return (
        [
            Record(
                case,
                "rmse",
                res_rmse,
                unit="m",
                target=target,
                notes=f"{how}; {what} (chosen on validation)",
            ),
            Record(case, "validation_rmse", val_rmse, unit="m", notes=f"{how}; {what}"),
            Record(
                case,
                "rmse_draws",
                draw_rmse,
                unit="m",
                notes=f"{how}; the expected RMSE of one draw (mean over {args.draws} draws, eq. 5)",
            ),
            Record(
                case,
                "calibration_std",
                spread,
                unit="N·s",
                notes=f"{chosen}; added in quadrature to the policy's",
            ),
            Record(
                case,
                "observation_std",
                std,
                unit="m",
                notes=f"{chosen}; the predictive is belief ⊕ N(0, σ² I) on (x, z, r_g θ)",
            ),
            Record(case, "coverage_50", cover[std][0.5], better="higher", target=0.5, notes=chosen),
            Record(case, "coverage_90", cover[std][0.9], better="higher", target=0.9, notes=chosen),
            Record(case, "belief_coverage_50", cover[0.0][0.5], better="higher", notes=belief),
            Record(case, "belief_coverage_90", cover[0.0][0.9], better="higher", notes=belief),
            *(
                Record(
                    case,
                    f"recalibrated_coverage_{round(100 * a)}",
                    recal[a],
                    better="higher",
                    target=a,
                    notes=f"{chosen}; {recalibrated}",
                )
                for a in LEVELS
            ),
            *(
                Record(
                    case,
                    f"recalibrated_level_{round(100 * a)}",
                    1.0 - thresholds[a],
                    notes=f"{chosen}; the level of the predictive's region that held {a:g} of "
                    f"the {len(val_ranks)} validation samples",
                )
                for a in LEVELS
            ),
        ],
        policy,
        spread,
    )


def _calibrate(
    sim: PlanarImpactSimulator,
    val: torch.Tensor,
    mu: float,
    eps: float,
    policy: ImpulseResidual,
    spreads: list[float],
    stds: list[float],
    args: argparse.Namespace,
    particles: int,
) -> tuple[float, float, np.ndarray]:
    """The extra spread (N·s) of ``spreads`` and observation std (m) of ``stds`` whose
    validation coverage is nearest the nominal levels (the smallest
    ``|c₅₀ - 0.5| + |c₉₀ - 0.9|``; the first such on ties, spreads before stds), and the
    validation samples' highest-density ranks under that pair."""
    best = None
    for spread in spreads:
        ranks = _ranks(sim, val, mu, eps, policy, particles, args, spread, tuple(stds))
        for std in stds:
            c = covered(ranks[std], LEVELS)
            score = sum(abs(c[a] - a) for a in LEVELS)
            if best is None or score < best[0]:
                best = (score, spread, std, ranks[std])
    if best is None:
        raise ValueError("calibration: no spread or observation std to try")
    _, kept_spread, kept_std, kept_ranks = best
    return kept_spread, kept_std, kept_ranks


def _ranks(
    sim: PlanarImpactSimulator,
    drops: torch.Tensor,
    mu: float,
    eps: float,
    policy: ImpulseResidual,
    particles: int,
    args: argparse.Namespace,
    spread: float,
    stds: tuple[float, ...],
) -> dict[float, np.ndarray]:
    """``{σ: ranks}``: the highest-density ranks (``TrajectoryBelief.density_ranks``) of every
    ``--coverage-every``-th sample of ``drops [K, T + 1, 6]``, drop after drop, under the
    predictive ``belief ⊕ N(0, σ² I)`` for each ``σ`` of ``stds`` (m), the belief propagated
    with the extra spread ``spread`` (N·s)."""
    ranks: dict[float, list[np.ndarray]] = {sd: [] for sd in stds}
    for k in range(drops.shape[0]):
        belief = propagate_belief(
            sim,
            drops[k, 0],
            drops.shape[1] - 1,
            mu,
            eps,
            policy,
            particles=particles,
            seed=args.seed + k,
            extra_std=spread,
        )
        found = belief.density_ranks(
            drops[k].numpy(), stds, every=args.coverage_every, seed=args.seed
        )
        for sd, r in found.items():
            ranks[sd].append(r)
    return {sd: np.concatenate(r) for sd, r in ranks.items()}
