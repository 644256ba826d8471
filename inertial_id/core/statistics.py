"""Sufficient statistics of a weighted linear least-squares problem.

For rows ``A x ~ b`` with weights ``W`` (diagonal), the cost ``||A x - b||^2_W`` is fully
described by the information matrix ``A^T W A``, the moment ``A^T W b``, the energy
``b^T W b`` and the number of rows. Solvers only ever see these, so ten samples or a
million cost the same to solve; merging two data sets is an addition, exponential forgetting
is a scaling.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError


@dataclass
class SufficientStatistics:
    """``A^T W A``, ``A^T W b``, ``b^T W b`` and counts for ``n_unknowns`` unknowns.

    ``samples`` counts wrench samples (6 rows each for a payload), ``rows`` counts equations;
    under forgetting both are effective (scaled) counts.
    """

    n_unknowns: int
    information: NDArray[np.float64] = field(init=False)
    moment: NDArray[np.float64] = field(init=False)
    energy: float = field(init=False, default=0.0)
    rows: float = field(init=False, default=0.0)
    samples: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.information = np.zeros((self.n_unknowns, self.n_unknowns))
        self.moment = np.zeros(self.n_unknowns)

    def add(self, a: ArrayLike, b: ArrayLike, weights: ArrayLike, samples: int) -> None:
        """Accumulate rows ``a`` (r, n) with targets ``b`` (r,) and row weights (r,)."""
        a = np.asarray(a, dtype=float)
        b = np.asarray(b, dtype=float)
        w = np.asarray(weights, dtype=float)
        if a.shape != (b.size, self.n_unknowns) or w.shape != b.shape:
            raise SampleError(f"rows {a.shape}, targets {b.shape}, weights {w.shape} mismatch")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise SampleError("regressor rows or measurements contain NaN or inf")
        aw = a.T * w
        self.information += aw @ a
        self.moment += aw @ b
        self.energy += float(b @ (w * b))
        self.rows += b.size
        self.samples += samples

    def merge(self, other: SufficientStatistics) -> None:
        """Add another data set's statistics to these."""
        if other.n_unknowns != self.n_unknowns:
            raise SampleError("cannot merge statistics of different sizes")
        self.information += other.information
        self.moment += other.moment
        self.energy += other.energy
        self.rows += other.rows
        self.samples += other.samples

    def scale(self, factor: float) -> None:
        """Multiply everything by ``factor`` (exponential forgetting when 0 < factor < 1)."""
        self.information *= factor
        self.moment *= factor
        self.energy *= factor
        self.rows *= factor
        self.samples *= factor

    def eliminate_offset(self, n_kept: int) -> None:
        """Marginalise the unknowns after the first ``n_kept`` (Schur complement).

        The kept unknowns keep exactly the information the data give on them with the others
        free; the others' blocks become zero (undetermined until new rows arrive).
        """
        h, g = self.information, self.moment
        h_oo = h[n_kept:, n_kept:]
        if np.any(np.diag(h_oo) > 0):
            solve = np.linalg.pinv(h_oo, hermitian=True)
            h_po = h[:n_kept, n_kept:]
            self.energy -= float(g[n_kept:] @ solve @ g[n_kept:])
            self.moment = np.concatenate((g[:n_kept] - h_po @ solve @ g[n_kept:],
                                          np.zeros(self.n_unknowns - n_kept)))
            reduced = h[:n_kept, :n_kept] - h_po @ solve @ h_po.T
            self.information = np.zeros_like(h)
            self.information[:n_kept, :n_kept] = reduced

    def copy(self) -> SufficientStatistics:
        """An independent copy."""
        out = SufficientStatistics(self.n_unknowns)
        out.merge(self)
        return out

    def residual(self, x: ArrayLike) -> float:
        """Weighted residual ``||A x - b||^2_W`` from the statistics alone."""
        x = np.asarray(x, dtype=float)
        value = x @ self.information @ x - 2.0 * x @ self.moment + self.energy
        return max(float(value), 0.0)


class SlidingWindow:
    """Statistics of the most recent samples, kept as a sliding window of blocks.

    Samples accumulate in a current block of ``block_samples``; full blocks enter a queue of
    at most ``max_blocks`` and the oldest leaves it. :attr:`statistics` covers the queued
    blocks plus the current one: a fixed horizon of ``block_samples * max_blocks`` samples
    (plus at most one block), whatever the rate, without keeping raw samples.
    """

    def __init__(self, n_unknowns: int, block_samples: int, max_blocks: int) -> None:
        if block_samples < 1 or max_blocks < 1:
            raise SampleError("block_samples and max_blocks must be positive")
        self.n_unknowns = n_unknowns
        self.block_samples = block_samples
        self.max_blocks = max_blocks
        self._blocks: deque[SufficientStatistics] = deque()
        self._current = SufficientStatistics(n_unknowns)

    def add(self, a: ArrayLike, b: ArrayLike, weights: ArrayLike, samples: int) -> None:
        """Same as :meth:`SufficientStatistics.add`; rolls the window when a block fills."""
        self._current.add(a, b, weights, samples)
        if self._current.samples >= self.block_samples:
            self._blocks.append(self._current)
            self._current = SufficientStatistics(self.n_unknowns)
            if len(self._blocks) > self.max_blocks:
                self._blocks.popleft()

    def eliminate_offset(self, n_kept: int) -> None:
        """:meth:`SufficientStatistics.eliminate_offset` on every block."""
        for block in (*self._blocks, self._current):
            block.eliminate_offset(n_kept)

    @property
    def statistics(self) -> SufficientStatistics:
        """The window's statistics (a new object: the sum of its blocks)."""
        total = self._current.copy()
        for block in self._blocks:
            total.merge(block)
        return total
