"""The executables as a new user meets them: ``--help`` on every node executable, a misspelt
parameter refused at start in replay's words, ``inertial-id --version``, and a mistyped flag
answered with the subcommand's usage.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inertial_id import __version__
from inertial_id.core.errors import InertialIdError
from inertial_id.params.settings import online_config
from inertial_id.params.table import NODE_PARAMS
from inertial_id.tools.arguments import given_bag
from inertial_id.tools.cli import build_parser
from inertial_id.tools.replay import load_params

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
    assert ('  method  (default "lmi_sdp", one of lmi_sdp, manifold, least_squares, pls, '
            'read-only)') in lines
    assert "  contact_decimation  (default 10, unit samples, >= 1, live, node only)" in lines
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


def test_version() -> None:
    done = _run([str(BIN / "inertial-id"), "--version"])
    assert done.returncode == 0
    assert done.stdout.strip() == f"inertial-id {__version__}"


@pytest.mark.parametrize(("command", "usage"), [
    (["replay", "bag", "--sensor_frame", "tool0"], "usage: inertial-id replay "),
    (["identify-payload", "b", "--urdf", "u", "--payload_frame", "x"],
     "usage: inertial-id identify-payload "),
    (["simulate", "--output", "o", "--duraton", "3"], "usage: inertial-id simulate "),
])
def test_a_mistyped_flag_shows_the_usage_of_its_subcommand(command: list[str],
                                                           usage: str) -> None:
    done = _run([str(BIN / "inertial-id"), *command])
    assert done.returncode == 2
    assert done.stderr.startswith(usage), done.stderr
    assert f"unrecognized arguments: {command[-2]} {command[-1]}" in done.stderr


RENAMED = [  # command and its other arguments, the flag's name, its former name, a value
    (["identify-payload", "b"], "--payload-frame", "--frame", "tool0"),
    (["check-links", "m.yaml", "b"], "--output", "--json", "out.json"),
    (["identify-links", "b", "--urdf", "u"], "--drive-gain", "--known-gain", "j1=2.5"),
    (["excite", "--urdf", "u"], "--sample-rate", "--rate", "250"),
]


@pytest.mark.parametrize(("command", "flag", "former", "value"), RENAMED,
                         ids=[r[0][0] for r in RENAMED])
def test_renamed_flags_take_their_former_name_too_without_showing_it(
        command: list[str], flag: str, former: str, value: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args([*command, flag, value]) == parser.parse_args(
        [*command, former, value])
    with pytest.raises(SystemExit):
        parser.parse_args([command[0], "--help"])
    shown = capsys.readouterr().out
    assert f"{flag} " in shown
    assert f"{former} " not in shown


@pytest.mark.parametrize("command", [["identify-payload", "--urdf", "u"],
                                     ["check-links", "m.yaml"],
                                     ["identify-links", "--urdf", "u"]], ids=lambda c: c[0])
def test_the_bag_is_positional_as_in_replay_and_bag_is_a_deprecated_alias(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for given in (["rec.mcap"], ["--bag", "rec.mcap"]):
        assert given_bag(parser.parse_args([*command, *given])) == Path("rec.mcap")
    assert given_bag(parser.parse_args(command)) is None
    with pytest.raises(InertialIdError, match="give the BAG once"):
        given_bag(parser.parse_args([*command, "a.mcap", "--bag", "b.mcap"]))
    with pytest.raises(SystemExit):
        parser.parse_args([command[0], "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--bag BAG deprecated, accepted until the next release" in shown


@pytest.mark.parametrize("command", [["identify-payload", "--urdf", "u"],
                                     ["check-links", "m.yaml", "--urdf", "u"]],
                         ids=lambda c: c[0])
def test_a_missing_bag_is_one_line(command: list[str]) -> None:
    done = _run([str(BIN / "inertial-id"), *command])
    assert done.returncode == 3
    assert done.stderr == f"inertial-id {command[0]}: error: give the BAG to read\n"
