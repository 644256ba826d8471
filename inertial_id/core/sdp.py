"""A dedicated interior-point solver for the payload's LMI-constrained least squares.

The problem the payload estimate solves once the F/T offset is eliminated (or known) is

    minimise   1/2 pi^T H pi - g^T pi      subject to   J(pi) - M >= 0,

``H`` (10 x 10, positive definite) and ``g`` from the sufficient statistics (plus the prior),
``J`` the pseudo-inertia (4 x 4, linear in ``pi``; :func:`~inertial_id.core.parameters.
pseudo_inertia`) and ``M`` the margin (``epsilon I``, or its scaled version). A general conic
solver reached through cvxpy spends most of its milliseconds on the way in and out; this
module solves exactly this problem:

- a primal-dual interior-point method keeping ``S = J(pi) - M`` strictly positive definite
  (the feasible set does not depend on the data, so a start is easy to find: the previous
  optimum moved slightly towards a body with ``J = tau I``), with a dual ``Z > 0``;
- Nesterov-Todd scaling (Vandenberghe, "The CVXOPT linear and quadratic cone program
  solvers", 2010, sec. 4): ``W`` with ``W^-1 S W^-T = W^T Z W = Lambda`` diagonal, from the
  Cholesky factors of ``S`` and ``Z`` and one 4 x 4 SVD;
- Mehrotra's predictor-corrector: an affine step, the centring ``sigma = (mu_aff / mu)^3``
  and the second-order correction;
- the Newton system reduced to 10 x 10: ``(H + G) dpi = -r_d + <F~, D>`` with
  ``G_ij = <F~_i, F~_j>``, ``F~_i = W^-1 F_i W^-T`` the scaled basis of ``J``.

The variables are scaled so that ``H`` has a unit diagonal. ``gap`` is ``<S, Z>`` (the
duality gap, objective units); a solve ends when it and the dual residual are below
``tolerance`` relative to the objective's scale.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    norm of the dual residual (both in the scaled objective's units), and the smallest
    eigenvalue of ``J(pi) - M`` (positive: strictly feasible)."""

    pi: NDArray[np.float64]
    status: str
    iterations: int
    gap: float
    dual_residual: float
    min_slack: float

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
        out[i] = np.sum(basis[i] * matrix)
    return out


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


def _smallest_jacobi(matrix: NDArray[np.float64]) -> float:
    """Smallest eigenvalue of a small symmetric matrix by cyclic Jacobi rotations (a few
    sweeps; a LAPACK call costs more than the whole on 4 x 4)."""
    a = matrix.copy()
    n = a.shape[0]
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
                theta = (a[q, q] - a[p, p]) / (2.0 * a[p, q])
                t = (1.0 if theta >= 0.0 else -1.0) / (abs(theta) + np.sqrt(theta * theta + 1.0))
                c = 1.0 / np.sqrt(t * t + 1.0)
                sn = t * c
                for k in range(n):  # columns p, q
                    akp, akq = a[k, p], a[k, q]
                    a[k, p] = c * akp - sn * akq
                    a[k, q] = sn * akp + c * akq
                for k in range(n):  # rows p, q
                    apk, aqk = a[p, k], a[q, k]
                    a[p, k] = c * apk - sn * aqk
                    a[q, k] = sn * apk + c * aqk
    smallest = a[0, 0]
    for p in range(1, n):
        smallest = min(smallest, a[p, p])
    return smallest


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
    dy = _cholesky_solve(system, -rd + flat @ target.ravel())
    ds = _assemble(dy, scaled)
    return dy, ds, target - ds


