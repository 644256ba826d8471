"""The wrench stamps' delay, kept estimated while the stream runs.

The gatherer estimates the delay once from the joint states held to choose the filter
(:mod:`inertial_id.core.gathering.stamp_offset`); a slow sensor stamped on reception (100 Hz,
a few ms of transport lag with jitter) gives too few samples there for clear evidence. The
:class:`DelayTracker` goes on with every released batch of matched-filtered samples: the same
model, ``w = A x - tau dw/dt`` with ``x = [pi; offset]`` free, fitted from lag Gram matrices
(:mod:`inertial_id.core.lag_fit`) kept per block of :data:`BLOCK_TIME`, so the evidence grows
with the data at the cost of one 25x25 Gram update per :data:`BLOCK_TIME` of batches (taken
together) and a few 16x16 solves every :data:`ESTIMATE_EVERY` blocks.

- **Weights.** Each axis is weighted by the inverse of its residual variance under the fit
  (one refit after a first fit weighted by the wrench's own variance).
- **Contacts.** Once there is a fit, a sample whose residual under it exceeds
  :data:`OUTLIER_SCALES` times its axis's residual scale on any axis is left out as it
  comes (a push, its edges above all, is no lag; as
  :func:`~inertial_id.core.gathering.stamp_offset.estimate_delay` does); and a block whose
  weighted residual per sample is more than :data:`CONTACT_RATIO` times the median block's
  is left out of each fit.
- **Evidence.** The std is the white-noise one from the delay's information with ``x``
  fitted too, inflated for the filter's correlation of neighbouring samples (as
  :func:`~inertial_id.core.gathering.stamp_offset.estimate_delay` does); the delay counts when
  it meets that module's :data:`~inertial_id.core.gathering.stamp_offset.MIN_DELAY`,
  :data:`~inertial_id.core.gathering.stamp_offset.MAX_DELAY` and
  :data:`~inertial_id.core.gathering.stamp_offset.MIN_SNR` over at least
  :data:`~inertial_id.core.gathering.stamp_offset.MIN_SAMPLES` samples.
- **Correction.** A clear delay is returned (the gathering moves the stamps by it) and the
  blocks start again: they were measured on the stamps before the move.
- **Memory.** At most :data:`MAX_BLOCKS` blocks (the latest minute): a delay that changes is
  followed.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.gathering.stamp_offset import (
    MAX_DELAY,
    MIN_DELAY,
    MIN_SAMPLES,
    MIN_SNR,
    OUTLIER_SCALES,
    StampDelay,
)
from inertial_id.core.lag_fit import (
    LAG_GRAM_SIZE,
    RATE,
    SIGNAL,
    LagFit,
    LagSolution,
    lag_columns,
)
from inertial_id.core.regressor import GRAM_ONES, regressor_features
from inertial_id.core.samples import SyncedSamples

BLOCK_TIME = 0.1
"""s of samples per block ..."""
ESTIMATE_EVERY = 20
"""... and blocks between estimates (2 s: the evidence of one more block rarely decides) ..."""
MIN_BLOCKS = 40
"""... from this many blocks on (4 s: fewer leave the rigid body's 16 unknowns too loose to
judge samples by)."""
MAX_BLOCKS = 600
"""Blocks kept (the latest minute at most)."""
CONTACT_RATIO = 3.0
"""A block's weighted residual per sample over the median block's beyond which it is left
out."""
EXCLUSION_ROUNDS = 4
"""Refits at most, each without the blocks the last one left beyond :data:`CONTACT_RATIO`."""
MAX_GAP = 0.05
"""s between batches beyond which the rate is not taken across them."""


class DelayTracker:
    """See the module docstring. ``correlation_time`` (s): the span over which the filter
    correlates neighbouring samples (its window)."""

    def __init__(self, correlation_time: float) -> None:
        self.correlation_time = correlation_time
        self.corrections = 0
        """Delays applied so far."""
        self.latest = StampDelay(0.0, np.inf, 0, False)
        """The latest estimate of the delay left on the current stamps."""
        self._blocks: deque[NDArray[np.float64]] = deque(maxlen=MAX_BLOCKS)
        self._last: tuple[float, NDArray[np.float64], NDArray[np.float64]] | None = None
        self._spacing: deque[float] = deque(maxlen=MAX_BLOCKS)
        self._closed = 0  # blocks closed, in all
        self.outliers = 0
        """Samples left out as no lag explains them (a push)."""
        # The latest fit, to judge samples as they come: its prediction matrix (13, 6) from
        # [features, 1], its slope (s) and each axis's residual scale (6,).
        self._reference: tuple[NDArray[np.float64], float, NDArray[np.float64]] | None = None
        self._restart()

    def _restart(self) -> None:
        """Forget the evidence (the stamps moved)."""
        self._blocks.clear()
        self._open = np.zeros((LAG_GRAM_SIZE, LAG_GRAM_SIZE))
        self._open_start: float | None = None
        self._pending: list[SyncedSamples] = []
        self._last = None  # no rate across the move

    def add(self, batch: SyncedSamples) -> float | None:
        """A released batch (matched filtering: twist and proper acceleration present); the
        delay to move the stamps by (s, positive: late) once clear, else None. Batches are
        held until they span :data:`BLOCK_TIME` and then taken together: a live gatherer
        releases a few samples at a time, and the cost is per call."""
        if batch.twist is None or batch.proper_acceleration is None or not len(batch.times):
            return None
        self._pending.append(batch)
        if batch.times[-1] - self._pending[0].times[0] < BLOCK_TIME:
            return None
        pending, self._pending = self._pending, []
        times = np.concatenate([b.times for b in pending])
        wrench = np.concatenate([b.wrench for b in pending])
        products = [b.angular_products for b in pending]
        features = regressor_features(
            np.concatenate([b.twist for b in pending]),
            np.concatenate([b.proper_acceleration for b in pending]),
            None if any(p is None for p in products) else np.concatenate(products))
        return self._take(times, features, wrench)

    def _take(self, times: NDArray[np.float64], features: NDArray[np.float64],
              wrench: NDArray[np.float64]) -> float | None:
        """Samples (stamps, regressor features, wrenches) into the evidence; a delay if it
        became clear."""
        last = self._last
        self._last = (float(times[-1]), features[-1].copy(), wrench[-1].copy())
        if last is not None and 0.0 < times[0] - last[0] < MAX_GAP:
            times = np.concatenate(([last[0]], times))
            features, wrench = np.vstack((last[1], features)), np.vstack((last[2], wrench))
        if times.size < 2 or np.any(np.diff(times) <= 0.0):
            return None
        columns = lag_columns(times, features, wrench, wrench)
        self._spacing.append(float(np.median(np.diff(times))))
        if self._reference is not None:
            prediction, slope, scale = self._reference
            residual = (columns[:, SIGNAL] - columns[:, :GRAM_ONES + 1] @ prediction
                        - slope * columns[:, RATE])
            outlier = np.any(np.abs(residual) > OUTLIER_SCALES * scale, axis=1)
            self.outliers += int(np.count_nonzero(outlier))
            columns[outlier] = 0.0
        return self._accumulate(times[1:], columns)

    def _accumulate(self, times: NDArray[np.float64], columns: NDArray[np.float64]
                    ) -> float | None:
        """Rows (stamps ``times``) into blocks of :data:`BLOCK_TIME`; a delay if a block
        that closed made it clear."""
        correction, start = None, 0
        while start < times.size:
            if self._open_start is None:
                self._open_start = float(times[start])
            end = int(np.searchsorted(times, self._open_start + BLOCK_TIME))
            rows = columns[start:max(end, start)]
            self._open += rows.T @ rows
            if end >= times.size:
                break
            correction = self._close()
            if correction is not None:  # the rest was measured on the stamps before
                return correction
            start = max(end, start)
        return None

    def _close(self) -> float | None:
        """Close the open block and estimate; the delay if clear (the evidence restarts)."""
        self._blocks.append(self._open)
        self._open = np.zeros((LAG_GRAM_SIZE, LAG_GRAM_SIZE))
        self._open_start = None
        self._closed += 1
        if self._closed % ESTIMATE_EVERY or len(self._blocks) < MIN_BLOCKS:
            return None
        self.latest = self.estimate()
        if not self.latest.clear:
            return None
        self.corrections += 1
        self._restart()
        if self._reference is not None:  # the stamps move by the slope it had
            self._reference = (self._reference[0], 0.0, self._reference[2])
        return self.latest.delay

    def estimate(self) -> StampDelay:
        """The delay on the current stamps from the blocks kept (module docstring)."""
        if not self._blocks:
            return StampDelay(0.0, np.inf, 0, False)
        grams = np.array(self._blocks)
        total = grams.sum(axis=0)
        n = max(total[GRAM_ONES, GRAM_ONES], 1.0)
        variance = (np.diagonal(total[SIGNAL, SIGNAL]) / n - (total[GRAM_ONES, SIGNAL] / n) ** 2)
        fit = self._solve(grams, 1.0 / np.maximum(variance, 1e-12))
        if fit is None:
            return StampDelay(0.0, np.inf, int(n), False)
        solution, kept = fit
        axis_energy = LagFit(1.0, np.ones(6)).axis_residuals(grams[kept].sum(axis=0),
                                                             solution)
        fit = self._solve(grams, 1.0 / np.maximum(axis_energy / solution.samples, 1e-12))
        if fit is None:
            return StampDelay(0.0, np.inf, int(n), False)
        solution = fit[0]
        scale = np.sqrt(np.maximum(axis_energy / solution.samples, 1e-24))
        rows = LagFit(1.0, np.ones(6)).equations.rows
        self._reference = (np.einsum("fra,a->fr", rows, solution.x), solution.slope, scale)
        dof = max(6 * solution.samples - 17, 1)
        spacing = float(np.median(self._spacing)) if self._spacing else 0.0
        inflation = max(1.0, self.correlation_time / (2.0 * spacing)) if spacing > 0 else 1.0
        std = float(np.sqrt(solution.residual / dof / solution.slope_information * inflation))
        delay = -solution.slope
        clear = (solution.samples >= MIN_SAMPLES and MIN_DELAY <= abs(delay) <= MAX_DELAY
                 and std > 0.0 and abs(delay) >= MIN_SNR * std)
        return StampDelay(delay, std, solution.samples, bool(clear))

    @staticmethod
    def _solve(grams: NDArray[np.float64], weights: NDArray[np.float64]
               ) -> tuple[LagSolution, NDArray[np.bool_]] | None:
        """The fit with ``weights`` over the blocks, refitted without the blocks whose
        residual per sample under the last fit is beyond :data:`CONTACT_RATIO` times the
        median's, until none is left out anew (at most :data:`EXCLUSION_ROUNDS` refits: a
        fit distorted by a push hides its edges); and which blocks it kept."""
        lag = LagFit(1.0, weights)
        samples = np.maximum(grams[:, GRAM_ONES, GRAM_ONES], 1.0)
        kept = np.ones(grams.shape[0], dtype=bool)
        fit = lag.solve(grams.sum(axis=0))
        for _ in range(EXCLUSION_ROUNDS):
            if fit is None:
                return None
            per_sample = lag.residuals(grams, fit) / samples
            within = per_sample <= CONTACT_RATIO * np.median(per_sample[kept])
            if np.array_equal(within, kept):
                break
            kept = within
            fit = lag.solve(grams[kept].sum(axis=0))
        return None if fit is None else (fit, kept)
