"""The solver's ``payload_from_torques`` mode over real topics between processes: the simulator
publishes joint states whose efforts carry the arm, the payload, a 1.5 s push and noise (its
F/T wrench is not used); the solver in another process estimates the payload from them alone,
flags the push on ``~/contact`` and keeps it out of the estimate."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import ContactAnomaly, InertialParameters

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MASS, COM = 0.9, (0.0, 0.02, 0.08)
PUSH = (22.0, 1.5, 0.0, 40.0, 0.0)  # start s, duration s, force on the payload N


def _start(ros_env: dict[str, str]) -> list[subprocess.Popen]:
    urdf = bundled_urdf_path()
    simulator = ["--params-file", str(ROOT / "config" / "demo.yaml"),
                 "-p", f"payload_mass:={MASS}", "-p", f"payload_com:={list(COM)}",
                 "-p", f"contacts:={list(PUSH)}", "-p", "coulomb_friction:=0.0",
                 "-p", "viscous_friction:=0.0", "-p", "wrench_rate:=200.0",
                 "-p", "joint_state_rate:=500.0"]
    solver = ["--params-file", str(ROOT / "config" / "inertial_id.yaml"),
              "-p", "mode:=payload_from_torques", "-p", "payload_frame:=ft_sensor",
              "-p", f"urdf_path:={urdf}", "-p", "links_decimation:=2",
              "-p", "min_samples:=300", "-p", "publish_rate:=4.0",
              "-p", "training_samples:=300", "-p", "contact_decimation:=1"]
    return [subprocess.Popen([str(BIN / f"inertial_id_{name}"), "--ros-args", *args],
                             env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
            for name, args in (("simulator", simulator), ("solver", solver))]


def test_the_payload_is_estimated_from_joint_torques_alone(
        ros_env: dict[str, str],
        stop_processes: Callable[[list[subprocess.Popen]], list[str]]) -> None:
    processes = _start(ros_env)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("torque_payload_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    received: list[InertialParameters] = []
    contacts: list[ContactAnomaly] = []
    node.create_subscription(InertialParameters, "/solver/parameters", received.append, 10)
    node.create_subscription(ContactAnomaly, "/solver/contact", contacts.append, 1000)

    def push_seen_and_over() -> bool:
        flags = [c.contact for c in contacts]
        return True in flags and False in flags[flags.index(True):]

    try:
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline and not (
                received and received[-1].mass_converged and received[-1].samples_used > 2000
                and push_seen_and_over()):
            executor.spin_once(timeout_sec=0.1)
        assert received, "no estimate from joint torques"
        msg = received[-1]
        assert msg.header.frame_id == "ft_sensor"
        assert msg.mass_converged, (msg.mass, msg.std[0], msg.samples_used)
        assert abs(msg.mass - MASS) < 0.02 * MASS, msg.mass
        assert abs(msg.com.z - COM[2]) < 0.005, msg.com
        assert abs(msg.mass - MASS) < 4.0 * msg.std[0] + 1e-3, (msg.mass, msg.std[0])
        assert list(msg.wrench_offset) == [0.0] * 6
        # The push: flagged within its time (sim stamps start near 0 s), its external wrench
        # estimated from the joint torques alone, the estimate above made without it.
        flagged = [c for c in contacts if c.contact]
        assert flagged, "the push was not flagged"
        starts = [c.header.stamp.sec + 1e-9 * c.header.stamp.nanosec for c in flagged]
        first = contacts[0].header.stamp.sec + 1e-9 * contacts[0].header.stamp.nanosec
        assert all(f.monitor_trained and f.t2 > f.threshold for f in flagged[:1])
        assert max(starts) - min(starts) < PUSH[1] + 0.5
        assert all(f.header.frame_id == "ft_sensor" for f in flagged)
        middle = flagged[len(flagged) // 2].residual.force
        assert abs(middle.y - PUSH[3]) < 5.0, middle
        assert first < min(starts)
    finally:
        outputs = stop_processes(processes)
        node.destroy_node()
        rclpy.shutdown(context=context)
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output
        assert "Traceback" not in output, output
