"""Joint paths given by points (time, position, velocity, acceleration), as a trajectory
controller receives them (``trajectory_msgs/JointTrajectory``), and the motions built of them.

Between two points each joint follows the quintic polynomial that matches both points'
position, velocity and acceleration (what ros2_control's joint_trajectory_controller does when
all three are given). Times in s from the path's start, positions in rad (or m).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError

Motion = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]
"""Positions, velocities and accelerations at N times: three (N, n) arrays."""

MIN_JERK_PEAK_VELOCITY = 1.875
"""Peak speed of a rest-to-rest quintic over distance d and time T is 1.875 d / T."""
MIN_JERK_PEAK_ACCELERATION = 5.7735
"""Peak acceleration of a rest-to-rest quintic is 10 / sqrt(3) d / T^2."""


@dataclass(frozen=True)
class JointPath:
    """Points of a joint path: ``times`` (K,) increasing from 0, s; ``positions``,
    ``velocities``, ``accelerations`` (K, n). Before the first point the path holds the first
    position, after the last one the last position (at rest)."""

    times: NDArray[np.float64]
    positions: NDArray[np.float64]
    velocities: NDArray[np.float64]
    accelerations: NDArray[np.float64]

    def __post_init__(self) -> None:
        k = self.times.shape[0]
        if k < 1 or any(a.shape != self.positions.shape or a.shape[0] != k
                        for a in (self.velocities, self.accelerations)):
            raise InertialIdError("a joint path needs points with a position, velocity and "
                                  "acceleration for every joint")
        if np.any(np.diff(self.times) <= 0) or not np.all(np.isfinite(self.positions)):
            raise InertialIdError("a joint path's times must increase and its values be finite")

    @classmethod
    def sampled(cls, motion: object, duration: float, rate: float) -> JointPath:
        """Points of ``motion(t) -> (q, qd, qdd)`` every ``1 / rate`` s over ``duration``
        (the last point at ``duration``)."""
        steps = max(1, int(np.ceil(duration * rate - 1e-9)))
        times = np.linspace(0.0, duration, steps + 1)
        q, qd, qdd = motion(times)
        return cls(times, q, qd, qdd)

    @property
    def duration(self) -> float:
        """s from the first point to the last."""
        return float(self.times[-1])

    @property
    def joints(self) -> int:
        """Number of joints."""
        return int(self.positions.shape[1])

    def __call__(self, t: ArrayLike) -> Motion:
        """Positions, velocities, accelerations at times ``t`` (N,)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if self.times.size == 1:
            q = np.repeat(self.positions, t.size, axis=0)
            return q, np.zeros_like(q), np.zeros_like(q)
        k = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, self.times.size - 2)
        h = (self.times[k + 1] - self.times[k])[:, None]
        s = np.clip((t[:, None] - self.times[k, None]) / h, 0.0, 1.0)
        p0, p1 = self.positions[k], self.positions[k + 1]
        v0, v1 = self.velocities[k] * h, self.velocities[k + 1] * h
        a0, a1 = self.accelerations[k] * h * h, self.accelerations[k + 1] * h * h
        d = p1 - p0
        c3 = 10 * d - 6 * v0 - 4 * v1 - 1.5 * a0 + 0.5 * a1
        c4 = -15 * d + 8 * v0 + 7 * v1 + 1.5 * a0 - a1
        c5 = 6 * d - 3 * v0 - 3 * v1 - 0.5 * a0 + 0.5 * a1
        q = p0 + s * (v0 + s * (0.5 * a0 + s * (c3 + s * (c4 + s * c5))))
        qd = (v0 + s * (a0 + s * (3 * c3 + s * (4 * c4 + s * 5 * c5)))) / h
        qdd = (a0 + s * (6 * c3 + s * (12 * c4 + s * 20 * c5))) / (h * h)
        outside = ((t < self.times[0]) | (t > self.times[-1]))[:, None]
        return q, np.where(outside, 0.0, qd), np.where(outside, 0.0, qdd)


def move_duration(distance: ArrayLike, velocity: ArrayLike, acceleration: ArrayLike,
                  shortest: float = 0.5) -> float:
    """s a rest-to-rest quintic needs so that no joint exceeds ``velocity`` (rad/s) or
    ``acceleration`` (rad/s^2) over ``distance`` (rad), at least ``shortest``."""
    d = np.abs(np.asarray(distance, dtype=float))
    by_velocity = MIN_JERK_PEAK_VELOCITY * d / np.asarray(velocity, dtype=float)
    by_acceleration = np.sqrt(MIN_JERK_PEAK_ACCELERATION * d / np.asarray(acceleration, float))
    return float(max(shortest, np.max(by_velocity, initial=0.0),
                     np.max(by_acceleration, initial=0.0)))


def move(start: Motion | ArrayLike, goal: ArrayLike, duration: float) -> JointPath:
    """Two points: from ``start`` (a position, or a position, velocity, acceleration) to
    ``goal`` at rest after ``duration`` s (one quintic)."""
    if isinstance(start, tuple):
        q0, qd0, qdd0 = (np.asarray(a, dtype=float).reshape(1, -1) for a in start)
    else:
        q0 = np.asarray(start, dtype=float).reshape(1, -1)
        qd0 = qdd0 = np.zeros_like(q0)
    goal = np.asarray(goal, dtype=float).reshape(1, -1)
    rest = np.zeros_like(goal)
    return JointPath(np.array([0.0, float(duration)]), np.vstack((q0, goal)),
                     np.vstack((qd0, rest)), np.vstack((qdd0, rest)))
