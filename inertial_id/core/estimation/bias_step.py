"""A lasting anomaly that is not a contact: a step of the F/T bias, or one left open.

A driver's re-zero (a UR e-series at each program start, a tare by another tool) shifts the
reading by a constant: the payload's wrench plus the bias at that moment. To the contact
monitor that is an anomaly that never ends. :func:`bias_step` tells it from a contact: the
anomaly's raw residuals minus their mean are at the noise level (the step persists and does
not follow the motion), while the motion during it would have shown a wrench that does (a
push's force is fixed in the world or moves with the hand, so it changes in the sensor frame
as the wrist turns). When the wrist barely turned, the two cannot be told apart yet, and the
test waits. :class:`OpenAnomaly` records an anomaly that did not end within its bound and how
it was resolved (``bias_step``, ``payload_change`` or ``unexplained``: the monitor relearns
and the data are used again; never gated for ever).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimation.anomaly import T2Monitor
from inertial_id.core.estimation.payload_change import CHANGE_OUTLIERS, PRODUCTS, SAMPLE_COLUMNS
from inertial_id.core.regressor import predicted_wrench

MIN_MOTION_T2 = 50.0
"""Mean ``T^2`` (under the contact monitor's covariance) of the predicted wrench's variation
over an anomaly for the motion to have shown a contact's change: below it, the wrist moved too
little to tell a step from a steady push."""


@dataclass(frozen=True)
class OpenAnomaly:
    """An anomaly that lasted past its bound: from ``start`` to ``resolved_at`` (s, stamps),
    and how it was resolved (``bias_step``, ``payload_change``, ``unexplained``)."""

    start: float
    resolved_at: float
    resolution: str


def bias_step(rows: NDArray[np.float64], pi: NDArray[np.float64],
              offset: NDArray[np.float64], sign: float, monitor: T2Monitor,
              need_motion: bool = True) -> NDArray[np.float64] | None:
    """The step of the bias (6,) (N, N m; sensor frame) that explains an anomaly's held
    ``rows`` (raw wrench after :data:`SAMPLE_COLUMNS`) with the payload ``pi`` and the old
    ``offset``, or None: under :data:`CHANGE_OUTLIERS` of the raw residuals less their mean
    above the monitor's threshold, and (``need_motion``) a motion that would have shown a
    contact (:data:`MIN_MOTION_T2`)."""
    predicted = predicted_wrench(pi, rows[:, :6], rows[:, 6:12], offset, sign,
                                 rows[:, PRODUCTS])
    residual = rows[:, SAMPLE_COLUMNS:] - predicted
    step = residual.mean(axis=0) - (monitor.mean if monitor.mean is not None else 0.0)
    if np.mean(monitor.t2(residual - step) > monitor.threshold) >= CHANGE_OUTLIERS:
        return None
    motion = predicted - predicted.mean(axis=0) + (monitor.mean if monitor.mean is not None
                                                   else 0.0)
    if need_motion and float(np.mean(monitor.t2(motion))) < MIN_MOTION_T2:
        return None
    return step
