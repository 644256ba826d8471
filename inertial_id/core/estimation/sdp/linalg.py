"""The LMI's basis and the small dense kernels of the dedicated SDP solver (4 x 4 and
10 x 10 loops: a BLAS or LAPACK call on a 4 x 4 matrix costs more than its arithmetic;
numba compiles them, :mod:`inertial_id.core.estimation.sdp.runtime`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.parameters import pseudo_inertia

N_PI = 10
BASIS = np.array([pseudo_inertia(np.eye(N_PI)[i]) for i in range(N_PI)])
"""``F_i = J(e_i)``: ``J(pi) = sum_i pi_i F_i`` (10, 4, 4)."""
CENTRE = np.array([1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0, 0.0, 2.0])
"""``pi`` with ``J(pi) = I``: unit mass at the origin, inertia ``2 I`` (a strictly feasible
direction whatever the margin's size, once scaled by ``tau``)."""


def assemble(coefficients: NDArray[np.float64], basis: NDArray[np.float64]) -> NDArray[np.float64]:
    """``sum_i coefficients_i basis_i`` (4, 4)."""
    out = np.zeros((4, 4))
    for i in range(coefficients.shape[0]):
        out += coefficients[i] * basis[i]
    return out


def adjoint(basis: NDArray[np.float64], matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """``<basis_i, matrix>`` for every ``i`` (10,)."""
    out = np.zeros(basis.shape[0])
    for i in range(basis.shape[0]):
        for a in range(4):
            for b in range(4):
                out[i] += basis[i, a, b] * matrix[a, b]
    return out


def matmul(left: NDArray[np.float64], right: NDArray[np.float64]) -> NDArray[np.float64]:
    """``left @ right`` by loops (compiled, a 4 x 4 product costs less than a BLAS call)."""
    out = np.zeros((left.shape[0], right.shape[1]))
    for i in range(left.shape[0]):
        for k in range(left.shape[1]):
            value = left[i, k]
            for j in range(right.shape[1]):
                out[i, j] += value * right[k, j]
    return out


def matvec(matrix: NDArray[np.float64], vector: NDArray[np.float64]) -> NDArray[np.float64]:
    """``matrix @ vector`` by loops."""
    out = np.zeros(matrix.shape[0])
    for i in range(matrix.shape[0]):
        for k in range(matrix.shape[1]):
            out[i] += matrix[i, k] * vector[k]
    return out


def rotation(ratio: float) -> tuple[float, float]:
    """Cosine and sine of the Jacobi rotation that zeroes the off-diagonal entry of a 2 x 2
    symmetric matrix whose ``(d_qq - d_pp) / (2 d_pq)`` is ``ratio`` (the smaller angle)."""
    t = (1.0 if ratio >= 0.0 else -1.0) / (abs(ratio) + np.sqrt(1.0 + ratio * ratio))
    c = 1.0 / np.sqrt(1.0 + t * t)
    return c, c * t


def rotate_columns(matrix: NDArray[np.float64], p: int, q: int, c: float,
                    sn: float) -> None:
    """Columns ``p, q`` of ``matrix`` <- ``(c col_p - sn col_q, sn col_p + c col_q)``."""
    for k in range(matrix.shape[0]):
        left, right = matrix[k, p], matrix[k, q]
        matrix[k, p] = c * left - sn * right
        matrix[k, q] = sn * left + c * right


def left_singular(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64],
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
                c, sn = rotation((beta - alpha) / (2.0 * gamma))
                rotate_columns(a, p, q, c, sn)
                rotate_columns(u, p, q, c, sn)
        if not rotated:
            break
    sigma = np.zeros(n)
    for j in range(n):
        for k in range(n):
            sigma[j] += a[k, j] * a[k, j]
        sigma[j] = np.sqrt(sigma[j])
    return u, sigma


def congruence(r: NDArray[np.float64], basis: NDArray[np.float64]) -> NDArray[np.float64]:
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


def jacobi(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
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
                c, sn = rotation((a[q, q] - a[p, p]) / (2.0 * a[p, q]))
                rotate_columns(a, p, q, c, sn)
                for k in range(n):  # rows p, q
                    apk, aqk = a[p, k], a[q, k]
                    a[p, k] = c * apk - sn * aqk
                    a[q, k] = sn * apk + c * aqk
                rotate_columns(vectors, p, q, c, sn)
    values = np.empty(n)
    for p in range(n):
        values[p] = a[p, p]
    order = np.argsort(values)
    return values[order], vectors[:, order]


def smallest_jacobi(matrix: NDArray[np.float64]) -> float:
    """Smallest eigenvalue of a small symmetric matrix (:func:`jacobi`)."""
    return jacobi(matrix)[0][0]


def max_step(lam: NDArray[np.float64], direction: NDArray[np.float64]) -> float:
    """Largest ``a`` with ``diag(lam) + a direction >= 0`` (inf when any ``a`` is fine)."""
    root = 1.0 / np.sqrt(lam)
    scaled = np.empty((4, 4))
    for i in range(4):
        for j in range(4):
            scaled[i, j] = root[i] * direction[i, j] * root[j]
    smallest = smallest_jacobi(scaled)
    return np.inf if smallest >= 0.0 else -1.0 / smallest


def cholesky(matrix: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
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


def inverse(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """Inverse of a small symmetric positive definite matrix by Cholesky (NaN if it is
    not: the solve's result then says so)."""
    n = matrix.shape[0]
    factor, ok = cholesky(matrix)
    out = np.full((n, n), np.nan)
    if ok:
        for j in range(n):
            unit = np.zeros(n)
            unit[j] = 1.0
            out[:, j] = cholesky_solve(factor, unit)
    return out


def cholesky_solve(factor: NDArray[np.float64], right: NDArray[np.float64]
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

