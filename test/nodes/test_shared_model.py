"""The robot model's parameters (sensor_frame, gravity, locked joints) have one value.

Both the gatherer (its joints, the matched filter's kinematics) and the kinematics node use
them; a parameter file gives them once, in its ``/**`` section, and that one value reaches both
nodes and replay; a node that does not use them (the solver) ignores them; replay refuses two
different values for the two nodes. Nodes run in-process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import yaml
from rclpy.parameter import Parameter

from inertial_id.core.errors import InertialIdError
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.nodes.gatherer import Gatherer
from inertial_id.nodes.kinematics import Kinematics
from inertial_id.nodes.solver import Solver
from inertial_id.params.settings import gatherer_kinematics, online_config, shared_model
from inertial_id.params.spec import SHARED_PARAMETERS, check_known
from inertial_id.params.table import MODEL_PARAMS, NODE_PARAMS
from inertial_id.tools.replay import ReplayOptions, apply_overrides, build_pipeline, load_params

URDF = bundled_urdf_path()
CONFIG = Path(__file__).resolve().parents[2] / "config" / "inertial_id.yaml"
GRAVITY = [0.0, 0.0, -9.7]  # m/s^2, URDF base frame: not the default


def _params_file(tmp_path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({key: {"ros__parameters": values}
                                    for key, values in sections.items()}))
    return path


ONCE = {"/**": {"sensor_frame": "tool0", "gravity": GRAVITY},
        "/**/solver": {"confidence": 0.99}}


@pytest.fixture
def file_context(tmp_path: Path) -> Iterator[rclpy.Context]:
    """A context whose nodes get :data:`ONCE` as ``--params-file``."""
    context = rclpy.Context()
    rclpy.init(context=context,
               args=["--ros-args", "--params-file", str(_params_file(tmp_path, ONCE))])
    yield context
    rclpy.shutdown(context=context)


def test_the_model_is_one_set_of_table_entries_in_both_nodes() -> None:
    assert {p.name for p in MODEL_PARAMS} == SHARED_PARAMETERS
    for node in ("gatherer", "kinematics"):
        assert all(p in NODE_PARAMS[node] for p in MODEL_PARAMS), node
        names = [p.name for p in NODE_PARAMS[node]]
        assert len(names) == len(set(names)), node
    for node in ("solver", "applier"):
        assert not SHARED_PARAMETERS & {p.name for p in NODE_PARAMS[node]}, node
        check_known(NODE_PARAMS[node], SHARED_PARAMETERS, node)  # ignored, not refused
    with pytest.raises(InertialIdError, match="solver has no parameter"):
        check_known(NODE_PARAMS["solver"], {"sensor_frames"}, "solver")


def test_a_model_given_once_reaches_both_nodes_and_the_solver_ignores_it(
        file_context: rclpy.Context) -> None:
    urdf = [Parameter("urdf_path", value=URDF)]
    gatherer = Gatherer(context=file_context, parameter_overrides=urdf)
    kinematics = Kinematics(context=file_context, parameter_overrides=urdf)
    solver = Solver(context=file_context)
    try:
        assert gatherer_kinematics(gatherer.values).sensor_frame == "tool0"
        assert gatherer_kinematics(gatherer.values).gravity == tuple(GRAVITY)
        assert kinematics.settings.sensor_frame == "tool0"
        assert kinematics.settings.gravity == tuple(GRAVITY)
        assert not solver.has_parameter("sensor_frame")
        assert solver.get_parameter("confidence").value == 0.99
    finally:
        for node in (gatherer, kinematics, solver):
            node.destroy_node()


def test_with_the_shipped_config_p_values_still_override_and_reach_both_nodes() -> None:
    """rcl merges ``-p`` values into the file's ``/**`` section, its last one, so even without
    the node executables' own handling of ``-p`` (:func:`inertial_id.nodes.runner.parameter_rules`,
    not used by these in-process nodes) a ``-p`` value overrides a node section's (the
    config's confidence is 0.999)."""
    contexts = [rclpy.Context(), rclpy.Context()]
    rclpy.init(context=contexts[0], args=["--ros-args", "--params-file", str(CONFIG),
                                          "-p", "confidence:=0.95"])
    rclpy.init(context=contexts[1], args=["--ros-args", "--params-file", str(CONFIG),
                                          "-p", "sensor_frame:=tool0"])
    urdf = [Parameter("urdf_path", value=URDF)]
    nodes = []
    try:
        nodes = [Solver(context=contexts[0]),
                 Gatherer(context=contexts[1], parameter_overrides=urdf),
                 Kinematics(context=contexts[1], parameter_overrides=urdf)]
        solver, gatherer, kinematics = nodes
        assert solver.get_parameter("confidence").value == 0.95
        assert gatherer_kinematics(gatherer.values).sensor_frame == "tool0"
        assert kinematics.settings.sensor_frame == "tool0"
    finally:
        for node in nodes:
            node.destroy_node()
        for context in contexts:
            rclpy.shutdown(context=context)


def test_a_model_given_once_is_the_one_replay_uses(tmp_path: Path) -> None:
    params = load_params(_params_file(tmp_path, ONCE))
    apply_overrides(ReplayOptions(tmp_path), params)
    assert shared_model(params) == {"sensor_frame": "tool0", "gravity": GRAVITY}
    online_config(params["solver"])  # the solver's section holds the model too: ignored
    pipeline = build_pipeline(params, Path(URDF).read_text())
    assert pipeline.kinematics.sensor_frame == "tool0"
    np.testing.assert_array_equal(pipeline.kinematics.gravity, GRAVITY)


def test_a_model_in_the_node_sections_still_works(tmp_path: Path) -> None:
    """The former layout: the same values in both sections; or in the kinematics' only,
    which replay now uses for the gatherer as well."""
    same = {f"/**/{node}": {"sensor_frame": "tool0", "gravity": GRAVITY}
            for node in ("gatherer", "kinematics")}
    params = load_params(_params_file(tmp_path, same))
    apply_overrides(ReplayOptions(tmp_path), params)
    assert build_pipeline(params, Path(URDF).read_text()).kinematics.sensor_frame == "tool0"
    one = load_params(_params_file(tmp_path, {"kinematics": {"sensor_frame": "tool0"}}))
    apply_overrides(ReplayOptions(tmp_path), one)
    assert shared_model(one) == {"sensor_frame": "tool0"}


def test_replay_refuses_two_values_for_the_two_nodes(tmp_path: Path) -> None:
    params = load_params(_params_file(tmp_path, {
        "/**": {"sensor_frame": "tool0"}, "/**/gatherer": {"sensor_frame": "ft_sensor"}}))
    with pytest.raises(InertialIdError, match=r"sensor_frame differs between the nodes "
                       r"\(gatherer: 'ft_sensor', kinematics: 'tool0'\)"):
        build_pipeline(params, Path(URDF).read_text())


def test_the_sensor_frame_option_sets_it_for_both(tmp_path: Path) -> None:
    params = load_params(_params_file(tmp_path, ONCE))
    apply_overrides(ReplayOptions(tmp_path, sensor_frame="ft_sensor"), params)
    assert shared_model(params)["sensor_frame"] == "ft_sensor"
