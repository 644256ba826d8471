"""The online estimator's held samples and the test of a sustained anomaly as a new payload.

A held sample is one row of :data:`SAMPLE_COLUMNS` (sensor frame, SI units): twist, proper
acceleration and filtered wrench (6 each), the acceleration's noise covariance (36, row-major)
and the smoothed angular-velocity products (6); the raw wrench may follow. When an anomaly
lasts, :class:`NewPayloadTest` asks whether one rigid body, with the F/T offset kept, explains
its samples (a grasp or a release) or not (a long contact).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.anomaly import T2Monitor
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.regressor import predicted_wrench

SAMPLE_COLUMNS = 60
"""Columns of a held sample: twist, proper acceleration, wrench (6 each), the acceleration's
noise covariance (36, row-major), the angular-velocity products (6)."""
NOISE, PRODUCTS = slice(18, 54), slice(54, 60)
"""A held sample's columns of the acceleration's noise and of the angular-velocity products."""
CHANGE_OUTLIERS = 0.05
"""Share of an anomaly's samples a candidate new payload may leave unexplained."""


def add_rows(identifier: PayloadIdentifier, rows: NDArray[np.float64]) -> None:
    """Held samples (see :data:`SAMPLE_COLUMNS`; later columns ignored) into ``identifier``."""
    identifier.add(rows[:, :6], rows[:, 6:12], rows[:, 12:18],
                   rows[:, NOISE].reshape(-1, 6, 6), rows[:, PRODUCTS])


class NewPayloadTest:
    """Fits a candidate payload (LMI SDP, the offset known) to an anomaly's samples."""

    def __init__(self) -> None:
        self._candidate: PayloadIdentifier | None = None

    def explains(self, rows: NDArray[np.float64], offset: NDArray[np.float64], sign: float,
                 monitor: T2Monitor, payload: PayloadConfig) -> bool:
        """Whether one payload with the F/T ``offset`` (6,) explains the held ``rows`` (raw
        wrench after :data:`SAMPLE_COLUMNS`): under :data:`CHANGE_OUTLIERS` of their raw
        residuals above ``monitor``'s ``T^2`` threshold. ``payload``: the estimator's settings
        (used the first time)."""
        candidate = self._identifier(offset, payload)
        candidate.reset()
        add_rows(candidate, rows)
        try:
            body = candidate.estimate()
        except InertialIdError:
            return False
        predicted = predicted_wrench(body.pi, rows[:, :6], rows[:, 6:12], offset, sign,
                                     rows[:, PRODUCTS])
        raw = rows[:, SAMPLE_COLUMNS:]
        return bool(np.mean(monitor.t2(raw - predicted) > monitor.threshold) < CHANGE_OUTLIERS)

    def _identifier(self, offset: NDArray[np.float64], payload: PayloadConfig
                    ) -> PayloadIdentifier:
        if self._candidate is None:
            self._candidate = PayloadIdentifier(replace(
                payload, method="lmi_sdp", window_samples=0, forgetting_factor=1.0,
                bias_drift=False, known_offset=tuple(float(x) for x in offset)))
        else:
            self._candidate.set_known_offset(offset)
        return self._candidate
