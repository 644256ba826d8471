"""A stand-in for a Universal Robots driver's payload handling, on the simulator.

A UR driver serves ``/io_and_status_controller/set_payload`` (``ur_msgs/srv/SetPayload``), and
once a payload is set, the wrench it publishes is compensated for that payload. The
simulator's ``driver: ur`` does the same: this serves the real service type (loaded by name:
the robot's ``ur_msgs``, or a copy built from its definition) and makes the simulated wrench
``w - s Y(v, a_g) pi_set`` from the request on
(:meth:`~inertial_id.core.simulation.PayloadSimulation.set_driver_payload`). The request's
centre of gravity is in ``tool0`` (m, from the flange), its inertia (when the installed type
has one) about the CoG in ``tool0``'s axes; without an inertia the payload is a point mass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from rclpy.node import Node

from inertial_id.core.frames import frame_placement, pi_transform
from inertial_id.core.handoff import FLANGE_FRAME
from inertial_id.core.parameters import BodyParameters
from inertial_id.nodes.requests import service_type

SERVICE = "/io_and_status_controller/set_payload"
SERVICE_TYPE = "ur_msgs/srv/SetPayload"
INERTIA = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _seconds(value: Any) -> float:
    """A transition time as a number of seconds or a ``builtin_interfaces/Duration``."""
    if hasattr(value, "sec"):
        return value.sec + value.nanosec * 1e-9
    return float(value)


def requested_body(request: Any) -> tuple[BodyParameters, float]:
    """The payload of a ``SetPayload`` request of any generation (classic ``mass`` and
    ``center_of_gravity``, the 2026 extension's ``ixx ... iyz``, 7.0's ``payload``), in
    ``tool0``, and its transition time (s; 0 when the type has none)."""
    fields = request.get_fields_and_field_types()
    if "payload" in fields:  # 7.0: geometry_msgs/Inertia
        source, mass, cog = request.payload, request.payload.m, request.payload.com
    else:
        source, mass, cog = request, request.mass, request.center_of_gravity
    have = source.get_fields_and_field_types()
    inertia = [float(getattr(source, k)) if k in have else 0.0 for k in INERTIA]
    transition = _seconds(request.transition_time) if "transition_time" in fields else 0.0
    return (BodyParameters.from_mass_com_inertia(float(mass), [cog.x, cog.y, cog.z], inertia),
            transition)


class UrDriverStandIn:
    """Serves ``SetPayload`` on ``node`` and calls ``compensate(pi, transition)`` with each
    payload set (``pi`` in ``sensor_frame``, 10 values, SI units).

    Raises :class:`~inertial_id.core.errors.InertialIdError` naming ``ur_msgs`` when it is not
    installed, and :class:`~inertial_id.core.errors.ModelError` when the URDF has no
    ``tool0`` rigidly attached to the sensor.
    """

    def __init__(self, node: Node, model: pin.Model, sensor_frame: str,
                 compensate: Callable[[NDArray[np.float64], float], None]) -> None:
        self.kind = service_type(SERVICE_TYPE)
        self.to_sensor = pi_transform(frame_placement(model, sensor_frame,
                                                      FLANGE_FRAME).inverse())
        self.compensate = compensate
        self.received: list[tuple[BodyParameters, float]] = []
        self.node = node
        node.create_service(self.kind, SERVICE, self.serve)

    def serve(self, request: Any, response: Any) -> Any:
        """Take the payload (in ``tool0``), compensate the wrench for it, answer success."""
        body, transition = requested_body(request)
        self.received.append((body, transition))
        self.compensate(self.to_sensor @ body.pi, transition)
        self.node.get_logger().info(
            f"set_payload: {body.mass:.4g} kg, CoG [" + ", ".join(
                f"{c * 1e3:.1f}" for c in body.com) + "] mm in tool0: the wrench is "
            "compensated for it from now on")
        response.success = True
        return response
