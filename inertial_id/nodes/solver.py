"""solver: the physically consistent payload estimate from sensor-frame samples.

Subscribes ``sensor_samples`` (inertial_id/SensorSamples); accumulates sufficient statistics
(core :class:`~inertial_id.core.payload.PayloadIdentifier`) and publishes at ``publish_rate``
``~/parameters`` (inertial_id/InertialParameters) and ``~/inertia`` (geometry_msgs/
InertiaStamped, tensor about the CoM), plus a status on ``/diagnostics``. A failed solve keeps
the last good estimate; nothing physically inconsistent is ever published.
"""

from __future__ import annotations

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import InertiaStamped
from rclpy.node import Node
from std_msgs.msg import Header

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimators import Estimate
from inertial_id.core.payload import PayloadConfig, PayloadIdentifier
from inertial_id.msg import InertialParameters, SensorSamples
from inertial_id.nodes.common import declare, pipeline_qos, run, to_stamp
from inertial_id.nodes.conversions import (
    body_to_inertia_stamped,
    estimate_to_msg,
    sensor_samples_from_msg,
)


class Solver(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("solver", **kwargs)
        defaults = PayloadConfig()
        config = PayloadConfig(
            wrench_sign=declare(self, "wrench_sign", defaults.wrench_sign,
                                "payload_on_sensor (F/T sensors) or sensor_on_payload"),
            force_noise_std=declare(self, "force_noise_std", defaults.force_noise_std,
                                    "F/T force noise std, N (weights force rows)"),
            torque_noise_std=declare(self, "torque_noise_std", defaults.torque_noise_std,
                                     "F/T torque noise std, N m (weights torque rows)"),
            forgetting_factor=declare(self, "forgetting_factor", defaults.forgetting_factor,
                                      "per-sample exponential forgetting in (0, 1]"),
            method=declare(self, "method", defaults.method, "lmi_sdp or least_squares"),
            epsilon=declare(self, "epsilon", defaults.epsilon,
                            "margin of J(pi) >= epsilon I, kg m^2"),
        )
        rate = declare(self, "publish_rate", 2.0, "estimates published per second (Hz)")
        self.min_samples = declare(self, "min_samples", 500, "samples before the first solve")
        self.converged_mass_std = declare(
            self, "converged_mass_std", 0.01, "relative mass std below which it has converged")
        self.identifier = PayloadIdentifier(config)
        self.estimate: Estimate | None = None
        self.frame_id = ""
        self.last_stamp = None
        self.status = (DiagnosticStatus.WARN, "waiting for samples")
        self.parameters_pub = self.create_publisher(InertialParameters, "~/parameters", 10)
        self.inertia_pub = self.create_publisher(InertiaStamped, "~/inertia", 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_subscription(SensorSamples, "sensor_samples", self.on_samples, pipeline_qos())
        self.create_timer(1.0 / rate, self.solve_and_publish)

    def on_samples(self, msg: SensorSamples) -> None:
        if not msg.stamps:
            return
        try:
            _, twist, proper, wrench = sensor_samples_from_msg(msg)
            self.identifier.add(twist, proper, wrench)
        except (InertialIdError, ValueError) as exc:
            self.get_logger().warn(f"sensor samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        self.frame_id = msg.header.frame_id
        self.last_stamp = msg.header.stamp

    def converged(self, estimate: Estimate) -> bool:
        """Mass known to ``converged_mass_std`` (relative) and the estimate consistent."""
        return bool(estimate.physically_consistent
                    and estimate.std[0] < self.converged_mass_std * abs(estimate.pi[0]))

    def solve_and_publish(self) -> None:
        if self.identifier.statistics.samples >= self.min_samples:
            try:
                self.estimate = self.identifier.estimate()
                self.status = (DiagnosticStatus.OK, "estimating")
            except InertialIdError as exc:
                self.status = (DiagnosticStatus.ERROR, f"solve failed, keeping last: {exc}")
                self.get_logger().warn(self.status[1], throttle_duration_sec=5.0)
        self.publish_diagnostics()
        if self.estimate is None or not self.estimate.physically_consistent:
            return
        header = Header(stamp=self.last_stamp or to_stamp(0.0), frame_id=self.frame_id)
        converged = self.converged(self.estimate)
        self.parameters_pub.publish(estimate_to_msg(self.estimate, header, converged))
        self.inertia_pub.publish(body_to_inertia_stamped(self.estimate.body, header))

    def publish_diagnostics(self) -> None:
        level, message = self.status
        values = {"samples": f"{self.identifier.statistics.samples:.0f}"}
        if self.estimate is not None:
            e = self.estimate
            values.update({
                "mass_kg": f"{e.body.mass:.4f}",
                "mass_std_kg": f"{e.std[0]:.2g}",
                "com_m": np.array2string(e.body.com, precision=4),
                "condition_number": f"{e.condition_number:.3g}",
                "min_pseudo_inertia_eigenvalue": f"{e.min_eigenvalue:.3g}",
            })
        status = DiagnosticStatus(
            level=level, name=f"{self.get_name()}: payload estimate", message=message,
            hardware_id=self.frame_id,
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        self.diagnostics_pub.publish(
            DiagnosticArray(header=Header(stamp=self.get_clock().now().to_msg()),
                            status=[status])
        )


def main(args: list[str] | None = None) -> int:
    """Run the solver node."""
    return run(Solver, args)
