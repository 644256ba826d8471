"""What the synchronizer takes and gives: the kinematics and Jacobian functions it is given
(:data:`SensorFunction`, :data:`JacobianFunction`), the plausibility bound on every value
(:data:`MAX_ABS_VALUE`, :func:`plausible`) and a batch of synchronised samples
(:class:`SyncedSamples`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

SensorFunction = Callable[[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
                          tuple[NDArray[np.float64], NDArray[np.float64]]]
"""(N, n) joint positions, velocities, accelerations -> (N, 6) twist, proper acceleration."""

JacobianFunction = Callable[[NDArray[np.float64]], NDArray[np.float64]]
"""(N, n) joint positions -> (N, 6, n) sensor-frame Jacobians, rows ``[linear; angular]``."""

MAX_ABS_VALUE = 1e6
"""Larger joint positions (rad, m), wrench components (N, N m), velocities or accelerations
(m/s, rad/s, m/s^2, rad/s^2) are no measurements; their squares would also overflow the
statistics downstream."""


def plausible(values: NDArray[np.float64]) -> bool:
    """All entries finite and within ``MAX_ABS_VALUE`` (NaN compares false); cheap per sample."""
    return bool(values.size == 0 or np.abs(values).max() <= MAX_ABS_VALUE)


@dataclass(frozen=True)
class SyncedSamples:
    """A batch of N synchronised samples; joints in the model's order.

    ``times`` (N,) s; ``position``, ``velocity``, ``acceleration`` (N, n) in rad, rad/s,
    rad/s^2 (or m for prismatic joints); ``wrench`` (N, 6) ``[fx, fy, fz, tx, ty, tz]`` as the
    sensor reports it, filtered like the joints; ``wrench_raw`` (N, 6) unfiltered (its noise
    stays white, which the contact monitor's statistics assume). With matched filtering
    (see :mod:`inertial_id.core.gathering.synchronizer`) ``twist`` and ``proper_acceleration`` (N,
    6) are the sensor frame's, smoothed by the wrench's kernel; otherwise None (compute them
    from the joints). ``acceleration_noise`` (N, 6, 6): with matched filtering and the
    Jacobians, the covariance of the noise the joints' position noise leaves in
    ``proper_acceleration``'s ``[a_lin + w x v_lin; alpha]`` ((m/s^2)^2, (m/s^2)(rad/s^2),
    (rad/s^2)^2); otherwise None. ``angular_products`` (N, 6): with matched filtering, the
    smoothed products of the sensor's angular velocity ``w_i w_j`` ((rad/s)^2, in the order
    of :data:`~inertial_id.core.regressor.PRODUCT_PAIRS`), which the regressor takes in place
    of the smoothed ``w``'s own (:mod:`inertial_id.core.gathering.features`); otherwise None.
    """

    times: NDArray[np.float64]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    wrench: NDArray[np.float64]
    wrench_raw: NDArray[np.float64]
    twist: NDArray[np.float64] | None = None
    proper_acceleration: NDArray[np.float64] | None = None
    acceleration_noise: NDArray[np.float64] | None = None
    angular_products: NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return int(self.times.size)

    @property
    def matched(self) -> bool:
        """Whether the batch carries matched-filtered sensor-frame kinematics."""
        return self.twist is not None and self.proper_acceleration is not None

    def select(self, mask: NDArray[np.bool_]) -> SyncedSamples:
        """The samples where ``mask`` (N,) is true."""
        values = (getattr(self, f.name) for f in fields(self))
        return SyncedSamples(*(None if x is None else x[mask] for x in values))

    @classmethod
    def empty(cls, n_joints: int) -> SyncedSamples:
        """A batch with no samples."""
        z = np.empty((0, n_joints))
        return cls(np.empty(0), z, z.copy(), z.copy(), np.empty((0, 6)), np.empty((0, 6)))
