"""Two complete pipelines side by side, each in its own namespace and processes (as
``ros2 launch inertial_id demo.launch.xml namespace:=left`` and ``:=right`` start them), on two
different payloads: each estimates its own, and the ``/**/<node>`` parameter files apply in
both namespaces.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import rclpy
import yaml
from rcl_interfaces.srv import GetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from services import call_until_answered

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import InertialParameters

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAYLOADS = {  # namespace: (mass kg, CoM m, inertia about the CoM)
    "left": (1.5, [0.012, -0.018, 0.065], [0.004, 0.0, 0.0, 0.005, 0.0, 0.0026]),
    "right": (0.8, [0.0, 0.03, 0.09], [0.002, 0.0, 0.0, 0.002, 0.0, 0.001]),
}
MARKER = 0.0021  # converged_com_std from the test's parameter file: it reached the node


def _start(ns: str, params_file: Path, env: dict[str, str]) -> list[subprocess.Popen]:
    mass, com, inertia = PAYLOADS[ns]
    common = ["--params-file", str(ROOT / "config" / "inertial_id.yaml"),
              "--params-file", str(params_file), "-r", f"__ns:=/{ns}"]
    urdf = ["-p", f"urdf_path:={bundled_urdf_path()}"]
    commands = {
        "simulator": ["--params-file", str(ROOT / "config" / "demo.yaml"), "-r", f"__ns:=/{ns}",
                      "-p", f"payload_mass:={mass}", "-p", f"payload_com:={com}",
                      "-p", f"payload_inertia:={inertia}", "-p", "contacts:=[]",
                      "-p", "wrench_rate:=500.0", "-p", "joint_state_rate:=250.0"],
        "gatherer": common + urdf, "kinematics": common + urdf, "solver": common,
    }
    return [subprocess.Popen([str(BIN / f"inertial_id_{name}"), "--ros-args", *args],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
            for name, args in commands.items()]


def test_two_pipelines_in_two_namespaces_estimate_their_own_payloads(
        tmp_path: Path, ros_env: dict[str, str],
        stop_processes: Callable[[list[subprocess.Popen]], list[str]]) -> None:
    params_file = tmp_path / "test.yaml"
    params_file.write_text(yaml.safe_dump({"/**/solver": {"ros__parameters": {
        "min_samples": 300, "publish_rate": 5.0, "converged_com_std": MARKER}}}))
    processes = [p for ns in PAYLOADS for p in _start(ns, params_file, ros_env)]
    context = rclpy.Context()
    rclpy.init(context=context)
    node = Node("namespace_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    latest: dict[str, InertialParameters] = {}
    for ns in PAYLOADS:
        node.create_subscription(InertialParameters, f"/{ns}/solver/parameters",
                                 lambda msg, ns=ns: latest.__setitem__(ns, msg), 10)
    try:
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline and not (
                len(latest) == 2 and all(m.mass_converged and m.samples_used > 3000
                                         for m in latest.values())):
            executor.spin_once(timeout_sec=0.1)
        assert len(latest) == 2, f"estimates only from {sorted(latest)}"
        for ns, (mass, com, _) in PAYLOADS.items():
            msg = latest[ns]
            assert abs(msg.mass - mass) < 0.03 * mass, f"/{ns}: {msg.mass} kg for {mass} kg"
            assert abs(msg.com.z - com[2]) < 0.005, f"/{ns}: CoM z {msg.com.z} for {com[2]}"
        for ns in PAYLOADS:  # the /**/solver section reached the solver in each namespace
            answer = call_until_answered(
                GetParameters, f"/{ns}/solver/get_parameters",
                GetParameters.Request(names=["converged_com_std"]), 30.0)
            assert answer.values[0].double_value == MARKER
    finally:
        outputs = stop_processes(processes)
        node.destroy_node()
        rclpy.shutdown(context=context)
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0 and "Traceback" not in output, output
