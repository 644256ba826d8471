"""PLS1 regression from sufficient statistics (kernel form of NIPALS)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from inertial_id.core.errors import InertialIdError, SolverError
from inertial_id.core.estimate import N_UNKNOWNS
from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.estimation.payload import PayloadIdentifier
from inertial_id.core.estimation.pls import pls, pls_components_by_rss, pls_path
from inertial_id.core.regressor import measurement_matrix, predicted_wrench
from inertial_id.core.simulation import DEFAULT_OFFSET, default_payload
from inertial_id.core.statistics import SufficientStatistics

PAYLOAD = default_payload()
OFFSET = np.array(DEFAULT_OFFSET)
NOISE = np.repeat([0.1, 0.005], 3)


def near_static_samples(rng, n):
    """The sensor barely tilts and moves slowly: gravity is almost constant in the sensor
    frame, so the mass and first-moment columns are nearly collinear with the offset."""
    rot = Rotation.from_rotvec(rng.normal(size=(n, 3)) * 0.1).as_matrix()
    twist = rng.normal(size=(n, 6)) * np.repeat([0.02, 0.1], 3)
    proper = rng.normal(size=(n, 6)) * np.repeat([0.1, 0.5], 3)
    proper[:, :3] += np.einsum("nji,j->ni", rot, [0.0, 0.0, 9.81])
    return twist, proper


def collinear_data(seed, n=300):
    """Rows, targets and weights of noisy near-static data, and their statistics."""
    rng = np.random.default_rng(seed)
    twist, proper = near_static_samples(rng, n)
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET)
    wrench += rng.normal(size=wrench.shape) * NOISE
    ident = PayloadIdentifier()
    ident.add(twist, proper, wrench)
    a = measurement_matrix(twist, proper)
    weights = np.tile(NOISE**-2, n)
    return a, wrench.reshape(-1), weights, ident.statistics


def nipals(a, b, weights, n_components):
    """Textbook NIPALS PLS1 on the explicit, column-scaled, uncentred weighted data."""
    x = np.sqrt(weights)[:, None] * a
    y = np.sqrt(weights) * b
    norms = np.linalg.norm(x, axis=0)
    x = x / norms
    w_list, p_list, q_list = [], [], []
    for _ in range(n_components):
        w = x.T @ y
        w /= np.linalg.norm(w)
        t = x @ w
        tt = t @ t
        p = x.T @ t / tt
        q = y @ t / tt
        x = x - np.outer(t, p)
        y = y - q * t
        w_list.append(w)
        p_list.append(p)
        q_list.append(q)
    w_mat, p_mat = np.array(w_list).T, np.array(p_list).T
    beta = w_mat @ np.linalg.solve(p_mat.T @ w_mat, np.array(q_list))
    return beta / norms


def scaled_norm(stats, x):
    return np.linalg.norm(np.sqrt(np.diag(stats.information)) * x)


def test_all_components_equal_least_squares():
    for seed in range(3):
        stats = collinear_data(seed)[3]
        estimate = pls(stats)
        ls = least_squares(stats)
        assert estimate.method == "pls"
        np.testing.assert_allclose(estimate.pi, ls.pi, rtol=1e-8, atol=1e-8 * np.abs(ls.pi).max())
        np.testing.assert_allclose(estimate.offset, ls.offset, rtol=1e-8, atol=1e-8)
        assert estimate.samples == stats.samples


@pytest.mark.parametrize("n_components", [1, 2, 3, 5, 8])
def test_kernel_recursion_equals_nipals_on_the_data(n_components):
    a, b, weights, stats = collinear_data(4)
    expected = nipals(a, b, weights, n_components)
    x = np.concatenate((pls(stats, n_components).pi, pls(stats, n_components).offset))
    np.testing.assert_allclose(x, expected, rtol=1e-7, atol=1e-9 * np.abs(expected).max())


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
def test_fewer_components_shrink_the_scaled_solution(seed):
    stats = collinear_data(seed, n=100)[3]
    path = pls_path(stats)
    norms = [scaled_norm(stats, x) for x in path]
    # The norm in the unit-column coordinates grows with every component (de Jong 1995)...
    assert np.all(np.diff(norms) >= -1e-9 * norms[-1])
    # ...so every truncated fit is shrunk relative to least squares.
    ls = least_squares(stats)
    full = scaled_norm(stats, np.concatenate((ls.pi, ls.offset)))
    assert norms[0] < full and norms[-1] == pytest.approx(full, rel=1e-8)
    # And the residual never grows with more components.
    rss = [stats.residual(x) for x in path]
    assert np.all(np.diff(rss) <= 1e-9 * rss[0])


def test_components_chosen_where_the_residual_stops_improving():
    stats = collinear_data(0)[3]
    path = pls_path(stats)
    best = stats.residual(path[-1])
    for tolerance in (1e-1, 1e-2, 1e-3):
        k = pls_components_by_rss(stats, tolerance)
        assert stats.residual(path[k - 1]) <= (1 + tolerance) * best * (1 + 1e-9)
        if k > 1:
            assert stats.residual(path[k - 2]) > (1 + tolerance) * best
    assert pls_components_by_rss(stats, 1e-1) <= pls_components_by_rss(stats, 1e-3)
    assert pls_components_by_rss(stats, 0.0) == len(path)
    with pytest.raises(InertialIdError):
        pls_components_by_rss(stats, -1.0)


def test_exact_data_need_every_direction():
    rng = np.random.default_rng(7)
    twist, proper = near_static_samples(rng, 50)
    ident = PayloadIdentifier()
    ident.add(twist, proper, predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET))
    estimate = pls(ident.statistics)
    assert np.linalg.norm(estimate.pi - PAYLOAD.pi) < 1e-6 * np.linalg.norm(PAYLOAD.pi)


def test_empty_statistics_are_a_solver_error():
    with pytest.raises(SolverError):
        pls(SufficientStatistics(N_UNKNOWNS))
    with pytest.raises(SolverError):
        pls_components_by_rss(SufficientStatistics(N_UNKNOWNS), 1e-3)


@pytest.mark.parametrize("n_components", [0, 17])
def test_bad_number_of_components_is_rejected(n_components):
    with pytest.raises(InertialIdError):
        pls(collinear_data(0)[3], n_components)


def test_unexcited_columns_are_left_at_zero():
    # Zero columns (no data on them) get no weight and a zero coefficient, not a division error.
    rng = np.random.default_rng(1)
    a = rng.normal(size=(40, N_UNKNOWNS))
    a[:, 5] = 0.0
    b = a @ rng.normal(size=N_UNKNOWNS)
    stats = SufficientStatistics(N_UNKNOWNS)
    stats.add(a, b, np.ones(40), 40)
    x = pls_path(stats)[-1]
    assert x[5] == 0.0
    np.testing.assert_allclose(a @ x, b, atol=1e-9)
