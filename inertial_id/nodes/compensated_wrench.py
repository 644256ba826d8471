"""The gatherer's ``~/compensated_wrench``: each wrench as it arrives, less the F/T bias and the
payload's wrench (:mod:`inertial_id.core.compensated_wrench`).

Inputs besides the gatherer's own joint states and wrenches:

- ``solver/parameters`` (inertial_id/InertialParameters): the latest estimate, ``pi`` and
  ``wrench_offset``, brought into the sensor frame when the solver publishes in another
  ``output_frame``; every published estimate is used (its ``converged`` says whether it is
  final);
- the solver's ``wrench_sign`` parameter, read once from the solver's parameter service (the
  gatherer keeps no copy that could disagree);
- ``applier/compensation``: what a compensating driver already subtracts (the same listener as
  the solver's); while the driver switches, nothing is published.

Published (``geometry_msgs/WrenchStamped``, the wrench's own stamp and frame, N and N m;
reliable, so that reliable and best-effort subscribers both match) only while someone
subscribes: without a subscriber the kinematics are not computed, and the solver's estimates
are not even subscribed to (each reader of them costs the solver a delivery). Its
latency, from the wrench's callback to the publication, is on ``/diagnostics``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python
from rclpy.parameter_client import AsyncParameterClient
from rclpy.serialization import deserialize_message
from rclpy.subscription import Subscription

from inertial_id.core.compensated_wrench import WrenchCompensation
from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.compensation import DriverCompensation
from inertial_id.core.frames import frame_placement, pi_transform, wrench_transform
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.regressor import wrench_sign
from inertial_id.io.cdr import CdrEncoder
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import Number, RecentValues, pipeline_qos
from inertial_id.nodes.compensation import CompensationListener

LATENCY_WINDOW = 2000
"""Latest publications whose latency the diagnostics summarise."""
SIGN_RETRY = 1.0
"""s between asks for the solver's ``wrench_sign`` until it answers."""
SUBSCRIBERS_EVERY = 0.2
"""s between asks whether anyone subscribes (a new subscriber waits for it at most, and for
the solver's next estimate)."""


