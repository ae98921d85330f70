"""Gaussian-process residual impulse (the earlier residual of the residual-contact paper, III-B).

``p_opt = p_m + p_res ~ GP(p_m, K_xx(θ))``: one Gaussian process per impulse component
``(p_t, p_n)`` (N·s) regressed on the contact-frame features ``x = (M_c, v_c)``
(:func:`dynid.model.planar_impact.contact_features`), with the kernel
``c · RBF(ARD length scales) + white noise`` on standardised features and ``normalize_y``.
:class:`GPResidual` has the call of the density network, ``features -> (mean, std)``, so
:class:`~dynid.model.impulse_residual.ResidualContact` applies it unchanged; its standard
deviation is the predictive one of an observed residual (the white noise included).

The Gaussian processes are scikit-learn's ``GaussianProcessRegressor``. A fitted residual is
saved as numbers only, the training inputs and targets and the fitted kernel hyper-parameters,
with ``torch.save``, and rebuilt on load (``torch.load(weights_only=True)``: nothing is unpickled).
Every :class:`GPResidual`, freshly fitted or loaded, is built by the same path from those numbers,
so a loaded one predicts exactly as the saved one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Kernel, WhiteKernel

__all__ = ["GPResidual", "GPSettings", "fit_gp_residual", "load_gp_residual", "save_gp_residual"]

FEATURES = 5
"""Width of the contact features ``(M_tt, M_tn, M_nn, v_t, v_n)``."""

_KEYS = ("inputs", "targets", "log_hyper", "feature_mean", "feature_std")


def _kernel() -> Kernel:
    """``c · RBF(ℓ₁…ℓ₅) + σ²_w`` with unit starting values (standardised inputs, normalised
    targets); hyper-parameters in the order of ``Kernel.theta`` (logs of c, ℓ₁…ℓ₅, σ²_w)."""
    return ConstantKernel(1.0, (1e-3, 1e3)) * RBF(np.ones(FEATURES), (1e-2, 1e3)) + WhiteKernel(
        0.1, (1e-6, 1e1)
    )


def _regressor(
    kernel: Kernel, optimise: bool, restarts: int, seed: int
) -> GaussianProcessRegressor:
    return GaussianProcessRegressor(
        kernel,
        optimizer="fmin_l_bfgs_b" if optimise else None,
        n_restarts_optimizer=restarts,
        normalize_y=True,
        random_state=seed,
    )


class GPResidual:
    """``x [*B, 5] -> (mean [*B, 2], std [*B, 2])`` of the residual impulse (N·s), float64.

    Args:
        inputs: ``[N, 5]`` training features (as :func:`contact_features` gives them).
        targets: ``[N, 2]`` residual impulses ``p_opt - p_m`` (N·s).
        log_hyper: ``[2, 7]`` fitted kernel hyper-parameters per component (``Kernel.theta``:
            logs of the signal variance, the five length scales and the white-noise variance,
            in standardised units).
        feature_mean, feature_std: ``[5]`` standardisation of the features (``std > 0``).

    Raises:
        ValueError: shapes that do not match, no training point, or non-finite values.
    """

    def __init__(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        log_hyper: torch.Tensor,
        feature_mean: torch.Tensor,
        feature_std: torch.Tensor,
    ) -> None:
        n = inputs.shape[0]
        shapes = {
            "inputs": (inputs, (n, FEATURES)),
            "targets": (targets, (n, 2)),
            "log_hyper": (log_hyper, (2, FEATURES + 2)),
            "feature_mean": (feature_mean, (FEATURES,)),
            "feature_std": (feature_std, (FEATURES,)),
        }
        for name, (value, shape) in shapes.items():
            if tuple(value.shape) != shape or not bool(torch.isfinite(value).all()):
                raise ValueError(
                    f"GPResidual: {name} must be finite of shape {shape}, got {tuple(value.shape)}"
                )
        if n < 1 or not bool((feature_std > 0).all()):
            raise ValueError(f"GPResidual: need ≥ 1 training point and feature_std > 0, got {n}")
        self.inputs = inputs.detach().to(torch.float64).cpu()
        self.targets = targets.detach().to(torch.float64).cpu()
        self.log_hyper = log_hyper.detach().to(torch.float64).cpu()
        self.feature_mean = feature_mean.detach().to(torch.float64).cpu()
        self.feature_std = feature_std.detach().to(torch.float64).cpu()
        x = self._standardise(self.inputs)
        self._gps = []
        for j in range(2):
            kernel = _kernel().clone_with_theta(self.log_hyper[j].numpy())
            gp = _regressor(kernel, optimise=False, restarts=0, seed=0)
            self._gps.append(gp.fit(x, self.targets[:, j].numpy()))

    def _standardise(self, features: torch.Tensor) -> np.ndarray:
        return ((features.to(torch.float64).cpu() - self.feature_mean) / self.feature_std).numpy()

    def __call__(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictive mean and standard deviation ``[*B, 2]`` (N·s) of ``p_res`` for
        ``features [*B, 5]``, float64 on the device of ``features``."""
        if features.shape[-1] != FEATURES:
            raise ValueError(f"GPResidual: features must be [*B, 5], got {tuple(features.shape)}")
        x = self._standardise(features.detach().reshape(-1, FEATURES))
        means, stds = zip(*(gp.predict(x, return_std=True) for gp in self._gps), strict=True)
        shape = (*features.shape[:-1], 2)
        mean = torch.from_numpy(np.stack(means, -1)).reshape(shape).to(features.device)
        std = torch.from_numpy(np.stack(stds, -1)).reshape(shape).to(features.device)
        return mean, std

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The numbers that rebuild this residual (``GPResidual(**state)``)."""
        return {key: getattr(self, key).clone() for key in _KEYS}


@dataclass(frozen=True)
class GPSettings:
    """Hyper-parameter fit of :func:`fit_gp_residual`.

    Attributes:
        restarts: extra starts of the marginal-likelihood optimiser (L-BFGS-B), drawn by
            scikit-learn from the hyper-parameter bounds.
        seed: ``random_state`` of those draws.
    """

    restarts: int = 3
    seed: int = 0


def fit_gp_residual(
    features: torch.Tensor, targets: torch.Tensor, settings: GPSettings = GPSettings()
) -> GPResidual:
    """Fit the two Gaussian processes ``p_res,j ~ GP`` by maximising each one's marginal
    likelihood over its kernel hyper-parameters.

    Args:
        features: ``[N, 5]`` contact features of the training events.
        targets: ``[N, 2]`` residual impulses (N·s).
        settings: optimiser restarts and seed.

    Raises:
        ValueError: shapes that do not match, no event, or a negative restart count.
    """
    if features.dim() != 2 or features.shape[1] != FEATURES or features.shape[0] < 1:
        raise ValueError(f"fit_gp_residual: features must be [N ≥ 1, 5], got {features.shape}")
    if tuple(targets.shape) != (features.shape[0], 2) or settings.restarts < 0:
        raise ValueError(
            f"fit_gp_residual: targets must be [N, 2] and restarts ≥ 0, got "
            f"{tuple(targets.shape)}, {settings.restarts}"
        )
    x = features.detach().to(torch.float64).cpu()
    mean = x.mean(0)
    std = x.std(0, correction=0)
    std = torch.where(std > 1e-12, std, torch.ones_like(std))
    xs = ((x - mean) / std).numpy()
    y = targets.detach().to(torch.float64).cpu()
    hyper = []
    for j in range(2):
        gp = _regressor(_kernel(), optimise=True, restarts=settings.restarts, seed=settings.seed)
        hyper.append(torch.from_numpy(gp.fit(xs, y[:, j].numpy()).kernel_.theta))
    return GPResidual(x, y, torch.stack(hyper), mean, std)


def save_gp_residual(residual: GPResidual, path: str | Path) -> Path:
    """Write the residual's numbers (:meth:`GPResidual.state_dict`) to ``path`` with
    ``torch.save``, creating the parent folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(residual.state_dict(), path)
    return path


def load_gp_residual(path: str | Path) -> GPResidual:
    """Rebuild a residual written by :func:`save_gp_residual` (``weights_only=True``).

    Raises:
        ValueError: the file is not such a state dict (naming the file and the missing keys).
        pickle.UnpicklingError: the file holds objects other than tensors.
    """
    state = torch.load(Path(path), map_location="cpu", weights_only=True)
    absent = [k for k in _KEYS if not isinstance(state, dict) or k not in state]
    if absent:
        raise ValueError(f"{path}: not a GP residual state dict (no {absent} entry)")
    return GPResidual(**{k: state[k] for k in _KEYS})
