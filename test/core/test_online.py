"""Tests of the contact-gated online estimator (inertial_id.core.estimation.online).

The simulated demo arm carries the default payload; sensor-frame samples come straight from
the core kinematics (no ROS), are fed in batches of 20 samples (20 ms at 1 kHz) and the
estimate is solved every 0.5 s of data, as the solver node does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation import online
from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)

DT = 1e-3
DURATION = 24.0
BATCH = 20
SOLVE_EVERY = 500  # samples
FORCE_STD, TORQUE_STD = 0.08, 0.004
PAYLOAD = PayloadConfig(force_noise_std=FORCE_STD, torque_noise_std=TORQUE_STD)
CONFIG = OnlineConfig(payload=PAYLOAD)
TRUE_MASS = default_payload().mass


class CachedKinematics:
    """The arm's kinematics, answering the run's full sample arrays from a cache.

    :meth:`PayloadSimulation.wrench` recomputes the kinematics of every sample (~1 s for a run);
    the tests simulate many runs over the same trajectory.
    """

    def __init__(self, kinematics: SensorKinematics, q: np.ndarray, qd: np.ndarray,
                 qdd: np.ndarray) -> None:
        self.kinematics = kinematics
        self.q = q
        self.twist, self.proper = kinematics.compute(q, qd, qdd)

    def compute(self, q: np.ndarray, qd: np.ndarray,
                qdd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if q.shape == self.q.shape and np.array_equal(q, self.q):
            return self.twist, self.proper
        return self.kinematics.compute(q, qd, qdd)


@dataclass
class Arm:
    kinematics: CachedKinematics
    trajectory: FourierTrajectory
    t: np.ndarray
    twist: np.ndarray
    proper: np.ndarray

    def simulation(self, **kwargs: object) -> PayloadSimulation:
        kwargs.setdefault("seed", 0)
        return PayloadSimulation(self.kinematics, self.trajectory, force_noise_std=FORCE_STD,
                                 torque_noise_std=TORQUE_STD, **kwargs)


@pytest.fixture(scope="module")
def arm() -> Arm:
    trajectory = FourierTrajectory.random(BUNDLED_HOME, seed=1)
    t = np.arange(0.0, DURATION, DT)
    kinematics = CachedKinematics(SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME),
                                  *trajectory(t))
    return Arm(kinematics, trajectory, t, kinematics.twist, kinematics.proper)


@dataclass
class Run:
    estimator: OnlineEstimator
    contact: np.ndarray  # per-sample flags from add()
    solves: list[tuple[float, Estimate | None, bool]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)
    n: int = 0


def run_online(arm: Arm, wrench: np.ndarray, config: OnlineConfig = CONFIG,
               end: float = DURATION, solve_every: int = SOLVE_EVERY,
               before: Callable[[OnlineEstimator, float], None] | None = None,
               cuts: Sequence[int] = ()) -> Run:
    """Feed ``wrench`` (the arm's samples) in batches of ``BATCH``, or cut before each of
    ``cuts`` (sample indices; multiples of ``solve_every`` are cut too, and a solve follows
    them); ``before(est, t)`` runs before each batch."""
    est = OnlineEstimator(config)
    n = int(round(end / DT))
    run = Run(est, np.zeros(n, dtype=bool), n=n)
    bounds = (np.arange(0, n, BATCH) if not len(cuts) else
              np.union1d(np.r_[0, np.arange(solve_every, n, solve_every)], cuts))
    for k, stop in zip(bounds, np.r_[bounds[1:], n], strict=True):
        s = slice(int(k), min(int(stop), n))
        if before is not None:
            before(est, float(arm.t[k]))
        step = est.add(arm.t[s], arm.twist[s], arm.proper[s], wrench[s])
        run.contact[s] = step.contact
        run.events += [(float(arm.t[k]), e) for e in step.events]
        if s.stop % solve_every == 0:
            run.solves.append((float(arm.t[s.stop - 1]), est.solve(), est.in_contact))
    return run


def mass_error(estimate: Estimate | None, mass: float = TRUE_MASS) -> float:
    assert estimate is not None
    return abs(estimate.pi[0] - mass) / mass


CONTACTS = (
    Contact(6.0, 0.4, (0.0, 3.0, 0.0), (0.02, 0.0, 0.08)),
    Contact(9.5, 1.0, (2.0, 0.0, -1.0), (0.05, 0.0, 0.05)),
    Contact(13.25, 0.3, (0.0, 0.0, 2.5)),
    Contact(17.0, 0.8, (-1.5, 1.5, 0.0), (0.0, -0.03, 0.1)),
    Contact(20.5, 1.2, (0.0, -2.0, 0.0), (0.03, 0.03, 0.03)),
)


# --- detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_flags_injected_contacts(arm: Arm, seed: int) -> None:
    sim = arm.simulation(contacts=CONTACTS, seed=seed)
    run = run_online(arm, sim.wrench(arm.t))
    est = run.estimator
    assert len(est.contacts) == len(CONTACTS)
    assert not est.payload_changes
    for found, truth in zip(est.contacts, CONTACTS, strict=True):
        assert abs(found.start - truth.start) <= 0.010
        assert abs(found.end - (truth.start + truth.duration)) <= 0.05
    # per sample: the contacts are flagged (but for the debounce), and outside them only the
    # hysteresis tails right after their ends
    truth = np.any(sim.contact_wrench(arm.t) != 0.0, axis=1)
    tails = np.zeros_like(truth)
    for c in CONTACTS:
        end = c.start + c.duration
        tails |= (arm.t >= end) & (arm.t < end + 0.05)
    assert not (run.contact & ~truth & ~tails).any()
    assert run.contact[truth].mean() > 0.98


@pytest.mark.parametrize("seed", [0, 1])
def test_no_contact_on_clean_motion(arm: Arm, seed: int) -> None:
    run = run_online(arm, arm.simulation(seed=seed).wrench(arm.t), end=20.0)
    assert run.estimator.monitor.ready
    assert len(run.estimator.contacts) == 0
    assert not run.contact.any()
    assert not run.estimator.payload_changes


# --- gating ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "margin"),
    [(0, 0.0505), (BATCH - 2, 0.0505), (BATCH - 2, 0.0)],
    ids=["start on a batch boundary", "start two samples before a batch end",
         "zero margin, start two samples before a batch end"],
)
def test_gate_lets_through_exactly_the_samples_outside_the_margins(
    arm: Arm, phase: int, margin: float
) -> None:
    """The statistics equal those of an identifier fed every sample outside
    ``[start - gate_margin, end + gate_margin]`` of the detected contacts (and not flagged).

    The margin 0.0505 s puts no sample on a margin boundary. Samples within ``gate_margin``
    of the newest sample are still held back at the end of the run.
    """
    starts = [7000 + phase, 12000 + phase]
    contacts = tuple(Contact(float(arm.t[i]), 0.5, (0.0, 4.0, 0.0)) for i in starts)
    wrench = arm.simulation(contacts=contacts).wrench(arm.t)
    config = OnlineConfig(payload=PAYLOAD, gate_margin=margin)
    run = run_online(arm, wrench, config, end=16.0)
    est = run.estimator
    assert [c.start for c in est.contacts] == [arm.t[i] for i in starts]

    t = arm.t[:run.n]
    excluded = run.contact.copy()
    for c in est.contacts:
        excluded |= (t >= c.start - margin) & (t <= c.end + margin)
    released = t <= t[-1] - margin
    keep = ~excluded & released
    reference = PayloadIdentifier(PAYLOAD)
    reference.add(arm.twist[:run.n][keep], arm.proper[:run.n][keep], wrench[:run.n][keep])

    ours, theirs = est.identifier.statistics, reference.statistics
    assert ours.samples == theirs.samples
    np.testing.assert_allclose(ours.information, theirs.information, rtol=1e-9,
                               atol=1e-12 * np.abs(theirs.information).max())
    np.testing.assert_allclose(ours.moment, theirs.moment, rtol=1e-9,
                               atol=1e-12 * np.abs(theirs.moment).max())
    assert ours.energy == pytest.approx(theirs.energy, rel=1e-9)
    mine, ref = est.identifier.estimate(), reference.estimate()
    np.testing.assert_allclose(mine.pi, ref.pi, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(mine.offset, ref.offset, rtol=1e-7, atol=1e-9)


def test_estimate_is_held_during_a_contact(arm: Arm) -> None:
    contact = Contact(10.0, 1.0, (0.0, 0.0, -4.0), (0.04, 0.0, 0.06))
    run = run_online(arm, arm.simulation(contacts=(contact,)).wrench(arm.t), end=14.0,
                     solve_every=100)
    before = [e for t, e, _ in run.solves if t < contact.start]
    during = [(t, e) for t, e, in_contact in run.solves if in_contact]
    after = [e for t, e, in_contact in run.solves
             if not in_contact and t > contact.start + contact.duration]
    held = before[-1]
    assert held is not None
    assert len(during) >= 9
    assert all(t <= contact.start + contact.duration + 0.05 for t, _ in during)
    pi = held.pi.copy()
    for _, e in during:
        assert e is held
        np.testing.assert_array_equal(e.pi, pi)
    assert after[0] is not held
    assert mass_error(after[-1]) < 0.005
    assert max(mass_error(e) for _, e in during) == mass_error(held)


def test_long_contact_does_not_corrupt_the_published_estimate(arm: Arm) -> None:
    """A 2-s push (longer than payload_change_after = 1.5 s) with the payload unchanged.

    The published mass must stay near the truth: a candidate payload fitted to the anomaly
    does not explain a push, so it is not taken for a new payload (which would make the rest
    of the contact the first data of new statistics).
    """
    contact = Contact(10.0, 2.0, (0.0, 4.0, 0.0), (0.02, 0.0, 0.08))
    run = run_online(arm, arm.simulation(contacts=(contact,)).wrench(arm.t), end=20.0)
    published = [(t, e) for t, e, _ in run.solves if e is not None and t > 5.0]
    worst = max(published, key=lambda te: mass_error(te[1]))
    assert mass_error(worst[1]) < 0.02, (
        f"mass {worst[1].pi[0]:.3f} kg published at t = {worst[0]:.1f} s "
        f"(payload changes at {run.estimator.payload_changes})")


def test_payload_swap_is_detected_and_identified(arm: Arm) -> None:
    other = BodyParameters.from_mass_com_inertia(0.8, [0.0, 0.03, 0.09],
                                                 [0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
    sim = arm.simulation(payload_changes=((12.0, other),))
    run = run_online(arm, sim.wrench(arm.t))
    est = run.estimator
    assert len(est.payload_changes) == 1
    assert abs(est.payload_changes[0] - 12.0) <= 0.02
    assert not est.contacts
    before = [e for t, e, _ in run.solves if 8.0 < t < 12.0]
    assert max(mass_error(e) for e in before) < 0.005
    later = [e for t, e, _ in run.solves if t >= 15.0]
    assert later and all(mass_error(e, other.mass) < 0.02 for e in later)
    assert mass_error(later[-1], other.mass) < 0.005
    assert est.monitor.ready  # retrained on the new payload
    assert [e for _, e in run.events].count("payload_change") == 1


def test_a_saved_payload_is_published_until_the_data_replace_it(arm: Arm) -> None:
    """``start_from`` a payload that is not the one mounted (as after a tool change while the
    node was down): it is the estimate until ``min_samples``, the monitor does not learn
    its residuals as normal, and the data's estimate then replaces it. The default prior
    weight (1e-4) pulled the mass 0.8 g towards the saved 0.8 kg here (0.3 g without the
    prior; 1e-3 pulled it 5.7 g, 1e-2 57 g)."""
    wrong = BodyParameters.from_mass_com_inertia(0.8, [0.0, 0.03, 0.09],
                                                 [0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
    saved = Estimate(body=wrong, offset=np.zeros(6), covariance=1e-10 * np.eye(16),
                     samples=1e4, condition_number=1.0, method="saved")
    config = replace(CONFIG, min_samples=2000,
                     payload=replace(PAYLOAD, prior=tuple(wrong.pi), prior_weight=1e-4))
    early: list[tuple[bool, bool]] = []

    def before(est: OnlineEstimator, t: float) -> None:
        if t == 0.0:
            est.start_from(saved)
        if t < 1.9:
            early.append((est.estimate is saved and not est.from_data, est.monitor.ready))

    run = run_online(arm, arm.simulation().wrench(arm.t), config=config, end=12.0,
                     before=before)
    assert early and all(is_saved and not ready for is_saved, ready in early)
    est = run.estimator
    assert est.from_data and est.estimate is not saved
    assert mass_error(est.estimate) < 1e-3
    assert est.monitor.ready and not est.contacts and not est.payload_changes
    with pytest.raises(InertialIdError, match="physically consistent"):
        est.start_from(replace(saved, body=BodyParameters.from_pi(-wrong.pi)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_what_is_decided_does_not_depend_on_the_batches(arm: Arm, seed: int) -> None:
    """The same samples cut into random batches (1 sample to 3 s, solves at the same
    samples) give the same contacts, payload change, per-sample flags, ledger and
    statistics as batches of 20: the monitor's training, a contact's start and end and the
    payload-change checks act at samples, not at the ends of batches."""
    other = BodyParameters.from_mass_com_inertia(0.8, [0.0, 0.03, 0.09],
                                                 [0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
    contacts = (Contact(5.0, 0.03, (0.0, 6.0, 0.0)), Contact(8.0, 0.5, (3.0, 0.0, -1.0)),
                Contact(9.0, 2.0, (0.0, 0.0, 3.0), (0.03, 0.0, 0.05)))
    wrench = arm.simulation(contacts=contacts, payload_changes=((14.0, other),)).wrench(arm.t)
    rng = np.random.default_rng(seed)
    sizes = np.where(rng.random(400) < 0.3, rng.integers(1, 4, 400),
                     rng.integers(1, 3000, 400))
    cut = run_online(arm, wrench, end=18.0, cuts=np.cumsum(sizes))
    even = run_online(arm, wrench, end=18.0)
    a, b = cut.estimator, even.estimator
    assert len(a.contacts) >= 2 and len(a.payload_changes) == 1
    assert [(c.start, c.end) for c in a.contacts] == [(c.start, c.end) for c in b.contacts]
    np.testing.assert_allclose([c.peak_t2 for c in a.contacts],
                               [c.peak_t2 for c in b.contacts], rtol=1e-9)
    assert a.payload_changes == b.payload_changes
    np.testing.assert_array_equal(cut.contact, even.contact)
    assert a.ledger() == b.ledger()
    assert sorted(e for _, e in cut.events) == sorted(e for _, e in even.events)
    ours, theirs = a.identifier.statistics, b.identifier.statistics
    assert ours.samples == theirs.samples
    np.testing.assert_allclose(ours.information, theirs.information, rtol=1e-9)
    assert a.estimate is not None and b.estimate is not None
    np.testing.assert_allclose(a.estimate.pi, b.estimate.pi, rtol=1e-7, atol=1e-9)


def _gathered_takes(arm: Arm, wrench: np.ndarray) -> tuple[OnlineEstimator, list, int]:
    """Batches of ``BATCH``, a solve every 250 samples except from 13.9 to 16 s (released
    samples stay pending through the contact that a payload change at 14 s starts), a tare
    at 7.56 s (between two solves); the estimator, its solves and how many times it took
    samples into its statistics."""
    est = OnlineEstimator(CONFIG)
    solves, takes, tared = [], [0], False
    take = est._take

    def counted(*args: np.ndarray) -> None:
        takes[0] += 1
        take(*args)

    est._take = counted  # type: ignore[method-assign]
    for k in range(0, 18000, BATCH):
        t = float(arm.t[k])
        if t >= 7.56 and not tared:
            est.tare()
            tared = True
        s = slice(k, k + BATCH)
        est.add(arm.t[s], arm.twist[s], arm.proper[s], wrench[s])
        if (k + BATCH) % 250 == 0 and not 13.9 <= t < 16.0:
            solves.append((t, est.solve()))
    return est, solves, takes[0]


def test_taking_released_samples_together_changes_no_estimate(
        arm: Arm, monkeypatch: pytest.MonkeyPatch) -> None:
    """Released samples gathered for ``TAKE_EVERY`` before they enter the statistics give,
    at every solve, the estimate of each batch taken at once: through a contact, a payload
    change and a tare (each takes or forgets what is pending at the right moment)."""
    other = BodyParameters.from_mass_com_inertia(0.8, [0.0, 0.03, 0.09],
                                                 [0.002, 0.0, 0.0, 0.002, 0.0, 0.001])
    contacts = (Contact(5.0, 0.4, (0.0, 3.0, 0.0)),)
    wrench = arm.simulation(contacts=contacts, payload_changes=((14.0, other),)).wrench(arm.t)
    monkeypatch.setattr(online, "TAKE_EVERY", 0.0)
    eager, eager_solves, eager_takes = _gathered_takes(arm, wrench)
    monkeypatch.undo()
    gathered, solves, takes = _gathered_takes(arm, wrench)
    assert takes < eager_takes / 3, (takes, eager_takes)  # one per 0.1 s, not per batch
    assert len(eager.contacts) == 1 and len(eager.payload_changes) == 1
    assert [t for t, _ in eager_solves] == [t for t, _ in solves]
    for (_, a), (_, b) in zip(eager_solves, solves, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(b.pi, a.pi, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(b.offset, a.offset, rtol=1e-9, atol=1e-12)
            # The block-robust covariance: the same blocks (other blocks moved it by 7-76 %;
            # the sums' rounding, through the design effects, by up to 2e-6).
            scale = np.abs(a.covariance).max()
            assert np.abs(b.covariance - a.covariance).max() < 1e-5 * scale
            assert b.covariance_type == a.covariance_type
    assert eager.ledger() == gathered.ledger()
    assert eager.samples == gathered.samples


# --- reset, tare, freeze --------------------------------------------------------------------


def test_reset_forgets_and_starts_again(arm: Arm) -> None:
    contact = Contact(16.0, 0.5, (3.0, 0.0, 0.0))
    snapshot: dict[str, object] = {}

    def before(est: OnlineEstimator, t: float) -> None:
        if abs(t - 8.0) < DT / 2:
            assert est.estimate is not None and est.monitor.ready
            est.reset()
            snapshot.update(estimate=est.estimate, samples=est.identifier.statistics.samples,
                            ready=est.monitor.ready)

    run = run_online(arm, arm.simulation(contacts=(contact,)).wrench(arm.t), end=20.0,
                     before=before)
    assert snapshot == {"estimate": None, "samples": 0.0, "ready": False}
    est = run.estimator
    assert [e for t, e, _ in run.solves if 8.0 < t < 8.5] == [None]
    assert est.identifier.statistics.samples < 12000  # only data since the reset
    assert mass_error(est.estimate) < 0.005
    assert [round(c.start, 3) for c in est.contacts] == [16.0]


def test_tare_without_an_estimate_raises() -> None:
    with pytest.raises(InertialIdError):
        OnlineEstimator(CONFIG).tare()


@pytest.fixture(scope="module")
def tare_runs(arm: Arm) -> tuple[Run, Run, list[Estimate], np.ndarray, np.ndarray]:
    """Runs with and without a tare at 10 s; the F/T bias changes slightly at that moment."""
    sim = arm.simulation()
    wrench = sim.wrench(arm.t)
    delta = np.array([0.06, 0.0, 0.0, 0.001, 0.0, 0.0])  # well under the T^2 threshold
    wrench[10000:] += delta
    tared: list[Estimate] = []

    def before(est: OnlineEstimator, t: float) -> None:
        if abs(t - 10.0) < DT / 2:
            tared.append(est.tare())
            # the data's information on pi stays, none is left on the offset
            stats = est.identifier.statistics
            assert stats.samples > 0 and not np.any(stats.information[10:, :])

    return (run_online(arm, wrench, before=before), run_online(arm, wrench), tared,
            sim.offset, sim.offset + delta)


def test_tare_restarts_and_the_offset_follows_a_change_after_it(tare_runs: tuple) -> None:
    with_tare, without, tared, old, new = tare_runs
    # the tare keeps pi and removes the mean recent residual (the old bias at 10 s)
    error = tared[0].offset - old
    assert np.all(np.abs(error[:3]) < 0.01) and np.all(np.abs(error[3:]) < 5e-4)
    assert not without.estimator.contacts and not without.estimator.payload_changes
    assert not with_tare.estimator.payload_changes
    error = with_tare.estimator.estimate.offset - new
    assert np.all(np.abs(error[:3]) < 0.01) and np.all(np.abs(error[3:]) < 3e-4)
    assert mass_error(with_tare.estimator.estimate) < 0.005
    # without the tare the old data keep pulling the offset back
    assert abs(without.estimator.estimate.offset[0] - new[0]) > 0.015


def test_tare_keeps_the_payload_estimate(tare_runs: tuple) -> None:
    """After a tare the payload is still known: the published mass must not degrade and no
    contact may be flagged for a bias change far below the threshold.

    (Emptying the statistics instead would re-identify all of ``[pi; offset]`` from 0.5 s of
    motion, and the monitor would flag the poorer estimate's residuals as a contact.)
    """
    with_tare = tare_runs[0]
    published = [(t, e) for t, e, _ in with_tare.solves if t > 10.0]
    worst = max(published, key=lambda te: mass_error(te[1]))
    assert mass_error(worst[1]) < 0.005, f"mass {worst[1].pi[0]:.4f} kg at {worst[0]:.1f} s"
    assert not with_tare.estimator.contacts


def test_tare_after_a_bias_step_re_zeroes_the_offset(arm: Arm) -> None:
    """The F/T bias jumps by ~1 N at 10 s (the sensor was re-zeroed); tare at 10.3 s.

    Expected: the tared offset is the new bias, the payload estimate is kept, nothing is
    reported as a payload change (the gated statistics never see the new bias, because the
    step is flagged as a contact: the tare must take it from the latest raw residuals).
    """
    sim = arm.simulation()
    wrench = sim.wrench(arm.t)
    delta = np.array([1.0, -0.5, 0.8, 0.02, 0.0, 0.0])
    wrench[10000:] += delta
    tared: list[Estimate] = []

    def before(est: OnlineEstimator, t: float) -> None:
        if abs(t - 10.3) < DT / 2:
            tared.append(est.tare())

    run = run_online(arm, wrench, end=16.0, before=before)
    new = sim.offset + delta
    assert np.abs(tared[0].offset - new)[:3].max() < 0.05
    assert not run.estimator.payload_changes
    assert mass_error(run.estimator.estimate) < 0.005


def test_frozen_statistics_do_not_grow(arm: Arm) -> None:
    contact = Contact(10.0, 0.5, (0.0, 3.0, 0.0))
    samples: list[tuple[float, float, bool]] = []

    def before(est: OnlineEstimator, t: float) -> None:
        if abs(t - 8.0) < DT / 2:
            est.frozen = True
        if abs(t - 12.0) < DT / 2:
            est.frozen = False
        samples.append((t, est.identifier.statistics.samples, est.frozen))

    run = run_online(arm, arm.simulation(contacts=(contact,)).wrench(arm.t), end=16.0,
                     before=before)
    frozen = [s for t, s, f in samples if f and t > 8.0]
    assert len(set(frozen)) == 1
    held = [e for t, e, _ in run.solves if 8.0 <= t < 12.0]
    assert len({id(e) for e in held}) == 1
    assert [round(c.start, 3) for c in run.estimator.contacts] == [10.0]  # still monitoring
    assert samples[-1][1] > frozen[0] + 3000
    assert mass_error(run.estimator.estimate) < 0.005


# --- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"min_samples": 0}, {"gate_margin": -0.1}, {"payload_change_after": -1.0},
     {"confidence": 1.5}, {"confidence": 0.0}, {"training_samples": 6}],
    ids=lambda k: next(iter(k)) + "=" + str(next(iter(k.values()))),
)
def test_invalid_configuration_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(InertialIdError):
        OnlineConfig(**kwargs)
