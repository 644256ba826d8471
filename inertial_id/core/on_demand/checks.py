"""Checks of an identification motion: before it is sent (every bound, on a fine sampling of
the path) and while it runs (a joint about to leave its bound, from the measured joint states).

A violation is one line naming the joint or frame, the bound and by how much. Positions in
rad, speeds in rad/s, accelerations in rad/s^2, the flange's origin in m in the URDF base
frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.joint_torque.excitation import JointLimits
from inertial_id.core.kinematics import SensorKinematics, require_frame
from inertial_id.core.on_demand.path import JointPath
from inertial_id.core.on_demand.planning import MotionBounds

TOLERANCE = 1e-6
"""Relative slack of the checks (rounding, not a margin)."""
CHECK_RATE = 200.0
"""Hz of the sampling a path is checked on."""


def flange_positions(kinematics: SensorKinematics, frame: str,
                     positions: NDArray[np.float64]) -> NDArray[np.float64]:
    """Origin of URDF ``frame`` in the base frame (N, 3), m, at joint positions (N, n)."""
    frame_id = require_frame(kinematics.model, frame, "flange frame")
    data = kinematics.model.createData()
    out = np.empty((positions.shape[0], 3))
    for k, configuration in enumerate(kinematics.configuration(positions)):
        pin.framesForwardKinematics(kinematics.model, data, configuration)
        out[k] = data.oMf[frame_id].translation
    return out


def _worst(names: Sequence[str], excess: NDArray[np.float64], what: str) -> list[str]:
    """One line per joint whose largest ``excess`` (N, n) over its bound is positive."""
    peak = excess.max(axis=0)
    return [f"{names[j]}: {what} by {peak[j]:.4g}" for j in np.flatnonzero(peak > 0)]


@dataclass(frozen=True)
class Limits:
    """The bounds a motion is checked against: URDF position and velocity limits, the
    robot's acceleration limits (rad/s^2), the motion's bounds and its start."""

    joints: JointLimits
    acceleration: NDArray[np.float64]
    bounds: MotionBounds
    start: NDArray[np.float64]
    names: tuple[str, ...]

    @classmethod
    def of(cls, kinematics: SensorKinematics, acceleration: ArrayLike, bounds: MotionBounds,
           start: ArrayLike) -> Limits:
        """From the robot model, its acceleration limits, the bounds and the start."""
        start = np.asarray(start, dtype=float)
        return cls(JointLimits.from_model(kinematics.model),
                   np.broadcast_to(np.asarray(acceleration, float), start.shape).copy(),
                   bounds, start, tuple(kinematics.joint_names))

    def position_excess(self, q: NDArray[np.float64]) -> tuple[NDArray, NDArray]:
        """How far (rad, > 0 outside) positions (N, n) are beyond the URDF limits and beyond
        the excursion from the start."""
        urdf = np.maximum(self.joints.lower - q, q - self.joints.upper)
        excursion = np.abs(q - self.start) - self.bounds.excursion(self.names)
        return urdf, excursion


def check_path(kinematics: SensorKinematics, path: JointPath, limits: Limits,
               flange_frame: str) -> list[str]:
    """Every bound ``path`` would leave (empty: it may be sent): URDF position limits, the
    excursion, the velocity and acceleration fractions, the duration, the box and the floor
    for ``flange_frame``'s origin."""
    bounds, tol = limits.bounds, TOLERANCE
    t = np.linspace(0.0, path.duration, max(2, int(path.duration * CHECK_RATE) + 1))
    q, qd, qdd = path(t)
    problems = []
    if np.max(np.abs(path.positions[0] - limits.start)) > tol:
        problems.append("the path does not begin where the arm stands")
    if path.duration > bounds.duration * (1 + tol):
        problems.append(f"duration {path.duration:.3f} s over the bound {bounds.duration} s")
    urdf, excursion = limits.position_excess(q)
    problems += _worst(limits.names, urdf - tol, "outside the URDF position limits (rad)")
    problems += _worst(limits.names, excursion - tol, "beyond its excursion (rad)")
    vmax = bounds.velocity_fraction * limits.joints.velocity
    problems += _worst(limits.names, np.abs(qd) - vmax * (1 + tol) - tol,
                       "over its velocity bound (rad/s)")
    amax = bounds.acceleration_fraction * limits.acceleration
    problems += _worst(limits.names, np.abs(qdd) - amax * (1 + tol) - tol,
                       "over its acceleration bound (rad/s^2)")
    if bounds.box is not None or bounds.floor is not None:
        points = flange_positions(kinematics, flange_frame, q)
        problems += _place_problems(points, t, bounds, flange_frame)
    return problems


