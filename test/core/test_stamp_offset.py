"""The wrench stamps' delay estimated from the data (core/gathering/stamp_offset.py) and corrected
by the gatherer before any sample is filtered."""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.gathering.stamp_offset import MIN_SAMPLES, estimate_delay
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)

URDF = bundled_urdf_path()


def _pipeline(delay: float, settings: GathererSettings, duration: float = 8.0,
              seed: int = 3, joint_period: float = 2e-3
              ) -> tuple[PayloadPipeline, PayloadSimulation]:
    """1 kHz wrenches stamped ``delay`` late, joint states every ``joint_period`` s (500 Hz
    by default), fast motion."""
    kinematics = SensorKinematics(URDF, "ft_sensor")
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=seed)
    sim = PayloadSimulation(kinematics, trajectory, seed=seed)
    joint_t = np.arange(0.0, duration, joint_period)
    wrench_t = np.arange(0.0, duration, 1e-3)
    q, _ = sim.joint_states(joint_t)
    w = sim.wrench(wrench_t)
    pipeline = PayloadPipeline(Gathering(URDF, settings), kinematics, OnlineEstimator())
    j = 0
    for k, t in enumerate(wrench_t):
        while j < joint_t.size and joint_t[j] <= t:
            pipeline.add_joint_state(100.0 + joint_t[j], kinematics.joint_names, q[j])
            j += 1
        pipeline.add_wrench(100.0 + t + delay, w[k])
        if k % 100 == 99:
            pipeline.process()
    return pipeline, sim


@pytest.mark.parametrize("delay", [-0.005, 0.002, 0.008])
def test_a_delay_is_found_and_corrected_before_any_sample_is_filtered(delay: float) -> None:
    pipeline, sim = _pipeline(delay, GathererSettings())
    found = pipeline.gathering.stamp_delay
    assert found is not None and found.clear
    assert found.delay == pytest.approx(delay, abs=3e-4)
    assert pipeline.gathering.wrench_delay == found.delay
    estimate = pipeline.finish()
    assert estimate is not None
    assert estimate.pi[0] == pytest.approx(sim.payload.mass, rel=2e-3)


def test_a_delay_at_125_hz_joint_states_is_refitted_until_it_is_gone() -> None:
    """One fit reads 5 ms as about 4.2 ms there (the wrench derivative's noise attenuates
    it); fits on the corrected stamps take the rest."""
    pipeline, _ = _pipeline(0.005, GathererSettings(), duration=6.0, joint_period=8e-3)
    found = pipeline.gathering.stamp_delay
    assert found is not None and found.clear
    assert found.delay == pytest.approx(0.005, abs=3e-4)


def test_no_delay_is_left_alone() -> None:
    pipeline, _ = _pipeline(0.0, GathererSettings())
    found = pipeline.gathering.stamp_delay
    assert found is not None and not found.clear
    assert abs(found.delay) < 3e-4 and pipeline.gathering.wrench_delay == 0.0


def test_a_known_delay_is_subtracted_and_the_estimate_adds_to_it() -> None:
    """``wrench_delay`` 3 ms of a 5 ms delay: the estimate finds the 2 ms left."""
    pipeline, _ = _pipeline(0.005, GathererSettings(wrench_delay=0.003))
    found = pipeline.gathering.stamp_delay
    assert found is not None and found.delay == pytest.approx(0.002, abs=3e-4)
    assert pipeline.gathering.wrench_delay == pytest.approx(0.005, abs=3e-4)


def test_without_estimation_only_the_setting_applies() -> None:
    pipeline, _ = _pipeline(0.005, GathererSettings(estimate_wrench_delay=False,
                                                    wrench_delay=0.004))
    assert pipeline.gathering.stamp_delay is None
    assert pipeline.gathering.wrench_delay == 0.004


def test_too_few_samples_give_no_verdict() -> None:
    rows = MIN_SAMPLES - 1
    found = estimate_delay(np.arange(rows) * 1e-3, np.zeros((rows, 6)), np.zeros((rows, 6)),
                           np.zeros((rows, 6)), 0.05)
    assert not found.clear and found.samples == rows
