"""The windows the synchroniser cuts from its buffers (``row_windows``): the same as numpy's
sliding windows at the given starts, consecutive or not, and no window past the rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from inertial_id.core.gathering.synchronizer.filters import row_windows


@given(rows=st.integers(1, 60), trailing=st.sampled_from([(), (6,), (3, 2)]),
       width=st.integers(1, 12), first=st.integers(0, 50), count=st.integers(1, 20),
       consecutive=st.booleans(), seed=st.integers(0, 2**16))
def test_windows_are_numpys_sliding_windows(rows: int, trailing: tuple[int, ...], width: int,
                                            first: int, count: int, consecutive: bool,
                                            seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(rows + width, *trailing))[::-1]  # not contiguous either way
    last_start = data.shape[0] - width
    if first > last_start:
        first = last_start
    count = min(count, last_start - first + 1)
    starts = (np.arange(first, first + count) if consecutive
              else np.sort(rng.choice(last_start + 1, size=count, replace=False)))
    expected = sliding_window_view(data, width, axis=0)[starts]
    got = row_windows(data, starts, width)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if consecutive:  # a view of the buffer, which nothing may write through
        assert not got.flags.writeable


def test_consecutive_windows_past_the_rows_are_refused() -> None:
    with pytest.raises(IndexError):
        row_windows(np.zeros((10, 6)), np.arange(4, 8), 5)
