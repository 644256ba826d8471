"""Contact-gated online estimation: the object the solver node and offline replay both run.

:class:`OnlineEstimator` takes sensor-frame samples (twist, proper acceleration, measured
wrench) and

1. predicts the wrench with the last good estimate and tests the residual with a
   :class:`~inertial_id.core.estimation.anomaly.T2Monitor` (once the estimate has converged);
2. holds samples for ``gate_margin`` seconds, so that the samples just before a detected
   contact can still be dropped; samples within ``gate_margin`` of a contact never reach
   the estimate;
3. tests an anomaly lasting longer than ``payload_change_after`` seconds as a step of the
   F/T bias (the offset is relearned, ``pi`` kept) or a new payload (grasp or release: the
   statistics restart and the new payload is identified), and reports one lasting
   ``open_anomaly_after`` as open and resolves it
   (:mod:`~inertial_id.core.estimation.resolution`);
4. solves on request, keeping the last good estimate when a solve fails and while in contact.
"""

from __future__ import annotations

from collections import Counter, deque

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import (
    InertialIdError,
    SampleError,
    SolverError,
)
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.anomaly import ContactInterval, T2Monitor
from inertial_id.core.estimation.bias_step import OpenAnomaly
from inertial_id.core.estimation.drift import per_axis_rate
from inertial_id.core.estimation.held import (
    TAKE_EVERY,
    Anomaly,
    HeldSamples,
    ReleasedSamples,
    held_rows,
)
from inertial_id.core.estimation.online_types import (
    OnlineConfig,
    StepResult,
    Verdicts,
    other_sign,
    verdicts,
)
from inertial_id.core.estimation.payload import PayloadIdentifier
from inertial_id.core.estimation.payload_change import (
    NOISE,
    PRODUCTS,
    SAMPLE_COLUMNS,
    NewPayloadTest,
)
from inertial_id.core.estimation.resolution import (
    FROZEN,
    GATED,
    RESET,
    TARE_SAMPLES,
    AnomalyResolution,
)
from inertial_id.core.estimation.setup_check import MIN_SAMPLES as SETUP_MIN_SAMPLES
from inertial_id.core.estimation.setup_check import SetupCheck, SetupProblem
from inertial_id.core.regressor import batch_gram, predicted_wrench, regressor_features
from inertial_id.core.timepolicy import JUMP, OUT_OF_RANGE, StampPolicy, first_at_or_after

DROP_KEYS = (GATED, FROZEN, RESET, JUMP, OUT_OF_RANGE)
"""The ledger's drop reasons (:meth:`OnlineEstimator.ledger`)."""
MAX_FILTER_SPAN = 10.0
"""s: a longer past span of the gatherer's filter (its windows are under a second) is no
filter's."""
CORRELATION_SHARE = 0.5
"""The filtered residual's samples stay correlated for about this share of the filter's past
span (a smooth kernel over W samples leaves about W / 2 correlated ones): the correlation
time of the contact monitor's confirmation
(:class:`~inertial_id.core.estimation.anomaly.T2Monitor`)."""
WRENCH_AXES = ("fx", "fy", "fz", "tx", "ty", "tz")
SETUP_CHECK_EVERY = 1000
"""Samples between two set-up checks (:class:`SetupCheck`; a second at 1 kHz: a set-up
mistake is there from the start, and each check refits three least-squares problems)."""


