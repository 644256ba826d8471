"""``gatherer/compensated_wrench`` between processes: simulator, gatherer, kinematics and solver
apart, a subscriber here. Once the solver's estimate has converged, the compensated wrench is
at the simulated sensor's noise with nothing touching the tool, and a push shows as itself."""

from __future__ import annotations

import time

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import WrenchStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from test_four_processes import _start

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import latched_qos, sensor_qos

FORCE_NOISE, TORQUE_NOISE = 0.08, 0.004
PUSH = (25.0, 1.5, 0.0, -15.0, 0.0)  # start s, duration s, force N (sensor frame)


def test_the_compensated_wrench_is_the_noise_and_the_push(ros_env: dict[str, str]) -> None:
    urdf = f"urdf_path:={bundled_urdf_path()}"
    contacts = "contacts:=[" + ", ".join(str(v) for v in PUSH) + "]"
    processes = [_start("inertial_id_simulator", ros_env, "wrench_rate:=1000.0",
                        "joint_state_rate:=500.0", f"force_noise_std:={FORCE_NOISE}",
                        f"torque_noise_std:={TORQUE_NOISE}", contacts),
                 _start("inertial_id_gatherer", ros_env, urdf),
                 _start("inertial_id_kinematics", ros_env, urdf),
                 _start("inertial_id_solver", ros_env)]
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("compensated_probe", context=context)
        estimates: list[InertialParameters] = []
        wrenches: list[tuple[float, np.ndarray]] = []
        motion_start: list[float] = []
        node.create_subscription(InertialParameters, "/solver/parameters", estimates.append, 10)
        node.create_subscription(  # the simulator's time 0 (latched: the arm's first sample)
            InertialParameters, "/simulator/ground_truth",
            lambda m: motion_start or motion_start.append(
                m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec), latched_qos())
        node.create_subscription(
            WrenchStamped, "/gatherer/compensated_wrench",
            lambda m: wrenches.append((m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec,
                                       np.array([m.wrench.force.x, m.wrench.force.y,
                                                 m.wrench.force.z, m.wrench.torque.x,
                                                 m.wrench.torque.y, m.wrench.torque.z]))),
            sensor_qos(1000))
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 120.0
        converged_at = None
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            if converged_at is None and estimates and estimates[-1].converged:
                stamp = estimates[-1].header.stamp
                converged_at = stamp.sec + 1e-9 * stamp.nanosec + 2.0  # settled 2 s more
            if (wrenches and converged_at is not None and motion_start
                    and wrenches[-1][0] > motion_start[0] + PUSH[0] + PUSH[1] + 0.5):
                break
        for process in processes:
            assert process.poll() is None
    finally:
        rclpy.shutdown(context=context)
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)
    assert converged_at is not None and wrenches, (len(estimates), len(wrenches))
    stamps = np.array([t for t, _ in wrenches])
    values = np.array([w for _, w in wrenches])
    start = motion_start[0]
    quiet = (stamps > converged_at) & (stamps < start + PUSH[0] - 0.2)
    if quiet.sum() < 500:
        pytest.fail(f"{quiet.sum()} compensated wrenches between convergence + 2 s "
                    f"({converged_at - start:.1f} s) and the push ({PUSH[0]} s); the first at "
                    f"{stamps[0] - start:.1f} s, {len(stamps)} in all")
    ratio = np.sqrt(np.mean(values[quiet] ** 2, axis=0)) / np.repeat(
        [FORCE_NOISE, TORQUE_NOISE], 3)
    assert (ratio < 2.0).all(), ratio
    pushed = (stamps > start + PUSH[0] + 0.2) & (stamps < start + PUSH[0] + PUSH[1] - 0.2)
    assert pushed.sum() > 500
    # payload_on_sensor (s = -1): w_c = -s w_ext = the push's force.
    np.testing.assert_allclose(values[pushed, :3].mean(axis=0), PUSH[2:], atol=1.0)
