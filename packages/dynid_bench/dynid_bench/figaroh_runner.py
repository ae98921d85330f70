"""FIGAROH's dynamic identification on torque samples that dynid prepared: the ``figaroh`` rows of
``scripts/bench panda_real``.

Run as a script with the interpreter of an environment that has ``figaroh`` (and with it
Pinocchio, picos and cvxopt); it imports neither dynid nor torch::

    python figaroh_runner.py IN.npz OUT.npz

``IN.npz`` holds ``model`` (the robot's Pinocchio model, ``pinocchio.Model.saveToString``), the
training samples ``train_q``, ``train_v``, ``train_a`` (``[S, nv]``: rad, rad/s, rad/s²) and
``train_tau`` (``[S, nv]`` N·m), and ``score_count`` sets of samples ``score<k>_q|v|a`` to predict.

Two of FIGAROH's estimators run on the same regressor (``build_regressor_basic`` with viscous
and static friction ``fv v + fs sign(v)`` and an offset per joint, rows joint-major):

- ``ols``: its default identification — columns with no effect removed, base parameters by
  its double QR (``QRDecomposer.double_decomposition``), ordinary least squares on them;
- ``physical``: its physically consistent effort fit (``physical_fit.solve_direct_effort_fit``:
  a pseudo-inertia LMI per link, a light Tikhonov pull toward the model's standard parameters,
  picos with cvxopt).

``OUT.npz`` holds, per estimator ``e``: ``e_pred<k>`` (``[S_k, nv]`` predicted torques, N·m),
``e_wall_s`` (fit time, s) and ``e_min_eig`` (``[nb]`` the smallest eigenvalue of each link's
pseudo-inertia, kg·m², ``nan`` for ``ols``, whose standard parameters are not unique).
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
from figaroh.identification.parameter import (
    add_standard_additional_parameters,
    get_standard_parameters,
)
from figaroh.identification.physical_consistency import pseudo_inertia_matrix_from_p10
from figaroh.identification.physical_fit import build_problem, solve_direct_effort_fit
from figaroh.tools.qrdecomposition import get_baseIndex
from figaroh.tools.regressor import build_regressor_basic

QR_TOL = 1e-8
ELIMINATE_TOL = 1e-6


def _regressor(robot: SimpleNamespace, config: dict, q, v, a) -> np.ndarray:
    return build_regressor_basic(robot, q, v, a, config)


def _joint_major(x: np.ndarray) -> np.ndarray:
    """``[S, nv]`` → ``[nv S]``, FIGAROH's row order."""
    return np.ascontiguousarray(x.T).reshape(-1)


def _sample_major(y: np.ndarray, nv: int) -> np.ndarray:
    """``[nv S]`` → ``[S, nv]``."""
    return y.reshape(nv, -1).T


def main(path_in: str, path_out: str) -> None:
    """Fit both estimators on the training samples and predict every score set (module notes)."""
    data = np.load(path_in)
    model = pin.Model()
    model.loadFromString(str(data["model"]))
    robot = SimpleNamespace(model=model, data=model.createData())
    nv = model.nv
    joints = list(model.names[1:])
    config = {
        "has_friction": True,
        "has_joint_offset": True,
        "has_actuator_inertia": False,
        "act_idxv": list(range(nv)),
    }
    params = {**get_standard_parameters(model, config)}
    params.update(add_standard_additional_parameters(model, config))
    names = list(params)
    q, v, a = (data[f"train_{k}"] for k in "qva")
    tau = _joint_major(data["train_tau"])
    W = _regressor(robot, config, q, v, a)
    if W.shape[1] != len(names):
        raise SystemExit(f"figaroh regressor has {W.shape[1]} columns for {len(names)} names")
    scores = [
        _regressor(robot, config, *(data[f"score{k}_{x}"] for x in "qva"))
        for k in range(int(data["score_count"]))
    ]
    out: dict[str, np.ndarray] = {}

    # FIGAROH's default: eliminate unexcited columns, base parameters by double QR, OLS
    start = time.perf_counter()
    keep = np.flatnonzero(np.diag(W.T @ W) >= ELIMINATE_TOL)
    params_r = [names[i] for i in keep]
    columns = keep[list(get_baseIndex(W[:, keep], params_r, tol_qr=QR_TOL))]
    phi_b, *_ = np.linalg.lstsq(W[:, columns], tau, rcond=None)
    out["ols_wall_s"] = np.array(time.perf_counter() - start)
    out["ols_min_eig"] = np.full(len(joints), np.nan)
    for k, Wk in enumerate(scores):
        out[f"ols_pred{k}"] = _sample_major(Wk[:, columns] @ phi_b, nv)

    # FIGAROH's physically consistent effort fit, pulled lightly toward the model's values
    start = time.perf_counter()
    prior = np.array([params[n] for n in names])
    problem = build_problem(W, tau, names, joints, prior=prior, qr_tol=QR_TOL)
    record = solve_direct_effort_fit(problem, solver="cvxopt")
    if record.theta is None:
        raise SystemExit(f"figaroh physical fit failed: {record.solver_status} {record.exception}")
    theta = np.asarray(record.theta, dtype=float)
    out["physical_wall_s"] = np.array(time.perf_counter() - start)
    out["physical_min_eig"] = np.array([
        float(np.linalg.eigvalsh(pseudo_inertia_matrix_from_p10(theta[10 * b : 10 * b + 10]))[0])
        for b in range(len(joints))
    ])  # fmt: skip
    for k, Wk in enumerate(scores):
        out[f"physical_pred{k}"] = _sample_major(Wk @ theta, nv)
    np.savez(path_out, **out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: figaroh_runner.py IN.npz OUT.npz")
    main(sys.argv[1], sys.argv[2])
