"""Unconstrained weighted least squares (:func:`least_squares`, the baseline) and the square
root of the weighted problem (:func:`square_root`) that the constrained estimators solve.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SolverError
from inertial_id.core.estimate import (
    N_PI,
    N_UNKNOWNS,
    Estimate,
    make_estimate,
)
from inertial_id.core.statistics import SufficientStatistics


def require_rows(stats: SufficientStatistics) -> None:
    """Raise :class:`SolverError` unless ``stats`` hold at least as many equations as unknowns."""
    if stats.rows < N_UNKNOWNS:
        raise SolverError(f"{stats.rows:.0f} equations cannot determine {N_UNKNOWNS} unknowns")


def least_squares(stats: SufficientStatistics, known_offset: ArrayLike | None = None) -> Estimate:
    """Unconstrained weighted least squares (the baseline; may be physically inconsistent).

    With ``known_offset`` the F/T offset is fixed and only ``pi`` is estimated.
    """
    require_rows(stats)
    h, g = stats.information, stats.moment
    if known_offset is None:
        x = np.linalg.lstsq(h, g, rcond=1e-12)[0]
    else:
        offset = np.asarray(known_offset, dtype=float)
        rhs = g[:N_PI] - h[:N_PI, N_PI:] @ offset
        x = np.concatenate((np.linalg.lstsq(h[:N_PI, :N_PI], rhs, rcond=1e-12)[0], offset))
    return make_estimate(stats, x, "least_squares", known_offset is not None)


def square_root(stats: SufficientStatistics) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``R``, ``z`` with ``||R x - z||^2 = ||A x - b||^2_W - const`` (eigen square root)."""
    values, vectors = np.linalg.eigh(stats.information)
    keep = values > values[-1] * 1e-14 if values[-1] > 0 else np.zeros_like(values, bool)
    root = np.sqrt(np.where(keep, values, 0.0))
    r = root[:, None] * vectors.T
    with np.errstate(divide="ignore"):
        z = np.where(keep, (vectors.T @ stats.moment) / np.where(keep, root, 1.0), 0.0)
    return r, z
