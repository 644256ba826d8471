"""Errors in variables: the encoders' noise, estimated from the data, carried as the covariance
of the acceleration's noise, and removed from the information before solving."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from test_matched_filter import feed_in_stamp_order

from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.gathering.synchronizer import FixedLagSynchronizer
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.signals import PositionNoise, fourth_differences
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.core.statistics import MAX_NOISE_SHARE, SlidingWindow, SufficientStatistics


@given(st.lists(st.floats(0.5e-3, 3e-3), min_size=5, max_size=40),
       arrays(np.float64, (4, 2), elements=st.floats(-10.0, 10.0)))
@settings(max_examples=100, deadline=None)
def test_fourth_differences_vanish_on_cubics_on_any_stamps(gaps: list[float],
                                                           coefficients: np.ndarray) -> None:
    t = 1.7e3 + np.concatenate(([0.0], np.cumsum(gaps)))
    s = t - t[0]
    values = np.stack([s**k for k in range(4)], axis=1) @ coefficients  # two cubics
    differences = fourth_differences(t, values)
    assert differences.shape == (t.size - 4, 2)
    scale = np.abs(coefficients).sum() * max(1.0, s[-1] ** 3)
    np.testing.assert_allclose(differences, 0.0, atol=1e-9 * scale)


def test_fourth_differences_of_white_noise_have_its_std() -> None:
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(1.5e-3, 2.5e-3, 20001))  # jittered stamps
    differences = fourth_differences(t, 0.7 * rng.normal(size=(t.size, 1)))
    assert np.std(differences) == pytest.approx(0.7, rel=0.02)


def test_position_noise_is_found_under_fast_motion_and_spikes() -> None:
    """Three joints moving at up to 5 rad/s with noise of 1e-5, 3e-5 and 0 rad, stamps
    jittered, a few glitches: the estimate is within 5 % (0 stays below 1e-8), and nothing is
    assumed before enough data."""
    rng = np.random.default_rng(5)
    t = np.cumsum(rng.uniform(1.8e-3, 2.2e-3, 3000))
    clean = np.stack([np.sin(5.0 * t), 0.5 * np.cos(3.0 * t + 1.0), 0.2 * t**2], axis=1)
    sigma = np.array([1e-5, 3e-5, 0.0])
    noisy = clean + sigma * rng.normal(size=clean.shape)
    noisy[rng.integers(0, t.size, 15), 0] += 1e-3  # glitches
    noise = PositionNoise(3)
    noise.add(t[:20], noisy[:20])
    np.testing.assert_array_equal(noise.std, 0.0)  # 16 differences < minimum
    for start in range(20, t.size, 37):  # stretches as the synchronizer hands them over
        noise.add(t[start - 4:start + 37], noisy[start - 4:start + 37])
    np.testing.assert_allclose(noise.std[:2], sigma[:2], rtol=0.05)
    assert noise.std[2] < 1e-8


def _sync_run(sim: PayloadSimulation, model: SensorKinematics, joint_t: np.ndarray,
              wrench_t: np.ndarray, position: np.ndarray, wrench: np.ndarray,
              jacobians: bool = True, window: int = 41, lag: int = 2, order: int = 3):
    sync = FixedLagSynchronizer(model.nv, window=window, order=order, lag=lag,
                                kinematics=model.compute,
                                jacobians=model.jacobians if jacobians else None)
    return feed_in_stamp_order(sync, joint_t, position, wrench_t, wrench)[-1]


def test_the_acceleration_noise_covariance_matches_monte_carlo() -> None:
    """The bundled arm at 500 Hz joints / 1 kHz wrench, encoder noise 1e-4 rad: the
    covariance each sample carries matches the spread of its smoothed proper acceleration over
    150 noise draws (the mean of each diagonal entry within 12 %, correlations within 0.1)."""
    model = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.5, max_velocity=1.0, seed=4)
    joint_t = np.arange(0.0, 0.3, 0.002)
    wrench_t = np.arange(0.0, 0.3, 0.001)
    sim = PayloadSimulation(model, trajectory, force_noise_std=0.0, torque_noise_std=0.0,
                            joint_noise_std=0.0)
    clean_q, _ = sim.joint_states(joint_t)
    wrench = sim.wrench(wrench_t, noise=False)
    clean = _sync_run(sim, model, joint_t, wrench_t, clean_q, wrench, jacobians=False)
    rng = np.random.default_rng(8)
    errors, predicted = [], []
    for _ in range(150):
        batch = _sync_run(sim, model, joint_t, wrench_t,
                          clean_q + 1e-4 * rng.normal(size=clean_q.shape), wrench)
        errors.append(batch.proper_acceleration - clean.proper_acceleration)
        predicted.append(batch.acceleration_noise)
    errors, predicted = np.array(errors), np.array(predicted)  # (draws, N, 6), (.., 6, 6)
    empirical = np.einsum("rni,rnj->nij", errors, errors) / errors.shape[0]
    expected = predicted.mean(axis=0)
    ratio = np.diagonal(empirical, axis1=1, axis2=2).mean(0) / np.diagonal(
        expected, axis1=1, axis2=2).mean(0)
    np.testing.assert_allclose(ratio, 1.0, atol=0.12)
    e_std = np.sqrt(np.diagonal(empirical.mean(0)))
    p_std = np.sqrt(np.diagonal(expected.mean(0)))
    np.testing.assert_allclose(empirical.mean(0) / np.outer(e_std, e_std),
                               expected.mean(0) / np.outer(p_std, p_std), atol=0.1)


@pytest.mark.parametrize(("window", "order", "lag"),
                         [(3, 2, 0), (5, 3, 0), (7, 3, 1), (41, 3, 20)])
def test_every_window_and_lag_carries_the_noise(window: int, order: int, lag: int) -> None:
    """Short windows and lag 0 (the newest joint sample in the window) too: every sample
    gets a covariance, and the same (to rounding: the batch's size picks pinocchio's loop or
    the vectorised chain for the Jacobians) whether popped after each wrench or once."""
    model = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.5, max_velocity=1.0, seed=6)
    sim = PayloadSimulation(model, trajectory, joint_noise_std=1e-5, seed=6)
    joint_t, wrench_t = np.arange(0.0, 0.4, 0.002), np.arange(0.0, 0.4, 0.001)
    position, _ = sim.joint_states(joint_t)
    wrench = sim.wrench(wrench_t)
    once = _sync_run(sim, model, joint_t, wrench_t, position, wrench, window=window, lag=lag,
                     order=order)
    sync = FixedLagSynchronizer(model.nv, window=window, order=order, lag=lag,
                                kinematics=model.compute, jacobians=model.jacobians)
    batches = feed_in_stamp_order(sync, joint_t, position, wrench_t, wrench, every=1)
    times = np.concatenate([b.times for b in batches if len(b)])
    noise = np.concatenate([b.acceleration_noise for b in batches if len(b)])
    assert noise.shape == (times.size, 6, 6) and len(once) > 300
    # (with a 3-sample window the very first sample depends on the pops: compare the common)
    common, mine, theirs = np.intersect1d(times, once.times, return_indices=True)
    assert common.size >= len(once) - 1
    np.testing.assert_allclose(noise[mine], once.acceleration_noise[theirs], rtol=1e-12,
                               atol=1e-12 * np.abs(noise).max())
    assert np.all(np.diagonal(noise[100:], axis1=1, axis2=2) > 0.0)


def _positive_definite(draw: st.DrawFn, n: int, scale: float) -> np.ndarray:
    a = draw(arrays(np.float64, (n, n), elements=st.floats(-1.0, 1.0)))
    return scale * (a @ a.T + 1e-3 * np.eye(n))


@given(st.data(), st.floats(0.01, 3.0))
@settings(max_examples=100, deadline=None)
def test_the_correction_is_exact_when_small_and_keeps_the_cost_convex(
        data: st.DataObject, size: float) -> None:
    h = _positive_definite(data.draw, 6, 1.0)
    noise = size * _positive_definite(data.draw, 6, 1.0) * np.linalg.eigvalsh(h)[0]
    stats = SufficientStatistics(6)
    stats.information, stats.noise_information = h, noise
    corrected = stats.corrected().information
    shares = np.sort(np.linalg.eigvals(np.linalg.solve(h, noise)).real)
    if shares[-1] <= MAX_NOISE_SHARE:
        np.testing.assert_allclose(corrected, h - noise, atol=1e-12 * np.abs(h).max())
    # Along each generalised eigen-direction the share is removed in full, up to the cap.
    kept = np.sort(np.linalg.eigvals(np.linalg.solve(h, corrected)).real)
    np.testing.assert_allclose(kept, np.sort(1.0 - np.minimum(shares, MAX_NOISE_SHARE)),
                               rtol=1e-6, atol=1e-9)
    assert np.linalg.eigvalsh(corrected)[0] > 0.0


def test_noise_information_follows_the_statistics() -> None:
    """Subtracted in the block scores, scaled with forgetting, added by merges and copies,
    untouched by the offset's elimination (it lies in pi's block)."""
    rng = np.random.default_rng(2)
    n = 16
    stats = SufficientStatistics(n, score_block=4)
    noise = np.zeros((n, n))
    noise[:10, :10] = np.diag(rng.uniform(0.1, 1.0, 10))
    blocks = []
    for k in range(10):
        a, b = rng.normal(size=(12, n)), rng.normal(size=12)
        stats.add(a, b, np.ones(12), 2, noise)
        if k % 2 == 0:
            blocks.append([np.zeros((n, n)), np.zeros(n)])
        blocks[-1][0] += a.T @ a - noise  # each block: its corrected information
        blocks[-1][1] += a.T @ b
    np.testing.assert_allclose(stats.noise_information, 10 * noise)
    x = rng.normal(size=n)
    scores = np.array([c - h @ x for h, c in blocks])
    np.testing.assert_allclose(stats.scores.meat(x), scores.T @ scores, rtol=1e-9)
    other = stats.copy()
    stats.merge(other)
    np.testing.assert_allclose(stats.noise_information, 20 * noise)
    stats.scale(0.5)
    np.testing.assert_allclose(stats.noise_information, 10 * noise)
    stats.eliminate_offset(10)
    np.testing.assert_allclose(stats.noise_information, 10 * noise)
    np.testing.assert_allclose(stats.corrected().information[:10, :10],
                               stats.information[:10, :10] - 10 * noise[:10, :10])


def test_corrected_least_squares_removes_the_attenuation() -> None:
    """y = a x + e with a measured as a + d (var 0.25 against var(a) = 1): least squares
    shrinks x by 1 / 1.25; with E[d^2] per row given, the estimate is unbiased."""
    rng = np.random.default_rng(9)
    raw, fixed = [], []
    for _ in range(200):
        a = rng.normal(size=(400, 1))
        y = 2.0 * a[:, 0] + 0.1 * rng.normal(size=400)
        measured = a + 0.5 * rng.normal(size=a.shape)
        stats = SufficientStatistics(1)
        stats.add(measured, y, np.ones(400), 400, np.array([[0.25 * 400]]))
        raw.append(stats.moment[0] / stats.information[0, 0])
        corrected = stats.corrected()
        fixed.append(corrected.moment[0] / corrected.information[0, 0])
    assert np.mean(raw) == pytest.approx(2.0 / 1.25, abs=0.01)
    assert np.mean(fixed) == pytest.approx(2.0, abs=0.01)


def _slow_run(seed: int, errors_in_variables: bool):
    """20 s of a slow, poorly exciting motion, 1e-5 rad encoder noise, low wrench noise: the
    case where the encoders' noise biased the mass by several std."""
    model = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.15, max_velocity=0.2,
                                          seed=seed)
    sim = PayloadSimulation(model, trajectory, force_noise_std=0.04, torque_noise_std=0.002,
                            joint_noise_std=1e-5, seed=seed)
    joint_t = np.arange(0.0, 20.0, 0.002)
    wrench_t = np.arange(0.0, 20.0, 0.001)
    position, _ = sim.joint_states(joint_t)
    wrench = sim.wrench(wrench_t)
    # The 80 ms window and 4 ms lag (41 and 2 samples at 500 Hz) under which the shrinkage
    # was measured: a window chosen from the data is longer here and leaves less noise.
    gathering = Gathering(bundled_urdf_path(),
                          GathererSettings(window=0.08, delay=0.004,
                                           errors_in_variables=errors_in_variables))
    pipeline = PayloadPipeline(gathering, model, OnlineEstimator())
    for start in range(0, wrench_t.size, 500):
        joints = (joint_t >= wrench_t[start]) & (joint_t < wrench_t[start] + 0.5)
        for t, q in zip(joint_t[joints], position[joints], strict=True):
            pipeline.add_joint_state(t, model.joint_names, q)
        for t, w in zip(wrench_t[start:start + 500], wrench[start:start + 500], strict=True):
            pipeline.add_wrench(t, w)
        pipeline.process()
    estimate = pipeline.finish()
    return (estimate.pi[0] - sim.payload.mass) / estimate.std[0]


