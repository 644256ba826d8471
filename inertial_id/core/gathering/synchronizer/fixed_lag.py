"""The fixed-lag synchronizer (:class:`FixedLagSynchronizer`): buffers of both streams, the
stamp policy and spike checks on the way in, the ready samples handed to the filters of
:mod:`inertial_id.core.gathering.synchronizer.filters` on the way out (see
:mod:`inertial_id.core.gathering.synchronizer` for the filters).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.gathering.features import N_FEATURES, encode_features
from inertial_id.core.gathering.rows import Rows
from inertial_id.core.gathering.synchronizer.filters import (
    Span,
    Windows,
    matched_samples,
    polynomial_samples,
    row_windows,
    wrench_span,
)
from inertial_id.core.gathering.synchronizer.spikes import SpikeGuard
from inertial_id.core.samples import (
    MAX_ABS_VALUE,
    JacobianFunction,
    SensorFunction,
    SyncedSamples,
    plausible,
)
from inertial_id.core.signals import PositionNoise, second_differences
from inertial_id.core.timepolicy import StampPolicy


def _fresh(buffered: Rows, stamps: NDArray[np.float64]) -> bool:
    """Stamps finite, strictly increasing, and after the newest buffered one."""
    if stamps.size == 0:
        return True
    if not (np.isfinite(stamps[0]) and np.isfinite(stamps[-1])):
        return False
    after = buffered.size == 0 or stamps[0] > buffered.last()
    return bool(after and np.all(np.diff(stamps) > 0.0))


class FixedLagSynchronizer:
    """Pairs wrench samples with filtered joint states; see
    :mod:`inertial_id.core.gathering.synchronizer`.

    ``window`` joint samples (odd) and polynomial ``order`` set the filter; the output lags the
    newest joint state by ``lag`` joint samples (default: half the window). ``max_span`` (s)
    rejects windows that straddle a gap in the joint states or in the wrenches. Both streams
    share one :class:`~inertial_id.core.timepolicy.StampPolicy` (``policy``): stamps out
    of range or jumping away from the stream are dropped, and a jump it follows (a bag played
    again) clears the buffers; other out-of-order or duplicate stamps are dropped. A joint
    state farther from the last one than any joint can move in between (``max_speed``, rad/s
    or m/s per joint, e.g. the URDF's velocity limits; the default where absent; None: no
    such check) is a spike, dropped before the filter (:meth:`add_joint_state`,
    :class:`~inertial_id.core.gathering.synchronizer.spikes.SpikeGuard`).
    ``counters`` records what was dropped, why. Samples come one at a time
    (:meth:`add_joint_state`, :meth:`add_wrench`) or in blocks (:meth:`extend`), with the
    same result.
    """

    def __init__(
        self,
        n_joints: int,
        window: int = 15,
        order: int = 3,
        use_measured_velocity: bool = False,
        max_span: float = 0.5,
        max_pending: int = 20000,
        lag: int | None = None,
        policy: StampPolicy | None = None,
        kinematics: SensorFunction | None = None,
        jacobians: JacobianFunction | None = None,
        max_speed: ArrayLike | None = None,
    ) -> None:
        if window % 2 == 0 or window <= order or order < 2:
            raise InertialIdError(
                f"need an odd window > order >= 2, got window={window}, order={order}"
            )
        self.lag = window // 2 if lag is None else int(lag)
        if not 0 <= self.lag <= window // 2:
            raise InertialIdError(f"lag must be 0 .. {window // 2} joint samples (half the "
                                  f"window), got {lag}")
        self.n_joints = n_joints
        self.window = window
        self.order = order
        self.use_measured_velocity = use_measured_velocity
        self.max_span = max_span
        self.max_pending = max_pending
        self.counters: Counter[str] = Counter()
        self.policy = policy or StampPolicy()
        self.policy.counters = self.counters
        self.spikes = SpikeGuard(max_speed)
        self._joint_t = Rows()
        self._joint_q = Rows((n_joints,))
        self._joint_v = Rows((n_joints,))
        self._wrench_t = Rows()
        self._wrench_w = Rows((6,))
        self.kinematics = kinematics
        self.jacobians = jacobians
        self.position_noise = PositionNoise(n_joints)
        # Matched filtering: sensor-frame features of every joint sample (row i <-> joint
        # row i; the first row of a stream has no predecessor and stays NaN), and with the
        # Jacobians the position noise variance in effect at each (the estimate after the
        # fourth difference centred on the row before: a function of the data alone).
        self._joint_f = Rows((N_FEATURES,))
        self._joint_s = Rows((n_joints,))
        self._next_wrench = 0
        self.reset()

    @property
    def wrenches_held(self) -> int:
        """Wrenches buffered and not yet synchronised (nor dropped)."""
        return len(self._wrench_t) - self._next_wrench

    def reset(self) -> None:
        """Forget all buffered samples (wrenches not yet synchronised count as ``wrench_reset``)."""
        self.counters["wrench_reset"] += self.wrenches_held
        for rows in (self._joint_t, self._joint_q, self._joint_v, self._wrench_t,
                     self._wrench_w, self._joint_f, self._joint_s):
            rows.clear()
        self._next_wrench = 0
        self._released_until = -np.inf  # the last sample's stamp (s)

    def set_filter(self, window: int, lag: int) -> None:
        """A new filter (``window`` joint samples, odd, evaluated ``lag`` before the newest)
        for what is buffered and what comes: before the first :meth:`pop_ready`, or after a
        :meth:`reset` (the buffered joint states keep their places; no sample was filtered
        with the old one)."""
        if window % 2 == 0 or window <= self.order or not 0 <= lag <= window // 2:
            raise InertialIdError(f"need an odd window > order {self.order} and a lag of 0 .. "
                                  f"half of it, got window={window}, lag={lag}")
        if self._joint_f.size:
            raise InertialIdError("the filter cannot change under samples already filtered: "
                                  "reset first")
        self.window, self.lag = int(window), int(lag)

    @property
    def joint_span(self) -> tuple[int, float]:
        """How many joint states are buffered and the seconds from the oldest to the newest
        (no copy: asked at every batch while the filter is being chosen)."""
        stamps = self._joint_t.view()
        return stamps.size, float(stamps[-1] - stamps[0]) if stamps.size else 0.0

    def history(self) -> tuple[NDArray[np.float64], NDArray[np.float64],
                               NDArray[np.float64] | None, NDArray[np.float64],
                               NDArray[np.float64]]:
        """Copies of everything buffered: joint stamps (J,) s, positions (J, n), velocities
        (J, n; None unless measured ones are used), wrench stamps (W,) s, wrenches (W, 6)."""
        velocity = self._joint_v.view().copy() if self.use_measured_velocity else None
        return (self._joint_t.view().copy(), self._joint_q.view().copy(), velocity,
                self._wrench_t.view().copy(), self._wrench_w.view().copy())

    def shift_wrench_stamps(self, delay: float) -> None:
        """Move the buffered wrenches ``delay`` seconds earlier (their stamps were late by
        it), at any time: a wrench whose moved stamp is not after the last sample released
        is dropped when its turn comes (``wrench_delay_shift``), so that the samples' times
        keep increasing."""
        self._wrench_t.view()[:] -= delay

    @property
    def buffered(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Stamps (s) of the buffered joint states and wrenches (copies), oldest first."""
        return self._joint_t.view().copy(), self._wrench_t.view().copy()

    def _accept_stamp(self, stamps: Rows, t: float, kind: str) -> bool:
        accepted, jumped = self.policy.accept(t, f"{kind}_")
        if jumped:
            self.reset()
        if not accepted:
            return False
        if stamps.size and t <= stamps.last():
            self.counters[f"{kind}_out_of_order"] += 1
            return False
        return True

    def _joint_values(self, position: ArrayLike, velocity: ArrayLike | None
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        q = np.asarray(position, dtype=float)
        if q.shape != (self.n_joints,) or not plausible(q):
            raise SampleError(f"expected {self.n_joints} finite, plausible joint positions, "
                              f"got {q}")
        if not self.use_measured_velocity:
            return q, None
        if velocity is None:
            raise SampleError("use_measured_velocity is set but the state has no velocity")
        v = np.asarray(velocity, dtype=float)
        if v.shape != q.shape or not plausible(v):
            raise SampleError(f"expected {self.n_joints} finite joint velocities, got {v}")
        return q, v

    def add_joint_state(
        self, t: float, position: ArrayLike, velocity: ArrayLike | None = None
    ) -> bool:
        """Buffer one joint state (model order). Returns False when its stamp was dropped."""
        q, v = self._joint_values(position, velocity)
        if not self._accept_stamp(self._joint_t, t, "joint_state"):
            return False
        if self._spike(float(t), q):
            return False
        self._joint_t.append(float(t))
        self._joint_q.append(q)
        if v is not None:
            self._joint_v.append(v)
        return True

    def latest_joint_state(self) -> tuple[float, NDArray[np.float64]] | None:
        """The newest buffered joint state: its stamp (s) and positions (model order, rad or
        m); None with none buffered."""
        if not len(self._joint_t):
            return None
        return self._joint_t.last(), self._joint_q.view()[-1].copy()

    def _spike(self, t: float, q: NDArray[np.float64]) -> bool:
        """Drop and count (``joint_state_spike``) a joint state farther from the last one
        than any joint moves in the time between (before the filter sees it); a run of
        :data:`~inertial_id.core.gathering.synchronizer.spikes.SPIKE_FOLLOW` agreeing ones restarts
        the buffers from the newest."""
        last = (self._joint_t.last(), self._joint_q.view()[-1]) if self._joint_t.size else None
        verdict = self.spikes.judge(t, q, last)
        if verdict == "restart":
            self.reset()
        elif verdict == "spike":
            self.counters["joint_state_spike"] += 1
        return verdict == "spike"

    def add_wrench(self, t: float, wrench: ArrayLike) -> bool:
        """Buffer one wrench ``[fx, fy, fz, tx, ty, tz]``. Returns False when dropped."""
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not plausible(w):
            raise SampleError(f"wrench must be 6 finite values under {MAX_ABS_VALUE:g}, got {w}")
        if not self._accept_stamp(self._wrench_t, t, "wrench"):
            return False
        self._wrench_t.append(float(t))
        self._wrench_w.append(w)
        self._limit_pending()
        return True

    def _limit_pending(self) -> None:
        excess = len(self._wrench_t) - self._next_wrench - self.max_pending
        if excess > 0:
            self.counters["wrench_overflow"] += excess
            self._next_wrench += excess

    def extend(self, joint_t: NDArray[np.float64], position: NDArray[np.float64],
               velocity: NDArray[np.float64] | None, wrench_t: NDArray[np.float64],
               wrench: NDArray[np.float64], arrival: NDArray[np.float64]) -> bool:
        """Buffer blocks of joint states ((J,) s, (J, n) model order) and wrenches ((W,) s,
        (W, 6)) at once, if that is what adding them one at a time would do: every value finite
        and plausible, each stream's stamps strictly increasing from after its buffered
        ones, and all stamps in step with the stream (``arrival``: every stamp of both, in
        arrival order). Otherwise buffers nothing and returns False; add them one at a time
        then (in arrival order: drops and resets depend on it).
        """
        if not (_fresh(self._joint_t, joint_t) and _fresh(self._wrench_t, wrench_t)):
            return False
        if position.shape != (joint_t.size, self.n_joints) or wrench.shape != (wrench_t.size, 6):
            return False
        blocks = [position, wrench]
        if self.use_measured_velocity:
            if velocity is None or velocity.shape != position.shape:
                return False
            blocks.append(velocity)
        if not all(b.size == 0 or plausible(b) for b in blocks):
            return False
        steps_t, steps_q = joint_t, position
        if joint_t.size and self._joint_t.size:
            steps_t = np.concatenate(([self._joint_t.last()], joint_t))
            steps_q = np.vstack((self._joint_q.view()[-1], position))
        if np.any(self.spikes.too_far(np.diff(steps_t), np.diff(steps_q, axis=0))):
            return False  # a spike: one at a time, where it is dropped and counted
        if not self.policy.accept_all(arrival):  # last: it commits when it accepts
            return False
        self._joint_t.extend(joint_t)
        self._joint_q.extend(position)
        if self.use_measured_velocity:
            self._joint_v.extend(velocity)
        self._wrench_t.extend(wrench_t)
        self._wrench_w.extend(wrench)
        self._limit_pending()
        return True

    def pop_ready(self) -> SyncedSamples:
        """All samples whose filter windows are complete, oldest first."""
        if len(self._joint_t) < self.window or self._next_wrench >= len(self._wrench_t):
            return SyncedSamples.empty(self.n_joints)
        joint_t = self._joint_t.view()
        wrench_t = self._wrench_t.view()
        js = Span(self.window - 1 - self.lag, self.lag)
        ws = wrench_span(joint_t, wrench_t, self.window, self.order, self.lag,
                         self.kinematics is not None)
        index = np.arange(self._next_wrench, wrench_t.size)
        ks = np.searchsorted(joint_t, wrench_t[index], side="right") - 1
        # Samples that can never be filtered: before the joint data or the wrench history.
        hopeless = (ks < js.before) | (index < ws.before)
        waiting = (ks + js.after >= joint_t.size) | (index + ws.after >= wrench_t.size)
        waiting_at = np.flatnonzero(waiting & ~hopeless)
        stop = int(waiting_at[0]) if waiting_at.size else index.size
        index, ks, hopeless = index[:stop], ks[:stop], hopeless[:stop]
        self.counters["wrench_without_history"] += int(hopeless.sum())
        self._next_wrench += stop
        ok = ~hopeless
        index, ks = index[ok], ks[ok]
        joint_gap = joint_t[ks + js.after] - joint_t[ks - js.before] > self.max_span
        wrench_gap = wrench_t[index + ws.after] - wrench_t[index - ws.before] > self.max_span
        self.counters["joint_state_gap"] += int(np.count_nonzero(joint_gap))
        self.counters["wrench_gap"] += int(np.count_nonzero(wrench_gap & ~joint_gap))
        usable = ~(joint_gap | wrench_gap)
        index, ks = index[usable], ks[usable]
        behind = wrench_t[index] <= self._released_until  # after a shift of the stamps
        if behind.any():
            self.counters["wrench_delay_shift"] += int(np.count_nonzero(behind))
            index, ks = index[~behind], ks[~behind]
        if index.size:
            self._released_until = float(wrench_t[index[-1]])
        if self.kinematics is not None:
            self._update_features(joint_t)
        batch = self._filter(joint_t, wrench_t, index, ks, js, ws)
        self._prune(joint_t, js, ws)
        return batch

    def _update_features(self, joint_t: NDArray[np.float64]) -> None:
        """Sensor-frame features of the joint samples that have both neighbours now."""
        done, size = self._joint_f.size, joint_t.size
        if done == 0 and size > 0:
            self._joint_f.append(np.full(N_FEATURES, np.nan))
            self._joint_s.append(np.zeros(self.n_joints))
            done = 1
        if size - 1 <= done:
            return
        q = self._joint_q.view()[done - 1 :]
        velocity, acceleration = second_differences(joint_t[done - 1 :], q)
        if self.use_measured_velocity:
            velocity = self._joint_v.view()[done : size - 1]
        assert self.kinematics is not None
        twist, proper = self.kinematics(q[1:-1], velocity, acceleration)
        self._joint_f.extend(encode_features(twist, proper))
        if self.jacobians is not None:
            self._update_noise(joint_t, done)

    def _update_noise(self, joint_t: NDArray[np.float64], done: int) -> None:
        """Position noise of the joint rows ``done`` .. newest - 1 (their features' rows):
        the fourth differences centred on ``done - 1`` .. newest - 2 enter the estimate, and
        each row takes the variance in effect after the one centred on the row before."""
        size = joint_t.size
        start = max(0, done - 3)
        before = self.position_noise.std
        after = self.position_noise.add(joint_t[start:], self._joint_q.view()[start:])
        index = np.arange(done, size - 1) - 1 - (start + 2)  # into the differences
        std = np.where((index >= 0)[:, None], after[np.clip(index, 0, None)]
                       if after.size else before, before)
        self._joint_s.extend(std**2)

    def _filter(self, joint_t: NDArray[np.float64], wrench_t: NDArray[np.float64],
                index: NDArray[np.intp], ks: NDArray[np.intp], js: Span,
                ws: Span) -> SyncedSamples:
        """The samples of the wrenches ``index``, each with the joint window around the joint
        sample ``ks`` at or before it, through the plain or the matched filter."""
        if index.size == 0:
            return SyncedSamples.empty(self.n_joints)
        # Consecutive wrenches share joint windows: fit each window once (ks ascends).
        new = np.empty(ks.size, dtype=bool)
        new[0] = True
        np.not_equal(ks[1:], ks[:-1], out=new[1:])
        centres, which = ks[new], np.cumsum(new) - 1
        window_start = centres - js.before  # each joint window's first sample
        width = self.window
        starts, span = index - ws.before, ws.before + ws.after + 1  # the wrench windows
        q, wrenches = self._joint_q.view(), self._wrench_w.view()
        velocity = (row_windows(self._joint_v.view(), window_start, width).transpose(0, 2, 1)
                    if self.use_measured_velocity else None)
        # The joint sample at or before each wrench stamp of the windows, by one search over
        # the stamps the windows cover.
        first = int(starts[0])
        covered = wrench_t[first : int(starts[-1]) + span]
        at_or_before = np.searchsorted(joint_t, covered, side="right") - 1
        windows = Windows(wrench_t[index], which, row_windows(joint_t, window_start, width),
                          row_windows(q, window_start, width).transpose(0, 2, 1), velocity,
                          row_windows(wrench_t, starts, span),
                          row_windows(wrenches, starts, span), wrenches[index],
                          row_windows(at_or_before, starts - first, span), window_start)
        if self.kinematics is None:
            return polynomial_samples(windows, self.order)
        noise_at = None
        if self.jacobians is not None:
            # J at the window's joint sample k (at or before the wrench stamp), sigma_q^2 in
            # effect at row k - 1 (row k has none yet when lag is 0); one per joint window.
            at_sample = window_start + self.window - 1 - self.lag
            noise_at = (self.jacobians(q[at_sample]),  # (M, 6, n)
                        self._joint_s.view()[at_sample - 1])  # (M, n)
        features = row_windows(self._joint_f.view(), window_start + 1, self.window - 2)
        return matched_samples(windows, features.transpose(0, 2, 1), self.order, noise_at)

    def _prune(self, joint_t: NDArray[np.float64], js: Span, ws: Span) -> None:
        """Drop buffered samples that no future window can use."""
        if self._next_wrench < len(self._wrench_t):
            next_k = int(np.searchsorted(joint_t, self._wrench_t.view()[self._next_wrench],
                                         side="right")) - 1
        else:
            next_k = joint_t.size - 1
        # At least 5 rows stay: the next fourth difference starts 3 rows before the newest
        # features (a 3-sample window alone would skip one).
        keep_joints_from = min(max(0, next_k - js.before),
                               max(0, joint_t.size - max(self.window, 5)))
        for rows in (self._joint_t, self._joint_q, self._joint_v):
            rows.drop_front(keep_joints_from)
        for rows in (self._joint_f, self._joint_s):
            if rows.size < keep_joints_from:
                rows.clear()  # features not yet computed: recomputed from the kept rows
            else:
                rows.drop_front(keep_joints_from)
        drop_wrenches = max(0, self._next_wrench - ws.before)
        if drop_wrenches > 0:
            self._wrench_t.drop_front(drop_wrenches)
            self._wrench_w.drop_front(drop_wrenches)
            self._next_wrench -= drop_wrenches
