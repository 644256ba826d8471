"""The joint-torque workflow from the command line, on the simulator's bags (their joint states
carry efforts: links, payload, contacts, friction, noise): identify-links --bag, check-links,
identify-payload with and without an unloaded recording."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.tools import cli

URDF = bundled_urdf_path()
UNLOADED = ["--mass", "1e-6", "--inertia", "1e-9 0 0 1e-9 0 1e-9"]


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("torques")
    runs = {"unloaded": [*UNLOADED, "--seed", "4"],
            "unloaded_again": [*UNLOADED, "--seed", "6"],
            "loaded": ["--mass", "0.8", "--com", "0.0 0.03 0.09", "--seed", "3"],
            "pushed": [*UNLOADED, "--seed", "5", "--contact", "8 1.5 0 40 0"]}
    for name, extra in runs.items():
        assert cli.main(["simulate", "--output", str(root / name), "--duration", "20",
                         *extra]) == 0
    return {name: root / name for name in runs}


@pytest.fixture(scope="module")
def model(bags: dict[str, Path]) -> Path:
    out = bags["unloaded"].parent / "model.yaml"
    assert cli.main(["identify-links", "--bag", str(bags["unloaded"]), "--urdf", URDF,
                     "--smooth-coulomb", "--velocity-threshold", "0.03",
                     "--output", str(out)]) == 0
    return out


def test_check_links_scores_a_model_on_a_recording_it_never_saw(
        bags: dict[str, Path], model: Path, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    assert cli.main(["check-links", str(model), "--bag", str(bags["unloaded_again"]),
                     "--compare-urdf", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) >= {"joints", "rms", "relative_error_percent", "contacts"}
    rms, urdf = np.array(doc["rms"]), np.array(doc["urdf_rms"])
    # The simulated torque noise is 0.05 N m; friction (0.3 N m Coulomb) is what the URDF
    # lacks and the identified model has.
    assert np.all(rms < 0.07), rms
    assert np.all(urdf > rms + 0.05), (urdf, rms)
    assert doc["contacts"] == []


def test_check_links_finds_a_push(bags: dict[str, Path], model: Path, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    assert cli.main(["check-links", str(model), "--bag", str(bags["pushed"]),
                     "--json", str(out)]) == 0
    contacts = json.loads(out.read_text())["contacts"]
    assert len(contacts) == 1, contacts
    start, end = contacts[0]
    # s since the bag's first joint state, whatever the filter window leaves out at the start
    assert abs(start - 8.0) < 0.1 and abs(end - 9.5) < 0.15, contacts


@pytest.mark.parametrize("source", ["links", "unloaded"])
def test_identify_payload_recovers_the_payload_from_joint_torques(
        bags: dict[str, Path], model: Path, tmp_path: Path, source: str) -> None:
    out = tmp_path / "payload.yaml"
    how = (["--links", str(model)] if source == "links"
           else ["--urdf", URDF, "--unloaded", str(bags["unloaded"])])
    assert cli.main(["identify-payload", "--bag", str(bags["loaded"]), *how,
                     "--frame", "ft_sensor", "--output", str(out)]) == 0
    estimate = yaml.safe_load(out.read_text())["estimate"]
    assert abs(estimate["mass"] - 0.8) < 0.02 * 0.8
    np.testing.assert_allclose(estimate["com"], [0.0, 0.03, 0.09], atol=0.005)
    assert estimate["physically_consistent"]
    assert {"std", "com_std", "inertia_com_std", "pi"} <= set(estimate)
    assert abs(estimate["mass"] - 0.8) < 4.0 * estimate["std"][0]


def test_identify_payload_without_a_link_model_or_urdf_says_so(
        bags: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["identify-payload", "--bag", str(bags["loaded"]),
                     "--frame", "ft_sensor"]) == 3
    assert "--links MODEL.yaml or --urdf" in capsys.readouterr().err


def test_a_bag_without_efforts_is_refused_in_one_line(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from inertial_id.io.bags import JOINT_STATE, joint_state_message, write_bag

    names = ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
             "wrist_2_joint", "wrist_3_joint"]
    messages = [("/joint_states", JOINT_STATE, 1.0 + k * 0.01,
                 joint_state_message(1.0 + k * 0.01, names, np.zeros(6), np.zeros(6)))
                for k in range(100)]
    write_bag(tmp_path / "no_effort", iter(messages), "mcap")
    assert cli.main(["check-links", str(model), "--bag", str(tmp_path / "no_effort")]) == 3
    assert "no joint states with one effort per joint" in capsys.readouterr().err


def test_without_a_frame_the_payload_is_the_change_of_the_last_links_parameters(
        bags: dict[str, Path], model: Path, tmp_path: Path) -> None:
    out = tmp_path / "payload.yaml"
    assert cli.main(["identify-payload", "--bag", str(bags["loaded"]), "--links", str(model),
                     "--output", str(out)]) == 0
    estimate = yaml.safe_load(out.read_text())["estimate"]
    assert estimate["frame"] == "wrist_3_link"
    assert abs(estimate["mass"] - 0.8) < 0.02 * 0.8


def test_a_locked_joint_is_held_and_left_out(bags: dict[str, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture) -> None:
    """With --urdf alone, --locked holds a joint and leaves it out of the chain the payload is
    identified with (the bag's states for it are ignored); with --links it is refused."""
    out = tmp_path / "payload.yaml"
    assert cli.main(["identify-payload", "--bag", str(bags["loaded"]), "--urdf", URDF,
                     "--unloaded", str(bags["unloaded"]), "--locked", "wrist_3_joint=0.0",
                     "--frame", "ft_sensor", "--output", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["estimate"]["frame"] == "ft_sensor"
    assert "wrist_3_joint" not in doc["joints"] and "wrist_2_joint" in doc["joints"]
    assert cli.main(["identify-payload", "--bag", str(bags["loaded"]), "--links",
                     str(bags["unloaded"].parent / "model.yaml"), "--locked",
                     "wrist_3_joint=0.0"]) == 3
    assert "for --urdf alone" in capsys.readouterr().err


@pytest.mark.parametrize(("rate", "samples"), [(100.0, 25), (125.0, 31), (1000.0, 241)])
def test_the_default_filter_window_spans_the_same_time_at_every_rate(rate: float,
                                                                    samples: int) -> None:
    """The joint-torque commands' Savitzky-Golay window defaults to 0.24 s, in samples at the
    recording's rate (31 samples at every rate left 1 kHz accelerations noise); the rows
    within half a window of either end are not valid."""
    from inertial_id.core.joint_torque.link_model import LinkModel
    from inertial_id.io.joint_records import JointTable, joint_data, window_samples

    t = np.arange(0.0, 4.0, 1.0 / rate)
    assert window_samples(t) == samples
    model = LinkModel(bundled_urdf_path())
    names = list(model.joint_names)
    position = JointTable(t, names, np.outer(np.sin(t), np.ones(len(names))))
    effort = JointTable(t, names, np.zeros((t.size, len(names))))
    data = joint_data(model, position, effort)
    assert data.window == samples
    assert not data.valid[: samples // 2].any() and data.valid[samples // 2]
    np.testing.assert_allclose(data.qdd[data.valid], -np.sin(t[data.valid])[:, None]
                               * np.ones(len(names)), atol=5e-3)  # the fit's bias: 1e-3
