"""A robot user's install: ``colcon build`` of this package in a fresh workspace.

The package's files (what ``git clone`` gives) are copied into ``<tmp>/ws/src/inertial_id`` and
built with colcon against this environment's ROS 2, which plays the part of a sourced
``/opt/ros/<distro>``. Then, from the sourced ``install/setup.bash`` only:

- what CMake installs is there: the node executables under ``lib/inertial_id``, the launch files
  and configs under ``share/inertial_id`` (every executable and path the launch files name), the
  package in the ament index;
- the messages and the package import from the install space and serialise through their
  compiled type support;
- the four nodes start as ``ros2 run inertial_id <node> --ros-args --params-file
  <share>/config/...`` starts them (the executable found through the ament index) and answer:
  gatherer, kinematics and solver on ``/diagnostics``, the simulator with its ground truth, the
  solver with an estimate of the simulated payload.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from inertial_id.msg import InertialParameters
from inertial_id.nodes.common import latched_qos

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
BIN = Path(sys.executable).parent
NODES = ("gatherer", "kinematics", "solver", "simulator")
MESSAGES = ("InertialParameters", "ContactAnomaly", "JointSamples", "SensorSamples")
# Never part of a checkout: the environments, builds and caches of a working copy.
IGNORED = (".git", ".venv*", "build", "build-*", "install", "log", "__pycache__", "*.pyc",
           ".pytest_cache", ".hypothesis", ".ruff_cache", "*.egg-info")

pytestmark = pytest.mark.timeout(420)


def _checkout(destination: Path) -> None:
    """Copy the package as a clone would have it (tracked and new files, not ignored ones)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(*IGNORED))
        return
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def _underlay_env() -> dict[str, str]:
    """The environment of a shell that sourced this venv's ROS 2 (as ``/opt/ros/<distro>``)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AMENT_", "COLCON_", "CMAKE_", "PYTHON"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(VENV),
               AMENT_PREFIX_PATH=str(VENV), CMAKE_PREFIX_PATH=str(VENV))
    return env


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with this package built by ``colcon build``; returns its install space."""
    ws = tmp_path_factory.mktemp("ws")
    _checkout(ws / "src" / "inertial_id")
    assert (ws / "src" / "inertial_id" / "package.xml").is_file()
    colcon = BIN / "colcon"
    assert colcon.is_file(), "colcon is missing: requirements-dev.txt installs it"
    result = subprocess.run(
        [str(colcon), "build", "--event-handlers", "console_cohesion+"],
        cwd=ws, env=_underlay_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"colcon build failed:\n{result.stdout[-6000:]}\n" \
                                   f"{result.stderr[-3000:]}"
    return ws / "install"


def _sourced(install: Path, command: str, **kwargs) -> subprocess.Popen[str]:
    """Run ``command`` in bash after ``source install/setup.bash`` (and nothing else), in the
    workspace (not in this repository, whose ``inertial_id`` ``python -c`` would import)."""
    script = f"source {install / 'setup.bash'} && {command}"
    return subprocess.Popen(["bash", "-c", script], env=kwargs.pop("env"), text=True,
                            cwd=install.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, **kwargs)


def _sourced_output(install: Path, command: str, env: dict[str, str]) -> str:
    process = _sourced(install, command, env=env)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out
    return out


def test_colcon_installs_executables_launch_files_and_configs(workspace: Path) -> None:
    prefix = workspace / "inertial_id"
    for node in NODES:
        executable = prefix / "lib" / "inertial_id" / node
        assert executable.is_file() and os.access(executable, os.X_OK), executable
    share = prefix / "share" / "inertial_id"
    launch_files = sorted(p.name for p in (share / "launch").glob("*.launch.xml"))
    assert launch_files == sorted(p.name for p in (ROOT / "launch").glob("*.launch.xml"))
    assert launch_files, "no launch file installed"
    assert (share / "config" / "inertial_id.yaml").is_file()
    assert (share / "config" / "demo.yaml").is_file()
    assert (share / "package.xml").is_file()
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "inertial_id") \
        .is_file()
    # Everything the installed launch files start or read exists in the install space.
    for launch in (share / "launch").glob("*.launch.xml"):
        root = ET.parse(launch).getroot()
        for node in root.iter("node"):
            assert node.get("pkg") == "inertial_id"
            assert (prefix / "lib" / "inertial_id" / node.get("exec")).is_file(), launch.name
        for element in root.iter():
            for value in element.attrib.values():
                if value.startswith("$(find-pkg-share inertial_id)/"):
                    path = share / value.split("/", 1)[1]
                    assert path.is_file(), f"{launch.name}: {value} not installed"


