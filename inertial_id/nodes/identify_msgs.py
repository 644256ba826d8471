"""Messages of the identify node: an Identify goal's bounds, the trajectory sent to the
controller, the planned path for RViz, the feedback's std per group."""

from __future__ import annotations

from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point
from numpy.typing import NDArray
from std_msgs.msg import ColorRGBA, Header
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from visualization_msgs.msg import Marker

from inertial_id.core.on_demand.path import JointPath
from inertial_id.core.on_demand.planning import Box, MotionBounds
from inertial_id.msg import InertialParameters


def bounds_from_goal(goal: Any, defaults: dict[str, Any]) -> MotionBounds:
    """An Identify goal's bounds; a zero or empty field takes the node's parameter."""
    box = Box(np.asarray(goal.box_min, float), np.asarray(goal.box_max, float))
    return MotionBounds(
        velocity_fraction=goal.velocity_fraction or defaults["velocity_fraction"],
        acceleration_fraction=goal.acceleration_fraction or defaults["acceleration_fraction"],
        max_excursion=tuple(goal.max_excursion) or tuple(defaults["max_excursion"]),
        joints=tuple(goal.joints),
        duration=goal.max_duration or defaults["max_duration"],
        box=box if goal.use_box else None,
        floor=float(goal.floor_z) if goal.use_floor else None)


def _duration(seconds: float) -> Duration:
    sec = int(np.floor(seconds))
    return Duration(sec=sec, nanosec=int(round((seconds - sec) * 1e9)) % 1_000_000_000)


def trajectory_msg(path: JointPath, joint_names: list[str]) -> JointTrajectory:
    """``path`` as a ``trajectory_msgs/JointTrajectory`` (zero stamp: start on receipt)."""
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.points = [JointTrajectoryPoint(positions=q.tolist(), velocities=qd.tolist(),
                                       accelerations=qdd.tolist(), time_from_start=_duration(t))
                  for t, q, qd, qdd in zip(path.times, path.positions, path.velocities,
                                           path.accelerations, strict=True)]
    return msg


def path_marker(points: NDArray[np.float64], header: Header, refused: bool) -> Marker:
    """The flange's planned path (base frame, m) as a line strip: green, red if refused."""
    colour = ColorRGBA(r=0.9, g=0.1, b=0.1, a=1.0) if refused else ColorRGBA(g=0.8, b=0.2,
                                                                              a=1.0)
    marker = Marker(header=header, ns="planned_path", id=0, type=Marker.LINE_STRIP,
                    action=Marker.ADD, color=colour)
    marker.pose.orientation.w = 1.0
    marker.scale.x = 0.005
    marker.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]
    return marker


def group_std(estimate: InertialParameters) -> tuple[float, float, float]:
    """Relative mass std, the largest CoM std (m) and the largest std of the six inertia
    entries about the CoM (kg m^2) of an estimate."""
    mass = max(float(estimate.mass), 1e-9)
    return (float(estimate.std[0]) / mass, float(np.max(estimate.com_std)),
            float(np.max(estimate.inertia_com_std)))
