"""The simulated arm under a joint trajectory controller: it stands still until it gets a
path, follows the commanded motion ``lag`` s late (a position-controlled arm's tracking delay),
and on a stop (a cancelled goal) comes to rest along a short quintic from the commanded state.

Times are the simulation's, s; a path's point times count from when it is commanded.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.on_demand.path import JointPath, Motion, move

STOP_TIME = 0.25
"""s the arm takes to come to rest after a stop."""


class TrackedArm:
    """Joint positions, velocities, accelerations of the arm (a ``FourierTrajectory``'s
    interface: ``arm(times) -> (q, qd, qdd)``, (N, n) each)."""

    def __init__(self, rest: ArrayLike, lag: float = 0.03) -> None:
        self.rest = np.asarray(rest, dtype=float).reshape(1, -1)
        if lag < 0:
            raise InertialIdError(f"the tracking lag must be >= 0 s, got {lag}")
        self.lag = float(lag)
        self.segments: list[tuple[float, JointPath]] = []

    def commanded(self, t: ArrayLike) -> Motion:
        """The controller's set point at times ``t`` (N,)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        q = np.repeat(self.rest, t.size, axis=0)
        qd, qdd = np.zeros_like(q), np.zeros_like(q)
        for begin, path in self.segments:
            now = t >= begin
            if np.any(now):
                q[now], qd[now], qdd[now] = path(t[now] - begin)
        return q, qd, qdd

    def __call__(self, t: ArrayLike) -> Motion:
        """The arm at times ``t``: the set point ``lag`` s earlier."""
        return self.commanded(np.asarray(t, dtype=float) - self.lag)

    def command(self, t: float, path: JointPath) -> float:
        """Follow ``path`` from ``t`` on (a path whose first point comes later starts from
        the current set point); returns the time its set point ends."""
        if path.joints != self.rest.shape[1]:
            raise InertialIdError(f"the path has {path.joints} joints, the arm "
                                  f"{self.rest.shape[1]}")
        if path.times[0] > 0:
            q, qd, qdd = self.commanded(t)
            path = JointPath(np.concatenate(([0.0], path.times)),
                             np.vstack((q, path.positions)), np.vstack((qd, path.velocities)),
                             np.vstack((qdd, path.accelerations)))
        self.segments = [s for s in self.segments if s[0] < t] + [(float(t), path)]
        return float(t) + path.duration

    def stop(self, t: float) -> float:
        """Come to rest from the set point at ``t``, within :data:`STOP_TIME`; returns the
        time the arm's set point is at rest."""
        q, qd, qdd = self.commanded(t)
        goal = q[0] + 0.5 * STOP_TIME * qd[0]
        return self.command(t, move((q[0], qd[0], qdd[0]), goal, STOP_TIME))


def random_start(home: ArrayLike, lower: ArrayLike, upper: ArrayLike, seed: int,
                 spread: float = 0.5, clearance: float = 0.6) -> NDArray[np.float64]:
    """A start pose drawn by ``seed``: ``home`` plus up to ``spread`` rad per joint, at least
    ``clearance`` rad inside the position limits ``[lower, upper]`` (rad)."""
    home = np.asarray(home, dtype=float)
    pose = home + np.random.default_rng(seed).uniform(-spread, spread, home.shape)
    return np.clip(pose, np.asarray(lower, float) + clearance,
                   np.asarray(upper, float) - clearance)