def _place_problems(points: NDArray[np.float64], t: NDArray[np.float64],
                    bounds: MotionBounds, frame: str) -> list[str]:
    """The box and floor lines of :func:`check_path`."""
    problems = []
    if bounds.box is not None:
        outside = ~bounds.box.contains(points)
        if np.any(outside):
            k = int(np.argmax(outside))
            problems.append(f"{frame} leaves the box at t = {t[k]:.2f} s "
                            f"({np.round(points[k], 3).tolist()} m)")
    if bounds.floor is not None and np.min(points[:, 2]) < bounds.floor:
        problems.append(f"{frame} goes below the floor ({np.min(points[:, 2]):.3f} m < "
                        f"{bounds.floor} m)")
    return problems


@dataclass(frozen=True)
class BoundGuard:
    """While the motion runs: a joint about to leave its bound (its URDF limits or its
    excursion, with ``slack`` rad for the controller's tracking error) within ``lookahead``
    s at its measured speed."""

    limits: Limits
    slack: float = 0.02
    lookahead: float = 0.1

    def check(self, q: ArrayLike, qd: ArrayLike) -> str:
        """Empty, or the line that names the joint about to leave its bound."""
        q = np.asarray(q, dtype=float).reshape(1, -1)
        ahead = q + self.lookahead * np.asarray(qd, dtype=float).reshape(1, -1)
        for where in (q, ahead):
            urdf, excursion = self.limits.position_excess(where)
            for excess, what in ((urdf, "URDF position limit"), (excursion, "excursion")):
                j = int(np.argmax(excess[0]))
                if excess[0, j] > self.slack:
                    return (f"{self.limits.names[j]} about to leave its {what} "
                            f"(q = {q[0, j]:.4f} rad)")
        return ""


@dataclass(frozen=True)
class Watch:
    """What the watcher of a running motion has seen since it began: every estimate group
    converged, a contact flagged, a set-up error named, a bound about to be left (the
    :class:`BoundGuard` line), the controller's outcome ("" while it runs, "succeeded", or
    why it failed) and whether the caller cancelled."""

    converged: bool = False
    contact: bool = False
    setup_error: str = ""
    bound: str = ""
    controller: str = ""
    canceled: bool = False


STOP_REASONS = ("canceled", "controller_failed", "contact", "setup_error", "bound",
                "converged", "completed")
"""Why a motion stops, in the order they are checked (the first that holds wins)."""


def stop_reason(watch: Watch) -> tuple[str, str]:
    """``(reason, one line)`` once the motion must stop (a reason of :data:`STOP_REASONS`),
    ``("", "")`` while it goes on. Safety first: a cancel, a failed controller, a contact, a
    set-up error and a bound come before convergence."""
    failed = watch.controller not in ("", "succeeded")
    checks = ((watch.canceled, "the caller cancelled the goal"),
              (failed, f"the controller failed: {watch.controller}"),
              (watch.contact, "a contact was flagged (T^2)"),
              (bool(watch.setup_error), f"set-up error: {watch.setup_error}"),
              (bool(watch.bound), watch.bound),
              (watch.converged, "mass, CoM and inertia converged"),
              (watch.controller == "succeeded", "the whole motion ran"))
    for reason, (hit, line) in zip(STOP_REASONS, checks, strict=True):
        if hit:
            return reason, line
    return "", ""
