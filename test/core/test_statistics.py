"""Sufficient statistics: a batch given by its normal equations accumulates exactly as its
rows do (totals, counts, the rows' noise, the block scores, the sliding window)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import SampleError
from inertial_id.core.statistics import SlidingWindow, SufficientStatistics

N = 5


def _batch(rng, samples, rows_per_sample=3):
    rows = rows_per_sample * samples
    a = rng.normal(size=(rows, N))
    b = rng.normal(size=rows)
    w = rng.uniform(0.5, 2.0, rows)
    noise = rng.normal(size=(N, N)) * 0.01
    return a, b, w, noise @ noise.T


def _products(a, b, w):
    aw = a.T * w
    return aw @ a, aw @ b, float(b @ (w * b))


def assert_same_statistics(got: SufficientStatistics, expected: SufficientStatistics):
    np.testing.assert_array_equal(got.information, expected.information)
    np.testing.assert_array_equal(got.moment, expected.moment)
    np.testing.assert_array_equal(got.noise_information, expected.noise_information)
    assert (got.energy, got.rows, got.samples) == (expected.energy, expected.rows,
                                                   expected.samples)
    assert got._block_count == expected._block_count
    s, e = got.scores, expected.scores
    assert (s is None) == (e is None)
    if s is not None:
        assert (s.weight, s.weight_squared) == (e.weight, e.weight_squared)
        x = np.linspace(-1.0, 1.0, N)
        np.testing.assert_array_equal(s.meat(x), e.meat(x))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([0, 1, 7, 20]),
       st.lists(st.integers(0, 15), min_size=1, max_size=8), st.booleans(),
       st.sampled_from([1.0, 0.97]))
def test_normal_equations_accumulate_as_the_rows(seed, score_block, sizes, noisy, factor):
    """``add`` and ``add_normal_equations`` of the same products give the same state, blocks
    included (a batch enters a block whole), under forgetting too."""
    rng = np.random.default_rng(seed)
    by_rows = SufficientStatistics(N, score_block)
    by_sums = SufficientStatistics(N, score_block)
    for samples in sizes:
        a, b, w, noise = _batch(rng, samples)
        noise = noise if noisy else None
        by_rows.scale(factor)
        by_sums.scale(factor)
        by_rows.add(a, b, w, samples, noise)
        by_sums.add_normal_equations(*_products(a, b, w), b.size, samples, noise)
        assert_same_statistics(by_sums, by_rows)


def test_a_batch_enters_a_block_whole():
    rng = np.random.default_rng(1)
    stats = SufficientStatistics(N, score_block=10)
    a, b, w, _ = _batch(rng, 7)
    stats.add_normal_equations(*_products(a, b, w), b.size, 7)
    assert stats._block_count == 7 and stats.scores.weight == 1  # the open block
    stats.add_normal_equations(*_products(a, b, w), b.size, 7)
    assert stats._block_count == 0 and stats._block.samples == 0  # 14 samples: one block
    assert stats._scores.weight == 1
    expected = SufficientStatistics(N)
    expected.add(np.vstack((a, a)), np.concatenate((b, b)), np.concatenate((w, w)), 14)
    np.testing.assert_allclose(stats.scores.meat(np.zeros(N)),
                               np.outer(expected.moment, expected.moment), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31), st.lists(st.integers(0, 12), min_size=1, max_size=12))
def test_sliding_window_of_normal_equations(seed, sizes):
    rng = np.random.default_rng(seed)
    by_rows, by_sums = SlidingWindow(N, 10, 3), SlidingWindow(N, 10, 3)
    for samples in sizes:
        a, b, w, noise = _batch(rng, samples)
        by_rows.add(a, b, w, samples, noise)
        by_sums.add_normal_equations(*_products(a, b, w), b.size, samples, noise)
        assert len(by_sums._blocks) == len(by_rows._blocks)
        assert_same_statistics(by_sums.statistics, by_rows.statistics)
        np.testing.assert_array_equal(by_sums.scores.informations, by_rows.scores.informations)


@pytest.mark.parametrize("bad", ["information", "moment", "energy", "shape"])
def test_bad_normal_equations_are_a_sample_error_and_change_nothing(bad):
    rng = np.random.default_rng(2)
    stats = SufficientStatistics(N, score_block=4)
    a, b, w, _ = _batch(rng, 3)
    stats.add(a, b, w, 3)
    before = stats.copy()
    h, g, e = _products(a, b, w)
    if bad == "information":
        h[1, 2] = np.nan
    elif bad == "moment":
        g[0] = np.inf
    elif bad == "energy":
        e = np.nan
    else:
        h = h[:4, :4]
    with pytest.raises(SampleError):
        stats.add_normal_equations(h, g, e, b.size, 3)
    assert_same_statistics(stats, before)
    with pytest.raises(SampleError):
        SlidingWindow(N, 10, 3).add_normal_equations(h, g, e, b.size, 3)


def test_rows_with_nan_are_still_a_sample_error():
    rng = np.random.default_rng(3)
    stats = SufficientStatistics(N)
    a, b, w, _ = _batch(rng, 3)
    a[0, 0] = np.nan
    with pytest.raises(SampleError):
        stats.add(a, b, w, 3)
    assert stats.rows == 0
