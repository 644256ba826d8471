"""The exciting trajectory and the simulated robot with a payload behind an F/T sensor."""

import numpy as np
import pytest

from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD, predicted_wrench
from inertial_id.core.samples import JointStateSample, WrenchSample
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    DEFAULT_OFFSET,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    Vibration,
    bundled_urdf_path,
    default_payload,
    random_vibrations,
)


@pytest.fixture(scope="module")
def kinematics():
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


def trajectory(seed=0, **kwargs):
    return FourierTrajectory.random(BUNDLED_HOME, seed=seed, **kwargs)


# ---------------------------------------------------------------------------------------------
# FourierTrajectory


@pytest.mark.parametrize("seed", range(3))
def test_trajectory_derivatives_match_finite_differences(seed):
    traj = trajectory(seed)
    t = np.linspace(0.0, traj.period, 37)
    h = 1e-5
    q, qd, qdd = traj(t)
    q_plus, qd_plus, _ = traj(t + h)
    q_minus, qd_minus, _ = traj(t - h)
    np.testing.assert_allclose(qd, (q_plus - q_minus) / (2 * h), atol=1e-8)
    np.testing.assert_allclose(qdd, (qd_plus - qd_minus) / (2 * h), atol=1e-7)
    assert np.max(np.abs(qdd)) > 0.1  # not a trivial motion


@pytest.mark.parametrize("seed", range(3))
def test_trajectory_respects_amplitude_and_velocity_bounds(seed):
    amplitude = np.array([0.6, 0.5, 0.4, 0.8, 0.8, 1.0])
    max_velocity = np.array([1.5, 1.0, 0.2, 2.0, 2.0, 3.0])
    traj = trajectory(seed, amplitude=amplitude, max_velocity=max_velocity, period=6.0)
    t = np.linspace(0.0, traj.period, 6001)
    q, qd, _ = traj(t)
    excursion = np.max(np.abs(q - np.asarray(BUNDLED_HOME)), axis=0)
    speed = np.max(np.abs(qd), axis=0)
    assert np.all(excursion <= amplitude + 1e-12)
    assert np.all(speed <= max_velocity + 1e-12)
    # The scaling uses the bounds, not far below them: each joint uses a good part of one.
    assert np.all(np.maximum(excursion / amplitude, speed / max_velocity) > 0.3)
    # The slow joint is limited by its velocity bound, far inside its amplitude bound.
    assert excursion[2] < 0.5 * amplitude[2]


