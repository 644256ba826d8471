"""gatherer: synchronises ``joint_states`` and ``wrench`` by header stamp.

Subscribes ``joint_states`` (sensor_msgs/JointState) and ``wrench`` (geometry_msgs/
WrenchStamped); publishes ``joint_samples`` (inertial_id/JointSamples): batches of wrench
samples with the URDF joints' positions, velocities and accelerations at the same stamps,
from a fixed-lag Savitzky-Golay filter applied alike to both signals.
"""

from __future__ import annotations

from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import ParameterType
from rclpy.node import Node
from sensor_msgs.msg import JointState

from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import JointMapper, load_urdf_model, movable_joint_names
from inertial_id.core.synchronizer import FixedLagSynchronizer
from inertial_id.msg import JointSamples
from inertial_id.nodes.common import (
    RobotDescription,
    declare,
    pipeline_qos,
    run,
    sensor_qos,
    to_seconds,
)
from inertial_id.nodes.conversions import joint_samples_to_msg, wrench_to_array


class Gatherer(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("gatherer", **kwargs)
        self.window = declare(self, "window", 15, "Savitzky-Golay window, joint samples (odd)")
        self.order = declare(self, "polyorder", 3, "Savitzky-Golay polynomial order (>= 2)")
        self.use_velocity = declare(
            self, "use_measured_velocity", False,
            "differentiate JointState.velocity instead of the positions")
        self.locked = declare(self, "locked_joint_names", [],
                              "URDF joints held still and left out of the model",
                              ParameterType.PARAMETER_STRING_ARRAY)
        depth = declare(self, "queue_depth", 500, "subscription queue depth (messages)")
        rate = declare(self, "publish_rate", 50.0, "batches published per second (Hz)")
        self.mapper: JointMapper | None = None
        self.synchronizer: FixedLagSynchronizer | None = None
        self.frame_id = ""
        self.publisher = self.create_publisher(JointSamples, "joint_samples", pipeline_qos())
        self.create_subscription(JointState, "joint_states", self.on_joint_state,
                                 sensor_qos(depth))
        self.create_subscription(WrenchStamped, "wrench", self.on_wrench, sensor_qos(depth))
        self.create_timer(1.0 / rate, self.publish_ready)
        self.description = RobotDescription(self, self.configure)

    def configure(self, urdf: str) -> None:
        """Set up the joint mapping and filter once the URDF is known."""
        names = [n for n in movable_joint_names(load_urdf_model(urdf)) if n not in self.locked]
        self.mapper = JointMapper(names)
        self.synchronizer = FixedLagSynchronizer(
            len(names), self.window, self.order, self.use_velocity
        )
        self.get_logger().info(f"gathering {len(names)} joints: {', '.join(names)}")

    def on_joint_state(self, msg: JointState) -> None:
        if self.synchronizer is None or self.mapper is None:
            return
        try:
            q = self.mapper.select(msg.name, msg.position)
            v = None
            if self.use_velocity:
                v = self.mapper.select(msg.name, msg.velocity)
            self.synchronizer.add_joint_state(to_seconds(msg.header.stamp), q, v)
        except InertialIdError as exc:
            self.get_logger().warn(f"joint state dropped: {exc}", throttle_duration_sec=2.0)

    def on_wrench(self, msg: WrenchStamped) -> None:
        if self.synchronizer is None:
            return
        self.frame_id = msg.header.frame_id
        try:
            self.synchronizer.add_wrench(to_seconds(msg.header.stamp), wrench_to_array(msg.wrench))
        except InertialIdError as exc:
            self.get_logger().warn(f"wrench dropped: {exc}", throttle_duration_sec=2.0)

    def publish_ready(self) -> None:
        if self.synchronizer is None or self.mapper is None:
            return
        batch = self.synchronizer.pop_ready()
        if len(batch):
            self.publisher.publish(
                joint_samples_to_msg(batch, self.mapper.joint_names, self.frame_id)
            )


def main(args: list[str] | None = None) -> int:
    """Run the gatherer node."""
    return run(Gatherer, args)
