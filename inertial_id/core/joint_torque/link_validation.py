"""Cross-validation of a link-model choice: the score and the held-out blocks that
:mod:`inertial_id.core.joint_torque.link_selection` (friction, prior weight) and
:mod:`inertial_id.core.joint_torque.link_gains` (drive gains) both use.

The record (N samples in time order, model joint order) is cut into ``folds`` contiguous
blocks; each block is predicted by a fit on the others, leaving out ``guard`` rows on each side
of the held-out block (filtered signals and coloured residuals reach that far, so neighbouring
rows would leak). The per-joint RMS of measured minus predicted effort is pooled over the
blocks (effort units) and a choice is scored by the **geometric mean over joints** of these
RMS (:func:`score`): unit-free (torques and forces, drive units mix), every joint counts
equally. With other recordings of the same arm (``others``) a fit on the whole record
predicts them instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.links import LinkEstimate, LinkIdentification

FOLDS = 5
"""Time blocks of the identification record (default)."""

Fit = Callable[[LinkIdentification], LinkEstimate]
"""A fit of a problem: what a choice's candidate does on the training rows."""


def training_rows(n: int, held_out: NDArray[np.intp], guard: int) -> NDArray[np.intp]:
    """Rows of ``range(n)`` farther than ``guard`` rows from the contiguous ``held_out``."""
    rows = np.arange(n)
    return rows[(rows < held_out[0] - guard) | (rows > held_out[-1] + guard)]


def score(rms: NDArray[np.float64]) -> float:
    """Geometric mean over joints of per-joint RMS (inf when any is not finite)."""
    rms = np.asarray(rms, dtype=float)
    if not np.all(np.isfinite(rms)):
        return float("inf")
    return float(np.exp(np.mean(np.log(np.maximum(rms, 1e-300)))))


def held_out_blocks(problem: LinkIdentification, folds: int, guard: int
           ) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """(training rows, held-out rows) per contiguous block."""
    n = problem.samples
    if folds < 2 or n < folds * (2 * guard + 2):
        raise InertialIdError(f"{n} samples are too few for {folds} time blocks with a guard "
                              f"of {guard} rows")
    return [(training_rows(n, held, guard), held)
            for held in np.array_split(np.arange(n), folds)]


def cross_validated_rms(problem: LinkIdentification, fit: Fit, folds: int = FOLDS,
                        guard: int = 0, others: Sequence[LinkIdentification] = ()
                        ) -> NDArray[np.float64]:
    """Per-joint RMS (effort units) of ``fit`` predicting each of ``folds`` contiguous blocks
    of ``problem``'s samples from the rest (minus ``guard`` rows each side), pooled; with
    ``others`` (other recordings' problems, same model and friction), of ``fit`` on the whole
    of ``problem`` predicting them, pooled over their samples."""
    if others:
        estimate = fit(problem)
        return _pooled([other.rms(estimate) for other in others], others)
    squares = np.zeros(problem.model.n)
    for train, held in held_out_blocks(problem, folds, guard):
        estimate = fit(problem.subset(train))
        squares += problem.subset(held).rms(estimate) ** 2 * held.size
    return np.sqrt(squares / problem.samples)


def _pooled(rms: Sequence[NDArray[np.float64]], others: Sequence[LinkIdentification]
            ) -> NDArray[np.float64]:
    """Per-joint RMS pooled over recordings (weighted by their samples)."""
    counts = np.array([o.samples for o in others], dtype=float)
    return np.sqrt(np.einsum("k,kj->j", counts, np.asarray(rms) ** 2) / counts.sum())
