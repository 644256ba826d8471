"""kinematics: the F/T sensor frame's twist and proper acceleration from joint samples.

Subscribes ``joint_samples`` (inertial_id/JointSamples from the gatherer); publishes
``sensor_samples`` (inertial_id/SensorSamples): for each sample the sensor frame's body twist
and proper acceleration (spatial acceleration minus gravity, sensor frame) computed with
pinocchio from the URDF, and the measured wrench, unchanged. A batch with a NaN, an inf or a
value beyond any measurement (1e200) is dropped and counted (``dropped_implausible``). A
batch from the gatherer's matched filter carries the (smoothed) twist and proper acceleration
already: they are passed on. Both batches travel serialised (:mod:`inertial_id.cdr`): rclpy's
conversion of their arrays cost more than the kinematics.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus

from inertial_id.cdr import CdrDecoder, CdrEncoder
from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import JointMapper, SensorKinematics
from inertial_id.core.synchronizer import MAX_ABS_VALUE, plausible
from inertial_id.core.timepolicy import OUT_OF_RANGE, in_range
from inertial_id.msg import JointSamples, SensorSamples
from inertial_id.nodes.common import (
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
from inertial_id.settings import KINEMATICS_PARAMS, kinematics_settings


class Kinematics(PipelineNode):
    """See the module docstring."""

    NAME, PARAMS = "kinematics", KINEMATICS_PARAMS

    def setup(self, values: dict[str, Any]) -> None:
        """Input, output; the model once the URDF is known (a bad frame fails here)."""
        self.settings = kinematics_settings(values)
        self.sensor_frame = self.settings.sensor_frame
        self.model: SensorKinematics | None = None
        self.mapper: JointMapper | None = None
        self.input = Silence()
        self.samples_in = self.samples_out = self.undecodable = 0
        self.dropped: Counter[str] = Counter()
        self.upstream = UpstreamLoss()
        self.wrong_frame = ""
        Diagnostics(self, "sensor kinematics", self.status)
        self.publisher = self.create_publisher(SensorSamples, "sensor_samples", pipeline_qos())
        self.decoder, self.encoder = CdrDecoder(), CdrEncoder()
        self.create_subscription(JointSamples, "joint_samples", self.on_samples, pipeline_qos(),
                                 raw=True)
        self.description = RobotDescription(self, values, self.configure)

    def configure(self, urdf: str) -> None:
        """Load the model once the URDF is known (fails fast on a bad URDF or frame)."""
        self.model = self.settings.model(urdf)
        self.mapper = JointMapper(self.model.joint_names)
        self.get_logger().info(f"sensor frame {self.sensor_frame!r}, {self.model.nv} joints")

    def status(self) -> tuple[bytes, str, dict[str, Number]]:
        """Diagnostics: samples in, out and dropped by reason (they add up), messages that
        could not be decoded; an ERROR while wrenches come in another frame."""
        values: dict[str, Number] = {"samples_received": self.samples_in,
                                     "samples_published": self.samples_out,
                                     "samples_dropped": sum(self.dropped.values()),
                                     "messages_undecodable": self.undecodable,
                                     "samples_lost_upstream": self.upstream.lost,
                                     "samples_missed_at_start": self.upstream.missed}
        values.update({f"dropped_{k}": v for k, v in self.dropped.items()})
        if self.model is None:
            return DiagnosticStatus.WARN, "waiting for the URDF", values
        if self.wrong_frame:
            return (DiagnosticStatus.ERROR,
                    f"wrenches in frame {self.wrong_frame!r}, not sensor_frame "
                    f"{self.sensor_frame!r}: dropped; set sensor_frame to the URDF frame the "
                    "F/T sensor measures in", values)
        if self.input.silent:
            return DiagnosticStatus.WARN, "no joint samples", values
        return DiagnosticStatus.OK, f"sensor frame {self.sensor_frame}", values

    def _drop(self, reason: str, count: int, message: str) -> None:
        self.dropped[reason] += count
        self.get_logger().warning(f"{count} joint samples dropped: {message}",
                                  throttle_duration_sec=2.0)

    def on_samples(self, raw: bytes) -> None:
        self.input.tick()
        try:
            batch, names, frame_id, before, span = joint_samples_from_bytes(raw, self.decoder)
        except UndecodableError as exc:
            self.undecodable += 1
            self.get_logger().warning(f"joint samples dropped: {exc}", throttle_duration_sec=2.0)
            return
        self.samples_in += len(batch)
        self.upstream.update(before, len(batch))
        if self.model is None or self.mapper is None:
            self.dropped["before_urdf"] += len(batch)
            return
        if not len(batch):
            return
        if frame_id not in ("", self.sensor_frame):
            self.wrong_frame = frame_id
            self._drop("wrong_frame", len(batch), f"wrench frame {frame_id!r} is not "
                       f"sensor_frame {self.sensor_frame!r}")
            return
        self.wrong_frame = ""
        keep = in_range(batch.times)
        if not keep.all():
            self._drop(OUT_OF_RANGE, int(np.count_nonzero(~keep)), "stamps out of range")
            batch = batch.select(keep)
            if not len(batch):
                return
        values = [getattr(batch, f.name) for f in fields(batch) if f.name != "times"]
        if not all(plausible(x) for x in values if x is not None):
            self._drop("implausible", len(batch), "NaN, inf or values beyond "
                       f"{MAX_ABS_VALUE:g}: no measurement")
            return
        try:
            if batch.twist is not None and batch.proper_acceleration is not None:
                # The gatherer's matched filter computed and smoothed them already.
                twist, proper = batch.twist, batch.proper_acceleration
            else:
                order = self.mapper.indices(names)
                twist, proper = self.model.compute(batch.position[:, order],
                                                   batch.velocity[:, order],
                                                   batch.acceleration[:, order])
        except (InertialIdError, ValueError) as exc:
            self._drop("invalid", len(batch), str(exc))
            return
        self.publisher.publish(self.encoder.sensor_samples(
            batch.times, self.sensor_frame, self.samples_out, twist=twist,
            proper_acceleration=proper, wrench=batch.wrench, wrench_raw=batch.wrench_raw,
            acceleration_noise=batch.acceleration_noise, filter_span=span))
        self.samples_out += len(batch)


def main(args: list[str] | None = None) -> int:
    """Run the kinematics node."""
    return run(Kinematics, args)
