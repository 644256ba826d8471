"""A driver that compensates its wrench for the payload it was given
(inertial_id.core.estimation.compensation), against the simulated arm: the wrench restored exactly,
and the online estimator, fed restored samples, keeps the whole payload after an apply and
identifies a later tool change as the new payload (not the difference)."""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.estimation.compensation import DriverCompensation, compensated_body
from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.estimation.payload import PayloadConfig
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.regressor import PAYLOAD_ON_SENSOR
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)

RATE = 500.0  # Hz
A = default_payload()
B = BodyParameters.from_mass_com_inertia(0.8, [0.0, 0.03, 0.09], [0.002, 0, 0, 0.002, 0, 0.001])


@pytest.fixture(scope="module")
def kinematics() -> SensorKinematics:
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


def _simulation(kinematics: SensorKinematics, **kwargs: object) -> PayloadSimulation:
    return PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1),
                             **kwargs)


def _samples(sim: PayloadSimulation, t: np.ndarray, noise: bool) -> dict[str, np.ndarray]:
    twist, proper = sim.kinematics.compute(*sim.trajectory(t))
    wrench = sim.wrench(t, noise=noise)
    return {"times": t, "twist": twist, "proper_acceleration": proper, "wrench": wrench,
            "wrench_raw": wrench.copy()}


def test_the_restored_wrench_is_the_uncompensated_one_outside_the_change(
        kinematics: SensorKinematics) -> None:
    t = np.arange(0.0, 4.0, 1.0 / RATE)
    point_a = compensated_body(A, with_inertia=False)  # a classic request: mass and CoG
    compensated = _simulation(kinematics)
    compensated.set_driver_payload(2.0, point_a.pi, transition=0.5)
    samples = _samples(compensated, t, noise=False)
    whole = _simulation(kinematics).wrench(t, noise=False)
    assert np.abs(samples["wrench"] - whole)[t > 2.6, 2].min() > 5.0  # weight gone (N)
    restore = DriverCompensation(PAYLOAD_ON_SENSOR)
    restore.request(1.98, before=0.05)  # sent at 1.98 s, answered; 0.5 s transition
    restore.settled(2.5, point_a.pi, after=0.06)
    out = restore.restore(samples)
    kept = (t < 1.93) | (t >= 2.56)
    np.testing.assert_array_equal(out["times"], t[kept])
    assert restore.dropped == np.count_nonzero(~kept) and restore.since == 2.5
    np.testing.assert_allclose(out["wrench"], whole[kept], atol=1e-9)
    np.testing.assert_allclose(out["wrench_raw"], whole[kept], atol=1e-9)


def _run(kinematics: SensorKinematics, restoring: bool) -> tuple[OnlineEstimator, list]:
    """12 s: A uncompensated, A applied at 4 s (compensated from then on, as a UR driver
    does), B mounted at 8 s. Returns the estimator and its (time, estimate) after each
    solve."""
    sim = _simulation(kinematics, payload_changes=((8.0, B),), seed=3)
    sim.set_driver_payload(4.0, A.pi)
    config = OnlineConfig(payload=PayloadConfig(force_noise_std=0.08, torque_noise_std=0.004),
                          min_samples=500)
    online = OnlineEstimator(config)
    restore = DriverCompensation(PAYLOAD_ON_SENSOR)
    t = np.arange(0.0, 12.0, 1.0 / RATE)
    samples = _samples(sim, t, noise=True)
    estimates = []
    for start in range(0, t.size, 10):
        batch = {k: v[start:start + 10] for k, v in samples.items()}
        if restoring and batch["times"][0] >= 3.99 and not np.isfinite(restore.since):
            restore.request(3.99, before=config.gate_margin)
            restore.settled(4.0, A.pi, after=config.gate_margin)
        if restoring:
            batch = restore.restore(batch)
        online.add(**batch)
        if start % 250 == 0:
            online.solve()
            estimates.append((float(t[start]), online.estimate))
    return online, estimates


def _at(estimates: list, time: float) -> BodyParameters:
    return [e for t, e in estimates if t <= time][-1].body


def test_after_an_apply_the_estimate_stays_the_payload_and_a_tool_change_is_found(
        kinematics: SensorKinematics) -> None:
    online, estimates = _run(kinematics, restoring=True)
    for time, truth in ((3.9, A), (7.9, A), (12.0, B)):
        errors = parameter_errors(_at(estimates, time).pi, truth.pi)
        assert errors.mass_pct < 1.0 and errors.com_mm < 3.0, (time, errors)
    assert len(online.payload_changes) == 1 and abs(online.payload_changes[0] - 8.0) < 0.1
    assert not online.contacts  # the apply itself was not seen as a contact


def test_without_adding_it_back_the_estimate_would_be_the_residual(
        kinematics: SensorKinematics) -> None:
    """What the package did before: after the apply the data say ~0 kg, after the tool
    change B - A (negative: never a consistent body)."""
    _, estimates = _run(kinematics, restoring=False)
    assert _at(estimates, 12.0).mass < 0.5 * B.mass
