"""Tests of the Hotelling T^2 contact monitor (inertial_id.core.estimation.anomaly).

The threshold is checked against the F-distribution formula computed another way (through the
beta quantile), the robust covariance against a known covariance with gross outliers, the
false-alarm rate against the confidence with binomial tolerances, and the debounce/hysteresis
state machine sample by sample.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.estimation.anomaly import (
    ContactInterval,
    T2Monitor,
    robust_mean_covariance,
    t2_threshold,
)

P = 6


def reference_threshold(p: int, n: float, confidence: float) -> float:
    """p (n-1)(n+1) / (n (n-p)) F^-1(conf; p, n-p), the F quantile from the beta quantile."""
    d1, d2 = p, n - p
    # X = d1 F / (d1 F + d2) is Beta(d1/2, d2/2) and 1 - X is Beta(d2/2, d1/2): taking both
    # quantiles keeps the precision when X is close to 1.
    x = stats.beta.ppf(confidence, d1 / 2.0, d2 / 2.0)
    one_minus_x = stats.beta.ppf(1.0 - confidence, d2 / 2.0, d1 / 2.0)
    f = d2 / d1 * x / one_minus_x
    return p * (n - 1) * (n + 1) / (n * (n - p)) * f


def random_covariance(seed: int, p: int = P) -> np.ndarray:
    """A well-conditioned covariance with unequal scales and correlations (F/T-like units)."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(p, p)))
    scales = np.array([0.08, 0.06, 0.1, 0.004, 0.003, 0.005])[:p]
    return (q * rng.uniform(0.5, 1.5, p)) @ q.T * np.outer(scales, scales)


def identity_monitor(**kwargs: object) -> T2Monitor:
    """A trained monitor with mean 0 and identity covariance: T^2 of [x, 0, ...] is x^2."""
    return T2Monitor(mean=np.zeros(P), covariance=np.eye(P), training_samples=1000, **kwargs)


def feed(monitor: T2Monitor, values: list[float], t0: float = 0.0, dt: float = 1e-3):
    """Feed samples whose T^2 (under the identity monitor) are ``values``; returns the result."""
    e = np.zeros((len(values), P))
    e[:, 0] = np.sqrt(values)
    times = t0 + dt * np.arange(len(values))
    return times, monitor.update(times, e)


# --- threshold ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    p=st.integers(1, 12),
    extra=st.floats(0.5, 1e5),
    confidence=st.floats(0.5, 0.999999),
)
def test_threshold_is_the_f_distribution_formula(p: int, extra: float, confidence: float) -> None:
    n = p + extra
    assert t2_threshold(p, n, confidence) == pytest.approx(
        reference_threshold(p, n, confidence), rel=1e-6)


@pytest.mark.parametrize("confidence", [0.9, 0.99, 0.999, 0.999999])
@pytest.mark.parametrize("p", [1, 3, 6])
def test_threshold_tends_to_the_chi_square_quantile(p: int, confidence: float) -> None:
    chi2 = stats.chi2.ppf(confidence, p)
    values = [t2_threshold(p, n, confidence) for n in (20, 100, 1e3, 1e4, 1e5, 1e7)]
    assert all(a > b for a, b in zip(values, values[1:], strict=False)), values
    assert all(v > chi2 for v in values)
    assert values[-1] == pytest.approx(chi2, rel=1e-4)
    # A small training set needs a clearly larger threshold than the chi-square quantile.
    assert values[0] > 1.1 * chi2


