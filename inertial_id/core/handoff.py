"""What each robot driver or controller takes for a payload, from an estimate in its frame.

One :class:`Target` per consumer. Its ``fields`` turns an :class:`Estimate` already expressed
in the frame the target wants (see :mod:`inertial_id.core.frames`) into exactly the request
fields of a driver's service or the parameters of a controller, in that target's units:

- flange targets (the frame is the tool flange, ``tool0``): Universal Robots' ``SetPayload``
  (``ur``: the classic request plus the 2026 extension's inertia and transition time; ``ur7``:
  ``geometry_msgs/Inertia payload``), Franka's ``SetLoad`` and xArm's ``SetTcpLoad``;
- sensor targets (the F/T sensor's frame): ros2_controllers' force_torque_sensor_broadcaster
  offsets, control_toolbox's GravityCompensation filter and the admittance_controller's gravity
  compensation.

Every CoG is the vector from the frame origin to the payload's CoM in the frame's axes; every
inertia is about the CoM in the frame's axes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimate import Estimate
from inertial_id.core.kinematics import DEFAULT_GRAVITY

FLANGE_FRAME = "tool0"
"""The default frame of the flange targets (the ROS-Industrial name of the tool flange)."""

STANDARD_GRAVITY = float(np.linalg.norm(DEFAULT_GRAVITY))
"""m s^-2: the weight the admittance controller takes is ``m`` times this."""


@dataclass(frozen=True)
class Options:
    """What an export needs besides the estimate: the frame's name and UR's transition time."""

    frame: str
    transition_time: float = 0.0


@dataclass(frozen=True)
class Target:
    """One consumer of a payload: a driver's service request or a controller's parameters."""

    name: str
    interface: str
    """``service <name> (<type>)`` or ``parameters of <node>``: where the fields go."""
    flange: bool
    """True when the target wants the flange frame, False for the F/T sensor's frame."""
    units: str
    """One line naming each field's unit and frame (``{frame}`` is filled in)."""
    fields: Callable[[Estimate, Options], dict[str, Any]]
    groups: tuple[str, ...]
    """What the fields carry (:data:`inertial_id.core.applying.GROUPS`): mass, com, inertia,
    offset."""
    compensates_wrench: bool = False
    """True when the target, once it has the payload, publishes the F/T wrench compensated
    for it (a UR driver): the identification must then add the applied payload back
    (:mod:`inertial_id.core.estimation.compensation`). The applier's ``wrench_after_apply``
    overrides it."""

    @property
    def parameters(self) -> bool:
        """True for a controller's parameters, False for a service request."""
        return self.interface.startswith("parameters")

    @property
    def service(self) -> tuple[str, str]:
        """A driver's service name and type (``ur_msgs/srv/SetPayload``); empty for a
        controller's parameters."""
        match = _SERVICE.match(self.interface)
        return (match[1], match[2]) if match else ("", "")

    @property
    def node(self) -> str:
        """The controller node whose parameters are set, when the target names one."""
        match = _NODE.fullmatch(self.interface)
        return match[1] if match else ""


_SERVICE = re.compile(r"service (\S+) \((\w+/srv/\w+)")
_NODE = re.compile(r"parameters of (\w+)")


def _floats(values: NDArray[np.float64], scale: float = 1.0) -> list[float]:
    return [float(scale * v) for v in values]


def _xyz(values: NDArray[np.float64]) -> dict[str, float]:
    return dict(zip("xyz", _floats(values), strict=True))


def _inertia_fields(estimate: Estimate) -> dict[str, float]:
    """``ixx ... izz`` of the inertia about the CoM (kg m^2), frame axes."""
    i = estimate.body.inertia_com
    return {"ixx": float(i[0, 0]), "ixy": float(i[0, 1]), "ixz": float(i[0, 2]),
            "iyy": float(i[1, 1]), "iyz": float(i[1, 2]), "izz": float(i[2, 2])}