class OnlineEstimator(AnomalyResolution):
    """See the module docstring."""

    def __init__(self, config: OnlineConfig | None = None) -> None:
        self.config = config or OnlineConfig()
        self.identifier = PayloadIdentifier(self.config.payload)
        self.monitor = self._new_monitor()
        self.estimate: Estimate | None = None
        self.from_data = False  # the estimate comes from the data (not from start_from)
        self.frozen = False
        self.contacts: list[ContactInterval] = []
        self.payload_changes: list[float] = []
        self.bias_steps: list[float] = []  # stamps (s) of recognised steps of the bias
        self.open_anomalies: list[OpenAnomaly] = []
        self._held = HeldSamples()  # waiting for the contact gate
        self._released = ReleasedSamples()  # not yet in the statistics (TAKE_EVERY)
        self._exclude_until = -np.inf
        self._latest = -np.inf
        self._anomaly = Anomaly()  # the current contact's samples
        self._recent_residuals: deque[NDArray[np.float64]] = deque(maxlen=TARE_SAMPLES)
        self._change_test = NewPayloadTest()
        self.counters: Counter[str] = Counter()
        self.policy = StampPolicy(counters=self.counters)
        payload = self.config.payload
        self.setup = SetupCheck(self.identifier.sign, other_sign(payload.wrench_sign),
                                payload.force_noise_std, payload.torque_noise_std)
        self.setup_problems: list[SetupProblem] = []
        self._setup_checked = (0, False)  # the set-up check's samples at its last run, and
        # whether an estimate existed then
        self._verdicts: tuple[tuple[Estimate | None, OnlineConfig], Verdicts] | None = None
        self.received = self.used = 0
        self.filter_span = 0.0
        """s before a sample's stamp that its filtered wrench averages over (the gatherer's
        :attr:`~inertial_id.core.gathering.filter_choice.FilterChoice.past_span`): after a contact
        ends, samples are kept out for this long on top of ``gate_margin``, so no contact force
        reaches the estimate through the filter. Before a contact ``gate_margin`` alone must
        cover the filter's delay (at most ``filter_delay``, 10 ms by default; a centred
        filter's half window otherwise)."""
        self.monitor_relearned = 0
        """Times the contact monitor relearnt its covariance after a change of filter."""

    def reconfigure(self, config: OnlineConfig) -> None:
        """New settings while running, keeping the data and what the monitor learned.

        Thresholds, the monitor's settings (its threshold follows ``confidence``), the gate,
        ``min_samples`` and the identifier's tunables (:meth:`PayloadIdentifier.reconfigure`)
        apply from now on; new noise std restart the set-up check's statistics. Settings the
        statistics depend on (``wrench_sign``, ``method``, ``window_samples``) raise
        :class:`InertialIdError`, and so do invalid ones; then nothing changed.
        """
        fixed = [n for n in PayloadIdentifier.RESTART_FIELDS
                 if getattr(config.payload, n) != getattr(self.config.payload, n)]
        if fixed:
            raise InertialIdError(f"{', '.join(fixed)} cannot change while running: restart")
        self._take_pending()  # under the settings they came with
        c = config
        self.monitor.reconfigure(c.confidence, c.training_samples, c.on_samples,
                                 c.off_samples, c.release, c.training_time)
        old = self.config.payload
        self.identifier.reconfigure(c.payload)
        if (c.payload.force_noise_std, c.payload.torque_noise_std) != (
                old.force_noise_std, old.torque_noise_std):
            self.setup.set_noise(c.payload.force_noise_std, c.payload.torque_noise_std)
        if self.config.monitor and not c.monitor:
            self.monitor.clear_contact()  # no monitor: nothing holds the estimate any more
            self._anomaly.clear()
        self.config = config

    def _new_monitor(self) -> T2Monitor:
        c = self.config
        return T2Monitor(confidence=c.confidence, training_samples=c.training_samples,
                         training_time=c.training_time, on_samples=c.on_samples,
                         off_samples=c.off_samples, release=c.release)

    @property
    def verdicts(self) -> Verdicts:
        """Per group: converged (:func:`verdicts`); computed once per estimate and
        configuration (it is asked for every batch until the monitor has trained)."""
        key = (self.estimate, self.config)
        cached = self._verdicts
        if cached is None or cached[0][0] is not key[0] or cached[0][1] is not key[1]:
            cached = self._verdicts = (key, verdicts(self.estimate, self.config))
        return cached[1]

    @property
    def converged(self) -> bool:
        """Mass and CoM have converged (:attr:`Verdicts.payload`) and no set-up mistake
        stands (:attr:`setup_problems`)."""
        return self.verdicts.payload and not self.setup_problems

    @property
    def setup_error(self) -> str:
        """The set-up mistakes the data show, one line ("" when none)."""
        return "; ".join(p.message for p in self.setup_problems)

    @property
    def drift_warning(self) -> str:
        """The axes whose modelled bias drift passes ``bias_drift_warn``, one line ("" when
        none, without a drift model or without a limit)."""
        limit = self.config.bias_drift_warn
        drift = None if self.estimate is None else self.estimate.drift
        if drift is None or not limit > 0:
            return ""
        over = np.flatnonzero(np.abs(drift.rate) > per_axis_rate(limit))
        if not over.size:
            return ""
        axes = ", ".join(f"{WRENCH_AXES[i]} {drift.rate[i]:+.3g}/s" for i in over)
        return f"F/T bias drifting: {axes} (limit {limit:g} N/s, torques a tenth)"

    @property
    def in_contact(self) -> bool:
        """Whether the monitor currently flags a contact."""
        return self.monitor.in_contact

    def predict(self, twist: ArrayLike, proper_acceleration: ArrayLike,
                products: ArrayLike | None = None) -> NDArray[np.float64]:
        """Wrench the sensor should read with the current estimate, (N, 6) (``products``:
        the angular-velocity products, :func:`~inertial_id.core.regressor.regressor`)."""
        if self.estimate is None:
            raise InertialIdError("no estimate yet")
        return predicted_wrench(self.estimate.pi, twist, proper_acceleration,
                                self.estimate.offset, self.identifier.sign, products)

    def add(self, times: ArrayLike, twist: ArrayLike, proper_acceleration: ArrayLike,
            wrench: ArrayLike, wrench_raw: ArrayLike | None = None,
            acceleration_noise: ArrayLike | None = None,
            filter_span: float | None = None,
            angular_products: ArrayLike | None = None) -> StepResult:
        """Process a batch of N samples, oldest first: (N,) stamps, (N, 6) arrays, and
        optionally the (N, 6, 6) covariances of the acceleration's noise
        (:meth:`PayloadIdentifier.add`), the filter's past span (s, :attr:`filter_span`;
        None keeps the last one) and the (N, 6) smoothed angular-velocity products (matched
        filtering; None: the twist's own). A batch with a NaN or inf raises
        :class:`SampleError`, one with a finite value beyond
        :data:`~inertial_id.core.gathering.synchronizer.MAX_ABS_VALUE`
        :class:`ImplausibleValueError` (nothing of it is kept).

        ``wrench`` (filtered like the kinematics) enters the estimate; the contact monitor
        tests ``wrench_raw`` (unfiltered, white noise; defaults to ``wrench``), and with a
        filter span, a contact also needs the filtered residual's confirmation
        (:mod:`inertial_id.core.estimation.anomaly`). Stamps pass the
        :class:`~inertial_id.core.timepolicy.StampPolicy` first: samples it rejects are
        dropped and counted, and when the stream follows a jump (a bag played again) the
        held samples enter the estimate and the contact state restarts. The result covers
        the samples used, in order.
        """
        if filter_span is not None and not 0.0 <= filter_span <= MAX_FILTER_SPAN:
            raise SampleError(f"filter span must be 0 .. {MAX_FILTER_SPAN} s, got "
                              f"{filter_span}")
        t = np.asarray(times, dtype=float)
        held = held_rows(t.size, twist, proper_acceleration, wrench, wrench_raw,
                         acceleration_noise, angular_products)
        if filter_span is not None:  # the batch is accepted: its filter's span holds
            if self.filter_span > 0.0 and filter_span != self.filter_span:
                self._relearn_monitor()  # the gatherer changed its filter
            self.filter_span = float(filter_span)
        self.received += t.size
        keep, jump_at = self.policy.filter(t)
        confirm = wrench_raw is not None and self.filter_span > 0.0
        if jump_at < 0:
            if keep.all():
                return self._step(t, held, confirm)
            return self._step(t[keep], held[keep], confirm)
        before, after = np.arange(t.size) < jump_at, np.arange(t.size) >= jump_at
        first = self._step(t[keep & before], held[keep & before], confirm)
        self._follow_jump()
        second = self._step(t[keep & after], held[keep & after], confirm)
        return StepResult(
            np.concatenate((first.times, second.times)),
            np.concatenate((first.residual, second.residual)),
            np.concatenate((first.t2, second.t2)),
            np.concatenate((first.contact, second.contact)),
            second.threshold, [*first.events, *second.events, "stamp_jump"])

    def _relearn_monitor(self) -> None:
        """Another filter: the residuals' covariance changes with it, so the contact monitor
        learns it anew (an open contact ends unlogged; the estimate stays, matched filtering
        keeping its statistics valid)."""
        self.monitor = self._new_monitor()
        self._anomaly.clear()
        self.monitor_relearned += 1

    def _follow_jump(self) -> None:
        """The stamps moved to another time base: what is held enters the estimate, and the
        contact state and exclusions (in old stamps) are forgotten."""
        self.monitor.clear_contact()
        self._anomaly.clear()
        self._latest = np.inf
        self._release()
        self._latest = self._exclude_until = -np.inf

    def _step(self, t: NDArray[np.float64], held: NDArray[np.float64],
              confirm: bool = False) -> StepResult:
        """:meth:`add` for samples whose stamps the policy accepted (``held``:
        :data:`SAMPLE_COLUMNS` then the raw wrench; ``confirm``: contacts need the filtered
        residual's confirmation), in segments that end where the contact monitor's state changes
        (trained, a contact starts or ends) and where a payload-change check falls due: what
        is decided does not depend on how the samples were cut into batches."""
        events: list[str] = []
        parts: list[tuple[NDArray[np.float64], ...]] = []
        start = 0
        while start < t.size:
            end = t.size
            if self.monitor.contact_start is not None:  # a payload-change check may be due
                end = start + first_at_or_after(t[start:], self._anomaly.next_check) + 1
            parts.append(self._segment(t[start:end], held[start:end], confirm, events))
            start += parts[-1][0].size
        if not parts:
            return StepResult(t, held[:, SAMPLE_COLUMNS:], np.zeros(0), np.zeros(0, dtype=bool),
                              self.monitor.threshold, events)
        times, residual, t2, contact = (np.concatenate(x) for x in zip(*parts, strict=True))
        return StepResult(times, residual, t2, contact, self.monitor.threshold, events)

    def _segment(self, t: NDArray[np.float64], held: NDArray[np.float64], confirm: bool,
                 events: list[str]) -> tuple[NDArray[np.float64], ...]:
        """Samples (``held``: :data:`SAMPLE_COLUMNS` then the raw wrench) up to and including
        the first that changes the monitor's state, or all; their stamps, residuals, ``T^2``
        and contact flags."""
        v, a, w = held[:, :6], held[:, 6:12], held[:, 12:18]
        raw = held[:, SAMPLE_COLUMNS:]
        residual = np.zeros_like(w)
        t2 = np.zeros(t.size)
        contact = np.zeros(t.size, dtype=bool)
        prediction = None
        if self.estimate is not None:
            prediction = self.predict(v, a, held[:, PRODUCTS])
            residual = raw - prediction
            if self.config.monitor and (self.monitor.ready or self.converged and self.from_data):
                filtered = w - prediction if confirm else None
                t2, contact = self._monitor(t, residual, filtered, events)
                m = t2.size  # the monitor took these; the rest follows in the next segment
                t, held, w, residual, prediction = (x[:m] for x in (t, held, w, residual,
                                                                    prediction))
            self._recent_residuals.append(residual)
        eligible = ~contact & (t > self._exclude_until)
        keep = eligible
        start = self.monitor.contact_start
        if start is not None:
            cut = start - self.config.gate_margin
            keep = eligible & (t < cut)
            # The anomaly: every sample from the contact's start that the estimate would
            # have taken or that the monitor flags, held ones included.
            anomaly = self._held.drop_from(cut)
            self.counters[GATED] += sum(stamps.size for stamps, _ in anomaly)
            pick = (eligible & (t >= start)) | contact
            anomaly.append((t[pick], held[pick]))
            self._anomaly.add(anomaly, start)
            if t[-1] >= self._anomaly.next_check:
                self._check_payload_change(t[-1], events)
        self.counters[GATED] += int(t.size - np.count_nonzero(keep))
        if prediction is not None:
            kept = held[keep]
            features = regressor_features(kept[:, :6], kept[:, 6:12], kept[:, PRODUCTS])
            self.setup.add_residual(t[keep], w[keep] - prediction[keep], w[keep], features)
        self._held.hold(t[keep], held[keep])
        self._latest = max(self._latest, float(t[-1]))
        self._release()
        return t, residual, t2, contact

    def _monitor(self, t: NDArray[np.float64], residual: NDArray[np.float64],
                 filtered: NDArray[np.float64] | None, events: list[str]
                 ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """The contact monitor on the samples up to its first change of state (its
        :meth:`~inertial_id.core.estimation.anomaly.T2Monitor.advance`); their ``T^2`` and
        flags."""
        was_ready, was_in_contact = self.monitor.ready, self.monitor.in_contact
        n_intervals = len(self.monitor.intervals)
        result = self.monitor.advance(t, residual, filtered,
                                      CORRELATION_SHARE * self.filter_span)
        if self.monitor.ready and not was_ready:
            events.append("monitor_trained")
        if self.monitor.in_contact and not was_in_contact:
            events.append("contact_start")
            self._anomaly.start(self.monitor.contact_start or t[-1],
                                self.config.payload_change_after
                                or self.config.open_anomaly_after)
        if len(self.monitor.intervals) > n_intervals:
            events.append("contact_end")
            self.contacts.extend(self.monitor.intervals[n_intervals:])
            self._exclude_until = (self.monitor.intervals[-1].end + self.config.gate_margin
                                   + self.filter_span)
            self._anomaly.clear()
        return result.t2, result.contact

    def _release(self) -> None:
        """Move samples older than the gate margin into the statistics: at once while the
        statistics forget or slide (their blocks follow the batches), else gathered until
        they span :data:`TAKE_EVERY` or something reads or changes the statistics
        (:meth:`_take_pending`)."""
        horizon = self._latest - self.config.gate_margin
        candidate = self.monitor.candidate_start
        if candidate is not None:  # a possible contact: hold what is within the margin of it
            horizon = min(horizon, np.nextafter(candidate - self.config.gate_margin, -np.inf))
        blocks = self._held.release(horizon)
        if not blocks:
            return
        count = sum(stamps.size for stamps, _ in blocks)
        if self.frozen:
            self.counters[FROZEN] += count
            return
        self.used += count
        released = self._released
        released.add(blocks)
        payload = self.config.payload
        if (payload.forgetting_factor < 1.0 or payload.window_samples > 0
                or released.span >= TAKE_EVERY
                or released.count >= self.identifier.statistics.block_room):
            self._take_pending()

    def _take_pending(self) -> None:
        """The released samples not yet in the statistics, into them (one Gram matrix)."""
        block = self._released.take()
        if block is not None:
            self._take(*block)

    def _clear_pending(self) -> None:
        """Forget the released samples not yet taken (used: they go with the statistics)."""
        self._released.clear()

    def _take(self, stamps: NDArray[np.float64], rows: NDArray[np.float64]) -> None:
        """Held rows (:data:`SAMPLE_COLUMNS` first) and their stamps into the estimate's and
        the set-up check's statistics, from one Gram matrix of them (both with the smoothed
        angular-velocity products; the estimate's with the stamps when the bias drifts)."""
        if not stamps.size:
            return
        tau = self.identifier.drift_tau(stamps) if self.config.payload.bias_drift else None
        gram = batch_gram(rows[:, :6], rows[:, 6:12], rows[:, 12:18], rows[:, PRODUCTS], tau)
        self.identifier.add_gram(gram, rows[:, NOISE].reshape(-1, 6, 6))
        self.setup.add_gram(gram[:19, :19])

    def solve(self, uncertainty: bool = True) -> Estimate | None:
        """Re-estimate (unless in contact, frozen or short of data); keeps the last good one.
        ``uncertainty`` False: the parameters only, with the last whole estimate's
        uncertainty and verdicts (:meth:`PayloadIdentifier.estimate`).

        Raises :class:`SolverError` when the solve fails; the last estimate stays.
        """
        self._take_pending()
        # First, and whatever follows: a set-up mistake can make the solve fail (torques in
        # N mm: infeasible) or the monitor see a contact everywhere.
        self._check_setup()
        if self.frozen or self.in_contact:
            return self.estimate
        if self.identifier.statistics.samples < self.config.min_samples:
            return self.estimate
        previous = self.estimate
        estimate = self.identifier.estimate(uncertainty)
        if not estimate.physically_consistent and self.config.payload.method == "lmi_sdp":
            raise SolverError("estimate is not physically consistent")
        if not np.isfinite(estimate.offset_std).all():
            # Right after a tare the data say nothing of the new offset yet: the solve's
            # offset would be a placeholder, not an estimate. Keep the tared one.
            return self.estimate
        self.estimate, self.from_data = estimate, True
        cached = self._verdicts
        if (cached is not None and cached[0][0] is previous and cached[0][1] is self.config
                and estimate.covariance is previous.covariance):  # the same uncertainty
            self._verdicts = ((estimate, self.config), cached[1])
        return estimate

    def _check_setup(self) -> None:
        """:attr:`setup_problems` from :class:`SetupCheck` once :data:`SETUP_CHECK_EVERY`
        more samples came since the last check, as soon as it has its minimum of samples, when
        its statistics restarted (a tare, a new noise std) and when an estimate appeared or
        went: the set-up does not change from one batch to the next, and a solve at every
        batch must stay cheap."""
        last, had_estimate = self._setup_checked
        samples = self.setup.samples
        # Below its minimum the check says nothing: the next is due when it can.
        due = last + SETUP_CHECK_EVERY if last >= SETUP_MIN_SAMPLES else SETUP_MIN_SAMPLES
        if (samples >= due or samples < last  # fewer: its statistics restarted (tare, noise)
                or (self.estimate is not None) != had_estimate):
            self.setup_problems = self.setup.check(self.estimate)
            self._setup_checked = (samples, self.estimate is not None)

    def start_from(self, estimate: Estimate) -> None:
        """Take ``estimate`` (a saved calibration) as the current one until the data give
        their own: it is what :attr:`estimate` returns and what residuals are measured
        against, but the contact monitor trains only on an estimate from the data (a saved
        payload that is no longer the one mounted must not become the monitor's normal).
        Use it as the solver's prior too (:attr:`PayloadConfig.prior`) to keep what it knows
        of the directions the motion does not excite."""
        if not estimate.physically_consistent:
            raise InertialIdError("a starting estimate must be physically consistent")
        self.estimate, self.from_data = estimate, False

    def reset(self) -> None:
        """Forget the data, the estimate and the learned residual covariance (the ledger's
        counts go on: held samples count as ``reset``)."""
        self._clear_pending()  # used, and forgotten with the statistics
        self.identifier.reset()
        self.setup.reset()
        self.setup_problems = []
        self._setup_checked = (0, False)
        self.monitor = self._new_monitor()
        self.estimate, self.from_data = None, False
        self.counters[RESET] += self._held.clear()
        self._exclude_until = -np.inf
        self._anomaly.clear()
        self._recent_residuals.clear()

    @property
    def samples(self) -> float:
        """Samples the estimate's statistics hold (weighted when they forget), the released
        ones not yet taken (:data:`TAKE_EVERY`) included."""
        return self.identifier.statistics.samples + self._released.count

    @property
    def held(self) -> int:
        """Samples held back for the contact gate (not yet used or dropped)."""
        return self._held.count

    def ledger(self) -> dict[str, int]:
        """Where every sample given to :meth:`add` went: ``received`` = ``used`` (entered the
        estimate's statistics) + ``held`` + the drops by reason (``dropped_<reason>``:
        the time policy's, ``gated`` near a contact, ``frozen``, ``reset``)."""
        out = {"received": self.received, "used": self.used, "held": self.held}
        out.update({f"dropped_{key}": int(count) for key, count in self.counters.items()
                    if key in DROP_KEYS})
        return out
