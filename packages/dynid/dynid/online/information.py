"""Recursive Bayesian linear least squares in information form, with forgetting.

Model, per sample ``i`` and channel ``c`` (a joint): ``y_ic = Y_ic θ + e_ic`` with
``e_ic ~ N(0, σ_c²)``, prior ``θ ~ N(θ₀, P₀)``. The data enter as per-channel sufficient
statistics, exponentially forgotten with factor ``λ`` per sample::

    D_c ← λ D_c + Σ Y_icᵀ Y_ic,   d_c ← λ d_c + Σ Y_icᵀ y_ic,
    s_c ← λ s_c + Σ y_ic²,        n_c ← λ n_c + 1

and the posterior is ``Λ = P₀⁻¹ + Σ_c D_c / (κ_c σ_c²)``,
``Λ θ̂ = P₀⁻¹ θ₀ + Σ_c d_c / (κ_c σ_c²)``.
The prior is not forgotten, so an unexcited direction returns to it instead of winding up.

``σ_c²`` is not fixed in advance: it is the residual variance of the window at the estimate,
``RSS_c(θ̂) = s_c − 2 θ̂ᵀ d_c + θ̂ᵀ D_c θ̂``, regularised by a prior guess ``σ₀,c²`` worth ``ν₀``
samples: ``σ_c² = (RSS_c + ν₀ σ₀,c²) / (n_c + ν₀)`` (the mean of a scaled-inverse-χ² posterior).
``κ_c ≥ 1`` is the integrated autocorrelation time of channel ``c``'s residuals in samples:
``n`` correlated samples carry the information of ``n / κ`` independent ones, so dividing the
data information by ``κ`` keeps the covariance honest for densely sampled, low-passed data.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["InformationLS"]

Array = NDArray[np.float64]


class InformationLS:
    """The estimator of the module docstring.

    Args:
        prior_mean: ``θ₀ [p]``.
        prior_cov: ``P₀ [p, p]``, symmetric positive definite.
        noise_std: ``σ₀ [C]`` the prior guess of each channel's noise (units of ``y``), > 0.
        noise_weight: ``ν₀`` (samples) the guess is worth, > 0.
        forgetting: ``λ`` in ``(0, 1]`` per sample.
    """

    def __init__(
        self,
        prior_mean: Array,
        prior_cov: Array,
        noise_std: Array,
        noise_weight: float,
        forgetting: float,
    ) -> None:
        self.noise_std0 = np.asarray(noise_std, dtype=np.float64)
        self.noise_weight = float(noise_weight)
        self.forgetting = float(forgetting)
        c, p = self.noise_std0.size, int(np.asarray(prior_mean).size)
        self._D = np.zeros((c, p, p))
        self._d = np.zeros((c, p))
        self._s = np.zeros(c)
        self._n = np.zeros(c)
        self.set_prior(prior_mean, prior_cov)

    def set_prior(self, prior_mean: Array, prior_cov: Array) -> None:
        """Replace the prior and forget every sample: the estimate is the prior again."""
        self.prior_mean = np.asarray(prior_mean, dtype=np.float64).copy()
        self.prior_info = np.linalg.inv(np.asarray(prior_cov, dtype=np.float64))
        self.prior_info = 0.5 * (self.prior_info + self.prior_info.T)
        self.prior_cov = np.asarray(prior_cov, dtype=np.float64).copy()
        self._prior_rhs = self.prior_info @ self.prior_mean
        for x in (self._D, self._d, self._s, self._n):
            x[...] = 0.0
        self.mean = self.prior_mean.copy()
        self.information = self.prior_info.copy()
        self.noise_var = self.noise_std0**2

    @property
    def samples(self) -> float:
        """The forgotten count of samples in the window, ``max_c n_c``."""
        return float(self._n.max())

    def add(self, Y: Array, y: Array) -> None:
        """Add ``B`` samples: regressor rows ``Y [B, C, p]`` and observations ``y [B, C]``."""
        b = y.shape[0]
        if b == 0:
            return
        lam = self.forgetting
        w = lam ** np.arange(b - 1, -1, -1, dtype=np.float64)
        decay = lam**b
        weighted = (Y * w[:, None, None]).transpose(1, 2, 0)  # [C, p, B]
        self._D *= decay
        self._D += weighted @ Y.transpose(1, 0, 2)
        self._d *= decay
        self._d += (weighted @ y.T[:, :, None])[..., 0]
        self._s = decay * self._s + w @ (y * y)
        self._n = decay * self._n + w.sum()

    def solve(self, kappa: Array | float, iterations: int = 1) -> None:
        """Update :attr:`mean`, :attr:`information` and :attr:`noise_var` for the samples so
        far with the correlation times ``kappa`` (``[C]`` or one for all), alternating the
        weighted solve and the noise variances ``iterations`` times."""
        for _ in range(iterations):
            weights = 1.0 / (kappa * self.noise_var)
            info = self.prior_info + np.tensordot(weights, self._D, 1)
            rhs = self._prior_rhs + weights @ self._d
            self.information = 0.5 * (info + info.T)
            self.mean = np.linalg.solve(self.information, rhs)
            theta = self.mean
            rss = self._s - 2.0 * self._d @ theta + (self._D @ theta) @ theta
            nu = self.noise_weight
            self.noise_var = (np.clip(rss, 0.0, None) + nu * self.noise_std0**2) / (self._n + nu)

    def covariance(self) -> Array:
        """``Λ⁻¹ [p, p]``."""
        cov = np.linalg.inv(self.information)
        return 0.5 * (cov + cov.T)