def _iterate(hs: NDArray[np.float64], gs: NDArray[np.float64], basis: NDArray[np.float64],
             margin: NDArray[np.float64], y: NDArray[np.float64], z: NDArray[np.float64],
             tolerance: float, objective_scale: float, max_iterations: int
             ) -> tuple[NDArray[np.float64], int, int, float, float, float]:
    """The interior-point iterations from a strictly feasible ``y`` and ``z > 0``: the
    solution, status (1 optimal, 2 stopped at the limit of the arithmetic: ``S`` or ``Z``
    singular to rounding, 0 out of iterations), iterations, gap, dual residual norm, smallest
    eigenvalue of ``S``. Compiled with numba when it is installed."""
    s = _assemble(y, basis) - margin
    rd = hs @ y - gs - _adjoint(basis, z)
    status, iteration = 0, 0
    gradient_scale = max(np.sqrt(np.sum(gs * gs)), 1e-300)
    while iteration < max_iterations:
        iteration += 1
        rd = hs @ y - gs - _adjoint(basis, z)
        gap = np.sum(s * z)
        stationarity_scale = max(gradient_scale, np.sqrt(np.sum((hs @ y) ** 2)))
        if (gap <= tolerance * objective_scale
                and np.sqrt(np.sum(rd * rd)) <= tolerance * stationarity_scale):
            status = 1
            break
        ls, s_ok = _cholesky(s)
        lz, z_ok = _cholesky(z)
        if not (s_ok and z_ok):  # S or Z singular to rounding
            status = 2
            break
        u, lam, _ = np.linalg.svd(lz.T @ ls)
        if lam[3] <= 0.0:
            status = 2
            break
        r_inverse = np.empty((4, 4))  # W^-1, with W^-1 S W^-T = W^T Z W = diag(lam)
        left = u.T @ lz.T
        for i in range(4):
            r_inverse[i] = left[i] / np.sqrt(lam[i])
        scaled = _congruence(r_inverse, basis)
        n = basis.shape[0]
        flat = scaled.reshape(n, 16)
        system, ok = _cholesky(hs + flat @ flat.T)
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
        second = 0.5 * (ds @ dz + dz @ ds)
        dy, ds, dz = _direction(sigma * mu * np.eye(4) - square - second, lam, rd, flat,
                                scaled, system)
        alpha = min(1.0, STEP_FRACTION * min(_max_step(lam, ds), _max_step(lam, dz)))
        dz_full = r_inverse.T @ dz @ r_inverse
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
    return (y, status, iteration, gap, np.sqrt(np.sum(rd * rd)),
            np.linalg.eigvalsh(s)[0])


def _compile() -> bool:
    """Compile the iteration's functions with numba (cached on disk) where it is installed;
    ``False`` leaves them plain numpy (the same algorithm, about 50 times slower)."""
    global _assemble, _adjoint, _max_step, _cholesky, _cholesky_solve  # noqa: PLW0603
    global _direction, _iterate  # noqa: PLW0603
    try:
        import numba
    except ImportError:
        return False
    # numpy's error model: a division by zero gives inf or nan as in the uncompiled code
    # (numba's default raises ZeroDivisionError, seen once in 40 hypothesis draws); the
    # result's checks then report a failed solve and cvxpy takes over.
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    _assemble, _adjoint, _max_step = jit(_assemble), jit(_adjoint), jit(_max_step)
    global _congruence, _smallest_jacobi  # noqa: PLW0603
    _congruence, _smallest_jacobi = jit(_congruence), jit(_smallest_jacobi)
    _cholesky, _cholesky_solve = jit(_cholesky), jit(_cholesky_solve)
    _direction, _iterate = jit(_direction), jit(_iterate)
    global _smallest_eigenvalue, _solve  # noqa: PLW0603
    _smallest_eigenvalue, _solve = jit(_smallest_eigenvalue), jit(_solve)
    return True


_COMPILED: list[bool] = []


def compiled() -> bool:
    """Whether the iterations run compiled (numba installed). The first call imports numba
    and wraps the functions (about 0.4 s; compilation itself happens on the first solve, or
    is read from numba's disk cache), so processes that never use this solver pay nothing."""
    if not _COMPILED:
        _COMPILED.append(_compile())
    return _COMPILED[0]


THETAS = np.array([0.0, 1e-3, 1e-2, 0.05, 0.2, 0.5, 1.0])
"""Fractions of the way from a warm start to the centre tried for a strictly feasible start."""


def _smallest_eigenvalue(matrix: NDArray[np.float64]) -> float:
    return np.linalg.eigvalsh(matrix)[0]


