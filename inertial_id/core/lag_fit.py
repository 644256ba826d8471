"""A time lag fitted together with a rigid body, from Gram matrices that add up over blocks.

A wrench stamped ``tau`` late reads ``w(t) = w_true(t - tau) ~ w_true(t) - tau dw/dt``. Any
signal ``y`` (the wrench itself, or the residual of an estimate) that is a rigid body's rows
``A x`` (``x = [pi; offset]``, :class:`~inertial_id.core.regressor.BatchNormalEquations`) plus
a lag is then ``y = A x - tau dw/dt``, linear in ``[x; tau]``. Its sufficient statistics are
the Gram matrix of ``[features, 1, y, dw/dt]`` per sample (:func:`lag_columns`), the
:func:`~inertial_id.core.regressor.batch_gram` of ``y`` with six more columns; Gram matrices of
blocks add up, so the fit over any set of blocks costs one 16x16 solve (:meth:`LagFit.solve`),
however many samples they hold.

The rate is taken between neighbouring samples and paired with their midpoint (the features
and ``y`` averaged), so that the pairing itself adds no lag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.regressor import GRAM_ONES, GRAM_SIZE, GRAM_WRENCH, BatchNormalEquations

SIGNAL = GRAM_WRENCH
"""Columns of ``y`` in the lag Gram matrix ``[features, 1, y, dw/dt]``: its first
:data:`~inertial_id.core.regressor.GRAM_SIZE` make the ``batch_gram`` of ``y`` ..."""
RATE = slice(GRAM_SIZE, GRAM_SIZE + 6)
"""... and these hold the wrench's rate of change (N/s, N m/s)."""
LAG_GRAM_SIZE = GRAM_SIZE + 6


def lag_columns(times: NDArray[np.float64], features: NDArray[np.float64],
                signal: NDArray[np.float64], wrench: NDArray[np.float64]
                ) -> NDArray[np.float64]:
    """The rows ``[features, 1, y, dw/dt]`` (N - 1, 25) between N samples in time order:
    each the midpoint of two neighbours (features (N, 12) and ``signal`` (N, 6) averaged) and
    the wrench's (N, 6) difference quotient between them. Stamps must increase."""
    dt = np.diff(times)
    columns = np.empty((dt.size, LAG_GRAM_SIZE))
    columns[:, :GRAM_ONES] = 0.5 * (features[1:] + features[:-1])
    columns[:, GRAM_ONES] = 1.0
    columns[:, SIGNAL] = 0.5 * (signal[1:] + signal[:-1])
    columns[:, RATE] = np.diff(wrench, axis=0) / dt[:, None]
    return columns


@dataclass(frozen=True)
class LagSolution:
    """The joint fit ``y = A x + slope dw/dt``: ``x`` (16,), ``slope`` (s; ``-tau``), the
    information of the slope with ``x`` fitted too (weighted, 1/s^2: Frisch-Waugh), the
    weighted residual energy and the samples."""

    x: NDArray[np.float64]
    slope: float
    slope_information: float
    residual: float
    samples: int


class LagFit:
    """Solves lag Gram matrices (:func:`lag_columns`) for the wrench sign ``sign`` with row
    weights ``row_weights`` (6,: ``[fx, fy, fz, tx, ty, tz]``, inverse variances)."""

    def __init__(self, sign: float, row_weights: ArrayLike) -> None:
        self.weights = np.asarray(row_weights, dtype=float)
        self.equations = BatchNormalEquations(sign, self.weights)

    def rate_terms(self, grams: NDArray[np.float64]
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Of lag Gram matrices (B, 25, 25): ``A^T W dw/dt`` (B, 16), ``dw/dt^T W dw/dt``
        and ``dw/dt^T W y`` (B,)."""
        rate_moment = np.einsum("bfr,fra->ba", grams[:, :GRAM_WRENCH.start, RATE],
                                self.equations.weighted_rows)
        rate_energy = np.diagonal(grams[:, RATE, RATE], axis1=1, axis2=2) @ self.weights
        cross = np.diagonal(grams[:, SIGNAL, RATE], axis1=1, axis2=2) @ self.weights
        return rate_moment, rate_energy, cross

    def solve(self, gram: NDArray[np.float64]) -> LagSolution | None:
        """The joint fit over the samples of ``gram`` (25, 25); None without any rate the
        rigid body does not explain, and None when the normal equations are not finite or
        their eigendecomposition fails (a fit is evidence, never a reason to stop a node).
        Directions of ``A`` the data do not excite are left out (pseudo-inverse)."""
        information, moment, energy = self.equations(gram[:GRAM_SIZE, :GRAM_SIZE])
        rate_moment, rate_energy, cross = (v[0] for v in self.rate_terms(gram[None]))
        if not (np.isfinite(information).all() and np.isfinite(moment).all()):
            return None
        try:
            inverse = np.linalg.pinv(information, rcond=1e-10, hermitian=True)
        except np.linalg.LinAlgError:
            return None
        slope_information = float(rate_energy - rate_moment @ inverse @ rate_moment)
        if not (np.isfinite(slope_information) and slope_information > 0.0):
            return None
        slope = float((cross - rate_moment @ inverse @ moment) / slope_information)
        x = inverse @ (moment - slope * rate_moment)
        residual = float(energy - x @ moment - slope * cross)
        samples = int(round(gram[GRAM_ONES, GRAM_ONES]))
        return LagSolution(x, slope, slope_information, max(residual, 0.0), samples)

    def residual_forms(self, solution: LagSolution) -> NDArray[np.float64]:
        """The residual of each axis as a linear form of a sample's lag columns (6, 25):
        ``r_k = y_k - (A x)_k - slope dw_k/dt = c_k . [features, 1, y, dw/dt]``, so that a
        block's residual energy on axis ``k`` is ``c_k^T G c_k`` of its Gram matrix ``G``."""
        forms = np.zeros((6, LAG_GRAM_SIZE))
        forms[:, :GRAM_ONES + 1] = -np.einsum("fka,a->kf", self.equations.rows, solution.x)
        forms[:, SIGNAL] = np.eye(6)
        forms[:, RATE] = -solution.slope * np.eye(6)
        return forms

    def residuals(self, grams: NDArray[np.float64], solution: LagSolution
                  ) -> NDArray[np.float64]:
        """Weighted residual energy under ``solution`` of the samples of each of B lag Gram
        matrices (B, 25, 25): (B,), from :meth:`residual_forms` (no per-block normal
        equations)."""
        forms = self.residual_forms(solution)
        quadratic = np.einsum("k,ki,kj->ij", self.weights, forms, forms)
        return np.einsum("bij,ij->b", grams, quadratic)

    def axis_residuals(self, gram: NDArray[np.float64], solution: LagSolution
                       ) -> NDArray[np.float64]:
        """Unweighted residual energy of each axis (6,) under ``solution`` in ``gram``."""
        forms = self.residual_forms(solution)
        return np.einsum("ki,ij,kj->k", forms, gram, forms)
