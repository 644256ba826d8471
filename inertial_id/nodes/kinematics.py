"""kinematics: the F/T sensor frame's twist and proper acceleration from joint samples.

Subscribes ``joint_samples`` (inertial_id/JointSamples from the gatherer); publishes
``sensor_samples`` (inertial_id/SensorSamples): for each sample the sensor frame's body twist
and proper acceleration (spatial acceleration minus gravity, sensor frame) computed with
pinocchio from the URDF, and the measured wrench, unchanged. A batch with a NaN, an inf or a
value beyond any measurement (1e200) is dropped and counted (``dropped_implausible``). A
batch from the gatherer's matched filter carries the (smoothed) twist and proper acceleration
already: they are passed on. All of that is :class:`~inertial_id.core.stages.KinematicsStage`,
which replay runs too; this node decodes, publishes and reports. Both batches travel
serialised (:mod:`inertial_id.io.cdr`): rclpy's conversion of their arrays cost more than the
kinematics.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus

from inertial_id.core.samples import SyncedSamples
from inertial_id.core.stages import KinematicsStage
from inertial_id.io.cdr import CdrDecoder, CdrEncoder
from inertial_id.msg import JointSamples, SensorSamples
from inertial_id.nodes.common import (
    BatchLink,
    Diagnostics,
    Number,
    PipelineNode,
    RobotDescription,
    Silence,
    UpstreamLoss,
    pipeline_qos,
)
from inertial_id.nodes.conversions import UndecodableError, joint_samples_from_bytes
from inertial_id.nodes.runner import run
from inertial_id.params.settings import kinematics_settings
from inertial_id.params.table import KINEMATICS_PARAMS


class Kinematics(PipelineNode):
    """See the module docstring."""

    NAME, PARAMS = "kinematics", KINEMATICS_PARAMS

    def setup(self, values: dict[str, Any]) -> None:
        """Input, output; the model once the URDF is known (a bad frame fails here)."""
        self.settings = kinematics_settings(values)
        self.sensor_frame = self.settings.sensor_frame
        self.stage: KinematicsStage | None = None
        self.input = Silence()
        self.samples_in = self.samples_out = self.undecodable = self.before_urdf = 0
        self.upstream = UpstreamLoss()
        Diagnostics(self, "sensor kinematics", self.status)
        self.batches = BatchLink(self, SensorSamples, "sensor_samples")
        self.decoder, self.encoder = CdrDecoder(), CdrEncoder()
        self.subscription = self.create_subscription(
            JointSamples, "joint_samples", self.on_samples, pipeline_qos(), raw=True)
        self.description = RobotDescription(self, values, self.configure)

    def configure(self, urdf: str) -> None:
        """Load the model once the URDF is known (fails fast on a bad URDF or frame)."""
        model = self.settings.model(urdf)
        self.stage = KinematicsStage(model)
        self.get_logger().info(f"sensor frame {self.sensor_frame!r}, {model.nv} joints")

    def status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: samples in, out and dropped by reason (they add up), messages that
        could not be decoded; an ERROR while wrenches come in another frame."""
        dropped = Counter(self.stage.dropped if self.stage is not None else {})
        if self.before_urdf:
            dropped["before_urdf"] = self.before_urdf
        values: dict[str, Number] = {"samples_received": self.samples_in,
                                     "samples_published": self.samples_out,
                                     "samples_dropped": sum(dropped.values()),
                                     "messages_undecodable": self.undecodable,
                                     "samples_lost_upstream": self.upstream.lost,
                                     "samples_missed_at_start": self.upstream.missed}
        values.update({f"dropped_{k}": v for k, v in dropped.items()})
        if self.stage is None:
            return DiagnosticStatus.WARN, "waiting for the URDF", values
        if self.stage.wrong_frame:
            return (DiagnosticStatus.ERROR,
                    f"wrenches in frame {self.stage.wrong_frame!r}, not sensor_frame "
                    f"{self.sensor_frame!r}: dropped; set sensor_frame to the URDF frame the "
                    "F/T sensor measures in", values)
        if self.input.silent:
            return DiagnosticStatus.WARN, "no joint samples", values
        return DiagnosticStatus.OK, f"sensor frame {self.sensor_frame}", values

    def on_samples(self, raw: bytes) -> None:
        """A serialised batch from the subscription: decoded, then :meth:`take_samples`."""
        try:
            decoded = joint_samples_from_bytes(raw, self.decoder)
        except UndecodableError as exc:
            self.input.tick()
            self.undecodable += 1
            self.get_logger().warning(f"joint samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        self.take_samples(decoded)

    def take_samples(self, decoded: tuple[SyncedSamples, tuple[str, ...], str, int, float,
                                          bool]) -> None:
        """A batch as :func:`~inertial_id.nodes.conversions.joint_samples_from_bytes` gives
        it (from the subscription, or from the gatherer in the same process): its sensor
        kinematics to the solver."""
        self.input.tick()
        batch, names, frame_id, before, span, provisional = decoded
        self.samples_in += len(batch)
        self.upstream.update(before, len(batch))
        if self.stage is None:
            self.before_urdf += len(batch)
            return
        out = self.stage.run(batch, names, frame_id)
        for drop in out.drops:
            self.get_logger().warning(f"{drop.count} joint samples dropped: {drop.message}",
                                      throttle_duration_sec=2.0)
        if out.samples is None:
            return
        kept = out.samples
        samples = {"times": kept.times, "twist": out.twist,
                   "proper_acceleration": out.proper_acceleration, "wrench": kept.wrench,
                   "wrench_raw": kept.wrench_raw, "acceleration_noise": kept.acceleration_noise,
                   "angular_products": kept.angular_products, "filter_span": span}
        before = self.samples_out
        self.batches.publish(
            lambda: self.encoder.sensor_samples(
                frame_id=self.sensor_frame, samples_before=before, provisional=provisional,
                **samples),
            (samples, self.sensor_frame, before, provisional))
        self.samples_out += len(kept)


def main(args: list[str] | None = None) -> int:
    """Run the kinematics node."""
    return run(Kinematics, args)
