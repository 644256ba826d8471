"""The gatherer's filter sized in seconds and chosen from the data
(core/gathering/filter_choice.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.gathering.filter_choice import (
    GAIN_TOLERANCE,
    NO_MOTION_WINDOW_TIME,
    acceleration_gain,
    choose_filter,
    derivative_weights,
    lag_derivative_weights,
)
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)


@given(window=st.integers(2, 40).map(lambda k: 2 * k + 1), lag_share=st.floats(0.0, 1.0),
       order=st.integers(2, 4), rate=st.sampled_from([100.0, 125.0, 500.0, 1000.0]),
       coefficients=st.lists(st.floats(-5.0, 5.0), min_size=5, max_size=5))
@settings(max_examples=60, deadline=None)
def test_weights_give_the_exact_second_derivative_of_polynomials_of_their_order(
        window: int, lag_share: float, order: int, rate: float,
        coefficients: list[float]) -> None:
    """Applied to a polynomial of the fit's order, the weights give its second derivative at
    the evaluation point (``lag`` samples before the newest)."""
    if window <= order:
        return
    lag = int(lag_share * (window // 2))
    tau = (np.arange(window) - (window - 1 - lag)) / rate
    c = np.asarray(coefficients[: order + 1])
    values = sum(c[k] * tau**k for k in range(order + 1))
    weights = derivative_weights(window, lag, order, rate)
    assert weights @ values == pytest.approx(2.0 * c[2], rel=1e-6, abs=1e-6 * rate**2)


@given(window=st.integers(3, 30).map(lambda k: 2 * k + 1), lag_share=st.floats(0.0, 1.0),
       frequency=st.floats(0.05, 5.0), phase=st.floats(0.0, 6.3))
@settings(max_examples=60, deadline=None)
def test_the_gain_is_the_filters_response_to_a_sinusoid(window: int, lag_share: float,
                                                       frequency: float, phase: float) -> None:
    """``G(f)`` predicts the filter's output on ``sin(2 pi f t + phase)`` sampled at 250 Hz."""
    rate, lag = 250.0, int(lag_share * (window // 2))
    tau = (np.arange(window) - (window - 1 - lag)) / rate
    omega = 2 * np.pi * frequency
    weights = derivative_weights(window, lag, 3, rate)
    (gain,) = acceleration_gain(weights, lag, rate, np.array([frequency]))
    filtered = weights @ np.sin(omega * tau + phase)
    predicted = np.imag(gain * -(omega**2) * np.exp(1j * phase))
    assert filtered == pytest.approx(predicted, abs=1e-9 * omega**2)


def _joint_record(rate: float, noise: float, period: float = 5.0, duration: float = 4.0,
                  seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.4, max_velocity=0.6,
                                          period=period, harmonics=3, seed=seed)
    times = np.arange(0.0, duration, 1.0 / rate)
    q, _, _ = trajectory(times)
    rng = np.random.default_rng(seed)
    return times, q + rng.normal(scale=noise, size=q.shape)


@pytest.mark.parametrize("noise", [1e-6, 1e-5, 1e-4])
def test_the_chosen_window_is_a_time_whatever_the_rate(noise: float) -> None:
    """The same motion and encoder noise at 125 Hz and 1 kHz get windows of about the same
    length in seconds (a window in samples would be 8 times longer at 125 Hz), with the gain
    within the tolerance of 1 in the motion's band."""
    choices = [choose_filter(*_joint_record(rate, noise)) for rate in (125.0, 1000.0)]
    slow, fast = choices
    assert slow.source == fast.source == "data"
    assert 0.6 < slow.window_time / fast.window_time < 1.6
    assert all(c.gain_error <= GAIN_TOLERANCE for c in choices)
    assert all(c.delay <= 0.01 + 1e-9 for c in choices)


def test_more_encoder_noise_gets_a_longer_window_and_faster_motion_a_shorter_one() -> None:
    quiet = choose_filter(*_joint_record(500.0, 1e-6))
    noisy = choose_filter(*_joint_record(500.0, 1e-4))
    fast = choose_filter(*_joint_record(500.0, 1e-6, period=2.0))
    assert noisy.window_time > quiet.window_time > fast.window_time
    assert noisy.noise_rms > quiet.noise_rms


def test_a_window_in_seconds_is_taken_at_the_datas_rate() -> None:
    for rate, samples in ((125.0, 11), (1000.0, 81)):
        choice = choose_filter(*_joint_record(rate, 1e-5), window_time=0.08, max_delay=-1.0)
        assert (choice.window, choice.lag, choice.source) == (samples, samples // 2, "setting")


def test_too_few_joint_states_cannot_size_the_filter() -> None:
    times, q = _joint_record(125.0, 1e-5, duration=0.2)
    with pytest.raises(InertialIdError, match="need"):
        choose_filter(times, q)


def _messages(rate: float, duration: float) -> PayloadPipeline:
    kinematics = SensorKinematics(bundled_urdf_path(), "ft_sensor")
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=1)
    sim = PayloadSimulation(kinematics, trajectory, seed=2)
    joint_t = np.arange(0.0, duration, 1.0 / rate)
    wrench_t = np.arange(0.0, duration, 1e-3)
    q, _ = sim.joint_states(joint_t)
    w = sim.wrench(wrench_t)
    gathering = Gathering(bundled_urdf_path(), GathererSettings())
    pipeline = PayloadPipeline(gathering, kinematics, OnlineEstimator())
    j = 0
    for k, t in enumerate(wrench_t):
        while j < joint_t.size and joint_t[j] <= t:
            pipeline.add_joint_state(1000.0 + joint_t[j], kinematics.joint_names, q[j])
            j += 1
        pipeline.add_wrench(1000.0 + t, w[k])
        if k % 100 == 99:
            pipeline.process()
    return pipeline


def test_samples_are_held_until_the_filter_is_chosen_and_none_is_lost() -> None:
    """Nothing leaves the gatherer before 4 s of joint states; then every wrench held so far
    comes out (only those without a whole filter window before them are not)."""
    pipeline = _messages(250.0, 3.9)
    assert pipeline.samples == 0 and pipeline.gathering.choice is None
    held = pipeline.gathering.wrenches_held
    assert held == 3900
    pipeline.finish()  # a record shorter than the decision time: chosen from what there is
    choice = pipeline.gathering.choice
    assert choice is not None and choice.rate == pytest.approx(250.0)
    lost = pipeline.gathering.synchronizer.counters["wrench_without_history"]
    assert pipeline.samples + lost + pipeline.gathering.wrenches_held == held
    assert lost <= choice.window_time * 1000.0 + 2


def test_the_choice_is_made_after_the_decision_time_while_streaming() -> None:
    pipeline = _messages(500.0, 6.0)
    assert pipeline.gathering.choice is not None and pipeline.samples > 5000


def test_the_gate_after_a_contact_covers_the_filters_past_span() -> None:
    """The same contact keeps ``filter_span`` seconds more of samples out of the estimate."""
    kinematics = SensorKinematics(bundled_urdf_path(), "ft_sensor")
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=1)
    sim = PayloadSimulation(kinematics, trajectory, seed=4,
                            contacts=(Contact(9.0, 0.5, (25.0, 0.0, 0.0)),))
    t = np.arange(0.0, 12.0, 1e-3)
    q, qd, qdd = trajectory(t)
    twist, proper = kinematics.compute(q, qd, qdd)
    wrench = sim.wrench(t)
    gated = {}
    for span in (0.0, 0.3):
        online = OnlineEstimator()
        for k in range(0, t.size, 100):
            s = slice(k, k + 100)
            online.add(t[s], twist[s], proper[s], wrench[s], filter_span=span)
            if k % 500 == 0:
                online.solve()
        assert len(online.contacts) == 1
        gated[span] = online.counters["gated"]
    assert gated[0.3] - gated[0.0] == pytest.approx(300, abs=5)


def test_a_filter_span_that_is_no_filters_is_refused() -> None:
    online = OnlineEstimator()
    with pytest.raises(InertialIdError, match="filter span"):
        online.add([1.0], np.zeros((1, 6)), np.zeros((1, 6)), np.zeros((1, 6)),
                   filter_span=float("nan"))


def test_joint_states_that_do_not_move_get_a_moderate_window() -> None:
    """An idle start: constant encoders show no motion and get the no-motion default (not
    the shortest window); their noise alone keeps the window from running to the longest."""
    times = np.arange(0.0, 4.0, 1.0 / 500.0)
    still = np.tile(np.linspace(-1.0, 1.0, 6), (times.size, 1))
    constant = choose_filter(times, still)
    assert constant.source == "default (no motion seen)"
    assert constant.window_time == pytest.approx(NO_MOTION_WINDOW_TIME, abs=2.0 / 500.0)
    noisy = choose_filter(times, still + np.random.default_rng(0).normal(scale=1e-5,
                                                                         size=still.shape))
    assert 0.05 <= noisy.window_time <= 0.15 and noisy.gain_error <= GAIN_TOLERANCE


def test_a_slow_motion_under_noisy_encoders_gets_a_long_window_its_gain_still_near_one() -> None:
    """0.11-0.33 Hz under 1e-4 rad of encoder noise: the band is read at the spectrum's
    0.25 Hz resolution and the gain weighed by the motion, so the window is no longer held at
    about 130 ms by leakage into the 1 Hz bin; the gain at the top harmonic stays within
    the tolerance."""
    times, q = _joint_record(250.0, 1e-4, period=9.0)
    choice = choose_filter(times, q)
    assert choice.window_time >= 0.2
    weights = derivative_weights(choice.window, choice.lag, choice.order, choice.rate)
    (gain,) = acceleration_gain(weights, choice.lag, choice.rate, np.array([3.0 / 9.0]))
    assert abs(gain - 1.0) <= GAIN_TOLERANCE


@given(st.sampled_from([5, 9, 17, 41, 65]), st.integers(2, 4), st.floats(100.0, 1000.0))
@settings(max_examples=30, deadline=None)
def test_weights_for_several_lags_are_each_lags_own(window: int, order: int,
                                                    rate: float) -> None:
    """One fit evaluated at every lag gives each lag's weights: twice the quadratic row of
    the pseudo-inverse of the Vandermonde matrix in the time (in samples) from that lag's
    sample, times the rate squared."""
    if window <= order:
        return
    lags = list(range(window // 2 + 1))
    together = lag_derivative_weights(window, lags, order, rate)
    for lag, weights in zip(lags, together, strict=True):
        samples = np.arange(window) - (window - 1 - lag)  # time in samples from the lag's
        vander = np.vander(samples.astype(float), order + 1, increasing=True)
        reference = 2.0 * np.linalg.pinv(vander)[2] * rate**2
        # the weights are large and sum to zero: compare on their scale
        np.testing.assert_allclose(weights, reference, rtol=0,
                                   atol=1e-8 * np.abs(reference).max())
        assert np.array_equal(derivative_weights(window, lag, order, rate), weights)