def test_the_slow_motion_mass_is_no_longer_shrunk() -> None:
    """Without the correction the mass of three slow runs is low by more than 2 std on
    average; with it the mean z is within 1."""
    without = np.mean([_slow_run(seed, False) for seed in (1, 2, 3)])
    with_correction = [_slow_run(seed, True) for seed in (1, 2, 3)]
    assert without < -2.0
    assert abs(np.mean(with_correction)) < 1.0


def test_the_sliding_window_keeps_the_noise_of_its_blocks() -> None:
    """Blocks of 4 samples, at most 2 kept: the window's noise is that of the samples it
    holds, and its block scores use the corrected blocks."""
    rng = np.random.default_rng(4)
    window = SlidingWindow(3, block_samples=4, max_blocks=2)
    rows, noises = [], []
    for _ in range(7):  # 2 samples each: blocks close every second add
        a, b = rng.normal(size=(2, 3)), rng.normal(size=2)
        noise = np.diag(rng.uniform(0.1, 1.0, 3))
        window.add(a, b, np.ones(2), 2, noise)
        rows.append((a, b))
        noises.append(noise)
    # Kept: the blocks of adds 3-4 and 5-6 (the one of adds 1-2 left) and add 7 (current).
    stats = window.statistics
    np.testing.assert_allclose(stats.noise_information, sum(noises[2:]))
    x = rng.normal(size=3)
    blocks = [(2, 4), (4, 6), (6, 7)]
    scores = np.array([sum(rows[k][0].T @ rows[k][1] - (rows[k][0].T @ rows[k][0] - noises[k])
                           @ x for k in range(lo, hi)) for lo, hi in blocks])
    np.testing.assert_allclose(stats.scores.meat(x), scores.T @ scores, rtol=1e-9)


