"""Matched filtering: the Savitzky-Golay acceleration as a smoothed true acceleration, and the
gatherer's filter without bias on noise-free data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.gathering.features import decode_features, encode_features
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.gathering.synchronizer import FixedLagSynchronizer
from inertial_id.core.gathering.synchronizer.filters import Windows, matched_samples
from inertial_id.core.gathering.synchronizer.kernel import compiled_kernel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.regressor import angular_products, predicted_wrench
from inertial_id.core.samples import SyncedSamples
from inertial_id.core.signals import (
    fit_projections,
    hat_kernel_at,
    second_difference_weights,
    second_differences,
)
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)


def _stamps(gaps: list[float]) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(gaps)))


@given(st.lists(st.floats(0.5e-3, 3e-3), min_size=8, max_size=45),
       st.integers(2, 5), st.floats(0.0, 1.0), st.integers(0, 2**31))
@settings(max_examples=100, deadline=None)
def test_second_difference_weights_reproduce_the_filter(gaps: list[float], order: int,
                                                        where: float, seed: int) -> None:
    """sum d_k q_k = sum gamma_k D_k for any samples, on irregular stamps."""
    t = _stamps(gaps)
    if t.size <= order + 1:
        return
    projection, centre, scale = fit_projections(t[None], order)
    at = t[0] + where * (t[-1] - t[0])
    s = (at - centre[0]) / scale[0]
    m = np.arange(2, order + 1)
    d = (m * (m - 1) * s ** (m - 2) / scale[0] ** 2) @ projection[0, 2:]
    gamma = second_difference_weights(t[None], d[None])[0]
    q = np.random.default_rng(seed).normal(size=(t.size, 3))
    _, dd = second_differences(t, q)
    np.testing.assert_allclose(gamma @ dd, d @ q, rtol=1e-8, atol=1e-8 * np.abs(d).sum())
    # Unit gain: a constant acceleration passes unchanged (the fit reproduces quadratics).
    assert gamma.sum() == pytest.approx(1.0, rel=1e-9)


def test_the_acceleration_is_the_true_one_smoothed_by_the_hat_kernel() -> None:
    """The fit's acceleration of q(t) = sin(w t) equals the integral of ghat q''; ghat has unit
    area and vanishes outside the window (the default window and lag at 500 Hz)."""
    t = np.arange(41) * 0.002 + 0.00013 * np.sin(np.arange(41))  # jittered stamps
    projection, centre, scale = fit_projections(t[None], 3)
    at = t[38]
    s = (at - centre[0]) / scale[0]
    d = np.array([2.0, 6.0 * s]) / scale[0] ** 2 @ projection[0, 2:]
    gamma = second_difference_weights(t[None], d[None])
    fine = np.linspace(t[0] - 0.01, t[-1] + 0.01, 200001)
    ghat = hat_kernel_at(t[None], gamma, fine[None])[0]
    step = fine[1] - fine[0]
    assert np.sum(ghat) * step == pytest.approx(1.0, abs=1e-6)
    assert not np.any(ghat[(fine < t[0]) | (fine > t[-1])])
    for omega in (3.0, 20.0, 60.0):
        fitted = d @ np.sin(omega * t)
        smoothed = np.sum(ghat * -omega**2 * np.sin(omega * fine)) * step
        assert fitted == pytest.approx(smoothed, rel=1e-5, abs=1e-6 * omega**2)


@given(st.lists(st.floats(-3.0, 3.0), min_size=12, max_size=12))
def test_features_round_trip(values: list[float]) -> None:
    twist, proper = np.array(values[:6])[None], np.array(values[6:])[None]
    back = decode_features(encode_features(twist, proper))
    np.testing.assert_allclose(back[0], twist, atol=1e-12)
    np.testing.assert_allclose(back[1], proper, atol=1e-12)
    np.testing.assert_allclose(back[2], angular_products(twist[:, 3:]), atol=1e-12)


def _simulation(seconds: float = 6.0):
    model = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.6, max_velocity=1.5, seed=10)
    sim = PayloadSimulation(model, trajectory, force_noise_std=0.0, torque_noise_std=0.0,
                            joint_noise_std=0.0, velocity_noise_std=0.0)
    joint_t = np.arange(0.0, seconds, 0.002)
    wrench_t = np.arange(0.0, seconds, 0.001)
    position, _ = sim.joint_states(joint_t)
    return model, sim, joint_t, position, wrench_t, sim.wrench(wrench_t, noise=False)


def feed_in_stamp_order(sync: FixedLagSynchronizer, joint_t: np.ndarray, position: np.ndarray,
                        wrench_t: np.ndarray, wrench: np.ndarray,
                        every: int | None = None) -> list[SyncedSamples]:
    """Joint states and wrenches into ``sync`` in stamp order (a joint state first on a tie),
    popping after every ``every``-th wrench (None: only at the end); the batches popped."""
    batches, j = [], 0
    for i, t in enumerate(wrench_t):
        while j < joint_t.size and joint_t[j] <= t:
            sync.add_joint_state(joint_t[j], position[j])
            j += 1
        sync.add_wrench(t, wrench[i])
        if every is not None and i % every == 0:
            batches.append(sync.pop_ready())
    batches.append(sync.pop_ready())
    return batches


def test_pop_frequency_does_not_change_the_matched_output() -> None:
    """Popping after every wrench, every 7th or once gives the same samples, the estimated
    acceleration noise (1e-5 rad on the positions) included."""
    model, _, joint_t, position, wrench_t, wrench = _simulation(1.0)
    position = position + 1e-5 * np.random.default_rng(1).normal(size=position.shape)
    outputs = []
    for every in (1, 7, None):
        sync = FixedLagSynchronizer(6, window=41, lag=2, kinematics=model.compute,
                                    jacobians=model.jacobians)
        batches = feed_in_stamp_order(sync, joint_t, position, wrench_t, wrench, every)
        outputs.append([np.concatenate([getattr(b, f) for b in batches if len(b)])
                        for f in ("times", "wrench", "twist", "proper_acceleration",
                                  "acceleration_noise")])
    assert outputs[0][-1].max() > 0.0  # the noise was estimated
    for other in outputs[1:]:
        for a, b in zip(outputs[0], other, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("matched", [True, False])
def test_noise_free_data_give_the_inertia_without_filter_bias(matched: bool) -> None:
    """Default window and lag, 1 kHz wrench / 500 Hz joints, fast trajectory, no noise: the
    matched filter recovers every inertia entry to 0.05 % of the largest; the joints-only
    filter is off by more than 0.3 % (its bias, which this test would see come back)."""
    model, sim, joint_t, position, wrench_t, wrench = _simulation()
    gathering = Gathering(bundled_urdf_path(), GathererSettings(window=0.08, delay=0.004,
                                                                matched=matched))
    pipeline = PayloadPipeline(gathering, model, OnlineEstimator())
    order = np.argsort(np.concatenate((joint_t, wrench_t)), kind="stable")
    stamps = np.concatenate((joint_t, wrench_t))[order]
    is_joint = (order < joint_t.size)
    j = w = 0
    for t, joint in zip(stamps, is_joint, strict=True):
        if joint:
            pipeline.add_joint_state(t, model.joint_names, position[j])
            j += 1
        else:
            pipeline.add_wrench(t, wrench[w])
            w += 1
    pipeline.process()
    statistics = pipeline.online.identifier.statistics
    pi = np.linalg.solve(statistics.information, statistics.moment)[:10]  # least squares
    truth = sim.payload.pi
    inertia_error = np.max(np.abs(pi[4:] - truth[4:])) / np.max(np.abs(truth[4:]))
    print(f"inertia error {inertia_error:.2e}, mass error {abs(pi[0] - truth[0]) / truth[0]:.2e}")
    if matched:
        assert inertia_error < 5e-4
        assert abs(pi[0] - truth[0]) < 5e-5 * truth[0]
    else:
        assert inertia_error > 3e-3


def test_smoothed_angular_velocity_products_keep_the_equation_exact_on_long_windows() -> None:
    """Fast motion, no noise, a 150 ms window: with the products ``w_i w_j`` smoothed as
    features of their own, the filtered wrench is the prediction from the filtered kinematics
    to 1e-5 N; multiplying the smoothed ``w`` by itself (as before) misses the spread of ``w``
    over the window (4e-3 N here), and that residual is what biased the estimate."""
    model, sim, joint_t, position, wrench_t, wrench = _simulation(3.0)
    assert np.linalg.norm(sim.payload.com) > 0.05  # the centripetal terms carry the payload
    gathering = Gathering(bundled_urdf_path(), GathererSettings(window=0.15, delay=0.004),
                          model)
    order = np.argsort(np.concatenate((joint_t, wrench_t)), kind="stable")
    batches = []
    for k in order:
        if k < joint_t.size:
            gathering.add_joint_state(joint_t[k], model.joint_names, position[k])
        else:
            gathering.add_wrench(wrench_t[k - joint_t.size], wrench[k - joint_t.size])
            batches.append(gathering.pop_ready())
    b = SyncedSamples(*(np.concatenate([getattr(x, f) for x in batches if len(x)])
                        for f in ("times", "position", "velocity", "acceleration", "wrench",
                                  "wrench_raw", "twist", "proper_acceleration",
                                  "acceleration_noise", "angular_products")))
    assert b.angular_products is not None and len(b) > 2000

    def residual(products: np.ndarray | None) -> float:
        predicted = predicted_wrench(sim.payload.pi, b.twist, b.proper_acceleration,
                                     sim.offset, sim.sign, products)
        return float(np.abs(b.wrench - predicted)[:, :3].max())  # N

    exact, factored = residual(b.angular_products), residual(None)
    print(f"largest force residual: {exact:.2e} N with the smoothed products, "
          f"{factored:.2e} N with the smoothed w's")
    assert exact < 1e-4  # what remains: the three-point differences at the joint samples
    assert factored > 100 * exact and factored > 1e-4


def _random_windows(seed: int, jitter: float, width: int, per_window: int,
                    strided: bool) -> tuple[Windows, np.ndarray]:
    """Windows as the synchroniser cuts them from one record: joint stamps at ~500 Hz and
    wrench stamps at ``per_window`` times that rate, both with ``jitter`` (share of a
    period), random values; the wrench windows a view of the record or a copy."""
    rng = np.random.default_rng(seed)
    joint_t = np.cumsum(2e-3 * (1.0 + jitter * rng.uniform(-0.5, 0.5, 200)))
    wrench_t = np.cumsum(2e-3 / per_window * (1.0 + jitter * rng.uniform(-0.5, 0.5,
                                                                          200 * per_window)))
    wrench = rng.normal(size=(wrench_t.size, 6))
    centres = np.arange(width, 200 - width)
    k_wrench = int(np.ceil(width * per_window)) + 2
    index = np.flatnonzero((wrench_t > joint_t[centres[0]]) & (wrench_t < joint_t[centres[-1]])
                           & (np.arange(wrench_t.size) >= k_wrench // 2)
                           & (np.arange(wrench_t.size) + k_wrench < wrench_t.size))
    ks = np.searchsorted(joint_t, wrench_t[index], side="right") - 1
    lag = width // 4
    starts = index - k_wrench // 2
    # Consecutive starts: a read-only strided view, as the synchroniser's usual batch;
    # else a copy (fancy indexing).
    picked = starts[::2] if not strided else starts
    index = index[::2] if not strided else index
    ks = ks[::2] if not strided else ks
    first = ks - (width - 1 - lag)
    windows, which = np.unique(first, return_inverse=True)
    joint_windows = windows[:, None] + np.arange(width)
    wrench_windows = sliding_window_view(wrench, k_wrench, axis=0)
    stamp_windows = sliding_window_view(wrench_t, k_wrench, axis=0)
    if strided:
        wrench_windows = wrench_windows[picked[0]:picked[-1] + 1]
        stamp_windows = stamp_windows[picked[0]:picked[-1] + 1]
    else:
        wrench_windows, stamp_windows = wrench_windows[picked], stamp_windows[picked]
    knot = np.searchsorted(joint_t, stamp_windows, side="right") - 1
    position = rng.normal(size=(joint_t.size, 3))
    features = rng.normal(size=(windows.size, width - 2, 18))
    w = Windows(wrench_t[index], which, joint_t[joint_windows], position[joint_windows], None,
                stamp_windows, wrench_windows, wrench[index], knot, windows)
    return w, features


@given(st.integers(0, 2**31), st.floats(0.0, 0.6), st.sampled_from([9, 17, 33]),
       st.sampled_from([1, 2, 3]), st.booleans(), st.booleans())
@settings(max_examples=40, deadline=None)
def test_the_compiled_kernel_is_the_numpy_filter(seed: int, jitter: float, width: int,
                                                 per_window: int, noise: bool,
                                                 strided: bool) -> None:
    """The per-sample evaluation compiled with numba gives what the numpy reference gives:
    smoothed wrench, kinematics and acceleration noise, on jittered stamps, read-only
    strided views or copies."""
    w, features = _random_windows(seed, jitter, width, per_window, strided)
    rng = np.random.default_rng(seed + 1)
    windows = w.joint_t.shape[0]
    noise_at = ((rng.normal(size=(windows, 6, 3)), rng.uniform(0, 1e-8, (windows, 3)))
                if noise else None)
    reference = matched_samples(w, features, 3, noise_at, compiled=False)
    compiled = matched_samples(w, features, 3, noise_at, compiled=True)
    assert compiled_kernel() is not None  # numba is a dependency: the kernel must run here
    for name in ("wrench", "twist", "proper_acceleration", "angular_products",
                 "acceleration_noise", "position", "acceleration"):
        a, b = getattr(reference, name), getattr(compiled, name)
        if a is None:
            assert b is None and not noise
            continue
        np.testing.assert_allclose(b, a, rtol=1e-11, atol=1e-11 * np.abs(a).max(), err_msg=name)
