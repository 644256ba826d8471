"""Sensors as they are in the simulator (inertial_id.core.sensor_conditions): drift, re-zero
steps, reception stamps, quantisation, irregular rates, bursts, joint state jitter and loss."""

import numpy as np
import pytest

from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.sensor_conditions import SensorConditions, true_bias, wrench_stream
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)


@pytest.fixture(scope="module")
def kinematics():
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


def simulation(kinematics, **kwargs):
    return PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1),
                             **kwargs)


def test_drift_and_rezero_change_the_reading_by_the_true_bias(kinematics):
    sim = simulation(kinematics, force_noise_std=0.0, torque_noise_std=0.0)
    drift = (0.01, -0.005, 0.02, 3e-4, 0.0, -1e-4)
    conditions = SensorConditions(drift=drift, rezero=(3.0, 6.5))
    stream = wrench_stream(sim, conditions, 9.0, 500.0, np.random.default_rng(0))
    ideal = sim.wrench(stream.time, noise=False)
    bias = true_bias(sim, conditions, stream.time)
    np.testing.assert_allclose(stream.wrench - ideal, bias - sim.offset, atol=1e-9)
    before = stream.time < 3.0
    np.testing.assert_allclose(bias[before] - sim.offset,
                               stream.time[before, None] * np.asarray(drift), atol=1e-12)
    # A re-zero sets the noise-free reading to zero at its time: the next sample reads ~0.
    for when in (3.0, 6.5):
        after = int(np.searchsorted(stream.time, when))
        assert np.abs(stream.wrench[after, :3]).max() < 0.2  # 2 ms of motion and drift
        assert np.abs(stream.wrench[after - 2, :3]).max() > 1.0  # a payload was read before


def test_reception_stamps_lag_within_bounds_and_never_go_back(kinematics):
    sim = simulation(kinematics)
    conditions = SensorConditions(lag=(0.003, 0.009), period_jitter=0.1)
    stream = wrench_stream(sim, conditions, 5.0, 100.0, np.random.default_rng(1))
    lag = stream.stamp - stream.time
    assert lag.min() >= 0.003 and lag.max() <= 0.009 + 1e-12
    assert lag.std() > 0.001  # jitter, not a constant lag
    assert np.all(np.diff(stream.stamp) > 0.0)
    periods = np.diff(stream.time)
    assert periods.min() >= 0.9 / 100.0 - 1e-12 and periods.max() <= 1.1 / 100.0 + 1e-12
    assert periods.std() > 1e-4  # irregular
    np.testing.assert_array_equal(stream.arrival, stream.stamp)  # one message at a time


def test_quantisation_bursts_and_their_loss(kinematics):
    sim = simulation(kinematics)
    conditions = SensorConditions(quantum=(0.01, 0.0005), burst=8, burst_loss=0.1)
    stream = wrench_stream(sim, conditions, 4.0, 1000.0, np.random.default_rng(2))
    steps = stream.wrench / np.repeat([0.01, 0.0005], 3)
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
    assert 0.8 * 4000 < stream.time.size < 0.97 * 4000  # about a tenth of the bursts lost
    # Messages of a burst arrive together, when its last one was measured.
    arrivals, counts = np.unique(stream.arrival, return_counts=True)
    assert set(counts) == {8}
    assert np.all(stream.arrival >= stream.time)
    np.testing.assert_array_equal(stream.stamp, stream.time)  # stamped at measurement


def test_joint_states_lost_and_jittered():
    conditions = SensorConditions(joint_jitter=2e-4, joint_loss=0.003)
    times = np.arange(0.0, 20.0, 1.0 / 500.0)
    kept, stamps = conditions.joint_stamps(times, np.random.default_rng(3))
    lost = times.size - kept.size
    assert 5 <= lost <= 60  # 0.3 % of 10,000
    assert np.abs(stamps - times[kept]).max() <= 2e-4 + 1e-12
    assert np.all(np.diff(stamps) >= 0.0)


def test_an_ideal_sensor_is_the_simulation_itself(kinematics):
    sim, twin = simulation(kinematics, seed=4), simulation(kinematics, seed=4)
    stream = wrench_stream(sim, SensorConditions(), 2.0, 1000.0, np.random.default_rng(0))
    times = np.arange(0.0, 2.0, 1e-3)
    np.testing.assert_array_equal(stream.time, times)
    np.testing.assert_array_equal(stream.stamp, times)
    np.testing.assert_array_equal(stream.wrench, twin.wrench(times))


@pytest.mark.parametrize("bad", [dict(drift=(0.1,)), dict(lag=(0.01, 0.001)), dict(burst=0),
                                 dict(burst_loss=1.0), dict(period_jitter=-0.1)])
def test_conditions_out_of_range_are_refused(bad):
    with pytest.raises(InertialIdError, match="sensor conditions|drift"):
        SensorConditions(**bad)
