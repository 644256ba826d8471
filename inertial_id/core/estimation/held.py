"""The online estimator's held samples: one row per sample, and the samples it holds back.

A held row is :data:`~inertial_id.core.estimation.payload_change.SAMPLE_COLUMNS` (sensor
frame, SI units: twist, proper acceleration and filtered wrench, the acceleration's noise
covariance, the smoothed angular-velocity products) then the raw wrench (6). :func:`held_rows`
builds and checks them for a batch; :class:`HeldSamples` keeps those waiting for the contact
gate, in stamp order, until they are released or dropped near a contact;
:class:`ReleasedSamples` gathers the released ones until they enter the statistics together;
:class:`Anomaly` keeps a contact's samples for the payload-change test.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import ImplausibleValueError, SampleError
from inertial_id.core.estimation.payload_change import NOISE, PRODUCTS, SAMPLE_COLUMNS
from inertial_id.core.regressor import angular_products
from inertial_id.core.samples import MAX_ABS_VALUE, plausible

TAKE_EVERY = 0.1
"""s of stamps the released samples may span before they enter the statistics together (a
solve, a reset, new settings or an anomaly's resolution take them at once): one Gram matrix
and one set of normal equations per tenth of a second instead of per batch. Every estimate
is the same as with each batch taken at once, since the sums do not depend on the grouping
(exactly so only without forgetting or a window, which take each batch at once), and each
block of the block-robust covariance closes after the batch it closed after before: what is
pending is taken once it would fill the open block."""

HELD_COLUMNS = SAMPLE_COLUMNS + 6
"""Columns of a held row: :data:`SAMPLE_COLUMNS` then the raw wrench."""

Block = tuple[NDArray[np.float64], NDArray[np.float64]]
"""Stamps (k,) s and their held rows (k, :data:`HELD_COLUMNS`)."""


def held_rows(n: int, twist: ArrayLike, proper_acceleration: ArrayLike, wrench: ArrayLike,
              raw: ArrayLike | None = None, acceleration_noise: ArrayLike | None = None,
              products: ArrayLike | None = None) -> NDArray[np.float64]:
    """The held rows (n, :data:`HELD_COLUMNS`) of a batch of n samples: (n, 6) twists, proper
    accelerations, filtered and raw wrenches (None: the filtered), the acceleration's noise
    covariances (n, 6, 6; None: zeros) and the smoothed angular-velocity products (n, 6;
    None: the twists' own, computed once the batch is known plausible). Other shapes raise
    :class:`SampleError`, and so does a NaN or inf; a finite value beyond
    :data:`~inertial_id.core.gathering.synchronizer.MAX_ABS_VALUE` raises
    :class:`ImplausibleValueError`."""
    v = np.atleast_2d(np.asarray(twist, dtype=float))
    a = np.atleast_2d(np.asarray(proper_acceleration, dtype=float))
    w = np.atleast_2d(np.asarray(wrench, dtype=float))
    r = w if raw is None else np.atleast_2d(np.asarray(raw, dtype=float))
    noise = (np.zeros((n, 6, 6)) if acceleration_noise is None
             else np.asarray(acceleration_noise, dtype=float))
    if not (v.shape == a.shape == w.shape == r.shape == (n, 6) and noise.shape == (n, 6, 6)):
        raise SampleError(f"batch shapes ({n},) {v.shape} {a.shape} {w.shape} {r.shape} "
                          f"{noise.shape} differ")
    p = None if products is None else np.atleast_2d(np.asarray(products, dtype=float))
    if p is not None and p.shape != v.shape:
        raise SampleError(f"angular-velocity products {p.shape} differ from the twists' "
                          f"{v.shape}")
    rows = np.empty((n, HELD_COLUMNS))
    rows[:, :6], rows[:, 6:12], rows[:, 12:18] = v, a, w
    rows[:, NOISE], rows[:, SAMPLE_COLUMNS:] = noise.reshape(n, 36), r
    rows[:, PRODUCTS] = 0.0 if p is None else p
    if not np.isfinite(rows).all():
        raise SampleError("batch contains NaN or inf")
    if not plausible(rows):
        # Finite but no measurement (1e200): squared in the statistics they overflow, and a
        # conic solver given them may panic. Refused here, before anything holds them.
        raise ImplausibleValueError(f"batch contains values beyond {MAX_ABS_VALUE:g}")
    if p is None:
        rows[:, PRODUCTS] = angular_products(v[:, 3:])
    return rows


class HeldSamples:
    """Samples held back for the contact gate, oldest first (blocks of :data:`Block`)."""

    def __init__(self) -> None:
        self._blocks: deque[Block] = deque()

    @property
    def count(self) -> int:
        """Samples held."""
        return int(sum(stamps.size for stamps, _ in self._blocks))

    def hold(self, stamps: NDArray[np.float64], rows: NDArray[np.float64]) -> None:
        """Hold samples stamped after all those held."""
        if stamps.size:
            self._blocks.append((stamps, rows))

    def drop_from(self, cut: float) -> list[Block]:
        """Forget the samples stamped at or after ``cut``; they are returned, oldest first."""
        dropped: list[Block] = []
        while self._blocks and self._blocks[-1][0][-1] >= cut:
            stamps, rows = self._blocks.pop()
            earlier = stamps < cut
            dropped.insert(0, (stamps[~earlier], rows[~earlier]))
            if earlier.any():
                self._blocks.append((stamps[earlier], rows[earlier]))
                break
        return dropped

    def release(self, horizon: float) -> list[Block]:
        """The samples stamped at or before ``horizon`` (no longer held), oldest first, in
        the blocks they were held in (none: an empty list)."""
        released: list[Block] = []
        while self._blocks and self._blocks[0][0][0] <= horizon:
            stamps, rows = self._blocks.popleft()
            split = int(np.searchsorted(stamps, horizon, side="right"))
            released.append((stamps[:split], rows[:split]))
            if split < stamps.size:
                self._blocks.appendleft((stamps[split:], rows[split:]))
                break
        return released

    def clear(self) -> int:
        """Forget every held sample; how many there were."""
        count = self.count
        self._blocks.clear()
        return count


class ReleasedSamples:
    """Samples the contact gate released and the statistics have not taken yet, oldest
    first: gathered so that the few samples of each batch enter the statistics together
    (:meth:`take`), once the caller decides (the online estimator: every ``TAKE_EVERY`` of
    stamps, and whenever something reads or changes the statistics)."""

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self.count = 0
        """Samples gathered."""

    def add(self, blocks: Iterable[Block]) -> None:
        """Released samples, stamped after all those gathered."""
        for block in blocks:
            self._blocks.append(block)
            self.count += block[0].size

    @property
    def span(self) -> float:
        """s from the oldest gathered stamp to the newest (0 with none; the magnitude, should
        the stamps have jumped back)."""
        if not self._blocks:
            return 0.0
        return abs(float(self._blocks[-1][0][-1] - self._blocks[0][0][0]))

    def take(self) -> Block | None:
        """Every gathered sample, as one block (no longer gathered); None with none."""
        if not self._blocks:
            return None
        stamps, rows = zip(*self._blocks, strict=True)
        self.clear()
        return np.concatenate(stamps), np.concatenate(rows)

    def clear(self) -> None:
        """Forget the gathered samples."""
        self._blocks = []
        self.count = 0


class Anomaly:
    """The samples of a lasting anomaly (a contact), from its start, and when to test next
    whether they are a new payload (``next_check``, s; inf: not while there is none)."""

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self.next_check = np.inf

    def clear(self) -> None:
        """No anomaly any more (the contact ended, a tare, a reset)."""
        self._blocks, self.next_check = [], np.inf

    def start(self, at: float, after: float) -> None:
        """A contact started at ``at`` (s): its first test ``after`` s later (0: never)."""
        self._blocks = []
        self.next_check = at + after if after > 0 else np.inf

    def add(self, blocks: Iterable[Block], start: float) -> None:
        """Samples of the contact: those of ``blocks`` stamped at or after ``start``."""
        self._blocks.extend((stamps[stamps >= start], rows[stamps >= start])
                            for stamps, rows in blocks)

    def samples(self) -> Block | None:
        """Its stamps and rows, oldest first; None before any."""
        if not self._blocks:
            return None
        stamps, rows = zip(*self._blocks, strict=True)
        return np.concatenate(stamps), np.concatenate(rows)
