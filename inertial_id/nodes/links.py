"""The solver node's ``links`` mode: the robot's own link parameters from joint torques.

With ``mode: links`` the solver subscribes ``joint_states`` (sensor_msgs/JointState with
``effort``) instead of ``sensor_samples``. It keeps every ``links_decimation``-th state of the
last ``links_horizon`` seconds and every ``links_solve_period`` seconds identifies the links
with the same core stage as ``inertial-id identify-links``
(:class:`inertial_id.core.joint_torque.link_stream.LinkStream`, at the node's prior weight):
positions smoothed and differentiated by a Savitzky-Golay filter on the stamps, base
parameters, friction and offsets, the URDF's inertials as the prior, per-link
``J(pi) >= 0`` (sdp/qp). It publishes ``~/link_parameters`` (inertial_id/InertialParameters,
one per link, ``header.frame_id`` the link, ``pi`` about the link frame's origin in its axes;
``std`` is NaN: the standard parameters of links are not all identifiable) and ``~/links``
(std_msgs/String, latched: the YAML document ``identify-links`` writes, with base
parameters, sigma %, friction and torque RMS). A failed fit or one with an inconsistent link
keeps the last published set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_selection import LinkOptions
from inertial_id.core.joint_torque.link_stream import LinkStream, checked_state, link_model
from inertial_id.core.kinematics import JointMapper
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.timepolicy import StampPolicy
from inertial_id.io.cdr import CdrDecoder
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import (
    Diagnostics,
    Number,
    RobotDescription,
    latched_qos,
    sensor_qos,
    set_period,
    steady_timer,
    to_stamp,
)
from inertial_id.nodes.conversions import body_to_msg, joint_state_from_bytes


def decode_joint_state(raw: bytes, decoder: CdrDecoder, mapper: JointMapper,
                       policy: StampPolicy, last: float | None
                       ) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """A serialized JointState with efforts -> ``(stamp, q, effort, jumped)`` in the
    mapper's joint order (:func:`~inertial_id.core.joint_torque.link_stream.checked_state`)."""
    return checked_state(joint_state_from_bytes(raw, decoder), mapper, policy, last)


def link_options(values: Mapping[str, Any]) -> LinkOptions:
    """The identification's options from the solver node's parameter values (checked by the
    parameter table: ``links_method`` among its choices)."""
    return LinkOptions(method=values["links_method"],
                       prior_weight=float(values["links_prior_weight"]),
                       fit_gains=bool(values["links_fit_gains"]), friction=FrictionModel())


class LinksMode:
    """See the module docstring; ``values`` are the solver node's parameter values."""

    def __init__(self, node: Node, values: Mapping[str, Any]) -> None:
        self.node = node
        self.values = dict(values)
        self.stream: LinkStream | None = None
        self.received = self.undecodable = 0  # received: before the URDF too
        self.status = (DiagnosticStatus.WARN, "waiting for the URDF")
        self.decoder = CdrDecoder()
        self.parameters_pub = node.create_publisher(InertialParameters, "~/link_parameters", 50)
        self.document_pub = node.create_publisher(String, "~/links", latched_qos())
        self.diagnostics = Diagnostics(node, "link identification", self.diagnostic_status)
        node.create_subscription(JointState, "joint_states", self.on_joint_state,
                                 sensor_qos(500), raw=True)
        self.timer = steady_timer(node, float(values["links_solve_period"]),
                                  self.solve_and_publish)
        self.description = RobotDescription(node, dict(values), self.configure)

    def reconfigure(self, values: Mapping[str, Any], changed: set[str]) -> None:
        """Runtime parameter changes: method, prior weight, gains, decimation, horizon and
        solve period (from the next fit on)."""
        options = link_options(values)
        self.values = dict(values)
        if self.stream is not None:
            self.stream.options = options
            self.stream.decimation = max(1, int(values["links_decimation"]))
            self.stream.horizon = float(values["links_horizon"])
        if "links_solve_period" in changed:
            set_period(self.timer, float(values["links_solve_period"]))

    def configure(self, urdf: str) -> None:
        """The link stage once the URDF is known; joints not identified are locked at 0."""
        values = self.values
        self.stream = LinkStream(link_model(urdf, list(values["links_joints"])),
                                 link_options(values), int(values["links_window"]),
                                 int(values["links_decimation"]),
                                 float(values["links_horizon"]))
        self.status = (DiagnosticStatus.WARN, "collecting joint states")
        self.node.get_logger().info(
            f"identifying links {', '.join(self.stream.model.link_names)}")

    def on_joint_state(self, raw: bytes) -> None:
        self.received += 1
        if self.stream is None or not self.stream.due():
            return
        try:
            sample = joint_state_from_bytes(raw, self.decoder)
        except InertialIdError as exc:  # undecodable
            self.undecodable += 1
            self._dropped(exc)
            return
        try:
            self.stream.add(sample)  # counts what it refuses
        except InertialIdError as exc:
            self._dropped(exc)

    def _dropped(self, exc: InertialIdError) -> None:
        self.node.get_logger().warning(f"joint state dropped: {exc}", throttle_duration_sec=5.0)

    def solve_and_publish(self) -> None:
        """Fit on the kept states; publish if every link is physically consistent."""
        if self.stream is None:
            return
        try:
            fit = self.stream.fit()
        except InertialIdError as exc:
            self.status = (DiagnosticStatus.ERROR, f"fit failed, keeping the last: {exc}")
            self.node.get_logger().warning(self.status[1], throttle_duration_sec=10.0)
            return
        if fit is None:
            return
        self._publish(fit.own, fit.problem.samples, self.stream.stamp or 0.0)
        doc = fit.document(self.stream.options.max_relative_std)
        self.document_pub.publish(String(data=yaml.safe_dump(doc, sort_keys=False)))
        self.status = (DiagnosticStatus.OK,
                       f"fit {self.stream.fits} on {fit.problem.samples} states")

    def _publish(self, own: np.ndarray, samples: int, stamp: float) -> None:
        assert self.stream is not None
        for name, pi in zip(self.stream.model.link_names, own, strict=True):
            msg = body_to_msg(BodyParameters.from_pi(pi), Header(stamp=to_stamp(stamp),
                                                                 frame_id=name))
            msg.std = [float("nan")] * 10
            msg.samples_used = int(samples)
            msg.method = f"links_{self.stream.options.method}"
            msg.converged = True
            self.parameters_pub.publish(msg)

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: counts and the last fit's torque RMS per joint."""
        stream = self.stream
        values: dict[str, Number] = {
            "joint_states_received": self.received,
            "joint_states_kept": len(stream.states) if stream else 0,
            "joint_states_rejected": stream.rejected if stream else 0,
            "joint_states_undecodable": self.undecodable,
            "fits": stream.fits if stream else 0}
        if stream is not None and stream.last is not None:
            values.update({f"torque_rms_{k}": v for k, v in stream.last.rms().items()})
        return self.status[0], self.status[1], values
