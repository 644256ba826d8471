"""The dedicated payload SDP solver against cvxpy + Clarabel at a tight tolerance."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import physical_bodies

from inertial_id.core.estimation.estimators import ConsistentEstimator
from inertial_id.core.estimation.sdp import BASIS, compiled, solve_lmi_qp
from inertial_id.core.parameters import BodyParameters, pseudo_inertia

MARGINS = (1e-8, 1e-4)


def reference(h: np.ndarray, g: np.ndarray, margin: np.ndarray) -> np.ndarray | None:
    """cvxpy + Clarabel at 1e-11 on the same problem (scaled to a unit Hessian diagonal, as
    the solver sees it): ``pi``, or None when Clarabel gives up."""
    d = 1.0 / np.sqrt(np.diag(h))
    factor = np.linalg.cholesky(d[:, None] * h * d[None, :])
    y = cp.Variable(10)
    jmat = sum(y[i] * d[i] * BASIS[i] for i in range(10))
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(factor.T @ y) - (d * g) @ y),
                         [jmat - margin >> 0])
    try:
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    except cp.error.SolverError:
        return None
    return None if y.value is None else d * y.value


def objective(h: np.ndarray, g: np.ndarray, pi: np.ndarray) -> float:
    return float(0.5 * pi @ h @ pi - g @ pi)


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(H, g, M)``: regressor-like data of a body (from 9 g up), with noise that often
    pushes the unconstrained fit out of the consistent set; sometimes rank-deficient data
    made definite by a small prior, as the estimator's Euclidean prior does."""
    mass, com, inertia = draw(physical_bodies())
    mass *= draw(st.sampled_from([0.01, 1.0]))
    body = BodyParameters.from_mass_com_inertia(mass, com, inertia * mass / max(mass, 1e-9))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    rows = draw(st.sampled_from([6, 40, 300]))
    a = rng.normal(size=(rows, 10)) * rng.uniform(0.01, 10.0, size=10)
    noise = draw(st.sampled_from([0.0, 1e-3, 0.1, 3.0]))
    b = a @ body.pi + noise * rng.normal(size=rows) * np.abs(a @ body.pi).mean()
    h = a.T @ a + 1e-6 * np.diag(np.diag(a.T @ a).mean() * np.ones(10))  # the prior's floor
    return h, a.T @ b, draw(st.sampled_from(MARGINS)) * np.eye(4)


@pytest.mark.skipif(not compiled(), reason="numba not installed: the estimator uses cvxpy")
@settings(max_examples=60, deadline=None)
@given(problems())
def test_the_dedicated_solver_matches_clarabel_and_stays_strictly_feasible(problem) -> None:
    h, g, margin = problem
    result = solve_lmi_qp(h, g, margin)
    assert result.ok, result
    slack = np.linalg.eigvalsh(pseudo_inertia(result.pi) - margin)[0]
    assert slack > 0.0  # J(pi) - M strictly positive definite
    pi_ref = reference(h, g, margin)
    assume(pi_ref is not None)
    value, value_ref = objective(h, g, result.pi), objective(h, g, pi_ref)
    assert value <= value_ref + 1e-9 * max(1.0, abs(value_ref)), (value, value_ref, result)
    if result.status == "interior":
        exact = np.linalg.solve(h, g)
        np.testing.assert_allclose(result.pi, exact, rtol=1e-6, atol=1e-9 * np.abs(exact).max())


