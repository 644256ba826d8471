"""simulator: the embedded robot, publishing like a real robot driver.

Moves the bundled 6-DoF arm (or any URDF) along an exciting Fourier trajectory with a known
payload behind the wrist F/T sensor and publishes, with header stamps from the node clock:
``joint_states`` (sensor_msgs/JointState, positions and velocities with encoder noise),
``wrench`` (geometry_msgs/WrenchStamped in the sensor frame, payload-on-sensor convention,
with noise, a constant bias and optional contacts) and the ground truth on
``~/ground_truth`` (inertial_id/InertialParameters, ``wrench_offset`` = the true bias).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from inertial_id.cdr import CdrEncoder
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.regressor import wrench_sign
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    DEFAULT_OFFSET,
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
    default_payload,
)
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import check, declare, latched_qos, run, sensor_qos, to_stamp
from inertial_id.nodes.conversions import body_to_msg

_DOUBLES = Parameter.Type.DOUBLE_ARRAY


class Simulator(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("simulator", **kwargs)
        payload = default_payload()
        urdf = declare(self, "urdf_path", "", "URDF file; empty: the bundled arm6_ft arm")
        frame = declare(self, "sensor_frame", BUNDLED_SENSOR_FRAME, "F/T sensor frame")
        home = declare(self, "home", list(BUNDLED_HOME), "trajectory centre, rad")
        mass = declare(self, "payload_mass", payload.mass, "payload mass, kg")
        com = declare(self, "payload_com", payload.com.tolist(), "payload CoM, m, sensor frame")
        inertia = declare(self, "payload_inertia", vector_from_symmetric(payload.inertia_com)
                          .tolist(), "[ixx, ixy, ixz, iyy, iyz, izz] about the CoM, kg m^2")
        offset = declare(self, "wrench_offset", list(DEFAULT_OFFSET), "F/T bias, N and N m")
        contacts = declare(self, "contacts", [],
                           "flat [start_s, duration_s, fx, fy, fz] per contact", _DOUBLES)
        sign = declare(self, "wrench_sign", "payload_on_sensor", "convention of the wrench")
        self.wrench_rate = declare(self, "wrench_rate", 1000.0, "F/T rate, Hz")
        self.joint_rate = declare(self, "joint_state_rate", 500.0, "joint state rate, Hz")
        change_time = declare(self, "payload_change_time", -1.0,
                              "s after start when the payload changes (< 0: never)")
        change = BodyParameters.from_mass_com_inertia(
            declare(self, "payload_change_mass", 0.8, "new payload mass, kg"),
            declare(self, "payload_change_com", [0.0, 0.03, 0.09], "new payload CoM, m"),
            declare(self, "payload_change_inertia", [0.002, 0.0, 0.0, 0.002, 0.0, 0.001],
                    "new payload inertia about its CoM, kg m^2"),
        )
        check(len(contacts) % 5 == 0, "contacts needs 5 numbers per contact")
        check(self.wrench_rate > 0 and self.joint_rate > 0, "rates must be positive")
        kinematics = SensorKinematics(urdf or bundled_urdf_path(), frame)
        check(len(home) == kinematics.nv, f"home needs {kinematics.nv} joint positions")
        trajectory = FourierTrajectory.random(
            home,
            amplitude=declare(self, "amplitude", 0.6, "max joint excursion, rad"),
            period=declare(self, "period", 8.0, "trajectory period, s"),
            max_velocity=declare(self, "max_velocity", 1.5, "max joint speed, rad/s"),
            seed=declare(self, "trajectory_seed", 1, "seed of the Fourier coefficients"),
        )
        self.sim = PayloadSimulation(
            kinematics, trajectory,
            payload=BodyParameters.from_mass_com_inertia(mass, com, inertia),
            offset=np.asarray(offset, dtype=float),
            sign=wrench_sign(sign),
            force_noise_std=declare(self, "force_noise_std", 0.08, "F/T force noise, N"),
            torque_noise_std=declare(self, "torque_noise_std", 0.004, "F/T torque noise, N m"),
            joint_noise_std=declare(self, "joint_noise_std", 1e-5, "encoder noise, rad"),
            contacts=tuple(Contact(c[0], c[1], (c[2], c[3], c[4]))
                           for c in np.reshape(contacts, (-1, 5))),
            seed=declare(self, "seed", 0, "noise seed"),
            payload_changes=((change_time, change),) if change_time >= 0 else (),
        )
        self.truth_sent: BodyParameters | None = None
        self.frame = frame
        self.joint_names = kinematics.joint_names
        qos = sensor_qos(declare(self, "queue_depth", 500, "publisher queue depth"))
        self.joint_pub = self.create_publisher(JointState, "joint_states", qos)
        self.wrench_pub = self.create_publisher(WrenchStamped, "wrench", qos)
        self.truth_pub = self.create_publisher(InertialParameters, "~/ground_truth", latched_qos())
        self.start: float | None = None
        self.sent = {"joint": 0, "wrench": 0}
        self.encoder = CdrEncoder()
        self.create_timer(declare(self, "tick", 0.005, "publishing period, s"), self.tick)

    def publish_truth(self, elapsed: float) -> None:
        """Latch the payload held at ``elapsed`` s (again after each payload change)."""
        body = self.sim.payload_at(elapsed)
        if body is self.truth_sent:
            return
        self.truth_sent = body
        header = Header(stamp=to_stamp((self.start or 0.0) + elapsed), frame_id=self.frame)
        msg = body_to_msg(body, header)
        msg.wrench_offset = self.sim.offset.tolist()
        msg.method = "ground_truth"
        self.truth_pub.publish(msg)

    def _due(self, kind: str, rate: float, elapsed: float) -> np.ndarray:
        """Sample times (since start) that are due and not yet sent."""
        first = self.sent[kind]
        last = int(np.floor(elapsed * rate))
        self.sent[kind] = max(first, last + 1)
        return np.arange(first, last + 1) / rate

    def tick(self) -> None:
        now = self.get_clock().now().nanoseconds * 1e-9
        if now <= 0.0:  # sim time not started yet
            return
        if self.start is None:
            self.start = now
        elapsed = now - self.start
        self.publish_truth(elapsed)
        joint_times = self._due("joint", self.joint_rate, elapsed)
        wrench_times = self._due("wrench", self.wrench_rate, elapsed)
        # Serialised here (CdrEncoder) and published as bytes: no message objects at 1.5 kHz.
        if joint_times.size:
            positions, velocities = self.sim.joint_states(joint_times)
            for t, q, v in zip(joint_times, positions, velocities, strict=True):
                self.joint_pub.publish(
                    self.encoder.joint_state(self.start + t, self.joint_names, q, v))
        if wrench_times.size:
            for t, w in zip(wrench_times, self.sim.wrench(wrench_times), strict=True):
                self.wrench_pub.publish(self.encoder.wrench(self.start + t, self.frame, w))


def main(args: list[str] | None = None) -> int:
    """Run the simulator node."""
    return run(Simulator, args)
