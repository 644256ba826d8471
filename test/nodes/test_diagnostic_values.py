"""What a status puts on ``/diagnostics``: numbers a plotting tool reads, never inf or nan."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from inertial_id.nodes.common.diagnostics import diagnostic_values


@given(st.dictionaries(st.text(min_size=1, max_size=8),
                       st.one_of(st.booleans(), st.integers(-10**9, 10**9), st.floats())))
def test_every_value_is_a_finite_number_and_only_non_finite_ones_are_left_out(values) -> None:
    pairs = {kv.key: kv.value for kv in diagnostic_values(values)}
    assert all(math.isfinite(float(v)) for v in pairs.values())
    left_out = {k for k, v in values.items()
                if isinstance(v, float) and not math.isfinite(v)}
    assert set(pairs) == set(values) - left_out


def test_flags_counts_and_figures_keep_their_form() -> None:
    pairs = {kv.key: kv.value for kv in diagnostic_values(
        {"ready": True, "count": np.int64(12), "mass_kg": 1.23456789,
         "mass_std_kg": np.inf, "t2": np.float64(np.nan)})}
    assert pairs == {"ready": "1", "count": "12", "mass_kg": "1.23457"}
