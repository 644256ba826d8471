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


def _max_step(lam: NDArray[np.float64], direction: NDArray[np.float64]) -> float:
    """Largest ``a`` with ``diag(lam) + a direction >= 0`` (inf when any ``a`` is fine)."""
    root = 1.0 / np.sqrt(lam)
    scaled = np.empty((4, 4))
    for i in range(4):
        for j in range(4):
            scaled[i, j] = root[i] * direction[i, j] * root[j]
    smallest = np.linalg.eigvalsh(scaled)[0]
    return np.inf if smallest >= 0.0 else -1.0 / smallest


def _cholesky_solve(factor: NDArray[np.float64], right: NDArray[np.float64]
                    ) -> NDArray[np.float64]:
    return np.linalg.solve(factor.T, np.linalg.solve(factor, right))


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
        try:
            ls = np.linalg.cholesky(s)
            lz = np.linalg.cholesky(z)
        except Exception:  # noqa: BLE001 - numba: S or Z singular to rounding
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
        n = basis.shape[0]
        scaled = np.empty((n, 4, 4))
        for i in range(n):
            scaled[i] = r_inverse @ basis[i] @ r_inverse.T
        flat = scaled.reshape(n, 16)
        try:
            system = np.linalg.cholesky(hs + flat @ flat.T)
        except Exception:  # noqa: BLE001
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
            if np.linalg.eigvalsh(s_next)[0] > 0.0 and np.linalg.eigvalsh(z_next)[0] > 0.0:
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
    global _assemble, _adjoint, _max_step, _cholesky_solve, _direction, _iterate  # noqa: PLW0603
    try:
        import numba
    except ImportError:
        return False
    jit = numba.njit(cache=True, nogil=True)
    _assemble, _adjoint, _max_step = jit(_assemble), jit(_adjoint), jit(_max_step)
    _cholesky_solve, _direction, _iterate = jit(_cholesky_solve), jit(_direction), jit(_iterate)
    return True


_COMPILED: list[bool] = []


def compiled() -> bool:
    """Whether the iterations run compiled (numba installed). The first call imports numba
    and wraps the functions (about 0.4 s; compilation itself happens on the first solve, or
    is read from numba's disk cache), so processes that never use this solver pay nothing."""
    if not _COMPILED:
        _COMPILED.append(_compile())
    return _COMPILED[0]


def _start(y: NDArray[np.float64] | None, basis: NDArray[np.float64],
           margin: NDArray[np.float64], tau: float, centre: NDArray[np.float64]
           ) -> NDArray[np.float64]:
    """A strictly feasible point: ``y`` moved towards ``centre`` until ``J - M`` has its
    smallest eigenvalue above ``1e-3 tau`` (``centre`` alone when ``y`` is None)."""
    if y is None or not np.isfinite(y).all():
        return centre.copy()
    for theta in (0.0, 1e-3, 1e-2, 0.05, 0.2, 0.5, 1.0):
        point = y + theta * (centre - y)
        if np.linalg.eigvalsh(_assemble(point, basis) - margin)[0] > 1e-3 * tau:
            return point
    return centre.copy()


def _strictly_inside(y: NDArray[np.float64], margin: NDArray[np.float64],
                     d: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
    """``y`` and the smallest eigenvalue of ``J(pi) - M`` evaluated as a user will, from
    ``pi = d y``; where rounding leaves it below a floor (the rounding of ``J``'s
    eigenvalues), ``y`` moves along the centre direction (``J = I``) just enough: every
    eigenvalue rises alike, the objective moves by rounding only."""
    jmat = pseudo_inertia(d * y)
    floor = (1e-9 * float(np.abs(np.linalg.eigvalsh(margin)).max())
             + 1e-14 * float(np.abs(jmat).max()) + 1e-300)  # rounding of eigvalsh
    for _ in range(3):
        slack = float(np.linalg.eigvalsh(pseudo_inertia(d * y) - margin)[0])
        if slack >= floor:
            break
        y = y + (2.0 * floor - slack) * CENTRE / d  # J(CENTRE) = I
    return y, slack


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
    h = np.ascontiguousarray(hessian, dtype=float)
    g = np.ascontiguousarray(gradient, dtype=float)
    margin = np.ascontiguousarray(margin, dtype=float)
    diagonal = np.diag(h)
    d = 1.0 / np.sqrt(np.where(diagonal > 0.0, diagonal, 1.0))
    hs = d[:, None] * h * d[None, :]
    gs = d * g
    basis = np.ascontiguousarray(BASIS * d[:, None, None])  # J(d * y) = sum_i y_i basis_i
    unconstrained = np.linalg.solve(hs, gs)
    slack = np.linalg.eigvalsh(_assemble(unconstrained, basis) - margin)[0]
    if slack > 0.0:
        return SdpResult(d * unconstrained, "interior", 0, 0.0, 0.0, float(slack))
    scale = float(np.abs(np.linalg.eigvalsh(_assemble(unconstrained, basis))).max())
    tau = max(2.0 * float(np.abs(np.linalg.eigvalsh(margin)).max()), 1e-3 * scale, 1e-12)
    centre = tau * CENTRE / d
    y = _start(None if start is None else np.asarray(start, dtype=float) / d, basis, margin,
               tau, centre)
    s_inverse = np.linalg.inv(_assemble(y, basis) - margin)
    adjoint_inverse = _adjoint(basis, s_inverse)
    mu = max(float(np.linalg.norm(hs @ y - gs)) / max(float(np.linalg.norm(adjoint_inverse)),
                                                      1e-300), 1e-12)
    objective_scale = max(abs(float(gs @ unconstrained)), 1e-300)
    y, status, iterations, gap, residual, min_slack = _iterate(
        hs, gs, basis, margin, y, mu * s_inverse, tolerance, objective_scale, max_iterations)
    y, min_slack = _strictly_inside(y, margin, d)
    stationarity_scale = max(float(np.linalg.norm(gs)), float(np.linalg.norm(hs @ y)))
    close = (gap <= ACCEPTABLE_GAP * objective_scale
             and residual <= ACCEPTABLE_RESIDUAL * stationarity_scale)
    name = "optimal" if status == 1 or (status == 2 and close) else (
        "max_iterations" if status == 0 else "numerical_limit")
    return SdpResult(d * y, name, int(iterations), float(gap), float(residual),
                     float(min_slack))
