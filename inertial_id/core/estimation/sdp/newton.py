"""Newton's method on the active face of the LMI from a warm start, with a certificate of
optimality (:mod:`inertial_id.core.estimation.sdp`): a live solver re-solving after each batch
mostly ends here, in a few steps."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimation.sdp.linalg import (
    assemble,
    cholesky,
    cholesky_solve,
    jacobi,
    matmul,
    matvec,
)

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


def active_newton(hs: NDArray[np.float64], gs: NDArray[np.float64],
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
    rank = _face_rank(jacobi(assemble(y, basis) - margin)[0])
    fit_dual = not np.isfinite(start_dual).all()
    z_full = np.zeros((4, 4)) if fit_dual else start_dual.copy()
    scale_g = np.sqrt(np.sum(gs * gs))
    relative = initial = np.inf
    for iteration in range(NEWTON_ITERATIONS + 1):
        if rank == 0:
            break
        values, vectors = jacobi(assemble(y, basis) - margin)
        spread = max(abs(values[0]), abs(values[3]), 1e-300)
        if rank < 3 and values[rank] < 0.0:
            rank += 1  # infeasible outside the face: it joins
        hy = matvec(hs, y)
        if iteration == 0 and fit_dual:  # the multipliers that best balance stationarity
            z_full = _stationary_dual(hy - gs, basis, vectors[:, :rank].copy())
        u = vectors[:, :rank].copy()
        z_values, z_vectors = jacobi(matmul(matmul(u.T, z_full), u))
        u = matmul(u, z_vectors)  # the face in the multiplier's eigenvectors
        frame = np.empty((4, 4))  # [U W]
        frame[:, :rank] = u
        frame[:, rank:] = vectors[:, rank:]
        released = rank > 1 and z_values[0] < 0.0 and relative <= 1e-2
        if released:
            rank -= 1  # a negative multiplier: that direction leaves the face
            frame[:, :rank] = u[:, 1:]
            frame[:, rank] = u[:, 0]
            z_values = z_values[1:].copy()
        face_s = matmul(matmul(frame.T, assemble(y, basis) - margin), frame)
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
        residual = hy - gs - matvec(normals.T, z_vector)
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
            return (y, matmul(matmul(u_face, z_face), u_face.T), True, iteration,
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
        factor_k, ok = cholesky(system)
        if not ok:
            break
        k_residual = cholesky_solve(factor_k, residual)
        k_normals = np.empty((pairs, n))
        for p in range(pairs):
            k_normals[p] = cholesky_solve(factor_k, normals[p].copy())
        schur, ok = cholesky(matmul(normals, k_normals.T))
        if not ok:
            break
        dz = cholesky_solve(schur, matvec(normals, k_residual) - face)
        y = y + matvec(k_normals.T, dz) - k_residual
        z_face = _pair_matrix(z_vector + dz, rank)
        u_face = frame[:, :rank].copy()
        z_full = matmul(matmul(u_face, z_face), u_face.T)
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
    gram, ok = cholesky(matmul(normals, normals.T))
    z_face = np.zeros((rank, rank))
    if ok:
        z_face = _pair_matrix(cholesky_solve(gram, matvec(normals, gradient)), rank)
    values, vectors = jacobi(z_face)
    z_face = matmul(vectors * np.maximum(values, 0.0), vectors.T)
    return matmul(matmul(u, z_face), u.T)

