"""The time policy for header stamps: which stamps a stream accepts, one place for all stages.

A stream of stamps (a robot's joint states and wrenches, or the pipeline's batches) follows a
*reference*: the newest stamp accepted. A stamp is

- **out of range** when it is not finite, negative, or at or beyond ``MAX_STAMP`` (what a
  ``builtin_interfaces/Time`` can hold; ``sec`` is an int32): rejected, always;
- **in step** when it lies within ``max_jump`` seconds before the reference or at most
  ``max_pause`` seconds after it (a driver paused, a topic silent for a while): accepted;
- otherwise a **jump**: rejected, and remembered as the start of a candidate time base. Stamps
  that keep in step with the candidate extend it; once it spans ``jump_confirm`` seconds the
  stream follows it (a bag played again, a clock reset): the reference moves there and the
  caller resets its buffers. A stamp back in step with the old reference abandons the
  candidate (it was a glitch: a few samples stamped 0 or decades away).

So a short glitch costs only its own samples and never moves the reference; a genuine jump
costs ``jump_confirm`` seconds of data, once. ``counters`` counts the samples rejected, by
reason (:data:`OUT_OF_RANGE`, :data:`JUMP`), and :data:`RESETS`, the jumps followed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError

MAX_STAMP = float(2**31 - 1)
"""Stamps (s) from here on cannot be written as a ``builtin_interfaces/Time``."""
OUT_OF_RANGE = "stamp_out_of_range"
"""Counter key: samples whose stamp is not finite, negative or beyond :data:`MAX_STAMP`."""
JUMP = "stamp_jump"
"""Counter key: samples whose stamp jumped away from the stream (a glitch, or the first
``jump_confirm`` seconds of a genuine jump)."""
RESETS = "stamp_resets"
"""Counter key: jumps the stream followed (the consumer reset its buffers each time)."""


def in_range(stamps: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Per stamp (s): finite, not negative and below :data:`MAX_STAMP`."""
    with np.errstate(invalid="ignore"):
        return (stamps >= 0.0) & (stamps < MAX_STAMP)


@dataclass
class _Candidate:
    """A time base the stream may be jumping to: first and newest stamp seen on it."""

    first: float
    newest: float


class StampPolicy:
    """Accepts or rejects stamps of one stream; see the module docstring (seconds).

    ``counters`` may be the consumer's own counter, so one ledger holds every reason.
    """

    def __init__(self, max_jump: float = 1.0, max_pause: float = 600.0,
                 jump_confirm: float = 1.0, counters: Counter[str] | None = None) -> None:
        values = (max_jump, max_pause, jump_confirm)
        if not all(np.isfinite(v) and v > 0.0 for v in values):
            raise InertialIdError("max_jump, max_pause and jump_confirm must be positive, got "
                                  f"{max_jump}, {max_pause}, {jump_confirm}")
        self.max_jump = max_jump
        self.max_pause = max_pause
        self.jump_confirm = jump_confirm
        self.counters: Counter[str] = Counter() if counters is None else counters
        self.reference: float | None = None
        self._candidate: _Candidate | None = None

    def reset(self) -> None:
        """Forget the stream (the next in-range stamp starts a new one); counters stay."""
        self.reference = None
        self._candidate = None

    def _in_step(self, t: float, reference: float) -> bool:
        return -self.max_jump <= t - reference <= self.max_pause

    def accept(self, t: float, kind: str = "") -> tuple[bool, bool]:
        """One stamp: ``(accepted, reset)``; ``reset`` means the stream has just followed a
        jump, so what the caller buffered before belongs to another time base. A rejection
        is counted under ``kind`` + its reason (e.g. ``wrench_stamp_jump``)."""
        if not (0.0 <= t < MAX_STAMP):
            self.counters[kind + OUT_OF_RANGE] += 1
            return False, False
        if self.reference is None or self._in_step(t, self.reference):
            self.reference = t if self.reference is None else max(self.reference, t)
            self._candidate = None
            return True, False
        candidate = self._candidate
        if candidate is None or not self._in_step(t, candidate.newest):
            self._candidate = _Candidate(t, t)
            self.counters[kind + JUMP] += 1
            return False, False
        candidate.newest = max(candidate.newest, t)
        if candidate.newest - candidate.first < self.jump_confirm:
            self.counters[kind + JUMP] += 1
            return False, False
        self.reference, self._candidate = candidate.newest, None
        self.counters[RESETS] += 1
        return True, True

    def accept_all(self, stamps: NDArray[np.float64]) -> bool:
        """Accept a whole block of stamps (oldest first) if every one is in step, without a
        candidate jump pending; False (and nothing changed) otherwise: go one by one then."""
        if self._candidate is not None or stamps.size == 0:
            return self._candidate is None
        if not in_range(stamps).all():
            return False
        before = np.maximum.accumulate(stamps)
        if self.reference is not None:
            before = np.maximum(before, self.reference)
            previous = np.concatenate(([self.reference], before[:-1]))
        else:
            previous = np.concatenate(([stamps[0]], before[:-1]))
        step = stamps - previous
        if not ((step >= -self.max_jump) & (step <= self.max_pause)).all():
            return False
        self.reference = float(before[-1])
        return True

    def filter(self, stamps: NDArray[np.float64]) -> tuple[NDArray[np.bool_], int]:
        """Per stamp of a block, oldest first: accepted; and the index of the last stamp at
        which the stream followed a jump (-1 when none did: nothing before it is stale)."""
        if self.accept_all(stamps):
            return np.ones(stamps.size, dtype=bool), -1
        keep = np.zeros(stamps.size, dtype=bool)
        last_reset = -1
        for k, t in enumerate(stamps.tolist()):
            keep[k], reset = self.accept(t)
            if reset:
                last_reset = k
        return keep, last_reset

def first_at_or_after(times: NDArray[np.float64], t: float) -> int:
    """Index of the first of ``times`` (in order, not necessarily increasing) at or after
    ``t``; the last index when none is."""
    hits = np.flatnonzero(times >= t)
    return int(hits[0]) if hits.size else times.size - 1
