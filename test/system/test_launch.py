"""Launch files and configs agree with what the package installs and what the nodes declare.

``launch_ros`` is not installable here, so the XML is parsed: every node's executable must be
one CMake installs, every parameter file must exist, and every parameter it sets (from a file
or inline) must be one the node really declares (checked on live rclpy nodes), except the
robot model's parameters of a ``/**`` section, which the nodes that do not use them ignore.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import rclpy
import yaml
from rclpy.node import Node
from rclpy.parameter import Parameter

from inertial_id.core.errors import InertialIdError
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.entry_points import PIPELINE
from inertial_id.nodes.applier import Applier
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.identify import Identify
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.managed import managed_requested
from inertial_id.nodes.runner import with_sensor_frame
from inertial_id.nodes.simulator import Simulator
from inertial_id.nodes.solver import Solver
from inertial_id.params.spec import SHARED_PARAMETERS

ROOT = Path(__file__).resolve().parents[2]
NODE_CLASSES = {"gatherer": Gatherer, "kinematics": Kinematics, "solver": Solver,
                "simulator": Simulator, "applier": Applier, "identify": Identify}
# Where CMake installs what the launch files find in share/inertial_id.
SHARE = {"launch": ROOT / "launch", "config": ROOT / "config",
         "resources": ROOT / "inertial_id" / "resources"}
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.xml"))


def installed_executables() -> set[str]:
    match = re.search(r"set\(INERTIAL_ID_NODES ([^)]*)\)", (ROOT / "CMakeLists.txt").read_text())
    assert match, "CMakeLists.txt must list the node executables in INERTIAL_ID_NODES"
    return set(match.group(1).split())


def resolve(text: str, args: dict[str, str]) -> str:
    """Substitute $(var ...) and $(find-pkg-share inertial_id) as ros2 launch would."""
    text = re.sub(r"\$\(var (\w+)\)", lambda m: args[m.group(1)], text)
    match = re.fullmatch(r"\$\(find-pkg-share inertial_id\)/(\w+)/(.*)", text)
    if match:
        return str(SHARE[match.group(1)] / match.group(2))
    assert "$(" not in text, f"unresolved substitution in {text}"
    return text


def section_applies(key: str, node: str) -> bool:
    """Whether a parameter file's section ``key`` applies to ``node`` in any namespace, as
    rcl matches them (``/**``, ``/**/node``); a bare ``node`` only matches ``/node``."""
    return key == "/**" or key == f"/**/{node}"


def launch_nodes(path: Path, given: dict[str, str] | None = None) -> list[tuple[str, str, dict]]:
    """(executable, node name, parameters) of every node, includes followed."""
    root = ET.parse(path).getroot()
    assert root.tag == "launch"
    args = {a.get("name"): a.get("default", "") for a in root.iter("arg")}
    args.update(given or {})
    nodes = []
    for element in root:
        if element.tag == "include":
            sub_args = {a.get("name"): resolve(a.get("value"), args) for a in element.iter("arg")}
            nodes += launch_nodes(Path(resolve(element.get("file"), args)), sub_args)
        elif element.tag == "node":
            if (resolve(element.get("if", "true"), args) != "true"
                    or resolve(element.get("unless", "false"), args) != "false"):
                continue
            if element.get("exec") == "pipeline":  # the three nodes in one process
                nodes += [(name, name, _params(path, element, name, args))
                          for name in PIPELINE]
                continue
            params = _params(path, element, element.get("name"), args)
            nodes.append((element.get("exec"), element.get("name"), params))
    return nodes


def _params(path: Path, element: ET.Element, name: str, args: dict[str, str]) -> dict:
    """The parameters a node ``name`` started by the launch ``element`` gets."""
    assert element.get("pkg") == "inertial_id"
    params: dict[str, object] = {}
    for param in element.iter("param"):
        if param.get("from"):
            file = Path(resolve(param.get("from"), args))
            assert file.is_file(), f"{path.name}: missing parameter file {file}"
            doc = yaml.safe_load(file.read_text())
            for key, section in doc.items():
                if section_applies(key, name):
                    params.update(section.get("ros__parameters", {}))
        else:
            params[param.get("name")] = resolve(param.get("value"), args)
    params["__namespace"] = resolve(element.get("namespace", ""), args)
    params["__args"] = resolve(element.get("args", ""), args).split()
    return params


@pytest.fixture(scope="module")
def declared() -> dict[str, set[str]]:
    """Parameter names each node class really declares."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        names = {}
        for name, cls in NODE_CLASSES.items():
            target = [Parameter("target", value="fts-broadcaster")] if name == "applier" else []
            node: Node = cls(context=context, parameter_overrides=[
                Parameter("urdf_path", value=bundled_urdf_path()), *target])
            names[name] = set(node._parameters)  # noqa: SLF001 - what the node declared
            node.destroy_node()
        return names
    finally:
        rclpy.shutdown(context=context)


