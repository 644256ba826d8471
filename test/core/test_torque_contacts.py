"""Contacts from joint torques when pushes fill a third of the recording: the contact-free
covariance is trimmed at a lower quantile (inertial_id.core.estimation.anomaly.TRIM_CONFIDENCE) than
the detection threshold, so the pushes do not teach the detector."""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.estimation.anomaly import (
    TRIM_CONFIDENCE,
    contact_intervals,
    robust_mean_covariance,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

NOISE = 0.05  # N m
DURATION = 40.0  # s
PUSH = 1.2  # s: ten pushes fill 30 % of the record
STARTS = np.arange(1.0, DURATION - 2.0, 4.0)


def _pushes(seed: int) -> tuple[Contact, ...]:
    """Ten pushes on the payload, each a half-sine of force (1-2 N peak, a random direction)
    in six steps of 0.2 s, as a hand pushes and lets go."""
    rng = np.random.default_rng(seed)
    profile = np.sin(np.pi * (np.arange(6) + 0.5) / 6)
    out = []
    for start, peak in zip(STARTS, rng.uniform(1.0, 2.0, STARTS.size), strict=True):
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        out += [Contact(float(start + 0.2 * k), 0.2, tuple(direction * peak * a))
                for k, a in enumerate(profile)]
    return tuple(out)


def _residual(contacts: tuple[Contact, ...]) -> tuple[np.ndarray, np.ndarray]:
    """200 Hz joint-torque residual of the bundled arm (efforts minus its exact model)."""
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.7, period=10.0,
                                          max_velocity=1.0, seed=2)
    t = np.arange(0.0, DURATION, 0.005)
    measured = PayloadSimulation(kinematics, trajectory, contacts=contacts,
                                 effort_noise_std=NOISE).joint_efforts(t)
    model = PayloadSimulation(kinematics, trajectory).joint_efforts(t, noise=False)
    return t, measured - model


def _found(intervals: list[list[float]]) -> tuple[int, int]:
    """Pushes found (an interval starting from 0.3 s before to the end of the push) and
    intervals that match no push (false alarms)."""
    hit = sum(any(s - 0.3 < a < s + PUSH for a, _ in intervals) for s in STARTS)
    false = sum(not any(s - 0.3 < a < s + PUSH for s in STARTS) for a, _ in intervals)
    return hit, false


@pytest.fixture(scope="module")
def pushed() -> tuple[np.ndarray, np.ndarray]:
    return _residual(_pushes(3))


def test_pushes_filling_a_third_of_the_record_are_all_found(pushed) -> None:
    t, residual = pushed
    assert _found(contact_intervals(t, residual)) == (10, 0)
    # The covariance is the contact-free one: every joint's sigma within 12 % of the noise.
    _, covariance, _ = robust_mean_covariance(residual, TRIM_CONFIDENCE)
    np.testing.assert_allclose(np.sqrt(np.diag(covariance)), NOISE, rtol=0.12)


def test_trimming_at_the_detection_quantile_lets_the_pushes_teach_the_detector(pushed) -> None:
    t, residual = pushed
    found, false = _found(contact_intervals(t, residual, trim_confidence=None))
    assert found < 10 and false == 0
    _, covariance, _ = robust_mean_covariance(residual, 0.9999)
    assert np.sqrt(np.diag(covariance)).max() > 1.3 * NOISE


def test_no_false_alarm_without_contacts() -> None:
    t, residual = _residual(())
    assert contact_intervals(t, residual) == []
