"""The pipeline's history: one row per 0.1 s of sample stamps, however the estimator's steps
cut them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.estimation.online_types import StepResult
from inertial_id.core.pipeline import HISTORY_PERIOD, History


def _step(times: np.ndarray, residual: np.ndarray, t2: np.ndarray,
          contact: np.ndarray) -> StepResult:
    return StepResult(times, residual, t2, contact, 9.0, [])


@given(st.integers(0, 2**31), st.integers(1, 600), st.lists(st.integers(1, 599), max_size=8))
@settings(max_examples=60, deadline=None)
def test_rows_do_not_depend_on_how_steps_cut_the_samples(seed: int, n: int,
                                                         cuts: list[int]) -> None:
    rng = np.random.default_rng(seed)
    times = 1000.0 + np.cumsum(rng.uniform(0.2e-3, 3e-3, n))
    residual = rng.normal(size=(n, 6))
    t2 = rng.exponential(3.0, n)
    contact = rng.random(n) < 0.05
    whole, parts = History(), History()
    whole.record_step(_step(times, residual, t2, contact))
    edges = [0, *sorted({c for c in cuts if c < n}), n]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        parts.record_step(_step(times[a:b], residual[a:b], t2[a:b], contact[a:b]))
    assert parts.batch_time == whole.batch_time
    assert parts.batch_contact == whole.batch_contact
    np.testing.assert_allclose(parts.batch_t2_max, whole.batch_t2_max, rtol=0, atol=0)
    np.testing.assert_allclose(parts.batch_residual_rms, whole.batch_residual_rms, rtol=1e-12)
    # one row per period the stamps touch, each the RMS and maximum of its own samples
    bins = np.floor(times / HISTORY_PERIOD)
    assert len(whole.batch_time) == np.unique(bins).size
    last = bins == bins[-1]
    np.testing.assert_allclose(whole.batch_residual_rms[-1],
                               np.sqrt(np.mean(residual[last] ** 2, axis=0)), rtol=1e-12)
    assert whole.batch_t2_max[-1] == t2[last].max()
