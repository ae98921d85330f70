"""Posterior summaries, weighting and files."""

import math

import numpy as np
import pytest
import yaml

from dynid.posterior import Posterior, PosteriorError


def _posterior(n: int = 500, seed: int = 0) -> Posterior:
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, -0.9], [-0.9, 1.0]]) * 0.04
    x = rng.multivariate_normal([1.5, 2.0], cov, size=n)
    return Posterior(x, ["l1/offset_z", "l2/offset_z"], ["m", "m"], estimator="test")


def test_uniform_weights_give_sample_moments() -> None:
    post = _posterior()
    np.testing.assert_allclose(post.mean(), post.particles.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(post.cov(), np.cov(post.particles.T), atol=1e-12)
    assert math.isclose(post.weights.sum(), 1.0)


def test_weighted_moments_match_duplicated_particles() -> None:
    # weight 2:1 is the same distribution as the first particle listed twice
    x = np.array([[0.0, 1.0], [2.0, 5.0]])
    post = Posterior(x, ["a", "b"], ["", ""], log_weights=np.log([2.0, 1.0]))
    np.testing.assert_allclose(post.mean(), [2.0 / 3.0, 7.0 / 3.0])
    dup = Posterior(np.array([[0.0, 1.0], [0.0, 1.0], [2.0, 5.0]]), ["a", "b"], ["", ""])
    np.testing.assert_allclose(post.mean(), dup.mean())


def test_excluded_particles_do_not_count_and_may_be_nan() -> None:
    x = np.array([[1.0], [np.nan], [3.0]])
    post = Posterior(x, ["a"], ["kg"], log_weights=np.array([0.0, -np.inf, 0.0]))
    assert post.mean() == pytest.approx([2.0])
    assert post.std() == pytest.approx([math.sqrt(2.0)])


def test_map_uses_log_density() -> None:
    x = np.array([[1.0], [2.0], [3.0]])
    post = Posterior(x, ["a"], ["kg"], log_density=np.array([-5.0, -1.0, -3.0]))
    assert post.map() == pytest.approx([2.0])


def test_explicit_covariance_overrides_spread() -> None:
    post = Posterior(
        np.array([[1.0, 2.0]]), ["a", "b"], ["kg", "m"], covariance=np.diag([4.0, 9.0])
    )
    np.testing.assert_allclose(post.std(), [2.0, 3.0])


def test_inconsistent_inputs_are_named() -> None:
    with pytest.raises(PosteriorError, match="2 columns but 1 names"):
        Posterior(np.zeros((3, 2)), ["a"], ["kg"])
    with pytest.raises(PosteriorError, match="duplicate parameter names"):
        Posterior(np.zeros((3, 2)), ["a", "a"], ["kg", "kg"])
    with pytest.raises(PosteriorError, match="log_weights has 2 entries for 3 particles"):
        Posterior(np.zeros((3, 1)), ["a"], ["kg"], log_weights=np.zeros(2))
    with pytest.raises(PosteriorError, match="NaN"):
        Posterior(np.array([[np.nan]]), ["a"], ["kg"])


def test_npz_round_trip_and_yaml_summary(tmp_path) -> None:
    post = _posterior(50)
    post.meta["seed"] = 3
    post.log_likelihood = np.arange(50.0)
    back = Posterior.load_npz(post.save_npz(tmp_path / "p.npz"))
    np.testing.assert_array_equal(back.particles, post.particles)
    np.testing.assert_array_equal(back.log_likelihood, post.log_likelihood)
    assert back.names == post.names
    assert back.meta == {"seed": 3}
    summary = yaml.safe_load(post.to_yaml(tmp_path / "p.yaml").read_text())
    assert summary["parameters"]["l1/offset_z"]["mean"] == pytest.approx(post.mean()[0])
    assert summary["parameters"]["l2/offset_z"]["unit"] == "m"
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_subset_keeps_weights() -> None:
    post = _posterior(20)
    sub = post.subset(["l2/offset_z"])
    assert sub.dim == 1
    assert sub.mean() == pytest.approx(post.mean()[1:])
    with pytest.raises(PosteriorError, match="not in this posterior"):
        post.subset(["nope"])


def test_relabelling_orders_interchangeable_components_like_the_pivot() -> None:
    """Three interchangeable masses (mass, offset) in every order: each particle is reordered to
    the most likely particle's order; the shared parameter and excluded particles are kept."""
    import itertools

    true = np.array([[1.0, 0.1], [2.0, 0.2], [3.0, 0.3]])
    rows = [np.append(true[list(order)].reshape(-1), 9.81)
            for order in itertools.permutations(range(3))]  # fmt: skip
    particles = np.array([*rows, np.full(7, np.nan)])
    names = [f"m{k}/{p}" for k in (1, 2, 3) for p in ("mass", "offset")] + ["gravity/g"]
    log_lik = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, np.nan])  # pivot: row 3 = order (1, 2, 0)
    log_w = np.array([0.0] * 6 + [-np.inf])
    post = Posterior(particles, names, ["kg", "m"] * 3 + ["m/s^2"], log_weights=log_w,
                     log_likelihood=log_lik)  # fmt: skip
    groups = [[f"m{k}/mass", f"m{k}/offset"] for k in (1, 2, 3)]
    out = post.relabelled(groups)
    np.testing.assert_array_equal(out.particles[:6], np.tile(rows[3], (6, 1)))
    assert np.isnan(out.particles[6]).all()
    np.testing.assert_array_equal(out.log_weights, post.log_weights)
    assert out.names == names
    with pytest.raises(PosteriorError, match="not in this posterior"):
        post.relabelled([["m1/mass"], ["m4/mass"]])
