"""A drifting F/T bias (inertial_id.core.estimation.drift) and a stepping one (a driver's
re-zero, inertial_id.core.estimation.bias_step): the normal equations of the drift's rows, the
profiled solve, and the online estimator on simulated recordings with drift, a re-zero and a
push, and with a contact that does not end."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.estimation.drift import (
    DRIFT as DRIFT_BLOCK,
)
from inertial_id.core.estimation.drift import (
    N_WITH_DRIFT,
    DriftNormalEquations,
    drift_of,
    drift_prior_precision,
    profile_drift,
)
from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.estimation.payload import PayloadConfig
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import (
    PAYLOAD_ON_SENSOR,
    BatchNormalEquations,
    batch_gram,
    measurement_matrix,
)
from inertial_id.core.sensor_conditions import SensorConditions, rezero_steps
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.core.statistics import SufficientStatistics

RATE = 500.0
DURATION = 60.0
WEIGHTS = np.repeat([1.0 / 0.08**2, 1.0 / 0.004**2], 3)
DRIFT = np.array([0.0, 0.0, 1.0 / 60.0, 0.02 / 120.0, 0.0, 0.0])  # 1 N/min in fz


def rows_with_drift(twist, proper, tau):
    """The rows ``[s Y, I6, tau I6]`` (6N, 22) built one sample at a time."""
    a = measurement_matrix(twist, proper, PAYLOAD_ON_SENSOR)  # (6N, 16)
    drift = np.kron(tau[:, None], np.ones((6, 1))) * np.tile(np.eye(6), (tau.size, 1))
    return np.hstack((a, drift))


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 30))
def test_drift_normal_equations_match_the_rows(seed, n):
    rng = np.random.default_rng(seed)
    twist, proper, wrench = (rng.normal(size=(n, 6)) for _ in range(3))
    tau = rng.uniform(-50.0, 50.0, n)
    information, moment, energy = DriftNormalEquations(
        BatchNormalEquations(PAYLOAD_ON_SENSOR, WEIGHTS))(
        batch_gram(twist, proper, wrench, None, tau))
    a = rows_with_drift(twist, proper, tau)
    w = np.tile(WEIGHTS, n)
    scale = np.abs(a.T * w @ a).max()
    np.testing.assert_allclose(information, a.T * w @ a, atol=1e-9 * scale)
    np.testing.assert_allclose(moment, a.T * w @ wrench.ravel(),
                               atol=1e-9 * np.abs(moment).max())
    assert energy == pytest.approx(float(wrench.ravel() ** 2 @ w), rel=1e-12)


def test_the_profiled_solve_is_the_joint_least_squares_fit():
    rng = np.random.default_rng(3)
    n = 400
    twist, proper = rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    tau = np.linspace(0.0, 40.0, n)
    x = np.concatenate((rng.normal(size=10), rng.normal(size=6), 0.05 * rng.normal(size=6)))
    a = rows_with_drift(twist, proper, tau)
    wrench = (a @ x).reshape(n, 6) + 0.01 * rng.normal(size=(n, 6))
    stats = SufficientStatistics(N_WITH_DRIFT)
    stats.add_normal_equations(*DriftNormalEquations(BatchNormalEquations(
        PAYLOAD_ON_SENSOR, WEIGHTS))(batch_gram(twist, proper, wrench, None, tau)), 6 * n, n)
    full = np.linalg.solve(stats.information, stats.moment)
    profiled, profile = profile_drift(stats, tau[-1])
    estimate = least_squares(profiled)
    np.testing.assert_allclose(estimate.pi, full[:10], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(estimate.offset, full[10:16] + tau[-1] * full[16:], atol=1e-7)
    drift = drift_of(estimate, profile, profiled, 100.0 + tau[-1])
    np.testing.assert_allclose(drift.rate, full[16:], atol=1e-9)
    assert np.all(np.abs(drift.rate - x[16:]) < 4.0 * drift.std)
    assert drift.time == 100.0 + tau[-1]


def test_the_drift_prior_is_a_zero_mean_prior_on_the_rate():
    """Profiled with the prior, the fit is the joint fit of ``[pi; b0; d]`` with the prior's
    precision on ``d`` alone (in either parameterisation of the bias ``d`` is the same), and
    the drift's std shrinks under it."""
    rng = np.random.default_rng(4)
    n = 60
    twist, proper = rng.normal(size=(n, 6)), rng.normal(size=(n, 6))
    tau = np.linspace(0.0, 1.0, n)
    x = np.concatenate((rng.normal(size=10), rng.normal(size=6), 0.05 * rng.normal(size=6)))
    wrench = (rows_with_drift(twist, proper, tau) @ x).reshape(n, 6)
    wrench += 0.01 * rng.normal(size=(n, 6))
    stats = SufficientStatistics(N_WITH_DRIFT)
    stats.add_normal_equations(*DriftNormalEquations(BatchNormalEquations(
        PAYLOAD_ON_SENSOR, WEIGHTS))(batch_gram(twist, proper, wrench, None, tau)), 6 * n, n)
    precision = drift_prior_precision(0.01)
    np.testing.assert_allclose(precision, [1e4] * 3 + [1e6] * 3)
    joint = stats.information.copy()
    joint[DRIFT_BLOCK, DRIFT_BLOCK] += np.diag(precision)
    full = np.linalg.solve(joint, stats.moment)
    profiled, profile = profile_drift(stats, tau[-1], precision)
    estimate = least_squares(profiled)
    np.testing.assert_allclose(estimate.pi, full[:10], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(estimate.offset, full[10:16] + tau[-1] * full[16:], atol=1e-7)
    with_prior = drift_of(estimate, profile, profiled, tau[-1])
    np.testing.assert_allclose(with_prior.rate, full[16:], atol=1e-9)
    flat, flat_profile = profile_drift(stats, tau[-1])
    without = drift_of(least_squares(flat), flat_profile, flat, tau[-1])
    assert np.all(with_prior.std < without.std)
    assert drift_prior_precision(0.0) is None


@dataclass
class Recording:
    t: np.ndarray
    twist: np.ndarray
    proper: np.ndarray
    wrench: np.ndarray
    bias_end: np.ndarray
    sim: PayloadSimulation


def record(conditions: SensorConditions, contacts=(), noise=(0.08, 0.004),
           duration=DURATION) -> Recording:
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=1)
    sim = PayloadSimulation(kinematics, trajectory, force_noise_std=noise[0],
                            torque_noise_std=noise[1], contacts=contacts, seed=2)
    t = np.arange(0.0, duration, 1.0 / RATE)
    twist, proper = kinematics.compute(*trajectory(t))
    wrench = sim.wrench(t) + conditions.bias_change(t, rezero_steps(sim, conditions))
    bias_end = sim.offset + conditions.bias_change([t[-1]], rezero_steps(sim, conditions))[0]
    return Recording(t, twist, proper, wrench, bias_end, sim)