# --- robust covariance ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_robust_covariance_resists_gross_outliers(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cov = random_covariance(seed)
    mean = np.array([0.3, -0.2, 0.1, 0.01, -0.02, 0.005])
    n = 20000
    e = rng.multivariate_normal(mean, cov, size=n)
    outliers = rng.choice(n, size=n // 20, replace=False)  # 5 % gross outliers (contacts)
    std = np.sqrt(np.diag(cov))
    e[outliers] += rng.normal(size=(outliers.size, P)) * 30.0 * std

    robust_mean, robust_cov, inliers = robust_mean_covariance(e, confidence=0.999)

    def rel(a: np.ndarray) -> float:
        return float(np.linalg.norm(a - cov) / np.linalg.norm(cov))

    assert rel(robust_cov) < 0.1
    assert rel(np.cov(e.T)) > 5.0  # the plain covariance is ruined by the outliers
    # per-axis variances too (the Frobenius norm is dominated by the force block)
    np.testing.assert_allclose(np.diag(robust_cov), np.diag(cov), rtol=0.1)
    np.testing.assert_allclose(robust_mean, mean, atol=0.05 * std.max())
    assert 0.94 * n < inliers < 0.951 * n


def test_robust_covariance_is_consistent_on_clean_gaussian_data() -> None:
    """The trimming correction makes the estimate unbiased when there is nothing to trim."""
    rng = np.random.default_rng(3)
    cov = random_covariance(3)
    e = rng.multivariate_normal(np.zeros(P), cov, size=50000)
    for confidence in (0.9, 0.99, 0.999):
        _, robust_cov, _ = robust_mean_covariance(e, confidence=confidence)
        np.testing.assert_allclose(np.diag(robust_cov), np.diag(cov), rtol=0.05)


# --- false-alarm rate -----------------------------------------------------------------------


def binomial_bounds(n: int, rate: float, z: float = 5.0) -> tuple[float, float]:
    sd = math.sqrt(rate * (1 - rate) / n)
    return rate - z * sd, rate + z * sd


@pytest.mark.parametrize("confidence", [0.9, 0.99, 0.999])
def test_false_alarm_rate_with_the_true_covariance(confidence: float) -> None:
    rng = np.random.default_rng(11)
    cov = random_covariance(5)
    # With the true covariance T^2 is chi-square; a huge n makes the threshold its quantile.
    monitor = T2Monitor(confidence=confidence, mean=np.zeros(P), covariance=cov,
                        training_samples=10**9)
    n = 400_000
    e = rng.multivariate_normal(np.zeros(P), cov, size=n)
    rate = float(np.mean(monitor.t2(e) > monitor.threshold))
    low, high = binomial_bounds(n, 1 - confidence)
    assert low < rate < high


def test_false_alarm_rate_of_the_f_threshold_with_a_small_training_set() -> None:
    """n = 15 training samples: the F threshold holds the rate; the chi-square would not."""
    rng = np.random.default_rng(12)
    n, reps, confidence = 15, 5000, 0.9
    cov = random_covariance(6)
    chol = np.linalg.cholesky(cov)
    exceed = exceed_chi2 = 0
    chi2 = stats.chi2.ppf(confidence, P)
    for _ in range(reps):
        train = rng.normal(size=(n, P)) @ chol.T
        monitor = T2Monitor(confidence=confidence, mean=train.mean(axis=0),
                            covariance=np.cov(train.T), training_samples=n)
        value = monitor.t2(rng.normal(size=(1, P)) @ chol.T)[0]
        exceed += value > monitor.threshold
        exceed_chi2 += value > chi2
    low, high = binomial_bounds(reps, 1 - confidence)
    assert low < exceed / reps < high
    assert exceed_chi2 / reps > 2 * (1 - confidence)


def test_trained_monitor_false_alarms_on_gaussian_residuals() -> None:
    """Trained through update() (robustly) on Gaussian residuals, then run on new ones."""
    rng = np.random.default_rng(13)
    cov = random_covariance(7)
    confidence = 0.99
    monitor = T2Monitor(confidence=confidence, training_samples=5000, on_samples=1,
                        off_samples=1, release=1.0)
    train = rng.multivariate_normal(np.zeros(P), cov, size=5000)
    result = monitor.update(np.arange(5000) * 1e-3, train)
    assert monitor.ready and not result.contact.any()
    assert monitor.threshold == pytest.approx(
        reference_threshold(P, monitor._n, confidence), rel=1e-9)  # noqa: SLF001
    n = 200_000
    e = rng.multivariate_normal(np.zeros(P), cov, size=n)
    t2 = monitor.t2(e)
    rate = float(np.mean(t2 > monitor.threshold))
    # the covariance is estimated from 5000 samples: allow its sampling error on top
    assert 0.7 * (1 - confidence) < rate < 1.3 * (1 - confidence)


# --- debounce and hysteresis ----------------------------------------------------------------


def test_single_spike_does_not_start_a_contact_three_do() -> None:
    monitor = identity_monitor(on_samples=3, off_samples=10, release=0.7)
    thr = monitor.threshold
    high, low = 2.0 * thr, 0.1 * thr
    _, r = feed(monitor, [low, high, low, high, high, low, low])
    assert not r.contact.any() and not monitor.in_contact
    times, r = feed(monitor, [low, high, high, high, high], t0=1.0)
    assert r.contact.tolist() == [False, False, False, True, True]
    assert monitor.in_contact
    assert monitor.contact_start == times[1]  # the first of the three samples above


def test_debounce_counts_across_batches() -> None:
    monitor = identity_monitor(on_samples=3)
    high = 2.0 * monitor.threshold
    feed(monitor, [1.0, high], t0=0.0)
    assert not monitor.in_contact
    _, r = feed(monitor, [high, high], t0=0.002)
    assert r.contact.tolist() == [False, True]
    assert monitor.contact_start == pytest.approx(0.001)


def test_hysteresis_ends_contact_after_off_samples_below_release() -> None:
    monitor = identity_monitor(on_samples=3, off_samples=10, release=0.7)
    thr = monitor.threshold
    high, between, below = 3.0 * thr, 0.8 * thr, 0.5 * thr
    feed(monitor, [high] * 5, t0=0.0)
    assert monitor.in_contact
    # between release*threshold and threshold: the contact holds
    _, r = feed(monitor, [between] * 50, t0=0.005)
    assert r.contact.all()
    # nine below, then one between: the count restarts
    _, r = feed(monitor, [below] * 9 + [between], t0=0.055)
    assert r.contact.all()
    last_between = 0.064
    # ten below: the tenth ends the contact
    times, r = feed(monitor, [below] * 12, t0=0.065)
    assert r.contact.tolist() == [True] * 9 + [False] * 3
    assert not monitor.in_contact and monitor.contact_start is None
    assert len(monitor.intervals) == 1
    interval = monitor.intervals[0]
    assert isinstance(interval, ContactInterval)
    assert interval.start == 0.0
    assert interval.end == pytest.approx(last_between)
    assert interval.peak_t2 == pytest.approx(high)


def test_interval_stamps_peak_and_a_second_contact() -> None:
    monitor = identity_monitor(on_samples=2, off_samples=3, release=0.5)
    thr = monitor.threshold
    values = [0.0] * 10 + [0.6 * thr, 1.5 * thr, 4 * thr, 2 * thr, 0.6 * thr, 0.1, 0.1, 0.1]
    values += [0.0] * 10 + [1.2 * thr] * 4 + [0.0] * 5
    times, r = feed(monitor, values, t0=5.0, dt=0.01)
    first, second = monitor.intervals
    assert first.start == pytest.approx(times[11])
    assert first.end == pytest.approx(times[14])  # last sample >= release * threshold
    assert first.peak_t2 == pytest.approx(4 * thr)
    assert second.start == pytest.approx(times[28])
    assert second.end == pytest.approx(times[31])
    assert int(r.contact.sum()) == (14 - 12 + 1) + 2 + (31 - 29 + 1) + 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.3, 0.8, 1.5, 4.0]), min_size=1, max_size=120),
       st.integers(1, 4), st.integers(1, 6), st.integers(1, 5))
