"""Time synchronisation of joint states and wrenches with a fixed-lag Savitzky-Golay filter.

Each wrench sample (stamp ``t``) becomes one synchronised sample at ``t``: the joint positions,
velocities and accelerations come from a polynomial fitted to the ``window`` joint samples
around ``t`` that end ``lag`` samples after it, and the wrench is smoothed by a polynomial of
the same order over the wrench samples spanning the same time. Both fits cover the same span
with ``t`` at the same place in it, so both signals are filtered alike and stay in phase; a
sample is ready ``lag`` joint periods after its stamp. ``lag`` = half the window (the default)
is the classical zero-phase filter with the least noise; a shorter lag answers sooner at the
price of noisier derivatives. Only header stamps are used, never arrival times.

With a ``kinematics`` function (joint positions, velocities, accelerations to the sensor
frame's twist and proper acceleration) the synchronizer also *matches* the filters: the
polynomial's acceleration is exactly the true acceleration smoothed by a kernel ``ghat``
(:mod:`inertial_id.core.signals`, matched filtering), so the kinematics are computed at every
joint sample (three-point differences) and smoothed by that kernel, and the wrench by the same
kernel. The rigid-body equation then holds between the filtered wrench and the filtered
kinematics; a polynomial's value smooths the wrench far less than its second derivative
smooths the acceleration, which biased the inertia by O((w T)^2).

With ``jacobians`` too (joint positions to the sensor frame's Jacobians), each matched sample
also carries the covariance of the noise that the joints' position noise puts into its
smoothed acceleration, ``|h|^2 J diag(sigma_q^2) J^T`` (``h`` the filter's second-derivative
weights on the positions, ``sigma_q`` estimated from the data by
:class:`~inertial_id.core.signals.PositionNoise`): the solver removes the bias that noise in
the regressor gives least squares (errors in variables).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.features import N_FEATURES, decode_features, encode_features
from inertial_id.core.rows import Rows
from inertial_id.core.signals import (
    PolynomialFits,
    PositionNoise,
    fit_polynomials,
    fit_projections,
    hat_kernel_at,
    local_polynomial,
    second_difference_weights,
    second_differences,
)
from inertial_id.core.timepolicy import StampPolicy

SensorFunction = Callable[[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
                          tuple[NDArray[np.float64], NDArray[np.float64]]]
"""(N, n) joint positions, velocities, accelerations -> (N, 6) twist, proper acceleration."""

JacobianFunction = Callable[[NDArray[np.float64]], NDArray[np.float64]]
"""(N, n) joint positions -> (N, 6, n) sensor-frame Jacobians, rows ``[linear; angular]``."""

MAX_ABS_VALUE = 1e6
"""Larger joint positions (rad, m), wrench components (N, N m), velocities or accelerations
(m/s, rad/s, m/s^2, rad/s^2) are no measurements; their squares would also overflow the
statistics downstream."""


SPIKE_SPEED_MARGIN = 10.0
"""A joint state is a spike when a joint moved more than this many times its speed limit times
the time since the last joint state ..."""
SPIKE_SLACK = 0.1
"""... plus this much (rad or m: encoder noise, stamp jitter) ..."""
DEFAULT_MAX_JOINT_SPEED = 10.0
"""... the speed limit (rad/s or m/s) of a joint whose URDF gives none ..."""
SPIKE_FOLLOW = 25
"""... unless this many joint states in a row are spikes that agree with each other: then the
stream itself moved (or the state before them was the spike) and the buffers restart."""


def plausible(values: NDArray[np.float64]) -> bool:
    """All entries finite and within ``MAX_ABS_VALUE`` (NaN compares false); cheap per sample."""
    return bool(values.size == 0 or np.abs(values).max() <= MAX_ABS_VALUE)


def _median(values: NDArray[np.float64]) -> float:
    """``numpy.median`` of a non-empty 1-D array, without its per-call overhead."""
    ordered = np.sort(values)
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return float(ordered[middle - 1] + ordered[middle]) / 2.0


def _fresh(buffered: Rows, stamps: NDArray[np.float64]) -> bool:
    """Stamps finite, strictly increasing, and after the newest buffered one."""
    if stamps.size == 0:
        return True
    if not (np.isfinite(stamps[0]) and np.isfinite(stamps[-1])):
        return False
    after = buffered.size == 0 or stamps[0] > buffered.last()
    return bool(after and np.all(np.diff(stamps) > 0.0))


@dataclass(frozen=True)
class SyncedSamples:
    """A batch of N synchronised samples; joints in the model's order.

    ``times`` (N,) s; ``position``, ``velocity``, ``acceleration`` (N, n) in rad, rad/s,
    rad/s^2 (or m for prismatic joints); ``wrench`` (N, 6) ``[fx, fy, fz, tx, ty, tz]`` as the
    sensor reports it, filtered like the joints; ``wrench_raw`` (N, 6) unfiltered (its noise
    stays white, which the contact monitor's statistics assume). With matched filtering
    (see the module docstring) ``twist`` and ``proper_acceleration`` (N, 6) are the sensor
    frame's, smoothed by the wrench's kernel; otherwise None (compute them from the joints).
    ``acceleration_noise`` (N, 6, 6): with matched filtering and the Jacobians, the
    covariance of the noise the joints' position noise leaves in ``proper_acceleration``'s
    ``[a_lin + w x v_lin; alpha]`` ((m/s^2)^2, (m/s^2)(rad/s^2), (rad/s^2)^2); otherwise None.
    """

    times: NDArray[np.float64]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    wrench: NDArray[np.float64]
    wrench_raw: NDArray[np.float64]
    twist: NDArray[np.float64] | None = None
    proper_acceleration: NDArray[np.float64] | None = None
    acceleration_noise: NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return int(self.times.size)

    @property
    def matched(self) -> bool:
        """Whether the batch carries matched-filtered sensor-frame kinematics."""
        return self.twist is not None and self.proper_acceleration is not None

    def select(self, mask: NDArray[np.bool_]) -> SyncedSamples:
        """The samples where ``mask`` (N,) is true."""
        values = (getattr(self, f.name) for f in fields(self))
        return SyncedSamples(*(None if x is None else x[mask] for x in values))

    @classmethod
    def empty(cls, n_joints: int) -> SyncedSamples:
        """A batch with no samples."""
        z = np.empty((0, n_joints))
        return cls(np.empty(0), z, z.copy(), z.copy(), np.empty((0, 6)), np.empty((0, 6)))


class _Span(NamedTuple):
    """A filter window around a sample: how many samples before it and after it."""

    before: int
    after: int

    def offsets(self) -> NDArray[np.intp]:
        """Index offsets of the window's samples from the sample's."""
        return np.arange(-self.before, self.after + 1)


class FixedLagSynchronizer:
    """Pairs wrench samples with filtered joint states; see the module docstring.

    ``window`` joint samples (odd) and polynomial ``order`` set the filter; the output lags the
    newest joint state by ``lag`` joint samples (default: half the window). ``max_span`` (s)
    rejects windows that straddle a gap in the joint states or in the wrenches. Both streams
    share one :class:`~inertial_id.core.timepolicy.StampPolicy` (``policy``): stamps out of
    range or jumping away from the stream are dropped, and a jump it follows (a bag played
    again) clears the buffers; other out-of-order or duplicate stamps are dropped. A joint
    state farther from the last one than any joint can move in between (``max_speed``, rad/s
    or m/s per joint, e.g. the URDF's velocity limits; :data:`DEFAULT_MAX_JOINT_SPEED` where
    absent; None: no such check) is a spike, dropped before the filter
    (:meth:`add_joint_state`).
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
        self.max_speed = None
        if max_speed is not None:
            speed = np.asarray(max_speed, dtype=float)
            self.max_speed = np.where(np.isfinite(speed) & (speed > 0.0), speed,
                                      DEFAULT_MAX_JOINT_SPEED)
        self._spikes: tuple[float, NDArray[np.float64], int] | None = None  # the last one,
        # and how many agreeing ones in a row
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
        """Move the buffered wrenches ``delay`` seconds earlier (their stamps were late by it);
        before the first :meth:`pop_ready`, like :meth:`set_filter`."""
        if self._joint_f.size:
            raise InertialIdError("wrench stamps cannot move under samples already filtered")
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

    def _too_far(self, dt: NDArray[np.float64] | float,
                 step: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Whether a change of the joints' positions ``step`` ((..., n) rad or m) in ``dt``
        (s) is farther than any joint moves (:data:`SPIKE_SPEED_MARGIN`); per row."""
        if self.max_speed is None:
            return np.zeros(np.shape(step)[:-1], dtype=bool)
        allowed = SPIKE_SPEED_MARGIN * self.max_speed * np.asarray(dt)[..., None] + SPIKE_SLACK
        return np.any(np.abs(step) > allowed, axis=-1)

    def _spike(self, t: float, q: NDArray[np.float64]) -> bool:
        """Drop and count (``joint_state_spike``) a joint state farther from the last one
        than any joint moves in the time between (before the filter sees it); a run of
        :data:`SPIKE_FOLLOW` agreeing ones restarts the buffers from the newest."""
        if self._joint_t.size == 0 or not self._too_far(t - self._joint_t.last(),
                                                          q - self._joint_q.view()[-1]):
            self._spikes = None
            return False
        run = 1
        if self._spikes is not None:
            last_t, last_q, count = self._spikes
            if t > last_t and not self._too_far(t - last_t, q - last_q):
                run = count + 1
        if run >= SPIKE_FOLLOW:
            self.reset()
            self._spikes = None
            return False
        self._spikes = (t, q, run)
        self.counters["joint_state_spike"] += 1
        return True

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
        if np.any(self._too_far(np.diff(steps_t), np.diff(steps_q, axis=0))):
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

    def _wrench_span(self, joint_t: NDArray[np.float64],
                     wrench_t: NDArray[np.float64]) -> _Span:
        """Wrench samples before and after a stamp so both windows span the same time
        (matched filtering: at least the joint window of any stamp between two joint
        samples, so that the kernel is whole)."""
        joint_period = _median(np.diff(joint_t))
        wrench_period = _median(np.diff(wrench_t)) if wrench_t.size > 1 else 0.0
        if wrench_period <= 0.0:
            return _Span(self.order, min(self.order, self.lag))
        ratio = joint_period / wrench_period
        after = int(round(self.lag * ratio))
        before = max(int(round((self.window - 1 - self.lag) * ratio)), self.order - after)
        if self.kinematics is not None:
            before = int(np.ceil((self.window - self.lag) * ratio)) + 1
        return _Span(before, after)

    def pop_ready(self) -> SyncedSamples:
        """All samples whose filter windows are complete, oldest first."""
        if len(self._joint_t) < self.window or self._next_wrench >= len(self._wrench_t):
            return SyncedSamples.empty(self.n_joints)
        joint_t = self._joint_t.view()
        wrench_t = self._wrench_t.view()
        js = _Span(self.window - 1 - self.lag, self.lag)
        ws = self._wrench_span(joint_t, wrench_t)
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

    def _filter(
        self,
        joint_t: NDArray[np.float64],
        wrench_t: NDArray[np.float64],
        index: NDArray[np.intp],
        ks: NDArray[np.intp],
        js: _Span,
        ws: _Span,
    ) -> SyncedSamples:
        if index.size == 0:
            return SyncedSamples.empty(self.n_joints)
        at = wrench_t[index]
        # Consecutive wrenches share joint windows: fit each window once.
        centres, which = np.unique(ks, return_inverse=True)
        joint_windows = centres[:, None] + js.offsets()
        jt = joint_t[joint_windows]
        if self.kinematics is not None:
            return self._matched(jt, joint_windows, wrench_t, index, which, ws)
        q_fit = fit_polynomials(jt, self._joint_q.view()[joint_windows], self.order)
        if self.use_measured_velocity:
            (position,) = q_fit.evaluate(at, (0,), which)
            v_fit = fit_polynomials(jt, self._joint_v.view()[joint_windows], self.order)
            velocity, acceleration = v_fit.evaluate(at, (0, 1), which)
        else:
            position, velocity, acceleration = q_fit.evaluate(at, (0, 1, 2), which)
        wrench_windows = index[:, None] + ws.offsets()
        wrenches = self._wrench_w.view()
        (wrench,) = local_polynomial(wrench_t[wrench_windows], wrenches[wrench_windows], at,
                                     self.order)
        return SyncedSamples(at, position, velocity, acceleration, wrench, wrenches[index])

    def _matched(self, jt: NDArray[np.float64], joint_windows: NDArray[np.intp],
                 wrench_t: NDArray[np.float64], index: NDArray[np.intp],
                 which: NDArray[np.intp], ws: _Span) -> SyncedSamples:
        """Matched filtering (module docstring): joints as the plain filter, the wrench and
        the sensor-frame kinematics smoothed by the kernel of the joints' acceleration."""
        at = wrench_t[index]
        projection, centre, scale = fit_projections(jt, self.order)  # (M, p+1, W)
        fits = PolynomialFits(projection @ self._joint_q.view()[joint_windows], centre, scale)
        position, velocity, acceleration = fits.evaluate(at, (0, 1, 2), which)
        if self.use_measured_velocity:
            v_fits = PolynomialFits(projection @ self._joint_v.view()[joint_windows], centre,
                                    scale)
            velocity, acceleration = v_fits.evaluate(at, (0, 1), which)
        # The acceleration at scaled time s is sum_m m (m-1) s^(m-2) / scale^2 (P_m q),
        # m = 2 .. p; each P_m annihilates lines, so it has second-difference weights.
        gammas = second_difference_weights(jt, projection[:, 2:, :])  # (M, p-1, W-2)
        features = self._joint_f.view()[joint_windows[:, 1:-1]]  # (M, W-2, F)
        smoothed = gammas @ features  # (M, p-1, F)
        s = (at - centre[which]) / scale[which]
        powers = np.arange(2, self.order + 1)
        basis = (powers * (powers - 1) * s[:, None] ** (powers - 2)
                 / scale[which, None] ** 2)  # (N, p-1)
        filtered = np.einsum("nm,nmf->nf", basis, smoothed[which])
        gamma = np.einsum("nm,nmk->nk", basis, gammas[which])  # (N, W-2)
        wrench_windows = index[:, None] + ws.offsets()
        tau = wrench_t[wrench_windows]
        kernel = hat_kernel_at(jt[which], gamma, tau)
        spacing = np.empty(tau.shape)
        spacing[:, 1:-1] = 0.5 * (tau[:, 2:] - tau[:, :-2])
        spacing[:, 0] = 0.5 * (tau[:, 1] - tau[:, 0])
        spacing[:, -1] = 0.5 * (tau[:, -1] - tau[:, -2])
        weights = kernel * spacing
        weights /= weights.sum(axis=1, keepdims=True)
        wrenches = self._wrench_w.view()
        wrench = np.einsum("nk,nkj->nj", weights, wrenches[wrench_windows])
        twist, proper = decode_features(filtered)
        noise = None
        if self.jacobians is not None:
            # The sensor-frame noise J diag(|h|^2 sigma_q^2) J^T at each sample: h = basis .
            # P[2:] the second derivative's weights on the positions, J at the window's joint
            # sample k (at or before the wrench stamp), sigma_q^2 in effect at row k - 1 (row
            # k has none yet when lag is 0).
            h = np.einsum("nm,nmw->nw", basis, projection[which, 2:, :])
            at_or_before = joint_windows[:, self.window - 1 - self.lag]
            jacobian = self.jacobians(self._joint_q.view()[at_or_before])[which]  # (N, 6, n)
            sigma2 = self._joint_s.view()[at_or_before - 1][which]  # (N, n)
            variance = np.einsum("nw,nw->n", h, h)[:, None] * sigma2
            noise = np.einsum("nik,nk,njk->nij", jacobian, variance, jacobian)
        return SyncedSamples(at, position, velocity, acceleration, wrench, wrenches[index],
                             twist, proper, noise)

    def _prune(self, joint_t: NDArray[np.float64], js: _Span, ws: _Span) -> None:
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