def test_there_are_the_two_launch_files() -> None:
    assert {p.name for p in LAUNCH_FILES} == {"inertial_id.launch.xml", "demo.launch.xml"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_nodes_are_installed_and_parameters_declared(
    path: Path, declared: dict[str, set[str]]
) -> None:
    nodes = launch_nodes(path)
    assert nodes
    for executable, name, params in nodes:
        assert executable in installed_executables(), f"{executable} is not installed"
        unknown = (set(params) - declared[executable] - {"__namespace", "__args"}
                   - SHARED_PARAMETERS)
        assert not unknown, f"{path.name}: {name} does not declare {sorted(unknown)}"
        urdf = params.get("urdf_path")
        if urdf:
            assert Path(str(urdf)).is_file(), f"{path.name}: URDF {urdf} does not exist"


def test_the_apply_argument_adds_the_applier_with_declared_parameters(
        declared: dict[str, set[str]]) -> None:
    nodes = launch_nodes(ROOT / "launch" / "inertial_id.launch.xml",
                         {"apply": "true", "apply_target": "franka"})
    (params,) = [p for e, _, p in nodes if e == "applier"]
    assert params["target"] == "franka" and params["auto_apply"] is False
    assert not (set(params) - declared["applier"] - {"__namespace", "__args"}
                - SHARED_PARAMETERS)


def test_the_identify_argument_adds_the_identify_node_with_declared_parameters(
        declared: dict[str, set[str]]) -> None:
    launch = ROOT / "launch" / "inertial_id.launch.xml"
    assert "identify" not in [e for e, _, _ in launch_nodes(launch)]  # off by default
    nodes = launch_nodes(launch, {"identify": "true", "controller": "scaled_jtc",
                                  "sensor_frame": "ft_link"})
    (params,) = [p for e, _, p in nodes if e == "identify"]
    assert params["controller"] == "scaled_jtc"
    assert "--sensor-frame=ft_link" in params["__args"]
    assert not (set(params) - declared["identify"] - {"__namespace", "__args"}
                - SHARED_PARAMETERS)
    root = ET.parse(launch).getroot()
    (node,) = [n for n in root.iter("node") if n.get("exec") == "identify"]
    assert {r.get("from") for r in node.iter("remap")} == {"joint_states"}


def test_demo_launch_runs_all_four_nodes() -> None:
    executables = [e for e, _, _ in launch_nodes(ROOT / "launch" / "demo.launch.xml")]
    assert sorted(executables) == sorted(set(NODE_CLASSES) - {"applier", "identify"})


def test_every_config_section_is_a_node_with_declared_parameters(
    declared: dict[str, set[str]]
) -> None:
    for file in sorted((ROOT / "config").glob("*.yaml")):
        doc = yaml.safe_load(file.read_text())
        # last: rcl merges -p values into /**, which must come after the node sections for a
        # -p value to override theirs
        assert "/**" not in doc or list(doc)[-1] == "/**", f"{file.name}: /** is not last"
        for key, section in doc.items():
            if key == "/**":  # every node: the robot model, declared where it is used
                given = set(section["ros__parameters"])
                assert given <= SHARED_PARAMETERS, f"{file.name}: /** gives {sorted(given)}"
                assert given <= declared["gatherer"] & declared["kinematics"]
                continue
            assert key.startswith("/**/"), (
                f"{file.name}: section {key} applies only outside namespaces; key it /**/<node>")
            node = key.removeprefix("/**/")
            assert node in declared, f"{file.name}: unknown node {node}"
            unknown = set(section["ros__parameters"]) - declared[node]
            assert not unknown, f"{file.name}: {node} does not declare {sorted(unknown)}"


def test_setup_and_cmake_install_the_same_nodes() -> None:
    setup = (ROOT / "setup.py").read_text()
    for name in installed_executables():
        assert f'"{name}"' in setup
        assert (ROOT / "inertial_id" / "nodes" / f"{name}.py").is_file()


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_a_namespace_argument_puts_every_node_in_it(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert "namespace" in {a.get("name") for a in root.iter("arg")}
    nodes = launch_nodes(path, {"namespace": "left"})
    assert nodes and all(p["__namespace"] == "left" for _, _, p in nodes)
    assert all(p["__namespace"] == "" for _, _, p in launch_nodes(path))
    for _, name, params in nodes:  # the parameter files still apply in the namespace
        if name in ("solver", "simulator"):
            assert len(params) > 3, f"{path.name}: no parameters reach {name} in a namespace"


@pytest.mark.parametrize(("given", "expected"), [({}, False), ({"managed": "true"}, True),
                                                  ({"managed": "false"}, False)])
def test_the_managed_argument_reaches_every_pipeline_node(given: dict[str, str],
                                                          expected: bool) -> None:
    nodes = launch_nodes(ROOT / "launch" / "inertial_id.launch.xml", given)
    assert {name for _, name, _ in nodes} == {"gatherer", "kinematics", "solver"}
    for _, name, params in nodes:
        assert managed_requested(params["__args"]) is expected, (name, params["__args"])
    with pytest.raises(InertialIdError, match="true or false"):
        managed_requested(["--managed=maybe"])


def test_one_process_runs_the_three_nodes_in_the_pipeline_executable() -> None:
    root = ET.parse(ROOT / "launch" / "inertial_id.launch.xml").getroot()
    (element,) = [n for n in root.iter("node") if n.get("exec") == "pipeline"]
    assert "pipeline" in installed_executables() and element.get("name") is None
    nodes = launch_nodes(ROOT / "launch" / "inertial_id.launch.xml",
                         {"one_process": "true", "urdf_path": "/robot.urdf"})
    assert [name for _, name, _ in nodes] == list(PIPELINE)  # instead of three processes
    for _, _, params in nodes:  # the URDF as an argument, not a parameter of all three
        assert "urdf_path" not in params and "--urdf-path=/robot.urdf" in params["__args"]
        assert "--sensor-frame=" in params["__args"]


def test_the_demo_in_a_namespace_keeps_its_topics_in_it() -> None:
    """The simulator publishes relative names; the demo must not remap the pipeline's
    inputs to absolute ones."""
    root = ET.parse(ROOT / "launch" / "demo.launch.xml").getroot()
    given = {a.get("name"): a.get("value") for a in root.iter("arg") if a.get("value")}
    assert not given["joint_states_topic"].startswith("/")
    assert not given["wrench_topic"].startswith("/")


@pytest.mark.parametrize(("given", "expected"), [({}, "from_file"),
                                                  ({"sensor_frame": "ft_link"}, "ft_link")])
def test_the_sensor_frame_argument_overrides_the_parameter_file_only_when_given(
        tmp_path: Path, given: dict[str, str], expected: str) -> None:
    """The launch file's ``sensor_frame`` reaches the gatherer and the kinematics node as
    ``--sensor-frame=...``; left empty (its default) the parameter file's value holds, given it
    wins over the file. Checked on the node's real parameter overrides."""
    params = tmp_path / "params.yaml"
    params.write_text("/**/gatherer:\n  ros__parameters:\n    window: 0.1\n"
                      "/**:\n  ros__parameters:\n    sensor_frame: from_file\n")
    launch = ROOT / "launch" / "inertial_id.launch.xml"
    root = ET.parse(launch).getroot()
    inline = {p.get("name") for p in root.iter("param")}
    assert "sensor_frame" not in inline  # inline, it would override the file's even when empty
    nodes = launch_nodes(launch, given)
    assert {name for _, name, p in nodes if any(a.startswith("--sensor-frame=")
                                                for a in p["__args"])} == {"gatherer",
                                                                           "kinematics"}
    for _, name, node_params in nodes:
        if name not in ("gatherer", "kinematics"):
            continue
        argv = with_sensor_frame([name, *node_params["__args"], "--ros-args", "--params-file",
                                  str(params)])
        assert not any(a.startswith("--sensor-frame") for a in argv)
        context = rclpy.Context()
        rclpy.init(args=argv, context=context)
        try:
            node = Node(name, context=context,
                        automatically_declare_parameters_from_overrides=True)
            assert node.get_parameter("sensor_frame").value == expected
            node.destroy_node()
        finally:
            rclpy.shutdown(context=context)
