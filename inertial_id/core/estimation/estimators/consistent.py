"""The physically consistent estimator (:class:`ConsistentEstimator`): least squares under
the LMI ``J(pi) >= eps I`` of Wensing et al. (2017) and optional :class:`Constraints`, by the
dedicated solver (:mod:`inertial_id.core.estimation.sdp`) or cvxpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SolverError
from inertial_id.core.estimate import (
    N_OFFSET,
    N_PI,
    N_UNKNOWNS,
    Estimate,
    make_estimate,
)
from inertial_id.core.estimation import sdp
from inertial_id.core.estimation.estimators.least_squares import require_rows, square_root
from inertial_id.core.estimation.sdp import (
    prior_scale,  # the uncompiled function (numba wraps a copy)
)
from inertial_id.core.parameters import pseudo_inertia
from inertial_id.core.shape import Ellipsoid
from inertial_id.core.statistics import SufficientStatistics


def pseudo_inertia_expression(pi: cp.Expression) -> cp.Expression:
    """``J(pi)`` as an affine cvxpy expression of a 10-vector variable (our order)."""
    m, hx, hy, hz = pi[0], pi[1], pi[2], pi[3]
    ixx, ixy, ixz, iyy, iyz, izz = pi[4], pi[5], pi[6], pi[7], pi[8], pi[9]
    half_trace = 0.5 * (ixx + iyy + izz)
    return cp.bmat([
        [half_trace - ixx, -ixy, -ixz, hx],
        [-ixy, half_trace - iyy, -iyz, hy],
        [-ixz, -iyz, half_trace - izz, hz],
        [hx, hy, hz, m],
    ])


REGULARIZATIONS = ("euclidean", "entropic")


@dataclass(frozen=True)
class Constraints:
    """Optional constraints of :class:`ConsistentEstimator` besides ``J(pi) >= epsilon I``.

    ``bounding_ellipsoid``: the body lies inside it, ``tr(J(pi) Q) >= 0`` (Wensing et al.
    2017, Thm 4). ``com_ellipsoid``: the CoM lies inside it (Schur-complement LMI).
    ``com_box``: ``(lower, upper)`` corners of a box containing the CoM (m, sensor frame).
    """

    bounding_ellipsoid: Ellipsoid | None = None
    com_ellipsoid: Ellipsoid | None = None
    com_box: tuple[ArrayLike, ArrayLike] | None = None


class ConsistentEstimator:
    """LMI-constrained least squares (Wensing et al. 2017): ``J(pi) >= epsilon I``.

    Solves ``min ||A x - b||^2_W + prior term`` subject to the LMI and the optional
    :class:`Constraints`. The prior term pulls ``pi`` toward ``prior`` (e.g. CAD or a shape
    prior from :mod:`inertial_id.core.shape`):

    - ``euclidean``: ``w sum_i s_i (pi_i - prior_i)^2`` with ``s_i`` the diagonal of
      ``A^T W A`` (plus a floor of 1e-3 of its mean), so ``prior_weight`` is relative to how
      much the data say of each entry;
    - ``entropic``: ``w (-log det J(pi) + tr(J(prior)^-1 J(pi)))``, the log-det (Bregman)
      divergence of Lee, Wensing and Park, up to a constant; ``prior_weight`` is absolute
      (in units of the weighted squared residual) and the prior must be consistent.

    ``known_offset`` fixes the F/T offset (e.g. zeros for a tared sensor) instead of
    estimating it. ``time_limit`` (s) bounds a cvxpy solve; running out is a
    :class:`SolverError` (the dedicated solver's iterations are bounded instead).
    ``interior_shortcut`` (cvxpy's path; the dedicated solver always tries the unconstrained
    minimiser first) and ``dedicated``: see :meth:`solve`.
    The cvxpy problem is built once with parameters (DPP); :meth:`set_prior` and new
    statistics only change parameter values, so a re-solve never recompiles.
    """

    method = "lmi_sdp"

    def __init__(
        self,
        epsilon: float = 1e-8,
        prior: ArrayLike | None = None,
        prior_weight: float = 1e-9,
        regularization: str = "euclidean",
        constraints: Constraints | None = None,
        known_offset: ArrayLike | None = None,
        time_limit: float | None = None,
        solver: str = "CLARABEL",
        interior_shortcut: bool = True,
        dedicated: bool = True,
    ) -> None:
        if regularization not in REGULARIZATIONS:
            raise SolverError(f"unknown regularization {regularization!r}: {REGULARIZATIONS}")
        self.epsilon = epsilon
        self.regularization = regularization
        self.constraints = constraints or Constraints()
        self.known_offset = None if known_offset is None else np.asarray(known_offset, float)
        self.solver = solver
        self.time_limit = time_limit
        self.interior_shortcut = interior_shortcut
        self.dedicated = dedicated
        self.last_solve = ""
        self.last_dedicated: sdp.SdpResult | None = None
        self._warm: NDArray[np.float64] | None = None  # last dedicated solution and dual
        self._warm_dual: NDArray[np.float64] | None = None
        # The solver works on x_s = S^-1 x, in units of a mass M and a length L chosen per
        # solve, so that J(pi) = M T J(pi_s) T with T = diag(L, L, L, 1) has entries near one
        # whatever the payload's size (a 9 g ruler has eigenvalues of J near 1e-8 kg m^2).
        self._x = cp.Variable(N_UNKNOWNS)
        self._r = cp.Parameter((N_UNKNOWNS, N_UNKNOWNS))
        self._z = cp.Parameter(N_UNKNOWNS)
        self._margin = cp.Parameter((4, 4), symmetric=True)
        pi = self._x[:N_PI]
        jmat = pseudo_inertia_expression(pi)
        objective = cp.sum_squares(self._r @ self._x - self._z)
        if regularization == "euclidean":
            # sqrt(w s_i) and sqrt(w s_i) * prior_i as separate parameters keep it DPP.
            self._prior_root = cp.Parameter(N_PI, nonneg=True)
            self._prior_target = cp.Parameter(N_PI)
            objective += cp.sum_squares(cp.multiply(self._prior_root, pi) - self._prior_target)
        else:
            self._weight = cp.Parameter(nonneg=True)
            self._weighted_inverse = cp.Parameter((4, 4), symmetric=True)
            objective += cp.trace(self._weighted_inverse @ jmat) - self._weight * cp.log_det(jmat)
        self._problem = cp.Problem(cp.Minimize(objective), self._constraint_list(pi, jmat))
        if prior is None and regularization == "entropic":
            prior_weight = 0.0  # no prior: the log-det term would need a consistent one
        self.set_prior(np.zeros(N_PI) if prior is None else prior, prior_weight)

    def _constraint_list(self, pi: cp.Expression, jmat: cp.Expression) -> list:
        constraints = [jmat - self._margin >> 0]
        if self.known_offset is not None:
            self._offset = cp.Parameter(N_OFFSET)
            constraints.append(self._x[N_PI:] == self._offset)
        extra = self.constraints
        if extra.bounding_ellipsoid is not None:
            self._q = cp.Parameter((4, 4), symmetric=True)
            constraints.append(cp.trace(jmat @ self._q) >= 0)
        if extra.com_ellipsoid is not None:
            self._com_centre = cp.Parameter(3)
            self._com_shape = cp.Parameter((3, 3), symmetric=True)
            m, h = pi[0], pi[1:4]
            d = cp.reshape(h - m * self._com_centre, (3, 1), order="F")
            constraints.append(cp.bmat([[cp.reshape(m, (1, 1), order="F"), d.T],
                                        [d, m * self._com_shape]]) >> 0)
        if extra.com_box is not None:
            self._com_lower, self._com_upper = cp.Parameter(3), cp.Parameter(3)
            constraints += [pi[1:4] >= pi[0] * self._com_lower,
                            pi[1:4] <= pi[0] * self._com_upper]
        return constraints

    def set_prior(self, prior: ArrayLike, weight: float) -> None:
        """Change the prior ``pi`` and its weight (no recompilation)."""
        self.prior = np.asarray(prior, dtype=float).copy()
        self.prior_weight = float(weight)
        entropic = self.regularization == "entropic" and weight > 0
        if entropic and np.linalg.eigvalsh(pseudo_inertia(self.prior))[0] <= 0:
            raise SolverError("the entropic prior must be physically consistent")

    def _scales(self, stats: SufficientStatistics) -> tuple[float, float]:
        """Mass and length units: from the prior if it has a mass, else least squares."""
        if self.prior_weight > 0 and self.prior[0] > 0:
            pi = self.prior
        else:
            pi = np.linalg.lstsq(stats.information, stats.moment, rcond=1e-12)[0][:N_PI]
        mass = abs(pi[0]) if abs(pi[0]) > 1e-9 else 1.0
        trace = abs(pi[4] + pi[7] + pi[9])
        length = float(np.clip(np.sqrt(trace / (2.0 * mass)), 1e-3, 10.0))
        return mass, length

    def _update_parameters(self, stats: SufficientStatistics) -> NDArray[np.float64]:
        """Set every parameter for these statistics; returns the scaling ``S`` (diagonal)."""
        mass, length = self._scales(stats)
        scale = np.concatenate(([mass], np.full(3, mass * length), np.full(6, mass * length**2),
                                np.ones(N_OFFSET)))
        t = np.array([length, length, length, 1.0])
        r, z = square_root(stats)
        self._r.value, self._z.value = r * scale, z
        if self.known_offset is not None:
            self._offset.value = self.known_offset
        self._margin.value = np.diag(self.epsilon / (mass * t * t))
        extra = self.constraints
        if extra.bounding_ellipsoid is not None:
            self._q.value = extra.bounding_ellipsoid.q_matrix() * np.outer(t, t)
        if extra.com_ellipsoid is not None:
            self._com_centre.value = extra.com_ellipsoid.centre / length
            self._com_shape.value = extra.com_ellipsoid.shape / length**2
        if extra.com_box is not None:
            lower, upper = (np.asarray(v, dtype=float) / length for v in extra.com_box)
            self._com_lower.value, self._com_upper.value = lower, upper
        if self.regularization == "euclidean":
            root = np.sqrt(self.prior_weight * prior_scale(stats.information))
            self._prior_root.value = root * scale[:N_PI]
            self._prior_target.value = root * self.prior
        else:
            self._weight.value = self.prior_weight
            inverse = np.zeros((4, 4))
            if self.prior_weight > 0:
                inverse = np.linalg.inv(pseudo_inertia(self.prior)) * mass * np.outer(t, t)
            self._weighted_inverse.value = self.prior_weight * 0.5 * (inverse + inverse.T)
        return scale

    def solve(self, stats: SufficientStatistics) -> Estimate:
        """The consistent estimate; raises :class:`SolverError` when none is found.

        With the Euclidean prior the objective is a strictly convex quadratic whenever the
        data and the prior determine every unknown; if its unconstrained minimiser satisfies
        every constraint it is the SDP's optimum (one linear solve instead of a conic
        solver). When ``dedicated`` is set and the problem is one it covers (only the LMI,
        the Euclidean prior), :func:`~inertial_id.core.estimation.sdp.solve_statistics` solves it
        from the statistics in one compiled call: that linear solve, else Newton's method on the
        previous optimum's active face, else its interior-point method. Otherwise, or when
        it does not end optimal and strictly feasible, cvxpy solves (the reference), after
        the same linear-solve shortcut (``interior_shortcut``). ``last_solve`` says which
        path ran: ``interior``, ``dedicated`` or ``sdp``.
        """
        estimate = make_estimate(stats, self.solve_parameters(stats), self.method,
                                 self.known_offset is not None)
        require_consistent(estimate)
        return estimate

    def solve_parameters(self, stats: SufficientStatistics) -> NDArray[np.float64]:
        """``x = [pi; offset]`` of :meth:`solve`, without its uncertainty (raises
        :class:`SolverError` when no solution is found)."""
        require_rows(stats)
        if not (np.isfinite(stats.information).all() and np.isfinite(stats.moment).all()):
            raise SolverError("the sufficient statistics are not finite (noise std so small "
                              "or large that the weights overflow?): reset the estimate")
        x = self._solve_dedicated(stats) if self._dedicated_applies() else None
        if x is None:
            scale = self._update_parameters(stats)
            x_scaled = self._interior_minimiser()
            self.last_solve = "interior"
            if x_scaled is None:
                x_scaled = self._solve_sdp()
                self.last_solve = "sdp"
            x = scale * x_scaled
        return x

    def _normal_equations(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``H`` and ``g`` of the scaled Euclidean objective ``1/2 x^T H x - g^T x`` (data
        and prior, from the parameter values :meth:`_update_parameters` set)."""
        r, z = self._r.value, self._z.value
        hessian = r.T @ r
        gradient = r.T @ z
        hessian[:N_PI, :N_PI] += np.diag(self._prior_root.value**2)
        gradient[:N_PI] += self._prior_root.value * self._prior_target.value
        return hessian, gradient

    @property
    def fast(self) -> bool:
        """Whether a solve costs microseconds, not milliseconds: the dedicated solver applies,
        is ready (:meth:`solve`) and did not hand the last solve to cvxpy."""
        return self._dedicated_applies() and self.last_solve != "sdp"

    def _dedicated_applies(self) -> bool:
        """The dedicated solver (:mod:`inertial_id.core.estimation.sdp`) covers the LMI with the
        Euclidean prior and no further constraint, and it is compiled and can run now
        (:func:`~inertial_id.core.estimation.sdp.available`: not while a node prepares it in the
        background)."""
        extra = self.constraints
        return (self.dedicated and self.regularization == "euclidean"
                and extra.bounding_ellipsoid is None and extra.com_ellipsoid is None
                and extra.com_box is None and sdp.available())

    def _solve_dedicated(self, stats: SufficientStatistics) -> NDArray[np.float64] | None:
        """``[pi; offset]`` by :func:`~inertial_id.core.estimation.sdp.solve_statistics`,
        warm-started from the previous solution and its dual; None when it does not end optimal and
        strictly feasible (cvxpy then solves)."""
        try:
            x, result = sdp.solve_statistics(
                stats.information, stats.moment, self.prior, self.prior_weight, self.epsilon,
                self.known_offset, self._warm, self._warm_dual)
        except (np.linalg.LinAlgError, ArithmeticError):
            return None
        self.last_dedicated = result
        if not result.ok:
            return None
        self._warm, self._warm_dual = result.pi, result.dual
        self.last_solve = "interior" if result.method == "unconstrained" else "dedicated"
        return x

    def _solve_sdp(self) -> NDArray[np.float64]:
        """The conic solve of the scaled problem; its solution in scaled units."""
        options = {} if self.time_limit is None else {"time_limit": self.time_limit}
        try:
            self._problem.solve(solver=self.solver, **options)
        except cp.error.SolverError as exc:
            raise SolverError(f"SDP solver {self.solver} failed: {exc}") from exc
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - Clarabel's Rust panics (pyo3
            # PanicException, e.g. "Eigval error" on degenerate data) derive from BaseException
            raise SolverError(f"SDP solver {self.solver} failed: {type(exc).__name__}: "
                              f"{exc}") from exc
        if self._problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or self._x.value is None:
            raise SolverError(f"SDP solver {self.solver} ended with status {self._problem.status}")
        return np.asarray(self._x.value, dtype=float)

    def _interior_minimiser(self) -> NDArray[np.float64] | None:
        """The unconstrained minimiser of the scaled objective (from the parameter values
        :meth:`_update_parameters` set) if it is unique and feasible, else ``None``."""
        if not self.interior_shortcut or self.regularization != "euclidean":
            return None
        hessian, gradient = self._normal_equations()
        free = slice(0, N_PI if self.known_offset is not None else N_UNKNOWNS)
        x = np.zeros(N_UNKNOWNS)
        if self.known_offset is not None:
            x[N_PI:] = self._offset.value
            gradient[:N_PI] -= hessian[:N_PI, N_PI:] @ x[N_PI:]
        try:
            factor = np.linalg.cholesky(hessian[free, free])
        except np.linalg.LinAlgError:
            return None
        diagonal = np.diag(factor)
        if diagonal.min() <= 1e-6 * diagonal.max():  # nearly singular: not unique
            return None
        x[free] = np.linalg.solve(factor.T, np.linalg.solve(factor, gradient[free]))
        return x if np.isfinite(x).all() and self._feasible(x[:N_PI]) else None

    def _feasible(self, pi: NDArray[np.float64]) -> bool:
        """Every constraint of the scaled problem holds at ``pi`` (scaled units)."""
        jmat = pseudo_inertia(pi)
        if np.linalg.eigvalsh(jmat - self._margin.value)[0] < 0.0:
            return False
        extra = self.constraints
        if extra.bounding_ellipsoid is not None and np.trace(jmat @ self._q.value) < 0.0:
            return False
        m, h = pi[0], pi[1:4]
        if extra.com_ellipsoid is not None:
            d = h - m * self._com_centre.value
            block = np.block([[np.array([[m]]), d[None, :]],
                              [d[:, None], m * self._com_shape.value]])
            if np.linalg.eigvalsh(block)[0] < 0.0:
                return False
        if extra.com_box is not None:
            inside = (h >= m * self._com_lower.value) & (h <= m * self._com_upper.value)
            if not inside.all():
                return False
        return True


def require_consistent(estimate: Estimate) -> None:
    """Raise :class:`SolverError` unless ``J(pi)`` of ``estimate`` is positive definite."""
    if not estimate.physically_consistent:
        raise SolverError("SDP solution is not physically consistent "
                          f"(min eigenvalue of J = {estimate.min_eigenvalue:.3g})")
