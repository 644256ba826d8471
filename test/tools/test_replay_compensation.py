"""Replay of a bag recorded after the payload was applied to a driver that compensates its
wrench (a UR): the bag's wrench holds only the residual from then on, and the applier's
announcements on ``/applier/compensation`` say what the driver subtracted. Replay reads them
and adds that payload back, as the solver node does live, so the estimate is the whole
payload (inertial_id.io.compensation_topic, PayloadPipeline.announce)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inertial_id.core.estimation.compensation import PENDING, SETTLED
from inertial_id.io.bags import BagReader
from inertial_id.tools.replay import ReplayOptions, replay
from inertial_id.tools.synthetic import (
    DRIVER_TRANSITION,
    START_TIME,
    SimulateOptions,
    simulate_bag,
)

APPLIED_AT = 5.0  # s into the recording


@pytest.fixture(scope="module")
def applied_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_bag(tmp_path_factory.mktemp("applied") / "bag",
                        SimulateOptions(duration=12.0, driver_payload_at=APPLIED_AT))


def test_the_bag_holds_the_announcements_and_a_compensated_wrench(applied_bag: Path) -> None:
    with BagReader(applied_bag) as bag:
        announcements = bag.announcements()
        wrenches = [m for m in bag.messages() if hasattr(m, "wrench")]
    assert [a.method for a in announcements] == [PENDING, SETTLED]
    settled = announcements[1]
    assert settled.stamp == pytest.approx(START_TIME + APPLIED_AT + DRIVER_TRANSITION)
    assert settled.pi[0] == pytest.approx(1.5) and settled.frame == "ft_sensor"
    t = np.array([w.stamp for w in wrenches]) - START_TIME
    force = np.array([w.wrench[:3] for w in wrenches])
    # Before the apply the sensor carries the payload's weight (1.5 kg: 14.7 N); after it the
    # driver took the weight out.
    before = np.linalg.norm(force[t < APPLIED_AT - 0.5].mean(axis=0))
    after = np.linalg.norm(force[t > APPLIED_AT + 1.0].mean(axis=0))
    assert before > 10.0 and after < 4.0, (before, after)


def test_replay_restores_the_whole_payload(applied_bag: Path) -> None:
    result = replay(ReplayOptions(applied_bag, progress=False))
    body = result.estimate.body
    assert body.mass == pytest.approx(1.5, rel=1e-3)  # within 0.1 %
    assert np.abs(body.com - np.array([0.012, -0.018, 0.065])).max() < 1e-3
    assert result.contacts == [] and result.payload_changes == []
    ledger = result.pipeline.estimation.ledger()
    # Used, not held out: without the restore the drop of the weight at the apply is an
    # anomaly that gates the rest of the record, and the estimate is the one before it.
    assert ledger["used"] > 0.9 * ledger["received"], ledger
    assert ledger["dropped_driver_compensation_changing"] > 0  # the switch was held off