@pytest.mark.skipif(not compiled(), reason="numba not installed")
def test_a_warm_start_lands_on_the_same_optimum_in_fewer_iterations() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=(300, 10)) * rng.uniform(0.01, 10.0, size=10)
    inconsistent = BodyParameters.from_mass_com_inertia(
        1.0, [0.0, 0.0, 0.05], np.diag([1e-3, 1e-3, 1e-3])).pi * np.r_[np.ones(4), -np.ones(6)]
    h, g = a.T @ a, a.T @ (a @ inconsistent)
    cold = solve_lmi_qp(h, g, 1e-8 * np.eye(4))
    assert cold.status == "optimal"  # the LMI is active
    g2 = g * (1.0 + 1e-3 * rng.normal(size=10))  # a few more samples
    cold2 = solve_lmi_qp(h, g2, 1e-8 * np.eye(4))
    warm2 = solve_lmi_qp(h, g2, 1e-8 * np.eye(4), start=cold.pi)
    assert warm2.ok and warm2.iterations < cold2.iterations
    value, value_cold = objective(h, g2, warm2.pi), objective(h, g2, cold2.pi)
    assert abs(value - value_cold) <= 1e-9 * abs(value_cold)


@pytest.mark.skipif(not compiled(), reason="numba not installed")
def test_the_estimator_uses_it_for_the_lmi_and_cvxpy_for_other_constraints() -> None:
    estimator = ConsistentEstimator(dedicated=True)
    assert estimator._dedicated_applies()  # noqa: SLF001
    assert not ConsistentEstimator(dedicated=False)._dedicated_applies()  # noqa: SLF001
    from inertial_id.core.estimation.estimators import Constraints
    from inertial_id.core.shape import Ellipsoid

    bounded = ConsistentEstimator(dedicated=True, constraints=Constraints(
        bounding_ellipsoid=Ellipsoid.sphere([0.0, 0.0, 0.05], 0.1)))
    assert not bounded._dedicated_applies()  # noqa: SLF001


@pytest.mark.skipif(not compiled(), reason="numba not installed")
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([1.0, 1e-4, 1e-8]))
def test_the_small_factorisations_match_lapack(seed, grading):
    """Jacobi eigenvalues and one-sided Jacobi singular values against LAPACK, on matrices
    whose scales span up to 8 orders (as ``S`` and ``Z`` near the optimum)."""
    from inertial_id.core.estimation.sdp import linalg

    rng = np.random.default_rng(seed)
    scales = grading ** (np.arange(4) / 3.0)
    b = rng.normal(size=(4, 4)) * scales[:, None]
    u, sigma = linalg.left_singular(b)
    reference = np.linalg.svd(b, compute_uv=False)
    np.testing.assert_allclose(np.sort(sigma)[::-1], reference, rtol=1e-9,
                               atol=1e-13 * reference[0])
    np.testing.assert_allclose(u.T @ u, np.eye(4), atol=1e-12)
    # b = U diag(sigma) V^T: U^T b has orthogonal rows of norms sigma
    rows = u.T @ b
    np.testing.assert_allclose(rows @ rows.T, np.diag(sigma**2), atol=1e-12 * reference[0]**2)
    symmetric = b @ b.T
    values, vectors = linalg.jacobi(symmetric)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(symmetric), rtol=1e-9,
                               atol=1e-14 * reference[0] ** 2)
    np.testing.assert_allclose(vectors @ np.diag(values) @ vectors.T, symmetric,
                               atol=1e-13 * reference[0] ** 2)


