"""The solver's ``output_frame``: ~/parameters, ~/inertia, ~/markers and ~/save in tool0.

A saved payload (known, in the sensor frame) is published before any data, so the node's
frame change is checked without a pipeline run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import InertiaStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from visualization_msgs.msg import MarkerArray

from inertial_id.core.errors import ModelError
from inertial_id.core.estimate import Estimate
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.io import calibration
from inertial_id.msg import InertialParameters
from inertial_id.nodes.solver import Solver

COM = np.array([0.012, -0.018, 0.065])  # m, ft_sensor
SENSOR_TO_TOOL0 = np.array([0.0, 0.0, 0.025])  # ft_sensor's origin is 2.5 cm past tool0's


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """A 1.5 kg payload saved in the sensor frame, with an offset."""
    body = BodyParameters.from_mass_com_inertia(1.5, COM, np.diag([0.004, 0.005, 0.0026]))
    estimate = Estimate(body=body, offset=np.array([1.0, -0.5, 2.0, 0.05, -0.03, 0.02]),
                        covariance=1e-8 * np.eye(16), samples=1000.0, condition_number=10.0,
                        method="test")
    path = tmp_path / "sensor.yaml"
    calibration.save(path, estimate, "ft_sensor", {"mass": True})
    return path


def test_the_solver_publishes_and_saves_in_its_output_frame(saved: Path, tmp_path: Path) -> None:
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        solver = Solver(context=context, parameter_overrides=[
            Parameter("initial_payload_file", value=str(saved)),
            Parameter("output_frame", value="tool0"),
            Parameter("urdf_path", value=bundled_urdf_path()),
            Parameter("calibration_file", value=str(tmp_path / "tool0.yaml")),
            Parameter("publish_rate", value=20.0)])
        probe = Node("output_frame_probe", context=context)
        received: dict[str, list] = {"parameters": [], "inertia": [], "markers": []}
        for topic, kind in (("parameters", InertialParameters), ("inertia", InertiaStamped),
                            ("markers", MarkerArray)):
            probe.create_subscription(kind, f"/solver/{topic}", received[topic].append, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(solver)
        executor.add_node(probe)
        end = time.monotonic() + 10.0
        while not all(received.values()) and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        assert all(received.values()), {k: len(v) for k, v in received.items()}
        parameters = received["parameters"][-1]
        inertia = received["inertia"][-1].inertia
        assert parameters.header.frame_id == "tool0"
        assert received["inertia"][-1].header.frame_id == "tool0"
        assert received["markers"][-1].markers[0].header.frame_id == "tool0"
        expected = COM + SENSOR_TO_TOOL0
        np.testing.assert_allclose([parameters.com.x, parameters.com.y, parameters.com.z],
                                   expected, atol=1e-12)
        np.testing.assert_allclose([inertia.com.x, inertia.com.y, inertia.com.z], expected,
                                   atol=1e-12)
        assert inertia.izz == pytest.approx(0.0026, abs=1e-12)  # translation: same about CoM
        assert parameters.mass == pytest.approx(1.5, rel=1e-12)
        solver.save()
        estimate, frame = calibration.load(tmp_path / "tool0.yaml")
        assert frame == "tool0"
        np.testing.assert_allclose(estimate.body.com, expected, atol=1e-12)
        # The offset moves as a wrench: torque about tool0 = torque + (sensor - tool0) x force.
        np.testing.assert_allclose(estimate.offset[3:], np.array([0.05, -0.03, 0.02])
                                   + np.cross(SENSOR_TO_TOOL0, [1.0, -0.5, 2.0]), atol=1e-12)
        with pytest.raises(ModelError, match="'flange' is not in the URDF"):
            Solver(context=context, parameter_overrides=[
                Parameter("output_frame", value="flange"),
                Parameter("urdf_path", value=bundled_urdf_path())])
    finally:
        rclpy.shutdown(context=context)
