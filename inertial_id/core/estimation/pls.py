"""Partial least squares (PLS1) regression from sufficient statistics (Traversaro et al. 2013).

PLS regularises an ill-conditioned identification by fitting ``b ~ A x`` on a few latent
directions only: those that explain the data best, in the order NIPALS finds them. Here only
``A^T W A`` and ``A^T W b`` are available, never ``A``, so the recursion is the "kernel" form
of Lindgren et al. (1993) and Dayal and MacGregor (1997), which needs nothing else.

Conventions. Unknowns ``x = [pi (10); offset (6)]`` (package order). The columns of
``W^(1/2) A`` are scaled to unit norm first (the diagonal of ``A^T W A``; unit variance up to a
common factor, which PLS ignores), and the solution is scaled back. Nothing is mean-centred:
the offset columns (identity blocks) are the intercept. With ``X = W^(1/2) A D^-1`` and
``y = W^(1/2) b``, component ``a`` has

    w_a = X_a^T y / ||X_a^T y||             weights (X_a: X deflated by the first a-1 scores)
    r_a = w_a - sum_{j<a} (p_j^T w_a) r_j   weights for the undeflated X, t_a = X r_a
    p_a = X^T X r_a / (t_a^T t_a)           X loadings
    q_a = r_a^T X^T y / (t_a^T t_a)         y loading
    beta_a = beta_(a-1) + q_a r_a

and ``X_(a+1)^T y = X^T y - X^T X beta_a``. ``beta_a`` minimises ``||X beta - y||`` over the
Krylov space ``span{X^T y, (X^T X) X^T y, ...}`` of dimension ``a``: with all 16 components it
is least squares; with fewer it is shrunk (its scaled norm grows with ``a``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, SolverError
from inertial_id.core.estimate import Estimate, make_estimate
from inertial_id.core.statistics import SufficientStatistics

# A component whose cross-product or score is this small, relative to the first, ends the
# recursion: the Krylov space is exhausted and the fit is already least squares.
_EXHAUSTED = 1e-13


def _scaled_problem(
    stats: SufficientStatistics,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``X^T X``, ``X^T y`` of the column-scaled problem and the column norms ``D``."""
    information = np.asarray(stats.information, dtype=float)
    if stats.rows <= 0 or not np.any(np.diag(information) > 0.0):
        raise SolverError("PLS needs data: the statistics are empty")
    diagonal = np.diag(information)
    norms = np.sqrt(np.where(diagonal > 0.0, diagonal, 1.0))
    xtx = information / np.outer(norms, norms)
    xty = np.asarray(stats.moment, dtype=float) / norms
    return xtx, xty, norms


def pls_path(stats: SufficientStatistics, n_components: int | None = None) -> NDArray[np.float64]:
    """PLS1 solutions ``x`` (in the original units) after 1, 2, ... components, as rows.

    Stops early when the Krylov space is exhausted (the last row is then least squares), so
    there may be fewer rows than ``n_components`` (default: all, 16 for ``[pi; offset]``).
    """
    limit = stats.n_unknowns if n_components is None else int(n_components)
    if not 1 <= limit <= stats.n_unknowns:
        raise InertialIdError(f"n_components must be in 1..{stats.n_unknowns}, got {limit}")
    xtx, xty, norms = _scaled_problem(stats)
    beta = np.zeros_like(xty)
    r_vectors: list[NDArray[np.float64]] = []
    loadings: list[NDArray[np.float64]] = []
    path = []
    first = float(np.linalg.norm(xty))
    for _ in range(limit):
        cross = xty - xtx @ beta  # X_a^T y, the deflated cross-product
        size = float(np.linalg.norm(cross))
        if first == 0.0 or size <= _EXHAUSTED * first:
            break
        r = cross / size
        for _ in range(2):  # twice is enough: keeps the scores orthogonal in floating point
            for r_j, p_j in zip(r_vectors, loadings, strict=True):
                r = r - (p_j @ r) * r_j
        score = float(r @ xtx @ r)  # t_a^T t_a
        if score <= _EXHAUSTED**2 * float(np.trace(xtx)):
            break
        p = xtx @ r / score
        q = float(r @ xty) / score
        beta = beta + q * r
        r_vectors.append(r)
        loadings.append(p)
        path.append(beta / norms)
    if not path:
        raise SolverError("PLS found no component: the data do not correlate with any column")
    return np.array(path)


def pls(stats: SufficientStatistics, n_components: int | None = None) -> Estimate:
    """PLS1 estimate of ``[pi; offset]`` with ``n_components`` latent variables (default all).

    The covariance is that of least squares (:func:`~inertial_id.core.estimation.estimators.
    make_estimate`), with ``sigma^2`` from this solution's residual.
    """
    x = pls_path(stats, n_components)[-1]
    return make_estimate(stats, x, "pls")


def pls_components_by_rss(stats: SufficientStatistics, tolerance: float = 1e-3) -> int:
    """The fewest components whose fit is within ``tolerance`` of the best one.

    Rule: the smallest ``a`` with ``RSS_a <= (1 + tolerance) RSS_LS``, where ``RSS_LS`` is
    the least-squares (all-component) residual. ``RSS_a - RSS_LS = ||A (x_a - x_LS)||^2_W``
    is computed that way, so it does not suffer the cancellation of ``RSS_a`` itself. On
    exact data (``RSS_LS = 0``) this is the number of components PLS needs to fit exactly.
    """
    if tolerance < 0.0:
        raise InertialIdError(f"tolerance must be non-negative, got {tolerance}")
    path = pls_path(stats)
    best = path[-1]
    floor = stats.residual(best)
    difference = path - best
    excess = np.einsum("ai,ij,aj->a", difference, stats.information, difference)
    within = np.flatnonzero(excess <= tolerance * floor)
    return int(within[0]) + 1 if within.size else len(path)
