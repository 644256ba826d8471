"""Fully physically consistent estimation on a manifold (Traversaro et al. 2016).

A rigid body is parametrized by ``theta = (m, c, Q, L)`` in ``R>=0 x R^3 x SO(3) x R^3>=0``:
mass ``m`` (kg), centre of mass ``c`` (m, sensor frame), the rotation ``Q`` from the principal
axes at the CoM to the sensor axes, and the central second moments of mass ``L`` (kg m^2) along
those axes. With ``P = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]``

    I_C = Q diag(P L) Q^T,    I_O = I_C - m [c]x [c]x,    pi = [m, m c, vech(I_O)]

in the package order ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the sensor
origin. Equivalently the pseudo-inertia is ``J(pi) = T diag(Q diag(L) Q^T, m) T^T`` with
``T = [[1, c], [0, 1]]``, so ``J`` is positive definite exactly when ``m > 0`` and ``L > 0``:
every such point is fully physically consistent (triangle inequalities included).

:class:`ManifoldEstimator` minimises ``||A x - b||^2_W`` (plus an optional prior) over this
manifold by Levenberg-Marquardt in a local chart re-centred after every accepted step:

    m = m0 (1 + s_m),  h = m c = m0 (c0 + s_c),  Q = Q0 expm([s_Q]x),  L = L0 (1 + s_L)

- Consistency (J positive definite at every iterate): the steps of ``m`` and ``L`` are
  projected onto ``[floor, inf)`` with ``floor = 1e-12 tr J``, so ``m > 0`` and ``L > 0`` hold
  with a margin that survives rounding. ``pi`` is linear in ``m``, ``h`` and ``L``, so the
  projected step is exactly what the model predicted for it; a moment that should vanish
  reaches the floor in one step (a log parametrization would only shrink it by a factor per
  step, and could not grow it back from the floor quickly).
- Offset: it enters linearly and is eliminated by variable projection (a Schur complement of
  ``A^T W A``), leaving a problem in ``pi`` alone whose square-root form ``||R pi - z||^2``
  costs a 10 x 10 product to evaluate.
- Model: analytic Jacobian plus the positive part of the parametrization's own curvature
  (rotation of the principal axes, parallel-axis term). Gauss-Newton alone zigzags at a
  boundary optimum (some ``L_k = 0``, where the residual is not zero), which is where an
  inconsistent least-squares solution sends the estimate. Principal axes of equal moments are
  turned to diagonalise the gradient, so a point mass can become a rod or a disc.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import solve_triangular

from inertial_id.core.errors import InertialIdError, SolverError
from inertial_id.core.estimators import (
    N_PI,
    N_UNKNOWNS,
    Estimate,
    make_estimate,
    prior_scale,
    square_root,
)
from inertial_id.core.parameters import skew
from inertial_id.core.statistics import SufficientStatistics

# P maps the second moments L to the principal moments of inertia, J_principal = P L.
_P = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
# (row, col) of [xx, xy, xz, yy, yz, zz], the order of the inertia entries of pi.
_VECH_ROWS = np.array([0, 0, 0, 1, 1, 2])
_VECH_COLS = np.array([0, 1, 2, 1, 2, 2])
_BASIS = np.eye(3)
_BASIS.setflags(write=False)
_BASIS_SKEW = np.array([skew(e) for e in _BASIS])
# Iterates keep m and L above this fraction of tr J, so J stays positive definite in floats.
_RELATIVE_FLOOR = 1e-12
# Marquardt scaling floor, relative to the largest diagonal of J^T J. It also all but freezes
# a moment sitting on its floor (the diagonal of s_L is (L_k |dr/dL_k|)^2), unless the cost
# wants it to grow.
_SCALE_FLOOR = 1e-12
# Smallest relative mass step (a tenfold decrease).
_MASS_STEP_FLOOR = -0.9
# Two second moments closer than this fraction of the largest one count as equal.
_DEGENERATE_FRACTION = 1e-6


class ManifoldPoint(NamedTuple):
    """``(m, c, Q, L)``: mass (kg), CoM (m), principal axes (columns of ``Q``, det +1) and
    central second moments of mass along them (kg m^2); all in the sensor frame."""

    mass: float
    com: NDArray[np.float64]
    rotation: NDArray[np.float64]
    moments: NDArray[np.float64]


def _vech(matrices: NDArray[np.float64]) -> NDArray[np.float64]:
    """``[xx, xy, xz, yy, yz, zz]`` of a (..., 3, 3) stack of symmetric matrices."""
    return matrices[..., _VECH_ROWS, _VECH_COLS]


def rotation_exp(delta: ArrayLike) -> NDArray[np.float64]:
    """``expm([delta]x)`` by the Rodrigues formula (``delta`` a rotation vector, rad)."""
    delta = np.asarray(delta, dtype=float)
    angle = float(np.linalg.norm(delta))
    k = skew(delta)
    if angle < 1e-8:
        return _BASIS + k + 0.5 * k @ k
    return (
        _BASIS
        + (np.sin(angle) / angle) * k
        + ((1.0 - np.cos(angle)) / angle**2) * k @ k
    )


def _orthonormalize(q: NDArray[np.float64]) -> NDArray[np.float64]:
    """One Bjorck step towards the nearest rotation: removes the rounding drift of products of
    rotations (first order in ``q^T q - 1``, which is ~1e-16 here)."""
    return q @ (1.5 * _BASIS - 0.5 * q.T @ q)


def pi_from_manifold(m: float, c: ArrayLike, Q: ArrayLike, L: ArrayLike) -> NDArray[np.float64]:
    """``pi`` (package order, about the sensor origin) of the manifold point ``(m, c, Q, L)``.

    ``I_O = Q diag(P L) Q^T - m [c]x [c]x`` (Traversaro et al. 2016, Sec. III-B): mass in kg,
    CoM in m, ``Q`` principal axes (columns) in the sensor frame, ``L`` in kg m^2. Fully
    physically consistent whenever ``m >= 0`` and ``L >= 0``; ``J(pi)`` is positive definite
    when both are strictly positive.
    """
    c = np.asarray(c, dtype=float)
    q = np.asarray(Q, dtype=float)
    moments = np.asarray(L, dtype=float)
    inertia_com = (q * (_P @ moments)) @ q.T
    cx = skew(c)
    inertia_origin = inertia_com - m * cx @ cx
    return np.concatenate(([m], m * c, _vech(inertia_origin)))


def manifold_from_pi(
    pi: ArrayLike, min_mass: float = 0.0, min_moment: float = 0.0
) -> ManifoldPoint:
    """``(m, c, Q, L)`` of ``pi``, clipped onto the manifold when ``pi`` is not consistent.

    ``c = h / m``; ``Q`` and ``L`` are the eigenvectors (ascending eigenvalues, det +1) and
    eigenvalues of the central second moment ``Sigma_C = tr(I_C)/2 1 - I_C``, which share
    their eigenvectors with ``I_C``. Clipping: ``m`` is raised to ``min_mass`` and ``L`` to
    ``min_moment``, which replaces ``Sigma_C`` by its nearest (Frobenius) matrix with
    eigenvalues ``>= min_moment``. A mass ``<= 0`` has no centre of mass: then ``c = 0`` and
    ``Sigma_C`` is taken from the inertia about the origin. Exact (the inverse of
    :func:`pi_from_manifold`) on consistent ``pi`` with ``m > 0``.
    """
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (N_PI,) or not np.all(np.isfinite(pi)):
        raise InertialIdError(f"pi must be 10 finite numbers, got {pi!r}")
    m = float(pi[0])
    c = pi[1:4] / m if m > 0.0 else np.zeros(3)
    inertia_origin = np.empty((3, 3))
    inertia_origin[_VECH_ROWS, _VECH_COLS] = pi[4:]
    inertia_origin[_VECH_COLS, _VECH_ROWS] = pi[4:]
    cx = skew(c)
    inertia_com = inertia_origin + max(m, 0.0) * cx @ cx
    sigma = 0.5 * np.trace(inertia_com) * _BASIS - inertia_com
    moments, q = np.linalg.eigh(sigma)
    if np.linalg.det(q) < 0:
        q[:, 2] *= -1.0
    return ManifoldPoint(max(m, min_mass), c, q, np.maximum(moments, min_moment))


def pseudo_inertia_trace(point: ManifoldPoint) -> float:
    """``tr J = m (1 + |c|^2) + sum(L)`` of a manifold point (its scale, kg and kg m^2)."""
    return float(point.mass * (1.0 + point.com @ point.com) + np.sum(point.moments))


def manifold_jacobian(point: ManifoldPoint) -> NDArray[np.float64]:
    """``d pi / d s`` (10 x 10) at ``s = 0`` of the chart around ``point`` (module docstring).

    Columns ``[s_m, s_c (3), s_Q (3), s_L (3)]`` of the chart ``m = m0 (1 + s_m)``,
    ``h = m0 (c0 + s_c)``, ``Q = Q0 expm([s_Q]x)``, ``L = L0 (1 + s_L)``, in which ``pi`` is
    linear in everything but ``Q`` and the parallel-axis term ``-[h]x^2 / m``. Uses
    ``[a]x [b]x = b a^T - (a . b) 1`` and ``Q diag(P e_k) Q^T = 1 - q_k q_k^T``.
    """
    m, c, q, moments = point
    jac = np.zeros((N_PI, 10))
    # s_m at fixed h: m d/dm of [m, h, vech(I_C - [h]x^2 / m)].
    jac[0, 0] = m
    jac[4:, 0] = _vech(m * (np.outer(c, c) - (c @ c) * _BASIS))
    # s_c: h = m0 (c0 + s_c), parallel-axis term with d[c]x^2/dc_k = c e_k^T + e_k c^T - 2 c_k 1.
    jac[1:4, 1:4] = m * _BASIS
    outer = c[None, :, None] * _BASIS[:, None, :]
    diagonal = c[:, None, None] * _BASIS[None]
    jac[4:, 1:4] = _vech(-m * (outer + outer.transpose(0, 2, 1) - 2.0 * diagonal)).T
    # Q exp([d]x): d I_C = Q ([e_k]x D - D [e_k]x) Q^T, entries (E_k)_ab (D_b - D_a).
    d = _P @ moments
    local = _BASIS_SKEW * (d[None, None, :] - d[None, :, None])
    jac[4:, 4:7] = _vech(q @ local @ q.T).T
    # s_L: L_k Q diag(P e_k) Q^T = L_k (1 - q_k q_k^T).
    axes = q.T[:, :, None] * q.T[:, None, :]
    jac[4:, 7:10] = _vech(moments[:, None, None] * (_BASIS - axes)).T
    return jac


def _symmetric_weights(weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """``Gamma`` with ``tr(Gamma I) = weights . vech(I)`` for every symmetric ``I``."""
    g = np.empty((3, 3))
    g[_VECH_ROWS, _VECH_COLS] = weights
    g[_VECH_COLS, _VECH_ROWS] = weights
    return 0.5 * (g + np.diag(np.diag(g)))


def manifold_curvature(point: ManifoldPoint, weights: ArrayLike) -> NDArray[np.float64]:
    """Hessian (10 x 10) of ``weights . pi`` at the point, in the chart coordinates of
    :func:`manifold_jacobian`.

    These are the second-order terms of the parametrization itself: the parallel-axis term
    ``-m0 [c0 + s_c]x^2 / (1 + s_m)`` and the rotation of the principal axes. Nonzero blocks:
    (m, m), (m, c), (c, c), (Q, Q), (Q, L). With ``Gamma`` the symmetric matrix of the inertia
    weights and ``Gamma' = Q^T Gamma Q``.
    """
    m, c, q, moments = point
    w = np.asarray(weights, dtype=float)
    gamma = _symmetric_weights(w[4:])
    trace = np.trace(gamma)
    hess = np.zeros((10, 10))
    # (m, m): -2 m tr(Gamma [c]x^2); (m, c): m tr(Gamma d[c]x^2/dc_k).
    hess[0, 0] = -2.0 * m * (c @ gamma @ c - (c @ c) * trace)
    hess[0, 1:4] = hess[1:4, 0] = 2.0 * m * (gamma @ c - trace * c)
    # (c, c): -m tr(Gamma (E_k E_l + E_l E_k)) with E_k E_l = e_l e_k^T - d_kl 1.
    hess[1:4, 1:4] = -2.0 * m * (gamma - trace * _BASIS)
    # (Q, Q): exp(K) D exp(-K) = D + [K, D] + (K^2 D + D K^2)/2 - K D K + O(K^3).
    gamma_p = q.T @ gamma @ q
    d = _P @ moments
    sym = 0.5 * (d[:, None] + d[None, :]) * gamma_p  # (D Gamma' + Gamma' D) / 2
    # tr(Gamma' E_i D E_j) = sum (E_i D)_an (E_j Gamma')_na.
    sandwich = np.einsum("ian,jna->ij", _BASIS_SKEW * d, _BASIS_SKEW @ gamma_p)
    hess[4:7, 4:7] = 2.0 * sym - 2.0 * np.trace(sym) * _BASIS - sandwich - sandwich.T
    # (Q, L): tr(Gamma' (E_i D_k - D_k E_i)) with D_k = L_k (1 - e_k e_k^T): 2 L_k (E_i Gamma')_kk.
    hess[4:7, 7:10] = 2.0 * moments[None, :] * np.einsum("ika,ak->ik", _BASIS_SKEW, gamma_p)
    hess[7:10, 4:7] = hess[4:7, 7:10].T
    return hess


def retract(point: ManifoldPoint, step: ArrayLike, floor: float = 0.0) -> ManifoldPoint:
    """The point at chart coordinates ``step`` (see :func:`manifold_jacobian`) from ``point``.

    ``m`` and ``L`` change by ``m s_m`` and ``L_k s_k``, clipped at ``floor`` (a projection onto
    ``[floor, inf)``); the first moment ``h = m c`` changes by ``m0 s_c``; ``Q`` is
    right-multiplied by ``expm([s_Q]x)`` and re-orthonormalised.
    """
    s = np.asarray(step, dtype=float)
    mass = max(point.mass * (1.0 + float(s[0])), floor)
    first_moment = point.mass * (point.com + s[1:4])
    moments = np.maximum(point.moments * (1.0 + s[7:10]), floor)
    rotation = _orthonormalize(point.rotation @ rotation_exp(s[4:7]))
    return ManifoldPoint(mass, first_moment / mass, rotation, moments)


class _ReducedProblem:
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


def _coerce_warm_start(warm_start: Estimate | ArrayLike) -> NDArray[np.float64]:
    """``pi`` of an :class:`Estimate`, a ``pi`` (10) or an ``x = [pi; offset]`` (16)."""
    if isinstance(warm_start, Estimate):
        return np.asarray(warm_start.pi, dtype=float)
    arr = np.asarray(warm_start, dtype=float).reshape(-1)
    if arr.size not in (N_PI, N_UNKNOWNS):
        raise InertialIdError(f"warm start must have 10 or 16 entries, got {arr.size}")
    return arr[:N_PI]


def _project(pi: NDArray[np.float64], problem: _ReducedProblem) -> ManifoldPoint:
    """A strictly consistent starting point near ``pi``.

    A non-positive (or non-finite) mass has no centre of mass: it is replaced by the best
    mass-only fit if that is positive, else by ``|m|`` (a payload too light to tell from zero),
    else 1 kg, with ``c = 0`` and the inertia of ``pi`` kept. ``L`` is clipped to ``1e-6 tr J``
    (see :func:`manifold_from_pi`) and ``m`` to the iterate floor.
    """
    pi = np.where(np.isfinite(pi), pi, 0.0)
    if pi[0] <= 0.0:
        info, moment = problem.statistics.information, problem.statistics.moment
        fit = moment[0] / info[0, 0] if info[0, 0] > 0.0 else 0.0
        mass = fit if fit > 0.0 else (abs(pi[0]) if pi[0] < 0.0 else 1.0)
        pi = np.concatenate(([mass], np.zeros(3), pi[4:]))
    rough = manifold_from_pi(pi)
    scale = pseudo_inertia_trace(rough._replace(moments=np.maximum(rough.moments, 0.0)))
    return manifold_from_pi(pi, _RELATIVE_FLOOR * scale, 1e-6 * scale)


class ManifoldEstimator:
    """Levenberg-Marquardt on the ``(m, c, Q, L)`` manifold; consistent at every iterate.

    Minimises ``||A x - b||^2_W + w sum_i s_i (pi_i - prior_i)^2`` (``w = prior_weight``,
    ``s_i`` the diagonal of ``A^T W A`` plus a floor: the Euclidean prior of
    :class:`~inertial_id.core.estimators.ConsistentEstimator`), the problem that estimator
    solves without its ``epsilon`` margin.
    Stops when an accepted step lowers ``||R pi - z||^2`` (the cost less its unconstrained
    minimum; the SDP's objective) by less than ``tolerance`` relative to it, when the step is
    below ``tolerance`` in every chart coordinate, when no step can lower the cost any more,
    after ``max_iterations`` trial steps, or when ``time_budget`` seconds (wall clock, whole
    call) have passed. Every iterate is consistent and only decreases are accepted, so it
    always returns the best iterate so far.

    The estimator remembers its last solution (``point``, a :class:`ManifoldPoint`) and
    starts the next :meth:`solve` from it when that is the better start (recursive use);
    :meth:`reset` forgets it. After each solve ``iterations`` (trial steps), ``converged`` and
    ``cost`` (``||A x - b||^2_W`` plus the prior term) describe the run.
    """

    method = "manifold"

    def __init__(
        self,
        max_iterations: int = 100,
        tolerance: float = 1e-10,
        time_budget: float | None = None,
        prior: ArrayLike | None = None,
        prior_weight: float = 0.0,
    ) -> None:
        if max_iterations < 0 or tolerance <= 0.0 or prior_weight < 0.0:
            raise InertialIdError("max_iterations >= 0, tolerance > 0, prior_weight >= 0")
        if time_budget is not None and time_budget <= 0.0:
            raise InertialIdError("time_budget must be positive (seconds) or None")
        self.max_iterations = int(max_iterations)
        self.tolerance = float(tolerance)
        self.time_budget = time_budget
        self.prior = np.zeros(N_PI) if prior is None else np.asarray(prior, dtype=float)
        if self.prior.shape != (N_PI,):
            raise InertialIdError(f"prior must have 10 entries, got {self.prior.size}")
        self.prior_weight = float(prior_weight)
        self.point: ManifoldPoint | None = None
        self.iterations = 0
        self.converged = False
        self.cost = float("nan")

    def reset(self) -> None:
        """Forget the last solution (the next solve starts from least squares)."""
        self.point = None

    def solve(
        self, stats: SufficientStatistics, warm_start: Estimate | ArrayLike | None = None
    ) -> Estimate:
        """The consistent estimate of ``[pi; offset]``; raises :class:`SolverError`.

        Start: ``warm_start`` (an :class:`Estimate`, ``pi`` or ``[pi; offset]``, projected onto
        the manifold) when given; otherwise the better (lower cost) of the remembered last
        solution and the least-squares solution projected onto the manifold. When least
        squares is consistent it is the optimum, so well-excited data need one iteration.
        """
        start = time.perf_counter()
        if stats.rows < N_UNKNOWNS:
            raise SolverError(f"{stats.rows:.0f} equations cannot determine {N_UNKNOWNS} unknowns")
        problem = _ReducedProblem(stats, self.prior, self.prior_weight)
        if warm_start is not None:
            point = _project(_coerce_warm_start(warm_start), problem)
        else:
            point = _project(problem.least_squares_pi(), problem)
            if self.point is not None and problem.cost(self.point) < problem.cost(point):
                point = self.point
        deadline = None if self.time_budget is None else start + self.time_budget
        point = self._levenberg_marquardt(problem, point, deadline)
        pi = pi_from_manifold(*point)
        x = np.concatenate((pi, problem.offset(pi)))
        estimate = make_estimate(stats, x, self.method)
        if not estimate.physically_consistent:
            raise SolverError(
                "manifold solution is not physically consistent "
                f"(min eigenvalue of J = {estimate.min_eigenvalue:.3g})"
            )
        self.point = point
        return estimate

    def _levenberg_marquardt(
        self, problem: _ReducedProblem, point: ManifoldPoint, deadline: float | None
    ) -> ManifoldPoint:
        """Levenberg-Marquardt with Marquardt scaling and Nielsen's damping update."""
        residual = problem.residual(pi_from_manifold(*point))
        point, residual, cost = _aligned(problem, point, residual)
        model = _Model(problem, point, residual)
        damping, growth = 1e-3, 2.0
        self.iterations, self.converged = 0, False
        while self.iterations < self.max_iterations:
            if deadline is not None and time.perf_counter() >= deadline:
                break
            self.iterations += 1
            floor = _RELATIVE_FLOOR * pseudo_inertia_trace(point)
            step = model.step(damping, _lower_bounds(point, floor))
            trial = None
            if step is not None:
                trial = retract(point, step, floor)
                # pi is linear in m and L: judge the model on the step really taken (projected).
                taken = _taken_step(point, trial, step)
                predicted = model.predicted(taken)
                if predicted <= 4.0 * np.finfo(float).eps * (cost + problem.floor_cost):
                    self.converged = True  # nothing left to gain at this precision
                    break
                trial_residual = problem.residual(pi_from_manifold(*trial))
                trial_cost = float(trial_residual @ trial_residual)
            if trial is None or not cost - trial_cost > 0.0:
                damping *= growth
                growth *= 2.0
                if damping > 1e16:
                    self.converged = True  # no step lowers the cost any more
                    break
                continue
            decrease = cost - trial_cost
            rho = decrease / predicted if predicted > 0.0 else 1.0
            damping *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            growth = 2.0
            point, residual, cost = _aligned(problem, trial, trial_residual)
            relative = decrease <= self.tolerance * (cost + decrease)
            if relative or _step_is_small(taken, point, self.tolerance):
                self.converged = True
                break
            model = _Model(problem, point, residual)
        self.cost = cost + problem.floor_cost
        return point


class _Model:
    """Quadratic model of ``||R pi(s) - z||^2`` around a point, in chart coordinates ``s``.

    Hessian ``J^T J + S+`` with ``J = R d pi/ds`` (Gauss-Newton) and ``S+`` the positive part
    (:func:`_positive_part`) of the parametrization's curvature weighted by ``R^T r``
    (:func:`manifold_curvature`). At a boundary optimum the residual is not zero and
    Gauss-Newton alone underestimates the curvature of tilting a flat ``Sigma_C``: it zigzags.
    Rotations about a principal axis whose two other second moments are equal do not move
    ``pi`` and are frozen. Damping is Marquardt's, ``mu diag(J^T J)`` (floored).
    """

    def __init__(
        self, problem: _ReducedProblem, point: ManifoldPoint, residual: NDArray[np.float64]
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


def _aligned(
    problem: _ReducedProblem, point: ManifoldPoint, residual: NDArray[np.float64]
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
    gamma_p = point.rotation.T @ _symmetric_weights((problem.root.T @ residual)[4:])
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


def _lower_bounds(point: ManifoldPoint, floor: float) -> NDArray[np.float64]:
    """Smallest chart step per coordinate: ``L_k (1 + s_k) >= floor`` and ``m (1 + s_m) >=
    max(floor, m / 10)``: the parallel-axis term ``-[h]x^2 / m`` blows up as ``m -> 0``, which
    the quadratic model cannot see, so the mass may shrink tenfold per step at most."""
    lower = np.full(10, -np.inf)
    lower[0] = max(floor / point.mass - 1.0, _MASS_STEP_FLOOR)
    lower[7:10] = floor / point.moments - 1.0
    return np.minimum(lower, 0.0)


def _taken_step(
    point: ManifoldPoint, trial: ManifoldPoint, step: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``step`` with the m and L entries replaced by the relative changes really made
    (after the projection onto the floor), on which the model is then evaluated."""
    taken = step.copy()
    taken[0] = trial.mass / point.mass - 1.0
    taken[7:10] = trial.moments / point.moments - 1.0
    return taken


def _step_is_small(step: NDArray[np.float64], point: ManifoldPoint, tolerance: float) -> bool:
    """Every chart coordinate moved less than ``tolerance`` (relative for m and L, radians
    for Q, and relative to the radius of gyration ``sqrt(sum(L) / m)`` for c)."""
    gyration = np.sqrt(np.sum(point.moments) / point.mass) if point.mass > 0 else 1.0
    scaled = np.concatenate((step[[0, 4, 5, 6, 7, 8, 9]], step[1:4] / max(gyration, 1e-300)))
    return bool(np.max(np.abs(scaled)) < tolerance)