NOISY_TRUTH = np.concatenate((np.linspace(-1.5, 1.5, 10), np.zeros(6)))


def _noisy_rows(rng: np.random.Generator, rows: int, noise_std: float
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of 16 unknowns whose first 10 columns are measured with white noise, targets with
    little noise of their own (``b = A NOISY_TRUTH + e``), and ``E[dA^T dA]``: the rows' noise
    dominates the residual."""
    truth = NOISY_TRUTH
    a = rng.normal(size=(rows, 16))
    b = a @ truth + 0.1 * rng.normal(size=rows)
    measured = a.copy()
    measured[:, :10] += noise_std * rng.normal(size=(rows, 10))
    noise = np.zeros((16, 16))
    noise[:10, :10] = rows * noise_std**2 * np.eye(10)
    return measured, b, noise


@pytest.mark.parametrize("noise_std", [0.4, 3.0], ids=["corrected", "capped"])
def test_corrected_statistics_keep_the_datas_residual(noise_std: float) -> None:
    """The rows' noise is part of the equation error: the corrected statistics' residual is
    the data's (capped correction too), through copies, merges, forgetting and a second
    correction."""
    rng = np.random.default_rng(4)
    a, b, noise = _noisy_rows(rng, 500, noise_std)
    stats = SufficientStatistics(16)
    stats.add(a, b, np.ones(500), 500, noise)
    x = rng.normal(size=16)
    raw = float(np.sum((a @ x - b) ** 2))
    corrected = stats.corrected()
    assert not np.allclose(corrected.information, stats.information)
    assert corrected.residual(x) == pytest.approx(raw, rel=1e-9)
    assert corrected.corrected().residual(x) == pytest.approx(raw, rel=1e-9)
    twice = corrected.copy()
    twice.merge(corrected)
    twice.scale(0.3)
    assert twice.residual(x) == pytest.approx(0.6 * raw, rel=1e-9)


def test_the_classical_std_of_corrected_least_squares_matches_its_spread() -> None:
    """When the rows' noise outweighs the targets' (x^T E[dA^T dA] x above the residual
    left after the fit), the classical std stays positive and matches the Monte Carlo spread
    of the corrected estimate (subtracting that noise from the residual gave a std of 0)."""
    rng = np.random.default_rng(11)
    estimates, stds = [], []
    for _ in range(300):
        a, b, noise = _noisy_rows(np.random.default_rng(rng.integers(1 << 32)), 400, 0.6)
        stats = SufficientStatistics(16)
        stats.add(a, b, np.ones(400), 400, noise)
        estimate = least_squares(stats.corrected())
        assert estimate.covariance_type == "classical"
        estimates.append(estimate.pi - NOISY_TRUTH[:10])
        stds.append(estimate.std)
    assert np.min(stds) > 0.0
    ratio = np.sqrt(np.mean(np.square(estimates), axis=0) / np.mean(np.square(stds), axis=0))
    # sigma^2 H_c^-1 alone gave 1.10-1.32 here (mean 1.22); the first-order formula leaves a
    # few per cent at this share of noise.
    assert np.all((ratio > 0.85) & (ratio < 1.15)), ratio
    assert 0.95 < np.mean(ratio) < 1.08, ratio
