"""The solver node's ``payload_from_torques`` mode: the payload from joint torques, for arms
with joint torque sensing (or motor currents) and no wrist F/T sensor.

With ``mode: payload_from_torques`` the solver subscribes ``joint_states``
(sensor_msgs/JointState with ``effort``), keeps every ``links_decimation``-th state and feeds
the core :class:`~inertial_id.core.joint_torque.torque_payload.TorquePayloadStream`: positions
smoothed
and differentiated by a Savitzky-Golay filter of ``links_window`` states on their stamps, the
arm's own torques from the link model (``links_file``, what ``inertial-id identify-links``
wrote; empty: the URDF's inertials), the payload's rows ``J^T Y`` at ``payload_frame`` (empty:
the last link's frame, so the payload is the change of the last link's parameters). At
``publish_rate`` (at most 20 Hz) it solves (pseudo-inertia LMI) and publishes ``~/parameters``
(inertial_id/InertialParameters, the F/T mode's message, ``header.frame_id`` the payload
frame, ``wrench_offset`` zero) and ``~/inertia``, with the same ``converged_*`` verdicts.
Once the mass has converged, the joint residual feeds the contact monitor
(:class:`~inertial_id.core.joint_torque.torque_payload.TorquePayloadOnline`; ``contact_detection``,
``confidence``, ``training_samples``): ``~/contact`` and ``~/external_wrench`` carry ``T^2``
and the external wrench on the payload estimated from the joint torques (payload frame),
every ``contact_decimation`` states and at every change; flagged states stay out of the
estimate. The contact timing is in seconds (``MIN_CONTACT``, ``GATE`` of the core module:
measured on a real arm), so ``on_samples``, ``off_samples``, ``release``, ``gate_margin`` and
``payload_change_after`` of the F/T mode do not apply here; a lasting residual level is taken
for a joint torque offset, not a new payload: call ``~/reset`` after a grasp. Without
``links_file``, ``links_joints`` names the joints that move (the others are locked at 0).
``~/reset`` (std_srvs/Trigger) starts over (a new payload). A failed solve or an
inconsistent estimate keeps the last published one. Every state enters the statistics once
(cumulative).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from std_srvs.srv import Trigger

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation import sdp
from inertial_id.core.joint_torque.torque_payload import (
    LinkTorqueModel,
    TorquePayloadIdentifier,
    TorquePayloadOnline,
    TorquePayloadStream,
)
from inertial_id.core.kinematics import JointMapper
from inertial_id.core.timepolicy import StampPolicy
from inertial_id.io.cdr import CdrDecoder
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import (
    Diagnostics,
    Number,
    RobotDescription,
    sensor_qos,
    set_period,
    steady_timer,
    to_stamp,
)
from inertial_id.nodes.contact import ContactPublisher
from inertial_id.nodes.conversions import body_to_inertia_stamped, estimate_to_msg
from inertial_id.nodes.links import decode_joint_state
from inertial_id.params.settings import online_config

STEP_PERIOD = 0.05
"""s between contact tests of the ready joint states (the estimate is solved at publish_rate,
at most once per step: :func:`solve_period`)."""


def solve_period(values: Mapping[str, Any]) -> float:
    """s between two solves: ``1 / publish_rate``, not shorter than :data:`STEP_PERIOD` (new
    joint states enter the statistics once per step)."""
    return max(1.0 / float(values["publish_rate"]), STEP_PERIOD)


def link_model(urdf: str, links_file: str, joints: list[str]) -> LinkTorqueModel:
    """The arm's own torques: the identified model of ``links_file`` on ``urdf``, or the
    URDF's inertials when no file is named (``joints`` move, empty: every movable joint; the
    others are locked at 0, e.g. a gripper's fingers)."""
    if not links_file:
        return LinkTorqueModel.from_urdf(urdf, joints=joints or None)
    return LinkTorqueModel.from_file(links_file, urdf)


