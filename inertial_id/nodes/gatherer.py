"""gatherer: synchronises ``joint_states`` and ``wrench`` by header stamp.

Subscribes ``joint_states`` (sensor_msgs/JointState) and ``wrench`` (geometry_msgs/
WrenchStamped); publishes ``joint_samples`` (inertial_id/JointSamples): batches of wrench
samples with the URDF joints' positions, velocities and accelerations at the same stamps,
from a fixed-lag Savitzky-Golay filter applied alike to both signals
(:class:`~inertial_id.core.gathering.synchronizer.FixedLagSynchronizer`); with ``matched_filter``
(the default) also the sensor frame's twist and proper acceleration, computed at every joint sample
and smoothed with the wrench's kernel. A batch leaves as soon as new
data made samples ready (half a millisecond after the first message of a burst, so that
messages a driver sends together travel together), at most about ``publish_rate`` times a
second (:class:`~inertial_id.core.gathering.pacing.BatchPacer`).
The two high-rate inputs are
taken serialised and decoded by :class:`~inertial_id.io.cdr.CdrDecoder`, and the batches are
published serialised by :class:`~inertial_id.io.cdr.CdrEncoder`, which costs a fraction of
rclpy's message conversion.
"""

from __future__ import annotations

import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState

from inertial_id.core.errors import InertialIdError
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.gathering.ledger import DropLedger, drop_key
from inertial_id.core.gathering.pacing import BatchPacer
from inertial_id.core.gathering.synchronizer.kernel import compiled_kernel
from inertial_id.core.samples import WrenchSample
from inertial_id.io.cdr import CdrDecoder, CdrEncoder
from inertial_id.msg import JointSamples
from inertial_id.nodes.common import (
    BatchLink,
    Diagnostics,
    DropWatch,
    Number,
    PipelineNode,
    RobotDescription,
    Silence,
    sensor_qos,
    set_period,
    steady_timer,
)
from inertial_id.nodes.common.realtime import fifo_priority, set_fifo_priority
from inertial_id.nodes.compensated_wrench import CompensatedWrenchOutput
from inertial_id.nodes.conversions import (
    UndecodableError,
    joint_state_from_bytes,
    wrench_from_bytes,
)
from inertial_id.nodes.runner import run
from inertial_id.params.settings import gatherer_kinematics, gatherer_settings
from inertial_id.params.table import GATHERER_PARAMS

ARMED_CHECK = 0.05
"""s after its due time that an armed batch timer is taken as armed without asking rclpy."""


