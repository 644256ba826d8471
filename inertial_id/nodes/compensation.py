"""The applier tells the solver what the robot's driver subtracts from the wrench it publishes.

A target that compensates its wrench for the payload it was given (a UR driver; the applier's
``wrench_after_apply``) makes the solver see only the residual. The applier publishes, on
``~/compensation`` (inertial_id/InertialParameters, latched, in the frame of the solver's
estimates, SI units), each step of a change: ``method`` :data:`PENDING` when a request goes out
(stamp: sent), :data:`SETTLED` with the payload the driver subtracts from the stamp on (the new
one after its transition, or the old one when it refused or did not answer). The solver adds
that payload back to every wrench
(:class:`~inertial_id.core.estimation.compensation.DriverCompensation`)
and drops the samples stamped while the driver may have been switching. Stamps are the node
clock's, as the wrench stamps are (one machine, or synchronised clocks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Header

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.compensation import (
    PENDING,
    SETTLED,
    Announcement,
    DriverCompensation,
)
from inertial_id.core.frames import pi_in_frame
from inertial_id.core.parameters import BodyParameters
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import Number, latched_qos, to_stamp
from inertial_id.nodes.conversions import body_to_msg

TOPIC = "applier/compensation"
"""Where the solver listens (relative: the applier's ``~/compensation`` in its namespace)."""


def history_qos() -> QoSProfile:
    """Reliable, transient local and 10 deep on both sides: a request's two messages come a
    few milliseconds apart, and a busy solver must get both (with one-deep history the first
    is replaced before it is taken, and the samples of the switch go in unchecked); a late
    solver gets the recent steps, in order."""
    qos = latched_qos()
    qos.depth = 10
    return qos


def _seconds(header: Header) -> float:
    return header.stamp.sec + header.stamp.nanosec * 1e-9


class CompensationAnnouncer:
    """The applier's side: ``~/compensation`` when ``enabled`` (the target compensates)."""

    def __init__(self, node: Node, enabled: bool) -> None:
        self.node = node
        self.enabled = enabled
        self.body = BodyParameters(np.zeros(10))  # what the driver subtracts now
        self.frame = ""
        self.changing = False
        self.publisher = (node.create_publisher(InertialParameters, "~/compensation",
                                                history_qos()) if enabled else None)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _publish(self, method: str, stamp: float) -> None:
        msg = body_to_msg(self.body, Header(stamp=to_stamp(stamp), frame_id=self.frame))
        msg.method = method
        self.publisher.publish(msg)

    def requested(self, frame: str) -> None:
        """A request is going out now (``frame``: the solver's estimates' frame)."""
        if not self.enabled:
            return
        self.frame = self.frame if self.body.mass else frame
        self.changing = True
        self._publish(PENDING, self._now())

    def accepted(self, body: BodyParameters, frame: str, transition: float) -> None:
        """The driver took ``body`` (in ``frame``): it subtracts it once ``transition`` s
        have passed."""
        if not self.enabled:
            return
        self.body, self.frame, self.changing = body, frame, False
        self._publish(SETTLED, self._now() + transition)

    def failed(self) -> None:
        """The request was refused or not answered: the driver keeps what it had."""
        if self.enabled and self.changing:
            self.changing = False
            self._publish(SETTLED, self._now())

    def values(self) -> dict[str, Number]:
        """Diagnostics: whether the target compensates, and what it subtracts now."""
        return {"wrench_compensated": self.enabled,
                "compensated_mass_kg": self.body.mass if self.enabled else 0.0}


class CompensationListener:
    """The solver's side: follows ``applier/compensation`` into the estimation stage's
    :class:`~inertial_id.core.estimation.compensation.DriverCompensation` ``core``, which
    restores the samples' wrench.

    ``margins()``: s dropped before a request and after a settle; ``model()``: the URDF model
    of the solver's ``output_frame`` (None without one), to bring a compensation given in
    another frame into the samples' (sensor) frame.
    """

    def __init__(self, node: Node, core: DriverCompensation,
                 margins: Callable[[], tuple[float, float]],
                 model: Callable[[], pin.Model | None]) -> None:
        self.node = node
        self.core = core
        self.margins = margins
        self.model = model
        self.sensor = ""  # the samples' frame, once a batch came
        self.waiting: list[InertialParameters] = []  # until the sensor frame is known
        self.problem = ""
        node.create_subscription(InertialParameters, TOPIC, self.on_message, history_qos())

    def on_message(self, msg: InertialParameters) -> None:
        """Queue the message; it is taken at once when the sensor frame is known."""
        self.waiting.append(msg)
        self._take()

    def _take(self) -> None:
        if not self.sensor:
            return
        while self.waiting:
            msg = self.waiting.pop(0)
            before, after = self.margins()
            stamp = _seconds(msg.header)
            try:
                pi = self._in_sensor_frame(np.asarray(msg.pi, float), msg.header.frame_id)
            except InertialIdError as exc:
                self.problem = f"driver compensation not usable: {exc}"
                self.node.get_logger().error(self.problem)
                continue
            self.problem = ""
            self.core.announce(Announcement(stamp, msg.method, self.sensor, pi), before, after)
            if msg.method == SETTLED:
                self.node.get_logger().info(
                    f"the driver now subtracts {pi[0]:.4g} kg from the wrench (from "
                    f"t = {stamp:.3f} s): it is added back to every sample")

    def _in_sensor_frame(self, pi: NDArray[np.float64], frame: str) -> NDArray[np.float64]:
        return pi_in_frame(pi, frame, self.sensor, self.model())

    def sensor_frame(self, frame: str) -> None:
        """The samples' frame (each batch's, before the estimation stage restores it): the
        messages that waited for it are taken now."""
        self.sensor = frame
        if self.waiting:
            self._take()

    def values(self) -> dict[str, Number]:
        """Diagnostics: what is added back, since when, and what was dropped."""
        core = self.core
        return {"driver_compensation_mass_kg": float(core.current[0]),
                "driver_compensation_changing": core.changing,
                "dropped_driver_compensation_changing": core.dropped,
                "driver_compensation_unusable": bool(self.problem)}

    def record(self) -> dict[str, Any]:
        """The saved calibration's ``driver_compensation`` section (sensor frame), or {}."""
        core = self.core
        if not np.isfinite(core.since):
            return {}
        return {"driver_compensation": {
            "frame": self.sensor, "since_stamp_s": float(core.since),
            "mass": float(core.current[0]), "pi": [float(x) for x in core.current],
            "note": "the wrench read was compensated for this payload by the driver; it was "
                    "added back, so the estimate is the whole payload"}}
