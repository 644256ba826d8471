"""The consistent payload estimate on the manifold (:class:`ManifoldEstimator`):
Levenberg-Marquardt over ``(m, c, Q, L)`` from a start projected onto the manifold, every
iterate fully physically consistent. ``x = [pi; offset]`` in the package order, about the
sensor origin (SI units); the method is described in :mod:`inertial_id.core.estimation.manifold`.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SolverError
from inertial_id.core.estimate import N_PI, N_UNKNOWNS, Estimate, make_estimate
from inertial_id.core.estimation.manifold.chart import (
    ManifoldPoint,
    manifold_from_pi,
    pi_from_manifold,
    pseudo_inertia_trace,
    retract,
)
from inertial_id.core.estimation.manifold.steps import (
    LocalModel,
    ReducedProblem,
    aligned,
    lower_bounds,
    step_is_small,
    taken_step,
)
from inertial_id.core.statistics import SufficientStatistics

# Iterates keep m and L above this fraction of tr J, so J stays positive definite in floats.
_RELATIVE_FLOOR = 1e-12


def _coerce_warm_start(warm_start: Estimate | ArrayLike) -> NDArray[np.float64]:
    """``pi`` of an :class:`Estimate`, a ``pi`` (10) or an ``x = [pi; offset]`` (16)."""
    if isinstance(warm_start, Estimate):
        return np.asarray(warm_start.pi, dtype=float)
    arr = np.asarray(warm_start, dtype=float).reshape(-1)
    if arr.size not in (N_PI, N_UNKNOWNS):
        raise InertialIdError(f"warm start must have 10 or 16 entries, got {arr.size}")
    return arr[:N_PI]


def _project(pi: NDArray[np.float64], problem: ReducedProblem) -> ManifoldPoint:
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
    :class:`~inertial_id.core.estimation.estimators.ConsistentEstimator`), the problem that
    estimator solves without its ``epsilon`` margin.
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
        problem = ReducedProblem(stats, self.prior, self.prior_weight)
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
        self, problem: ReducedProblem, point: ManifoldPoint, deadline: float | None
    ) -> ManifoldPoint:
        """Levenberg-Marquardt with Marquardt scaling and Nielsen's damping update."""
        residual = problem.residual(pi_from_manifold(*point))
        point, residual, cost = aligned(problem, point, residual)
        model = LocalModel(problem, point, residual)
        damping, growth = 1e-3, 2.0
        self.iterations, self.converged = 0, False
        while self.iterations < self.max_iterations:
            if deadline is not None and time.perf_counter() >= deadline:
                break
            self.iterations += 1
            floor = _RELATIVE_FLOOR * pseudo_inertia_trace(point)
            step = model.step(damping, lower_bounds(point, floor))
            trial = None
            if step is not None:
                trial = retract(point, step, floor)
                # pi is linear in m and L: judge the model on the step really taken (projected).
                taken = taken_step(point, trial, step)
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
            point, residual, cost = aligned(problem, trial, trial_residual)
            relative = decrease <= self.tolerance * (cost + decrease)
            if relative or step_is_small(taken, point, self.tolerance):
                self.converged = True
                break
            model = LocalModel(problem, point, residual)
        self.cost = cost + problem.floor_cost
        return point
