"""solver: the physically consistent payload estimate and contact monitoring.

Subscribes ``sensor_samples`` (inertial_id/SensorSamples) and runs the core
:class:`~inertial_id.core.estimation.stage.EstimationStage` that replay runs too: the driver's
compensation restored, contact-gated sufficient statistics, a Hotelling T^2 monitor of the
residual wrench, restart on a payload change, solves on the node's steady clock. Publishes
``~/parameters`` (inertial_id/InertialParameters), ``~/inertia`` (geometry_msgs/
InertiaStamped, about the CoM) after each solve: after a batch of samples, up to
``publish_rate`` (10 Hz while solves cost milliseconds; once a second without data), once
the new samples are ``solve_share`` of those held (every batch or two in the first second),
and ``~/markers``
(visualization_msgs/MarkerArray for RViz: CoM, equivalent box, mass) at most 10 times a second;
``~/contact`` (inertial_id/ContactAnomaly) and ``~/external_wrench`` (geometry_msgs/
WrenchStamped: measured minus predicted wrench, the gravity- and inertia-compensated F/T
signal) every ``contact_decimation`` samples and at every
contact change; a status on ``/diagnostics``. Services (std_srvs/Trigger): ``~/reset``,
``~/tare`` (re-estimate the F/T offset with the payload known), ``~/freeze``, ``~/resume``,
``~/save`` (the estimate to ``calibration_file``; ``initial_payload_file`` starts from one).
A failed solve keeps the last good estimate; nothing physically inconsistent is published, and
no message with a NaN or inf (withheld and counted: ``messages_withheld_not_finite``). The
set-up check's time-offset figure and evidence are on ``/diagnostics`` (``setup_time_offset_*``).
The dedicated SDP solver (:mod:`inertial_id.core.estimation.sdp`) is compiled or loaded in the
background at start; cvxpy solves until it is ready.
With ``mode: links`` it identifies the robot's links from joint torques instead
(:mod:`inertial_id.nodes.links`); with ``mode: payload_from_torques`` the payload from joint
torques, for arms without a wrist F/T sensor (:mod:`inertial_id.nodes.torque_payload`).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import InertiaStamped
from std_msgs.msg import Header
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation import sdp
from inertial_id.core.estimation.online import WRENCH_AXES, OnlineEstimator
from inertial_id.core.estimation.online_types import StepResult, Verdicts
from inertial_id.core.estimation.stage import IDLE_PERIOD, EstimationStage
from inertial_id.core.frames import OutputFrame
from inertial_id.core.kinematics import load_urdf_model, require_frame
from inertial_id.core.parameters import vector_from_symmetric
from inertial_id.core.timepolicy import RESETS
from inertial_id.io import calibration
from inertial_id.io.cdr import CdrDecoder
from inertial_id.msg import InertialParameters, SensorSamples
from inertial_id.nodes.common import (
    Diagnostics,
    Number,
    PipelineNode,
    RecentValues,
    RobotDescription,
    UpstreamLoss,
    given_value,
    pipeline_qos,
    steady_timer,
    to_stamp,
)
from inertial_id.nodes.compensation import CompensationListener
from inertial_id.nodes.contact import ContactPublisher
from inertial_id.nodes.conversions import (
    UndecodableError,
    body_to_inertia_stamped,
    clear_markers,
    estimate_to_markers,
    estimate_to_msg,
    sensor_samples_from_bytes,
)
from inertial_id.nodes.links import LinksMode
from inertial_id.nodes.runner import run
from inertial_id.nodes.torque_payload import TorquePayloadMode
from inertial_id.params.settings import (
    initial_payload,
    online_config,
    online_estimator,
)
from inertial_id.params.spec import Param
from inertial_id.params.table import SOLVER_MODE, SOLVER_PARAMS, solver_params

MODES = {"links": LinksMode, "payload_from_torques": TorquePayloadMode}
"""The solver's modes that read joint_states instead of sensor_samples."""
INERTIA_KEYS = ("xx", "xy", "xz", "yy", "yz", "zz")
"""Order of :func:`~inertial_id.core.parameters.vector_from_symmetric`."""
MARKER_PERIOD = 0.1
"""s between two ``~/markers`` (RViz needs no more)."""
LATENCY_WINDOW = 20000
"""Samples whose latency (node clock when used minus wrench stamp) the diagnostics' p50 and
p99 cover: the last 20 s at 1 kHz."""


