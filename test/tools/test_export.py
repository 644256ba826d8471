"""``inertial-id export`` on a bag made by ``inertial-id simulate`` whose payload is known.

The bag is simulated at the simulator's default noise and replayed with the command line; each
target's output is read back as YAML (parameter files through rclpy's own parser) and checked
against the truth moved to ``tool0`` by pinocchio's forward kinematics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
import pytest
import yaml

from inertial_id.core.frames import express_in_frame, frame_placement
from inertial_id.core.handoff import STANDARD_GRAVITY
from inertial_id.core.kinematics import load_urdf_model
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.io import calibration
from inertial_id.tools.cli import main

DURATION = 10.0  # s of simulated recording


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The replay output of a simulated bag and the bag's ground truth."""
    root = tmp_path_factory.mktemp("export")
    assert main(["simulate", "--output", str(root / "bag"), "--duration", str(DURATION)]) == 0
    output = root / "replay.yaml"
    assert main(["replay", str(root / "bag"), "--output", str(output), "--no-progress"]) == 0
    return output, yaml.safe_load((root / "bag" / "ground_truth.yaml").read_text())


@pytest.fixture(scope="module")
def truth_in_tool0(replayed: tuple[Path, dict[str, Any]]) -> BodyParameters:
    """The true payload about tool0, in tool0's axes, from the two frames' world placements."""
    _, truth = replayed
    model = load_urdf_model(bundled_urdf_path())
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.randomConfiguration(model))
    world_M_sensor = data.oMf[model.getFrameId(truth["frame"])]
    world_M_tool0 = data.oMf[model.getFrameId("tool0")]
    sensor = BodyParameters.from_pi(truth["payload"]["pi"]).to_pinocchio()
    tool0_M_sensor = world_M_tool0.inverse() * world_M_sensor
    return BodyParameters.from_pinocchio(sensor.se3Action(tool0_M_sensor))


def _export(path: Path, target: str, capsys: pytest.CaptureFixture[str],
            *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["export", str(path), "--to", target, "--urdf", bundled_urdf_path(),
                 *extra]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# ")  # the interface, units and frame come first
    return yaml.safe_load(text)


def _parameters(document: dict[str, Any], tmp_path: Path,
                node: str = "/**") -> dict[str, float | list[float]]:
    """The parameter file as rclpy's ``--params-file`` parser reads it for ``node``, by dotted
    name."""
    from rclpy.parameter import Parameter, parameter_dict_from_yaml_file

    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(document))
    return {name: Parameter.from_parameter_msg(msg).value for name, msg
            in parameter_dict_from_yaml_file(str(path), use_wildcard=True,
                                                 target_nodes=[node]).items()}


def _check_mass(mass: float, truth: dict[str, Any]) -> None:
    assert mass == pytest.approx(truth["payload"]["mass"], rel=1e-3)


def test_ur_takes_the_cog_from_tool0(replayed, truth_in_tool0, capsys) -> None:
    path, truth = replayed
    request = _export(path, "ur", capsys)
    _check_mass(request["mass"], truth)
    cog = [request["center_of_gravity"][k] for k in "xyz"]
    np.testing.assert_allclose(cog, truth_in_tool0.com, atol=1e-3)
    inertia = np.array([[request["ixx"], request["ixy"], request["ixz"]],
                        [request["ixy"], request["iyy"], request["iyz"]],
                        [request["ixz"], request["iyz"], request["izz"]]])
    np.testing.assert_allclose(inertia, truth_in_tool0.inertia_com, atol=2e-4)
    assert request["transition_time"] == 0.0
    ur7 = _export(path, "ur7", capsys, "--transition-time", "0.5")
    assert ur7["payload"]["m"] == request["mass"]
    assert ur7["payload"]["com"] == request["center_of_gravity"]
    assert all(ur7["payload"][k] == request[k] for k in ("ixx", "ixy", "ixz", "iyy", "iyz"))
    assert ur7["transition_time"] == 0.5


def test_franka_and_xarm_units(replayed, truth_in_tool0, capsys) -> None:
    path, truth = replayed
    franka = _export(path, "franka", capsys)
    _check_mass(franka["mass"], truth)
    np.testing.assert_allclose(franka["center_of_mass"], truth_in_tool0.com, atol=1e-3)
    load_inertia = np.reshape(franka["load_inertia"], (3, 3), order="F")
    np.testing.assert_allclose(load_inertia, truth_in_tool0.inertia_com, atol=2e-4)
    xarm = _export(path, "xarm", capsys)
    _check_mass(xarm["weight"], truth)
    np.testing.assert_allclose(xarm["center_of_gravity"], 1000.0 * truth_in_tool0.com, atol=1.0)
    np.testing.assert_allclose(xarm["center_of_gravity"],
                               1000.0 * np.asarray(franka["center_of_mass"]), rtol=1e-12)


