"""The joint fit of a rigid body and a lag from Gram matrices that add up over blocks, against
the rows it stands for."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.lag_fit import LagFit, lag_columns
from inertial_id.core.regressor import LINEAR_BASIS


def _rows(features: np.ndarray, sign: float) -> np.ndarray:
    """The rows ``[s Y, I6]`` (N, 6, 16) of the features (N, 12)."""
    y = np.einsum("nf,fra->nra", features, LINEAR_BASIS.reshape(12, 6, 10))
    return np.concatenate((sign * y, np.broadcast_to(np.eye(6), (features.shape[0], 6, 6))),
                          axis=2)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([-1.0, 1.0]), st.floats(-0.02, 0.02),
       st.integers(2, 4))
def test_the_fit_recovers_the_body_and_the_lag_and_its_residuals_are_the_rows(
        seed: int, sign: float, tau: float, blocks: int) -> None:
    """``y = A x - tau dw/dt`` exactly (no noise): the fit over the summed Gram matrices
    gives ``x`` and ``tau``; with noise added, each block's weighted residual and each axis's
    residual from the Gram matrices equal those of the rows."""
    rng = np.random.default_rng(seed)
    n = 60 * blocks
    times = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, n))
    features = rng.normal(size=(n, 12))
    wrench = rng.normal(size=(n, 6)).cumsum(axis=0)
    x = rng.normal(size=16)
    weights = rng.uniform(0.5, 2.0, 6)
    fit = LagFit(sign, weights)
    middle = 0.5 * (features[1:] + features[:-1])
    rate = np.diff(wrench, axis=0) / np.diff(times)[:, None]
    exact = np.einsum("nra,a->nr", _rows(middle, sign), x) - tau * rate
    # the midpoint of y is what the columns hold: give y whose midpoints are ``exact``
    columns = lag_columns(times, features, np.zeros((n, 6)), wrench)
    columns[:, 13:19] = exact
    grams = np.array([c.T @ c for c in np.array_split(columns, blocks)])
    solution = fit.solve(grams.sum(axis=0))
    assert solution is not None
    np.testing.assert_allclose(-solution.slope, tau, atol=1e-9)
    np.testing.assert_allclose(solution.x, x, atol=1e-7 * (1 + np.abs(x).max()))
    columns[:, 13:19] += rng.normal(size=exact.shape)
    grams = np.array([c.T @ c for c in np.array_split(columns, blocks)])
    solution = fit.solve(grams.sum(axis=0))
    residual = (columns[:, 13:19] - np.einsum("nra,a->nr", _rows(middle, sign), solution.x)
                - solution.slope * columns[:, 19:25])
    per_block = [np.sum(weights * r**2) for r in np.array_split(residual, blocks)]
    np.testing.assert_allclose(fit.residuals(grams, solution), per_block, rtol=1e-8)
    np.testing.assert_allclose(fit.axis_residuals(grams.sum(axis=0), solution),
                               np.sum(residual**2, axis=0), rtol=1e-8)
    np.testing.assert_allclose(solution.residual, sum(per_block), rtol=1e-6)


def test_non_finite_data_give_no_fit_instead_of_an_error() -> None:
    """A fit is evidence: normal equations that are not finite (a NaN or an inf that reached
    a Gram matrix) give None, where the pseudo-inverse's eigensolver raised and stopped the
    gatherer's batch callback."""
    rng = np.random.default_rng(0)
    n = 120
    times = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, n))
    columns = lag_columns(times, rng.normal(size=(n, 12)), np.zeros((n, 6)),
                          rng.normal(size=(n, 6)).cumsum(axis=0))
    gram = columns.T @ columns
    fit = LagFit(1.0, np.ones(6))
    assert fit.solve(gram) is not None
    for bad in (np.nan, np.inf):
        broken = gram.copy()
        broken[2, 3] = broken[3, 2] = bad
        assert fit.solve(broken) is None
    assert LagFit(1.0, np.array([1.0, np.nan, 1.0, 1.0, 1.0, 1.0])).solve(gram) is None
