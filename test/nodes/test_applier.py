"""The applier node against nodes serving the drivers' real interface types and controllers
declaring their real parameter names.

The drivers' packages are built from their documented definitions (``test/interfaces``,
:mod:`interface_packages`). The estimate comes from the real solver, started from a saved
payload (the simulator's truth in ``ft_sensor``, with its F/T bias), which it publishes, as
converged, once a second before any data; the applier subscribes to it, re-expresses it and
sends it. One test runs the applier as its own process without the drivers' packages.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from interface_packages import Prefix, build
from rcl_interfaces.msg import SetParametersResult
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from inertial_id.core.estimate import Estimate
from inertial_id.core.handoff import STANDARD_GRAVITY
from inertial_id.core.simulation import DEFAULT_OFFSET, bundled_urdf_path, default_payload
from inertial_id.io import calibration
from inertial_id.nodes.applier import Applier
from inertial_id.nodes.solver import Solver

SENSOR_TO_TOOL0 = np.array([0.0, 0.0, 0.025])  # the bundled arm: ft_sensor is 2.5 cm past
# tool0 along its z, with the same axes (its URDF), so a CoM in tool0 is the sensor's + this
TRUTH = default_payload()
BIAS = np.array(DEFAULT_OFFSET)


@pytest.fixture(scope="module")
def interfaces() -> Prefix:
    """ur_msgs, franka_msgs and xarm_msgs, built once (cached under build/), importable."""
    prefix = build()
    prefix.activate()
    return prefix


@pytest.fixture(scope="module")
def world(interfaces: Prefix, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[rclpy.Context, SingleThreadedExecutor]]:
    """A running solver publishing the simulated truth (converged) as /solver/parameters."""
    saved = tmp_path_factory.mktemp("saved") / "truth.yaml"
    estimate = Estimate(body=TRUTH, offset=BIAS, covariance=1e-10 * np.eye(16),
                        samples=1e5, condition_number=10.0, method="truth")
    calibration.save(saved, estimate, "ft_sensor", {"mass": True})
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(Solver(context=context, parameter_overrides=[
        Parameter("initial_payload_file", value=str(saved))]))
    yield context, executor
    executor.shutdown()
    rclpy.shutdown(context=context)


def spin_until(executor: SingleThreadedExecutor, done: Callable[[], bool],
               timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not done() and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)


def applier(context: rclpy.Context, tmp_path: Path, target: str, **values: Any) -> Applier:
    """An applier for ``target`` with fast gates (0.5 s stable) saving to ``tmp_path``."""
    settings = {"target": target, "urdf_path": bundled_urdf_path(), "auto_apply": True,
                "stable_s": 0.5, "min_interval": 0.0,
                "applied_file": str(tmp_path / "applied.yaml"), **values}
    return Applier(context=context, parameter_overrides=[
        Parameter(k, value=v) for k, v in settings.items()])


def driver(context: rclpy.Context, srv_type: Any, name: str, answer: dict[str, Any]
           ) -> tuple[Node, list[Any]]:
    """A node serving ``name`` with the real type: records each request, answers ``answer``."""
    node = Node(f"driver_{abs(hash(name)) % 10**6}", context=context)
    received: list[Any] = []

    def serve(request: Any, response: Any) -> Any:
        received.append(request)
        for key, value in answer.items():
            setattr(response, key, value)
        return response

    node.create_service(srv_type, name, serve)
    return node, received


def controller(context: rclpy.Context, name: str, parameters: dict[str, Any]
               ) -> tuple[Node, list[dict[str, Any]]]:
    """A node named like the controller, declaring its parameters; records each set."""
    node = Node(name, context=context)
    for key, value in parameters.items():
        node.declare_parameter(key, value)
    received: list[dict[str, Any]] = []

    def record(changed: list[Parameter]) -> SetParametersResult:
        received.append({p.name: p.value for p in changed})
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(record)
    return node, received


def run_against(world: tuple[rclpy.Context, SingleThreadedExecutor], nodes: list[Node],
                done: Callable[[], bool], timeout: float = 10.0) -> None:
    _, executor = world
    for node in nodes:
        executor.add_node(node)
    try:
        spin_until(executor, done, timeout)
    finally:
        for node in nodes:
            executor.remove_node(node)


def test_ur_classic_gets_mass_and_cog_in_tool0_and_the_inertia_is_named_missing(
        world: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ur_msgs.srv import SetPayload

    context, _ = world
    node = applier(context, tmp_path, "ur", transition_time=0.5)
    robot, received = driver(context, SetPayload, "/io_and_status_controller/set_payload",
                             {"success": True})
    run_against(world, [node, robot], lambda: node.counts["applied"] >= 1)
    (request,) = received
    cog = [request.center_of_gravity.x, request.center_of_gravity.y, request.center_of_gravity.z]
    np.testing.assert_allclose(cog, TRUTH.com + SENSOR_TO_TOOL0, atol=1e-3)
    assert request.mass == pytest.approx(TRUTH.mass, rel=1e-6)
    assert node.missing == ["ixx", "iyy", "izz", "ixy", "ixz", "iyz", "transition_time"]
    assert node.groups == ("mass", "com")  # the inertia is not needed: it cannot be sent
    loaded, frame = calibration.load(tmp_path / "applied.yaml")  # an initial_payload_file
    assert frame == "tool0" and loaded.body.mass == pytest.approx(TRUTH.mass)
    saved = yaml.safe_load((tmp_path / "applied.yaml").read_text())
    assert saved["estimate"]["frame"] == "tool0"
    assert saved["applied"]["target"] == "ur"
    assert saved["applied"]["fields"]["center_of_gravity"]["z"] == pytest.approx(
        TRUTH.com[2] + 0.025, abs=1e-9)
    # The same estimate again: within change_std of what was applied, nothing more is sent.
    run_against(world, [node, robot], lambda: False, timeout=2.5)
    assert len(received) == 1
    node.destroy_node()
    robot.destroy_node()


def test_franka_gets_column_major_inertia_and_a_refusal_is_an_error(
        world: tuple, tmp_path: Path) -> None:
    from franka_msgs.srv import SetLoad

    context, _ = world
    node = applier(context, tmp_path, "franka", auto_apply=False)
    robot, received = driver(context, SetLoad, "/service_server/set_load",
                             {"success": False, "error": "the robot is moving"})
    asker = Node("asker", context=context)
    client = asker.create_client(Trigger, "/applier/apply")
    answers: list[Trigger.Response] = []
    run_against(world, [node, robot, asker], lambda: node.gate.latest is not None
                and client.service_is_ready())
    assert not received  # auto_apply is off
    client.call_async(Trigger.Request()).add_done_callback(lambda f: answers.append(f.result()))
    run_against(world, [node, robot, asker], lambda: node.counts["refused"] >= 1)
    assert answers and answers[0].success, answers
    (request,) = received
    np.testing.assert_allclose(request.center_of_mass, TRUTH.com + SENSOR_TO_TOOL0, atol=1e-3)
    np.testing.assert_allclose(np.reshape(request.load_inertia, (3, 3), order="F"),
                               TRUTH.inertia_com, atol=1e-9)
    assert request.mass == pytest.approx(TRUTH.mass)
    assert node.status[1].endswith("refused the payload: the robot is moving")
    assert not (tmp_path / "applied.yaml").exists()
    for n in (node, robot, asker):
        n.destroy_node()


def test_xarm_gets_the_cog_in_millimetres(world: tuple, tmp_path: Path) -> None:
    from xarm_msgs.srv import SetTcpLoad

    context, _ = world
    node = applier(context, tmp_path, "xarm")
    robot, received = driver(context, SetTcpLoad, "/xarm/set_tcp_load",
                             {"ret": 0, "message": ""})
    run_against(world, [node, robot], lambda: node.counts["applied"] >= 1)
    (request,) = received
    np.testing.assert_allclose(request.center_of_gravity, 1e3 * (TRUTH.com + SENSOR_TO_TOOL0),
                               atol=1.0)
    assert request.weight == pytest.approx(TRUTH.mass, rel=1e-6)
    node.destroy_node()
    robot.destroy_node()


AXES = ("x", "y", "z")


def test_the_broadcaster_offsets_cancel_the_bias(world: tuple, tmp_path: Path) -> None:
    context, _ = world
    names = [f"offset.{kind}.{a}" for kind in ("force", "torque") for a in AXES]
    fts, received = controller(context, "force_torque_sensor_broadcaster",
                               dict.fromkeys(names, 0.0))
    node = applier(context, tmp_path, "fts-broadcaster")
    run_against(world, [node, fts], lambda: node.counts["applied"] >= 1)
    offsets = np.array([fts.get_parameter(n).value for n in names])
    np.testing.assert_allclose(offsets + BIAS, 0.0, atol=1e-9)  # reading + offset: no bias
    assert set().union(*received) == set(names)  # SetParameters: one callback each
    node.destroy_node()
    fts.destroy_node()


def test_gravity_compensation_and_admittance_parameters(world: tuple, tmp_path: Path) -> None:
    context, _ = world
    prefix = "sensor_filter_chain.filter1.params"
    chain, _ = controller(context, "ft_filter_chain", {
        f"{prefix}.sensor_frame": "", f"{prefix}.tool.mass": 0.0,
        f"{prefix}.tool.CoG": [0.0, 0.0, 0.0]})
    admittance, _ = controller(context, "admittance_controller", {
        "gravity_compensation.frame.id": "", "gravity_compensation.CoG.pos": [0.0, 0.0, 0.0],
        "gravity_compensation.CoG.force": 0.0})
    filter_applier = applier(context, tmp_path, "gravity-compensation",
                             destination="ft_filter_chain", parameter_prefix=prefix)
    admittance_applier = applier(context, tmp_path / "admittance", "admittance")
    run_against(world, [chain, admittance, filter_applier, admittance_applier],
                lambda: filter_applier.counts["applied"] >= 1
                and admittance_applier.counts["applied"] >= 1)
    assert chain.get_parameter(f"{prefix}.tool.mass").value == pytest.approx(TRUTH.mass)
    np.testing.assert_allclose(chain.get_parameter(f"{prefix}.tool.CoG").value, TRUTH.com,
                               atol=1e-9)  # the sensor frame
    assert chain.get_parameter(f"{prefix}.sensor_frame").value == "ft_sensor"
    weight = admittance.get_parameter("gravity_compensation.CoG.force").value
    assert weight == pytest.approx(TRUTH.mass * STANDARD_GRAVITY) and weight > 14.0  # N
    np.testing.assert_allclose(admittance.get_parameter("gravity_compensation.CoG.pos").value,
                               TRUTH.com, atol=1e-9)
    for n in (chain, admittance, filter_applier, admittance_applier):
        n.destroy_node()


def test_a_missing_service_is_one_warning_and_diagnostics_say_so(
        world: tuple, tmp_path: Path) -> None:
    context, _ = world
    node = applier(context, tmp_path, "ur", destination="/nobody/set_payload",
                   min_interval=30.0)
    probe = Node("diagnostics_probe", context=context)
    seen: list[DiagnosticArray] = []
    probe.create_subscription(DiagnosticArray, "/diagnostics", seen.append, 10)

    def said() -> bool:
        return any(s.name == "applier: apply to ur" and "not available" in s.message
                   for m in seen for s in m.status)

    run_against(world, [node, probe], said)
    assert said()
    run_against(world, [node, probe], lambda: False, timeout=1.5)
    assert node.counts["unavailable"] == 1  # the rate limit counts the attempt
    node.destroy_node()
    probe.destroy_node()


def test_without_the_driver_package_the_node_warns_once_and_a_dry_run_logs_the_request(
        world: tuple, ros_env: dict[str, str], tmp_path: Path) -> None:
    """Its own process, without the test-only ur_msgs on the path."""
    args = [str(Path(sys.executable).parent / "inertial_id_applier"), "--ros-args",
            "-p", "target:=ur", "-p", f"urdf_path:={bundled_urdf_path()}",
            "-p", "auto_apply:=true", "-p", "dry_run:=true", "-p", "stable_s:=0.5",
            "-p", f"applied_file:={tmp_path / 'applied.yaml'}"]
    process = subprocess.Popen(args, env=ros_env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    _, executor = world
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    try:  # its start-up is seconds under load: wait for the request, not a fixed time
        spin_until(executor, lambda: any("dry run: would send" in line for line in lines),
                   timeout=30.0)
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=10)
    output = "".join(lines)
    assert process.returncode == 0, output
    warnings = [line for line in output.splitlines() if "ur_msgs/srv/SetPayload is not" in line]
    assert len(warnings) == 1 and "[WARN]" in warnings[0], output
    match = re.search(r"dry run: would send to /io_and_status_controller/set_payload "
                      r"\(ur_msgs/srv/SetPayload\): (\{.*\})", output)
    assert match, output
    assert "'mass': 1.5," in match[1] and "'transition_time': 0.0" in match[1]
    assert not (tmp_path / "applied.yaml").exists()
