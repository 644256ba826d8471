"""The estimation stage the solver node and replay share (inertial_id.core.estimation.stage):
refused batches counted by reason and the ledger adding up, solves on a given clock or on
sample time (the same solves however the batches are cut), a failed solve keeping the last
estimate and naming the failure, the uncertainty refreshed at its own period."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inertial_id.core.estimation.online import OnlineConfig, OnlineEstimator
from inertial_id.core.estimation.payload import PayloadConfig
from inertial_id.core.estimation.stage import (
    SHARE_MAX_GAP,
    SLOW_SOLVE_PERIOD,
    SOLVE_SHARE,
    UNCERTAINTY_PERIOD,
    EstimationStage,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)

RATE = 500.0  # Hz


@pytest.fixture(scope="module")
def samples() -> dict[str, np.ndarray]:
    """4 s of noisy samples of the bundled arm with the default payload (no contact)."""
    kinematics = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)
    sim = PayloadSimulation(kinematics, FourierTrajectory.random(BUNDLED_HOME, seed=1))
    t = np.arange(0.0, 4.0, 1.0 / RATE)
    twist, proper = kinematics.compute(*sim.trajectory(t))
    wrench = sim.wrench(t, noise=True)
    return {"times": t, "twist": twist, "proper_acceleration": proper, "wrench": wrench,
            "wrench_raw": wrench.copy()}


def _stage(period: float = 0.5) -> EstimationStage:
    return EstimationStage(OnlineEstimator(OnlineConfig(min_samples=200)), period)


def _part(samples: dict[str, np.ndarray], start: int, stop: int) -> dict[str, np.ndarray]:
    return {k: v[start:stop] for k, v in samples.items()}


def test_refused_batches_are_counted_and_the_ledger_adds_up(
        samples: dict[str, np.ndarray]) -> None:
    stage = _stage()
    stage.add(_part(samples, 0, 600))
    bad = _part(samples, 600, 650)
    bad["wrench"] = bad["wrench"].copy()
    bad["wrench"][3, 2] = np.nan
    result = stage.add(bad)
    assert result.dropped == "invalid" and result.message and not result.steps
    huge = _part(samples, 650, 700)
    huge["twist"] = huge["twist"] * 1e12
    result = stage.add(huge)
    assert result.dropped == "implausible" and "\n" not in result.message
    stage.add(_part(samples, 700, 2000))
    ledger = stage.ledger()
    assert ledger["received"] == 2000
    assert ledger["dropped_invalid"] == 50 and ledger["dropped_implausible"] == 50
    parts = ledger["used"] + ledger["held"] + ledger["provisional"] + sum(
        v for k, v in ledger.items() if k.startswith("dropped_"))
    assert parts == ledger["received"], ledger
    assert stage.online.estimate is not None
    assert stage.online.estimate.body.mass == pytest.approx(default_payload().mass, rel=0.01)


def test_on_a_clock_it_solves_at_most_once_a_period(samples: dict[str, np.ndarray]) -> None:
    stage = _stage(period=0.05)
    solved_at = []
    for k, start in enumerate(range(0, 2000, 10)):  # 20 ms batches, clock 10 ms apart
        now = 100.0 + 0.01 * k
        if stage.add(_part(samples, start, start + 10), now).solved:
            solved_at.append(now)
    gaps = np.diff(solved_at)
    # period at least, and SLOW_SOLVE_PERIOD while solves are slow (cvxpy before the
    # dedicated solver is ready)
    assert len(solved_at) > 20 and gaps.min() >= 0.05 - 1e-9
    assert gaps.max() <= max(0.05, SLOW_SOLVE_PERIOD) + 0.01 + 1e-9
    assert not stage.idle(solved_at[-1] + 0.5) and stage.idle(solved_at[-1] + 1.0)


@settings(max_examples=5, deadline=None)
@given(cuts=st.lists(st.integers(501, 1999), max_size=12, unique=True))
def test_on_sample_time_the_solves_do_not_depend_on_the_batches(
        samples: dict[str, np.ndarray], cuts: list[int]) -> None:
    """After the first batch (whose first step sets the schedule), however the rest is cut."""
    whole, cut = _stage(), _stage()
    reference = [*whole.add(_part(samples, 0, 500)).solves,
                 *whole.add(_part(samples, 500, 2000)).solves]
    bounds = [0, 500, *sorted(cuts), 2000]
    solves = [s for a, b in zip(bounds[:-1], bounds[1:], strict=True)
              for s in cut.add(_part(samples, a, b)).solves]
    assert [t for t, _ in solves] == [t for t, _ in reference]
    for (_, e1), (_, e2) in zip(solves, reference, strict=True):
        np.testing.assert_allclose(e1.pi, e2.pi, rtol=1e-7, atol=1e-10)


class Crashing(OnlineEstimator):
    """An estimator whose solve fails in a way the core does not foresee (as a solver
    library's panic would), from the ``fail_from``-th solve on."""

    fail_from = 2

    def solve(self, uncertainty: bool = True):  # type: ignore[no-untyped-def]
        self.fail_from -= 1
        if self.fail_from <= 0:
            raise BaseException("solver panicked")
        return super().solve(uncertainty)


def test_a_failed_solve_keeps_the_last_estimate_and_names_the_failure(
        samples: dict[str, np.ndarray]) -> None:
    stage = EstimationStage(Crashing(OnlineConfig(min_samples=200)), 1.0)
    first = stage.add(_part(samples, 0, 1000))
    assert first.solves and not stage.failure
    kept = stage.online.estimate
    second = stage.add(_part(samples, 1000, 2000))
    assert second.solved and not second.solves  # tried, gave nothing new
    assert "solver panicked" in stage.failure and len(stage.failures) >= 1
    assert stage.online.estimate is kept


@pytest.mark.parametrize("drift", [False, True])
def test_between_refreshes_the_parameters_are_solved_and_the_uncertainty_carried(
        samples: dict[str, np.ndarray], drift: bool) -> None:
    """Solving at every 10-sample batch: the parameters are those of a whole estimate at
    every solve; the uncertainty (covariance, std, verdicts) is the last refresh's, at most
    :data:`UNCERTAINTY_PERIOD` old."""
    def stage(uncertainty_period: float) -> EstimationStage:
        config = OnlineConfig(min_samples=200, payload=PayloadConfig(bias_drift=drift))
        return EstimationStage(OnlineEstimator(config), 0.02,
                               uncertainty_period=uncertainty_period, solve_share=0.0)

    every, refreshed = stage(0.0), stage(UNCERTAINTY_PERIOD)
    whole_at: dict[float, object] = {}
    last_whole, carried_count = None, 0
    for start in range(0, 2000, 10):
        batch = _part(samples, start, start + 10)
        a, b = every.add(batch), refreshed.add(batch)
        assert [t for t, _ in a.solves] == [t for t, _ in b.solves]
        for (t, whole), (_, carried) in zip(a.solves, b.solves, strict=True):
            np.testing.assert_allclose(carried.pi, whole.pi, rtol=1e-8, atol=1e-12)
            np.testing.assert_allclose(carried.offset, whole.offset, rtol=1e-8, atol=1e-12)
            if drift:
                np.testing.assert_allclose(carried.drift.rate, whole.drift.rate,
                                           rtol=1e-6, atol=1e-12)
            whole_at[t] = whole
            if last_whole is None or carried.covariance is not last_whole[1].covariance:
                last_whole = (t, carried)  # a refresh: the whole estimate's uncertainty
                np.testing.assert_allclose(carried.covariance, whole.covariance, rtol=1e-9)
                np.testing.assert_allclose(carried.com_std, whole.com_std, rtol=1e-9)
            else:
                carried_count += 1
                assert t - last_whole[0] < UNCERTAINTY_PERIOD
                np.testing.assert_array_equal(carried.std, last_whole[1].std)
                np.testing.assert_array_equal(carried.com_std, last_whole[1].com_std)
                np.testing.assert_array_equal(carried.inertia_com_std,
                                              last_whole[1].inertia_com_std)
                if drift:
                    np.testing.assert_array_equal(carried.drift.std, last_whole[1].drift.std)
                assert refreshed.online.verdicts == verdicts_at(every, last_whole[0], whole_at)
    assert len(whole_at) > 150  # solved at (nearly) every batch after the first 200 samples
    assert carried_count > 0.7 * len(whole_at)  # 4 of 5 solves carry the uncertainty


def verdicts_at(stage: EstimationStage, t: float, estimates: dict[float, object]) -> object:
    """The verdicts ``stage``'s estimator gives the estimate it made at ``t``."""
    from inertial_id.core.estimation.online_types import verdicts
    return verdicts(estimates[t], stage.online.config)


def test_a_forgotten_offset_makes_the_next_estimate_whole(
        samples: dict[str, np.ndarray]) -> None:
    """A bias step forgets the offset: the uncertainty of before must not be carried (the new
    offset is not determined until new samples come)."""
    stage = EstimationStage(OnlineEstimator(OnlineConfig(min_samples=200)), 0.02)
    stage.add(_part(samples, 0, 1000))
    identifier = stage.online.identifier
    before = identifier.estimate(uncertainty=False)
    assert np.isfinite(before.offset_std).all()
    identifier.forget_offset()
    after = identifier.estimate(uncertainty=False)
    assert after.covariance is not before.covariance
    assert not np.isfinite(after.offset_std).all()


@pytest.mark.parametrize(("share", "fewer", "within"), [(SOLVE_SHARE, 0.95, 0.3),
                                                         (0.01, 0.5, 0.8)])
def test_the_solves_thin_out_as_the_data_grow_and_the_estimate_stays_within_its_std(
        samples: dict[str, np.ndarray], share: float, fewer: float, within: float) -> None:
    """A solve due at every 5-sample batch (on a clock) against the same with the share rule:
    the rule's solves wait for new samples of ``share`` of those held (or an event, or
    ``SHARE_MAX_GAP``), fewer than ``fewer`` of the batches solve in these 4 s, and at every
    batch after the first second its latest estimate is within ``within`` std of the one a
    solve at that batch gives."""
    every = EstimationStage(OnlineEstimator(OnlineConfig(min_samples=200)), 0.005,
                            solve_share=0.0)
    shared = EstimationStage(OnlineEstimator(OnlineConfig(min_samples=200)), 0.005,
                             solve_share=share)
    solved_at, used_at, held_at, evented, worst = [], [], [], [], 0.0
    for start in range(0, 2000, 5):
        part = _part(samples, start, start + 5)
        now = float(part["times"][-1])
        every.add(part, now)
        result = shared.add(part, now)
        if result.solves:
            solved_at.append(now)
            used_at.append(shared.online.used)
            held_at.append(shared.online.samples)
            evented.append(bool(result.events))
        reference, latest = every.online.estimate, shared.online.estimate
        if now > 1.0 and reference is not None:
            gap = np.abs(latest.pi - reference.pi) / reference.std[:10]
            worst = max(worst, float(gap.max()))
    n_every = int(np.count_nonzero(np.arange(5, 2001, 5) > 200))
    assert len(solved_at) < fewer * n_every
    gaps = np.diff(solved_at)
    assert gaps.max() <= SHARE_MAX_GAP + 0.01 + 1e-9
    share_met = np.diff(used_at) >= share * np.array(held_at[1:]) - 1e-9
    timed_out = gaps >= SHARE_MAX_GAP - 1e-9
    assert np.all(share_met | timed_out | np.array(evented[1:]))
    assert worst < within, worst
    np.testing.assert_allclose(shared.online.estimate.pi, every.online.estimate.pi,
                               atol=within * float(every.online.estimate.std[:10].min()))


class Eventful(OnlineEstimator):
    """An estimator whose step says ``"contact_start"`` when :attr:`event_next` is set, as
    the real one does when a contact begins."""

    event_next = False

    def add(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        step = super().add(*args, **kwargs)
        if self.event_next:
            step.events.append("contact_start")
            self.event_next = False
        return step


def test_an_event_between_due_solves_brings_the_next_solve(
        samples: dict[str, np.ndarray]) -> None:
    """With a share no batch reaches (1), only the estimator's events, statistics changed in
    kind and :data:`SHARE_MAX_GAP` bring a solve: an event in the batch after a solve,
    before the next is due, brings one at the next due batch."""
    stage = EstimationStage(Eventful(OnlineConfig(min_samples=200)), 0.03, solve_share=1.0)
    solved, event_at = [], None
    for start in range(0, 2000, 5):  # 10 ms batches on a clock of their stamps
        part = _part(samples, start, start + 5)
        now = float(part["times"][-1])
        if event_at is None and solved and solved[-1] > 1.0 and now - solved[-1] < 0.015:
            stage.online.event_next, event_at = True, now  # the batch right after a solve
        if stage.add(part, now).solves:
            solved.append(now)
    assert event_at is not None
    after = [t for t in solved if t > event_at]
    assert after[0] <= event_at + 0.03 + 1e-9, (event_at, after[:3])
    assert np.diff(solved[1:]).max() <= SHARE_MAX_GAP + 0.03 + 1e-9


def test_the_provisional_stage_follows_settings_changed_while_running(
        samples: dict[str, np.ndarray]) -> None:
    """A solve period, share and estimator settings changed while the provisional samples
    come reach the provisional stage too (it is made from the first of them)."""
    stage = _stage(period=0.005)
    stage.add(_part(samples, 0, 5), 0.005, provisional=True)
    stage.solve_period, stage.solve_share = 0.1, 0.01
    config = OnlineConfig(min_samples=300, confidence=0.95)
    stage.online.reconfigure(config)
    stage.add(_part(samples, 5, 10), 0.01, provisional=True)
    provisional = stage.provisional
    assert provisional is not None
    assert (provisional.solve_period, provisional.solve_share) == (0.1, 0.01)
    assert provisional.online.config is config
    assert provisional.online.monitor.confidence == 0.95
