"""The gatherer's provisional filter (inertial_id.core.gathering.gatherer.Gathering.
pop_provisional): samples within the first fraction of a second while the filter is chosen
from the data, and nothing taken from the chosen filter's samples, which are the same as
without it."""

from __future__ import annotations

import numpy as np
import pytest

from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.gathering.gatherer import PROVISIONAL_TIME, GathererSettings, Gathering
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.samples import JointStateSample, SyncedSamples, WrenchSample
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)

JOINT_RATE, WRENCH_RATE, SECONDS = 500.0, 1000.0, 5.0


def _messages() -> list[JointStateSample | WrenchSample]:
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    sim = PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1))
    joint_t = np.arange(0.0, SECONDS, 1.0 / JOINT_RATE)
    wrench_t = np.arange(0.0, SECONDS, 1.0 / WRENCH_RATE)
    q, v = sim.joint_states(joint_t)
    wrench = sim.wrench(wrench_t)
    names = kinematics.joint_names
    out = [(t, JointStateSample(t, names, q[k], v[k])) for k, t in enumerate(joint_t)]
    out += [(t + 1e-6, WrenchSample(t, "ft", wrench[k])) for k, t in enumerate(wrench_t)]
    return [m for _, m in sorted(out, key=lambda x: x[0])]


def _gathering() -> Gathering:
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    return Gathering(bundled_urdf_path(), GathererSettings(), kinematics)


def _run(provisional: bool) -> tuple[list[SyncedSamples], list[SyncedSamples]]:
    """Every 20 ms of messages, pop (and pop the provisional samples when asked)."""
    gathering, chosen, early = _gathering(), [], []
    next_pop = 0.02
    for message in _messages():
        gathering.add(message)
        if message.stamp >= next_pop:
            next_pop += 0.02
            chosen.append(gathering.pop_ready())
            if provisional:
                early.append(gathering.pop_provisional())
    chosen.append(gathering.pop_ready())
    return chosen, early


def _cat(batches: list[SyncedSamples], name: str) -> np.ndarray:
    return np.concatenate([getattr(b, name) for b in batches if len(b)])


@pytest.fixture(scope="module")
def runs() -> dict[bool, tuple[list[SyncedSamples], list[SyncedSamples]]]:
    return {flag: _run(flag) for flag in (False, True)}


def test_provisional_samples_come_in_the_first_fraction_of_a_second(runs: dict) -> None:
    _, early = runs[True]
    stamps = np.concatenate([b.times for b in early if len(b)])
    assert stamps.size > 0.5 * WRENCH_RATE * 3.0  # most of the decision time is covered
    assert stamps.max() < 4.0 + 0.1  # none once the filter is chosen
    first_pop = next(k for k, b in enumerate(early) if len(b))
    assert (first_pop + 1) * 0.02 <= PROVISIONAL_TIME + 0.1  # released at once
    # the provisional samples carry the motion: 1.5 s of them give the payload's mass within
    # 1 % and its CoM within 2 mm
    keep = _cat(early, "times") < 1.5
    online = OnlineEstimator(OnlineConfig(min_samples=200, monitor=False))
    online.add(*(_cat(early, name)[keep] for name in (
        "times", "twist", "proper_acceleration", "wrench", "wrench_raw")))
    estimate = online.solve()
    assert estimate is not None
    assert estimate.body.mass == pytest.approx(default_payload().mass, rel=0.01)
    assert np.abs(estimate.body.com - default_payload().com).max() < 2e-3


def test_the_chosen_filter_gives_the_same_samples_with_or_without_them(runs: dict) -> None:
    for name in ("times", "wrench", "twist", "proper_acceleration"):
        np.testing.assert_array_equal(_cat(runs[True][0], name), _cat(runs[False][0], name))
    # nothing lost: every wrench but those before the first full window and after the last lag
    assert _cat(runs[False][0], "times").size > 0.97 * WRENCH_RATE * SECONDS
