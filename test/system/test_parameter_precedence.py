"""A ``-p`` value wins over every parameter file, whatever their order and sections.

rcl merges ``-p`` values into the files' ``/**`` section (wherever it first appeared), so a
later file's ``/**/<node>`` section used to override them: the shipped base file, the demo's
file and ``-p payload_mass:=0.7`` ran the simulator with the demo's 1.5 kg. Here the real
simulator executable runs with two stacked files, a third of the integrator's own (``/**`` and
``/**/simulator`` sections), and ``-p`` values before and after them; its parameter service
says which values it took.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from rcl_interfaces.srv import GetParameters
from rclpy.parameter import parameter_value_to_python
from services import call_until_answered

from inertial_id.nodes.runner import parameter_rules

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONFIG = ROOT / "config"
EXPECTED = {"payload_mass": 0.7, "wrench_rate": 250.0, "seed": 3,
            "joint_state_rate": 400.0, "period": 8.0}
"""``-p`` (the first three, one also in the integrator's ``/**/simulator`` section and one in
its ``/**`` section), the integrator's file (over demo.yaml's 500 Hz) and demo.yaml alone."""


def test_parameter_rules_are_the_p_values_of_every_ros_section() -> None:
    argv = ["simulator", "--x", "-p", "a:=1", "--ros-args", "--params-file", "-p", "-p",
            "b:=2", "-r", "c:=d", "--", "-p", "e:=3", "--ros-args", "--param", "f:=[1, 2]"]
    assert parameter_rules(argv) == ["--ros-args", "-p", "b:=2", "-p", "f:=[1, 2]"]
    assert parameter_rules(["simulator", "--ros-args", "-r", "__ns:=/left"]) == []


def _parameters(name: str, names: list[str], timeout: float = 60.0) -> dict[str, object]:
    """The values node ``name`` reports through its ``get_parameters`` service."""
    answer = call_until_answered(GetParameters, f"/{name}/get_parameters",
                                 GetParameters.Request(names=names), timeout)
    return {n: parameter_value_to_python(v)
            for n, v in zip(names, answer.values, strict=True)}


def test_p_wins_over_stacked_files_in_any_order(tmp_path: Path, ros_env: dict[str, str],
                                                stop_processes) -> None:
    robot = tmp_path / "robot.yaml"
    robot.write_text(yaml.safe_dump({
        "/**": {"ros__parameters": {"seed": 9}},
        "/**/simulator": {"ros__parameters": {"payload_mass": 2.0, "joint_state_rate": 400.0}}}))
    command = [str(BIN / "inertial_id_simulator"), "--ros-args", "-p", "payload_mass:=0.7",
               "--params-file", str(CONFIG / "inertial_id.yaml"),
               "--params-file", str(CONFIG / "demo.yaml"), "--params-file", str(robot),
               "-p", "wrench_rate:=250.0", "-p", "seed:=3"]
    process = subprocess.Popen(command, env=ros_env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        values = _parameters("simulator", list(EXPECTED))
    finally:
        output = stop_processes([process])[0]
    assert process.returncode == 0, output
    assert values == EXPECTED, output
