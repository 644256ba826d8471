"""What one Levenberg-Marquardt step of
:class:`~inertial_id.core.estimation.manifold.estimator.ManifoldEstimator` needs: the problem in
``pi``
with the offset eliminated (:class:`ReducedProblem`), the quadratic model of its cost in chart
coordinates (:class:`LocalModel`, see :mod:`inertial_id.core.estimation.manifold.chart`), the bounds
that keep ``m`` and ``L`` above the floor, the turn of degenerate principal axes (:func:`aligned`)
and the small-step test. Chart coordinates: relative for ``m`` and ``L``, rad for ``Q``, m for
``c``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import solve_triangular

from inertial_id.core.estimate import N_PI
from inertial_id.core.estimation.estimators import prior_scale, square_root
from inertial_id.core.estimation.manifold.chart import (
    ManifoldPoint,
    manifold_curvature,
    manifold_jacobian,
    pi_from_manifold,
    symmetric_weights,
)
from inertial_id.core.statistics import SufficientStatistics

# Marquardt scaling floor, relative to the largest diagonal of J^T J. It also all but freezes
# a moment sitting on its floor (the diagonal of s_L is (L_k |dr/dL_k|)^2), unless the cost
# wants it to grow.
_SCALE_FLOOR = 1e-12
# Smallest relative mass step (a tenfold decrease).
_MASS_STEP_FLOOR = -0.9
# Two second moments closer than this fraction of the largest one count as equal.
_DEGENERATE_FRACTION = 1e-6


class ReducedProblem:
    """``min_pi ||R pi - z||^2 + const`` after eliminating the offset (variable projection).

    With ``H = A^T W A`` and ``g = A^T W b`` split into pi (p) and offset (o) blocks, the
    optimal offset for a given ``pi`` is ``o(pi) = Hoo^-1 (g_o - H_op pi)`` and the reduced
    problem has the Schur complement ``H_pp - H_po Hoo^-1 H_op`` as its information. The prior
    ``w sum_i s_i (pi_i - prior_i)^2`` (:func:`prior_scale`) is added to it.
    """

    def __init__(
        self, stats: SufficientStatistics, prior: NDArray[np.float64], prior_weight: float
    ) -> None:
        h, g = stats.information, stats.moment
        hoo_inv = np.linalg.pinv(h[N_PI:, N_PI:], rcond=1e-14, hermitian=True)
        self.offset_gain = hoo_inv @ h[N_PI:, :N_PI]
        self.offset_bias = hoo_inv @ g[N_PI:]
        reduced = SufficientStatistics(N_PI)
        reduced.information = h[:N_PI, :N_PI] - h[:N_PI, N_PI:] @ self.offset_gain
        reduced.information = 0.5 * (reduced.information + reduced.information.T)
        reduced.moment = g[:N_PI] - h[:N_PI, N_PI:] @ self.offset_bias
        reduced.energy = stats.energy - float(g[N_PI:] @ self.offset_bias)
        if prior_weight > 0.0:
            weight = prior_weight * prior_scale(h)
            reduced.information += np.diag(weight)
            reduced.moment += weight * prior
            reduced.energy += float(prior @ (weight * prior))
        reduced.rows, reduced.samples = stats.rows, stats.samples
        self.statistics = reduced
        self.root, self.target = square_root(reduced)
        # The cost (||A x - b||^2_W less the rows' noise for corrected statistics, + prior) at
        # the unconstrained optimum: the cost is ||R pi - z||^2 + it.
        self.floor_cost = max(reduced.energy - float(self.target @ self.target), 0.0)

    def offset(self, pi: NDArray[np.float64]) -> NDArray[np.float64]:
        """The optimal offset for ``pi``."""
        return self.offset_bias - self.offset_gain @ pi

    def residual(self, pi: NDArray[np.float64]) -> NDArray[np.float64]:
        """``R pi - z``."""
        return self.root @ pi - self.target

    def cost(self, point: ManifoldPoint) -> float:
        """``||R pi - z||^2`` at a manifold point."""
        residual = self.residual(pi_from_manifold(*point))
        return float(residual @ residual)

    def least_squares_pi(self) -> NDArray[np.float64]:
        """The unconstrained minimiser (minimum norm when the data do not determine it)."""
        info = self.statistics.information
        return np.linalg.lstsq(info, self.statistics.moment, rcond=1e-12)[0]


class LocalModel:
    """Quadratic model of ``||R pi(s) - z||^2`` around a point, in chart coordinates ``s``.

    Hessian ``J^T J + S+`` with ``J = R d pi/ds`` (Gauss-Newton) and ``S+`` the positive part
    (:func:`_positive_part`) of the parametrization's curvature weighted by ``R^T r``
    (:func:`manifold_curvature`). At a boundary optimum the residual is not zero and
    Gauss-Newton alone underestimates the curvature of tilting a flat ``Sigma_C``: it zigzags.
    Rotations about a principal axis whose two other second moments are equal do not move
    ``pi`` and are frozen. Damping is Marquardt's, ``mu diag(J^T J)`` (floored).
    """

    def __init__(
        self, problem: ReducedProblem, point: ManifoldPoint, residual: NDArray[np.float64]
    ) -> None:
        jac = problem.root @ manifold_jacobian(point)
        gauss_newton = jac.T @ jac
        gradient = jac.T @ residual
        diag = np.diag(gauss_newton)
        scale = np.maximum(diag, _SCALE_FLOOR * max(float(diag.max()), 1e-300))
        # m or a moment the cost wants to grow keeps its own scale: it may need to leave its floor.
        positive = np.array([0, 7, 8, 9])
        growing = positive[gradient[positive] < 0.0]
        scale[growing] = np.maximum(diag[growing], 1e-300)
        moving = np.ones(10, dtype=bool)
        moving[4:7] = ~_degenerate_rotations(point.moments)
        blocks = (np.arange(4), 4 + np.flatnonzero(moving[4:]))
        curvature = manifold_curvature(point, problem.root.T @ residual)
        hessian = gauss_newton + _positive_part(curvature, scale, blocks)
        self.moving = moving
        self.hessian = hessian[moving][:, moving]
        self.gradient = gradient[moving]
        self.scale = scale[moving]

    def step(self, damping: float, lower: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """The minimiser of the damped model ``(H + mu D) h = -g`` subject to ``h >= lower``
        (``m`` and ``L`` stay above the floor), or ``None`` if it is not a descent step.

        Active set: coordinates whose step would cross their bound are fixed on it and the
        others re-solved, until none crosses (a projected Newton step).
        """
        matrix = self.hessian + damping * np.diag(self.scale)
        low = lower[self.moving]
        reduced = np.zeros(low.size)
        fixed = np.zeros(low.size, dtype=bool)
        for _ in range(low.size):
            free = ~fixed
            reduced[fixed] = low[fixed]
            rhs = -(self.gradient[free] + matrix[np.ix_(free, fixed)] @ reduced[fixed])
            try:
                factor = np.linalg.cholesky(matrix[np.ix_(free, free)])
            except np.linalg.LinAlgError:
                return None
            reduced[free] = _cholesky_solve(factor, rhs)
            crossing = free & (reduced < low)
            if not crossing.any():
                break
            fixed |= crossing
        step = np.zeros(10)
        step[self.moving] = np.maximum(reduced, low)
        return step if self.predicted(step) > 0.0 else None

    def predicted(self, step: NDArray[np.float64]) -> float:
        """Decrease ``||r||^2 - model(step)`` the model predicts for a chart step."""
        s = step[self.moving]
        return -float(2.0 * s @ self.gradient + s @ self.hessian @ s)


def aligned(
    problem: ReducedProblem, point: ManifoldPoint, residual: NDArray[np.float64]
) -> tuple[ManifoldPoint, NDArray[np.float64], float]:
    """The point with its degenerate principal axes turned to diagonalise the gradient.

    Where second moments are equal, ``Q`` is free within their eigenspace and the chart cannot
    see a descent that first grows one of them along a direction that is not a current axis
    (e.g. a point mass that should become a rod): a spurious stationary point. Turning the
    axes of each group of equal moments to the eigenvectors of the cost's gradient
    (``Gamma'`` restricted to the group) exposes it to the moment coordinates. The moments
    of a group are set to their mean; the new point is kept only if its cost is not higher.
    Takes and returns the residual ``R pi - z``; also returns the cost.
    """
    cost = float(residual @ residual)
    groups = _equal_moment_groups(point.moments)
    if not groups:
        return point, residual, cost
    gamma_p = point.rotation.T @ symmetric_weights((problem.root.T @ residual)[4:])
    gamma_p = gamma_p @ point.rotation
    turn = np.eye(3)
    moments = point.moments.copy()
    for group in groups:
        turn[np.ix_(group, group)] = np.linalg.eigh(gamma_p[np.ix_(group, group)])[1]
        moments[group] = np.mean(moments[group])
    if np.linalg.det(turn) < 0.0:
        turn[:, groups[0][0]] *= -1.0
    candidate = point._replace(rotation=point.rotation @ turn, moments=moments)
    candidate_residual = problem.residual(pi_from_manifold(*candidate))
    candidate_cost = float(candidate_residual @ candidate_residual)
    if candidate_cost <= cost:
        return candidate, candidate_residual, candidate_cost
    return point, residual, cost


def _equal_moment_groups(moments: NDArray[np.float64]) -> list[NDArray[np.int64]]:
    """Groups (2 or 3 indices) of second moments equal to ``1e-6 max L``."""
    order = np.argsort(moments)
    close = np.diff(moments[order]) <= _DEGENERATE_FRACTION * float(np.max(moments))
    if close.all():
        return [order]
    return [order[i : i + 2] for i in range(2) if close[i]]


def _cholesky_solve(factor: NDArray[np.float64], rhs: NDArray[np.float64]) -> NDArray[np.float64]:
    """``x`` with ``L L^T x = rhs`` for the lower Cholesky factor ``L``."""
    return solve_triangular(factor.T, solve_triangular(factor, rhs, lower=True), lower=False)


def _degenerate_rotations(moments: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Per principal axis k: the two other second moments are equal (to ``1e-6 max L``), so
    rotating about axis k leaves ``Sigma_C`` unchanged."""
    others = moments[[[1, 2], [0, 2], [0, 1]]]
    return np.abs(others[:, 0] - others[:, 1]) <= _DEGENERATE_FRACTION * float(np.max(moments))


def _positive_part(
    curvature: NDArray[np.float64],
    scale: NDArray[np.float64],
    blocks: tuple[NDArray[np.int64], ...],
) -> NDArray[np.float64]:
    """Positive semidefinite part, in the Marquardt-scaled metric, of diagonal blocks of the
    curvature; everything outside the blocks is dropped. Keeps the model convex (the damping
    then always yields a descent step) while still seeing the curvature that makes
    Gauss-Newton overshoot."""
    out = np.zeros_like(curvature)
    root = np.sqrt(scale)
    for block in blocks:
        r = np.outer(root[block], root[block])
        index = np.ix_(block, block)
        values, vectors = np.linalg.eigh(curvature[index] / r)
        out[index] = ((vectors * np.maximum(values, 0.0)) @ vectors.T) * r
    return out


def lower_bounds(point: ManifoldPoint, floor: float) -> NDArray[np.float64]:
    """Smallest chart step per coordinate: ``L_k (1 + s_k) >= floor`` and ``m (1 + s_m) >=
    max(floor, m / 10)``: the parallel-axis term ``-[h]x^2 / m`` blows up as ``m -> 0``, which
    the quadratic model cannot see, so the mass may shrink tenfold per step at most."""
    lower = np.full(10, -np.inf)
    lower[0] = max(floor / point.mass - 1.0, _MASS_STEP_FLOOR)
    lower[7:10] = floor / point.moments - 1.0
    return np.minimum(lower, 0.0)


def taken_step(
    point: ManifoldPoint, trial: ManifoldPoint, step: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``step`` with the m and L entries replaced by the relative changes really made
    (after the projection onto the floor), on which the model is then evaluated."""
    taken = step.copy()
    taken[0] = trial.mass / point.mass - 1.0
    taken[7:10] = trial.moments / point.moments - 1.0
    return taken


def step_is_small(step: NDArray[np.float64], point: ManifoldPoint, tolerance: float) -> bool:
    """Every chart coordinate moved less than ``tolerance`` (relative for m and L, radians
    for Q, and relative to the radius of gyration ``sqrt(sum(L) / m)`` for c)."""
    gyration = np.sqrt(np.sum(point.moments) / point.mass) if point.mass > 0 else 1.0
    scaled = np.concatenate((step[[0, 4, 5, 6, 7, 8, 9]], step[1:4] / max(gyration, 1e-300)))
    return bool(np.max(np.abs(scaled)) < tolerance)
