"""``Posterior``: what every estimator returns — weighted parameter particles with names and units.

Sampling estimators (CSVGD, SVGD, MCMC, particle filters) return many particles; deterministic
ones (LM, the proprioceptive fit) return few particles plus a covariance (linearised or
Laplace). Summaries (mean, covariance, MAP) are computed the same way for all of them, so a
node or the CLI never needs to know which estimator produced the set.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from dynid.atomic import atomic_open, atomic_write_text
from dynid.errors import DynidError

__all__ = ["Posterior", "PosteriorError", "match_labels"]


class PosteriorError(DynidError, ValueError):
    """A posterior was built from, or read from, inconsistent data."""


def _normalise_log_weights(log_weights: np.ndarray) -> np.ndarray:
    """Shift ``log_weights`` so that ``logsumexp(log_weights) == 0``; -inf entries stay -inf."""
    finite = np.isfinite(log_weights)
    if not finite.any():
        raise PosteriorError("all particle log-weights are -inf or NaN")
    top = log_weights[finite].max()
    lse = top + math.log(np.exp(log_weights[finite] - top).sum())
    return np.where(finite, log_weights - lse, -np.inf)


def match_labels(
    x: np.ndarray, reference: np.ndarray, components: Sequence[Sequence[int]]
) -> np.ndarray:
    """``x`` with interchangeable components reordered, row by row, to match ``reference``.

    ``components`` are ``K`` groups of ``D`` column indices each, group ``k`` holding the
    parameters of the ``k``-th of ``K`` interchangeable components (two identical weights: their
    ``x, y`` columns). Every ordering of the groups (``K!`` of them) is tried; each row of ``x``
    takes the one whose component columns are closest to ``reference`` (largest absolute
    difference), its own ordering on ties. Columns outside the groups are kept.

    Args:
        x: ``[..., M]`` parameter vectors.
        reference: ``[M]`` the vector to match.
        components: ``K`` groups of ``D`` column indices.

    Returns:
        ``[..., M]`` the relabelled vectors.
    """
    groups = np.asarray(components, dtype=np.intp)
    if groups.ndim != 2:
        raise PosteriorError("interchangeable components must have equally many parameters")
    x = np.asarray(x, dtype=np.float64)
    flat = groups.reshape(-1)
    candidates = []
    for order in itertools.permutations(range(groups.shape[0])):
        columns = np.arange(x.shape[-1])
        columns[flat] = groups[list(order)].reshape(-1)
        candidates.append(x[..., columns])
    stacked = np.stack(candidates)
    distance = np.abs(stacked[..., flat] - np.asarray(reference)[flat]).max(-1)
    best = distance.argmin(0)
    return np.take_along_axis(stacked, best[None, ..., None], axis=0)[0]


@dataclass
class Posterior:
    """Weighted particles over named parameters.

    Attributes:
        particles: ``[N, M]`` parameter values in SI units (column j is ``names[j]``).
        names: ``M`` parameter names (:mod:`dynid.model.params`, e.g. ``"link3/mass"``).
        units: ``M`` units, e.g. ``"kg"``, ``"m"``, ``"kg*m^2"``.
        log_weights: ``[N]`` normalised log-weights (log-sum-exp 0); uniform when omitted.
            A particle excluded by its estimator (e.g. NaN likelihood) has weight ``-inf``.
        log_likelihood: ``[N]`` data log-likelihood per particle, when the estimator computed it.
        log_density: ``[N]`` unnormalised log posterior per particle; ``map()`` maximises it.
        covariance: ``[M, M]`` covariance supplied by a deterministic estimator (LM: linearised;
            proprio: Gauss–Newton). When set, ``cov()`` returns it instead of the particle spread.
        estimator: name of the estimator that produced it.
        iteration: iterations run.
        meta: free-form provenance (seed, device, wall time, problem name, ...), YAML-serialisable.
    """

    particles: np.ndarray
    names: list[str]
    units: list[str]
    log_weights: np.ndarray | None = None
    log_likelihood: np.ndarray | None = None
    log_density: np.ndarray | None = None
    covariance: np.ndarray | None = None
    estimator: str = ""
    iteration: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.particles = np.atleast_2d(np.asarray(self.particles, dtype=np.float64))
        n, m = self.particles.shape
        self.names = list(self.names)
        self.units = list(self.units)
        if len(self.names) != m or len(self.units) != m:
            raise PosteriorError(
                f"particles have {m} columns but {len(self.names)} names and "
                f"{len(self.units)} units were given"
            )
        if len(set(self.names)) != m:
            dup = sorted({x for x in self.names if self.names.count(x) > 1})
            raise PosteriorError(f"duplicate parameter names: {dup}")
        if self.log_weights is None:
            self.log_weights = np.full(n, -math.log(n))
        self.log_weights = _normalise_log_weights(self._vector("log_weights", self.log_weights))
        if self.log_likelihood is not None:
            self.log_likelihood = self._vector("log_likelihood", self.log_likelihood)
        if self.log_density is not None:
            self.log_density = self._vector("log_density", self.log_density)
        if self.covariance is not None:
            self.covariance = np.asarray(self.covariance, dtype=np.float64)
            if self.covariance.shape != (m, m):
                raise PosteriorError(f"covariance must be [{m}, {m}], got {self.covariance.shape}")
        alive = np.isfinite(self.log_weights)
        if not np.isfinite(self.particles[alive]).all():
            raise PosteriorError("particles with non-zero weight contain NaN or inf values")

    def _vector(self, field_name: str, value: np.ndarray) -> np.ndarray:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
        if arr.shape[0] != self.num_particles:
            raise PosteriorError(
                f"{field_name} has {arr.shape[0]} entries for {self.num_particles} particles"
            )
        return arr

    @property
    def num_particles(self) -> int:
        """N, the number of particles."""
        return self.particles.shape[0]

    @property
    def dim(self) -> int:
        """M, the number of parameters."""
        return self.particles.shape[1]

    @property
    def weights(self) -> np.ndarray:
        """``[N]`` normalised weights (sum 1)."""
        return np.exp(self.log_weights)

    def mean(self) -> np.ndarray:
        """``[M]`` weighted mean of the particles."""
        w = self.weights
        alive = w > 0
        return w[alive] @ self.particles[alive]

    def cov(self) -> np.ndarray:
        """``[M, M]`` covariance: the estimator's own when given, else the weighted particle spread.

        The particle covariance uses the reliability-weights correction
        ``1 / (1 - Σ w²)`` so that equal weights give the unbiased sample covariance.
        """
        if self.covariance is not None:
            return self.covariance
        w = self.weights
        alive = w > 0
        if alive.sum() < 2:
            return np.zeros((self.dim, self.dim))
        x = self.particles[alive] - self.mean()
        wa = w[alive]
        return (x.T * wa) @ x / (1.0 - float(wa @ wa))

    def std(self) -> np.ndarray:
        """``[M]`` marginal standard deviations."""
        return np.sqrt(np.clip(np.diag(self.cov()), 0.0, None))

    def map(self) -> np.ndarray:
        """``[M]`` the particle with the highest unnormalised log posterior (else the heaviest)."""
        score = self.log_density if self.log_density is not None else self.log_weights
        score = np.where(np.isfinite(self.log_weights), score, -np.inf)
        return self.particles[int(np.nanargmax(score))].copy()

    def as_dict(self, values: np.ndarray | None = None) -> dict[str, float]:
        """``{name: value}`` for ``values`` (default: the mean)."""
        vals = self.mean() if values is None else values
        return {n: float(v) for n, v in zip(self.names, vals, strict=True)}

    def subset(self, names: Sequence[str]) -> Posterior:
        """The marginal posterior over ``names`` (same particles and weights)."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise PosteriorError(f"parameters not in this posterior: {missing}")
        idx = [self.names.index(n) for n in names]
        cov = None if self.covariance is None else self.covariance[np.ix_(idx, idx)]
        return Posterior(
            particles=self.particles[:, idx],
            names=list(names),
            units=[self.units[i] for i in idx],
            log_weights=self.log_weights,
            log_likelihood=self.log_likelihood,
            log_density=self.log_density,
            covariance=cov,
            estimator=self.estimator,
            iteration=self.iteration,
            meta=dict(self.meta),
        )

    def relabelled(self, components: Sequence[Sequence[str]]) -> Posterior:
        """This posterior with the label switching among interchangeable components removed.

        When components are interchangeable (two identical weights in a box, csvgd App. II-E),
        the posterior has mirrored modes and a plain particle mean mixes them. Each particle's
        components are reordered to the ordering closest to a pivot particle, the one of highest
        log-likelihood (pivotal reordering; Marin et al. 2005, "Bayesian modelling and inference
        on mixtures of distributions", Sec. 4.2); see :func:`match_labels`. Weights and the other
        fields are kept; particles of weight zero are not reordered.

        Args:
            components: ``K`` groups of ``D`` parameter names, one group per component, in the
                same order within each group (``[["box/weight1_x", "box/weight1_y"],
                ["box/weight2_x", "box/weight2_y"]]``).

        Returns:
            The relabelled posterior (the pivot: the highest finite log-likelihood among the
            particles of non-zero weight, else the first of them).
        """
        missing = sorted({n for group in components for n in group} - set(self.names))
        if missing:
            raise PosteriorError(f"parameters not in this posterior: {missing}")
        groups = [[self.names.index(n) for n in group] for group in components]
        alive = np.flatnonzero(np.isfinite(self.log_weights))
        pivot = alive[0]
        if self.log_likelihood is not None:
            log_lik = self.log_likelihood[alive]
            pivot = alive[int(np.argmax(np.where(np.isnan(log_lik), -np.inf, log_lik)))]
        particles = self.particles.copy()
        particles[alive] = match_labels(particles[alive], particles[pivot], groups)
        return replace(self, particles=particles, meta=dict(self.meta))

    # ----------------------------------------------------------------------------- files
    def summary(self) -> dict[str, Any]:
        """A YAML-ready summary: per parameter mean, std, MAP, unit; plus provenance."""
        mean, std, best = self.mean(), self.std(), self.map()
        params = {
            n: {"mean": float(mu), "std": float(sd), "map": float(mp), "unit": u}
            for n, mu, sd, mp, u in zip(self.names, mean, std, best, self.units, strict=True)
        }
        return {
            "estimator": self.estimator,
            "iteration": int(self.iteration),
            "num_particles": self.num_particles,
            "parameters": params,
            "covariance": self.cov().tolist(),
            "meta": self.meta,
        }

    def to_yaml(self, path: str | Path) -> Path:
        """Write ``summary()`` to ``path`` atomically and return the path."""
        return atomic_write_text(path, yaml.safe_dump(self.summary(), sort_keys=False))

    def save_npz(self, path: str | Path) -> Path:
        """Write the full particle set (no pickles) to ``path`` atomically."""
        arrays: dict[str, np.ndarray] = {
            "particles": self.particles,
            "names": np.array(self.names, dtype=np.str_),
            "units": np.array(self.units, dtype=np.str_),
            "log_weights": self.log_weights,
            "estimator": np.array(self.estimator, dtype=np.str_),
            "iteration": np.array(self.iteration),
            "meta_yaml": np.array(yaml.safe_dump(self.meta), dtype=np.str_),
        }
        for key in ("log_likelihood", "log_density", "covariance"):
            value = getattr(self, key)
            if value is not None:
                arrays[key] = value
        with atomic_open(path, "wb") as fh:
            np.savez(fh, **arrays)
        return Path(path)

    @classmethod
    def load_npz(cls, path: str | Path) -> Posterior:
        """Read a particle set written by ``save_npz``."""
        try:
            with np.load(path, allow_pickle=False) as data:
                opt = {
                    k: data[k] for k in ("log_likelihood", "log_density", "covariance") if k in data
                }
                return cls(
                    particles=data["particles"],
                    names=[str(x) for x in data["names"]],
                    units=[str(x) for x in data["units"]],
                    log_weights=data["log_weights"],
                    estimator=str(data["estimator"]),
                    iteration=int(data["iteration"]),
                    meta=yaml.safe_load(str(data["meta_yaml"])) or {},
                    **opt,
                )
        except KeyError as exc:
            raise PosteriorError(f"{path}: not a dynid particle file (missing {exc})") from exc

    def to_urdf(self, urdf: str, robot: Any | None = None, values: np.ndarray | None = None) -> str:
        """The URDF XML ``urdf`` with this posterior's values (default: the mean) written in.

        See :func:`dynid.urdf.apply_parameters` for which names map to which URDF elements.
        """
        from dynid.urdf import apply_parameters

        return apply_parameters(urdf, self.as_dict(values), robot=robot).xml

    @classmethod
    def from_summary(cls, path: str | Path) -> Posterior:
        """A posterior.yaml written by :meth:`to_yaml`, as one particle at its MAP values with
        its covariance and meta (particle sets are in particles.npz, :meth:`load_npz`).

        Raises:
            PosteriorError: not a readable posterior summary (names the file and what is wrong).
        """
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise PosteriorError(f"{path}: cannot read a posterior: {exc}") from None
        params = data.get("parameters") if isinstance(data, Mapping) else None
        if not isinstance(params, Mapping) or not params:
            raise PosteriorError(f"{path}: no 'parameters' mapping; not a dynid posterior.yaml")
        try:
            names = [str(n) for n in params]
            values = np.array([[float(params[n]["map"]) for n in names]])
            units = [str(params[n].get("unit", "")) for n in names]
            cov = data.get("covariance")
            covariance = None if cov is None else np.asarray(cov, dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise PosteriorError(f"{path}: malformed parameter entry: {exc}") from None
        if covariance is not None and covariance.shape != (len(names), len(names)):
            raise PosteriorError(f"{path}: covariance of shape {covariance.shape}")
        meta = data.get("meta")
        return cls(
            particles=values,
            names=names,
            units=units,
            covariance=covariance,
            estimator=str(data.get("estimator", "")),
            iteration=int(data.get("iteration", 0)),
            meta=dict(meta) if isinstance(meta, Mapping) else {},
        )

    @staticmethod
    def from_mapping(
        values: Mapping[str, float], units: Mapping[str, str], estimator: str = ""
    ) -> Posterior:
        """A one-particle posterior from ``{name: value}`` (e.g. a known truth)."""
        names = list(values)
        return Posterior(
            particles=np.array([[values[n] for n in names]]),
            names=names,
            units=[units.get(n, "") for n in names],
            estimator=estimator,
        )
