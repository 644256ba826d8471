"""The drive gains' ratios from a loaded/unloaded pair (``identify-payload --unloaded``).

The pair's difference is ``d_j = s_j [J_f^T Y pi]_j + F_j dphi_j`` (effort units; ``s_j`` the
link model's effort scale, ``pi`` the payload's 10 parameters about the payload frame, ``dphi``
the change of each run's friction and offsets, projected out per joint as
:func:`~inertial_id.core.joint_torque.torque_payload.paired.identify_paired_payload` does). The
payload loads every joint, the wrist too (its own links are light, so the link identification hardly
sees its gain), and one ``pi`` has to explain every joint's torque through a Jacobian that
changes along the trajectory: a joint's gain off by a few % shows as a residual the payload
cannot take. :func:`pair_gain_factors` fits factors ``c_j`` (new scale ``c_j s_j``) with the
payload, by weighted least squares with ``pi`` projected out (BFGS over ``log c``):

- no gain known: ``sum_j log c_j = 0``, the geometric mean of the scales held at the link
  model's (efforts never fix the common scale, which is the payload's mass scale);
- known gains: their ``c_j = 1`` and the others free (the known gain anchors the scale).

:func:`choose_pair_gains` keeps the model's gains or fits them, whichever predicts held-out
time blocks of the pair better (the geometric mean over joints of the held-out RMS, as
identify-links scores its choices; the payload and the factors fitted on the other blocks),
the fitted ones only when they lower it by more than
:data:`~inertial_id.core.joint_torque.link_gains.MARGIN` (relative; 0.8-5 % on the arms below).

Simulated motor-current arms (``bench/torque_generalization.py``: gains up to 4 % off,
1.5-3 kg payloads, four arms): fitted scale / true within 2.0 % of 1 on every joint, spread
0.6-1.7 % per arm (the rest is the published gains' common scale; published / true 0.96-1.04);
the payload's mass error -0.55, -0.80, +0.43, -0.71 % against -1.03, -0.38, -1.97, -2.29 %
with the link model's gains.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize

from inertial_id.core.joint_torque.link_gains import MARGIN
from inertial_id.core.joint_torque.link_model import N_PI
from inertial_id.core.joint_torque.link_validation import score
from inertial_id.core.joint_torque.links.gains import zero_sum_basis
from inertial_id.core.joint_torque.torque_payload import TorquePayloadIdentifier
from inertial_id.core.joint_torque.torque_payload.paired import PairedDifference

FOLDS = 5


def pair_grams(rows: NDArray[np.float64], difference: NDArray[np.float64],
               nuisance: NDArray[np.float64], folds: int = FOLDS) -> NDArray[np.float64]:
    """Per time block and joint the Gram matrix (folds, nv, 11, 11) of ``[rows_j, d_j]``
    (``rows`` (N, nv, 10) the payload rows at the model's scales, ``difference`` (N, nv)),
    each joint's ``nuisance`` columns (N, nv, k: the friction change, its own block of
    columns per joint) projected out over the whole pair first."""
    n = rows.shape[1]
    per_joint = nuisance.shape[-1] // n
    left = np.empty((rows.shape[0], n, N_PI + 1))
    for j in range(n):
        f = nuisance[:, j, j * per_joint:(j + 1) * per_joint]
        both = np.column_stack((rows[:, j], difference[:, j]))
        left[:, j] = both - f @ np.linalg.lstsq(f, both, rcond=None)[0]
    return np.array([np.einsum("nja,njb->jab", left[block], left[block])
                     for block in np.array_split(np.arange(rows.shape[0]), folds)])


def _fit(gram: NDArray[np.float64], factors: NDArray[np.float64],
         weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """The payload's ``pi`` of least weighted residual at fixed factors."""
    h = np.einsum("j,j,jab->ab", weights, factors ** 2, gram[:, :N_PI, :N_PI])
    g = np.einsum("j,j,ja->a", weights, factors, gram[:, :N_PI, N_PI])
    return np.linalg.lstsq(h, g, rcond=None)[0]


