"""Local polynomial fitting and the fixed-lag joint-state / wrench synchroniser."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.gathering.synchronizer import (
    DEFAULT_MAX_JOINT_SPEED,
    SPIKE_FOLLOW,
    FixedLagSynchronizer,
)
from inertial_id.core.gathering.synchronizer.filters import median
from inertial_id.core.samples import SyncedSamples
from inertial_id.core.signals import local_polynomial

T0_MS = 100_000  # stamps start at 100 s; stamps are integer milliseconds / 1000, so a joint
# stamp and the wrench stamp of the same millisecond are the same float.
WINDOW = 15

# ---------------------------------------------------------------------------------------------
# Known signals: cubics in t - T_REF (two joints, six wrench channels).

T_REF = 100.5
JOINT_COEFFS = np.array([[0.3, -1.2], [0.8, 0.5], [-1.5, 2.0], [0.7, -0.9]])  # (4, 2)
WRENCH_COEFFS = np.array([
    [1.0, -2.0, 15.0, 0.1, -0.2, 0.05],
    [0.5, 1.5, -3.0, 0.2, 0.1, -0.3],
    [-2.0, 0.3, 4.0, -0.5, 0.4, 0.2],
    [1.1, -0.7, 2.5, 0.3, -0.6, 0.8],
])


def cubic(coeffs, t, derivative=0):
    s = np.atleast_1d(np.asarray(t, dtype=float)) - T_REF
    out = np.zeros((s.size, coeffs.shape[1]))
    for k in range(derivative, 4):
        factor = np.prod(np.arange(k - derivative + 1, k + 1))
        out += factor * s[:, None] ** (k - derivative) * coeffs[k]
    return out


def joint_stamp(j):
    return (T0_MS + 2 * j) / 1000.0  # 500 Hz


def wrench_stamp(i):
    return (T0_MS + i) / 1000.0  # 1 kHz


def run(sync, n_ms, pop_every=10, wrench_first=False, start_ms=0, skip_joints=None):
    """Feed joints (500 Hz) and wrenches (1 kHz) over n_ms milliseconds; collect the output."""
    out = []
    for i in range(start_ms, start_ms + n_ms):
        t = wrench_stamp(i)
        adds = []
        if i % 2 == 0 and not (skip_joints and skip_joints[0] <= t < skip_joints[1]):
            adds.append(lambda t=t: sync.add_joint_state(t, cubic(JOINT_COEFFS, t)[0]))
        adds.append(lambda t=t: sync.add_wrench(t, cubic(WRENCH_COEFFS, t)[0]))
        if wrench_first:
            adds.reverse()
        for add in adds:
            assert add()
        if i % pop_every == 0:
            out.append(sync.pop_ready())
    out.append(sync.pop_ready())
    return concat(out)


def concat(batches):
    return SyncedSamples(*(np.concatenate([getattr(b, f) for b in batches]) for f in
                           ("times", "position", "velocity", "acceleration", "wrench",
                            "wrench_raw")))


def assert_matches_analytic(samples):
    t = samples.times
    np.testing.assert_allclose(samples.position, cubic(JOINT_COEFFS, t), atol=1e-9)
    np.testing.assert_allclose(samples.velocity, cubic(JOINT_COEFFS, t, 1), atol=1e-7)
    np.testing.assert_allclose(samples.acceleration, cubic(JOINT_COEFFS, t, 2), atol=1e-6)
    np.testing.assert_allclose(samples.wrench, cubic(WRENCH_COEFFS, t), atol=1e-9)


# ---------------------------------------------------------------------------------------------
# Polynomial fit


def _cubic_and_derivatives(c, s):
    return [
        c[0] + c[1] * s + c[2] * s**2 + c[3] * s**3,
        c[1] + 2 * c[2] * s + 3 * c[3] * s**2,
        2 * c[2] + 6 * c[3] * s,
        np.full_like(s, 6 * c[3]),
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-10, 10), min_size=4, max_size=4),
    st.lists(st.floats(0.5, 1.5), min_size=11, max_size=11),
    st.floats(-1.0, 1.0),
)
def test_local_polynomial_recovers_a_cubic_on_irregular_stamps(coeffs, gaps, where):
    c = np.array(coeffs)
    stamps = 3.0 + 0.01 * np.cumsum(gaps)  # non-uniform, about 100 Hz
    # Three windows over the same stamps, evaluated before, at and after the centre, and a
    # fourth shifted in time; two signals: the cubic and minus the cubic.
    times = np.stack([stamps, stamps, stamps, stamps + 0.5])
    at = np.array([stamps[5] + where * 0.04, stamps[5], stamps[-1], stamps[0] + 0.5])

    def signal(t):
        return sum(c[k] * (t - 3.05) ** k for k in range(4))

    values = np.stack((signal(times), -signal(times)), axis=-1)  # (4, 11, 2)
    results = local_polynomial(times, values, at, 3, (0, 1, 2, 3))
    assert len(results) == 4
    for derivative, (got, exp) in enumerate(
        zip(results, _cubic_and_derivatives(c, at - 3.05), strict=True)
    ):
        assert got.shape == (4, 2)
        tol = 1e-8 * (1 + np.abs(c).sum()) * 100.0**derivative
        np.testing.assert_allclose(got[:, 0], exp, rtol=1e-7, atol=tol)
        np.testing.assert_allclose(got[:, 1], -exp, rtol=1e-7, atol=tol)
    # Beyond the order every derivative vanishes.
    (fourth,) = local_polynomial(times, values, at, 3, (4,))
    np.testing.assert_allclose(fourth, 0.0)


def test_local_polynomial_is_a_least_squares_fit():
    rng = np.random.default_rng(0)
    times = np.sort(rng.uniform(0, 1, 21))[None]
    values = (times**3)[..., None]
    # Order 2 cannot follow t^3: the residual is orthogonal to 1, t and t^2 (normal equations).
    fitted = np.array([
        local_polynomial(times, values, np.array([t]), 2)[0][0, 0] for t in times[0]
    ])
    residual = values[0, :, 0] - fitted
    for k in range(3):
        assert abs(residual @ times[0] ** k) < 1e-12
    assert np.max(np.abs(residual)) > 1e-4
    # Order 3 follows it exactly, with derivative 3 t^2.
    (slope,) = local_polynomial(times, values, np.array([0.4]), 3, (1,))
    np.testing.assert_allclose(slope[0, 0], 3 * 0.4**2, atol=1e-10)


def test_local_polynomial_needs_more_samples_than_the_order():
    with pytest.raises(SampleError):
        local_polynomial(np.array([[0.0, 1.0, 2.0]]), np.ones((1, 3, 1)), np.array([1.0]), 3)


# ---------------------------------------------------------------------------------------------
# Synchroniser


def test_constructor_validates_window_and_order():
    for window, order in ((14, 3), (3, 3), (15, 1)):
        with pytest.raises(InertialIdError):
            FixedLagSynchronizer(2, window=window, order=order)


def test_output_equals_the_analytic_signals_at_the_wrench_stamps():
    sync = FixedLagSynchronizer(2, window=WINDOW, order=3)
    n_ms = 600
    out = run(sync, n_ms)
    assert_matches_analytic(out)
    # The output is stamped with wrench stamps, in order, without repeats.
    assert np.all(np.diff(out.times) > 0)
    wrench_stamps = {wrench_stamp(i) for i in range(n_ms)}
    assert set(out.times) <= wrench_stamps
    # Every wrench whose whole joint window has arrived is output.
    joints = [joint_stamp(j) for j in range(n_ms // 2)]
    half = WINDOW // 2
    span = half * 0.002
    complete = {
        t for t in wrench_stamps
        if joints[half] <= t < joints[len(joints) - half]
        and wrench_stamp(0) + span - 1e-9 <= t <= wrench_stamp(n_ms - 1) - span + 1e-9
    }
    assert set(out.times) == complete
    # The wrenches of the first half window (7 joint periods of 2 ms) have no history.
    assert sync.counters["wrench_without_history"] == 2 * half
    assert sync.counters["joint_state_gap"] == 0


@pytest.mark.parametrize("lag", [0, 2, 5, WINDOW // 2])
def test_shorter_lag_is_exact_on_cubics_and_answers_sooner(lag):
    sync = FixedLagSynchronizer(2, window=WINDOW, lag=lag)
    n_ms = 400
    out = run(sync, n_ms, pop_every=1)
    assert_matches_analytic(out)
    # Every wrench stamped up to lag joint periods before the newest joint state is out.
    newest_joint = joint_stamp((n_ms - 1) // 2)
    assert out.times[-1] >= newest_joint - lag * 0.002 - 1e-9
    assert out.times[-1] < newest_joint - lag * 0.002 + 0.002
    # The history needed before the first output grows as the lag shrinks.
    assert sync.counters["wrench_without_history"] == 2 * (WINDOW - 1 - lag)


def test_lag_is_validated():
    for lag in (-1, WINDOW // 2 + 1):
        with pytest.raises(InertialIdError, match="lag"):
            FixedLagSynchronizer(2, window=WINDOW, lag=lag)


def test_wrench_first_then_joints_gives_the_same_output():
    reference = run(FixedLagSynchronizer(2, window=WINDOW), 400)
    swapped = run(FixedLagSynchronizer(2, window=WINDOW), 400, wrench_first=True)
    np.testing.assert_array_equal(swapped.times, reference.times)
    assert_matches_analytic(swapped)

    # All wrenches first, then all joint states: still the same samples.
    sync = FixedLagSynchronizer(2, window=WINDOW)
    for i in range(400):
        sync.add_wrench(wrench_stamp(i), cubic(WRENCH_COEFFS, wrench_stamp(i))[0])
    assert len(sync.pop_ready()) == 0
    for j in range(200):
        sync.add_joint_state(joint_stamp(j), cubic(JOINT_COEFFS, joint_stamp(j))[0])
    late = sync.pop_ready()
    np.testing.assert_array_equal(late.times, reference.times)
    assert_matches_analytic(late)


def test_measured_velocities():
    sync = FixedLagSynchronizer(2, window=WINDOW, use_measured_velocity=True)
    out = []
    for i in range(300):
        t = wrench_stamp(i)
        if i % 2 == 0:
            # Positions deliberately wrong: velocity and acceleration must come from velocity.
            sync.add_joint_state(t, np.zeros(2), cubic(JOINT_COEFFS, t, 1)[0])
        sync.add_wrench(t, cubic(WRENCH_COEFFS, t)[0])
        out.append(sync.pop_ready())
    out = concat(out)
    assert len(out) > 200
    np.testing.assert_allclose(out.velocity, cubic(JOINT_COEFFS, out.times, 1), atol=1e-9)
    np.testing.assert_allclose(out.acceleration, cubic(JOINT_COEFFS, out.times, 2), atol=1e-7)
    np.testing.assert_allclose(out.position, 0.0, atol=1e-12)
    with pytest.raises(SampleError):
        sync.add_joint_state(1000.0, np.zeros(2))


def test_out_of_order_and_duplicate_stamps_are_dropped():
    sync = FixedLagSynchronizer(2)
    assert sync.add_joint_state(10.0, np.zeros(2))
    assert not sync.add_joint_state(9.999, np.zeros(2))
    assert not sync.add_joint_state(10.0, np.zeros(2))
    assert sync.counters["joint_state_out_of_order"] == 2
    assert sync.add_wrench(10.0, np.zeros(6))
    assert not sync.add_wrench(9.5, np.zeros(6))
    assert sync.counters["wrench_out_of_order"] == 1
    joints, wrenches = sync.buffered
    assert joints.tolist() == [10.0] and wrenches.tolist() == [10.0]
    assert sync.counters["stamp_resets"] == 0


def _feed_ms(sync, start_ms, n_ms):
    """Joints (500 Hz) and wrenches (1 kHz) over n_ms; how many adds were accepted."""
    accepted = 0
    for i in range(start_ms, start_ms + n_ms):
        t = wrench_stamp(i)
        if i % 2 == 0:
            accepted += sync.add_joint_state(t, cubic(JOINT_COEFFS, t)[0])
        accepted += sync.add_wrench(t, cubic(WRENCH_COEFFS, t)[0])
    return accepted


def test_large_backwards_jump_is_followed_after_a_second_and_recovers():
    sync = FixedLagSynchronizer(2, window=WINDOW)
    first = run(sync, 200)
    assert len(first) > 0
    # A bag restarting: stamps jump 5 s back. The first second of the new time base is
    # dropped (it could be a glitch), then the buffers reset and the stream goes on.
    restart_ms = -5000
    assert _feed_ms(sync, restart_ms, 1000) == 0
    assert sync.counters["joint_state_stamp_jump"] == 500
    assert sync.counters["wrench_stamp_jump"] == 1000
    assert sync.counters["stamp_resets"] == 0
    second = run(sync, 200, start_ms=restart_ms + 1000)
    assert sync.counters["stamp_resets"] == 1
    assert sync.counters["wrench_out_of_order"] == 0
    assert len(second) > 100
    assert np.all(second.times < wrench_stamp(0))
    assert_matches_analytic(second)


@pytest.mark.parametrize("glitch", [0.0, 1e9, 2.0**31 - 10.0, 5000.0])
def test_half_a_second_of_glitched_stamps_is_dropped_without_a_reset(glitch):
    sync = FixedLagSynchronizer(2, window=WINDOW)
    first = run(sync, 300)
    for i in range(500):  # 0.5 s of samples stamped far away
        sync.add_wrench(glitch + i / 1000.0, np.zeros(6))
        if i % 2 == 0:
            sync.add_joint_state(glitch + i / 1000.0, np.zeros(2))
    assert sync.counters["joint_state_stamp_jump"] == 250
    assert sync.counters["wrench_stamp_jump"] == 500
    second = run(sync, 300, start_ms=300)
    assert sync.counters["stamp_resets"] == 0
    out = concat([first, second])
    assert np.all(np.diff(out.times) > 0)
    assert out.times[0] < wrench_stamp(100) and out.times[-1] > wrench_stamp(550)
    assert_matches_analytic(out)


def test_non_finite_or_malformed_samples_raise():
    sync = FixedLagSynchronizer(2)
    with pytest.raises(SampleError):
        sync.add_joint_state(1.0, [0.0, np.nan])
    measured = FixedLagSynchronizer(2, use_measured_velocity=True)
    with pytest.raises(SampleError):
        measured.add_joint_state(1.0, [0.0, 1.0], [np.inf, 0.0])
    with pytest.raises(SampleError):
        measured.add_joint_state(1.0, [0.0, 1.0], [0.0])
    with pytest.raises(SampleError):
        sync.add_joint_state(1.0, [0.0, 1.0, 2.0])
    with pytest.raises(SampleError):
        sync.add_wrench(1.0, [0, 0, np.nan, 0, 0, 0])
    with pytest.raises(SampleError):
        sync.add_wrench(1.0, np.zeros(5))
    # stamps out of range are the time policy's: dropped and counted, not raised
    assert not sync.add_joint_state(np.nan, [0.0, 1.0])
    assert not sync.add_wrench(np.inf, np.zeros(6))
    assert sync.counters["joint_state_stamp_out_of_range"] == 1
    assert sync.counters["wrench_stamp_out_of_range"] == 1
    assert [len(b) for b in sync.buffered] == [0, 0]


def test_gap_in_joint_states_drops_the_straddling_samples():
    sync = FixedLagSynchronizer(2, window=WINDOW, max_span=0.5)
    gap = (wrench_stamp(300), wrench_stamp(1100))  # 0.8 s without joint states
    out = run(sync, 1600, skip_joints=gap)
    assert sync.counters["joint_state_gap"] > 0
    assert_matches_analytic(out)
    # Nothing is output from a window that straddles the gap ...
    half_span = WINDOW // 2 * 0.002
    assert not np.any((out.times > gap[0] - half_span - 1e-9) & (out.times < gap[1] + half_span))
    # ... but data on both sides is.
    assert np.any(out.times < gap[0]) and np.any(out.times > gap[1])


def test_buffers_stay_bounded():
    sync = FixedLagSynchronizer(2, window=WINDOW)
    n = 10_000
    stamps = np.array([wrench_stamp(i) for i in range(n)])
    joints, wrenches = cubic(JOINT_COEFFS, stamps), cubic(WRENCH_COEFFS, stamps)
    lengths, produced = [], 0
    for i in range(n):
        if i % 2 == 0:
            sync.add_joint_state(stamps[i], joints[i])
        sync.add_wrench(stamps[i], wrenches[i])
        if i % 7 == 0:
            produced += len(sync.pop_ready())
            lengths.append(tuple(len(b) for b in sync.buffered))
    assert produced > n - 100
    assert max(j for j, _ in lengths) < 3 * WINDOW
    assert max(w for _, w in lengths) < 6 * WINDOW


def test_wrench_overflow_without_joint_states():
    sync = FixedLagSynchronizer(2, max_pending=50)
    for i in range(120):
        sync.add_wrench(wrench_stamp(i), np.zeros(6))
    assert sync.counters["wrench_overflow"] == 70
    assert len(sync.pop_ready()) == 0


def test_a_gap_in_the_wrench_stream_drops_the_windows_across_it():
    sync = FixedLagSynchronizer(1, window=5, order=2, max_span=0.05)
    for k in range(400):
        sync.add_joint_state(k * 0.002, [np.sin(k * 0.002)])
    times = [k * 0.001 for k in range(800) if not 300 <= k < 500]  # 0.2 s without wrenches
    for t in times:
        sync.add_wrench(t, np.full(6, t))
    out = sync.pop_ready()
    assert sync.counters["wrench_gap"] > 0
    # hw = 4 wrench samples per half window: windows reaching into (0.3, 0.5) are dropped.
    assert not np.any((out.times > 0.2965) & (out.times < 0.5035))
    assert np.any(np.isclose(out.times, 0.295)) and np.any(np.isclose(out.times, 0.505))
    np.testing.assert_allclose(out.wrench[:, 0], out.times, atol=1e-9)


@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=60))
@settings(max_examples=200, deadline=None)
def test_median_is_numpy_median(values: list[float]) -> None:
    assert median(np.array(values)) == np.median(values)


def _spiked_run(spikes: dict[int, float], max_speed: float = 3.0) -> tuple[
        FixedLagSynchronizer, np.ndarray]:
    """300 ms of the cubics with the joint states numbered in ``spikes`` moved by that much
    (rad); the filter's output positions."""
    sync = FixedLagSynchronizer(2, WINDOW, 3, max_speed=[max_speed, max_speed])
    out = []
    for i in range(300):
        t = wrench_stamp(i)
        if i % 2 == 0:
            sync.add_joint_state(t, cubic(JOINT_COEFFS, t)[0] + spikes.get(i // 2, 0.0))
        sync.add_wrench(t, cubic(WRENCH_COEFFS, t)[0])
        out.append(sync.pop_ready())
    return sync, np.concatenate([b.position for b in out])


@pytest.mark.parametrize("size", [1e5, -3.0, 1e-3 * 1e6])
def test_a_joint_state_spike_is_dropped_and_counted_before_the_filter(size: float) -> None:
    """Five joint states far beyond what a joint moves in 2 ms (URDF limit 3 rad/s) are
    dropped and counted; the filter's output is what it is without them (the neighbours'
    fit), not a spike."""
    clean_sync, clean = _spiked_run({})
    sync, spiked = _spiked_run({k: size for k in (40, 41, 42, 60, 90)})
    assert clean_sync.counters["joint_state_spike"] == 0
    assert sync.counters["joint_state_spike"] == 5
    assert spiked.shape[0] >= clean.shape[0] - 20
    assert np.abs(spiked).max() < np.abs(clean).max() + 0.01


def test_a_stream_that_moved_is_followed_after_a_run_of_spikes() -> None:
    """If the joint states themselves moved (the state before was the spike, a re-homed
    encoder), the synchronizer follows after SPIKE_FOLLOW agreeing ones in a row."""
    sync, positions = _spiked_run({k: 50.0 for k in range(30, 150)})
    assert sync.counters["joint_state_spike"] == SPIKE_FOLLOW - 1
    assert positions[-1, 0] > 40.0  # the new stream


def test_a_joint_without_a_speed_limit_gets_the_default() -> None:
    sync = FixedLagSynchronizer(2, WINDOW, 3, max_speed=[0.0, np.inf])
    assert np.all(sync.spikes.max_speed == DEFAULT_MAX_JOINT_SPEED)


def test_the_block_path_drops_spikes_like_the_one_at_a_time_path() -> None:
    """extend() refuses a block with a spike (the caller then adds one at a time, where the
    spike is dropped and counted), so both paths give the same output."""
    sync = FixedLagSynchronizer(2, WINDOW, 3, max_speed=[3.0, 3.0])
    t = np.array([joint_stamp(j) for j in range(20)])
    q = cubic(JOINT_COEFFS, t)
    q[7] += 1e5
    w_t = np.array([wrench_stamp(i) for i in range(40)])
    w = cubic(WRENCH_COEFFS, w_t)
    arrival = np.sort(np.concatenate((t, w_t)))
    assert not sync.extend(t, q, None, w_t, w, arrival)
    q[7] -= 1e5
    assert sync.extend(t, q, None, w_t, w, arrival)
    assert sync.counters["joint_state_spike"] == 0