def run(rec: Recording, drift: bool, noise=(0.08, 0.004), until: float = np.inf,
        prior: float = PayloadConfig.bias_drift_prior, **online) -> OnlineEstimator:
    config = OnlineConfig(payload=PayloadConfig(force_noise_std=noise[0],
                                                torque_noise_std=noise[1], bias_drift=drift,
                                                bias_drift_prior=prior),
                          **online)
    est = OnlineEstimator(config)
    for k in range(0, int(np.searchsorted(rec.t, until)), 20):
        s = slice(k, k + 20)
        est.add(rec.t[s], rec.twist[s], rec.proper[s], rec.wrench[s])
        if (k // 20) % 25 == 24:
            est.solve()
    est.solve()
    return est


@pytest.fixture(scope="module")
def drifting() -> Recording:
    return record(SensorConditions(drift=tuple(DRIFT)))


def test_a_drifting_bias_is_right_at_the_end_with_its_rate(drifting):
    est = run(drifting, drift=True)
    e = est.estimate
    assert abs(e.pi[0] - drifting.sim.payload.mass) / drifting.sim.payload.mass < 0.002
    assert np.abs(e.offset[:3] - drifting.bias_end[:3]).max() < 0.05
    assert e.drift is not None
    assert np.all(np.abs(e.drift.rate - DRIFT) < 4.0 * e.drift.std + 1e-9)
    assert abs(e.drift.rate[2] - DRIFT[2]) < 0.1 * DRIFT[2]
    assert not est.contacts


def test_the_drift_prior_shortens_the_first_seconds_and_leaves_a_run_alone(drifting):
    """In the first 1.5 s a free drift rate takes up part of the posture's slow change and
    holds the CoM's std up; under the prior it is smaller and the CoM as right. Over the
    minute the estimate is the one without the prior."""
    truth = drifting.sim.payload
    early = {prior: run(drifting, drift=True, until=1.5, prior=prior).estimate
             for prior in (0.0, PayloadConfig.bias_drift_prior)}
    free, held = early[0.0], early[PayloadConfig.bias_drift_prior]
    assert held.com_std.max() < 0.8 * free.com_std.max()
    assert np.abs(held.body.com - truth.com).max() < 3.0 * held.com_std.max()
    whole = run(drifting, drift=True, prior=0.0).estimate
    prior_whole = run(drifting, drift=True).estimate
    np.testing.assert_allclose(prior_whole.offset, whole.offset, atol=1e-4)
    np.testing.assert_allclose(prior_whole.drift.rate, whole.drift.rate, atol=1e-5)
    np.testing.assert_allclose(prior_whole.pi[0], whole.pi[0], rtol=1e-4)


def test_a_drift_over_the_users_limit_is_a_warning(drifting):
    est = run(drifting, drift=True, until=30.0)
    assert est.drift_warning == ""  # 1 N/min is under the default 3 N/min
    est.reconfigure(OnlineConfig(payload=est.config.payload, bias_drift_warn=0.01))
    assert est.drift_warning.startswith("F/T bias drifting: fz +0.0")
    assert "fx" not in est.drift_warning and "tx" not in est.drift_warning


def test_a_constant_bias_model_misses_the_drift(drifting):
    """The same recording with one constant offset: the end's bias is off by about half the
    drift (the check above can fail)."""
    e = run(drifting, drift=False).estimate
    assert e.drift is None
    assert abs(e.offset[2] - drifting.bias_end[2]) > 0.2


def test_a_rezero_is_a_bias_step_not_a_contact_and_a_push_after_it_is_found():
    conditions = SensorConditions(drift=(0.0, 0.0, 0.8 / 60.0, 0.0, 0.0, 0.0), rezero=(30.0,))
    push = Contact(45.0, 0.7, (0.0, 6.0, 0.0))
    noise = (0.5, 0.015)
    rec = record(conditions, (push,), noise)
    est = run(rec, drift=True, noise=noise)
    assert len(est.bias_steps) == 1 and 30.0 <= est.bias_steps[0] < 30.05
    assert [round(c.start) for c in est.contacts] == [45]
    assert np.abs(est.estimate.offset[:3] - rec.bias_end[:3]).max() < 0.05
    assert est.ledger()["dropped_gated"] < 0.05 * rec.t.size
    # Relearned within 2 s of the step: the bias then is the step's.
    early = run(rec, drift=True, noise=noise, until=32.0)
    true_then = rec.sim.offset + conditions.bias_change(
        [32.0], rezero_steps(rec.sim, conditions))[0]
    assert np.abs(early.estimate.offset[:3] - true_then[:3]).max() < 0.15
    assert abs(early.estimate.pi[0] - rec.sim.payload.mass) < 0.01 * rec.sim.payload.mass


def test_a_contact_that_does_not_end_is_reported_open_and_not_gated_for_ever():
    """A push from 20 s to the end of a 40 s run whose force changes every second: neither a
    step nor a new payload."""
    rng = np.random.default_rng(5)
    pushes = tuple(Contact(20.0 + k, 1.0, tuple(rng.uniform(-8.0, 8.0, 3))) for k in range(20))
    rec = record(SensorConditions(), pushes, duration=40.0)
    est = run(rec, drift=True, open_anomaly_after=5.0)
    assert len(est.open_anomalies) >= 1
    first = est.open_anomalies[0]
    assert first.resolution == "unexplained" and 20.0 <= first.start < 20.1
    assert 25.0 <= first.resolved_at < 26.0
    assert est.ledger()["dropped_gated"] < 0.5 * (40.0 - 20.0) * RATE
