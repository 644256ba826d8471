"""The wrench stamps' delay behind the joint states', estimated from the data.

A wrench stamped ``tau`` late reads ``w(t) = w_true(t - tau) ~ w_true(t) - tau dw/dt``. With
``w_true = Y(v, a) pi + o`` (any sign: ``pi`` is free here) the delay is one more unknown of a
linear least-squares fit, ``w = [Y, I] [pi; o] - tau dw/dt``, on matched-filtered samples
(twist, proper acceleration and wrench smoothed alike, so the filter leaves no mismatch of its
own). Each axis is weighted by its residual scale from a first fit without the delay, and
samples whose residual is far beyond it (a contact) are left out before the final fit.

The fitted delay counts only with clear evidence: ``|tau|`` at least :data:`MIN_DELAY`, at
most :data:`MAX_DELAY`, and :data:`MIN_SNR` times its standard error, inflated for the
filter's correlation of neighbouring samples (a smooth kernel of W samples leaves about W / 2
correlated ones: its weights' squared sum is about 2 / W).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.gathering.synchronizer import FixedLagSynchronizer
from inertial_id.core.regressor import regressor

if TYPE_CHECKING:
    from inertial_id.core.gathering.filter_choice import FilterChoice

MIN_DELAY = 2e-4
"""s: a smaller delay is not worth correcting (it costs well under the noise)."""
MAX_DELAY = 0.05
"""s: a larger one is a clock problem to fix at the source (the set-up check names it)."""
MIN_SNR = 4.0
"""The delay must be this many (correlation-inflated) standard errors from zero. Measured on
simulated recordings (500 Hz joints, 1 kHz F/T, 4 s): with no delay the estimates were
0.03-0.07 ms at under half a standard error; 0.7 ms read 0.72-0.78 ms at 2-5, 5 ms read
4.8-5.1 ms at over 10."""
OUTLIER_SCALES = 5.0
"""Samples whose weighted residual exceeds this many scales on any axis are left out."""
MIN_SAMPLES = 200
"""Samples the estimate needs at the least."""
DELAY_ROUNDS = 3
"""Fits of the delay from the held messages at the most, each on the stamps the previous
ones corrected (:func:`held_delay`)."""


@dataclass(frozen=True)
class StampDelay:
    """``delay`` (s, wrench stamps late when positive), its standard error ``std`` (s,
    correlation-inflated), ``samples`` used and whether the evidence suffices (``clear``)."""

    delay: float
    std: float
    samples: int
    clear: bool

    def as_dict(self) -> dict[str, float | int | bool]:
        """The figure and its evidence for reports (s; a std not known, -1)."""
        std = self.std if np.isfinite(self.std) else -1.0
        return {"delay": self.delay, "std": std, "samples": self.samples,
                "corrected": self.clear}

    def summary(self) -> str:
        """One line: the figure and what is done with it."""
        verdict = "corrected" if self.clear else "not corrected (no clear evidence)"
        return (f"wrench stamps {1e3 * self.delay:+.2f} ms (+- {1e3 * self.std:.2f}) behind the "
                f"joint states' from {self.samples} samples: {verdict}")


def _fit(design: NDArray[np.float64], target: NDArray[np.float64]
         ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Least squares: the solution and the residual (rows as given). Solved from the normal
    equations of the columns scaled to unit norm (6N rows of at most 17 columns: a sixth of
    the time of an SVD of the rows); directions under about 3e-7 of the largest singular
    value (1e-13 of the normal matrix's largest eigenvalue, above its rounding) are left out,
    as a pseudo-inverse would."""
    norms = np.linalg.norm(design, axis=0)
    norms = np.where(norms > 0.0, norms, 1.0)
    scaled = design / norms
    x = np.linalg.lstsq(scaled.T @ scaled, scaled.T @ target, rcond=1e-13)[0] / norms
    return x, target - design @ x