class Solver(PipelineNode):
    """See the module docstring."""

    NAME, PARAMS = "solver", SOLVER_PARAMS

    def declared_params(self) -> tuple[Param, ...]:
        """The F/T solver (``mode`` payload) leaves out the joint-torque modes' parameters
        (:func:`~inertial_id.params.table.solver_params`)."""
        return solver_params(given_value(self, SOLVER_MODE.name, SOLVER_MODE.default))

    def setup(self, values: dict[str, Any]) -> None:
        """The estimator (from a saved payload if given), publishers, services, timers; or
        the links mode."""
        self.joint_mode: LinksMode | TorquePayloadMode | None = None
        self.online: OnlineEstimator | None = None
        if values["mode"] in MODES:
            self.joint_mode = MODES[values["mode"]](self, values)
            return
        self.initial, self.initial_frame = initial_payload(values)
        self.stage = EstimationStage(online_estimator(values, self.initial),
                                     1.0 / float(values["publish_rate"]),
                                     solve_share=float(values["solve_share"]))
        self.online = self.stage.online
        self.calibration_file = self._calibration_path(values["calibration_file"])
        self.output = OutputFrame(None, values["output_frame"])
        if self.output.frame:
            self._description = RobotDescription(self, values, self._urdf_ready)
        self.compensation = CompensationListener(
            self, self.stage.compensation, lambda: (
                self.online.config.gate_margin,
                self.online.config.gate_margin + self.online.filter_span),
            lambda: self.output.model)
        if self.initial is not None:
            self.get_logger().info(
                f"starting from the saved payload in {values['initial_payload_file']}: "
                f"{self.initial.body.mass:.4g} kg")
        self._prepare_solver(values)
        self.last_markers = -math.inf  # s, monotonic
        self.frame_id = self.initial_frame  # a saved payload is published before data
        self.last_stamp: float | None = None  # s, stamp of the newest sample used
        self.status = (DiagnosticStatus.WARN, "waiting for samples")
        self.undecodable = 0
        self.upstream = UpstreamLoss()
        self.latencies = RecentValues(LATENCY_WINDOW)
        self._logged_setup_error = ""
        self.parameters_pub = self.create_publisher(InertialParameters, "~/parameters", 10)
        self.inertia_pub = self.create_publisher(InertiaStamped, "~/inertia", 10)
        self.markers_pub = self.create_publisher(MarkerArray, "~/markers", 10)
        self._markers_drawn = False
        self._markers_shown: bool | None = None  # in colour (converged, no contact) when drawn
        self.contacts = ContactPublisher(self, values["contact_decimation"])
        self.diagnostics = Diagnostics(self, "payload estimate", self.diagnostic_status)
        self.decoder = CdrDecoder()
        self.subscription = self.create_subscription(
            SensorSamples, "sensor_samples", self.on_samples, pipeline_qos(), raw=True)
        self.idle_timer = steady_timer(self, IDLE_PERIOD / 4, self._idle)
        for name, action in (("reset", self.stage.reset), ("tare", self.online.tare),
                             ("freeze", self._freeze), ("resume", self._resume),
                             ("save", self.save)):
            self.create_service(Trigger, f"~/{name}", self._service(name, action))

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """Runtime parameter changes (:class:`~inertial_id.nodes.common.LiveParameters`):
        the estimator's new configuration, the contact decimation, the publish period and
        the solve share."""
        if self.joint_mode is not None:
            self.joint_mode.reconfigure(values, changed)
            return
        self._prepare_solver(values)  # before any solve can ask for it
        self.online.reconfigure(online_config(values, self.initial))
        self.calibration_file = self._calibration_path(values["calibration_file"])
        self.contacts.decimation = max(1, int(values["contact_decimation"]))
        self.stage.solve_period = 1.0 / float(values["publish_rate"])
        self.stage.solve_share = float(values["solve_share"])

    def _prepare_solver(self, values: dict[str, Any]) -> None:
        """Compile or load the dedicated SDP solver in the background when it will be used:
        a solve never waits for it (cvxpy meanwhile)."""
        if values["dedicated_solver"] and values["method"] == "lmi_sdp":
            sdp.prepare_in_background(self.get_logger().info)

    def _calibration_path(self, value: str) -> Path:
        """``calibration_file``, or by default ``$ROS_HOME/inertial_id/<namespace_node>.yaml``
        (``$ROS_HOME`` defaults to ``~/.ros``), one file per node instance."""
        if value:
            return Path(value).expanduser()
        home = Path(os.environ.get("ROS_HOME", "~/.ros")).expanduser()
        name = self.get_fully_qualified_name().strip("/").replace("/", "_")
        return home / "inertial_id" / f"{name}.yaml"

    def save(self) -> str:
        """``~/save``: the current estimate, its covariance, the F/T offset and the verdicts
        to :attr:`calibration_file`, and the URDF ``<inertial>`` beside it."""
        estimate = self.online.estimate
        if estimate is None:
            raise InertialIdError("no estimate yet")
        verdicts = self.online.verdicts
        estimate, frame = self.output.express(estimate, self.frame_id)
        snippet = calibration.save(self.calibration_file, estimate, frame, {
            "mass": verdicts.mass, "com": verdicts.com, "inertia": verdicts.inertia},
            extra=self.compensation.record())
        return f"wrote {self.calibration_file} and {snippet}"

    def _urdf_ready(self, urdf: str) -> None:
        """The URDF for ``output_frame``, which must be in it (:class:`ModelError`)."""
        model = load_urdf_model(urdf)
        require_frame(model, self.output.frame, "output_frame")
        self.output = OutputFrame(model, self.output.frame)

    def _in_output_frame(self, estimate: Estimate | None) -> tuple[Estimate | None, str]:
        """The estimate in ``output_frame`` and its frame; None (and a WARN status) while it
        cannot be: no URDF yet, or a frame that is not rigidly attached to the sensor's."""
        if estimate is None:
            return None, self.frame_id
        try:
            return self.output.express(estimate, self.frame_id)
        except InertialIdError as exc:
            self.status = (DiagnosticStatus.WARN, f"estimate withheld: {exc}")
            self.get_logger().warning(self.status[1], throttle_duration_sec=5.0)
            return None, self.frame_id

    def _freeze(self) -> None:
        self.online.frozen = True

    def _resume(self) -> None:
        self.online.frozen = False

    def _service(self, name: str, action: Callable[[], object]) -> Callable:
        def handle(_: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            try:
                said = action()
                response.success = True
                response.message = f"{name}: {said if isinstance(said, str) else 'done'}"
            except InertialIdError as exc:
                response.success, response.message = False, f"{name}: {exc}"
            self.get_logger().info(response.message)
            return response

        return handle

    def on_samples(self, raw: bytes) -> None:
        """A serialised batch from the subscription: decoded, then :meth:`take_samples`."""
        try:
            decoded = sensor_samples_from_bytes(raw, self.decoder)
        except UndecodableError as exc:
            self.undecodable += 1
            self.get_logger().warning(f"sensor samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        self.take_samples(decoded)

    def take_samples(self, decoded: tuple[dict[str, Any], str, int, bool]) -> None:
        """One batch of sensor samples, as :func:`~inertial_id.nodes.conversions.
        sensor_samples_from_bytes` gives it (from the subscription, or from the kinematics in
        the same process), through the estimation stage; the contact flags of what it used,
        and the estimate when the stage solved."""
        samples, frame_id, before, provisional = decoded
        count = samples["times"].size
        if not count:
            return
        self.compensation.sensor_frame(frame_id)
        result = self.stage.add(samples, time.monotonic(), provisional)
        if result.dropped:
            self.get_logger().warning(f"sensor samples dropped: {result.message}",
                                      throttle_duration_sec=2.0)
            return
        # A batch refused for its values says nothing reliable of its sender's running count
        # (it may not come from kinematics at all): only accepted ones move it.
        self.upstream.update(before, count)
        for step in result.steps:
            self._used(step, frame_id)
        if result.solved:
            self.publish_estimate()

    def _used(self, step: StepResult, frame_id: str) -> None:
        """Latency, frame and events of one estimator step; its contact flags."""
        if not step.times.size:
            return
        now = self.get_clock().now().nanoseconds * 1e-9
        self.latencies.extend(now - step.times)
        if frame_id != self.frame_id:
            self._check_frame(frame_id)
        self.frame_id = self.diagnostics.hardware_id = frame_id
        self.last_stamp = float(step.times[-1])
        for event in step.events:
            self.get_logger().info(f"{event} at t = {step.times[-1]:.3f} s")
        if self.stage.current.estimate is not None:
            self.contacts.publish(self.frame_id, step.times, step.residual, step.t2,
                                  step.contact, step.threshold, self.online.config.confidence)

    def _idle(self) -> None:
        """Without batches, publish the estimate once per :data:`IDLE_PERIOD`."""
        if self.stage.idle(time.monotonic()):
            self.publish_estimate()

    def _check_frame(self, frame_id: str) -> None:
        """A saved payload holds in the frame it was saved in: say so when the wrenches come
        in another one (the start is then wrong until the data replace it)."""
        saved = self.initial_frame
        if self.initial is not None and saved and frame_id != saved:
            self.get_logger().error(
                f"initial_payload_file was saved in frame {saved!r} but the wrenches are in "
                f"{frame_id!r}: the saved payload does not apply; reset or fix the file")

    def publish_estimate(self) -> None:
        """After a solve of the stage: the status (a failed solve kept the last estimate and
        says so), and the estimate if it is physically consistent."""
        now = time.monotonic()
        if self.stage.failure:
            self.status = (DiagnosticStatus.ERROR, self.stage.failure)
            self.get_logger().warning(self.status[1], throttle_duration_sec=5.0)
        else:
            self.status = self._status()
        current = self.stage.current  # the provisional estimator in the first seconds
        estimate = current.estimate
        stamp = (self.get_clock().now().to_msg() if self.last_stamp is None
                 else to_stamp(self.last_stamp))  # data stamp; now for a saved payload
        estimate, frame = self._in_output_frame(estimate)
        header = Header(stamp=stamp, frame_id=frame)
        if estimate is None and self._markers_drawn:  # reset, or a new payload
            self.contacts.guard.publish(self.markers_pub, clear_markers(header))
            self._markers_drawn, self._markers_shown = False, None
        if estimate is None or not estimate.physically_consistent:
            return
        guard = self.contacts.guard  # one count of what was withheld, on every topic
        guard.publish_read(self.parameters_pub, lambda: estimate_to_msg(
            estimate, header, current.verdicts, current.setup_error))
        guard.publish_read(self.inertia_pub,
                           lambda: body_to_inertia_stamped(estimate.body, header))
        shown = current.converged and not current.in_contact
        # At most every MARKER_PERIOD, and at once when they turn grey or back (a contact
        # starts with a solve, and during it few solves come: nothing new is used).
        if now - self.last_markers >= MARKER_PERIOD or shown != self._markers_shown:
            self.last_markers = now
            if guard.publish_read(self.markers_pub,
                                  lambda: estimate_to_markers(estimate, header, shown)):
                self._markers_drawn, self._markers_shown = True, shown

    def _status(self) -> tuple[bytes, str]:
        online = self.stage.current
        error = online.setup_error
        if error != self._logged_setup_error:
            if error:
                self.get_logger().error(f"set-up: {error}")
            self._logged_setup_error = error
        if error:
            return DiagnosticStatus.ERROR, f"set-up: {error}"
        if online.estimate is None:
            return DiagnosticStatus.WARN, "collecting samples"
        if online is not self.online:
            return DiagnosticStatus.WARN, "provisional estimate while the filter is chosen"
        if not online.from_data:
            return DiagnosticStatus.OK, "the saved payload (initial_payload_file) until the data "\
                "give an estimate"
        if online.in_contact:
            return DiagnosticStatus.WARN, "contact: estimate held"
        if online.drift_warning:
            return DiagnosticStatus.WARN, online.drift_warning
        if online.frozen:
            return DiagnosticStatus.OK, "frozen"
        if not online.converged:
            return DiagnosticStatus.WARN, "converging"
        if not online.verdicts.inertia:
            return DiagnosticStatus.OK, "mass and CoM converged; inertia not (yet) determined"
        return DiagnosticStatus.OK, "converged"

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: state, counts, latency (stamp to use, ms), the estimate's key numbers
        (:func:`estimate_values`)."""
        level, message = self.status
        online = self.online
        ledger = self.stage.ledger()
        values: dict[str, Number] = {
            "samples_received": ledger["received"], "samples_used": ledger["used"],
            "samples_held": ledger["held"], "messages_undecodable": self.undecodable,
            "samples_lost_upstream": self.upstream.lost,
            "samples_missed_at_start": self.upstream.missed,
            "messages_withheld_not_finite": sum(self.contacts.guard.withheld.values()),
            **{f"setup_{k}": v for k, v in online.setup.evidence().items()},
            **{k: v for k, v in ledger.items() if k.startswith("dropped_")},
            "contacts": len(online.contacts), "in_contact": online.in_contact,
            "payload_changes": len(online.payload_changes),
            "bias_steps": len(online.bias_steps), "open_anomalies": len(online.open_anomalies),
            "monitor_trained": online.monitor.ready,
            "stamp_resets": online.counters[RESETS],
            "setup_error": bool(online.setup_error), "frozen": online.frozen,
            "estimate_from_data": online.from_data, **self.compensation.values()}
        if online.monitor.ready:
            values["t2_threshold"] = online.monitor.threshold
        if len(self.latencies):
            p50, p99 = self.latencies.percentiles([50, 99]) * 1e3
            values.update({"latency_p50_ms": p50, "latency_p99_ms": p99})
        current = self.stage.current
        values["estimate_provisional"] = current is not online
        values["provisional_samples_received"] = self.stage.provisional_received
        if current.estimate is not None:
            values.update(estimate_values(current.estimate, current.verdicts))
            values.update(bias_values(current.estimate))
        return level, message, values


def estimate_values(estimate: Estimate, verdicts: Verdicts) -> dict[str, Number]:
    """The estimate's key numbers for the diagnostics, one per key, units in the keys
    (sensor frame; inertia about the CoM, sensor axes); verdicts as 1/0."""
    body = estimate.body
    inertia = vector_from_symmetric(body.inertia_com)
    return {
        "mass_kg": body.mass, "mass_std_kg": estimate.std[0],
        **{f"com_{a}_m": c for a, c in zip("xyz", body.com, strict=True)},
        **{f"com_{a}_std_m": c for a, c in zip("xyz", estimate.com_std, strict=True)},
        **{f"inertia_{k}_kgm2": v for k, v in zip(INERTIA_KEYS, inertia, strict=True)},
        **{f"inertia_{k}_std_kgm2": v
           for k, v in zip(INERTIA_KEYS, estimate.inertia_com_std, strict=True)},
        "converged": verdicts.payload, "mass_converged": verdicts.mass,
        "com_converged": verdicts.com, "inertia_converged": verdicts.inertia,
        "condition_number": estimate.condition_number,
        "min_pseudo_inertia_eigenvalue": estimate.min_eigenvalue,
    }


def bias_values(estimate: Estimate) -> dict[str, Number]:
    """The F/T bias for the diagnostics (sensor frame): the current offset and its std and,
    when the drift is modelled, its rate and std per axis (``bias_fz_n``,
    ``bias_drift_fz_n_per_s``, ``..._std``; torques in N m)."""
    values: dict[str, Number] = {}
    drift = estimate.drift
    for i, axis in enumerate(WRENCH_AXES):
        unit = "n" if i < 3 else "nm"
        values[f"bias_{axis}_{unit}"] = estimate.offset[i]
        values[f"bias_{axis}_std_{unit}"] = estimate.offset_std[i]
        if drift is not None:
            values[f"bias_drift_{axis}_{unit}_per_s"] = drift.rate[i]
            values[f"bias_drift_{axis}_std_{unit}_per_s"] = drift.std[i]
    return values


def main(args: list[str] | None = None) -> int:
    """Run the solver node."""
    return run(Solver, args)