def _solve(hs: NDArray[np.float64], gs: NDArray[np.float64], basis: NDArray[np.float64],
           d: NDArray[np.float64], margin: NDArray[np.float64], start: NDArray[np.float64],
           tolerance: float, max_iterations: int
           ) -> tuple[NDArray[np.float64], int, int, float, float, float, float, float]:
    """The scaled problem (``pi = d y``, ``basis_i = d_i F_i``): the unconstrained optimum if
    strictly feasible, else the interior-point iterations from a strictly feasible start
    (``start``, scaled, moved towards the centre; the centre when it holds a NaN), and the
    final nudge above rounding. Returns ``y``, status (3 interior, 1 optimal, 2 arithmetic
    limit, 0 out of iterations, -1 ``H`` not positive definite), iterations, gap, dual
    residual, smallest eigenvalue of ``J(d y) - M``, and the objective and stationarity
    scales the status was judged on."""
    n = hs.shape[0]
    factor, ok = _cholesky(hs)
    if not ok:
        return gs * 0.0, -1, 0, 0.0, 0.0, 0.0, 1.0, 1.0
    unconstrained = _cholesky_solve(factor, gs)
    objective_scale = max(abs(np.sum(gs * unconstrained)), 1e-300)
    jmat = _assemble(unconstrained, basis)
    slack = _smallest_eigenvalue(jmat - margin)
    if slack > 0.0:
        return unconstrained, 3, 0, 0.0, 0.0, slack, objective_scale, 1.0
    eigen = np.linalg.eigvalsh(jmat)
    margin_size = np.abs(np.linalg.eigvalsh(margin)).max()
    tau = max(2.0 * margin_size, 1e-3 * max(abs(eigen[0]), abs(eigen[3])), 1e-12)
    centre = np.empty(n)
    for i in range(n):
        centre[i] = tau * CENTRE[i] / d[i]
    y = centre.copy()
    if np.isfinite(start).all():
        for theta in THETAS:
            point = start + theta * (centre - start)
            if _smallest_eigenvalue(_assemble(point, basis) - margin) > 1e-3 * tau:
                y = point
                break
    s_inverse = np.linalg.inv(_assemble(y, basis) - margin)
    adjoint_inverse = _adjoint(basis, s_inverse)
    mu = max(np.sqrt(np.sum((hs @ y - gs) ** 2))
             / max(np.sqrt(np.sum(adjoint_inverse**2)), 1e-300), 1e-12)
    y, status, iterations, gap, residual, _ = _iterate(
        hs, gs, basis, margin, y, mu * s_inverse, tolerance, objective_scale, max_iterations)
    # J(pi) - M as a user evaluates it, from pi = d y; below the rounding of its eigenvalues,
    # move along the centre direction (J(CENTRE) = I: every eigenvalue rises alike).
    pi = d * y
    floor = 1e-9 * margin_size + 1e-14 * np.abs(_assemble(pi, BASIS)).max() + 1e-300
    for _ in range(3):
        slack = _smallest_eigenvalue(_assemble(d * y, BASIS) - margin)
        if slack >= floor:
            break
        y = y + (2.0 * floor - slack) * CENTRE / d
    stationarity_scale = max(np.sqrt(np.sum(gs * gs)), np.sqrt(np.sum((hs @ y) ** 2)))
    return y, status, iterations, gap, residual, slack, objective_scale, stationarity_scale


def solve_lmi_qp(hessian: ArrayLike, gradient: ArrayLike, margin: ArrayLike,
                 start: ArrayLike | None = None, tolerance: float = 1e-12,
                 max_iterations: int = 60) -> SdpResult:
    """``min 1/2 pi^T H pi - g^T pi  s.t.  J(pi) - M >= 0`` (module docstring).

    ``hessian`` (10, 10) positive definite, ``gradient`` (10,), ``margin`` ``M`` (4, 4)
    symmetric, ``start`` a previous solution (warm start; any point, made strictly feasible
    here). A result that is not :attr:`SdpResult.ok` says why; a Hessian that is not
    positive definite raises ``numpy.linalg.LinAlgError``.
    """
    compiled()
    h = np.asarray(hessian, dtype=float)
    diagonal = np.diag(h)
    d = 1.0 / np.sqrt(np.where(diagonal > 0.0, diagonal, 1.0))
    hs = np.ascontiguousarray(d[:, None] * h * d[None, :])
    gs = d * np.asarray(gradient, dtype=float)
    basis = np.ascontiguousarray(BASIS * d[:, None, None])  # J(d * y) = sum_i y_i basis_i
    first = np.full(N_PI, np.nan) if start is None else np.asarray(start, dtype=float) / d
    y, status, iterations, gap, residual, slack, objective_scale, stationarity_scale = _solve(
        hs, gs, basis, d, np.ascontiguousarray(margin, dtype=float), first, tolerance,
        max_iterations)
    if status == -1:
        raise np.linalg.LinAlgError("the Hessian is not positive definite")
    close = (gap <= ACCEPTABLE_GAP * objective_scale
             and residual <= ACCEPTABLE_RESIDUAL * stationarity_scale)
    name = {3: "interior", 1: "optimal", 0: "max_iterations"}.get(
        status, "optimal" if close else "numerical_limit")
    if not (np.isfinite(y).all() and np.isfinite(slack)):
        name = "numerical_limit"
    return SdpResult(d * y, name, int(iterations), float(gap), float(residual), float(slack))
