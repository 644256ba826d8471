"""The dedicated SDP solver's problem: scaling, the unconstrained shortcut, the warm Newton
step, the interior-point fallback, the payload's statistics with the F/T offset
eliminated, and the result (:mod:`inertial_id.core.estimation.sdp`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimation.sdp.interior import iterate
from inertial_id.core.estimation.sdp.linalg import (
    BASIS,
    CENTRE,
    N_PI,
    adjoint,
    assemble,
    cholesky,
    cholesky_solve,
    inverse,
    jacobi,
    matmul,
    matvec,
    smallest_jacobi,
)
from inertial_id.core.estimation.sdp.newton import active_newton

ACCEPTABLE_GAP, ACCEPTABLE_RESIDUAL = 1e-9, 1e-6
"""Gap (relative to the objective's scale ``g^T H^-1 g``) and dual residual (relative to
``max(|g|, |H pi|)``: the optimum of a problem whose ``g`` differs by that much) at which a
solve stopped by the arithmetic before the requested tolerance still counts as optimal."""


@dataclass(frozen=True)
class SdpResult:
    """A solve: ``pi`` (10, the estimate's units), ``status`` (``optimal``, ``interior``:
    the unconstrained minimiser is strictly feasible and is the optimum,
    ``max_iterations``), the ``iterations`` taken, the duality ``gap`` ``<S, Z>`` and the
    norm of the dual residual (both in the scaled objective's units), the smallest
    eigenvalue of ``J(pi) - M`` (positive: strictly feasible), and the ``method`` that
    ended it: ``unconstrained``, ``newton`` (on the active face, from the start) or
    ``interior_point``, and the dual ``Z`` of the LMI (4, 4; the next solve's warm start)."""

    pi: NDArray[np.float64]
    status: str
    iterations: int
    gap: float
    dual_residual: float
    min_slack: float
    method: str
    dual: NDArray[np.float64]

    @property
    def ok(self) -> bool:
        """Optimal (or the unconstrained optimum) and strictly feasible."""
        return self.status in ("optimal", "interior") and self.min_slack > 0.0

THETAS = np.array([0.0, 1e-3, 1e-2, 0.05, 0.2, 0.5, 1.0])
"""Fractions of the way from a warm start to the centre tried for a strictly feasible start."""


def _solve(hs: NDArray[np.float64], gs: NDArray[np.float64], basis: NDArray[np.float64],
           d: NDArray[np.float64], margin: NDArray[np.float64], start: NDArray[np.float64],
           start_dual: NDArray[np.float64], tolerance: float, max_iterations: int
           ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float, float, float,
                      float, float]:
    """The scaled problem (``pi = d y``, ``basis_i = d_i F_i``): the unconstrained optimum if
    it is unique (Cholesky pivots above 1e-6 of the largest) and strictly feasible; else,
    from a ``start`` (scaled; NaN: none), Newton's method on its active face
    (:func:`active_newton`, dual from ``start_dual``); else the interior-point iterations
    from a strictly feasible start (``start`` moved towards the centre, or the centre); then
    the final nudge above rounding. Returns ``y``, the dual ``Z``, status (3 interior,
    1 optimal, 4 optimal by Newton's method, 2 arithmetic limit, 0 out of iterations, -1
    ``H`` not positive definite), iterations (or Newton steps), gap, dual residual, smallest
    eigenvalue of ``J(d y) - M``, and the objective and stationarity scales the status was
    judged on."""
    n = hs.shape[0]
    factor, ok = cholesky(hs)
    if not ok:
        return gs * 0.0, margin * 0.0, -1, 0, 0.0, 0.0, 0.0, 1.0, 1.0
    unconstrained = cholesky_solve(factor, gs)
    objective_scale = max(abs(np.sum(gs * unconstrained)), 1e-300)
    jmat = assemble(unconstrained, basis)
    slack = smallest_jacobi(jmat - margin)
    pivots = np.diag(factor)
    if slack > 0.0 and pivots.min() > 1e-6 * pivots.max():
        return unconstrained, margin * 0.0, 3, 0, 0.0, 0.0, slack, objective_scale, 1.0
    eigen = jacobi(jmat)[0]
    margin_size = np.abs(jacobi(margin)[0]).max()
    newton = (active_newton(hs, gs, basis, margin, start, start_dual, tolerance)
              if np.isfinite(start).all() else (start, start_dual, False, 0, 0.0, 0.0))
    if newton[2]:
        y, z, status, iterations, gap, residual = (newton[0], newton[1], 4, newton[3],
                                                   newton[4], newton[5])
    else:
        tau = max(2.0 * margin_size, 1e-3 * max(abs(eigen[0]), abs(eigen[3])), 1e-12)
        centre = np.empty(n)
        for i in range(n):
            centre[i] = tau * CENTRE[i] / d[i]
        y = centre.copy()
        if np.isfinite(start).all():
            for theta in THETAS:
                point = start + theta * (centre - start)
                if smallest_jacobi(assemble(point, basis) - margin) > 1e-3 * tau:
                    y = point
                    break
        s_inverse = inverse(assemble(y, basis) - margin)
        adjoint_inverse = adjoint(basis, s_inverse)
        mu = max(np.sqrt(np.sum((matvec(hs, y) - gs) ** 2))
                 / max(np.sqrt(np.sum(adjoint_inverse**2)), 1e-300), 1e-12)
        y, z, status, iterations, gap, residual = iterate(
            hs, gs, basis, margin, y, mu * s_inverse, tolerance, objective_scale,
            max_iterations)
    # J(pi) - M as a user evaluates it, from pi = d y; below the rounding of its eigenvalues,
    # move along the centre direction (J(CENTRE) = I: every eigenvalue rises alike).
    pi = d * y
    floor = 1e-9 * margin_size + 1e-14 * np.abs(assemble(pi, BASIS)).max() + 1e-300
    for _ in range(3):
        slack = smallest_jacobi(assemble(d * y, BASIS) - margin)
        if slack >= floor:
            break
        y = y + (2.0 * floor - slack) * CENTRE / d
    hy = matvec(hs, y)
    stationarity_scale = max(np.sqrt(np.sum(gs * gs)), np.sqrt(np.sum(hy * hy)))
    return y, z, status, iterations, gap, residual, slack, objective_scale, stationarity_scale


def solve_unscaled(hessian: NDArray[np.float64], gradient: NDArray[np.float64],
                    margin: NDArray[np.float64], start: NDArray[np.float64],
                    start_dual: NDArray[np.float64], tolerance: float, max_iterations: int
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float,
                               float, float, float, float]:
    """:func:`_solve` on ``H`` scaled to a unit diagonal (``pi = d y``); returns ``pi``
    instead of ``y``."""
    n = hessian.shape[0]
    d = np.empty(n)
    for i in range(n):
        d[i] = 1.0 / np.sqrt(hessian[i, i]) if hessian[i, i] > 0.0 else 1.0
    hs = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            hs[i, j] = d[i] * 0.5 * (hessian[i, j] + hessian[j, i]) * d[j]
    basis = np.empty((n, 4, 4))  # J(d y) = sum_i y_i basis_i
    for i in range(n):
        basis[i] = BASIS[i] * d[i]
    y, z, status, iterations, gap, residual, slack, objective_scale, stationarity_scale = (
        _solve(hs, d * gradient, basis, d, margin, start / d, start_dual, tolerance,
               max_iterations))
    return (d * y, z, status, iterations, gap, residual, slack, objective_scale,
            stationarity_scale)


def prior_scale(information: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-entry scale ``s_i`` of the Euclidean prior on ``pi``: the diagonal of ``A^T W A``
    plus 1e-3 of its mean over all unknowns (the floor keeps the prior in charge of
    directions the data do not excite)."""
    diagonal = np.maximum(np.diag(information), 0.0)
    return diagonal[:N_PI] + 1e-3 * np.mean(diagonal)


_prior_scale = prior_scale  # the compiled code's (numba replaces it), :func:`prior_scale` stays


def solve_payload(information: NDArray[np.float64], moment: NDArray[np.float64],
                      prior: NDArray[np.float64], prior_weight: float,
                      epsilon: float, known_offset: NDArray[np.float64],
                      start: NDArray[np.float64], start_dual: NDArray[np.float64],
                      tolerance: float, max_iterations: int
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float,
                                 float, float, float, float]:
    """The payload's problem from its statistics (``[pi; offset]``, 16 unknowns): the
    Euclidean prior added, the offset fixed (``known_offset`` finite) or eliminated by its
    Schur complement, :func:`solve_unscaled`, the offset's optimum for the solution.
    Returns ``[pi; offset]`` and the rest of :func:`solve_unscaled`'s result."""
    weights = prior_weight * _prior_scale(information)
    hessian = information[:N_PI, :N_PI].copy()
    gradient = moment[:N_PI] + weights * prior
    for i in range(N_PI):
        hessian[i, i] += weights[i]
    cross = information[:N_PI, N_PI:]
    fixed = np.isfinite(known_offset).all()
    offset_inverse = np.eye(moment.shape[0] - N_PI)
    if fixed:
        gradient -= matvec(cross, known_offset)
    else:
        offset_inverse = inverse(information[N_PI:, N_PI:])
        coupling = matmul(cross, offset_inverse)
        hessian -= matmul(coupling, cross.T)
        gradient -= matvec(coupling, moment[N_PI:])
    pi, z, status, iterations, gap, residual, slack, objective_scale, stationarity_scale = (
        solve_unscaled(hessian, gradient, epsilon * np.eye(4), start, start_dual, tolerance,
                        max_iterations))
    x = np.empty(moment.shape[0])
    x[:N_PI] = pi
    if fixed:
        x[N_PI:] = known_offset
    else:
        x[N_PI:] = matvec(offset_inverse, moment[N_PI:] - matvec(cross.T, pi))
    return (x, z, status, iterations, gap, residual, slack, objective_scale,
            stationarity_scale)


def result_of(pi: NDArray[np.float64], dual: NDArray[np.float64], status: int, iterations: int,
            gap: float, residual: float, slack: float, objective_scale: float,
            stationarity_scale: float) -> SdpResult:
    """The :class:`SdpResult` of a :func:`_solve`'s outcome (``pi`` unscaled)."""
    if status == -1:
        raise np.linalg.LinAlgError("the Hessian is not positive definite")
    close = (gap <= ACCEPTABLE_GAP * objective_scale
             and residual <= ACCEPTABLE_RESIDUAL * stationarity_scale)
    name = _STATUS.get(status, "optimal" if close else "numerical_limit")
    if not math.isfinite(slack + pi.sum()):
        name = "numerical_limit"
    return SdpResult(pi, name, iterations, gap, residual, slack,
                     _METHOD.get(status, "interior_point"), dual)


_STATUS = {3: "interior", 1: "optimal", 4: "optimal", 0: "max_iterations"}
_METHOD = {3: "unconstrained", 4: "newton"}
