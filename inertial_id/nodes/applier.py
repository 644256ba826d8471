"""applier: pushes the converged payload estimate to one robot driver or controller.

Subscribes the solver's ``solver/parameters`` (inertial_id/InertialParameters, in the solver's
frame, with its per-group verdicts) and ``solver/contact`` (inertial_id/ContactAnomaly). The
``target`` (:data:`inertial_id.core.handoff.TARGETS`, the names of ``inertial-id export``) says what
the payload becomes and where it goes:

- ``ur``/``ur7``, ``franka``, ``xarm``: a request to the driver's service (``destination``, by
  default the driver's usual name), its type loaded by name at run time and filled with the
  fields it has (:mod:`inertial_id.nodes.requests`): one WARN names what the robot will not
  receive (the inertia, on a classic UR request);
- ``fts-broadcaster``, ``gravity-compensation``, ``admittance``: the controller's parameters
  through ``<destination>/set_parameters`` (rcl_interfaces/srv/SetParameters), under
  ``parameter_prefix``.

The payload is re-expressed in ``frame`` (default ``tool0`` for the drivers) from the estimate's
frame through the URDF (:mod:`inertial_id.core.frames`). Gates (:mod:`inertial_id.core.applying`):
an automatic apply (``auto_apply``, off by default) needs every group the target takes
converged, no contact, ``stable_s`` of stability, a change of more than ``change_std`` std from
the last apply and ``min_interval`` since the last attempt; ``~/apply`` (std_srvs/Trigger)
needs only the first two and answers at once (the driver's answer is logged). ``dry_run`` logs
the request instead of sending it. A service, package or controller that is not there is one
WARN line naming it; a refusal is an ERROR with the driver's message. What was applied, and
when, is on ``/diagnostics`` and saved to ``applied_file`` (a calibration, usable as the
solver's ``initial_payload_file`` unless a std was unknown, with an ``applied`` section).
A target that then publishes the wrench compensated for the payload (``wrench_after_apply``:
a UR driver) is followed on ``~/compensation`` (:mod:`inertial_id.nodes.compensation`): the
solver adds the applied payload back and goes on estimating the whole payload.
"""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus
from rcl_interfaces.srv import SetParameters
from rclpy.task import Future
from std_srvs.srv import Trigger

from inertial_id.core.applying import ApplyGate, Observation
from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.compensation import compensated_body
from inertial_id.core.frames import OutputFrame
from inertial_id.core.handoff import FLANGE_FRAME, TARGETS, Options
from inertial_id.core.kinematics import load_urdf_model, require_frame
from inertial_id.core.parameters import BodyParameters
from inertial_id.io import calibration
from inertial_id.msg import ContactAnomaly, InertialParameters
from inertial_id.nodes.common import (
    Diagnostics,
    Number,
    PipelineNode,
    RobotDescription,
    steady_timer,
)
from inertial_id.nodes.compensation import CompensationAnnouncer
from inertial_id.nodes.requests import (
    INERTIA_FIELD,
    fill,
    fitting_fields,
    parameter_messages,
    refusal,
    request_fields,
    service_type,
)
from inertial_id.nodes.runner import run
from inertial_id.params.settings import gate_settings, wrench_compensated
from inertial_id.params.table import APPLIER_PARAMS

CHECK_PERIOD = 0.25
"""s between two checks of a pending request's time-out."""


def observation(msg: InertialParameters, groups: tuple[str, ...]) -> Observation:
    """The values, std and verdict of ``groups`` (:data:`~inertial_id.core.applying.GROUPS`)
    in a published estimate (its frame, SI units)."""
    parts = {
        "mass": ([msg.mass], [msg.std[0]], msg.mass_converged),
        "com": ([msg.com.x, msg.com.y, msg.com.z], list(msg.com_std), msg.com_converged),
        "inertia": (list(msg.inertia_com), list(msg.inertia_com_std), msg.inertia_converged),
        # The offset is estimated with the payload: it has converged when the payload has.
        "offset": (list(msg.wrench_offset), list(msg.wrench_offset_std), msg.converged),
    }
    chosen = [parts[g] for g in groups]
    return Observation(values=np.concatenate([np.asarray(v, float) for v, _, _ in chosen]),
                       std=np.concatenate([np.asarray(s, float) for _, s, _ in chosen]),
                       converged=all(c for _, _, c in chosen) and not msg.setup_error)


