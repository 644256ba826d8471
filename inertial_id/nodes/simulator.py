"""simulator: the embedded robot, publishing like a real robot driver.

Moves the bundled 6-DoF arm (or any URDF) along an exciting Fourier trajectory with a known
payload behind the wrist F/T sensor and publishes, with header stamps from the node clock:
``joint_states`` (sensor_msgs/JointState, positions and velocities with encoder noise, joint
torques in ``effort``: links, payload, contacts, friction and noise),
``wrench`` (geometry_msgs/WrenchStamped in the sensor frame, payload-on-sensor convention,
with noise, a constant bias and optional contacts) and the ground truth on
``~/ground_truth`` (inertial_id/InertialParameters, ``wrench_offset`` = the true bias).
``~/change_payload`` (std_srvs/Trigger) mounts the ``payload_change_*`` payload at once (a tool
change on request). With ``driver: ur`` it also stands in for a UR driver's payload handling
(:mod:`inertial_id.nodes.ur_driver`): it serves ``/io_and_status_controller/set_payload`` and
from each payload set on publishes the wrench compensated for it.
With ``follow_trajectory`` the arm stands at ``home`` and moves only along the goals of the
``<controller>/follow_joint_trajectory`` action it serves
(:mod:`inertial_id.nodes.trajectory_server`), ``tracking_lag`` s behind them.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from geometry_msgs.msg import WrenchStamped
from numpy.typing import NDArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from std_srvs.srv import Trigger

from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.on_demand.tracking import TrackedArm
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.regressor import wrench_sign
from inertial_id.core.simulation import (
    Contact,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.io.cdr import CdrEncoder
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import check, declare_all, latched_qos, sensor_qos, to_stamp
from inertial_id.nodes.conversions import body_to_msg
from inertial_id.nodes.runner import run
from inertial_id.nodes.trajectory_server import TrajectoryServer
from inertial_id.nodes.ur_driver import UrDriverStandIn
from inertial_id.params.table import SIMULATOR_PARAMS


class Simulator(Node):
    """See the module docstring."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("simulator", **kwargs)
        v = declare_all(self, SIMULATOR_PARAMS)
        contacts = v["contacts"]
        change = BodyParameters.from_mass_com_inertia(
            v["payload_change_mass"], v["payload_change_com"], v["payload_change_inertia"])
        check(len(contacts) % 5 == 0, "contacts needs 5 numbers per contact")
        kinematics = SensorKinematics(v["urdf_path"] or bundled_urdf_path(), v["sensor_frame"])
        check(len(v["home"]) == kinematics.nv, f"home needs {kinematics.nv} joint positions")
        self.wrench_rate, self.joint_rate = v["wrench_rate"], v["joint_state_rate"]
        trajectory = (TrackedArm(v["home"], v["tracking_lag"]) if v["follow_trajectory"]
                      else FourierTrajectory.random(
                          v["home"], amplitude=v["amplitude"], period=v["period"],
                          max_velocity=v["max_velocity"], seed=v["trajectory_seed"]))
        change_time = v["payload_change_time"]
        self.sim = PayloadSimulation(
            kinematics, trajectory,
            payload=BodyParameters.from_mass_com_inertia(
                v["payload_mass"], v["payload_com"], v["payload_inertia"]),
            offset=np.asarray(v["wrench_offset"], dtype=float),
            sign=wrench_sign(v["wrench_sign"]),
            force_noise_std=v["force_noise_std"], torque_noise_std=v["torque_noise_std"],
            joint_noise_std=v["joint_noise_std"], effort_noise_std=v["effort_noise_std"],
            coulomb_friction=v["coulomb_friction"], viscous_friction=v["viscous_friction"],
            contacts=tuple(Contact(c[0], c[1], (c[2], c[3], c[4]))
                           for c in np.reshape(contacts, (-1, 5))),
            seed=v["seed"],
            payload_changes=((change_time, change),) if change_time >= 0 else (),
        )
        frame = v["sensor_frame"]
        self.change = change
        self.driver = (UrDriverStandIn(self, kinematics.model, frame, self.compensate)
                       if v["driver"] == "ur" else None)
        self.create_service(Trigger, "~/change_payload", self._change_payload)
        self.contacts_from_motion = v["contacts_from_motion"]
        self.controller = (TrajectoryServer(self, trajectory, kinematics.joint_names,
                                            v["controller"], self.elapsed)
                           if v["follow_trajectory"] else None)
        self.truth_sent: BodyParameters | None = None
        self.frame = frame
        self.joint_names = kinematics.joint_names
        qos = sensor_qos(v["queue_depth"])
        self.joint_pub = self.create_publisher(JointState, "joint_states", qos)
        self.wrench_pub = self.create_publisher(WrenchStamped, "wrench", qos)
        self.truth_pub = self.create_publisher(InertialParameters, "~/ground_truth", latched_qos())
        self.start: float | None = None
        self.sent = {"joint": 0, "wrench": 0}
        self.encoder = CdrEncoder()
        self.create_timer(v["tick"], self.tick)

    def _contacts_from_motion(self) -> None:
        """With ``contacts_from_motion``: once the first goal runs, its start is the contacts'
        time origin."""
        if not self.contacts_from_motion or self.controller.first_start is None:
            return
        self.contacts_from_motion = False
        self.sim.contacts = tuple(replace(c, start=c.start + self.controller.first_start)
                                  for c in self.sim.contacts)

    def elapsed(self) -> float:
        """s since the first tick (0 before it)."""
        if self.start is None:
            return 0.0
        return self.get_clock().now().nanoseconds * 1e-9 - self.start

    def compensate(self, pi: NDArray[np.float64], transition: float) -> None:
        """From now on the wrench is compensated for ``pi`` (sensor frame), reached over
        ``transition`` s."""
        self.sim.set_driver_payload(self.elapsed(), pi, transition)

    def change_payload(self) -> str:
        """Mount the ``payload_change_*`` payload now; what happened, in one line."""
        self.sim.mount(self.elapsed(), self.change)
        said = (f"mounted {self.change.mass:.4g} kg, CoM "
                f"{np.round(self.change.com, 4).tolist()} m at t = {self.elapsed():.3f} s")
        self.get_logger().info(said)
        return said

    def _change_payload(self, _: Trigger.Request, response: Trigger.Response
                        ) -> Trigger.Response:
        response.message, response.success = self.change_payload(), True
        return response

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
        if self.controller is not None:
            self.controller.tick()
            self._contacts_from_motion()
        joint_times = self._due("joint", self.joint_rate, elapsed)
        wrench_times = self._due("wrench", self.wrench_rate, elapsed)
        # Everything computed first, then published back to back (a driver's cycle: what it
        # sends together arrives together); serialised here (CdrEncoder) and published as
        # bytes: no message objects at 1.5 kHz.
        joints = ((*self.sim.joint_states(joint_times), self.sim.joint_efforts(joint_times))
                  if joint_times.size else None)
        wrenches = self.sim.wrench(wrench_times) if wrench_times.size else None
        if joints is not None:
            for t, q, v, e in zip(joint_times, *joints, strict=True):
                self.joint_pub.publish(
                    self.encoder.joint_state(self.start + t, self.joint_names, q, v, e))
        if wrenches is not None:
            for t, w in zip(wrench_times, wrenches, strict=True):
                self.wrench_pub.publish(self.encoder.wrench(self.start + t, self.frame, w))


def main(args: list[str] | None = None) -> int:
    """Run the simulator node."""
    return run(Simulator, args)