class Gatherer(PipelineNode):
    """See the module docstring."""

    NAME, PARAMS = "gatherer", GATHERER_PARAMS

    def setup(self, values: dict[str, Any]) -> None:
        """Inputs, output, timers; the joint mapping once the URDF is known."""
        self.values = values
        self.settings = gatherer_settings(values)
        if self.settings.matched:  # loaded (or compiled, the first time) before any input
            compiled_kernel()
        self.gathering: Gathering | None = None
        self.joint_input, self.wrench_input = Silence(), Silence()
        self.ledger = DropLedger()
        self.drop_watch = DropWatch()
        self.published = 0  # samples, provisional ones included (the stream's count)
        self.provisional_published = 0
        self.diagnostics = Diagnostics(self, "synchronisation", self.status)
        self.batches = BatchLink(self, JointSamples, "joint_samples")
        self.decoder, self.encoder = CdrDecoder(), CdrEncoder()
        qos = sensor_qos(values["queue_depth"])
        self.create_subscription(JointState, "joint_states", self.on_joint_state, qos, raw=True)
        self.create_subscription(WrenchStamped, "wrench", self.on_wrench, qos, raw=True)
        # A batch leaves soon after new data arrived, at most about publish_rate times a
        # second: a one-shot timer on the steady clock, armed by the input callbacks.
        self.pacer = BatchPacer(values["publish_rate"], time.monotonic())
        self.publish_timer = steady_timer(self, 1.0 / self.pacer.rate, self.publish_ready,
                                          autostart=False)
        self.armed_until = 0.0  # s (time.monotonic): before it, the batch timer is armed
        self.compensated = CompensatedWrenchOutput(self, values["queue_depth"])
        self.fifo_set = False  # this node put the process under SCHED_FIFO
        self.set_priority(values["realtime_priority"])
        self.description = RobotDescription(self, values, self.configure)

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """Runtime parameter changes: ``publish_rate`` and ``realtime_priority`` (the others
        are read-only)."""
        if "publish_rate" in changed:
            self.pacer.set_rate(float(values["publish_rate"]), time.monotonic())
        if "realtime_priority" in changed:
            self.set_priority(values["realtime_priority"])

    def set_priority(self, priority: int) -> None:
        """The process's threads to ``SCHED_FIFO`` at ``priority``; 0 leaves the scheduler
        as the process was started with (``chrt``, systemd), or restores the normal one if
        this node set FIFO. A warning when the system refuses
        (:mod:`~inertial_id.nodes.common.realtime`)."""
        if not priority and not self.fifo_set:
            return
        refused = set_fifo_priority(int(priority))
        if refused:
            self.get_logger().warning(f"realtime_priority not applied: {refused}")
            return
        self.fifo_set = bool(priority)

    def configure(self, urdf: str) -> None:
        """Set up the joint mapping and filter once the URDF is known."""
        model = None
        if self.settings.matched:
            try:
                model = gatherer_kinematics(self.values).model(urdf)
            except InertialIdError as exc:  # e.g. locked joints without their positions
                self.get_logger().warning(f"matched_filter is off, the joints alone are "
                                          f"filtered (the inertia is biased): {exc}")
        self.gathering = Gathering(urdf, self.settings, model, self.ledger)
        names = self.gathering.joint_names
        self.get_logger().info(f"gathering {len(names)} joints: {', '.join(names)}")
        try:
            model = model or gatherer_kinematics(self.values).model(urdf)
            if model.joint_names != names:
                raise InertialIdError(f"the model's joints {model.joint_names} are not the "
                                      "gathered ones: lock the same joints")
            self.compensated.configure(model)
        except InertialIdError as exc:
            self.get_logger().warning(f"no ~/compensated_wrench: {exc}")

    def status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: inputs, outputs, what was dropped and why."""
        values = {"joint_states_received": self.joint_input.count,
                  "wrenches_received": self.wrench_input.count,
                  "samples_published": self.published,
                  "provisional_samples_published": self.provisional_published}
        dropped = self.ledger.dropped()
        held = 0 if self.gathering is None else self.gathering.wrenches_held
        values.update({f"dropped_{k}": v for k, v in dropped.items()})
        wrench_drops = sum(self.ledger.wrench_samples().values())
        values.update({"wrenches_held": held, "stamp_resets": self.ledger.resets,
                       "wrenches_unaccounted": (
                           self.wrench_input.count - self.published
                           + self.provisional_published - wrench_drops - held)})
        values.update(self.compensated.values())
        values["realtime_priority"] = fifo_priority()
        if self.gathering is None:
            return DiagnosticStatus.WARN, "waiting for the URDF", values
        gathering = self.gathering
        if gathering.synchronizer.jacobians is not None:  # the encoders' noise it estimates
            values.update({
                f"position_noise_{name}_{'m' if name in gathering.prismatic else 'rad'}":
                float(std) for name, std in zip(gathering.joint_names,
                                                gathering.synchronizer.position_noise.std,
                                                strict=True)})
        choice = gathering.choice
        if choice is not None:
            values.update({f"filter_{k}": v for k, v in choice.as_dict().items()
                           if not isinstance(v, str)})
            values["filter_past_span"] = choice.past_span
            values["filter_from_data"] = int(choice.source == "data")
            values["filter_switches"] = gathering.watch.switches
            values["wrench_delay_applied"] = gathering.wrench_delay
        if gathering.stamp_delay is not None:
            values.update({f"wrench_delay_{k}": float(v)
                           for k, v in gathering.stamp_delay.as_dict().items()})
        if gathering.delay_tracker is not None:  # kept estimated on the released samples
            tracked = gathering.delay_tracker.latest.as_dict()
            values.update({"wrench_delay_tracked": float(tracked["delay"]),
                           "wrench_delay_tracked_std": float(tracked["std"]),
                           "wrench_delay_tracked_samples": int(tracked["samples"]),
                           "wrench_delay_corrections": gathering.delay_tracker.corrections})
        silent = [name for name, s in (("joint_states", self.joint_input),
                                       ("wrench", self.wrench_input)) if s.silent]
        if silent:
            return DiagnosticStatus.WARN, f"no data on {', '.join(silent)}", values
        stalled = self.drop_watch.check(
            {"joint_state": self.joint_input.count, "wrench": self.wrench_input.count},
            self.ledger.by_kind_prefix())
        if stalled:  # also while holding: rejected joint states would hold it for ever
            return DiagnosticStatus.WARN, stalled, values
        if choice is None:
            return (DiagnosticStatus.OK, "holding the first joint states to choose the filter",
                    values)
        return DiagnosticStatus.OK, f"synchronising; {choice.summary()}", values

    def timers_stopped(self) -> None:
        """The batch timer was cancelled from outside: the next message arms it."""
        self.armed_until = 0.0

    def schedule(self) -> None:
        """Arm the batch timer unless it is armed, for when the pacer lets the batch leave
        (:meth:`BatchPacer.wait`).

        A token bucket rather than a minimum interval since the last batch: with a driver
        publishing at about ``publish_rate``, every late burst would push that interval's
        grid later for good, until batches waited up to a whole period."""
        now = time.monotonic()
        # Armed by this node a moment ago: not asking rclpy at every message. Later, ask (a
        # lifecycle deactivation cancels the timer without its callback running).
        if now < self.armed_until or not self.publish_timer.is_canceled():
            return
        wait = self.pacer.wait(now)
        self.armed_until = now + wait + ARMED_CHECK
        set_period(self.publish_timer, wait)

    def on_joint_state(self, raw: bytes) -> None:
        self.joint_input.tick()
        self._take("joint_state", raw)

    def on_wrench(self, raw: bytes) -> None:
        self.wrench_input.tick()
        self._take("wrench", raw)

    def _take(self, kind: str, raw: bytes) -> None:
        """Decode and buffer one ``joint_state`` or ``wrench``; whatever is wrong with it is
        counted in the ledger (``<kind>_<reason>``: :func:`drop_key`; the gathering counts
        what it refuses, see :meth:`Gathering.add`) and logged, and the node goes on. A
        wrench in the stream's frame goes to ``~/compensated_wrench`` first (before the
        gathering's work, for its latency), an accepted joint state after."""
        arrival = time.perf_counter()
        if self.gathering is None:
            self.ledger.refuse(f"{kind}_before_urdf", "no URDF yet")
            return
        try:
            if kind == "wrench":
                msg = wrench_from_bytes(raw, self.decoder)
            else:
                msg = joint_state_from_bytes(raw, self.decoder)
        except UndecodableError as exc:
            self.ledger.refuse(drop_key(kind, exc), str(exc))
            self._log_drop(kind, exc)
            return
        gathering = self.gathering
        if isinstance(msg, WrenchSample) and msg.frame_id == gathering.wrench_frame:
            self.compensated.wrench(arrival, msg.stamp, msg.stamp - gathering.wrench_delay,
                                    msg.frame_id, msg.wrench)
        self.schedule()
        try:
            accepted = gathering.add(msg)
        except InertialIdError as exc:
            self._log_drop(kind, exc)
            accepted = False
        if accepted and self.compensated.wanted and not isinstance(msg, WrenchSample):
            latest = gathering.synchronizer.latest_joint_state()
            if latest is not None:
                self.compensated.joint_state(*latest)
        if kind == "wrench" and self.gathering.wrench_frame:
            self.diagnostics.hardware_id = self.gathering.wrench_frame

    def _log_drop(self, kind: str, exc: Exception) -> None:
        self.get_logger().warning(f"{kind} dropped: {exc}", throttle_duration_sec=2.0)

    def publish_ready(self) -> None:
        """The batch timer: publish what is ready (one-shot: the next message re-arms it)."""
        self.publish_timer.cancel()
        self.armed_until = 0.0
        self.pacer.left(time.monotonic())
        if self.gathering is None:
            return
        chosen = self.gathering.choice is not None
        batch = self.gathering.pop_ready()
        if not chosen and self.gathering.choice is not None:
            self.get_logger().info(self.gathering.choice.summary())
            if self.gathering.stamp_delay is not None:
                self.get_logger().info(self.gathering.stamp_delay.summary())
        choice, provisional = self.gathering.choice, False
        if choice is None:  # while the filter is chosen: the provisional one's samples
            batch, choice, provisional = (self.gathering.pop_provisional(),
                                          self.gathering.provisional_choice, True)
        if len(batch):
            assert choice is not None  # samples come once a filter is chosen
            values = (batch, tuple(self.gathering.joint_names), self.gathering.wrench_frame,
                      self.published, choice.past_span, provisional)
            self.batches.publish(lambda: self.encoder.joint_samples(*values), values)
        self.published += len(batch)
        self.provisional_published += len(batch) if provisional else 0


def main(args: list[str] | None = None) -> int:
    """Run the gatherer node."""
    return run(Gatherer, args)
