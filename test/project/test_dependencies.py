"""Every module the package imports is declared where each kind of install looks for it:
package.xml (rosdep keys: apt, colcon, a robot) and the pinned requirements (the venvs)."""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Python module -> (rosdep key in package.xml, pip name in requirements.txt)
PYTHON_DEPENDENCIES = {
    "numpy": ("python3-numpy", "numpy"),
    "scipy": ("python3-scipy", "scipy"),
    "yaml": ("python3-yaml", "pyyaml"),
    "matplotlib": ("python3-matplotlib", "matplotlib"),
    "tqdm": ("python3-tqdm", "tqdm"),
    "numba": ("python3-numba", "numba"),
    "pinocchio": ("pinocchio", "pin"),
    "cvxpy": ("python3-cvxpy-pip", "cvxpy"),
    "rosbags": ("python3-rosbags-pip", "rosbags"),
}
# Only `inertial-id batch` and `inertial-id tune` import these, inside their functions: they
# have no rosdep key (not even a pip one), so they are pip-only like cvxpy and the nodes never
# load them. Python module -> pip name in requirements.txt
BATCH_ONLY = {"dask": "dask", "distributed": "dask", "pyarrow": "pyarrow", "optuna": "optuna"}
# The module that may import each of them (in a function).
BATCH_MODULES = {"dask": "batch.py", "distributed": "batch.py", "pyarrow": "batch.py",
                 "optuna": "tune.py"}
# The ROS packages: their rosdep key is their name.
ROS_PACKAGES = {"rclpy", "rcl_interfaces", "ament_index_python", "builtin_interfaces",
                "diagnostic_msgs", "geometry_msgs", "sensor_msgs", "std_msgs", "std_srvs",
                "rosgraph_msgs", "visualization_msgs", "action_msgs", "trajectory_msgs"}


def imported_modules() -> set[str]:
    """Top-level modules imported anywhere in inertial_id/, without the standard library."""
    found = set()
    for path in (ROOT / "inertial_id").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "inertial_id"}


def package_xml_keys() -> set[str]:
    root = ET.parse(ROOT / "package.xml").getroot()
    return {e.text.strip() for e in root
            if e.tag in ("depend", "exec_depend", "build_export_depend") and e.text}


def pinned(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.\-]+)(\[[a-z,]+\])?\s*(==|<|>|$)", line.strip())
        if match and not line.lstrip().startswith("#"):
            names.add(match.group(1).lower())
    return names


def test_every_import_is_known() -> None:
    unknown = imported_modules() - set(PYTHON_DEPENDENCIES) - set(BATCH_ONLY) - ROS_PACKAGES
    assert not unknown, f"imported but not declared anywhere: {sorted(unknown)}"


def test_package_xml_declares_every_import_by_its_rosdep_key() -> None:
    keys = package_xml_keys()
    for module in sorted(imported_modules() - set(BATCH_ONLY)):
        key = PYTHON_DEPENDENCIES[module][0] if module in PYTHON_DEPENDENCIES else module
        assert key in keys, f"package.xml lacks {key} (imported as {module})"


def test_the_venvs_and_the_robot_pin_the_python_dependencies() -> None:
    requirements = pinned(ROOT / "requirements.txt")
    for module in sorted(imported_modules() & set(PYTHON_DEPENDENCIES)):
        assert PYTHON_DEPENDENCIES[module][1] in requirements, module
    assert set(BATCH_ONLY.values()) <= requirements
    # The pip-only rosdep keys are what a robot installs from requirements-robot.txt.
    robot = pinned(ROOT / "requirements-robot.txt")
    pip_only = {pip for key, pip in PYTHON_DEPENDENCIES.values() if key.endswith("-pip")}
    assert pip_only <= robot
    assert "numpy<2" in (ROOT / "requirements-robot.txt").read_text()


def test_only_batch_and_tune_load_their_engines_and_only_when_they_run() -> None:
    """No rosdep key: a ROS install without them must run everything but the batch."""
    for path in (ROOT / "inertial_id").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {alias.name.split(".")[0] for node in tree.body
                     if isinstance(node, ast.Import) for alias in node.names}
        top_level |= {node.module.split(".")[0] for node in tree.body
                      if isinstance(node, ast.ImportFrom) and node.module}
        everywhere = {alias.name.split(".")[0] for node in ast.walk(tree)
                      if isinstance(node, ast.Import) for alias in node.names}
        everywhere |= {node.module.split(".")[0] for node in ast.walk(tree)
                       if isinstance(node, ast.ImportFrom) and node.module}
        assert not top_level & set(BATCH_ONLY), path
        for module in everywhere & set(BATCH_ONLY):
            assert path.name == BATCH_MODULES[module], f"{path} imports {module}"
        modules = {node.module for node in tree.body
                   if isinstance(node, ast.ImportFrom) and node.module}
        assert "inertial_id.tools.batch" not in modules, f"{path} loads the batch module at import"


def test_each_distribution_pins_its_own_ros_wheels() -> None:
    kilted = pinned(ROOT / "requirements-kilted.txt")
    jazzy = pinned(ROOT / "requirements-jazzy.txt")
    assert "ros-rclpy" in kilted and not any(n.startswith("ros-jazzy-") for n in kilted)
    assert "ros-jazzy-rclpy" in jazzy
    assert all(n.startswith("ros-jazzy-") or n == "catkin-pkg" for n in jazzy)
    versions = {line.split("==")[0].lower(): line.split("==")[1]
                for line in (ROOT / "constraints-jazzy.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#")}
    assert versions["ros-rclpy"].startswith("7.1.")
    kilted_versions = {line.split("==")[0].lower(): line.split("==")[1]
                       for line in (ROOT / "constraints-kilted.txt").read_text().splitlines()
                       if "==" in line and not line.startswith("#")}
    assert kilted_versions["ros-rclpy"].startswith("9.1.")