def test_update_flags_what_stepping_every_sample_flags(levels: list[float], on: int, off: int,
                                                       batches: int) -> None:
    """The batch update (which skips the samples under the threshold out of contact) gives
    the flags, intervals and state of the debounce stepped sample by sample."""
    fast = identity_monitor(on_samples=on, off_samples=off, release=0.5)
    slow = identity_monitor(on_samples=on, off_samples=off, release=0.5)
    e = np.zeros((len(levels), P))
    e[:, 0] = np.sqrt(np.asarray(levels) * fast.threshold)
    times = 1e-3 * np.arange(len(levels))
    flags = []
    for part in np.array_split(np.arange(len(levels)), batches):
        flags.extend(fast.update(times[part], e[part]).contact.tolist())
    expected = [slow._step(t, v) for t, v in zip(times, slow.t2(e), strict=True)]
    assert flags == expected
    assert fast.intervals == slow.intervals
    assert (fast.in_contact, fast.contact_start) == (slow.in_contact, slow.contact_start)


def test_untrained_monitor_flags_nothing_and_adapt_refines() -> None:
    rng = np.random.default_rng(1)
    monitor = T2Monitor(training_samples=500, adapt=True)
    big = np.full((100, P), 100.0)
    r = monitor.update(np.arange(100) * 1e-3, big)
    assert not monitor.ready and monitor.threshold == math.inf and not r.contact.any()
    monitor.update(np.arange(100, 600) * 1e-3, rng.normal(size=(500, P)))
    assert monitor.ready
    n_before = monitor._n  # noqa: SLF001
    monitor.update(np.arange(600, 1600) * 1e-3, rng.normal(size=(1000, P)))
    assert monitor._n > n_before  # noqa: SLF001
    monitor.reset()
    assert not monitor.ready and not monitor.in_contact


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_threshold_rejects_confidence_outside_the_unit_interval(confidence: float) -> None:
    with pytest.raises(InertialIdError):
        t2_threshold(P, 100, confidence)


