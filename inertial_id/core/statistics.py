"""Sufficient statistics of a weighted linear least-squares problem.

For rows ``A x ~ b`` with weights ``W`` (diagonal), the cost ``||A x - b||^2_W`` is fully
described by the information matrix ``A^T W A``, the moment ``A^T W b``, the energy
``b^T W b`` and the number of rows. Solvers only ever see these, so ten samples or a
million cost the same to solve; merging two data sets is an addition, exponential forgetting
is a scaling.

With ``score_block > 0`` the statistics also keep the per-block sums of
:class:`~inertial_id.core.covariance.RecursiveBlockScores` over consecutive blocks of
``score_block`` samples, from which the estimators compute a block-robust (sandwich)
covariance; :attr:`SufficientStatistics.scores` returns them with the current, partial block.

Errors in variables: when the rows ``A`` carry zero-mean noise ``dA`` (the regressor's
acceleration columns inherit the encoders' noise through the filter's second derivative),
``E[A^T W A]`` exceeds the noise-free information by ``E[dA^T W dA]``, and least squares
shrinks the estimate by that much (the mass of a slowly moved payload by 0.15 %, 3-7 std, in
the calibration benchmark). The statistics keep that expectation (``noise_information``) and
:meth:`SufficientStatistics.corrected` subtracts it: corrected least squares, still a
quadratic cost. The block scores use the corrected blocks, so the sandwich's scores sum to
zero at the corrected estimate (except along a direction where the correction is capped).
The rows' noise is part of the equation error all the same: the corrected statistics'
:meth:`~SufficientStatistics.residual` is still the data's ``||A x - b||^2_W`` (the classical
``sigma^2`` from ``||A x - b||^2_W - x^T E[dA^T W dA] x`` reached zero on a simulated run whose
encoders' noise outweighed the smoothed wrench noise: after 6 s every reported std was 0).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.covariance import (
    BlockList,
    BlockScores,
    CombinedScores,
    RecursiveBlockScores,
)
from inertial_id.core.errors import SampleError
from inertial_id.core.linalg import generalized_eigh, inverse_trace_product

MAX_NOISE_SHARE = 0.8
"""Largest share of the information in any direction that the rows' noise may remove
(:meth:`SufficientStatistics.corrected`)."""


@dataclass
class SufficientStatistics:
    """``A^T W A``, ``A^T W b``, ``b^T W b`` and counts for ``n_unknowns`` unknowns.

    ``samples`` counts wrench samples (6 rows each for a payload), ``rows`` counts equations;
    under forgetting both are effective (scaled) counts. ``score_block``: samples per block of
    the block scores (0: none kept; see the module docstring). ``noise_information`` is
    ``E[dA^T W dA]`` of the rows' own noise (zero unless given; see the module docstring);
    ``removed_noise`` is the part of it that :meth:`corrected` took out of ``information``
    (zero in uncorrected statistics), which :meth:`residual` adds back.
    """

    n_unknowns: int
    score_block: int = 0
    information: NDArray[np.float64] = field(init=False)
    moment: NDArray[np.float64] = field(init=False)
    noise_information: NDArray[np.float64] = field(init=False)
    removed_noise: NDArray[np.float64] = field(init=False)
    energy: float = field(init=False, default=0.0)
    rows: float = field(init=False, default=0.0)
    samples: float = field(init=False, default=0.0)
    _block: SufficientStatistics | None = field(init=False, default=None, repr=False)
    _scores: RecursiveBlockScores | None = field(init=False, default=None, repr=False)
    _given_scores: BlockScores | None = field(init=False, default=None, repr=False)
    _block_count: int = field(init=False, default=0, repr=False)  # unscaled samples in it

    def __post_init__(self) -> None:
        self.information = np.zeros((self.n_unknowns, self.n_unknowns))
        self.noise_information = np.zeros((self.n_unknowns, self.n_unknowns))
        self.removed_noise = np.zeros((self.n_unknowns, self.n_unknowns))
        self.moment = np.zeros(self.n_unknowns)
        if self.score_block > 0:
            self._block = SufficientStatistics(self.n_unknowns)
            self._scores = RecursiveBlockScores(self.n_unknowns)

    def add(self, a: ArrayLike, b: ArrayLike, weights: ArrayLike, samples: int,
            noise_information: NDArray[np.float64] | None = None) -> None:
        """Accumulate rows ``a`` (r, n) with targets ``b`` (r,) and row weights (r,), and
        ``E[dA^T W dA]`` (n, n) of the rows' noise when they have some."""
        a = np.asarray(a, dtype=float)
        b = np.asarray(b, dtype=float)
        w = np.asarray(weights, dtype=float)
        if a.shape != (b.size, self.n_unknowns) or w.shape != b.shape:
            raise SampleError(f"rows {a.shape}, targets {b.shape}, weights {w.shape} mismatch")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise SampleError("regressor rows or measurements contain NaN or inf")
        aw = a.T * w
        self.add_normal_equations(aw @ a, aw @ b, float(b @ (w * b)), b.size, samples,
                                  noise_information)

    def add_normal_equations(self, information: ArrayLike, moment: ArrayLike, energy: float,
                             rows: float, samples: float,
                             noise_information: NDArray[np.float64] | None = None) -> None:
        """Accumulate a batch given by its normal equations: ``A^T W A`` (n, n), ``A^T W b``
        (n,) and ``b^T W b`` of its ``rows`` equations from ``samples`` samples (e.g.
        :class:`~inertial_id.core.regressor.BatchNormalEquations`), and ``E[dA^T W dA]``
        (n, n) of the rows' noise when they have some. The batch enters the current score
        block whole, as in :meth:`add` (which forms these and comes here). Units are the
        rows' (for a payload: the unknowns ``[pi; offset]``, wrench in N and N m).
        :class:`~inertial_id.core.errors.SampleError` when a size is wrong or a value is not
        finite (nothing is accumulated then)."""
        information = np.asarray(information, dtype=float)
        moment = np.asarray(moment, dtype=float)
        n = self.n_unknowns
        if information.shape != (n, n) or moment.shape != (n,):
            raise SampleError(f"information {information.shape} and moment {moment.shape} "
                              f"must be ({n}, {n}) and ({n},)")
        if not (np.isfinite(information).all() and np.isfinite(moment).all()
                and np.isfinite(energy)):
            raise SampleError("regressor rows or measurements contain NaN or inf")
        energy = float(energy)
        self._accumulate(information, moment, energy, rows, samples, noise_information)
        if self._block is not None:
            self._block._accumulate(information, moment, energy, rows, samples,
                                    noise_information)
            self._block_count += samples
            if self._block_count >= self.score_block:
                self._close_block()

    @property
    def block_room(self) -> float:
        """Samples the open score block takes before it closes (inf without score blocks):
        a caller that groups batches takes them before they reach it, so that each block
        holds the batches it would hold one at a time."""
        return np.inf if self._block is None else self.score_block - self._block_count

    @property
    def _zero_noise(self) -> NDArray[np.float64]:
        return np.zeros((self.n_unknowns, self.n_unknowns))

    def _accumulate(self, information: NDArray[np.float64], moment: NDArray[np.float64],
                    energy: float, rows: float, samples: float,
                    noise_information: NDArray[np.float64] | None) -> None:
        """Add these sums (``noise_information`` None: zero)."""
        self.information += information
        if noise_information is not None:
            self.noise_information += noise_information
        self.moment += moment
        self.energy += energy
        self.rows += rows
        self.samples += samples

    def _close_block(self) -> None:
        """The current block is complete: into the block scores, and start a new one."""
        if self._block is not None and self._scores is not None and self._block.samples > 0:
            self._scores.add_block(self._block.noise_free_information, self._block.moment)
            self._block = SufficientStatistics(self.n_unknowns)
            self._block_count = 0

    @property
    def noise_free_information(self) -> NDArray[np.float64]:
        """``A^T W A - E[dA^T W dA]``: the information's expectation without the rows' noise
        (may be indefinite for a few samples; :meth:`corrected` keeps the totals definite)."""
        return self.information - self.noise_information

    @property
    def scores(self) -> BlockScores | None:
        """Block scores of these data (completed blocks and the current one), or ``None``
        without ``score_block`` (or those set by :meth:`set_scores`)."""
        if self._given_scores is not None:
            return self._given_scores
        if self._scores is None or self._block is None:
            return None
        if self._block.samples <= 0:
            return self._scores
        partial = BlockList(self._block.noise_free_information[None],
                            self._block.moment[None])
        return CombinedScores([self._scores, partial])

    def set_scores(self, scores: BlockScores) -> None:
        """Use these block scores (kept elsewhere, e.g. by a sliding window) for these data."""
        self._given_scores = scores

    def merge(self, other: SufficientStatistics) -> None:
        """Add another data set's statistics to these (its partial block counts as a block)."""
        if other.n_unknowns != self.n_unknowns:
            raise SampleError("cannot merge statistics of different sizes")
        self._accumulate(other.information, other.moment, other.energy, other.rows,
                         other.samples, other.noise_information)
        self.removed_noise += other.removed_noise
        if self._scores is not None and other._scores is not None:
            self._scores.merge(other._scores)
            if other._block is not None and other._block.samples > 0:
                self._scores.add_block(other._block.noise_free_information,
                                       other._block.moment)

    def scale(self, factor: float) -> None:
        """Multiply everything by ``factor`` (exponential forgetting when 0 < factor < 1);
        the block scores' second moments scale by ``factor^2``."""
        self.information *= factor
        self.noise_information *= factor
        self.removed_noise *= factor
        self.moment *= factor
        self.energy *= factor
        self.rows *= factor
        self.samples *= factor
        if self._block is not None and self._scores is not None:
            self._block.scale(factor)
            self._scores.scale(factor)

    def eliminate_offset(self, n_kept: int) -> None:
        """Marginalise the unknowns after the first ``n_kept`` (Schur complement).

        The kept unknowns keep exactly the information the data give on them with the others
        free; the others' blocks become zero (undetermined until new rows arrive). Block
        scores are mapped alike: each block becomes ``c' = P (c - H v)``, ``H' = P H P^T``
        with ``P = [I, -H_po H_oo^+; 0, 0]`` and ``v = [0; H_oo^+ c_o]``, which sum to the
        reduced statistics and give the scores of the kept unknowns with the others profiled.
        The rows' noise must lie in the kept unknowns' columns (the F/T offset's are exact):
        ``noise_information`` and ``removed_noise`` then stay as they are.
        """
        h, g = self.information, self.moment
        h_oo = h[n_kept:, n_kept:]
        if np.any(np.diag(h_oo) > 0):
            solve = np.linalg.pinv(h_oo, hermitian=True)
            h_po = h[:n_kept, n_kept:]
            self._transform_blocks(n_kept, -h_po @ solve, solve @ g[n_kept:])
            self.energy -= float(g[n_kept:] @ solve @ g[n_kept:])
            self.moment = np.concatenate((g[:n_kept] - h_po @ solve @ g[n_kept:],
                                          np.zeros(self.n_unknowns - n_kept)))
            reduced = h[:n_kept, :n_kept] - h_po @ solve @ h_po.T
            self.information = np.zeros_like(h)
            self.information[:n_kept, :n_kept] = reduced

    def _transform_blocks(self, n_kept: int, coupling: NDArray[np.float64],
                          profiled: NDArray[np.float64]) -> None:
        """Apply the elimination map of :meth:`eliminate_offset` to the block scores."""
        if self._scores is None or self._block is None:
            return
        p = np.zeros((self.n_unknowns, self.n_unknowns))
        p[:n_kept, :n_kept] = np.eye(n_kept)
        p[:n_kept, n_kept:] = coupling
        v = np.concatenate((np.zeros(n_kept), profiled))
        self._scores.transform(p, v)
        block = self._block
        block.moment = p @ (block.moment - block.information @ v)
        block.information = p @ block.information @ p.T

    def copy(self) -> SufficientStatistics:
        """An independent copy (block scores and the current block included)."""
        out = SufficientStatistics(self.n_unknowns, self.score_block)
        out._accumulate(self.information, self.moment, self.energy, self.rows, self.samples,
                        self.noise_information)
        out.removed_noise += self.removed_noise
        if self._scores is not None and self._block is not None:
            out._scores = self._scores.copy()
            out._block = self._block.copy()
            out._block_count = self._block_count
        return out

    def corrected(self) -> SufficientStatistics:
        """These statistics with the rows' noise removed (corrected least squares), for the
        solvers: ``A^T W A - E[dA^T W dA]`` with the block scores (already corrected).

        In the generalised eigen-directions of the noise against the information
        (``N v = s H v``, ``s`` the noise's share of the information along ``v``) each share
        is kept within ``[0, MAX_NOISE_SHARE]``: a motion that barely excites a direction
        keeps a fifth of its information there, the cost stays convex, and the others are
        corrected in full. Without noise: ``self``.
        """
        noise = self.noise_information
        if not noise.any():
            return self
        h = self.information
        jitter = 1e-12 * max(float(np.max(np.diag(h))), 1e-300)
        regular = h + jitter * np.eye(self.n_unknowns)
        # N is a sum of positive semidefinite terms, so the shares are >= 0 but for rounding
        # and their sum bounds the largest: when it is within the cap, no share is capped
        # (nor any but rounding-small negative one) and N is removed whole, without the
        # eigenproblem (four times the cost, at every solve).
        total = inverse_trace_product(noise, regular)
        if total is None or total > MAX_NOISE_SHARE:
            shares, vectors = generalized_eigh(noise, regular)
            capped = np.clip(shares, 0.0, MAX_NOISE_SHARE)
            if not np.array_equal(capped, shares):  # N = H V diag(s) V^T H, V^T H V = I
                hv = h @ vectors
                noise = (hv * capped) @ hv.T
        out = SufficientStatistics(self.n_unknowns)
        out._accumulate(h - noise, self.moment, self.energy, self.rows,
                        self.samples, self._zero_noise)
        out.removed_noise = self.removed_noise + noise
        scores = self.scores
        if scores is not None:
            out.set_scores(scores)
        return out

    @property
    def data_information(self) -> NDArray[np.float64]:
        """``A^T W A`` of the data: ``information`` with what :meth:`corrected` removed
        added back (``information`` itself for uncorrected statistics)."""
        return self.information + self.removed_noise

    def residual(self, x: ArrayLike) -> float:
        """Weighted residual ``||A x - b||^2_W`` of the data from the statistics alone (of
        corrected statistics too: the rows' noise is part of the equation error)."""
        x = np.asarray(x, dtype=float)
        value = x @ self.data_information @ x - 2.0 * x @ self.moment + self.energy
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

    def add(self, a: ArrayLike, b: ArrayLike, weights: ArrayLike, samples: int,
            noise_information: NDArray[np.float64] | None = None) -> None:
        """Same as :meth:`SufficientStatistics.add`; rolls the window when a block fills."""
        self._current.add(a, b, weights, samples, noise_information)
        self._roll()

    def add_normal_equations(self, information: ArrayLike, moment: ArrayLike, energy: float,
                             rows: float, samples: float,
                             noise_information: NDArray[np.float64] | None = None) -> None:
        """Same as :meth:`SufficientStatistics.add_normal_equations`; rolls the window when a
        block fills."""
        self._current.add_normal_equations(information, moment, energy, rows, samples,
                                           noise_information)
        self._roll()

    def _roll(self) -> None:
        """A full current block joins the queue (the oldest leaves a full one)."""
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
        """The window's statistics (a new object: the sum of its blocks), with its blocks as
        block scores."""
        total = self._current.copy()
        for block in self._blocks:
            total.merge(block)
        total.set_scores(self.scores)
        return total

    @property
    def scores(self) -> BlockList:
        """The window's blocks (the current one too if it holds samples) as block scores."""
        blocks = [*self._blocks, self._current] if self._current.samples > 0 else [*self._blocks]
        n = self.n_unknowns
        if not blocks:
            return BlockList(np.zeros((0, n, n)), np.zeros((0, n)))
        return BlockList(np.stack([b.noise_free_information for b in blocks]),
                         np.stack([b.moment for b in blocks]))