def test_trajectory_is_periodic_and_reproducible():
    traj = trajectory(4)
    t = np.array([0.0, 0.3, 2.1, 5.7])
    for a, b in zip(traj(t), traj(t + traj.period), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)
    for a, b in zip(traj(t), trajectory(4)(t), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(traj(t)[0], trajectory(5)(t)[0])
    q, qd, qdd = traj(0.5)
    assert q.shape == qd.shape == qdd.shape == (1, 6)


# ---------------------------------------------------------------------------------------------
# PayloadSimulation


@pytest.mark.parametrize("sign", [PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD])
def test_noiseless_wrench_equals_the_measurement_model(kinematics, sign):
    traj = trajectory(1)
    sim = PayloadSimulation(kinematics, traj, sign=sign)
    t = np.linspace(0.0, 4.0, 50)
    twist, proper = kinematics.compute(*traj(t))
    expected = predicted_wrench(default_payload().pi, twist, proper, np.array(DEFAULT_OFFSET),
                                sign)
    np.testing.assert_allclose(sim.wrench(t, noise=False), expected, atol=1e-12)
    # The payload is heavy enough to matter: gravity alone is ~15 N.
    assert np.all(np.linalg.norm(expected[:, :3] - DEFAULT_OFFSET[:3], axis=1) > 10.0)


def test_noiseless_simulation_identifies_exactly(kinematics):
    traj = trajectory(2)
    sim = PayloadSimulation(kinematics, traj)
    t = np.arange(0.0, traj.period, 0.02)
    identifier = PayloadIdentifier(PayloadConfig(method="least_squares"))
    identifier.add(*kinematics.compute(*traj(t)), sim.wrench(t, noise=False))
    estimate = least_squares(identifier.statistics)
    np.testing.assert_allclose(estimate.pi, default_payload().pi, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(estimate.offset, DEFAULT_OFFSET, rtol=1e-8, atol=1e-10)


def test_noise_levels(kinematics):
    traj = trajectory(3)
    sim = PayloadSimulation(kinematics, traj, force_noise_std=0.2, torque_noise_std=0.01,
                            joint_noise_std=1e-3, velocity_noise_std=0.05, seed=7)
    t = np.linspace(0.0, 8.0, 4000)
    noise = sim.wrench(t) - sim.wrench(t, noise=False)
    np.testing.assert_allclose(noise.std(axis=0), [0.2] * 3 + [0.01] * 3, rtol=0.06)
    assert np.all(np.abs(noise.mean(axis=0)) < 4 * noise.std(axis=0) / np.sqrt(t.size))
    q, qd = sim.joint_states(t)
    q_true, qd_true, _ = traj(t)
    np.testing.assert_allclose((q - q_true).std(axis=0), 1e-3, rtol=0.06)
    np.testing.assert_allclose((qd - qd_true).std(axis=0), 0.05, rtol=0.06)


@pytest.mark.parametrize("sign", [PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD])
def test_contact_adds_its_wrench(kinematics, sign):
    traj = trajectory(0)
    force, point = (3.0, -1.0, 5.0), (0.02, 0.05, 0.12)
    contact = Contact(start=1.0, duration=0.5, force=force, point=point)
    with_contact = PayloadSimulation(kinematics, traj, sign=sign, contacts=(contact,))
    without = PayloadSimulation(kinematics, traj, sign=sign)
    t = np.array([0.5, 0.999, 1.0, 1.25, 1.499, 1.5, 2.0])
    active = np.array([False, False, True, True, True, False, False])
    difference = with_contact.wrench(t, noise=False) - without.wrench(t, noise=False)
    external = np.concatenate((force, np.cross(point, force)))
    np.testing.assert_allclose(contact.wrench(), external, atol=1e-15)
    np.testing.assert_allclose(difference[active], np.tile(-sign * external, (3, 1)), atol=1e-12)
    np.testing.assert_allclose(difference[~active], 0.0, atol=1e-12)
    np.testing.assert_allclose(with_contact.contact_wrench(t)[active], np.tile(external, (3, 1)))


def test_overlapping_contacts_add_up(kinematics):
    first = Contact(0.0, 2.0, (1.0, 0.0, 0.0))
    second = Contact(1.0, 2.0, (0.0, 2.0, 0.0), point=(0.1, 0.0, 0.0))
    sim = PayloadSimulation(kinematics, trajectory(0), contacts=(first, second))
    both = sim.contact_wrench([1.5])[0]
    np.testing.assert_allclose(both, first.wrench() + second.wrench(), atol=1e-15)
    # (0.1, 0, 0) x (0, 2, 0) = (0, 0, 0.2); default point (0, 0, 0.1) x (1, 0, 0) = (0, 0.1, 0)
    np.testing.assert_allclose(both, [1.0, 2.0, 0.0, 0.0, 0.1, 0.2], atol=1e-15)


def test_vibration_is_a_burst_in_its_band(kinematics):
    """A 25 Hz burst from 1.0 to 1.4 s: the reading differs from the burst-free one by the
    burst alone (the noise stream is the same), nothing outside the burst, its spectrum peaks
    at 25 Hz, its peak is the force given at the burst's middle, the torque ``p x F``."""
    force, point = (0.3, -0.4, 0.0), (0.0, 0.0, 0.1)
    burst = Vibration(1.0, 0.4, 25.0, force, point=point, phase=0.3)
    t = np.arange(0.0, 3.0, 1e-3)
    with_burst = PayloadSimulation(kinematics, trajectory(0), vibrations=(burst,), seed=5)
    without = PayloadSimulation(kinematics, trajectory(0), seed=5)
    difference = with_burst.wrench(t) - without.wrench(t)
    inside = (t >= 1.0) & (t < 1.4)
    np.testing.assert_allclose(difference, burst.wrench(t), atol=1e-12)
    assert np.all(difference[~inside] == 0.0)
    np.testing.assert_allclose(difference[:, 3:], np.cross(point, difference[:, :3]), atol=1e-15)
    peak = np.max(np.linalg.norm(difference[:, :3], axis=1))
    assert 0.95 * 0.5 < peak <= 0.5 + 1e-12  # |F| = 0.5 N, reached near the Hann envelope's top
    spectrum = np.abs(np.fft.rfft(difference[:, 0]))
    frequency = np.fft.rfftfreq(t.size, 1e-3)
    assert abs(frequency[np.argmax(spectrum)] - 25.0) <= 1.0
    band = (frequency > 15.0) & (frequency < 35.0)
    assert np.sum(spectrum[band] ** 2) > 0.99 * np.sum(spectrum**2)  # nothing at DC: no contact
    assert abs(difference[:, :3].mean()) < 1e-3


def test_zero_vibration_changes_nothing(kinematics):
    """No bursts, or a burst of zero force: bit-identical readings and joint states (the
    bursts draw nothing from the noise's random stream)."""
    t = np.arange(0.0, 2.0, 1e-3)
    silent = Vibration(0.5, 0.5, 20.0, (0.0, 0.0, 0.0))
    runs = [PayloadSimulation(kinematics, trajectory(2), seed=3, **extra)
            for extra in ({}, {"vibrations": ()}, {"vibrations": (silent,)})]
    readings = [(sim.wrench(t), *sim.joint_states(t)) for sim in runs]
    for other in readings[1:]:
        for a, b in zip(readings[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_random_vibrations_keep_their_ranges_and_clear_of_contacts():
    contacts = ((8.0, 9.0), (14.0, 14.5))
    bursts = random_vibrations(60.0, 0.5, 0.4, avoid=contacts, seed=4)
    assert bursts == random_vibrations(60.0, 0.5, 0.4, avoid=contacts, seed=4)
    assert bursts != random_vibrations(60.0, 0.5, 0.4, avoid=contacts, seed=5)
    assert 10 <= len(bursts) <= 30  # 30 expected, fewer fit
    for v in bursts:
        assert 15.0 <= v.frequency <= 40.0 and 0.2 <= v.duration <= 0.6
        assert 0.2 - 1e-12 <= np.linalg.norm(v.force) <= 0.4 + 1e-12
        assert v.start >= 0.0 and v.start + v.duration <= 60.0
        assert all(v.start + v.duration + 0.5 <= a or v.start >= b + 0.5 for a, b in contacts)
    for first, second in zip(bursts, bursts[1:], strict=False):
        assert first.start + first.duration + 0.5 <= second.start


def test_default_payload_and_home():
    payload = default_payload()
    assert payload.is_physically_consistent()
    assert payload.mass == pytest.approx(1.5)
    np.testing.assert_allclose(payload.com, [0.012, -0.018, 0.065])
    kin = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    # At home the sensor is well clear of the base.
    assert np.linalg.norm(kin.sensor_pose(BUNDLED_HOME).translation) > 0.3


def test_driver_messages_arrive_as_drivers_publish_them(kinematics):
    """Joint states at 125 Hz and wrenches at 1 kHz over 0.5 s: every one once, each wrench
    after the joint states stamped at or before it, the wrench stamps late by the delay."""
    traj = FourierTrajectory.random(BUNDLED_HOME, seed=1)
    sim = PayloadSimulation(kinematics, traj, seed=1)
    messages = sim.driver_messages(0.5, 125.0, 1000.0, 100.0, "ft_sensor", wrench_delay=0.002)
    joints = [m for m in messages if isinstance(m, JointStateSample)]
    wrenches = [m for m in messages if isinstance(m, WrenchSample)]
    assert (len(joints), len(wrenches)) == (63, 500)
    assert [m.stamp for m in wrenches] == pytest.approx(100.002 + np.arange(500) * 1e-3)
    assert all(m.frame_id == "ft_sensor" and m.wrench.shape == (6,) for m in wrenches)
    latest_joint = -np.inf
    for m in messages:
        if isinstance(m, JointStateSample):
            latest_joint = m.stamp
        else:  # the joint states up to its true stamp came before it, no later one
            assert latest_joint <= m.stamp - 0.002 + 1e-9 < latest_joint + 1.0 / 125.0
