"""The primal-dual interior-point iterations of the dedicated SDP solver: Nesterov-Todd
scaling and Mehrotra's predictor-corrector on the Newton system reduced to 10 x 10
(:mod:`inertial_id.core.estimation.sdp`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimation.sdp.linalg import (
    adjoint,
    assemble,
    cholesky,
    cholesky_solve,
    congruence,
    left_singular,
    matmul,
    matvec,
    max_step,
)

STEP_FRACTION = 0.99
"""Fraction of the step to the boundary of the cone taken."""


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
    dy = cholesky_solve(system, -rd + matvec(flat, target.reshape(16)))
    ds = assemble(dy, scaled)
    return dy, ds, target - ds


def iterate(hs: NDArray[np.float64], gs: NDArray[np.float64], basis: NDArray[np.float64],
             margin: NDArray[np.float64], y: NDArray[np.float64], z: NDArray[np.float64],
             tolerance: float, objective_scale: float, max_iterations: int
             ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, int, float, float]:
    """The interior-point iterations from a strictly feasible ``y`` and ``z > 0``: the
    solution, its dual ``Z``, status (1 optimal, 2 stopped at the limit of the arithmetic:
    ``S`` or ``Z`` singular to rounding, 0 out of iterations), iterations, gap, dual residual
    norm. Compiled with numba when it is installed."""
    s = assemble(y, basis) - margin
    rd = matvec(hs, y) - gs - adjoint(basis, z)
    status, iteration = 0, 0
    gradient_scale = max(np.sqrt(np.sum(gs * gs)), 1e-300)
    while iteration < max_iterations:
        iteration += 1
        hy = matvec(hs, y)
        rd = hy - gs - adjoint(basis, z)
        gap = np.sum(s * z)
        stationarity_scale = max(gradient_scale, np.sqrt(np.sum(hy * hy)))
        if (gap <= tolerance * objective_scale
                and np.sqrt(np.sum(rd * rd)) <= tolerance * stationarity_scale):
            status = 1
            break
        ls, s_ok = cholesky(s)
        lz, z_ok = cholesky(z)
        if not (s_ok and z_ok):  # S or Z singular to rounding
            status = 2
            break
        u, lam = left_singular(matmul(lz.T, ls))
        if lam.min() <= 0.0:
            status = 2
            break
        r_inverse = np.empty((4, 4))  # W^-1, with W^-1 S W^-T = W^T Z W = diag(lam)
        left = matmul(u.T, lz.T)
        for i in range(4):
            r_inverse[i] = left[i] / np.sqrt(lam[i])
        scaled = congruence(r_inverse, basis)
        n = basis.shape[0]
        flat = scaled.reshape(n, 16)
        system, ok = cholesky(hs + matmul(flat, flat.T))
        if not ok:
            status = 2
            break
        square = np.diag(lam * lam)
        dy, ds, dz = _direction(-square, lam, rd, flat, scaled, system)
        alpha = min(1.0, max_step(lam, ds), max_step(lam, dz))
        mu = gap / 4.0
        lam_matrix = np.diag(lam)
        mu_affine = np.sum((lam_matrix + alpha * ds) * (lam_matrix + alpha * dz)) / 4.0
        sigma = (mu_affine / mu) ** 3
        second = 0.5 * (matmul(ds, dz) + matmul(dz, ds))
        dy, ds, dz = _direction(sigma * mu * np.eye(4) - square - second, lam, rd, flat,
                                scaled, system)
        alpha = min(1.0, STEP_FRACTION * min(max_step(lam, ds), max_step(lam, dz)))
        dz_full = matmul(matmul(r_inverse.T, dz), r_inverse)
        for _ in range(30):  # the scaled step is exact up to rounding: check, else shorten
            y_next = y + alpha * dy
            s_next = assemble(y_next, basis) - margin
            z_next = z + alpha * dz_full
            z_next = 0.5 * (z_next + z_next.T)
            if cholesky(s_next)[1] and cholesky(z_next)[1]:
                break
            alpha *= 0.5
        else:
            status = 2
            break
        y, s, z = y_next, s_next, z_next
    gap = np.sum(s * z)
    return y, z, status, iteration, gap, np.sqrt(np.sum(rd * rd))

