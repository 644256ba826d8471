"""The gatherer's work without ROS: JointState arrays to model order, then synchronisation.

:class:`Gathering` maps each joint state's names onto the URDF's moving joints (extra and
reordered joints are fine; locked joints are left out) and feeds a
:class:`~inertial_id.core.synchronizer.FixedLagSynchronizer` with it and the wrenches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from numpy.typing import ArrayLike

from inertial_id.core.kinematics import JointMapper, load_urdf_model, movable_joint_names
from inertial_id.core.synchronizer import FixedLagSynchronizer, SyncedSamples


@dataclass(frozen=True)
class GathererSettings:
    """Filter settings (see :class:`FixedLagSynchronizer`) and the joints left out."""

    window: int = 15
    polyorder: int = 3
    use_measured_velocity: bool = False
    max_span: float = 0.5
    locked_joint_names: tuple[str, ...] = ()


class Gathering:
    """Joint states and wrenches in, synchronised filtered samples out (model joint order)."""

    def __init__(self, urdf: str, settings: GathererSettings | None = None) -> None:
        self.settings = settings or GathererSettings()
        locked = set(self.settings.locked_joint_names)
        self.joint_names = [n for n in movable_joint_names(load_urdf_model(urdf))
                            if n not in locked]
        self.mapper = JointMapper(self.joint_names)
        s = self.settings
        self.synchronizer = FixedLagSynchronizer(
            len(self.joint_names), s.window, s.polyorder, s.use_measured_velocity, s.max_span
        )

    def add_joint_state(self, t: float, names: Sequence[str], positions: Sequence[float],
                        velocities: Sequence[float] = ()) -> bool:
        """One ``sensor_msgs/JointState`` (stamp in s); False when its stamp was dropped."""
        q = self.mapper.select(names, positions)
        v = None
        if self.settings.use_measured_velocity:
            v = self.mapper.select(names, velocities)
        return self.synchronizer.add_joint_state(t, q, v)

    def add_wrench(self, t: float, wrench: ArrayLike) -> bool:
        """One wrench ``[fx, fy, fz, tx, ty, tz]`` (stamp in s); False when dropped."""
        return self.synchronizer.add_wrench(t, wrench)

    def pop_ready(self) -> SyncedSamples:
        """Samples whose filter windows are complete."""
        return self.synchronizer.pop_ready()