def _more_data(h: np.ndarray, g: np.ndarray, pi: np.ndarray, change: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``H`` and ``g`` after a few more rows of the same scale, ``change`` of the data so far,
    fitting ``pi`` with noise (what the next live solve sees)."""
    rows = 20
    a = rng.normal(size=(rows, 10)) * np.sqrt(np.diag(h) / rows)
    b = a @ pi + rng.normal(size=rows) * np.abs(a @ pi).mean()
    return h + change * a.T @ a, g + change * a.T @ b


@pytest.mark.skipif(not compiled(), reason="numba not installed")
@settings(max_examples=40, deadline=None)
@given(problems(), st.sampled_from([1e-4, 1e-2, 0.3]), st.integers(0, 2**31))
def test_a_warm_start_with_its_dual_reaches_the_reference(problem, change, seed):
    """From the previous optimum and its dual, on a problem with more data: the reference's
    objective and strict feasibility, whichever method ended the solve."""
    h, g, margin = problem
    first = solve_lmi_qp(h, g, margin)
    assume(first.ok)
    h2, g2 = _more_data(h, g, first.pi, change, np.random.default_rng(seed))
    result = solve_lmi_qp(h2, g2, margin, start=first.pi, start_dual=first.dual)
    assert result.ok, result
    assert np.linalg.eigvalsh(pseudo_inertia(result.pi) - margin)[0] > 0.0
    pi_ref = reference(h2, g2, margin)
    assume(pi_ref is not None)
    value, value_ref = objective(h2, g2, result.pi), objective(h2, g2, pi_ref)
    assert value <= value_ref + 1e-9 * max(1.0, abs(value_ref)), (value, value_ref, result)


@pytest.mark.skipif(not compiled(), reason="numba not installed")
def test_newton_on_the_face_ends_most_solves_one_batch_apart() -> None:
    """The live case: 40 LMI-active problems, each re-solved after 0.1 % more data from the
    previous optimum and its dual. Newton's method on the active face ends at least 90 %
    of them (the interior-point method the rest), in at most 4 steps on the median."""
    rng = np.random.default_rng(11)
    methods, steps = [], []
    while len(methods) < 40:
        a = rng.normal(size=(300, 10)) * rng.uniform(0.01, 10.0, size=10)
        body = BodyParameters.from_mass_com_inertia(
            rng.uniform(0.01, 2.0), rng.uniform(-0.05, 0.05, 3),
            np.diag(rng.uniform(1e-5, 1e-3, 3)))
        b = a @ body.pi + rng.normal(size=300) * 0.3 * np.abs(a @ body.pi).mean()
        h, g, margin = a.T @ a, a.T @ b, 1e-8 * np.eye(4)
        first = solve_lmi_qp(h, g, margin)
        if first.status != "optimal":
            continue  # the LMI is inactive: nothing to warm start
        h2, g2 = _more_data(h, g, first.pi, 1e-3, rng)
        result = solve_lmi_qp(h2, g2, margin, start=first.pi, start_dual=first.dual)
        assert result.ok
        methods.append(result.method)
        if result.method == "newton":
            steps.append(result.iterations)
    assert methods.count("newton") >= 36, methods
    assert np.median(steps) <= 4, steps


PREPARATION_SCRIPT = """
import time
import numpy as np
from inertial_id.core.estimation import sdp
from inertial_id.core.estimation.estimators import ConsistentEstimator
from inertial_id.core.statistics import SufficientStatistics

lines = []
sdp.prepare_in_background(lines.append)
rng = np.random.default_rng(0)
a = rng.normal(size=(200, 16))
x = np.r_[1.0, 0.0, 0.0, 0.05, -1e-3, 0.0, 0.0, -1e-3, 0.0, -1e-3, np.zeros(6)]  # J < 0
stats = SufficientStatistics(16)
stats.add(a, a @ x, np.ones(200), 200)
estimator = ConsistentEstimator()
start = time.monotonic()
estimator.solve(stats)
during = (time.monotonic() - start, estimator.last_solve, sdp.available())
sdp.runtime._PREPARATION[0].join(300)
estimator.solve(stats)
print(repr((during, estimator.last_solve, sdp.available(), lines)))
"""


@pytest.mark.skipif(not compiled(), reason="numba not installed")
def test_a_node_start_prepares_the_solver_in_the_background_without_stalling() -> None:
    """What the solver node does at start: cvxpy solves at once while another process
    compiles (here: finds in the cache) and a thread loads the dedicated solver; then it
    solves, and one line says so."""
    import ast
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PREPARATION_SCRIPT], capture_output=True,
                          text=True, timeout=600, check=True)
    (seconds, first, ready_then), after, ready, lines = ast.literal_eval(
        done.stdout.strip().splitlines()[-1])
    assert (first, ready_then) == ("sdp", False)
    assert seconds < 5.0  # no wait for the preparation
    assert (after, ready) == ("dedicated", True)
    assert len(lines) == 1 and lines[0].startswith("dedicated SDP solver ready after"), lines
