"""solver: the physically consistent payload estimate and contact monitoring.

Subscribes ``sensor_samples`` (inertial_id/SensorSamples) and runs the core
:class:`~inertial_id.core.online.OnlineEstimator`: contact-gated sufficient statistics, a
Hotelling T^2 monitor of the residual wrench, restart on a payload change. Publishes
``~/parameters`` (inertial_id/InertialParameters) and ``~/inertia`` (geometry_msgs/
InertiaStamped, about the CoM) at ``publish_rate``; ``~/contact`` (inertial_id/ContactAnomaly)
and ``~/external_wrench`` (geometry_msgs/WrenchStamped: measured minus predicted wrench, the
gravity- and inertia-compensated F/T signal) every ``contact_decimation`` samples and at every
contact change; a status on ``/diagnostics``. Services (std_srvs/Trigger): ``~/reset``,
``~/tare`` (re-estimate the F/T offset with the payload known), ``~/freeze``, ``~/resume``.
A failed solve keeps the last good estimate; nothing physically inconsistent is published.
With ``mode: links`` it identifies the robot's links from joint torques instead
(:mod:`inertial_id.nodes.links`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from rclpy.node import Node
from std_msgs.msg import Header
from std_srvs.srv import Trigger

from inertial_id.cdr import CdrDecoder
from inertial_id.core.errors import InertialIdError
from inertial_id.core.online import OnlineEstimator, StepResult
from inertial_id.core.timepolicy import RESETS
from inertial_id.msg import ContactAnomaly, InertialParameters, SensorSamples
from inertial_id.nodes.common import (
    Diagnostics,
    RecentValues,
    UpstreamLoss,
    declare_all,
    pipeline_qos,
    run,
    set_period,
    steady_timer,
    to_stamp,
)
from inertial_id.nodes.conversions import (
    UndecodableError,
    array_to_wrench,
    body_to_inertia_stamped,
    estimate_to_msg,
    sensor_samples_from_bytes,
)
from inertial_id.nodes.links import LinksMode
from inertial_id.settings import SOLVER_PARAMS, online_config

LATENCY_WINDOW = 20000
"""Samples whose latency (node clock when used minus wrench stamp) the diagnostics' p50 and
p99 cover: the last 20 s at 1 kHz."""


class Solver(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("solver", **kwargs)
        self.links: LinksMode | None = None
        self.online: OnlineEstimator | None = None
        values = declare_all(self, SOLVER_PARAMS, self.apply_parameters)
        if values["mode"] == "links":
            self.links = LinksMode(self, values)
            return
        if values["mode"] != "payload":
            raise InertialIdError(f"mode must be payload or links, got {values['mode']!r}")
        self.online = OnlineEstimator(online_config(values))
        rate = values["publish_rate"]
        self.decimation = max(1, values["contact_decimation"])
        self.frame_id = ""
        self.last_stamp: float | None = None  # s, stamp of the newest sample used
        self.status = (DiagnosticStatus.WARN, "waiting for samples")
        self.samples_received = self.undecodable = self.invalid = 0
        self.upstream = UpstreamLoss()
        self.latencies = RecentValues(LATENCY_WINDOW)
        self._since_contact_msg = 0
        self._was_in_contact = False
        self._logged_setup_error = ""
        self.parameters_pub = self.create_publisher(InertialParameters, "~/parameters", 10)
        self.inertia_pub = self.create_publisher(InertiaStamped, "~/inertia", 10)
        self.contact_pub = self.create_publisher(ContactAnomaly, "~/contact", 100)
        self.external_pub = self.create_publisher(WrenchStamped, "~/external_wrench", 100)
        self.diagnostics = Diagnostics(self, "payload estimate", self.diagnostic_status)
        self.decoder = CdrDecoder()
        self.create_subscription(SensorSamples, "sensor_samples", self.on_samples, pipeline_qos(),
                                 raw=True)
        self.solve_timer = steady_timer(self, 1.0 / rate, self.solve_and_publish)
        for name, action in (("reset", self.online.reset), ("tare", self.online.tare),
                             ("freeze", self._freeze), ("resume", self._resume)):
            self.create_service(Trigger, f"~/{name}", self._service(name, action))

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """Runtime parameter changes (:class:`~inertial_id.nodes.common.LiveParameters`):
        the estimator's new configuration, the contact decimation, the publish period."""
        if self.links is not None:
            self.links.reconfigure(values, changed)
            return
        if self.online is None:  # still starting up
            return
        self.online.reconfigure(online_config(values))
        self.decimation = int(values["contact_decimation"])
        if "publish_rate" in changed:
            set_period(self.solve_timer, 1.0 / float(values["publish_rate"]))

    def _freeze(self) -> None:
        self.online.frozen = True

    def _resume(self) -> None:
        self.online.frozen = False

    def _service(self, name: str, action: Callable[[], object]) -> Callable:
        def handle(_: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                action()
                response.success, response.message = True, f"{name}: done"
            except InertialIdError as exc:
                response.success, response.message = False, f"{name}: {exc}"
            self.get_logger().info(response.message)
            return response

        return handle

    def on_samples(self, raw: bytes) -> None:
        try:
            samples, frame_id, before = sensor_samples_from_bytes(raw, self.decoder)
        except UndecodableError as exc:
            self.undecodable += 1
            self.get_logger().warning(f"sensor samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        if not samples["times"].size:
            return
        self.samples_received += samples["times"].size
        self.upstream.update(before, samples["times"].size)
        try:
            step = self.online.add(**samples)
        except InertialIdError as exc:
            self.invalid += samples["times"].size
            self.get_logger().warning(f"sensor samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        if not step.times.size:
            return
        now = self.get_clock().now().nanoseconds * 1e-9
        self.latencies.extend(now - step.times)
        self.frame_id = self.diagnostics.hardware_id = frame_id
        self.last_stamp = float(step.times[-1])
        for event in step.events:
            self.get_logger().info(f"{event} at t = {step.times[-1]:.3f} s")
        if self.online.estimate is not None:
            self.publish_contact(step)

    def publish_contact(self, step: StepResult) -> None:
        """ContactAnomaly and external wrench, decimated, and at every contact change."""
        changes = np.flatnonzero(np.diff(np.concatenate(([self._was_in_contact],
                                                         step.contact))))
        due = set(changes.tolist())
        n = step.times.size
        first = (self.decimation - 1 - self._since_contact_msg) % self.decimation
        due.update(range(first, n, self.decimation))
        self._since_contact_msg = (self._since_contact_msg + n) % self.decimation
        self._was_in_contact = bool(step.contact[-1])
        for k in sorted(due):
            header = Header(stamp=to_stamp(float(step.times[k])), frame_id=self.frame_id)
            residual = array_to_wrench(step.residual[k])
            trained = bool(np.isfinite(step.threshold))
            self.contact_pub.publish(ContactAnomaly(
                header=header, monitor_trained=trained, t2=float(step.t2[k]),
                threshold=float(step.threshold) if trained else 0.0,
                confidence=self.online.config.confidence, contact=bool(step.contact[k]),
                residual=residual,
            ))
            self.external_pub.publish(WrenchStamped(header=header, wrench=residual))

    def solve_and_publish(self) -> None:
        try:
            self.online.solve()
            self.status = self._status()
        except InertialIdError as exc:
            self.status = (DiagnosticStatus.ERROR, f"solve failed, keeping last: {exc}")
            self.get_logger().warning(self.status[1], throttle_duration_sec=5.0)
        estimate = self.online.estimate
        if estimate is None or not estimate.physically_consistent:
            return
        header = Header(stamp=to_stamp(self.last_stamp or 0.0), frame_id=self.frame_id)
        self.parameters_pub.publish(estimate_to_msg(estimate, header, self.online.verdicts,
                                                    self.online.setup_error))
        self.inertia_pub.publish(body_to_inertia_stamped(estimate.body, header))

    def _status(self) -> tuple[bytes, str]:
        online = self.online
        error = online.setup_error
        if error != self._logged_setup_error:
            if error:
                self.get_logger().error(f"set-up: {error}")
            self._logged_setup_error = error
        if error:
            return DiagnosticStatus.ERROR, f"set-up: {error}"
        if online.estimate is None:
            return DiagnosticStatus.WARN, "collecting samples"
        if online.in_contact:
            return DiagnosticStatus.WARN, "contact: estimate held"
        if online.frozen:
            return DiagnosticStatus.OK, "frozen"
        if not online.converged:
            return DiagnosticStatus.WARN, "converging"
        if not online.verdicts.inertia:
            return DiagnosticStatus.OK, "mass and CoM converged; inertia not (yet) determined"
        return DiagnosticStatus.OK, "converged"

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, str]]:
        """Diagnostics: state, counts, latency (stamp to use), the estimate's key numbers."""
        level, message = self.status
        online = self.online
        ledger = online.ledger()
        values = {"samples_received": str(self.samples_received),
                  "samples_used": str(ledger["used"]),
                  "samples_held": str(ledger["held"]),
                  "messages_undecodable": str(self.undecodable),
                  "samples_lost_upstream": str(self.upstream.lost),
                  "dropped_invalid": str(self.invalid),
                  **{k: str(v) for k, v in ledger.items() if k.startswith("dropped_")},
                  "contacts": str(len(online.contacts)),
                  "payload_changes": str(len(online.payload_changes)),
                  "monitor": ("trained" if online.monitor.ready else "training"),
                  "stamp_resets": str(online.counters[RESETS])}
        if online.monitor.ready:
            values["t2_threshold"] = f"{online.monitor.threshold:.3g}"
        if len(self.latencies):
            p50, p99 = self.latencies.percentiles([50, 99]) * 1e3
            values.update({"latency_p50_ms": f"{p50:.2f}", "latency_p99_ms": f"{p99:.2f}"})
        if online.estimate is not None:
            e = online.estimate
            v = online.verdicts
            values.update({
                "mass_kg": f"{e.body.mass:.4f}",
                "mass_std_kg": f"{e.std[0]:.2g}",
                "mass_converged": str(v.mass), "com_converged": str(v.com),
                "inertia_converged": str(v.inertia),
                **{f"com_{axis}_m": f"{c:.5f}" for axis, c in zip("xyz", e.body.com, strict=True)},
                **{f"com_{axis}_std_m": f"{c:.2g}"
                   for axis, c in zip("xyz", e.com_std, strict=True)},
                "condition_number": f"{e.condition_number:.3g}",
                "min_pseudo_inertia_eigenvalue": f"{e.min_eigenvalue:.3g}",
            })
        return level, message, values


def main(args: list[str] | None = None) -> int:
    """Run the solver node."""
    return run(Solver, args)
