"""The joint-torque payload fed live (:class:`TorquePayloadStream`): joint states (stamp in s,
positions, efforts; model joint order) one by one, smoothed and differentiated by a
Savitzky-Golay filter on their stamps, each added to the statistics once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError
from inertial_id.core.joint_torque.torque_payload.identifier import TorquePayloadIdentifier
from inertial_id.core.signals import savitzky_golay


class TorquePayloadStream:
    """The live form of :class:`TorquePayloadIdentifier`: joint states (stamp, positions,
    efforts; model order) arrive one by one; :meth:`process` smooths and differentiates the
    pending ones with a Savitzky-Golay filter of ``window`` samples (``order``) on their stamps
    and adds every sample whose window is complete to the statistics, keeping the last
    ``window - 1`` states for the next call. Each state enters the statistics once, so the
    cost per state is constant however long the stream runs (cumulative estimate). A link
    friction with direction memory is carried from one chunk to the next (its state and step
    follow the stream).
    """

    def __init__(self, identifier: TorquePayloadIdentifier, window: int = 31,
                 order: int = 3) -> None:
        if window % 2 == 0 or window <= order:
            raise SampleError(f"the window must be odd and longer than the order, got {window}")
        self.identifier = identifier
        self.window, self.order = int(window), int(order)
        self._t: list[float] = []
        self._q: list[NDArray[np.float64]] = []
        self._e: list[NDArray[np.float64]] = []
        self._done = 0  # samples of the buffer already in the statistics
        self._direction: NDArray[np.float64] | None = None  # memory state after the last chunk
        self.samples = 0
        self.period = float("nan")  # s, median spacing of the states seen in the last window

    def push(self, stamp: float, q: ArrayLike, effort: ArrayLike) -> None:
        """One joint state; stamps must increase (:class:`SampleError` otherwise)."""
        if self._t and stamp <= self._t[-1]:
            raise SampleError(f"stamp {stamp:.6f} s is not after the previous one")
        self._t.append(float(stamp))
        self._q.append(np.asarray(q, dtype=float))
        self._e.append(np.asarray(effort, dtype=float))

    def ready(self) -> tuple[NDArray[np.float64], ...] | None:
        """The pending samples whose filter window is complete, smoothed and differentiated:
        ``(t, q, qd, qdd, effort, initial)`` (None when there are none), ``initial`` the link
        friction's direction-memory state before the first row (None without memory); each
        sample is returned once, and the buffer keeps only the last ``window - 1`` states."""
        half = self.window // 2
        n = len(self._t)
        ready = n - half  # samples [done, ready) have a full centred window
        if n < self.window or ready <= self._done:
            return None
        t, q, e = np.array(self._t), np.array(self._q), np.array(self._e)
        self.period = float(np.median(np.diff(t)))
        start = max(self._done, half)
        rows = slice(start, ready)
        smooth = [savitzky_golay(t, q, self.window, self.order, d)[rows] for d in (0, 1, 2)]
        keep = max(ready - half, 0)  # the next window needs the last `window - 1` states
        del self._t[:keep], self._q[:keep], self._e[:keep]
        self._done = ready - keep
        initial = self._direction
        friction = self.identifier.links.friction
        if friction.memory:
            friction = replace(friction, sample_period=self.period)
            self.identifier.links = replace(self.identifier.links, friction=friction)
            self._direction = friction.state_after(smooth[1], initial)
        return (t[rows], *smooth, e[rows], initial)

    def add(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike, effort: ArrayLike,
            initial: ArrayLike | None = None) -> None:
        """Add samples (from :meth:`ready`, with its ``initial``) to the statistics."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        if q.shape[0]:
            self.identifier.add(q, qd, qdd, effort, initial)
            self.samples += q.shape[0]

    def add_rows(self, rows: NDArray[np.float64], target: NDArray[np.float64]) -> None:
        """Add rows and targets (:meth:`TorquePayloadIdentifier.terms` of ready samples,
        possibly a subset) to the statistics."""
        if target.shape[0]:
            self.identifier.add_rows(rows, target)
            self.samples += target.shape[0]

    def process(self) -> int:
        """Add every ready sample (:meth:`ready`); returns how many were added."""
        chunk = self.ready()
        if chunk is None:
            return 0
        self.add(*chunk[1:])
        return chunk[0].size

    def reset(self) -> None:
        """Forget the statistics and the pending states (a new payload)."""
        self.identifier.reset()
        self._t, self._q, self._e = [], [], []
        self._done = self.samples = 0
        self._direction = None
