"""The solver node's ``links`` mode: the robot's own link parameters from joint torques.

With ``mode: links`` the solver subscribes ``joint_states`` (sensor_msgs/JointState with
``effort``) instead of ``sensor_samples``. It keeps every ``links_decimation``-th state of the
last ``links_horizon`` seconds and every ``links_solve_period`` seconds identifies the links
with the same code as ``inertial-id identify-links``
(:func:`inertial_id.core.joint_torque.link_selection.identify_links`, at the node's prior weight):
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

from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_selection import LinkOptions, identify_links
from inertial_id.core.joint_torque.links import estimate_document, link_document
from inertial_id.core.kinematics import JointMapper, load_urdf_model, movable_joint_names
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.signals import savitzky_golay
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

MIN_STATES = 200
"""Kept joint states before the first fit."""


def decode_joint_state(raw: bytes, decoder: CdrDecoder, mapper: JointMapper,
                       policy: StampPolicy, last: float | None
                       ) -> tuple[float, np.ndarray, np.ndarray, bool]:
    """A serialized JointState with efforts -> ``(stamp, q, effort, jumped)`` in the
    mapper's joint order. ``jumped``: the stamps restarted (a bag played again, a clock
    reset): the caller starts over, and ``last`` no longer applies. :class:`SampleError` for
    NaN/inf, missing joints, a stamp jumping away from the stream or not after ``last``."""
    msg = joint_state_from_bytes(raw, decoder)
    q = mapper.select(msg.names, msg.position)
    effort = mapper.select(msg.names, msg.effort)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(effort))):
        raise SampleError("NaN or inf in the positions or efforts")
    accepted, jumped = policy.accept(msg.stamp)
    if not accepted:
        raise SampleError(f"stamp {msg.stamp:.3f} s jumps away from the stream")
    if last is not None and not jumped and msg.stamp <= last:
        raise SampleError("stamp not after the previous one")
    return msg.stamp, q, effort, jumped


class LinksMode:
    """See the module docstring; ``values`` are the solver node's parameter values."""

    def __init__(self, node: Node, values: Mapping[str, Any]) -> None:
        self.node = node
        self.options = LinkOptions(method=values["links_method"],
                                   prior_weight=float(values["links_prior_weight"]),
                                   fit_gains=bool(values["links_fit_gains"]),
                                   friction=FrictionModel())
        self.window = int(values["links_window"])
        self.decimation = max(1, int(values["links_decimation"]))
        self.horizon = float(values["links_horizon"])
        self.requested_joints = list(values["links_joints"])
        self.model: LinkModel | None = None
        self.mapper: JointMapper | None = None
        self.states: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self.received = self.rejected = self.fits = 0
        self.policy = StampPolicy()
        self.status = (DiagnosticStatus.WARN, "waiting for the URDF")
        self.last_rms: dict[str, float] = {}
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
        self.options = replace(self.options, method=values["links_method"],
                               prior_weight=float(values["links_prior_weight"]),
                               fit_gains=bool(values["links_fit_gains"]))
        self.decimation = max(1, int(values["links_decimation"]))
        self.horizon = float(values["links_horizon"])
        if "links_solve_period" in changed:
            set_period(self.timer, float(values["links_solve_period"]))

    def configure(self, urdf: str) -> None:
        """The link model once the URDF is known; joints not identified are locked at 0."""
        movable = movable_joint_names(load_urdf_model(urdf))
        joints = self.requested_joints or movable
        unknown = sorted(set(joints) - set(movable))
        if unknown:
            raise InertialIdError(f"links_joints not movable in the URDF: {', '.join(unknown)}")
        self.model = LinkModel(urdf, joints=joints,
                               locked={n: 0.0 for n in movable if n not in joints})
        self.mapper = JointMapper(self.model.joint_names)
        self.status = (DiagnosticStatus.WARN, "collecting joint states")
        self.node.get_logger().info(f"identifying links {', '.join(self.model.link_names)}")

    def on_joint_state(self, raw: bytes) -> None:
        self.received += 1
        if self.mapper is None or (self.received - 1) % self.decimation:
            return
        last = self.states[-1][0] if self.states else None
        try:
            stamp, q, effort, jumped = decode_joint_state(raw, self.decoder, self.mapper,
                                                          self.policy, last)
        except InertialIdError as exc:
            self.rejected += 1
            self.node.get_logger().warning(f"joint state dropped: {exc}",
                                           throttle_duration_sec=5.0)
            return
        if jumped:  # a bag played again, a clock reset: start over
            self.states.clear()
        self.states.append((stamp, q, effort))
        while self.states and self.states[0][0] < stamp - self.horizon:
            self.states.popleft()

    def rows(self) -> tuple[np.ndarray, ...]:
        """(q, qd, qdd, effort) of the kept states, filtered, without the filter's edges."""
        t = np.array([s[0] for s in self.states])
        q = np.array([s[1] for s in self.states])
        effort = np.array([s[2] for s in self.states])
        smooth = [savitzky_golay(t, q, self.window, 3, d) for d in (0, 1, 2)]
        inner = slice(self.window // 2, t.size - self.window // 2)
        return tuple(a[inner] for a in (*smooth, effort))

    def solve_and_publish(self) -> None:
        """Fit on the kept states; publish if every link is physically consistent."""
        if self.model is None or len(self.states) < max(MIN_STATES, 3 * self.window):
            return
        try:
            problem, cad, estimate = identify_links(self.model, self.rows(), self.options)
            standard = estimate.standard
            if standard is None:
                raise InertialIdError(f"{self.options.method} gave no standard parameters")
            own = standard - self.model.attachments
            bad = [name for name, pi in zip(self.model.link_names, own, strict=True)
                   if not BodyParameters.from_pi(pi).is_physically_consistent()]
            if bad:
                raise InertialIdError(f"links not physically consistent: {', '.join(bad)}")
        except InertialIdError as exc:
            self.status = (DiagnosticStatus.ERROR, f"fit failed, keeping the last: {exc}")
            self.node.get_logger().warning(self.status[1], throttle_duration_sec=10.0)
            return
        self.fits += 1
        self.last_rms = dict(zip(self.model.joint_names, problem.rms(estimate).tolist(),
                                 strict=True))
        self._publish(own, problem.samples, self.states[-1][0])
        doc = {"joints": self.model.joint_names, "samples": problem.samples,
               "friction_model": problem.friction_model.settings(),
               "torque_rms": self.last_rms,
               "torque_rms_cad": dict(zip(self.model.joint_names, problem.rms(cad).tolist(),
                                          strict=True))}
        doc.update(estimate_document(problem, estimate, self.options.max_relative_std))
        doc["links"] = link_document(self.model, standard)
        self.document_pub.publish(String(data=yaml.safe_dump(doc, sort_keys=False)))
        self.status = (DiagnosticStatus.OK, f"fit {self.fits} on {problem.samples} states")

    def _publish(self, own: np.ndarray, samples: int, stamp: float) -> None:
        for name, pi in zip(self.model.link_names, own, strict=True):
            msg = body_to_msg(BodyParameters.from_pi(pi), Header(stamp=to_stamp(stamp),
                                                                 frame_id=name))
            msg.std = [float("nan")] * 10
            msg.samples_used = int(samples)
            msg.method = f"links_{self.options.method}"
            msg.converged = True
            self.parameters_pub.publish(msg)

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: counts and the last fit's torque RMS per joint."""
        values: dict[str, Number] = {"joint_states_received": self.received,
                                     "joint_states_kept": len(self.states),
                                     "joint_states_rejected": self.rejected, "fits": self.fits}
        values.update({f"torque_rms_{k}": float(v) for k, v in self.last_rms.items()})
        return self.status[0], self.status[1], values
