"""Estimators of ``x = [pi (10); offset (6)]`` from sufficient statistics.

Every estimator takes :class:`~inertial_id.core.statistics.SufficientStatistics` of the
weighted problem ``min ||A x - b||^2_W`` and returns an :class:`Estimate`. The constrained
estimator solves the convex SDP of Wensing et al. (2017)

    min ||A x - b||^2_W + w ||pi - pi_prior||^2   s.t.   J(pi) >= eps I,

so its result is fully physically consistent by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cvxpy as cp
import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core import sdp
from inertial_id.core.covariance import (
    com_jacobian,
    derived_covariance,
    inertia_com_jacobian,
    robust_covariance,
    std_from_covariance,
)
from inertial_id.core.errors import SolverError
from inertial_id.core.parameters import (
    PI_NAMES,
    BodyParameters,
    pseudo_inertia,
)
from inertial_id.core.sdp import prior_scale  # the uncompiled function (numba wraps a copy)
from inertial_id.core.shape import Ellipsoid
from inertial_id.core.statistics import SufficientStatistics

N_PI = 10
N_OFFSET = 6
N_UNKNOWNS = N_PI + N_OFFSET


@dataclass(frozen=True)
class Estimate:
    """An estimate of the payload parameters and the F/T offset, with its uncertainty.

    ``body`` holds ``pi`` in the sensor frame about its origin; ``offset`` is the F/T bias
    ``[fx, fy, fz, tx, ty, tz]``; ``covariance`` is 16x16 over ``[pi; offset]`` (SI units,
    sensor frame); ``covariance_type`` says how it was computed (see :func:`make_estimate`);
    ``condition_number`` is that of the column-scaled regressor; ``min_eigenvalue`` is the
    smallest eigenvalue of ``J(pi)`` (positive means physically consistent).

    Immutable: its arrays are read-only, and the derived quantities below are computed once
    (a node publishes them after every batch).
    """

    body: BodyParameters
    offset: NDArray[np.float64]
    covariance: NDArray[np.float64]
    samples: float
    condition_number: float
    method: str
    covariance_type: str = "classical"

    def __post_init__(self) -> None:
        for name in ("offset", "covariance"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))

    @property
    def pi(self) -> NDArray[np.float64]:
        """``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` about the sensor origin."""
        return self.body.pi

    @cached_property
    def _std(self) -> NDArray[np.float64]:
        return _read_only(std_from_covariance(self.covariance))

    @property
    def std(self) -> NDArray[np.float64]:
        """Standard deviation of each entry of ``pi`` (kg, kg m, kg m^2)."""
        return self._std[:N_PI]

    @property
    def offset_std(self) -> NDArray[np.float64]:
        """Standard deviation of each entry of the offset (N, N m)."""
        return self._std[N_PI:]

    @cached_property
    def com_covariance(self) -> NDArray[np.float64]:
        """3x3 covariance of the CoM (m^2, sensor frame), delta method."""
        return _read_only(derived_covariance(com_jacobian(self.pi),
                                             self.covariance[:N_PI, :N_PI]))

    @cached_property
    def com_std(self) -> NDArray[np.float64]:
        """Standard deviation of the CoM ``[cx, cy, cz]`` (m, sensor frame), delta method."""
        return _read_only(std_from_covariance(self.com_covariance))

    @cached_property
    def inertia_com_std(self) -> NDArray[np.float64]:
        """Standard deviation of the inertia about the CoM, ``[Ixx, Ixy, Ixz, Iyy, Iyz, Izz]``
        (kg m^2, sensor axes), delta method."""
        jac = inertia_com_jacobian(self.pi)
        return _read_only(std_from_covariance(derived_covariance(
            jac, self.covariance[:N_PI, :N_PI])))

    @property
    def relative_std(self) -> NDArray[np.float64]:
        """``std / |pi|`` in percent (sigma %), inf where the parameter is zero."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.pi != 0.0, 100.0 * self.std / np.abs(self.pi), np.inf)

    @property
    def min_eigenvalue(self) -> float:
        """Smallest eigenvalue of the pseudo-inertia of ``pi``."""
        return self.body.min_pseudo_inertia_eigenvalue

    @property
    def physically_consistent(self) -> bool:
        """``J(pi)`` positive definite."""
        return self.body.is_physically_consistent()


def _read_only(array: ArrayLike) -> NDArray[np.float64]:
    """A read-only float copy of ``array``."""
    out = np.array(array, dtype=float)
    out.setflags(write=False)
    return out


def scaled_condition_number(information: NDArray[np.float64]) -> float:
    """Condition number of the regressor with unit-norm columns, from ``A^T W A``."""
    d = np.sqrt(np.clip(np.diag(information), 0.0, None))
    if np.any(d == 0.0):
        return float("inf")
    eig = np.linalg.eigvalsh(information / np.outer(d, d))
    return float(np.sqrt(eig[-1] / eig[0])) if eig[0] > 0 else float("inf")


def covariance_factor(information: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(A^T W A)^-1``, with infinite variance for unknowns the data do not determine.

    Eigen-directions with eigenvalues below 1e-12 of the largest (in column-scaled units) are
    unexcited; any unknown with a component along one gets an infinite variance instead of
    the zero a pseudo-inverse would report.
    """
    d = np.sqrt(np.clip(np.diag(information), 0.0, None))
    d[d == 0.0] = 1.0
    values, vectors = np.linalg.eigh(information / np.outer(d, d))
    keep = values > 1e-12 * max(values[-1], 0.0)
    inverse = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T / np.outer(d, d)
    undetermined = np.abs(vectors[:, ~keep]).max(axis=1, initial=0.0) > 1e-6
    inverse[np.diag_indices_from(inverse)] = np.where(undetermined, np.inf,
                                                      np.diag(inverse))
    return inverse


def make_estimate(
    stats: SufficientStatistics, x: NDArray[np.float64], method: str, offset_known: bool = False
) -> Estimate:
    """Package a solution ``x = [pi; offset]`` with its covariance.

    With block scores in ``stats`` (:attr:`SufficientStatistics.scores`) the covariance is the
    block-robust sandwich ``H^-1 (sum_j g_j g_j^T) H^-1`` of :mod:`inertial_id.core.covariance`
    with each variance corrected for its residual scores' shrinkage (a design effect per
    unknown on the classical matrix while
    there are fewer than :data:`~inertial_id.core.covariance.MIN_BLOCKS_PER_UNKNOWN` blocks
    per unknown); without,
    the classical ``sigma^2 (A^T W A)^-1`` with ``sigma^2 = residual / (rows - n)``, which
    assumes white noise; for statistics corrected for the rows' noise
    (:meth:`~inertial_id.core.statistics.SufficientStatistics.corrected`, ``H_c = A^T W A -
    E[dA^T W dA]``) it is ``sigma^2 H_c^-1 A^T W A H_c^-1`` (to first order in the noise's
    share), with the data's residual: that noise is part of the equation error.
    ``covariance_type`` says which.

    The scores are evaluated at ``x`` whatever produced it. When the LMI is active (``x`` on
    the boundary of the consistent set), the reported covariance is therefore that of the
    unconstrained linearisation at the constrained estimate: it ignores that the constraint
    truncates the distribution, so it over-states the spread towards the infeasible side and
    is not a confidence set for the truncated estimator; the residual's extra misfit at a
    boundary point enters the scores and inflates it slightly.

    With ``offset_known`` only ``pi`` was estimated: its covariance comes from the ``pi``
    block and the offset's is zero. Unknowns the data do not determine get infinite variance.
    """
    n = N_PI if offset_known else N_UNKNOWNS
    dof = max(stats.rows - n, 1.0)
    sigma2 = stats.residual(x) / dof
    factor = covariance_factor(stats.information[:n, :n])
    undetermined = np.isinf(np.diag(factor))
    bread = np.where(np.isinf(factor), 0.0, factor)
    if stats.removed_noise.any():  # the score's variance is sigma^2 times the data's A^T W A
        bread_classical = bread @ stats.data_information[:n, :n] @ bread
    else:
        bread_classical = bread
    block, kind = sigma2 * bread_classical, "classical"
    scores = stats.scores
    if scores is not None and scores.effective_blocks > 1.0:
        meat = scores.meat(np.asarray(x, dtype=float))[:n, :n]
        padded = np.zeros((N_UNKNOWNS, N_UNKNOWNS))
        padded[:n, :n] = bread
        leverage = scores.leverage(padded)[:n, :n]
        block, kind = robust_covariance(bread, meat, leverage, scores, block)
    block[undetermined, :] = 0.0
    block[:, undetermined] = 0.0
    block[undetermined, undetermined] = np.inf
    covariance = np.zeros((N_UNKNOWNS, N_UNKNOWNS))
    covariance[:n, :n] = block
    return Estimate(
        body=BodyParameters.from_pi(x[:N_PI]),
        offset=x[N_PI:].copy(),
        covariance=covariance,
        samples=stats.samples,
        condition_number=scaled_condition_number(stats.information[:n, :n]),
        method=method,
        covariance_type=kind,
    )


def _require_rows(stats: SufficientStatistics) -> None:
    if stats.rows < N_UNKNOWNS:
        raise SolverError(f"{stats.rows:.0f} equations cannot determine {N_UNKNOWNS} unknowns")


def least_squares(stats: SufficientStatistics, known_offset: ArrayLike | None = None) -> Estimate:
    """Unconstrained weighted least squares (the baseline; may be physically inconsistent).

    With ``known_offset`` the F/T offset is fixed and only ``pi`` is estimated.
    """
    _require_rows(stats)
    h, g = stats.information, stats.moment
    if known_offset is None:
        x = np.linalg.lstsq(h, g, rcond=1e-12)[0]
    else:
        offset = np.asarray(known_offset, dtype=float)
        rhs = g[:N_PI] - h[:N_PI, N_PI:] @ offset
        x = np.concatenate((np.linalg.lstsq(h[:N_PI, :N_PI], rhs, rcond=1e-12)[0], offset))
    return make_estimate(stats, x, "least_squares", known_offset is not None)


def square_root(stats: SufficientStatistics) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``R``, ``z`` with ``||R x - z||^2 = ||A x - b||^2_W - const`` (eigen square root)."""
    values, vectors = np.linalg.eigh(stats.information)
    keep = values > values[-1] * 1e-14 if values[-1] > 0 else np.zeros_like(values, bool)
    root = np.sqrt(np.where(keep, values, 0.0))
    r = root[:, None] * vectors.T
    with np.errstate(divide="ignore"):
        z = np.where(keep, (vectors.T @ stats.moment) / np.where(keep, root, 1.0), 0.0)
    return r, z


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
        the Euclidean prior), :func:`~inertial_id.core.sdp.solve_statistics` solves it from
        the statistics in one compiled call: that linear solve, else Newton's method on the
        previous optimum's active face, else its interior-point method. Otherwise, or when
        it does not end optimal and strictly feasible, cvxpy solves (the reference), after
        the same linear-solve shortcut (``interior_shortcut``). ``last_solve`` says which
        path ran: ``interior``, ``dedicated`` or ``sdp``.
        """
        _require_rows(stats)
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
        estimate = make_estimate(stats, x, self.method, self.known_offset is not None)
        if not estimate.physically_consistent:
            raise SolverError(
                "SDP solution is not physically consistent "
                f"(min eigenvalue of J = {estimate.min_eigenvalue:.3g})"
            )
        return estimate

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
        """The dedicated solver (:mod:`inertial_id.core.sdp`) covers the LMI with the
        Euclidean prior and no further constraint, and it is compiled and can run now
        (:func:`~inertial_id.core.sdp.available`: not while a node prepares it in the
        background)."""
        extra = self.constraints
        return (self.dedicated and self.regularization == "euclidean"
                and extra.bounding_ellipsoid is None and extra.com_ellipsoid is None
                and extra.com_box is None and sdp.available())

    def _solve_dedicated(self, stats: SufficientStatistics) -> NDArray[np.float64] | None:
        """``[pi; offset]`` by :func:`~inertial_id.core.sdp.solve_statistics`, warm-started
        from the previous solution and its dual; None when it does not end optimal and
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


def identifiability(estimate: Estimate, max_relative_std: float = 10.0) -> dict[str, bool]:
    """Which entries of ``pi`` the data determine: std below ``max_relative_std`` percent.

    Entries near zero (products of inertia, an on-axis CoM) would have an unbounded sigma %,
    so each std is compared with the scale of its kind: ``m`` for the mass, ``m L`` for the
    first moments and ``m L^2`` for the inertia, ``L`` the larger of the CoM distance and the
    radius of gyration about the origin (at least 1 cm).
    """
    pi = estimate.pi
    mass = abs(pi[0]) or 1.0
    gyration = np.sqrt(abs(pi[4] + pi[7] + pi[9]) / (2.0 * mass))
    length = float(max(np.linalg.norm(pi[1:4]) / mass, gyration, 0.01))
    scale = np.concatenate(([mass], np.full(3, mass * length), np.full(6, mass * length**2)))
    relative = 100.0 * estimate.std / scale
    return {name: bool(r < max_relative_std) for name, r in zip(PI_NAMES, relative, strict=True)}