@pytest.mark.parametrize("n", [6, 5, 0, float("nan")])
def test_threshold_rejects_too_few_samples(n: float) -> None:
    with pytest.raises(InertialIdError):
        t2_threshold(P, n, 0.99)


@pytest.mark.parametrize("confidence", [0.0, 1.5, float("nan")])
def test_monitor_rejects_bad_confidence_at_construction(confidence: float) -> None:
    """A monitor that cannot ever compute its threshold must not be constructible (it would
    otherwise report ready with an infinite threshold and never flag anything)."""
    with pytest.raises(InertialIdError):
        T2Monitor(confidence=confidence)


def test_monitor_rejects_bad_debounce_settings() -> None:
    for kwargs in ({"on_samples": 0}, {"off_samples": 0}, {"release": 0.0}, {"release": 1.5}):
        with pytest.raises(InertialIdError):
            T2Monitor(**kwargs)


def test_robust_covariance_needs_enough_residuals() -> None:
    with pytest.raises(SampleError):
        robust_mean_covariance(np.zeros((2 * P, P)))


@pytest.mark.parametrize(
    "residuals",
    [np.zeros(100), np.zeros((100, P, 1)),
     np.where(np.arange(600).reshape(100, P) == 5, np.nan, 1.0)],
    ids=["1-D", "3-D", "NaN"],
)
def test_robust_covariance_rejects_malformed_residuals(residuals: np.ndarray) -> None:
    with pytest.raises(SampleError):
        robust_mean_covariance(residuals)


@pytest.mark.parametrize(
    ("times", "residuals"),
    [(np.arange(3.0), np.zeros((3, 5))),
     (np.arange(4.0), np.zeros((3, P))),
     (np.arange(3.0), np.array([[0.0] * 5 + [np.nan]] * 3)),
     (np.arange(3.0), np.array([[0.0] * 5 + [np.inf]] * 3)),
     (np.array([0.0, np.nan, 2.0]), np.zeros((3, P)))],
    ids=["5 columns", "stamp count", "NaN residual", "inf residual", "NaN stamp"],
)
def test_update_rejects_malformed_samples(times: np.ndarray, residuals: np.ndarray) -> None:
    for monitor in (identity_monitor(), T2Monitor(training_samples=50)):
        with pytest.raises(SampleError):
            monitor.update(times, residuals)


def test_t2_rejects_wrong_width_and_untrained_use() -> None:
    with pytest.raises(InertialIdError):
        T2Monitor().t2(np.zeros((2, P)))
    with pytest.raises(SampleError):
        identity_monitor().t2(np.zeros((2, 5)))


