"""End to end: simulator, gatherer, kinematics and solver as four separate processes, and the
simulator beside the three pipeline nodes in one process (the ``pipeline`` executable)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import RecentValues, latched_qos

BIN = Path(sys.executable).parent


def _start(executable: str, env: dict[str, str], *params: str,
           flags: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    args = [str(BIN / executable), *flags, "--ros-args"]
    for p in params:
        args += ["-p", p]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.fixture(params=["separate", "one_process"])
def pipeline(request: pytest.FixtureRequest, ros_env: dict[str, str]):  # noqa: ANN201
    urdf = f"urdf_path:={bundled_urdf_path()}"
    processes = [_start("inertial_id_simulator", ros_env, "wrench_rate:=1000.0",
                        "joint_state_rate:=500.0")]
    if request.param == "separate":
        processes += [_start("inertial_id_gatherer", ros_env, urdf),
                      _start("inertial_id_kinematics", ros_env, urdf),
                      _start("inertial_id_solver", ros_env, "publish_rate:=2.0")]
    else:
        processes.append(_start("inertial_id_pipeline", ros_env,
                                flags=(f"--urdf-path={bundled_urdf_path()}",)))
    yield processes
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_estimate(timeout: float) -> tuple[InertialParameters, InertialParameters, list]:
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("pipeline_probe", context=context)
        received: dict[str, InertialParameters] = {}
        estimates: list[InertialParameters] = []
        node.create_subscription(InertialParameters, "/simulator/ground_truth",
                                 lambda m: received.__setitem__("truth", m), latched_qos())
        node.create_subscription(InertialParameters, "/solver/parameters", estimates.append, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
            if "truth" in received and estimates and estimates[-1].samples_used > 6000:
                return received["truth"], estimates[-1], estimates
        pytest.fail(f"no converged estimate in {timeout} s "
                    f"(truth: {'truth' in received}, estimates: {len(estimates)})")
    finally:
        rclpy.shutdown(context=context)


def test_four_processes_identify_the_payload(pipeline: list[subprocess.Popen[bytes]]) -> None:
    truth, estimate, history = _wait_for_estimate(timeout=90.0)
    for process in pipeline:
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
    assert all(m.physically_consistent for m in history)
    assert all(m.min_pseudo_inertia_eigenvalue > 0 for m in history)
    assert estimate.header.frame_id == "ft_sensor"
    assert abs(estimate.mass - truth.mass) < 0.02 * truth.mass
    com = np.array([estimate.com.x, estimate.com.y, estimate.com.z])
    true_com = np.array([truth.com.x, truth.com.y, truth.com.z])
    assert np.linalg.norm(com - true_com) < 0.005
    bias_error = np.abs(np.array(estimate.wrench_offset[:3]) - np.array(truth.wrench_offset[:3]))
    assert bias_error.max() < 0.2
    assert estimate.method == "lmi_sdp"


@given(st.integers(1, 50), st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False),
                                             max_size=80), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_recent_values_hold_the_last_values_of_the_stream(size: int,
                                                          batches: list[list[float]]) -> None:
    """The solver's latency window: its percentiles are those of the stream's last values."""
    recent = RecentValues(size)
    for batch in batches:
        recent.extend(np.array(batch))
    stream = [v for batch in batches for v in batch]
    assert len(recent) == min(size, len(stream))
    if stream:
        q = [0, 17, 50, 99, 100]
        np.testing.assert_array_equal(recent.percentiles(q), np.percentile(stream[-size:], q))
