"""An exciting motion for the payload's parameters, planned from where the arm stands.

The motion is one period of a finite Fourier series (the excitation designer of
:mod:`inertial_id.core.joint_torque.excitation`) anchored at the current joint positions: it
starts and ends there at rest, each joint stays within its excursion from the start and its
URDF position limits, its speed within ``velocity_fraction`` of the URDF's velocity limit and
its acceleration within ``acceleration_fraction`` of the robot's acceleration limit (a URDF
has none: the caller gives them). Among such motions the designer picks the one whose stacked
payload measurement matrix ``[s Y(v, a_g), 1_6]`` (unknowns ``[pi; offset]``, columns scaled)
has the smallest condition number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.excitation import (
    FourierSpace,
    JointLimits,
    optimise_excitation,
    payload_criterion,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.on_demand.path import JointPath
from inertial_id.core.simulation import FourierTrajectory

ROOM = 0.98
"""Share of each joint's room that the plan uses (its grid is sampled, not continuous)."""
PEAK_SHARE = 0.98
"""Share of the velocity and acceleration bounds the plan's peaks use: they are found on the
design's grid, and the path sent is interpolated between points, so the peaks the check finds
between them can be higher (by 0.1 % on a 4 s motion of 3 harmonics at the default
``point_rate`` of 25 Hz; far sparser points overshoot more, and such a plan is refused by the
check, not sent)."""


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in the URDF base frame (m); ``floor``: the lowest z (m)."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]

    def contains(self, points: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Whether each of the (N, 3) points lies inside."""
        return np.all((points >= self.lower) & (points <= self.upper), axis=1)


@dataclass(frozen=True)
class MotionBounds:
    """What an identification motion may do.

    ``velocity_fraction`` and ``acceleration_fraction``: of each joint's velocity limit (URDF)
    and acceleration limit (rad/s^2, the robot's); ``max_excursion``: rad each joint may move
    from where it starts (one value or one per joint); ``joints``: the joints allowed to move
    (empty: all); ``duration``: s of the longest motion; ``box``: where the flange frame's
    origin must stay (base frame, None: anywhere), ``floor``: its lowest z (m, None: none).
    """

    velocity_fraction: float = 0.4
    acceleration_fraction: float = 0.3
    max_excursion: tuple[float, ...] = (0.5,)
    joints: tuple[str, ...] = ()
    duration: float = 10.0
    box: Box | None = None
    floor: float | None = None

    def excursion(self, joint_names: Sequence[str]) -> NDArray[np.float64]:
        """Per joint (in ``joint_names``' order): its excursion, 0 for a joint not allowed
        to move."""
        values = np.asarray(self.max_excursion, dtype=float)
        if values.size not in (1, len(joint_names)) or np.any(values < 0):
            raise InertialIdError(f"max_excursion needs 1 or {len(joint_names)} values >= 0, "
                                  f"got {values.tolist()}")
        unknown = set(self.joints) - set(joint_names)
        if unknown:
            raise InertialIdError(f"joints not in the robot model: {sorted(unknown)}")
        moving = np.array([not self.joints or n in self.joints for n in joint_names])
        return np.broadcast_to(values, (len(joint_names),)) * moving

    def check(self) -> None:
        """Raise on fractions outside (0, 1] or a duration that is not positive."""
        for name in ("velocity_fraction", "acceleration_fraction"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise InertialIdError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not self.duration > 0.0:
            raise InertialIdError(f"duration must be > 0 s, got {self.duration}")


class AnchoredFourierSpace(FourierSpace):
    """Fourier motions that start and end at ``start`` at rest and keep each joint within
    ``[lower, upper]`` (which hold ``start``), speeds within ``vmax`` and accelerations within
    ``amax``. The placement variables of :class:`FourierSpace` are unused."""

    def __init__(self, limits: JointLimits, start: ArrayLike, lower: ArrayLike,
                 upper: ArrayLike, period: float, harmonics: int, velocity_fraction: float,
                 acceleration: ArrayLike) -> None:
        super().__init__(limits, period, harmonics, margin=0.0,
                         velocity_fraction=PEAK_SHARE * velocity_fraction,
                         acceleration=PEAK_SHARE * np.asarray(acceleration, dtype=float))
        self.start = np.asarray(start, dtype=float)
        self.lower, self.upper = np.asarray(lower, float), np.asarray(upper, float)

    def trajectory(self, x: ArrayLike) -> FourierTrajectory:
        """The motion of ``x``: the largest gain that fits the room below and above."""
        a, b, r, gain = self.shape(x)
        r0 = r[0]
        below, above = r0 - r.min(axis=0), r.max(axis=0) - r0
        room_below = ROOM * np.maximum(self.start - self.lower, 0.0)
        room_above = ROOM * np.maximum(self.upper - self.start, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.minimum(gain, np.where(below > 1e-12, room_below / below, np.inf))
            gain = np.minimum(gain, np.where(above > 1e-12, room_above / above, np.inf))
        gain = np.where(np.isfinite(gain), gain, 0.0)
        return self.compose(self.start - gain * r0, a, b, gain)


@dataclass(frozen=True)
class MotionPlan:
    """A planned identification motion: ``trajectory`` over ``duration`` s from ``start``
    (rad, ``joint_names``' order), its scaled condition number (unknowns ``[pi; offset]``)
    against that of a random motion of the same form, and the bounds it was planned in."""

    trajectory: FourierTrajectory
    joint_names: list[str]
    start: NDArray[np.float64]
    duration: float
    condition_number: float
    random_condition_number: float
    bounds: MotionBounds
    seconds: float

    def path(self, rate: float) -> JointPath:
        """The motion as points every ``1 / rate`` s (what the controller gets)."""
        return JointPath.sampled(self.trajectory, self.duration, rate)


def plan_motion(kinematics: SensorKinematics, start: ArrayLike, bounds: MotionBounds,
                acceleration_limits: ArrayLike, harmonics: int = 3, budget: int = 300,
                seed: int = 0) -> MotionPlan:
    """Plan an exciting motion of ``bounds.duration`` s from ``start`` (see the module
    docstring); ``acceleration_limits``: rad/s^2, one value or one per joint."""
    bounds.check()
    limits = JointLimits.from_model(kinematics.model)
    start = np.asarray(start, dtype=float)
    if start.shape != limits.lower.shape or not np.all(np.isfinite(start)):
        raise InertialIdError(f"the start needs {limits.lower.size} finite joint positions")
    excursion = bounds.excursion(kinematics.joint_names)
    lower = np.maximum(limits.lower, start - excursion)
    upper = np.minimum(limits.upper, start + excursion)
    acceleration = bounds.acceleration_fraction * np.broadcast_to(
        np.asarray(acceleration_limits, dtype=float), start.shape)
    space = AnchoredFourierSpace(limits, start, lower, upper, bounds.duration, harmonics,
                                 bounds.velocity_fraction, acceleration)
    result = optimise_excitation(space, payload_criterion(kinematics), kinematics.joint_names,
                                 "payload_condition_number", kinematics.model,
                                 kinematics.configuration, budget=budget, seed=seed)
    return MotionPlan(result.trajectory, list(kinematics.joint_names), start, bounds.duration,
                      result.value, result.random_value, bounds, result.seconds)