def test_monitor_rejects_a_singular_covariance() -> None:
    with pytest.raises(InertialIdError):
        T2Monitor(mean=np.zeros(P), covariance=np.zeros((P, P)), training_samples=100)


def test_offline_contact_intervals_ignore_brief_spikes_and_find_pushes_from_the_start() -> None:
    """Seven joints at 1 kHz: white residual noise, a 30 ms spike (model error at a velocity
    reversal on a real arm) and two pushes, one at the very start of the record."""
    from inertial_id.core.estimation.anomaly import contact_intervals

    rng = np.random.default_rng(3)
    t = np.arange(0.0, 20.0, 0.001)
    e = rng.normal(size=(t.size, 7)) * 0.1
    spike = (t >= 5.0) & (t < 5.03)
    e[spike, 2] += 1.5
    for start, length in ((0.0, 0.6), (12.0, 0.4)):
        push = (t >= start) & (t < start + length)
        e[push] += np.array([0.0, 0.8, 0.0, 0.5, 0.0, 0.0, 0.2])
    found = contact_intervals(t, e)
    assert len(found) == 2, found
    (a0, b0), (a1, b1) = found
    assert a0 < 0.05 and abs(b0 - 0.6) < 0.05
    assert abs(a1 - 12.0) < 0.05 and abs(b1 - 12.4) < 0.05
    # Without the debounce the spike counts: the duration is what rejects it.
    assert len(contact_intervals(t, e, min_duration=0.005)) == 3


@pytest.mark.parametrize(("rate", "trained_after"), [(100.0, 1.0), (1000.0, 1.0), (30.0, 50 / 30)])
def test_training_by_time_ends_after_that_time_whatever_the_rate(rate: float,
                                                                 trained_after: float) -> None:
    """With ``training_time`` 1 s the monitor is ready once its residuals span 1 s (and at
    least 50 of them: 1.67 s at 30 Hz), not after ``training_samples`` (1000: 10 s at
    100 Hz)."""
    rng = np.random.default_rng(0)
    monitor = T2Monitor(training_samples=1000, training_time=1.0)
    t = np.arange(0.0, 3.0, 1.0 / rate)
    ready_at = None
    for k in range(t.size):
        monitor.update(t[k:k + 1], rng.normal(size=(1, 6)))
        if monitor.ready:
            ready_at = t[k]
            break
    assert ready_at is not None
    assert ready_at == pytest.approx(trained_after, abs=1.5 / rate)


def test_a_negative_training_time_is_refused() -> None:
    with pytest.raises(InertialIdError, match="training_time"):
        T2Monitor(training_time=-1.0)


# --- confirmation by the filtered residual ----------------------------------------------------

RATE = 1000.0
SPAN = 0.2  # s: the filter's past span; the filtered residual's correlation time is half


