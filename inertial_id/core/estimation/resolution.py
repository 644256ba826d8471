"""How the online estimator resolves a lasting anomaly, and its tare.

:class:`AnomalyResolution` is the part of
:class:`~inertial_id.core.estimation.online.OnlineEstimator` that decides what a contact that
does not end is: a step of the F/T bias (a driver's re-zero:
:func:`~inertial_id.core.estimation.bias_step.bias_step`), a new payload
(:class:`~inertial_id.core.estimation.payload_change.NewPayloadTest`) or, past
``open_anomaly_after``, an open anomaly reported and resolved; and the tare, which relearns
the offset the same way a step does. It works on the estimator's own state (a mixin).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.anomaly import T2Monitor
from inertial_id.core.estimation.bias_step import OpenAnomaly, bias_step
from inertial_id.core.estimation.held import Anomaly
from inertial_id.core.estimation.online_types import OnlineConfig
from inertial_id.core.estimation.payload import PayloadIdentifier
from inertial_id.core.estimation.payload_change import NewPayloadTest
from inertial_id.core.estimation.setup_check import SetupCheck

CHANGE_RECHECK = 0.5
"""Seconds between two payload-change checks during a long anomaly."""
GATED, FROZEN, RESET = "gated", "frozen", "reset"
"""Ledger reasons: held out near a contact, arrived while frozen, held when reset."""
TARE_SAMPLES = 200
"""Latest samples (at most this many batches of them) whose mean residual a tare removes."""


class AnomalyResolution:
    """The anomaly resolution and tare of the online estimator (see the module docstring);
    its methods use the estimator's state, declared here."""

    config: OnlineConfig
    estimate: Estimate | None
    from_data: bool
    identifier: PayloadIdentifier
    monitor: T2Monitor
    setup: SetupCheck
    counters: Counter[str]
    used: int
    payload_changes: list[float]
    bias_steps: list[float]
    open_anomalies: list[OpenAnomaly]
    filter_span: float
    _anomaly: Anomaly
    _change_test: NewPayloadTest
    _recent_residuals: deque[NDArray[np.float64]]
    _exclude_until: float
    _latest: float
    _clear_pending: Callable[[], None]
    _take: Callable[[NDArray[np.float64], NDArray[np.float64]], None]
    _take_pending: Callable[[], None]
    _new_monitor: Callable[[], T2Monitor]
    _relearn_monitor: Callable[[], None]

    def _check_payload_change(self, now: float, events: list[str]) -> None:
        """What is the sustained anomaly? A step of the bias, a new payload, or a contact.

        A step (:func:`~inertial_id.core.estimation.bias_step.bias_step`: the residuals less
        their mean are noise, and the motion would have shown a contact) relearns the offset.
        Otherwise a candidate payload (offset kept) is fitted to the samples since the
        anomaly began; if it explains them (under ``CHANGE_OUTLIERS`` of their raw residuals
        above the T^2 threshold) the robot holds something new: the statistics restart from
        those samples. Otherwise it is a long contact, checked again ``CHANGE_RECHECK``
        seconds later, until ``open_anomaly_after``: then it is reported open and resolved
        (a step even without motion, else unexplained: the monitor relearns).
        """
        self._anomaly.next_check = now + CHANGE_RECHECK
        held = self._anomaly.samples()
        start = self.monitor.contact_start
        if self.estimate is None or held is None or start is None:
            return
        stamps, rows = held
        limit = self.config.open_anomaly_after
        overdue = limit > 0 and now - start >= limit
        if stamps.size < self.config.min_samples // 5 and not overdue:
            return
        step = bias_step(rows, self.estimate.pi, self.estimate.offset, self.identifier.sign,
                         self.monitor, need_motion=not overdue)
        if step is not None:
            self._bias_step(start, step, stamps, rows, events)
        elif self._change_test.explains(rows, self.estimate.offset, self.identifier.sign,
                                        self.monitor, self.config.payload):
            self._payload_change(stamps, rows, events)
        elif overdue:
            self._relearn_monitor()
            events.append("anomaly_unexplained")
        else:
            return
        if overdue:
            self.open_anomalies.append(OpenAnomaly(start, now, events[-1].removeprefix(
                "anomaly_")))

    def _payload_change(self, stamps: NDArray[np.float64],
                        rows: NDArray[np.float64], events: list[str]) -> None:
        """A new payload from the anomaly's samples on: the statistics restart with them."""
        self.payload_changes.append(float(stamps[0]))
        events.append("payload_change")
        self._clear_pending()  # used by the old payload's statistics, forgotten with them
        self.identifier.reset()
        self.setup.reset()
        self._take(stamps, rows)
        self.counters[GATED] -= stamps.size  # they were held out as a contact: now used
        self.used += stamps.size
        self.monitor = self._new_monitor()
        self.estimate, self.from_data = None, False
        self._anomaly.clear()
        self._exclude_until = -np.inf

    def _bias_step(self, start: float, step: NDArray[np.float64],
                   stamps: NDArray[np.float64], rows: NDArray[np.float64],
                   events: list[str]) -> None:
        """The bias stepped by ``step`` at ``start``: the offset is relearned (the inertial
        parameters kept) from the anomaly's samples clear of the filter's transition."""
        self.bias_steps.append(float(start))
        events.append("bias_step")
        assert self.estimate is not None
        self._new_offset(self.estimate.offset + step)
        clear = stamps >= start + self.filter_span + self.config.gate_margin
        self._take(stamps[clear], rows[clear])
        self.counters[GATED] -= int(np.count_nonzero(clear))
        self.used += int(np.count_nonzero(clear))

    def _new_offset(self, offset: NDArray[np.float64]) -> None:
        """The bias changed to ``offset``: the statistics keep what they say of ``pi`` only,
        and an anomaly the change raised is cleared without being logged as a contact."""
        assert self.estimate is not None
        self._take_pending()  # what they say of pi is kept
        self.identifier.forget_offset()
        self.setup.reset()  # its statistics assume one offset throughout
        self._recent_residuals.clear()
        self.monitor.clear_contact()
        self._anomaly.clear()
        self.estimate = replace(self.estimate, offset=offset)

    def tare(self) -> Estimate:
        """Re-estimate the F/T offset with the payload known, keeping what the data say of it.

        Call it when nothing touches the payload. The new offset is the current one plus the
        mean residual of the latest ``TARE_SAMPLES`` samples (their residuals only carry the
        bias change then). The statistics keep their information on ``pi`` with the old offset
        eliminated (Schur complement), so only the offset is learned anew; an anomaly the
        bias change raised is cleared without being logged as a contact.
        """
        if self.estimate is None or not self._recent_residuals:
            raise InertialIdError("tare needs an estimate of the payload and recent samples")
        recent = np.concatenate(self._recent_residuals)[-TARE_SAMPLES:]
        self._new_offset(self.estimate.offset + recent.mean(axis=0))
        self._exclude_until = self._latest + self.config.gate_margin
        return self.estimate
