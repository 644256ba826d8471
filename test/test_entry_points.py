"""The executables as a new user meets them: ``--help`` on every node executable, and a
misspelt parameter refused at start in replay's words.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inertial_id.core.errors import InertialIdError
from inertial_id.replay import load_params
from inertial_id.settings import NODE_PARAMS, online_config

BIN = Path(sys.executable).parent


def _run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          check=False)


@pytest.mark.parametrize("node", sorted(NODE_PARAMS))
def test_help_lists_the_parameters_and_does_not_start_the_node(node: str) -> None:
    done = _run([str(BIN / f"inertial_id_{node}"), "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: ros2 run inertial_id {node}")
    for param in NODE_PARAMS[node]:
        assert f"\n  {param.name}  (" in done.stdout, param.name
    assert "[INFO]" not in done.stdout + done.stderr  # no node was created


def test_solver_help_gives_description_unit_default_and_range() -> None:
    done = _run([str(BIN / "inertial_id_solver"), "-h", "--ros-args", "-p", "epsilon:=1e-6"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("  forgetting_factor  (default 1.0, unit 1, > 0 and <= 1, live)")
    assert lines[at + 1].strip().startswith("per-sample exponential forgetting")
    assert "--managed" in done.stdout


def test_a_misspelt_key_in_a_parameter_file_stops_the_node_as_it_stops_replay(
        tmp_path: Path, ros_env: dict[str, str]) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("/**/solver:\n  ros__parameters:\n    forgeting_factor: 0.99\n"
                      "    use_sim_time: false\n")
    with pytest.raises(InertialIdError) as replayed:
        online_config(load_params(params)["solver"])
    assert str(replayed.value) == "solver has no parameter(s) forgeting_factor"
    done = _run([str(BIN / "inertial_id_solver"), "--ros-args", "--params-file", str(params)],
                env=ros_env)
    assert done.returncode == 1
    assert done.stdout.strip().splitlines() == [f"inertial_id: {replayed.value}"]
