"""The wrench stamps' delay kept estimated while the stream runs: the tracker on exact
kinematics, and the gathering end to end on sensors stamped on reception."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from scipy.ndimage import uniform_filter1d

from inertial_id.core.gathering.delay_tracker import DelayTracker
from inertial_id.core.gathering.gatherer import GathererSettings, Gathering
from inertial_id.core.gathering.synchronizer import FixedLagSynchronizer
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.samples import SyncedSamples
from inertial_id.core.sensor_conditions import SensorConditions, wrench_stream
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)


@cache
def _kinematics() -> SensorKinematics:
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


def _simulation(seed: int, contacts: tuple[Contact, ...] = ()) -> PayloadSimulation:
    return PayloadSimulation(_kinematics(), FourierTrajectory.random(BUNDLED_HOME, seed=seed + 1),
                             payload=default_payload(), contacts=contacts, seed=seed)


def _track(lag: tuple[float, float], seconds: float, rate: float = 100.0, seed: int = 0,
           contacts: tuple[Contact, ...] = ()) -> tuple[DelayTracker, list[float]]:
    """The tracker on ``seconds`` of wrenches (noise 0.08 N / 0.004 N m) measured at ``rate``
    and stamped late by a uniform ``lag`` each, paired with the kinematics at their stamps
    (less the delay applied so far), both smoothed alike (a centred 5-sample mean: matched
    filtering), in batches of 20; the corrections it returned (each applied to the later
    stamps, as the gathering does)."""
    sim = _simulation(seed, contacts)
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, 1.0 / rate)
    wrench = uniform_filter1d(sim.wrench(t), 5, axis=0, mode="nearest")
    stamps = t + rng.uniform(*lag, t.size)
    assert np.all(np.diff(stamps) > 0.0)  # a later message stamped earlier: not here
    tracker, applied, corrections = DelayTracker(correlation_time=5.0 / rate), 0.0, []
    for k in range(0, t.size, 20):
        part = slice(k, k + 20)
        at = stamps[part] - applied
        twist, proper = _kinematics().compute(*sim.trajectory(at))
        # The kinematics' smoothing over the batch's samples (its edges from the batch).
        twist, proper = (uniform_filter1d(x, 5, axis=0, mode="nearest") for x in (twist, proper))
        zeros = np.zeros((at.size, 6))
        batch = SyncedSamples(at, zeros, zeros, zeros, wrench[part], wrench[part], twist,
                              proper)
        correction = tracker.add(batch)
        if correction is not None:
            applied += correction
            corrections.append(correction)
    return tracker, corrections


@pytest.mark.parametrize("lag", [(0.006, 0.006), (0.003, 0.009)], ids=["fixed", "jitter"])
def test_a_delay_is_found_and_applied(lag: tuple[float, float]) -> None:
    """A 100 Hz sensor stamped 6 ms late (on average): the delay is applied within 0.5 ms,
    and what is left on the moved stamps is no clear delay."""
    tracker, corrections = _track(lag, 30.0)
    assert corrections and abs(sum(corrections) - 0.006) < 5e-4, corrections
    assert not tracker.latest.clear


def test_no_delay_is_never_applied() -> None:
    """Stamps at measurement: a minute of evidence (its std far under the smallest delay
    worth correcting) applies nothing."""
    tracker, corrections = _track((0.0, 0.0), 60.0)
    assert corrections == []
    assert tracker.latest.samples > 5000 and tracker.latest.std < 2e-4


def test_a_push_does_not_make_a_delay() -> None:
    """Pushes of 30 N (1 s each, 1 in 5 s) on a stream with no delay: their blocks are left
    out; nothing is applied."""
    pushes = tuple(Contact(5.0 * k + 2.0, 1.0, (30.0, -10.0, 5.0)) for k in range(6))
    _, corrections = _track((0.0, 0.0), 30.0, contacts=pushes)
    assert corrections == []


def test_the_synchronizer_moves_stamps_mid_stream_and_keeps_time_increasing() -> None:
    """Stamps moved after samples left: the samples' times still increase, and a held
    wrench that would go back in time is dropped and counted (as behind the released ones,
    or as without history when its joint window is gone); every wrench is accounted for."""
    sync = FixedLagSynchronizer(1, 5, 2, False, 0.1, lag=2)
    t = np.arange(0.0, 1.0, 0.01)
    shift = 0.0
    for k, s in enumerate(t):
        sync.add_joint_state(s, [np.sin(s)])
        sync.add_wrench(s + 0.003 - shift, np.full(6, s))
        if k == 50:
            first = sync.pop_ready()
            assert sync.wrenches_held > 0
            dropped_before = sum(sync.counters.values())
            shift = 0.015  # more than a wrench period: a held one goes behind
            sync.shift_wrench_stamps(shift)
    second = sync.pop_ready()
    times = np.concatenate((first.times, second.times))
    assert np.all(np.diff(times) > 0.0)
    dropped = sum(sync.counters.values())
    assert dropped > dropped_before
    assert times.size + dropped + sync.wrenches_held == t.size


@pytest.mark.parametrize(("lag", "rate", "mean"), [((0.004, 0.016), 62.5, 0.010),
                                                   ((0.003, 0.009), 100.0, 0.006),
                                                   ((0.0, 0.0), 1000.0, 0.0)])
def test_the_gathering_applies_the_delay_it_keeps_estimating(
        lag: tuple[float, float], rate: float, mean: float) -> None:
    """Gathering end to end, a minute of messages in arrival order (joint states at 500 Hz):
    the delay applied is within 0.5 ms of the mean lag (a 62.5 Hz sensor with a 4-16 ms
    reception lag: the estimate from the first 4 s alone read 8.2 ms), none when there is
    none; every wrench is accounted for."""
    sim = _simulation(2)
    rng = np.random.default_rng(2)
    stream = wrench_stream(sim, SensorConditions(lag=lag), 60.0, rate, rng)
    joint_t = np.arange(0.0, 60.0, 0.002)
    position, _ = sim.joint_states(joint_t)
    gathering = Gathering(bundled_urdf_path(), GathererSettings(), _kinematics())
    names = _kinematics().joint_names
    events = sorted([(t, 0, k) for k, t in enumerate(joint_t)]
                    + [(t, 1, k) for k, t in enumerate(stream.arrival)])
    released = 0
    for n, (_, kind, k) in enumerate(events):
        if kind == 0:
            gathering.add_joint_state(joint_t[k], names, position[k])
        else:
            gathering.add_wrench(stream.stamp[k], stream.wrench[k])
        if n % 20 == 19:
            released += len(gathering.pop_ready())
    assert abs(gathering.wrench_delay - mean) < 5e-4, gathering.wrench_delay
    assert gathering.delay_tracker is not None
    assert (gathering.delay_tracker.corrections > 0) == (mean > 0.0)
    dropped = sum(gathering.ledger.wrench_samples().values())
    assert released + dropped + gathering.wrenches_held == stream.stamp.size