class CompensatedWrenchOutput:
    """See the module docstring. ``node`` is the gatherer; :meth:`configure` once the URDF's
    kinematics are known."""

    def __init__(self, node: Node, queue_depth: int) -> None:
        self.node = node
        # Reliable: a reliable subscriber (cartesian_controllers' ft_sensor_wrench, rclcpp's
        # default) matches it, and so does a best-effort one (sensor-data QoS).
        self.publisher = node.create_publisher(WrenchStamped, "~/compensated_wrench",
                                               pipeline_qos(queue_depth))
        self.encoder = CdrEncoder()
        self.compensation: WrenchCompensation | None = None
        self.kinematics: SensorKinematics | None = None
        self.sign: float | None = None
        self.estimate: bytes | None = None  # the latest, serialised, not yet taken
        self.subscribed = False  # someone subscribes to ~/compensated_wrench
        self.estimates: Subscription | None = None  # to solver/parameters, while subscribed
        self.driver: DriverCompensation | None = None
        self.driver_pi: np.ndarray | None = None  # the driver's compensation last taken
        self.listener: CompensationListener | None = None
        self.published = 0
        self.skipped = 0  # wrenches with a subscriber but no value (no estimate, stale joints)
        self.refused = ""  # why the last estimate was not used
        self.latency = RecentValues(LATENCY_WINDOW)
        self._latencies: list[float] = []  # since the last diagnostics
        self.sign_client = AsyncParameterClient(node, "solver")
        self.sign_timer = node.create_timer(SIGN_RETRY, self.ask_sign)
        node.create_timer(SUBSCRIBERS_EVERY, self.follow_subscribers)

    def follow_subscribers(self) -> None:
        """Whether anyone subscribes; the solver's estimates are subscribed to only then
        (the solver publishes them up to ``publish_rate`` a second: each reader costs it a
        delivery), and kept serialised: one is decoded only when a wrench is compensated
        with it."""
        self.subscribed = self.publisher.get_subscription_count() > 0
        if self.subscribed and self.estimates is None:
            self.estimates = self.node.create_subscription(
                InertialParameters, "solver/parameters", self.on_estimate, 10, raw=True)
        elif not self.subscribed and self.estimates is not None:
            self.node.destroy_subscription(self.estimates)
            self.estimates = None

    def configure(self, kinematics: SensorKinematics) -> None:
        """The sensor's kinematics (the gatherer's joints, in its order)."""
        self.kinematics = kinematics
        self._start()

    def ask_sign(self) -> None:
        """Ask the solver for its ``wrench_sign`` (again, until it answers)."""
        if self.sign is not None or not self.sign_client.services_are_ready():
            return
        self.sign_client.get_parameters(["wrench_sign"]).add_done_callback(self.on_sign)

    def on_sign(self, future: Any) -> None:
        response = future.result()
        if self.sign is not None or response is None or not response.values:
            return
        try:
            self.sign = wrench_sign(str(parameter_value_to_python(response.values[0])))
        except InertialIdError as exc:
            self.refused = f"solver wrench_sign: {exc}"
            return
        self.sign_timer.cancel()
        self._start()

    def _start(self) -> None:
        """The compensation once both the kinematics and the sign are known."""
        if self.kinematics is None or self.sign is None or self.compensation is not None:
            return
        self.compensation = WrenchCompensation(self.kinematics.compute_one, self.sign)
        self.driver = DriverCompensation(self.sign)
        model = self.kinematics.model
        self.listener = CompensationListener(self.node, self.driver, lambda: (0.0, 0.0),
                                             lambda: model)

    def on_estimate(self, raw: bytes) -> None:
        """The solver's latest estimate, kept serialised until a wrench needs it."""
        self.estimate = raw

    def _take_estimate(self) -> None:
        """The latest estimate into the compensation (brought into the sensor frame when the
        solver publishes in another ``output_frame``); one that cannot be used is named and
        the last kept."""
        raw, self.estimate = self.estimate, None
        assert raw is not None and self.compensation is not None and self.kinematics is not None
        msg = deserialize_message(raw, InertialParameters)
        pi, offset = np.asarray(msg.pi, float), np.asarray(msg.wrench_offset, float)
        frame, sensor = msg.header.frame_id, self.kinematics.sensor_frame
        try:
            if frame and frame != sensor:
                frame_M_sensor = frame_placement(self.kinematics.model, frame, sensor)
                pi = pi_transform(frame_M_sensor) @ pi
                offset = wrench_transform(frame_M_sensor) @ offset
            self.compensation.set_estimate(pi, offset)
            self.refused = ""
        except InertialIdError as exc:
            self.refused = str(exc)
            self.node.get_logger().warning(f"estimate not used for ~/compensated_wrench: {exc}",
                                           throttle_duration_sec=5.0)

    @property
    def wanted(self) -> bool:
        """Someone subscribes (:meth:`follow_subscribers`) and the compensation can run."""
        return self.subscribed and self.compensation is not None

    def joint_state(self, t: float, position: np.ndarray) -> None:
        """An accepted joint state (s; model order)."""
        if self.wanted:
            assert self.compensation is not None
            if self.estimate is not None:
                self._take_estimate()
            self.compensation.add_joint_state(t, position)

    def wrench(self, arrival: float, stamp: float, t: float, frame: str,
               wrench: np.ndarray) -> None:
        """A wrench in the stream's frame: its callback's start (``time.perf_counter`` s),
        its stamp as published, ``t`` the stamp on the joint states' clock (the delay taken
        off), its frame and values. A non-finite one, or one stamped away from the joint
        states (:data:`~inertial_id.core.compensated_wrench.MAX_EXTRAPOLATION`), is skipped
        and counted."""
        if not self.wanted:
            return
        if not np.isfinite(wrench).all():
            self.skipped += 1
            return
        assert self.compensation is not None and self.driver is not None
        if self.listener is not None and frame != self.listener.sensor:
            self.listener.sensor_frame(frame)
        if self.driver.changing:
            self.skipped += 1
            return
        if self.estimate is not None:
            self._take_estimate()
        if self.driver.current is not self.driver_pi:
            self.driver_pi = self.driver.current
            self.compensation.set_driver_payload(self.driver_pi)
        value = self.compensation.compensate(t, wrench)
        if value is None:
            self.skipped += 1
            return
        self.publisher.publish(self.encoder.wrench(stamp, frame, value))
        self.published += 1
        self._latencies.append(time.perf_counter() - arrival)

    def values(self) -> dict[str, Number]:
        """Diagnostics: published, skipped, the latency's p50/p99 (ms) and whether an
        estimate is in use."""
        self.latency.extend(np.array(self._latencies))
        self._latencies.clear()
        p50, p99 = 1e3 * self.latency.percentiles([50, 99]) if len(self.latency) else (0.0, 0.0)
        return {"compensated_wrenches_published": self.published,
                "compensated_wrenches_skipped": self.skipped,
                "compensated_wrench_latency_p50_ms": float(p50),
                "compensated_wrench_latency_p99_ms": float(p99),
                "compensated_wrench_ready": bool(self.compensation is not None
                                                 and self.compensation.ready),
                "compensated_wrench_estimate_refused": bool(self.refused)}