def ur_request(estimate: Estimate, options: Options) -> dict[str, Any]:
    """``ur_msgs/srv/SetPayload``: the classic ``mass`` and ``center_of_gravity`` and the 2026
    extension's ``ixx iyy izz ixy ixz iyz`` and ``transition_time`` (s)."""
    inertia = _inertia_fields(estimate)
    return {"mass": estimate.body.mass, "center_of_gravity": _xyz(estimate.body.com),
            **{k: inertia[k] for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")},
            "transition_time": options.transition_time}


def ur7_request(estimate: Estimate, options: Options) -> dict[str, Any]:
    """``ur_msgs/srv/SetPayload`` from 7.0: ``geometry_msgs/Inertia payload`` and
    ``transition_time`` (s)."""
    return {"payload": {"m": estimate.body.mass, "com": _xyz(estimate.body.com),
                        **_inertia_fields(estimate)},
            "transition_time": options.transition_time}


def franka_request(estimate: Estimate, options: Options) -> dict[str, Any]:
    """``franka_msgs/srv/SetLoad``: ``mass``, ``center_of_mass[3]`` (flange to CoM, m) and
    ``load_inertia[9]`` (about the CoM, column-major, kg m^2)."""
    return {"mass": estimate.body.mass, "center_of_mass": _floats(estimate.body.com),
            "load_inertia": _floats(estimate.body.inertia_com.flatten(order="F"))}


def xarm_request(estimate: Estimate, options: Options) -> dict[str, Any]:
    """``xarm_msgs/srv/SetTcpLoad``: ``weight`` (kg) and ``center_of_gravity`` in mm."""
    return {"weight": estimate.body.mass,
            "center_of_gravity": _floats(estimate.body.com, scale=1000.0)}


def broadcaster_parameters(estimate: Estimate, options: Options) -> dict[str, Any]:
    """force_torque_sensor_broadcaster's ``offset.force`` (N) and ``offset.torque`` (N m).

    The broadcaster adds them to the reading, which is ``-Y pi + offset + noise`` (DESIGN.md):
    the parameters are minus the estimated bias, so the published wrench is the payload's.
    """
    return {"offset": {"force": _xyz(-estimate.offset[:3]),
                       "torque": _xyz(-estimate.offset[3:])}}


def gravity_compensation_parameters(estimate: Estimate, options: Options) -> dict[str, Any]:
    """control_toolbox GravityCompensation: ``tool.mass`` (kg), ``tool.CoG`` (m, the frame
    named ``sensor_frame``)."""
    return {"sensor_frame": options.frame,
            "tool": {"mass": estimate.body.mass, "CoG": _floats(estimate.body.com)}}


def admittance_parameters(estimate: Estimate, options: Options) -> dict[str, Any]:
    """admittance_controller: ``gravity_compensation.frame.id``, ``CoG.pos`` (m) and
    ``CoG.force``, the weight ``m g`` in N."""
    return {"gravity_compensation": {
        "frame": {"id": options.frame},
        "CoG": {"pos": _floats(estimate.body.com),
                "force": STANDARD_GRAVITY * estimate.body.mass},
    }}


PAYLOAD_GROUPS = ("mass", "com", "inertia")

_FLANGE_UNITS = ("kg; CoG in m from {frame} to the CoM, {frame} axes; inertia in kg m^2 about "
                 "the CoM, {frame} axes")

TARGETS: Mapping[str, Target] = {t.name: t for t in (
    Target("ur", "service /io_and_status_controller/set_payload (ur_msgs/srv/SetPayload)",
           True, "mass " + _FLANGE_UNITS + "; transition_time s. Drivers before the 2026 "
           "extension take only mass and center_of_gravity", ur_request, PAYLOAD_GROUPS,
           compensates_wrench=True),
    Target("ur7", "service /io_and_status_controller/set_payload (ur_msgs/srv/SetPayload, 7.0)",
           True, "payload.m " + _FLANGE_UNITS + "; transition_time s", ur7_request,
           PAYLOAD_GROUPS, compensates_wrench=True),
    Target("franka", "service /service_server/set_load (franka_msgs/srv/SetLoad)", True,
           "mass " + _FLANGE_UNITS + " (load_inertia column-major). Leave out the end "
           "effector configured in the vendor's web tool", franka_request, PAYLOAD_GROUPS),
    Target("xarm", "service /xarm/set_tcp_load (xarm_msgs/srv/SetTcpLoad)", True,
           "weight kg; center_of_gravity in MILLIMETRES from {frame} to the CoM, {frame} axes",
           xarm_request, ("mass", "com")),
    Target("fts-broadcaster", "parameters of force_torque_sensor_broadcaster", False,
           "offset.force N, offset.torque N m, {frame} axes: ADDED to the reading (minus the "
           "estimated bias)", broadcaster_parameters, ("offset",)),
    Target("gravity-compensation", "parameters of a control_toolbox GravityCompensation filter",
           False, "tool.mass kg; tool.CoG m from {frame} to the CoM, {frame} axes",
           gravity_compensation_parameters, ("mass", "com")),
    Target("admittance", "parameters of admittance_controller", False,
           "gravity_compensation.CoG.pos m from {frame} to the CoM, {frame} axes; CoG.force "
           f"the weight in N (mass x {STANDARD_GRAVITY:g} m/s^2)", admittance_parameters,
           ("mass", "com")),
)}
"""Every target, by its ``inertial-id export --to`` name."""
