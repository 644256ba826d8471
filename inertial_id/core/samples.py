"""The samples every stage passes on, as plain values below all their users (ROS-free, no
pinocchio, no compiled filters): the messages the pipeline takes (a joint state, a wrench, a
block of both as arrays for offline reading), the plausibility bound on every value
(:data:`MAX_ABS_VALUE`, :func:`plausible`), the functions a synchronizer is given
(:data:`SensorFunction`, :data:`JacobianFunction`) and a batch of synchronised samples
(:class:`SyncedSamples`). Bags, CDR, the gatherer, the kinematics and estimation stages and
the simulation share them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray


class JointStateSample(NamedTuple):
    """A ``sensor_msgs/JointState``: header stamp (s), names, positions, velocities, efforts
    (rad, m, rad/s, m/s, N m, N; in the message's order; any of the arrays may be empty)."""

    stamp: float
    names: Sequence[str]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    effort: NDArray[np.float64] = np.zeros(0)


class WrenchSample(NamedTuple):
    """A ``geometry_msgs/WrenchStamped``: stamp (s), frame, ``[fx, fy, fz, tx, ty, tz]``."""

    stamp: float
    frame_id: str
    wrench: NDArray[np.float64]


class MessageBlock(NamedTuple):
    """Joint states and wrenches as arrays, in arrival order (offline reading decodes a
    block at once, with no object per message): ``is_wrench`` (M,) and header ``stamps``
    (M,) s per message; the joint states' one name list ``names`` and their (J, k)
    ``position``, ``velocity`` and ``effort`` (message order, rad, m, rad/s, m/s, N m, N; a
    field the messages leave empty is (J, 0)); the wrenches' one ``frame_id`` and their
    (W, 6) ``wrench`` ``[fx, fy, fz, tx, ty, tz]`` (N, N m)."""

    is_wrench: NDArray[np.bool_]
    stamps: NDArray[np.float64]
    names: tuple[str, ...]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    effort: NDArray[np.float64]
    frame_id: str
    wrench: NDArray[np.float64]

    def part(self, start: int, stop: int) -> MessageBlock:
        """Messages ``start`` .. ``stop - 1`` (arrival order)."""
        w0 = int(np.count_nonzero(self.is_wrench[:start]))
        w1 = w0 + int(np.count_nonzero(self.is_wrench[start:stop]))
        j0, j1 = start - w0, stop - w1
        return MessageBlock(self.is_wrench[start:stop], self.stamps[start:stop], self.names,
                            self.position[j0:j1], self.velocity[j0:j1], self.effort[j0:j1],
                            self.frame_id, self.wrench[w0:w1])

    def messages(self) -> list[JointStateSample | WrenchSample]:
        """The same messages, one object each (the per-message path)."""
        joints = zip(self.position, self.velocity, self.effort, strict=True)
        wrenches = iter(self.wrench)
        return [WrenchSample(stamp, self.frame_id, next(wrenches)) if wrench
                else JointStateSample(stamp, self.names, *next(joints))
                for wrench, stamp in zip(self.is_wrench.tolist(), self.stamps.tolist(),
                                         strict=True)]


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