def estimate_delay(times: NDArray[np.float64], twist: NDArray[np.float64],
                   proper: NDArray[np.float64], wrench: NDArray[np.float64],
                   correlation_time: float) -> StampDelay:
    """The delay of matched-filtered samples (see the module docstring).

    ``times`` (N,) s increasing; ``twist``, ``proper`` (N, 6) sensor frame; ``wrench`` (N, 6)
    filtered like them; ``correlation_time`` (s): the span over which the filter correlates
    neighbouring samples (its window).
    """
    n = times.size
    if n < MIN_SAMPLES:
        return StampDelay(0.0, np.inf, n, False)
    rate = np.gradient(wrench, times, axis=0)  # (N, 6)
    y = regressor(twist, proper)  # (N, 6, 10)
    base = np.concatenate((y, np.broadcast_to(np.eye(6), (n, 6, 6))), axis=2)  # (N, 6, 16)
    _, residual = _fit(base.reshape(-1, 16), wrench.ravel())
    scale = np.sqrt(np.mean(residual.reshape(n, 6) ** 2, axis=0))
    scale = np.where(scale > 0.0, scale, 1.0)
    keep = np.all(np.abs(residual.reshape(n, 6)) <= OUTLIER_SCALES * scale, axis=1)
    design = np.concatenate((base, -rate[:, :, None]), axis=2)[keep] / scale[None, :, None]
    target = (wrench[keep] / scale).ravel()
    design = design.reshape(-1, 17)
    used = int(np.count_nonzero(keep))
    if used < MIN_SAMPLES:
        return StampDelay(0.0, np.inf, used, False)
    x, residual = _fit(design, target)
    dof = max(design.shape[0] - design.shape[1], 1)
    sigma2 = float(residual @ residual) / dof
    # The delay's variance from its column's part the others do not explain (Frisch-Waugh):
    # near-collinear columns (no motion) leave it small, and the variance large.
    _, alone = _fit(design[:, :16], design[:, 16])
    information = float(alone @ alone)
    if not information > 0.0:
        return StampDelay(0.0, np.inf, used, False)
    spacing = float(np.median(np.diff(times)))
    inflation = max(1.0, correlation_time / (2.0 * spacing)) if spacing > 0 else 1.0
    std = float(np.sqrt(sigma2 / information * inflation))
    delay = float(x[16])
    clear = (MIN_DELAY <= abs(delay) <= MAX_DELAY and std > 0.0
             and abs(delay) >= MIN_SNR * std)
    return StampDelay(delay, std, used, bool(clear))


def held_delay(history: tuple[NDArray[np.float64], ...], choice: FilterChoice,
               synchronizer: FixedLagSynchronizer) -> StampDelay:
    """The wrench stamps' delay from the messages held to choose the filter
    (:meth:`~inertial_id.core.gathering.synchronizer.FixedLagSynchronizer.history`: joint
    stamps, positions, velocities or None, wrench stamps, wrenches), filtered as they will
    be: by ``choice`` with ``synchronizer``'s settings and kinematics. When one fit gives
    clear evidence of a delay, it is refitted on the stamps it corrected (at most
    :data:`DELAY_ROUNDS` fits in all) and each remainder of at least :data:`MIN_DELAY` is
    added, whatever its own significance (the first fit decided that there is a delay; the
    others refine its size). The noise of the wrench's derivative, the delay's regressor,
    attenuates a fit: 5 ms read as 4.1-4.3 ms at 125 Hz joint states under fast motion. The
    std and samples are the first fit's."""
    joint_t, position, velocity, wrench_t, wrench = history

    def fit(stamps: NDArray[np.float64]) -> StampDelay:
        trial = FixedLagSynchronizer(position.shape[1], choice.window, synchronizer.order,
                                     synchronizer.use_measured_velocity,
                                     synchronizer.max_span, lag=choice.lag,
                                     kinematics=synchronizer.kinematics)
        arrival = np.sort(np.concatenate((joint_t, stamps)))
        if not trial.extend(joint_t, position, velocity, stamps, wrench, arrival):
            return StampDelay(0.0, np.inf, 0, False)
        batch = trial.pop_ready()
        if batch.twist is None or batch.proper_acceleration is None:
            return StampDelay(0.0, np.inf, 0, False)
        return estimate_delay(batch.times, batch.twist, batch.proper_acceleration,
                              batch.wrench, choice.window_time)

    first = fit(wrench_t)
    if not first.clear:
        return first
    total = first.delay
    for _ in range(DELAY_ROUNDS - 1):
        step = fit(wrench_t - total)
        if not (np.isfinite(step.std) and MIN_DELAY <= abs(step.delay) <= MAX_DELAY):
            break
        total += step.delay
    return StampDelay(total, first.std, first.samples, True)
