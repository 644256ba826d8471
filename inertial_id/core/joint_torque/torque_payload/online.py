"""The live joint-torque payload with contact monitoring (:class:`TorquePayloadOnline`): a
Hotelling ``T^2`` monitor on the joint residual (one component per joint, effort units),
samples held back around a contact (:data:`MIN_CONTACT`, :data:`GATE`, :data:`HOLD`, in s),
the external wrench on the payload (N, N m; payload frame) and an adaptive residual baseline.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import SolverError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.anomaly import TRIM_CONFIDENCE, T2Monitor, T2Result
from inertial_id.core.estimation.online_types import OnlineConfig, StepResult, Verdicts, verdicts
from inertial_id.core.joint_torque.torque_payload.stream import TorquePayloadStream
from inertial_id.core.joint_torque.warmup import WarmUpStatistics

MIN_CONTACT = 0.1
"""s above the T^2 threshold before a joint-torque contact starts, and below before it ends:
on the real Panda recording shorter debounces flagged 30-230 ms of model error at velocity
reversals as contacts (:func:`inertial_id.core.estimation.anomaly.contact_intervals`)."""
GATE = 0.05
"""s around a contact whose samples stay out of the estimate."""
HOLD = MIN_CONTACT + 2 * GATE
"""s a sample waits before it enters the statistics (a contact is confirmed by then)."""


class TorquePayloadOnline:
    """The live joint-torque payload with contact monitoring (the joint-torque counterpart of
    :class:`inertial_id.core.estimation.online.OnlineEstimator`).

    Each :meth:`step` takes the stream's ready samples; once an estimate whose mass has
    converged exists, their joint residual ``e - e_links - s J^T Y pi`` feeds a Hotelling
    :class:`T2Monitor` with one component per joint (trained on the first
    ``config.training_samples`` residuals, trimmed at
    :data:`~inertial_id.core.estimation.anomaly.TRIM_CONFIDENCE`, then flagging with a
    :data:`MIN_CONTACT` debounce in both directions, the ``confidence`` of ``config``).
    Samples wait :data:`HOLD` s and enter the statistics unless they are within :data:`GATE` s
    of a contact (its debounce included). The external wrench is the least-squares ``w``
    with ``s J_f^T w = -residual`` (exact for 6 joints), on the payload, in the payload
    frame.

    **Adaptive baseline.** A contact longer than ``relearn_after`` s is taken for a new level
    of the residual (a stiction offset left after a push, a drifting torque sensor): the
    monitor learns its baseline again from the following samples (event
    ``baseline_relearned``; they stay out of the statistics while it does), and from then on
    the change of the baseline's mean is subtracted from the efforts before they enter the
    statistics (:attr:`offset`, effort units per joint). A new payload is not such a level
    (its torques vary with the pose): call :meth:`reset` for one.

    **Warm-up.** A cold drive's extra friction, fading over its first minutes, is fitted to
    the residuals the monitor found quiet (:class:`~inertial_id.core.joint_torque.warmup.
    WarmUpStatistics`, time since the first sample watched) and taken out before each chunk
    is tested, so it is not a contact.
    ``config``: :class:`OnlineConfig` (min_samples, the verdicts' thresholds, monitor,
    confidence, training_samples).
    """

    def __init__(self, stream: TorquePayloadStream, config: OnlineConfig,
                 relearn_after: float = 3.0) -> None:
        self.stream = stream
        self.config = config
        self.relearn_after = float(relearn_after)
        self._origin: float | None = None  # stamp of the first sample watched (s)
        self.reset()

    @property
    def verdicts(self) -> Verdicts:
        """The current estimate's verdicts
        (:func:`inertial_id.core.estimation.online_types.verdicts`)."""
        return verdicts(self.estimate, self.config)

    def _new_monitor(self) -> T2Monitor:
        period = self.stream.period if self.stream.period > 0 else 0.01
        steps = max(1, int(round(MIN_CONTACT / period)))
        return T2Monitor(confidence=self.config.confidence,
                         training_samples=self.config.training_samples,
                         components=self.stream.identifier.links.model.n,
                         on_samples=steps, off_samples=steps,
                         trim_confidence=TRIM_CONFIDENCE)

    def step(self) -> StepResult | None:
        """Process the stream's ready samples (None when there are none): a
        :class:`~inertial_id.core.estimation.online_types.StepResult` whose ``residual`` is the
        external wrench on the payload (N, 6; zeros before an estimate; for an F/T sensor reporting
        ``payload_on_sensor`` the F/T residual is that same wrench), and whose events are
        ``"monitor_trained"``, ``"contact_start"``, ``"contact_end"``,
        ``"baseline_relearned"``."""
        chunk = self.stream.ready()
        if chunk is None:
            return None
        t, q, qd, qdd, effort, initial = chunk
        jacobians, rows, target = self.stream.identifier.terms(q, qd, qdd, effort, initial)
        n = t.size
        events: list[str] = []
        t2, contact = np.zeros(n), np.zeros(n, dtype=bool)
        threshold, wrench = float("inf"), np.zeros((n, 6))
        if not self.config.monitor:
            self.monitor = None  # switched off: no stale contact may hold samples back
        # The monitor starts once the mass has converged and then keeps watching: a push that
        # spoils the estimate must not switch off the test that keeps it out.
        watching = self.config.monitor and self.estimate is not None and (
            self.monitor is not None or self.verdicts.mass)
        if watching:
            if self._origin is None:
                self._origin = float(t[0])
            since = t - self._origin
            friction = self.stream.identifier.links.dissipative_efforts(qd, qdd, initial)
            raw = target - rows @ self.estimate.pi
            residual = raw - self.warm.fit().efforts(since, friction)
            wrench = self._external_wrench(jacobians, residual)
            if self.monitor is None:
                self.monitor = self._new_monitor()
            elif self.monitor.confidence != self.config.confidence:
                m = self.monitor
                m.reconfigure(self.config.confidence, m.training_samples, m.on_samples,
                              m.off_samples, m.release)
            result, watched = self._watch(t, residual)
            t2, contact, threshold = result.t2, result.contact, result.threshold
            events += watched
            quiet = (t2 <= threshold) & ~contact
            self.warm.add(since[quiet], raw[quiet], friction[quiet])
        self._hold((t, rows, target), watching)
        return StepResult(t, wrench, t2, contact, threshold, events)

    def _watch(self, t: NDArray[np.float64], residual: NDArray[np.float64]
               ) -> tuple[T2Result, list[str]]:
        """Run the monitor on one chunk; record contact intervals (gaps in the statistics)
        and relearn the baseline after a lasting contact. Returns its result and the
        events."""
        monitor = self.monitor
        assert monitor is not None
        events = []
        was_ready, was_in = monitor.ready, monitor.in_contact
        before = len(monitor.intervals)
        result = monitor.update(t, residual)
        if monitor.ready and not was_ready:
            events.append("monitor_trained")
            if self._baseline is None:
                self._baseline = monitor.mean.copy()
            else:  # after a relearning: the level change is an effort offset from now on
                self.offset = monitor.mean - self._baseline
        ended = monitor.intervals[before:]
        started = len(ended) + int(monitor.in_contact) - int(was_in)
        events += ["contact_start"] * started
        events += ["contact_end"] * len(ended)
        self.contacts += started
        self._gaps += [(c.start, c.end) for c in ended]
        start = monitor.contact_start
        if start is not None and t[-1] - start > self.relearn_after:
            self._gaps.append((start, float(t[-1])))
            monitor.reset()
            self._relearning_since = float(t[-1])
            events.append("baseline_relearned")
        if self._relearning_since is not None and monitor.ready:
            self._gaps.append((self._relearning_since, float(t[-1])))
            self._relearning_since = None
        return result, events

    def _hold(self, chunk: tuple[NDArray[np.float64], ...], watching: bool) -> None:
        """Samples wait :data:`HOLD` s before entering the statistics, so those of a contact's
        debounce (above the threshold before the contact is confirmed) and within
        :data:`GATE` s of it, and those of a baseline being relearned, are left out."""
        self._held.append(chunk)
        t, rows, target = (np.concatenate(parts) for parts in zip(*self._held, strict=True))
        due = t < t[-1] - HOLD
        running = self.monitor.candidate_start if (watching and self.monitor) else None
        if running is not None:
            due &= t < running - GATE
        if self._relearning_since is not None:
            due &= t < self._relearning_since - GATE
        keep = due.copy()
        for start, end in self._gaps:
            keep &= ~((t >= start - GATE) & (t <= end + GATE))
        self.stream.add_rows(rows[keep], target[keep] - self.offset)
        rest = ~due
        self._held = [(t[rest], rows[rest], target[rest])] if rest.any() else []
        if self._gaps and t[-1] - self._gaps[-1][1] > HOLD + GATE:
            self._gaps = [g for g in self._gaps if g[1] + GATE >= t[-1] - HOLD]

    def _external_wrench(self, jacobians: NDArray[np.float64],
                         residual: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per sample the least-squares ``w`` with ``s J_f^T w = -residual`` (N, 6), from the
        payload frame's Jacobians (N, 6, nv): the residual is in effort units, the wrench in
        N and N m."""
        torque = residual / self.stream.identifier.links.effort_scale
        jt = np.swapaxes(jacobians, 1, 2)  # (N, nv, 6)
        return np.array([-np.linalg.lstsq(a, r, rcond=None)[0]
                         for a, r in zip(jt, torque, strict=True)])

    def solve(self) -> Estimate | None:
        """A new estimate once ``min_samples`` are in (kept when consistent; a failure raises
        and the last one stays); None before."""
        if self.stream.samples < self.config.min_samples:
            return None
        estimate = self.stream.identifier.solve()
        if not estimate.physically_consistent:
            raise SolverError("the estimate is not physically consistent")
        self.estimate = estimate
        return estimate

    def reset(self) -> None:
        """Start over (a new payload): statistics, estimate, monitor and baseline."""
        self.stream.reset()
        self.estimate: Estimate | None = None
        self.monitor: T2Monitor | None = None
        self.contacts = 0
        self.offset = np.zeros(self.stream.identifier.links.model.n)
        self.warm = WarmUpStatistics(self.stream.identifier.links.model.n)
        self._baseline: NDArray[np.float64] | None = None
        self._relearning_since: float | None = None
        self._held: list[tuple[NDArray[np.float64], ...]] = []
        self._gaps: list[tuple[float, float]] = []  # contact intervals, stamps (s)
