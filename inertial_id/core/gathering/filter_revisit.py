"""Revisiting the gatherer's filter when the motion changes.

The filter is chosen on the first ``decision_time`` seconds of joint states
(:func:`~inertial_id.core.gathering.filter_choice.choose_filter`). A robot that stands still then
gets the no-motion default (0.1 s), whatever it does later. So :class:`MotionWatch` keeps the
latest ``decision_time`` seconds of joint states and, every :data:`REVISIT_EVERY` seconds of
them while the filter in use is that default, chooses again on them; once they show motion,
that choice replaces the default. What a switch costs, and why the estimate's statistics
survive it, is in :meth:`inertial_id.core.gathering.gatherer.Gathering._switch`.

A filter chosen from moving data, or a set window, is kept: replacing one when the motion
later gets faster or slower (its gain error or its noise grown) was tried, and in the fault
run (``test/system/test_fault_soak.py``) a switch under injected faults was followed by set-up
errors whose cause is not pinned down yet.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.gathering.filter_choice import (
    MIN_SAMPLES,
    FilterChoice,
    choose_filter,
    joint_rate,
)

REVISIT_EVERY = 10.0
"""s of joint states between two looks at the motion."""
RATE_CHANGE = 0.2
"""A recent record whose joint-state rate is further than this share from the filter's is not
judged (a burst of messages stamped together reads as a huge rate, and a filter sized for it
would cost seconds to choose): the filter in use stays."""


class MotionWatch:
    """The latest ``span`` seconds of joint states (stamps s, positions rad or m) and the
    decision whether the filter in use still suits them (module doc)."""

    def __init__(self, span: float, max_delay: float, order: int) -> None:
        self.span = span
        self.max_delay = max_delay
        self.order = order
        self._times: list[NDArray[np.float64]] = []
        self._positions: list[NDArray[np.float64]] = []
        self._next = np.inf
        self.switches = 0
        """How many times a new filter was proposed and taken."""

    def start(self, now: float) -> None:
        """Watch from joint-state time ``now`` (s): the next look is :data:`REVISIT_EVERY`
        seconds later."""
        self._next = now + REVISIT_EVERY

    def stop(self) -> None:
        """Stop watching and forget the record."""
        self._times, self._positions, self._next = [], [], np.inf

    @property
    def watching(self) -> bool:
        """Whether the filter in use may be replaced (joint states are kept only then)."""
        return bool(np.isfinite(self._next))

    def add(self, times: NDArray[np.float64], positions: NDArray[np.float64]) -> None:
        """Accepted joint states, oldest first: (k,) stamps and (k, n) positions (kept only
        while :attr:`watching`)."""
        if times.size and self.watching:
            self._times.append(np.asarray(times, dtype=float))
            self._positions.append(np.asarray(positions, dtype=float))

    def due(self) -> bool:
        """Whether it is time to look at the motion again (only while it may matter)."""
        return bool(self._times) and float(self._times[-1][-1]) >= self._next

    def propose(self, current: FilterChoice) -> FilterChoice | None:
        """A filter for the recent motion if the one in use is the no-motion default and the
        recent joint states move (module doc), else None; either way the next look is due
        :data:`REVISIT_EVERY` s later."""
        times, positions = self._record()
        self.start(float(times[-1]) if times.size else self._next)
        if current.source in ("data", "setting") or times.size < MIN_SAMPLES:
            return None
        if abs(joint_rate(times) / current.rate - 1.0) > RATE_CHANGE:
            return None  # an irregular stretch (a burst, a gap): no motion to judge by
        recent = choose_filter(times, positions, self.order, self.max_delay)
        return recent if recent.source == "data" else None

    def _record(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The joint states of the last ``span`` seconds (older ones are dropped)."""
        times = np.concatenate(self._times)
        positions = np.concatenate(self._positions)
        back = np.flatnonzero(np.diff(times) <= 0.0)  # a stamp reset: keep what follows it
        keep = (times >= times[-1] - self.span) & (np.arange(times.size) > (
            back[-1] if back.size else -1))
        times, positions = times[keep], positions[keep]
        self._times, self._positions = [times], [positions]
        return times, positions