def msg_to_estimate(msg: InertialParameters) -> Estimate:
    """The estimate a message carries, with the diagonal covariance of its std (an unknown
    std, published as -1, is NaN): enough for the values a target takes."""
    std = np.concatenate((np.asarray(msg.std, float), np.asarray(msg.wrench_offset_std, float)))
    std = np.where(std >= 0.0, std, np.nan)
    return Estimate(body=BodyParameters.from_pi(np.asarray(msg.pi, float)),
                    offset=np.asarray(msg.wrench_offset, float), covariance=np.diag(std**2),
                    samples=float(msg.samples_used), condition_number=msg.condition_number,
                    method=msg.method, covariance_type=msg.covariance_type)


def _summary(estimate: Estimate, frame: str) -> str:
    body = estimate.body
    return (f"{body.mass:.4g} kg, CoM [" + ", ".join(f"{c * 1e3:.1f}" for c in body.com)
            + f"] mm in {frame}")


class Applier(PipelineNode):
    """See the module docstring."""

    NAME, PARAMS = "applier", APPLIER_PARAMS

    def setup(self, values: dict[str, Any]) -> None:
        """The target, its client, the frame, subscriptions, ``~/apply`` and diagnostics."""
        self.target = TARGETS[values["target"]]
        service, kind = self.target.service
        self.destination = values["destination"] or service or self.target.node
        if not self.destination:
            raise InertialIdError(f"{self.get_name()}: target {self.target.name} needs "
                                  "destination (the node holding the filter's parameters)")
        self.prefix = values["parameter_prefix"]
        self.output = OutputFrame(None, values["frame"] or (
            FLANGE_FRAME if self.target.flange else ""))
        if self.output.frame:
            self._description = RobotDescription(self, values, self._urdf_ready)
        self.gate = ApplyGate(gate_settings(values))
        self.apply_parameters(values, set(values))
        self.groups = self.target.groups
        self.request_class: Any = None
        self.unavailable = ""  # why nothing can be sent (a missing package), one line
        self.missing: list[str] = []
        if self.target.parameters:
            self.client = self.create_client(SetParameters,
                                             f"{self.destination.rstrip('/')}/set_parameters")
            self.what = f"parameters of {self.destination}"
        else:
            self.what = f"{self.destination} ({kind})"
            self._load_type(kind)
        self.latest: InertialParameters | None = None
        self.pending: tuple[Future, float, Estimate, str, Observation] | None = None
        self.compensation = CompensationAnnouncer(self, wrench_compensated(values))
        self.counts = {"applied": 0, "refused": 0, "unanswered": 0, "unavailable": 0,
                       "dry_runs": 0}
        self.last: dict[str, Any] = {}  # what was last applied: estimate, frame, when
        self.status = (DiagnosticStatus.OK, "waiting for an estimate")
        self.create_subscription(InertialParameters, "solver/parameters", self.on_parameters,
                                 10)
        self.create_subscription(ContactAnomaly, "solver/contact", self.on_contact, 100)
        self.create_service(Trigger, "~/apply", self.on_apply)
        steady_timer(self, CHECK_PERIOD, self._check_pending)
        self.diagnostics = Diagnostics(self, f"apply to {self.target.name}",
                                       self.diagnostic_status)
        self.get_logger().info(
            f"applying to {self.what} in {self.output.frame or 'the estimate frame'}: "
            f"{'automatically when the gates pass' if self.auto_apply else 'on ~/apply'}"
            f"{' (dry run: nothing is sent)' if self.dry_run else ''}"
            f"{'; it then compensates the wrench for it' if self.compensation.enabled else ''}")

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """The live settings: gates, dry run, automatic apply, time-out, file."""
        self.auto_apply = bool(values["auto_apply"])
        self.dry_run = bool(values["dry_run"])
        self.transition_time = float(values["transition_time"])
        self.timeout = float(values["service_timeout"])
        self.applied_file = self._applied_path(values["applied_file"])
        self.gate.settings = gate_settings(values)

    def _applied_path(self, value: str) -> Path:
        if value:
            return Path(value).expanduser()
        home = Path(os.environ.get("ROS_HOME", "~/.ros")).expanduser()
        name = self.get_fully_qualified_name().strip("/").replace("/", "_")
        return home / "inertial_id" / f"{name}.yaml"

    def _load_type(self, kind: str) -> None:
        """The driver's service type by name; a missing package is one WARN."""
        try:
            self.request_class = service_type(kind)
        except InertialIdError as exc:
            self.unavailable = str(exc)
            self.get_logger().warning(f"{self.unavailable}: nothing can be applied to "
                                      f"{self.destination} (a dry run still logs the request)")
            return
        self.client = self.create_client(self.request_class, self.destination)
        have = request_fields(self.request_class.Request)
        if not any(INERTIA_FIELD.search(f) for f in have):
            self.groups = tuple(g for g in self.groups if g != "inertia")

    def _urdf_ready(self, urdf: str) -> None:
        model = load_urdf_model(urdf)
        require_frame(model, self.output.frame, "frame")
        self.output = OutputFrame(model, self.output.frame)

    def on_parameters(self, msg: InertialParameters) -> None:
        """A new estimate: through the gates, and applied when they all pass (auto_apply)."""
        self.latest = msg
        now = time.monotonic()
        self.gate.observe(now, observation(msg, self.groups))
        if self.auto_apply and self.pending is None and not self.gate.refusal(now):
            self.apply(now)

    def on_contact(self, msg: ContactAnomaly) -> None:
        """The solver's contact flag."""
        self.gate.contact(time.monotonic(), msg.contact)

    def on_apply(self, _: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """``~/apply``: apply now if the estimate is converged and there is no contact."""
        now = time.monotonic()
        reason = self.gate.refusal(now, manual=True) or (
            "a request is already waiting for its answer" if self.pending else "")
        response.message = reason or self.apply(now)
        response.success = not reason and not response.message.startswith("not sent")
        self.get_logger().info(f"apply: {response.message}")
        return response

    def apply(self, now: float) -> str:
        """Send (or, in a dry run, log) the latest estimate as the target takes it; what
        happened, in one line."""
        msg = self.latest
        try:
            estimate, frame = self.output.express(msg_to_estimate(msg), msg.header.frame_id)
        except InertialIdError as exc:
            return self._not_sent(now, f"not sent: {exc}")
        options = Options(frame=frame, transition_time=self.transition_time)
        seen = self.gate.latest
        if self.target.parameters:
            fields = self.target.fields(estimate, options)
            request = SetParameters.Request(parameters=parameter_messages(fields, self.prefix))
        elif self.request_class is None:
            fields = self.target.fields(estimate, options)
            request = None
        else:
            fields = fitting_fields(self.target, self.request_class.Request, estimate, options)
            request = self.request_class.Request()
            missing = fill(request, fields)
            if missing != self.missing:
                self.missing = missing
                if missing:
                    self.get_logger().warning(
                        f"the installed {self.target.service[1]} has no "
                        f"{', '.join(missing)}: {self.destination} will not receive them")
        if self.dry_run:
            self.counts["dry_runs"] += 1
            self.gate.mark_applied(now, seen.values)
            said = f"dry run: would send to {self.what}: {fields}"
            self.get_logger().info(said)
            return said
        if request is None:
            return self._not_sent(now, f"not sent: {self.unavailable}")
        if not self.client.service_is_ready():
            return self._not_sent(now, f"not sent: {self.what} is not available")
        self.compensation.requested(msg.header.frame_id)
        future = self.client.call_async(request)
        self.pending = (future, now, estimate, frame, seen)
        self.sent_from = msg  # the estimate in the solver's frame: what is compensated
        future.add_done_callback(self._answered)
        return f"sent to {self.what}: {_summary(estimate, frame)}"

    def _not_sent(self, now: float, said: str) -> str:
        self.counts["unavailable"] += 1
        self.gate.attempted(now)
        self.status = (DiagnosticStatus.WARN, said)
        self.get_logger().warning(said, throttle_duration_sec=10.0)
        return said

    def _answered(self, future: Future) -> None:
        if self.pending is None or future is not self.pending[0]:
            return  # timed out already
        _, sent_at, estimate, frame, seen = self.pending
        self.pending = None
        response = future.result()
        if self.target.parameters:
            reason = "; ".join(r.reason or "refused" for r in response.results
                               if not r.successful)
        else:
            reason = refusal(response)
        if reason:
            self.counts["refused"] += 1
            self.compensation.failed()
            self.gate.attempted(sent_at)
            self.status = (DiagnosticStatus.ERROR, f"{self.what} refused the payload: {reason}")
            self.get_logger().error(self.status[1])
            return
        self.counts["applied"] += 1
        self.gate.mark_applied(sent_at, seen.values)
        sent = self.sent_from
        self.compensation.accepted(
            compensated_body(BodyParameters.from_pi(np.asarray(sent.pi, float)),
                             "inertia" in self.groups), sent.header.frame_id,
            0.0 if "transition_time" in self.missing else self.transition_time)
        self._record(estimate, frame)

    def _record(self, estimate: Estimate, frame: str) -> None:
        """What was applied: the log, the diagnostics and :attr:`applied_file`."""
        when = datetime.datetime.now(datetime.timezone.utc)
        self.last = {"estimate": estimate, "frame": frame, "wall_time": when.timestamp()}
        said = f"applied {_summary(estimate, frame)} to {self.what}"
        self.status = (DiagnosticStatus.OK, f"{said} at {when.isoformat(timespec='seconds')}")
        self.get_logger().info(said)
        try:
            calibration.save(self.applied_file, estimate, frame, {}, extra={"applied": {
                "target": self.target.name, "to": self.what,
                "at": when.isoformat(timespec="milliseconds"),
                "wrench_compensated": self.compensation.enabled,
                "fields": self.target.fields(estimate, Options(frame, self.transition_time))}})
        except InertialIdError as exc:
            self.get_logger().error(f"applied, but not recorded: {exc}")

    def _check_pending(self) -> None:
        """A request unanswered for ``service_timeout`` s is given up (one WARN)."""
        if self.pending is None or time.monotonic() - self.pending[1] < self.timeout:
            return
        future, sent_at = self.pending[:2]
        self.pending = None
        self.client.remove_pending_request(future)
        self.counts["unanswered"] += 1
        self.compensation.failed()
        self.gate.attempted(sent_at)
        self.status = (DiagnosticStatus.WARN, f"no answer from {self.what} within "
                                              f"{self.timeout:g} s: nothing known applied")
        self.get_logger().warning(self.status[1])

    def diagnostic_status(self) -> tuple[bytes, str, dict[str, Number]]:
        """The counts, the gates' state and what was last applied (its frame, SI units)."""
        now = time.monotonic()
        level, message = self.status
        waiting = self.gate.refusal(now)
        if level == DiagnosticStatus.OK and self.auto_apply and waiting:
            message = f"{message}; next apply waits: {waiting}"
        values: dict[str, Number] = {
            **self.counts, "auto_apply": self.auto_apply, "dry_run": self.dry_run,
            "converged": bool(self.gate.latest and self.gate.latest.converged),
            "in_contact": self.gate.in_contact, "stable_for_s": self.gate.stable_for(now),
            "interface_missing": bool(self.unavailable), **self.compensation.values()}
        if self.last:
            body = self.last["estimate"].body
            values.update({
                "applied_at_unix_s": self.last["wall_time"],
                "applied_age_s": time.time() - self.last["wall_time"],
                "applied_mass_kg": body.mass,
                **{f"applied_com_{a}_m": c for a, c in zip("xyz", body.com, strict=True)}})
        return level, message, values


def main(args: list[str] | None = None) -> int:
    """Run the applier node."""
    return run(Applier, args)