def test_package_and_messages_import_from_the_install_space(workspace: Path) -> None:
    code = textwrap.dedent(f"""
        import inertial_id, inertial_id.msg, inertial_id.nodes.solver
        from rclpy.serialization import deserialize_message, serialize_message
        from inertial_id.msg import {", ".join(MESSAGES)}
        for module in (inertial_id, inertial_id.msg, inertial_id.nodes.solver):
            print("FILE", module.__file__)
        message = InertialParameters(mass=1.25, samples_used=7)
        message.header.frame_id = "ft_sensor"
        back = deserialize_message(serialize_message(message), InertialParameters)
        assert (back.mass, back.samples_used, back.header.frame_id) == (1.25, 7, "ft_sensor")
        for cls in ({", ".join(MESSAGES)}):
            assert deserialize_message(serialize_message(cls()), cls) == cls()
        print("OK")
    """)
    out = _sourced_output(workspace, f"python3 -c {shlex.quote(code)}", _underlay_env())
    assert out.strip().endswith("OK"), out
    files = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("FILE ")]
    assert len(files) == 3
    for file in files:
        assert Path(file).resolve().is_relative_to(workspace.resolve()), \
            f"{file} is not from the install space {workspace}"


def test_installed_nodes_start_and_answer(workspace: Path, ros_env: dict[str, str]) -> None:
    """``ros2 run``-style starts with the installed configs: each node answers."""
    share = workspace / "inertial_id" / "share" / "inertial_id"
    urdf = share / "resources" / "arm6_ft.urdf"
    assert urdf.is_file()
    # ros2 run <package> <executable>: the executable is <prefix>/lib/<package>/<executable>,
    # with <prefix> from the ament index (ros2cli is not installable here).
    ros2_run = "python3 -c " + shlex.quote(
        "import os, sys; from ament_index_python.packages import get_package_prefix; "
        "e = os.path.join(get_package_prefix(sys.argv[1]), 'lib', sys.argv[1], sys.argv[2]); "
        "os.execv(e, [e] + sys.argv[3:])")
    config = share / "config" / "inertial_id.yaml"
    commands = {
        "simulator": f"{ros2_run} inertial_id simulator --ros-args --params-file "
                     f"{share / 'config' / 'demo.yaml'} -p urdf_path:={urdf}",
        "gatherer": f"{ros2_run} inertial_id gatherer --ros-args --params-file {config} "
                    f"-p urdf_path:={urdf}",
        "kinematics": f"{ros2_run} inertial_id kinematics --ros-args --params-file {config} "
                      f"-p urdf_path:={urdf}",
        "solver": f"{ros2_run} inertial_id solver --ros-args --params-file {config} "
                  f"-p publish_rate:=2.0",
    }
    env = {**_underlay_env(), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
           "ROS_DOMAIN_ID": ros_env["ROS_DOMAIN_ID"]}
    processes = {name: _sourced(workspace, command, env=env)
                 for name, command in commands.items()}
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = Node("workspace_probe", context=context)
        statuses: set[str] = set()
        estimates: list[InertialParameters] = []
        truth: list[InertialParameters] = []

        def diagnostics(msg: DiagnosticArray) -> None:
            statuses.update(status.name.split(":")[0] for status in msg.status)

        node.create_subscription(DiagnosticArray, "/diagnostics", diagnostics, 50)
        node.create_subscription(InertialParameters, "/solver/parameters", estimates.append, 10)
        node.create_subscription(InertialParameters, "/simulator/ground_truth", truth.append,
                                 latched_qos())
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 90.0
        done = False
        while time.monotonic() < deadline and not done:
            executor.spin_once(timeout_sec=0.1)
            done = ({"gatherer", "kinematics", "solver"} <= statuses and truth
                    and any(m.samples_used > 1000 for m in estimates))
            dead = [name for name, p in processes.items() if p.poll() is not None]
            assert not dead, f"{dead} exited: " + "".join(
                processes[name].communicate()[0] for name in dead)
        assert done, (f"diagnostics from {sorted(statuses)}, ground truth {bool(truth)}, "
                      f"{len(estimates)} estimates")
        estimate = estimates[-1]
        assert estimate.header.frame_id == "ft_sensor"
        assert estimate.physically_consistent
        assert abs(estimate.mass - truth[-1].mass) < 0.05 * truth[-1].mass
    finally:
        rclpy.shutdown(context=context)
        for process in processes.values():
            os.killpg(process.pid, signal.SIGINT)
        for process in processes.values():
            try:
                process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