class TorquePayloadMode:
    """See the module docstring; ``values`` are the solver node's parameter values."""

    def __init__(self, node: Node, values: Mapping[str, Any]) -> None:
        self.node = node
        self.values = dict(values)
        self.config = online_config(values)
        if self.config.payload.dedicated_solver:  # cvxpy solves until it is ready
            sdp.prepare_in_background(node.get_logger().info)
        self.decimation = max(1, int(values["links_decimation"]))
        self.online: TorquePayloadOnline | None = None
        self.mapper: JointMapper | None = None
        self.last_stamp: float | None = None
        self.frame = ""  # the payload frame, once the URDF is known
        self.received = self.rejected = self.solves = self.failures = 0
        self.policy = StampPolicy()
        self.decoder = CdrDecoder()
        self.status = (DiagnosticStatus.WARN, "waiting for the URDF")
        self.parameters_pub = node.create_publisher(InertialParameters, "~/parameters", 10)
        self.inertia_pub = node.create_publisher(InertiaStamped, "~/inertia", 10)
        self.diagnostics = Diagnostics(node, "payload from joint torques",
                                       self.diagnostic_status)
        node.create_subscription(JointState, "joint_states", self.on_joint_state,
                                 sensor_qos(500), raw=True)
        node.create_service(Trigger, "~/reset", self._reset)
        self.contacts = ContactPublisher(node, values["contact_decimation"])
        self.step_timer = steady_timer(node, STEP_PERIOD, self.step)
        self.timer = steady_timer(node, solve_period(values), self.solve_and_publish)
        self.description = RobotDescription(node, self.values, self.configure)

    def configure(self, urdf: str) -> None:
        """The link model and the payload's stream once the URDF is known."""
        links = link_model(urdf, str(self.values["links_file"]),
                           list(self.values["links_joints"]))
        identifier = TorquePayloadIdentifier(links, str(self.values["payload_frame"]) or None,
                                             epsilon=self.config.payload.epsilon,
                                             dedicated=self.config.payload.dedicated_solver)
        self.frame = identifier.kinematics.sensor_frame
        stream = TorquePayloadStream(identifier, int(self.values["links_window"]))
        self.online = TorquePayloadOnline(stream, self.config)
        self.mapper = JointMapper(links.model.joint_names)
        self.status = (DiagnosticStatus.WARN, "collecting joint states")
        self.node.get_logger().info(
            f"payload from the torques of {', '.join(links.model.joint_names)} at "
            f"{self.frame}")

    def reconfigure(self, values: Mapping[str, Any], changed: set[str]) -> None:
        """Runtime changes: decimations, publish period, epsilon, the verdicts' thresholds and
        the contact test's switch and confidence."""
        self.decimation = max(1, int(values["links_decimation"]))
        self.config = online_config(values)
        self.contacts.decimation = max(1, int(values["contact_decimation"]))
        if "publish_rate" in changed:
            set_period(self.timer, solve_period(values))
        if self.online is not None:
            self.online.config = self.config
            self.online.stream.identifier.estimator.epsilon = self.config.payload.epsilon

    def on_joint_state(self, raw: bytes) -> None:
        self.received += 1
        if self.online is None or self.mapper is None or (self.received - 1) % self.decimation:
            return
        try:
            stamp, q, effort, jumped = decode_joint_state(raw, self.decoder, self.mapper,
                                                          self.policy, self.last_stamp)
            if jumped:  # a bag played again, a clock reset: start over
                self.online.reset()
            self.online.stream.push(stamp, q, effort)
        except InertialIdError as exc:
            self.rejected += 1
            self.node.get_logger().warning(f"joint state dropped: {exc}",
                                           throttle_duration_sec=5.0)
            return
        self.last_stamp = stamp

    def step(self) -> None:
        """Take the ready states: contact test, then into the statistics unless in contact."""
        if self.online is None:
            return
        try:
            step = self.online.step()
        except InertialIdError as exc:
            self.node.get_logger().warning(f"joint states not used: {exc}",
                                           throttle_duration_sec=5.0)
            return
        if step is None:
            return
        for event in step.events:
            self.node.get_logger().info(f"{event} at t = {step.times[-1]:.3f} s")
        if self.online.estimate is not None and self.online.monitor is not None:
            self.contacts.publish(self.frame, step.times, step.residual, step.t2, step.contact,
                                  step.threshold, self.config.confidence)

    def solve_and_publish(self) -> None:
        """Solve and publish a consistent estimate (else keep the last)."""
        if self.online is None:
            return
        try:
            estimate = self.online.solve()
        except InertialIdError as exc:
            self.failures += 1
            self.status = (DiagnosticStatus.ERROR, f"solve failed, keeping the last: {exc}")
            self.node.get_logger().warning(self.status[1], throttle_duration_sec=10.0)
            return
        if estimate is None:
            return
        self.solves += 1
        header = Header(stamp=to_stamp(self.last_stamp or 0.0), frame_id=self.frame)
        judged = self.online.verdicts
        guard = self.contacts.guard  # built only while read; nothing non-finite leaves
        guard.publish_read(self.parameters_pub, lambda: estimate_to_msg(estimate, header, judged))
        guard.publish_read(self.inertia_pub,
                           lambda: body_to_inertia_stamped(estimate.body, header))
        self.status = (DiagnosticStatus.OK if judged.payload else DiagnosticStatus.WARN,
                       f"{estimate.body.mass:.4g} kg from {self.online.stream.samples} states"
                       + ("" if judged.payload else " (not converged)"))

    def _reset(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        if self.online is not None:
            self.online.reset()
        response.success, response.message = True, "payload estimate reset"
        return response

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: counts and the current mass."""
        values: dict[str, Number] = {
            "joint_states_received": self.received, "joint_states_rejected": self.rejected,
            "samples_used": self.online.stream.samples if self.online else 0,
            "solves": self.solves, "solve_failures": self.failures,
            "contacts": self.online.contacts if self.online else 0,
            "messages_withheld_not_finite": sum(self.contacts.guard.withheld.values())}
        estimate = self.online.estimate if self.online else None
        if estimate is not None:
            values["mass_kg"] = float(estimate.body.mass)
            values["mass_std_kg"] = float(estimate.std[0])
        return self.status[0], self.status[1], values
