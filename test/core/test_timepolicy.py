"""The stamp policy: out-of-range stamps, glitches, genuine jumps; block path = one by one."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError
from inertial_id.core.timepolicy import (
    JUMP,
    MAX_STAMP,
    OUT_OF_RANGE,
    RESETS,
    StampPolicy,
    in_range,
)


def one_by_one(policy: StampPolicy, stamps: np.ndarray) -> tuple[np.ndarray, int]:
    keep, last = np.zeros(stamps.size, dtype=bool), -1
    for k, t in enumerate(stamps):
        keep[k], reset = policy.accept(float(t))
        last = k if reset else last
    return keep, last


@pytest.mark.parametrize("t", [np.nan, np.inf, -np.inf, -1e-9, MAX_STAMP, 2.0**32, 1e300])
def test_out_of_range_stamps_are_rejected_and_counted(t: float) -> None:
    policy = StampPolicy()
    assert policy.accept(100.0) == (True, False)
    assert policy.accept(t) == (False, False)
    assert policy.counters[OUT_OF_RANGE] == 1
    assert policy.reference == 100.0
    assert not in_range(np.array([t]))[0]


def test_in_step_stamps_are_accepted_late_ones_too() -> None:
    policy = StampPolicy(max_jump=1.0, max_pause=600.0)
    for t in (100.0, 100.5, 99.6, 700.4, 699.5):
        assert policy.accept(t) == (True, False), t
    assert policy.reference == 700.4
    assert not policy.counters


@pytest.mark.parametrize("glitch", [0.0, 50.0, 2.0e9])
def test_a_short_glitch_costs_its_samples_and_never_moves_the_reference(glitch: float) -> None:
    policy = StampPolicy(jump_confirm=1.0)
    stream = 100.0 + 0.001 * np.arange(1000)
    keep, last = policy.filter(stream)
    assert keep.all() and last == -1
    glitched = glitch + 0.001 * np.arange(900)  # 0.9 s on another time base
    keep, last = policy.filter(glitched)
    assert not keep.any() and last == -1
    assert policy.reference == stream[-1]
    keep, _ = policy.filter(stream[-1] + 0.001 * np.arange(1, 500))
    assert keep.all()
    assert policy.counters == {JUMP: 900}


def test_a_genuine_jump_is_followed_once_after_jump_confirm() -> None:
    policy = StampPolicy(jump_confirm=1.0)
    policy.filter(1000.0 + 0.001 * np.arange(3000))
    again = 1000.0 + 0.001 * np.arange(3000)  # the bag played again
    keep, last = policy.filter(again)
    assert last == 1000 and not keep[:1000].any() and keep[1000:].all()
    assert policy.counters == {JUMP: 1000, RESETS: 1}
    assert policy.reference == again[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.floats(-10.0, 3000.0), st.sampled_from([np.nan, np.inf, 0.0, 2.0**31, 1e12])),
    min_size=0, max_size=60),
    st.floats(0.1, 5.0), st.floats(1.0, 1000.0), st.floats(0.1, 5.0))
def test_filter_is_accept_one_by_one(stamps, max_jump, max_pause, confirm) -> None:
    """Whatever the stream, the block path decides exactly what the per-stamp path does."""
    array = np.array(stamps, dtype=float)
    a = StampPolicy(max_jump, max_pause, confirm)
    b = StampPolicy(max_jump, max_pause, confirm)
    accepted = 0
    for half in (array[: array.size // 2], array[array.size // 2:]):
        keep_a, last_a = a.filter(half)
        keep_b, last_b = one_by_one(b, half)
        np.testing.assert_array_equal(keep_a, keep_b)
        assert last_a == last_b
        assert a.reference == b.reference
        assert a.counters == b.counters
        accepted += int(keep_a.sum())
    # every stamp is accounted for: accepted, or counted once with its reason
    assert accepted + a.counters[JUMP] + a.counters[OUT_OF_RANGE] == array.size


def test_bad_settings_are_refused() -> None:
    for bad in ((0.0, 1.0, 1.0), (1.0, np.nan, 1.0), (1.0, 1.0, -1.0)):
        with pytest.raises(InertialIdError):
            StampPolicy(*bad)