def _squares(gram: NDArray[np.float64], factors: NDArray[np.float64],
             pi: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per joint the sum of squared residuals of ``factors`` and ``pi`` on ``gram``."""
    x = np.concatenate((factors[:, None] * pi[None, :], -np.ones((factors.size, 1))), axis=1)
    return np.clip(np.einsum("ja,jab,jb->j", x, gram, x), 0.0, None)


def _weights(gram: NDArray[np.float64], factors: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-joint weights ``1 / sigma_j^2`` (up to a common factor) of an unweighted fit."""
    ones = np.ones(gram.shape[0])
    return 1.0 / np.maximum(_squares(gram, factors, _fit(gram, factors, ones)), 1e-300)


def pair_gain_factors(gram: NDArray[np.float64], known: ArrayLike | None = None
                      ) -> NDArray[np.float64]:
    """Factors ``c`` (nv,) of the effort scales fitted with the payload on the Gram matrices
    ``gram`` (nv, 11, 11; summed over blocks), anchored as the module docstring says
    (``known``: bool per joint)."""
    n = gram.shape[0]
    known = np.zeros(n, bool) if known is None else np.asarray(known, dtype=bool)
    free = np.flatnonzero(~known)
    if free.size < (1 if known.any() else 2):
        return np.ones(n)
    basis = np.eye(free.size) if known.any() else zero_sum_basis(n)
    weights = _weights(gram, np.ones(n))

    def factors(z: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.ones(n)
        out[free] = np.exp(basis @ z)
        return out

    def objective(z: NDArray[np.float64]) -> float:
        c = factors(z)
        return float(weights @ _squares(gram, c, _fit(gram, c, weights))) / n

    result = minimize(objective, np.zeros(basis.shape[1]), method="BFGS",
                      options={"gtol": 1e-9})
    return factors(result.x)


def choose_pair_gains(grams: NDArray[np.float64], samples: int,
                      known: ArrayLike | None = None) -> tuple[NDArray[np.float64], list[dict]]:
    """Factors of the better of the link model's gains (all 1) and the fitted ones
    (:func:`pair_gain_factors`; better by more than ``MARGIN``) by time-block cross-validation
    on ``grams`` (folds, nv, 11, 11, :func:`pair_grams` of ``samples`` rows), and the table of
    both (``gains``: model or fitted, per-joint held-out RMS in effort units, score, factors
    on the whole pair)."""
    whole = grams.sum(axis=0)
    table = []
    for label in ("model", "fitted"):
        squares = np.zeros(whole.shape[0])
        for k in range(grams.shape[0]):
            train = whole - grams[k]
            c = (pair_gain_factors(train, known) if label == "fitted"
                 else np.ones(whole.shape[0]))
            squares += _squares(grams[k], c, _fit(train, c, _weights(train, c)))
        rms = np.sqrt(squares / samples)
        c = pair_gain_factors(whole, known) if label == "fitted" else np.ones(whole.shape[0])
        table.append({"gains": label, "score": score(rms), "rms": rms.tolist(),
                      "factors": c.tolist()})
    best = table[1] if table[1]["score"] < (1.0 - MARGIN) * table[0]["score"] else table[0]
    return np.asarray(best["factors"]), table


def refit_pair_gains(identifier: TorquePayloadIdentifier, pair: PairedDifference,
                     mode: str = "auto", known: ArrayLike | None = None
                     ) -> tuple[NDArray[np.float64], list[dict]]:
    """Factors of ``identifier.links``' effort scales from ``pair``: ``mode`` auto
    (:func:`choose_pair_gains`), fit (:func:`pair_gain_factors`) or model (all 1); and the
    auto table (empty otherwise). ``known``: bool per joint, gains held."""
    n = identifier.links.model.n
    if mode == "model":
        return np.ones(n), []
    rows = identifier.rows(pair.q, pair.qd, pair.qdd)
    nuisance = identifier.links.drive_friction.regressor(pair.qd, pair.qdd)
    grams = pair_grams(rows, pair.difference, nuisance)
    if mode == "fit":
        return pair_gain_factors(grams.sum(axis=0), known), []
    return choose_pair_gains(grams, pair.t.size, known)
