"""Rows a fit should leave out (a push) found from its residual alone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.joint_torque.trimming import TRIM_MARGIN, quiet_rows

PERIOD = 0.008  # s: 125 Hz


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 7), st.floats(0.05, 0.2), st.floats(10.0, 50.0))
def test_a_push_and_its_margin_are_left_out_and_the_noise_kept(
        seed: int, joints: int, share: float, size: float) -> None:
    """Noise of a different spread on each joint, a block of ``share`` of the rows ``size``
    spreads of the widest joint off on one joint: the block and TRIM_MARGIN either side go;
    of the other rows, about one in a thousand is a false alarm (at most two here, before
    its margin)."""
    rng = np.random.default_rng(seed)
    n = 20_000
    spread = rng.uniform(0.01, 2.0, joints)
    residual = rng.normal(0.0, spread, (n, joints))
    start, length = int(rng.integers(0, n - int(share * n))), int(share * n)
    push = np.zeros(n, dtype=bool)
    push[start:start + length] = True
    residual[push, int(rng.integers(joints))] += size * spread.max()
    keep, alone = quiet_rows(residual, PERIOD), quiet_rows(residual, PERIOD, margin=0.0)
    assert keep is not None and alone is not None
    reach = int(round(TRIM_MARGIN / PERIOD))
    near = np.zeros(n, dtype=bool)
    near[max(0, start - reach):start + length + reach] = True
    assert not np.any(keep[near]) and not np.any(alone[push])
    assert np.count_nonzero(~alone[~push]) <= 0.002 * np.count_nonzero(~push)


def test_when_loud_rows_are_everywhere_none_is_singled_out() -> None:
    """Short bursts every 0.32 s leave, with their margins, no row: the model is off, not a
    push somewhere, and nothing is left out (None)."""
    rng = np.random.default_rng(1)
    residual = rng.normal(0.0, 0.1, (1000, 3))
    residual[::40] += 20.0
    assert quiet_rows(residual, PERIOD) is None
    assert quiet_rows(residual[:60], PERIOD, margin=0.0) is not None
