"""A dedicated solver for the payload's LMI-constrained least squares.

The problem the payload estimate solves once the F/T offset is eliminated (or known) is

    minimise   1/2 pi^T H pi - g^T pi      subject to   J(pi) - M >= 0,

``H`` (10 x 10, positive definite) and ``g`` from the sufficient statistics (plus the prior),
``J`` the pseudo-inertia (4 x 4, linear in ``pi``; :func:`~inertial_id.core.parameters.
pseudo_inertia`) and ``M`` the margin (``epsilon I``). A general conic solver reached
through cvxpy spends most of its milliseconds on the way in and out; this module solves
exactly this problem, from the sufficient statistics in one compiled call
(:func:`solve_statistics`):

- the unconstrained minimiser when it is unique and strictly feasible;
- else, from the previous optimum and its dual, Newton's method on the active face of the
  LMI with a certificate of optimality (:func:`_active_newton`); a live solver re-solving
  after each batch of samples mostly ends here, in a few steps;
- else a primal-dual interior-point method keeping ``S = J(pi) - M`` strictly positive definite
  (the feasible set does not depend on the data, so a start is easy to find: the previous
  optimum moved slightly towards a body with ``J = tau I``), with a dual ``Z > 0``;
- Nesterov-Todd scaling (Vandenberghe, "The CVXOPT linear and quadratic cone program
  solvers", 2010, sec. 4): ``W`` with ``W^-1 S W^-T = W^T Z W = Lambda`` diagonal, from the
  Cholesky factors of ``S`` and ``Z`` and one 4 x 4 SVD (one-sided Jacobi);
- Mehrotra's predictor-corrector: an affine step, the centring ``sigma = (mu_aff / mu)^3``
  and the second-order correction;
- the Newton system reduced to 10 x 10: ``(H + G) dpi = -r_d + <F~, D>`` with
  ``G_ij = <F~_i, F~_j>``, ``F~_i = W^-1 F_i W^-T`` the scaled basis of ``J``.

The variables are scaled so that ``H`` has a unit diagonal. ``gap`` is ``<S, Z>`` (the
duality gap, objective units); a solve ends when it and the dual residual are below
``tolerance`` relative to the objective's scale. numba compiles it (:func:`warm_up`; a node
prepares it in the background: :func:`prepare_in_background`); every small factorisation is
a loop here, since a BLAS or LAPACK call on a 4 x 4 matrix costs more than its arithmetic.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.parameters import pseudo_inertia

N_PI = 10
BASIS = np.array([pseudo_inertia(np.eye(N_PI)[i]) for i in range(N_PI)])
"""``F_i = J(e_i)``: ``J(pi) = sum_i pi_i F_i`` (10, 4, 4)."""
CENTRE = np.array([1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 2.0])
"""``pi`` with ``J(pi) = I``: unit mass at the origin, inertia ``2 I`` (a strictly feasible
direction whatever the margin's size, once scaled by ``tau``)."""
ACCEPTABLE_GAP, ACCEPTABLE_RESIDUAL = 1e-9, 1e-6
"""Gap (relative to the objective's scale ``g^T H^-1 g``) and dual residual (relative to
``max(|g|, |H pi|)``: the optimum of a problem whose ``g`` differs by that much) at which a
solve stopped by the arithmetic before the requested tolerance still counts as optimal."""
STEP_FRACTION = 0.99
"""Fraction of the step to the boundary of the cone taken."""


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


def _assemble(coefficients: NDArray[np.float64], basis: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sum_i coefficients_i basis_i`` (4, 4)."""
    out = np.zeros((4, 4))
    for i in range(coefficients.shape[0]):
        out += coefficients[i] * basis[i]
    return out


def _adjoint(basis: NDArray[np.float64], matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """``<basis_i, matrix>`` for every ``i`` (10,)."""
    out = np.zeros(basis.shape[0])
    for i in range(basis.shape[0]):
        for a in range(4):
            for b in range(4):
                out[i] += basis[i, a, b] * matrix[a, b]
    return out


def _matmul(left: NDArray[np.float64], right: NDArray[np.float64]) -> NDArray[np.float64]:
    """``left @ right`` by loops (compiled, a 4 x 4 product costs less than a BLAS call)."""
    out = np.zeros((left.shape[0], right.shape[1]))
    for i in range(left.shape[0]):
        for k in range(left.shape[1]):
            value = left[i, k]
            for j in range(right.shape[1]):
                out[i, j] += value * right[k, j]
    return out


def _matvec(matrix: NDArray[np.float64], vector: NDArray[np.float64]) -> NDArray[np.float64]:
    """``matrix @ vector`` by loops."""
    out = np.zeros(matrix.shape[0])
    for i in range(matrix.shape[0]):
        for k in range(matrix.shape[1]):
            out[i] += matrix[i, k] * vector[k]
    return out


def _rotation(ratio: float) -> tuple[float, float]:
    """Cosine and sine of the Jacobi rotation that zeroes the off-diagonal entry of a 2 x 2
    symmetric matrix whose ``(d_qq - d_pp) / (2 d_pq)`` is ``ratio`` (the smaller angle)."""
    t = (1.0 if ratio >= 0.0 else -1.0) / (abs(ratio) + np.sqrt(1.0 + ratio * ratio))
    c = 1.0 / np.sqrt(1.0 + t * t)
    return c, c * t


def _rotate_columns(matrix: NDArray[np.float64], p: int, q: int, c: float,
                    sn: float) -> None:
    """Columns ``p, q`` of ``matrix`` <- ``(c col_p - sn col_q, sn col_p + c col_q)``."""
    for k in range(matrix.shape[0]):
        left, right = matrix[k, p], matrix[k, q]
        matrix[k, p] = c * left - sn * right
        matrix[k, q] = sn * left + c * right


def _left_singular(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64],
                                                          NDArray[np.float64]]:
    """Left singular vectors ``U`` (columns) and singular values of a small square matrix
    ``B = U diag(sigma) V^T``, by one-sided Jacobi rotations on ``B^T`` (Hestenes): the
    rotations that make the columns of ``B^T R`` orthogonal accumulate into ``R = U``, and
    the columns' norms are ``sigma``. Relative accuracy on graded matrices, unlike the
    eigenvalues of ``B B^T``; no LAPACK call."""
    n = matrix.shape[0]
    a = matrix.T.copy()
    u = np.eye(n)
    for _ in range(40):
        rotated = False
        for p in range(n - 1):
            for q in range(p + 1, n):
                alpha, beta, gamma = 0.0, 0.0, 0.0
                for k in range(n):
                    alpha += a[k, p] * a[k, p]
                    beta += a[k, q] * a[k, q]
                    gamma += a[k, p] * a[k, q]
                if abs(gamma) <= 1e-15 * np.sqrt(alpha * beta) or gamma == 0.0:
                    continue
                rotated = True
                c, sn = _rotation((beta - alpha) / (2.0 * gamma))
                _rotate_columns(a, p, q, c, sn)
                _rotate_columns(u, p, q, c, sn)
        if not rotated:
            break
    sigma = np.zeros(n)
    for j in range(n):
        for k in range(n):
            sigma[j] += a[k, j] * a[k, j]
        sigma[j] = np.sqrt(sigma[j])
    return u, sigma


def _congruence(r: NDArray[np.float64], basis: NDArray[np.float64]) -> NDArray[np.float64]:
    """``r basis_i r^T`` for every ``i``, from the few nonzero entries of each ``basis_i``."""
    n = basis.shape[0]
    out = np.zeros((n, 4, 4))
    for i in range(n):
        for a in range(4):
            for b in range(4):
                value = basis[i, a, b]
                if value != 0.0:
                    for p in range(4):
                        for q in range(4):
                            out[i, p, q] += value * r[p, a] * r[q, b]
    return out


def _jacobi(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Eigenvalues (ascending) and eigenvectors (columns) of a small symmetric matrix by
    cyclic Jacobi rotations (a few sweeps; a LAPACK call costs more than the whole on
    4 x 4)."""
    a = matrix.copy()
    n = a.shape[0]
    vectors = np.eye(n)
    for _ in range(30):
        off = 0.0
        for p in range(n):
            for q in range(p + 1, n):
                off += a[p, q] * a[p, q]
        scale = 0.0
        for p in range(n):
            scale += a[p, p] * a[p, p]
        if off <= 1e-30 * scale + 1e-300:
            break
        for p in range(n):
            for q in range(p + 1, n):
                if a[p, q] == 0.0:
                    continue
                c, sn = _rotation((a[q, q] - a[p, p]) / (2.0 * a[p, q]))
                _rotate_columns(a, p, q, c, sn)
                for k in range(n):  # rows p, q
                    apk, aqk = a[p, k], a[q, k]
                    a[p, k] = c * apk - sn * aqk
                    a[q, k] = sn * apk + c * aqk
                _rotate_columns(vectors, p, q, c, sn)
    values = np.empty(n)
    for p in range(n):
        values[p] = a[p, p]
    order = np.argsort(values)
    return values[order], vectors[:, order]


def _smallest_jacobi(matrix: NDArray[np.float64]) -> float:
    """Smallest eigenvalue of a small symmetric matrix (:func:`_jacobi`)."""
    return _jacobi(matrix)[0][0]


def _max_step(lam: NDArray[np.float64], direction: NDArray[np.float64]) -> float:
    """Largest ``a`` with ``diag(lam) + a direction >= 0`` (inf when any ``a`` is fine)."""
    root = 1.0 / np.sqrt(lam)
    scaled = np.empty((4, 4))
    for i in range(4):
        for j in range(4):
            scaled[i, j] = root[i] * direction[i, j] * root[j]
    smallest = _smallest_jacobi(scaled)
    return np.inf if smallest >= 0.0 else -1.0 / smallest


def _cholesky(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """Lower Cholesky factor of a small symmetric matrix and whether it is positive
    definite (no exception: a failed factorisation is an answer here, e.g. a step test)."""
    n = matrix.shape[0]
    factor = np.zeros((n, n))
    for j in range(n):
        pivot = matrix[j, j]
        for k in range(j):
            pivot -= factor[j, k] * factor[j, k]
        if not pivot > 0.0:
            return factor, False
        factor[j, j] = np.sqrt(pivot)
        for i in range(j + 1, n):
            value = matrix[i, j]
            for k in range(j):
                value -= factor[i, k] * factor[j, k]
            factor[i, j] = value / factor[j, j]
    return factor, True


def _inverse(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """Inverse of a small symmetric positive definite matrix by Cholesky (NaN if it is
    not: the solve's result then says so)."""
    n = matrix.shape[0]
    factor, ok = _cholesky(matrix)
    out = np.full((n, n), np.nan)
    if ok:
        for j in range(n):
            unit = np.zeros(n)
            unit[j] = 1.0
            out[:, j] = _cholesky_solve(factor, unit)
    return out


def _cholesky_solve(factor: NDArray[np.float64], right: NDArray[np.float64]
                    ) -> NDArray[np.float64]:
    """``x`` with ``L L^T x = right`` by forward and back substitution."""
    n = right.shape[0]
    x = right.copy()
    for i in range(n):
        for k in range(i):
            x[i] -= factor[i, k] * x[k]
        x[i] /= factor[i, i]
    for i in range(n - 1, -1, -1):
        for k in range(i + 1, n):
            x[i] -= factor[k, i] * x[k]
        x[i] /= factor[i, i]
    return x


def _direction(rhs: NDArray[np.float64], lam: NDArray[np.float64], rd: NDArray[np.float64],
               flat: NDArray[np.float64], scaled: NDArray[np.float64],
               system: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                     NDArray[np.float64]]:
    """The Newton direction for the complementarity right-hand side ``rhs`` (scaled):
    ``dpi``, ``dS~`` and ``dZ~``."""
    target = np.empty((4, 4))  # dS~ + dZ~ = 2 rhs_ij / (lam_i + lam_j)
    for i in range(4):
        for j in range(4):
            target[i, j] = 2.0 * rhs[i, j] / (lam[i] + lam[j])
    dy = _cholesky_solve(system, -rd + _matvec(flat, target.reshape(16)))
    ds = _assemble(dy, scaled)
    return dy, ds, target - ds


def _iterate(hs: NDArray[np.float64], gs: NDArray[np.float64], basis: NDArray[np.float64],
             margin: NDArray[np.float64], y: NDArray[np.float64], z: NDArray[np.float64],
             tolerance: float, objective_scale: float, max_iterations: int
             ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float, float]:
    """The interior-point iterations from a strictly feasible ``y`` and ``z > 0``: the
    solution, its dual ``Z``, status (1 optimal, 2 stopped at the limit of the arithmetic:
    ``S`` or ``Z`` singular to rounding, 0 out of iterations), iterations, gap, dual residual
    norm. Compiled with numba when it is installed."""
    s = _assemble(y, basis) - margin
    rd = _matvec(hs, y) - gs - _adjoint(basis, z)
    status, iteration = 0, 0
    gradient_scale = max(np.sqrt(np.sum(gs * gs)), 1e-300)
    while iteration < max_iterations:
        iteration += 1
        hy = _matvec(hs, y)
        rd = hy - gs - _adjoint(basis, z)
        gap = np.sum(s * z)
        stationarity_scale = max(gradient_scale, np.sqrt(np.sum(hy * hy)))
        if (gap <= tolerance * objective_scale
                and np.sqrt(np.sum(rd * rd)) <= tolerance * stationarity_scale):
            status = 1
            break
        ls, s_ok = _cholesky(s)
        lz, z_ok = _cholesky(z)
        if not (s_ok and z_ok):  # S or Z singular to rounding
            status = 2
            break
        u, lam = _left_singular(_matmul(lz.T, ls))
        if lam.min() <= 0.0:
            status = 2
            break
        r_inverse = np.empty((4, 4))  # W^-1, with W^-1 S W^-T = W^T Z W = diag(lam)
        left = _matmul(u.T, lz.T)
        for i in range(4):
            r_inverse[i] = left[i] / np.sqrt(lam[i])
        scaled = _congruence(r_inverse, basis)
        n = basis.shape[0]
        flat = scaled.reshape(n, 16)
        system, ok = _cholesky(hs + _matmul(flat, flat.T))
        if not ok:
            status = 2
            break
        square = np.diag(lam * lam)
        dy, ds, dz = _direction(-square, lam, rd, flat, scaled, system)
        alpha = min(1.0, _max_step(lam, ds), _max_step(lam, dz))
        mu = gap / 4.0
        lam_matrix = np.diag(lam)
        mu_affine = np.sum((lam_matrix + alpha * ds) * (lam_matrix + alpha * dz)) / 4.0
        sigma = (mu_affine / mu) ** 3
        second = 0.5 * (_matmul(ds, dz) + _matmul(dz, ds))
        dy, ds, dz = _direction(sigma * mu * np.eye(4) - square - second, lam, rd, flat,
                                scaled, system)
        alpha = min(1.0, STEP_FRACTION * min(_max_step(lam, ds), _max_step(lam, dz)))
        dz_full = _matmul(_matmul(r_inverse.T, dz), r_inverse)
        for _ in range(30):  # the scaled step is exact up to rounding: check, else shorten
            y_next = y + alpha * dy
            s_next = _assemble(y_next, basis) - margin
            z_next = z + alpha * dz_full
            z_next = 0.5 * (z_next + z_next.T)
            if _cholesky(s_next)[1] and _cholesky(z_next)[1]:
                break
            alpha *= 0.5
        else:
            status = 2
            break
        y, s, z = y_next, s_next, z_next
    gap = np.sum(s * z)
    return y, z, status, iteration, gap, np.sqrt(np.sum(rd * rd))


NEWTON_ITERATIONS = 8
"""Newton steps on the active face before the interior-point method takes over."""


def _face_rank(values: NDArray[np.float64]) -> int:
    """How many of the ascending eigenvalues ``values`` of ``S`` at an optimum are on the
    face (zero): those below the widest relative gap of at least 10 (0: none)."""
    spread = max(abs(values[0]), abs(values[-1]), 1e-300)
    rank, widest = 0, 10.0
    for k in range(values.shape[0] - 1):
        ratio = values[k + 1] / max(abs(values[k]), 1e-300 * spread)
        if ratio > widest:
            rank, widest = k + 1, ratio
    return rank


def _active_newton(hs: NDArray[np.float64], gs: NDArray[np.float64],
                   basis: NDArray[np.float64], margin: NDArray[np.float64],
                   start: NDArray[np.float64], start_dual: NDArray[np.float64],
                   tolerance: float
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], bool, int, float, float]:
    """Newton's method on the optimality conditions of the face where ``r`` eigenvalues of
    ``S = J - M`` are zero, as for eigenvalue optimisation (Overton and Womersley, Math.
    Programming 62, 1993), from ``start`` (the previous optimum; ``r`` from its eigenvalues,
    :func:`_face_rank`). With ``U`` (4 x r) the face's eigenvectors, ``W`` the others and
    ``Z = U Z^ U^T``:

        H y - g - A*(Z) = 0,        U^T S(y) U = 0,

    linearised with ``d(U^T S U) = U^T dS U`` and the face's curvature in the first block,
    ``H + sum_k 2 B_k^T Z^ B_k / (lambda_k - lambda^)`` (``k`` over ``W``,
    ``B_k,ai = u_a^T basis_i w_k``, ``lambda^`` the face's mean eigenvalue; the positive part
    of ``Z^``, so that every step solves a positive definite system).

    An active set on the face: an eigenvalue outside it that turns negative joins it; a
    multiplier that stays negative (``Z^``'s eigenvector, once stationarity holds to 1 %)
    leaves it. ``Z`` starts from ``start_dual`` (the previous optimum's) when finite, else
    from the least-squares fit of stationarity, and is carried as a 4 x 4 matrix: the
    eigenvectors within the face rotate freely. Converged with ``Z^ >= 0``, ``y`` and ``Z``
    satisfy the problem's optimality conditions (a certificate: the problem is convex).
    Returns ``y``, ``Z``, whether it converged so, the steps, the gap ``|<S, Z>|`` and the
    dual residual. A failure (no convergence within :data:`NEWTON_ITERATIONS`, or
    stationarity not halved in three steps) leaves the problem to the interior-point
    method."""
    n = hs.shape[0]
    y = start.copy()
    rank = _face_rank(_jacobi(_assemble(y, basis) - margin)[0])
    fit_dual = not np.isfinite(start_dual).all()
    z_full = np.zeros((4, 4)) if fit_dual else start_dual.copy()
    scale_g = np.sqrt(np.sum(gs * gs))
    relative = initial = np.inf
    for iteration in range(NEWTON_ITERATIONS + 1):
        if rank == 0:
            break
        values, vectors = _jacobi(_assemble(y, basis) - margin)
        spread = max(abs(values[0]), abs(values[3]), 1e-300)
        if rank < 3 and values[rank] < 0.0:
            rank += 1  # infeasible outside the face: it joins
        hy = _matvec(hs, y)
        if iteration == 0 and fit_dual:  # the multipliers that best balance stationarity
            z_full = _stationary_dual(hy - gs, basis, vectors[:, :rank].copy())
        u = vectors[:, :rank].copy()
        z_values, z_vectors = _jacobi(_matmul(_matmul(u.T, z_full), u))
        u = _matmul(u, z_vectors)  # the face in the multiplier's eigenvectors
        frame = np.empty((4, 4))  # [U W]
        frame[:, :rank] = u
        frame[:, rank:] = vectors[:, rank:]
        released = rank > 1 and z_values[0] < 0.0 and relative <= 1e-2
        if released:
            rank -= 1  # a negative multiplier: that direction leaves the face
            frame[:, :rank] = u[:, 1:]
            frame[:, rank] = u[:, 0]
            z_values = z_values[1:].copy()
        face_s = _matmul(_matmul(frame.T, _assemble(y, basis) - margin), frame)
        projection = _frame_projection(basis, frame, rank)  # u_a^T basis_i frame_c
        normals = _face_normals(projection, rank)
        pairs = normals.shape[0]
        face = np.empty(pairs)  # <E_ab, U^T S U>
        z_vector = np.zeros(pairs)
        p = 0
        for i in range(rank):
            for j in range(i, rank):
                face[p] = (1.0 if i == j else 2.0) * face_s[i, j]
                if i == j:
                    z_vector[p] = z_values[i]
                p += 1
        residual = hy - gs - _matvec(normals.T, z_vector)
        residual_norm = np.sqrt(np.sum(residual * residual))
        relative = residual_norm / max(scale_g, np.sqrt(np.sum(hy * hy)), 1e-300)
        outside = np.inf
        for k in range(rank, 4):
            outside = min(outside, face_s[k, k])
        if (relative <= 100.0 * tolerance and np.abs(face).max() <= 1e-13 * spread
                and outside >= -1e-13 * spread and z_values.min() >= 0.0):
            z_face = np.zeros((rank, rank))
            for i in range(rank):
                z_face[i, i] = z_values[i]
            u_face = frame[:, :rank].copy()
            return (y, _matmul(_matmul(u_face, z_face), u_face.T), True, iteration,
                    abs(np.sum(face * z_vector)), residual_norm)
        if iteration == 0:
            initial = relative
        if iteration == NEWTON_ITERATIONS or (iteration >= 3 and relative > 0.5 * initial):
            break  # out of steps, or not converging (the face is not the optimum's)
        system = hs.copy()
        centre = 0.0
        for i in range(rank):
            centre += face_s[i, i] / rank
        for k in range(rank + released, 4):  # a direction that just left: no curvature yet
            gap = max(face_s[k, k] - centre, 1e-12 * spread)
            for a in range(rank):
                weight = 2.0 * max(z_values[a], 0.0) / gap
                for i in range(n):
                    for j in range(n):
                        system[i, j] += weight * projection[a, k, i] * projection[a, k, j]
        factor_k, ok = _cholesky(system)
        if not ok:
            break
        k_residual = _cholesky_solve(factor_k, residual)
        k_normals = np.empty((pairs, n))
        for p in range(pairs):
            k_normals[p] = _cholesky_solve(factor_k, normals[p].copy())
        schur, ok = _cholesky(_matmul(normals, k_normals.T))
        if not ok:
            break
        dz = _cholesky_solve(schur, _matvec(normals, k_residual) - face)
        y = y + _matvec(k_normals.T, dz) - k_residual
        z_face = _pair_matrix(z_vector + dz, rank)
        u_face = frame[:, :rank].copy()
        z_full = _matmul(_matmul(u_face, z_face), u_face.T)
        if not np.isfinite(y).all():
            break
    return y, z_full, False, iteration, 0.0, 0.0


def _frame_projection(basis: NDArray[np.float64], frame: NDArray[np.float64],
                      rank: int) -> NDArray[np.float64]:
    """``frame_a^T basis_i frame_c`` for the face's columns ``a < rank`` and every column
    ``c`` (rank, 4, n), from the few nonzero entries of each ``basis_i``."""
    n = basis.shape[0]
    out = np.zeros((rank, 4, n))
    for i in range(n):
        for q in range(4):
            for r in range(4):
                value = basis[i, q, r]
                if value != 0.0:
                    for a in range(rank):
                        left = value * frame[q, a]
                        for c in range(4):
                            out[a, c, i] += left * frame[r, c]
    return out


def _face_normals(projection: NDArray[np.float64], rank: int) -> NDArray[np.float64]:
    """``<U E_ab U^T, basis_i>`` (pairs, n) for the pairs ``a <= b`` of the face, ``E_ab``
    the symmetric unit (1 on the diagonal, 1 at both places off it), from
    ``projection[a, b, i] = u_a^T basis_i u_b`` (:func:`_frame_projection`)."""
    normals = np.empty((rank * (rank + 1) // 2, projection.shape[2]))
    p = 0
    for i in range(rank):
        for j in range(i, rank):
            normals[p] = (1.0 if i == j else 2.0) * projection[i, j]
            p += 1
    return normals


def _pair_matrix(vector: NDArray[np.float64], rank: int) -> NDArray[np.float64]:
    """The symmetric ``rank x rank`` matrix whose entries ``(a, b)``, ``a <= b``, are
    ``vector`` in the order of :func:`_face_normals`."""
    out = np.empty((rank, rank))
    p = 0
    for i in range(rank):
        for j in range(i, rank):
            out[i, j] = out[j, i] = vector[p]
            p += 1
    return out


def _stationary_dual(gradient: NDArray[np.float64], basis: NDArray[np.float64],
                     u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The face's multiplier ``Z = U Z^ U^T`` (``Z^ >= 0``) that best fits stationarity
    ``A*(Z) = gradient`` in least squares, its negative part dropped."""
    rank = u.shape[1]
    frame = np.zeros((4, 4))
    frame[:, :rank] = u
    normals = _face_normals(_frame_projection(basis, frame, rank), rank)
    gram, ok = _cholesky(_matmul(normals, normals.T))
    z_face = np.zeros((rank, rank))
    if ok:
        z_face = _pair_matrix(_cholesky_solve(gram, _matvec(normals, gradient)), rank)
    values, vectors = _jacobi(z_face)
    z_face = _matmul(vectors * np.maximum(values, 0.0), vectors.T)
    return _matmul(_matmul(u, z_face), u.T)


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
    (:func:`_active_newton`, dual from ``start_dual``); else the interior-point iterations
    from a strictly feasible start (``start`` moved towards the centre, or the centre); then
    the final nudge above rounding. Returns ``y``, the dual ``Z``, status (3 interior,
    1 optimal, 4 optimal by Newton's method, 2 arithmetic limit, 0 out of iterations, -1
    ``H`` not positive definite), iterations (or Newton steps), gap, dual residual, smallest
    eigenvalue of ``J(d y) - M``, and the objective and stationarity scales the status was
    judged on."""
    n = hs.shape[0]
    factor, ok = _cholesky(hs)
    if not ok:
        return gs * 0.0, margin * 0.0, -1, 0, 0.0, 0.0, 0.0, 1.0, 1.0
    unconstrained = _cholesky_solve(factor, gs)
    objective_scale = max(abs(np.sum(gs * unconstrained)), 1e-300)
    jmat = _assemble(unconstrained, basis)
    slack = _smallest_jacobi(jmat - margin)
    pivots = np.diag(factor)
    if slack > 0.0 and pivots.min() > 1e-6 * pivots.max():
        return unconstrained, margin * 0.0, 3, 0, 0.0, 0.0, slack, objective_scale, 1.0
    eigen = _jacobi(jmat)[0]
    margin_size = np.abs(_jacobi(margin)[0]).max()
    newton = (_active_newton(hs, gs, basis, margin, start, start_dual, tolerance)
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
                if _smallest_jacobi(_assemble(point, basis) - margin) > 1e-3 * tau:
                    y = point
                    break
        s_inverse = _inverse(_assemble(y, basis) - margin)
        adjoint_inverse = _adjoint(basis, s_inverse)
        mu = max(np.sqrt(np.sum((_matvec(hs, y) - gs) ** 2))
                 / max(np.sqrt(np.sum(adjoint_inverse**2)), 1e-300), 1e-12)
        y, z, status, iterations, gap, residual = _iterate(
            hs, gs, basis, margin, y, mu * s_inverse, tolerance, objective_scale,
            max_iterations)
    # J(pi) - M as a user evaluates it, from pi = d y; below the rounding of its eigenvalues,
    # move along the centre direction (J(CENTRE) = I: every eigenvalue rises alike).
    pi = d * y
    floor = 1e-9 * margin_size + 1e-14 * np.abs(_assemble(pi, BASIS)).max() + 1e-300
    for _ in range(3):
        slack = _smallest_jacobi(_assemble(d * y, BASIS) - margin)
        if slack >= floor:
            break
        y = y + (2.0 * floor - slack) * CENTRE / d
    hy = _matvec(hs, y)
    stationarity_scale = max(np.sqrt(np.sum(gs * gs)), np.sqrt(np.sum(hy * hy)))
    return y, z, status, iterations, gap, residual, slack, objective_scale, stationarity_scale


def _solve_unscaled(hessian: NDArray[np.float64], gradient: NDArray[np.float64],
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


def _solve_statistics(information: NDArray[np.float64], moment: NDArray[np.float64],
                      prior: NDArray[np.float64], prior_weight: float,
                      epsilon: float, known_offset: NDArray[np.float64],
                      start: NDArray[np.float64], start_dual: NDArray[np.float64],
                      tolerance: float, max_iterations: int
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float,
                                 float, float, float, float]:
    """The payload's problem from its statistics (``[pi; offset]``, 16 unknowns): the
    Euclidean prior added, the offset fixed (``known_offset`` finite) or eliminated by its
    Schur complement, :func:`_solve_unscaled`, the offset's optimum for the solution.
    Returns ``[pi; offset]`` and the rest of :func:`_solve_unscaled`'s result."""
    weights = prior_weight * _prior_scale(information)
    hessian = information[:N_PI, :N_PI].copy()
    gradient = moment[:N_PI] + weights * prior
    for i in range(N_PI):
        hessian[i, i] += weights[i]
    cross = information[:N_PI, N_PI:]
    fixed = np.isfinite(known_offset).all()
    inverse = np.eye(moment.shape[0] - N_PI)
    if fixed:
        gradient -= _matvec(cross, known_offset)
    else:
        inverse = _inverse(information[N_PI:, N_PI:])
        coupling = _matmul(cross, inverse)
        hessian -= _matmul(coupling, cross.T)
        gradient -= _matvec(coupling, moment[N_PI:])
    pi, z, status, iterations, gap, residual, slack, objective_scale, stationarity_scale = (
        _solve_unscaled(hessian, gradient, epsilon * np.eye(4), start, start_dual, tolerance,
                        max_iterations))
    x = np.empty(moment.shape[0])
    x[:N_PI] = pi
    if fixed:
        x[N_PI:] = known_offset
    else:
        x[N_PI:] = _matvec(inverse, moment[N_PI:] - _matvec(cross.T, pi))
    return (x, z, status, iterations, gap, residual, slack, objective_scale,
            stationarity_scale)


def _result(pi: NDArray[np.float64], dual: NDArray[np.float64], status: int, iterations: int,
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


_NONE_PI, _NONE_DUAL, _NONE_OFFSET = np.full(N_PI, np.nan), np.full((4, 4), np.nan), \
    np.full(6, np.nan)
"""The compiled code's "none" for a start, its dual and the offset (never written; writable
all the same: a read-only array is another type to numba, see :func:`_compiled_input`)."""


def _compiled_input(array: ArrayLike) -> NDArray[np.float64]:
    """``array`` as the one type the compiled functions are compiled for: float64,
    C-contiguous and writable (copied when it is not). Another type (a read-only
    ``Estimate.offset``, a transposed view) would compile a new specialisation there and
    then, for about a minute."""
    return np.require(array, dtype=float, requirements=["C", "W"])


def _start(start: ArrayLike | None, start_dual: ArrayLike | None
           ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Warm-start arrays for the compiled code (NaN: none)."""
    first = _NONE_PI if start is None else _compiled_input(start)
    dual = _NONE_DUAL if start_dual is None else _compiled_input(start_dual)
    return first, dual


def solve_lmi_qp(hessian: ArrayLike, gradient: ArrayLike, margin: ArrayLike,
                 start: ArrayLike | None = None, start_dual: ArrayLike | None = None,
                 tolerance: float = 1e-12, max_iterations: int = 60) -> SdpResult:
    """``min 1/2 pi^T H pi - g^T pi  s.t.  J(pi) - M >= 0`` (module docstring).

    ``hessian`` (10, 10) positive definite, ``gradient`` (10,), ``margin`` ``M`` (4, 4)
    symmetric, ``start`` a previous solution and ``start_dual`` its :attr:`SdpResult.dual`
    (warm start; any point, made strictly feasible here). A result that is not
    :attr:`SdpResult.ok` says why; a Hessian that is not positive definite raises
    ``numpy.linalg.LinAlgError``.
    """
    compiled()
    first, dual = _start(start, start_dual)
    return _result(*_solve_unscaled(
        _compiled_input(hessian), _compiled_input(gradient), _compiled_input(margin), first,
        dual, float(tolerance), int(max_iterations)))


def solve_statistics(information: NDArray[np.float64], moment: NDArray[np.float64],
                     prior: NDArray[np.float64], prior_weight: float, epsilon: float,
                     known_offset: ArrayLike | None = None, start: ArrayLike | None = None,
                     start_dual: ArrayLike | None = None, tolerance: float = 1e-12,
                     max_iterations: int = 60) -> tuple[NDArray[np.float64], SdpResult]:
    """The payload's consistent estimate from its sufficient statistics in one compiled
    call: ``min ||A x - b||^2_W + w sum_i s_i (pi_i - prior_i)^2`` (``s``:
    :func:`prior_scale`) subject to ``J(pi) >= epsilon I``, ``x = [pi; offset]`` (16,
    kg, kg m, kg m^2; N, N m), the offset fixed to ``known_offset`` or estimated. Returns
    ``x`` and the :class:`SdpResult` of the 10-parameter problem (warm start: the previous
    ``result.pi`` and ``result.dual``)."""
    if not _COMPILED:
        compiled()
    first, dual = _start(start, start_dual)
    offset = _NONE_OFFSET if known_offset is None else _compiled_input(known_offset)
    x, *rest = _solve_statistics(
        _compiled_input(information), _compiled_input(moment), _compiled_input(prior),
        float(prior_weight), float(epsilon), offset, first, dual, float(tolerance),
        int(max_iterations))
    return x, _result(x[:N_PI], *rest)


_COMPILED_FUNCTIONS = (
    "_assemble", "_adjoint", "_matmul", "_matvec", "_rotation", "_rotate_columns",
    "_left_singular", "_congruence", "_jacobi",
    "_smallest_jacobi", "_max_step", "_cholesky", "_inverse", "_cholesky_solve", "_direction",
    "_iterate", "_face_rank", "_active_newton", "_frame_projection", "_face_normals",
    "_pair_matrix", "_stationary_dual",
    "_solve", "_solve_unscaled", "_prior_scale", "_solve_statistics")
"""The functions the compiled solve runs through (each calls the others by module name)."""


def _compile() -> bool:
    """Compile :data:`_COMPILED_FUNCTIONS` with numba (cached on disk) where it is
    installed; ``False`` leaves them plain numpy (the same algorithm, about 50 times
    slower)."""
    try:
        import numba
    except ImportError:
        return False
    # numpy's error model: a division by zero gives inf or nan as in the uncompiled code
    # (numba's default raises ZeroDivisionError, seen once in 40 hypothesis draws); the
    # result's checks then report a failed solve and cvxpy takes over.
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    module = globals()
    for name in _COMPILED_FUNCTIONS:
        module[name] = jit(module[name])
    return True


_COMPILED: list[bool] = []
_LOADED = threading.Event()  # the compiled machine code is loaded in this process
_LOCK = threading.Lock()
_COMPILE_LOCK = threading.Lock()
_PREPARATION: list[threading.Thread] = []  # a background preparation, once started


def compiled() -> bool:
    """Whether the iterations run compiled (numba installed). The first call imports numba
    and wraps the functions (about 0.4 s; compilation itself happens on the first solve, or
    is read from numba's disk cache), so processes that never use this solver pay nothing."""
    with _COMPILE_LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
    return _COMPILED[0]


def warm_up() -> bool:
    """Compile the solver, or load it from numba's disk cache, now (blocking: about 40 s to
    compile, under 1 s to load), by solving a small problem; ``False`` without numba."""
    if not compiled():
        return False
    with _LOCK:
        if not _LOADED.is_set():
            information = np.eye(N_PI + 6)
            information[:N_PI, :N_PI] = np.diag([1.0, 1e-2, 1e-2, 1e-2, 1e-4, 0.0, 0.0, 1e-4,
                                                 0.0, 1e-4]) + 1e-6 * np.eye(N_PI)
            moment = information @ np.r_[CENTRE * np.r_[1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0,
                                                        1.0, 0.0, 1.0], np.zeros(6)]
            solve_statistics(information, moment, np.zeros(N_PI), 0.0, 1e-8)
            _LOADED.set()
    return True


def available() -> bool:
    """Whether the compiled solver can run now without stalling its caller: loaded; or,
    unless :func:`prepare_in_background` is under way or failed, loaded (compiled if need
    be) now by :func:`warm_up`."""
    if _LOADED.is_set():
        return True
    if _PREPARATION:
        return False
    return warm_up()


def prepare_in_background(report: Callable[[str], None]) -> None:
    """Get the compiled solver ready without stalling this process (a node's start): a
    separate Python process at the lowest priority compiles it into numba's disk cache if it
    is not there yet, then a thread of this one loads it (:func:`warm_up`, about 0.5 s: the
    longest pause it gave a busy main thread was 43 ms); :func:`available` is ``False`` until
    then. ``report`` gets one line: how long it took, or why the solver stays off (cvxpy
    solves meanwhile and then)."""
    if _PREPARATION or _LOADED.is_set():
        return

    def prepare() -> None:
        start = time.monotonic()
        try:
            package_root = str(Path(__file__).resolve().parents[2])  # this inertial_id
            path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH"))
                                   if p)
            done = subprocess.run([sys.executable, "-c", PREPARATION_PROGRAM, str(os.getpid())],
                                  capture_output=True, text=True, cwd="/",
                                  env={**os.environ, "PYTHONPATH": path},
                                  timeout=PREPARATION_TIMEOUT, check=False)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or ["no message"]
                report(f"the dedicated SDP solver did not compile ({lines[-1]}): cvxpy solves")
                return
            if warm_up():
                report(f"dedicated SDP solver ready after {time.monotonic() - start:.1f} s")
            else:
                report("numba is not installed: cvxpy solves the SDP")
        except (OSError, subprocess.SubprocessError) as exc:
            report(f"the dedicated SDP solver could not be prepared ({exc}): cvxpy solves")

    thread = threading.Thread(target=prepare, name="sdp-preparation", daemon=True)
    _PREPARATION.append(thread)
    thread.start()


PREPARATION_TIMEOUT = 600.0
"""s a background compilation may take before the solver stays off."""
PREPARATION_PROGRAM = """
import ctypes, os, signal, sys
if hasattr(os, "nice"):
    os.nice(19)  # the lowest priority: the node's own work goes first
if sys.platform == "linux":  # ends with the node, however it ends
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the node ended before the line above
from inertial_id.core import sdp
sdp.warm_up()
"""
"""What the separate process of :func:`prepare_in_background` runs (at the lowest priority,
and it ends when the node does)."""
