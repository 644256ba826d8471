"""Time synchronisation of joint states and wrenches with a fixed-lag Savitzky-Golay filter.

Each wrench sample (stamp ``t``) becomes one synchronised sample at ``t``: the joint positions,
velocities and accelerations come from a polynomial fitted to the ``window`` joint samples
centred on ``t``, and the wrench itself is smoothed by a polynomial of the same order over the
same time span. Both fits are centred, so both signals are delayed by the same half window and
stay in phase. Only header stamps are used, never arrival times.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.signals import evaluate_polynomial, polynomial_fit


@dataclass(frozen=True)
class SyncedSamples:
    """A batch of N synchronised samples; joints in the model's order.

    ``times`` (N,) s; ``position``, ``velocity``, ``acceleration`` (N, n) in rad, rad/s,
    rad/s^2 (or m for prismatic joints); ``wrench`` (N, 6) ``[fx, fy, fz, tx, ty, tz]`` as the
    sensor reports it.
    """

    times: NDArray[np.float64]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    wrench: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.times.size)

    @classmethod
    def empty(cls, n_joints: int) -> SyncedSamples:
        """A batch with no samples."""
        z = np.empty((0, n_joints))
        return cls(np.empty(0), z, z.copy(), z.copy(), np.empty((0, 6)))


class FixedLagSynchronizer:
    """Pairs wrench samples with filtered joint states; see the module docstring.

    ``window`` joint samples (odd) and polynomial ``order`` set the filter; the output lags the
    newest joint state by half a window. ``max_span`` (s) rejects windows that straddle a gap
    in the joint states. A stamp more than ``reset_jump`` seconds older than the newest one
    (a bag restarting under simulated time) clears the buffers; other out-of-order or duplicate
    stamps are dropped. ``counters`` records what was dropped and why.
    """

    def __init__(
        self,
        n_joints: int,
        window: int = 15,
        order: int = 3,
        use_measured_velocity: bool = False,
        max_span: float = 0.5,
        reset_jump: float = 1.0,
        max_pending: int = 20000,
    ) -> None:
        if window % 2 == 0 or window <= order or order < 2:
            raise InertialIdError(
                f"need an odd window > order >= 2, got window={window}, order={order}"
            )
        self.n_joints = n_joints
        self.window = window
        self.order = order
        self.use_measured_velocity = use_measured_velocity
        self.max_span = max_span
        self.reset_jump = reset_jump
        self.max_pending = max_pending
        self.counters: Counter[str] = Counter()
        self.reset()

    def reset(self) -> None:
        """Forget all buffered samples."""
        self._joint_t: list[float] = []
        self._joint_q: list[NDArray[np.float64]] = []
        self._joint_v: list[NDArray[np.float64] | None] = []
        self._wrench_t: list[float] = []
        self._wrench_w: list[NDArray[np.float64]] = []
        self._next_wrench = 0

    @property
    def lag(self) -> float:
        """Current output lag (s): the time span of half a joint window."""
        if len(self._joint_t) < 2:
            return 0.0
        period = (self._joint_t[-1] - self._joint_t[0]) / (len(self._joint_t) - 1)
        return period * (self.window // 2)

    def _accept_stamp(self, stamps: list[float], t: float, kind: str) -> bool:
        if not np.isfinite(t):
            raise SampleError(f"{kind} stamp is not finite")
        if stamps and t <= stamps[-1]:
            if stamps[-1] - t > self.reset_jump:
                self.counters["resets"] += 1
                self.reset()
                return True
            self.counters[f"{kind}_out_of_order"] += 1
            return False
        return True

    def add_joint_state(
        self, t: float, position: ArrayLike, velocity: ArrayLike | None = None
    ) -> bool:
        """Buffer one joint state (model order). Returns False when its stamp was dropped."""
        q = np.asarray(position, dtype=float)
        v = None if velocity is None else np.asarray(velocity, dtype=float)
        if q.shape != (self.n_joints,) or (v is not None and v.shape != q.shape):
            raise SampleError(f"expected {self.n_joints} joint values, got {q.shape}")
        if not np.all(np.isfinite(q)) or (v is not None and not np.all(np.isfinite(v))):
            raise SampleError("joint state contains NaN or inf")
        if self.use_measured_velocity and v is None:
            raise SampleError("use_measured_velocity is set but the joint state has no velocity")
        if not self._accept_stamp(self._joint_t, t, "joint_state"):
            return False
        self._joint_t.append(float(t))
        self._joint_q.append(q)
        self._joint_v.append(v)
        return True

    def add_wrench(self, t: float, wrench: ArrayLike) -> bool:
        """Buffer one wrench ``[fx, fy, fz, tx, ty, tz]``. Returns False when dropped."""
        w = np.asarray(wrench, dtype=float)
        if w.shape != (6,) or not np.all(np.isfinite(w)):
            raise SampleError("wrench must be 6 finite values")
        if not self._accept_stamp(self._wrench_t, t, "wrench"):
            return False
        self._wrench_t.append(float(t))
        self._wrench_w.append(w)
        if len(self._wrench_t) - self._next_wrench > self.max_pending:
            self.counters["wrench_overflow"] += 1
            self._next_wrench += 1
        return True

    def pop_ready(self) -> SyncedSamples:
        """All samples whose filter windows are complete, oldest first."""
        half = self.window // 2
        if len(self._joint_t) < self.window or self._next_wrench >= len(self._wrench_t):
            return SyncedSamples.empty(self.n_joints)
        joint_t = np.asarray(self._joint_t)
        wrench_t = np.asarray(self._wrench_t)
        pending = wrench_t[self._next_wrench :]
        ks = np.searchsorted(joint_t, pending, side="right") - 1
        groups: dict[int, list[int]] = {}
        consumed = 0
        for offset, k in enumerate(ks):
            if k < half:  # before the joint data: can never be filtered
                self.counters["wrench_without_joint_state"] += 1
            elif k + half >= joint_t.size or wrench_t[-1] < joint_t[k + half]:
                break  # wait for the future half of the window
            elif joint_t[k + half] - joint_t[k - half] > self.max_span:
                self.counters["joint_state_gap"] += 1
            else:
                groups.setdefault(int(k), []).append(self._next_wrench + offset)
            consumed = offset + 1
        self._next_wrench += consumed
        batch = self._filter_groups(joint_t, wrench_t, groups, half)
        self._prune(joint_t, half, ks[consumed] if consumed < ks.size else None)
        return batch

    def _filter_groups(
        self,
        joint_t: NDArray[np.float64],
        wrench_t: NDArray[np.float64],
        groups: dict[int, list[int]],
        half: int,
    ) -> SyncedSamples:
        if not groups:
            return SyncedSamples.empty(self.n_joints)
        times, pos, vel, acc, wrenches = [], [], [], [], []
        for k, members in groups.items():
            span = slice(k - half, k + half + 1)
            centre = joint_t[k]
            offsets = wrench_t[members] - centre
            coeffs, scale = polynomial_fit(joint_t[span], np.stack(self._joint_q[span]),
                                           centre, self.order)
            pos.append(evaluate_polynomial(coeffs, scale, offsets))
            if self.use_measured_velocity:
                vcoeffs, vscale = polynomial_fit(
                    joint_t[span], np.stack(self._joint_v[span]), centre, self.order
                )
                vel.append(evaluate_polynomial(vcoeffs, vscale, offsets))
                acc.append(evaluate_polynomial(vcoeffs, vscale, offsets, derivative=1))
            else:
                vel.append(evaluate_polynomial(coeffs, scale, offsets, derivative=1))
                acc.append(evaluate_polynomial(coeffs, scale, offsets, derivative=2))
            lo, hi = np.searchsorted(wrench_t, [joint_t[k - half], joint_t[k + half]],
                                     side="left")
            hi = max(hi, members[-1] + 1)
            if hi - lo > self.order:
                wcoeffs, wscale = polynomial_fit(wrench_t[lo:hi], np.stack(self._wrench_w[lo:hi]),
                                                 centre, self.order)
                wrenches.append(evaluate_polynomial(wcoeffs, wscale, offsets))
            else:
                wrenches.append(np.stack([self._wrench_w[i] for i in members]))
            times.append(wrench_t[members])
        return SyncedSamples(
            np.concatenate(times), np.concatenate(pos), np.concatenate(vel),
            np.concatenate(acc), np.concatenate(wrenches),
        )

    def _prune(self, joint_t: NDArray[np.float64], half: int, next_k: int | None) -> None:
        """Drop buffered samples that no future window can use."""
        keep_from = max(0, (joint_t.size - 1 if next_k is None else int(next_k)) - half)
        keep_from = min(keep_from, max(0, joint_t.size - self.window))
        if keep_from > 0:
            del self._joint_t[:keep_from], self._joint_q[:keep_from], self._joint_v[:keep_from]
        if not self._joint_t:
            return
        first_needed = np.searchsorted(np.asarray(self._wrench_t), self._joint_t[0], side="left")
        drop = int(min(first_needed, self._next_wrench))
        if drop > 0:
            del self._wrench_t[:drop], self._wrench_w[:drop]
            self._next_wrench -= drop