def smooth_noise(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """(n, P) Gaussian noise of std ``scale`` averaged over SPAN / 2 (correlated like a
    filtered residual)."""
    width = int(SPAN / 2 * RATE)
    white = rng.normal(scale=scale / np.sqrt(width), size=(n + width, P))
    return np.cumsum(white, axis=0)[width:] - np.cumsum(white, axis=0)[:-width]


def confirmed_monitor(rng: np.random.Generator) -> T2Monitor:
    """A monitor trained on 2 s of a raw residual (white, std 1) and a filtered one."""
    monitor = T2Monitor(training_time=2.0, training_samples=10**6)
    t = np.arange(int(2.0 * RATE) + 1) / RATE
    monitor.update(t, rng.normal(size=(t.size, P)), smooth_noise(rng, t.size, 0.05),
                   correlation_time=SPAN / 2)
    assert monitor.ready and monitor.confirming
    return monitor


def test_a_motion_following_raw_residual_is_not_a_contact_when_the_filtered_one_is_clean() -> None:
    """The filter's gain error leaves a slow swing in the raw residual only: flagged by the raw
    test alone, not once the filtered residual must confirm."""
    rng = np.random.default_rng(4)
    monitor = confirmed_monitor(rng)
    plain = T2Monitor(mean=monitor.mean, covariance=monitor.covariance,
                      training_samples=monitor.training_samples)
    t = 2.001 + np.arange(int(8.0 * RATE)) / RATE
    swing = np.outer(6.0 * np.sin(2 * np.pi * 0.3 * t), np.ones(P))
    raw = rng.normal(size=(t.size, P)) + swing
    filtered = smooth_noise(rng, t.size, 0.05)
    assert plain.update(t, raw).contact.mean() > 0.3
    assert not monitor.update(t, raw, filtered, SPAN / 2).contact.any()


def test_a_push_seen_in_both_residuals_starts_at_the_raw_run_and_ends_with_it() -> None:
    rng = np.random.default_rng(5)
    monitor = confirmed_monitor(rng)
    t = 2.001 + np.arange(int(3.0 * RATE)) / RATE
    push = ((t >= 3.0) & (t < 3.5))[:, None] * np.array([30.0, 0, 0, 0, 0, 0])
    raw = rng.normal(size=(t.size, P)) + push
    # The filtered residual sees the push late and keeps it for the span after it ends.
    late = ((t >= 3.004) & (t < 3.5 + SPAN))[:, None] * np.array([3.0, 0, 0, 0, 0, 0])
    result = monitor.update(t, raw, smooth_noise(rng, t.size, 0.05) + late, SPAN / 2)
    (interval,) = monitor.intervals
    assert interval.start == pytest.approx(3.0, abs=1e-9)  # the raw run's first sample
    assert 3.49 <= interval.end < 3.5  # the raw residual ends it, not the filter's tail
    assert not result.contact[t < 3.0].any() and not result.contact[t > 3.52].any()


def test_a_contact_ends_once_the_filtered_residual_settles_though_the_raw_one_stays_up() -> None:
    """After a push, the raw residual's gain-error swing can hold it above the release level;
    the filtered residual, back under its own release level, ends the contact."""
    rng = np.random.default_rng(6)
    monitor = confirmed_monitor(rng)
    t = 2.001 + np.arange(int(3.0 * RATE)) / RATE
    push = ((t >= 3.0) & (t < 3.5))[:, None] * np.array([30.0, 0, 0, 0, 0, 0])
    raw = rng.normal(size=(t.size, P)) + push + np.array([0, 8.0, 0, 0, 0, 0])
    filtered = smooth_noise(rng, t.size, 0.05) + 0.1 * push
    monitor.update(t, raw, filtered, SPAN / 2)
    (interval,) = monitor.intervals
    # the raw run began at the start; the contact at most one span before its confirmation
    assert 3.0 - SPAN <= interval.start <= 3.0
    assert not monitor.in_contact
    # without the filtered residual the same raw one never lets go
    plain = T2Monitor(mean=monitor.mean, covariance=monitor.covariance,
                      training_samples=monitor.training_samples)
    plain.update(t, raw)
    assert plain.in_contact or plain.intervals[0].end > t[-1] - 0.05


def test_the_confirmation_threshold_counts_correlated_samples_and_follows_the_confidence() -> None:
    """2 s of residuals correlated over 0.1 s are about 20 independent samples: the filtered
    residual's threshold is Hotelling's at that count, not at the 2001 samples; a new
    confidence moves it as it moves the raw one."""
    rng = np.random.default_rng(7)
    monitor = confirmed_monitor(rng)
    confirm = monitor._confirm
    assert confirm is not None
    assert confirm.n_eff == pytest.approx(2.0 / (SPAN / 2), rel=1e-3)
    assert confirm.threshold == pytest.approx(t2_threshold(P, confirm.n_eff, 0.999))
    assert confirm.threshold > 1.5 * monitor.threshold
    monitor.reconfigure(0.99, monitor.training_samples, 3, 10, 0.7)
    assert monitor._confirm.threshold == pytest.approx(t2_threshold(P, confirm.n_eff, 0.99))