def test_broadcaster_offsets_cancel_the_bias(replayed, capsys, tmp_path) -> None:
    path, truth = replayed
    parameters = _parameters(_export(path, "fts-broadcaster", capsys), tmp_path)
    offsets = [parameters[f"offset.{kind}.{axis}"]
               for kind in ("force", "torque") for axis in "xyz"]
    # Added to a reading -Y pi + bias, the offsets leave -Y pi: they are minus the bias.
    residual = np.add(offsets, truth["wrench_offset"])
    np.testing.assert_allclose(residual[:3], 0.0, atol=0.05)  # N
    np.testing.assert_allclose(residual[3:], 0.0, atol=0.005)  # N m


def test_sensor_frame_controllers(replayed, capsys, tmp_path) -> None:
    path, truth = replayed
    filter_parameters = _parameters(
        _export(path, "gravity-compensation", capsys, "--node", "ft_filter", "--prefix",
                "sensor_filter_chain.filter1.params"), tmp_path, node="/ft_filter")
    prefix = "sensor_filter_chain.filter1.params."
    _check_mass(filter_parameters[prefix + "tool.mass"], truth)
    np.testing.assert_allclose(filter_parameters[prefix + "tool.CoG"], truth["payload"]["com"],
                               atol=1e-3)
    assert filter_parameters[prefix + "sensor_frame"] == "ft_sensor"
    admittance = _parameters(_export(path, "admittance", capsys, "--frame", "tool0"), tmp_path)
    weight = admittance["gravity_compensation.CoG.force"]
    assert weight == pytest.approx(STANDARD_GRAVITY * truth["payload"]["mass"], rel=1e-3)
    assert admittance["gravity_compensation.frame.id"] == "tool0"
    np.testing.assert_allclose(admittance["gravity_compensation.CoG.pos"],
                               np.add(truth["payload"]["com"], [0.0, 0.0, 0.025]), atol=1e-3)


def test_a_calibration_saved_in_tool0_exports_the_same(replayed, capsys, tmp_path) -> None:
    """A calibration saved in another frame goes back to the sensor's for the broadcaster."""
    path, _ = replayed
    estimate, frame = calibration.load(path)
    model = load_urdf_model(bundled_urdf_path())
    saved = tmp_path / "calibration.yaml"
    calibration.save(saved, express_in_frame(estimate, frame_placement(model, frame, "tool0")),
                     "tool0", {"mass": True})
    direct = _export(path, "fts-broadcaster", capsys)["/**"]["ros__parameters"]
    back = _export(saved, "fts-broadcaster", capsys, "--frame", "ft_sensor")
    back = back["/**"]["ros__parameters"]
    for kind in ("force", "torque"):
        for axis in "xyz":
            assert back["offset"][kind][axis] == pytest.approx(direct["offset"][kind][axis],
                                                               abs=1e-12)
    assert _export(saved, "ur", capsys) == _export(path, "ur", capsys)  # already in tool0


def test_unusable_frames_are_named(replayed, capsys) -> None:
    path, _ = replayed
    assert main(["export", str(path), "--to", "ur"]) == 3
    assert "give --urdf" in capsys.readouterr().err
    assert main(["export", str(path), "--to", "franka", "--urdf", bundled_urdf_path(),
                 "--frame", "forearm_link"]) == 3
    assert "not rigidly attached" in capsys.readouterr().err


def test_replay_output_frame(replayed, truth_in_tool0, capsys, tmp_path) -> None:
    """``replay --output-frame tool0`` writes the estimate about tool0; flange targets then
    need no URDF and get the same request."""
    path, _ = replayed
    output = tmp_path / "tool0.yaml"
    assert main(["replay", str(path.parent / "bag"), "--output", str(output),
                 "--output-frame", "tool0", "--no-progress"]) == 0
    section = yaml.safe_load(output.read_text())["estimate"]
    assert section["frame"] == "tool0"
    np.testing.assert_allclose(section["com"], truth_in_tool0.com, atol=1e-3)
    capsys.readouterr()
    assert main(["export", str(output), "--to", "ur"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == _export(path, "ur", capsys)
