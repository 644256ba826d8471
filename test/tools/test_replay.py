"""Offline replay of bags (inertial_id.tools.replay) and its report (inertial_id.tools.report).

Synthetic bags (inertial_id.tools.synthetic: the bundled arm, 1 kHz wrenches, 500 Hz joint states,
known payload and offset in ``ground_truth.yaml``) are written once per module: 12 s in .mcap
with one contact at 8.0 s, and 5 s in .db3 without events. Bags with something wrong are
written by hand with :func:`inertial_id.io.bags.write_bag`; each must fail with an
:class:`InertialIdError` (usually a :class:`BagError`) whose message names the problem, never
with another exception.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from inertial_id.core.errors import InertialIdError
from inertial_id.core.simulation import Contact, bundled_urdf_path
from inertial_id.io import bags
from inertial_id.io.bags import BagError
from inertial_id.params.table import NODE_PARAMS
from inertial_id.tools.cli import main
from inertial_id.tools.replay import (
    PIPELINE_NODES,
    ReplayOptions,
    ReplayResult,
    build_pipeline,
    load_params,
    replay,
    summary_lines,
    write_yaml,
)
from inertial_id.tools.report import write_report
from inertial_id.tools.synthetic import START_TIME, SimulateOptions, simulate_bag

CONFIG = Path(__file__).resolve().parents[2] / "config" / "inertial_id.yaml"
DURATION = 12.0  # s of synthetic recording
CONTACT = Contact(8.0, 0.4, (0.0, 4.0, 0.0))
STORAGES = ("mcap", "db3")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = ("convergence.png", "error.png", "wrench_fit.png", "offset.png", "residual.png",
         "t2.png", "condition.png")
ESTIMATE_KEYS = ["frame", "mass", "com", "inertia_com", "pi", "std", "com_std",
                 "inertia_com_std", "covariance_type", "wrench_offset", "wrench_offset_std",
                 "physically_consistent"]
LIST_LENGTHS = {"com": 3, "inertia_com": 6, "pi": 10, "std": 10, "com_std": 3,
                "inertia_com_std": 6, "wrench_offset": 6, "wrench_offset_std": 6}


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic_bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``mcap``: 12 s with a contact at 8.0 s (s since the first sample); ``db3``: 5 s without
    events, also replayed with other settings."""
    root = tmp_path_factory.mktemp("synthetic")
    return {
        "mcap": simulate_bag(root / "bag_mcap", SimulateOptions(
            duration=DURATION, contacts=(CONTACT,), storage="mcap")),
        "db3": simulate_bag(root / "bag_db3", SimulateOptions(duration=5.0, storage="db3")),
    }


@pytest.fixture(scope="module")
def replayed(synthetic_bags: dict[str, Path]) -> dict[str, ReplayResult]:
    """Replay of each synthetic bag with the default parameters."""
    return {storage: replay(ReplayOptions(bag, progress=False))
            for storage, bag in synthetic_bags.items()}


def _truth(bag: Path) -> dict[str, Any]:
    return yaml.safe_load((bag / "ground_truth.yaml").read_text())


# --- hand-written bags ------------------------------------------------------------------

JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
          "wrist_2_joint", "wrist_3_joint")


def _recording(duration: float = 1.0, names: tuple[str, ...] = JOINTS, joints: bool = True,
               wrenches: bool = True, stamp: Callable[[float, int], float] | None = None
               ) -> Iterator[tuple[str, str, float, Any]]:
    """A small recording: URDF, 500 Hz joint states (a slow sine), 1 kHz constant wrenches.

    Log times are ordered; ``stamp(t, k)`` (default ``t``) sets the header stamp of the k-th
    joint state or wrench (s after :data:`START_TIME`).
    """
    urdf = Path(bundled_urdf_path()).read_text()
    yield "/robot_description", bags.STRING, START_TIME, bags.string_message(urdf)
    events = sorted([(t, 0) for t in np.arange(0.0, duration, 2e-3)] * joints
                    + [(t, 1) for t in np.arange(0.0, duration, 1e-3)] * wrenches)
    for k, (t, kind) in enumerate(events):
        header = START_TIME + (t if stamp is None else stamp(t, k))
        log = START_TIME + t + 1e-4
        if kind == 0:
            q = 0.3 * np.sin(np.pi * t + np.arange(len(names)))
            yield ("/joint_states", bags.JOINT_STATE, log,
                   bags.joint_state_message(header, list(names), q, np.zeros(len(names))))
        else:
            yield ("/wrench", bags.WRENCH, log, bags.wrench_message(
                header, "ft_sensor", np.array([1.0, 2.0, -15.0, 0.1, 0.2, 0.0])))


def _write(path: Path, messages: Iterator[tuple[str, str, float, Any]],
           storage: str = "mcap") -> Path:
    bags.write_bag(path, messages, storage)
    return path


def _replay_error(match: str, **options: Any) -> InertialIdError:
    """Replay must fail with an InertialIdError whose message matches ``match``."""
    with pytest.raises(InertialIdError, match=match) as info:
        replay(ReplayOptions(progress=False, **options))
    return info.value


# --- replay of synthetic bags -----------------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_replay_recovers_the_payload(storage: str, synthetic_bags: dict[str, Path],
                                     replayed: dict[str, ReplayResult]) -> None:
    """Mass within 1 %, CoM within 3 mm, offset within 0.1 N / 0.01 N m, consistent."""
    result, truth = replayed[storage], _truth(synthetic_bags[storage])
    e = result.estimate
    assert e is not None
    payload = truth["payload"]
    assert e.body.mass == pytest.approx(payload["mass"], rel=0.01)
    assert np.linalg.norm(e.body.com - payload["com"]) < 3e-3
    offset_error = np.abs(e.offset - truth["wrench_offset"])
    assert offset_error[:3].max() < 0.1
    assert offset_error[3:].max() < 0.01
    assert e.physically_consistent
    assert e.min_eigenvalue > 0.0
    assert result.frame == truth["frame"]
    assert result.start_time == pytest.approx(START_TIME)
    assert not result.dropped
    assert not result.payload_changes


def test_replay_detects_the_contact(replayed: dict[str, ReplayResult]) -> None:
    """One contact, stamped in s since the first message (= the first sample, t = 0)."""
    result = replayed["mcap"]
    assert len(result.contacts) == 1
    start, end = result.contacts[0]
    assert start == pytest.approx(CONTACT.start, abs=0.02)
    assert end == pytest.approx(CONTACT.start + CONTACT.duration, abs=0.1)
    # Contact samples (and a gate margin around them) are kept out of the estimate.
    assert result.samples_processed > 0.95 * DURATION * 1000
    assert result.samples_used <= result.samples_processed - 0.9 * CONTACT.duration * 1000


def test_no_contact_without_one(replayed: dict[str, ReplayResult]) -> None:
    assert replayed["db3"].contacts == []
    assert replayed["db3"].to_yaml()["contacts"] == []


def test_yaml_follows_the_contract(replayed: dict[str, ReplayResult], tmp_path: Path) -> None:
    """DESIGN.md's replay output: keys and their order, list lengths, plain YAML types."""
    result = replayed["mcap"]
    doc = result.to_yaml()
    assert list(doc) == ["estimate", "contacts", "samples_used", "ledger", "setup_errors",
                         "filter", "wrench_delay", "bias", "open_anomalies"]
    assert doc["setup_errors"] == [] and doc["open_anomalies"] == []
    bias = doc["bias"]  # the drift modelled by default: its rate and std at the last sample
    assert bias["steps"] == [] and len(bias["drift"]) == len(bias["drift_std"]) == 6
    assert all(abs(d) < 4.0 * s + 1e-4
               for d, s in zip(bias["drift"], bias["drift_std"], strict=True))
    assert DURATION - 0.5 < bias["time"] <= DURATION
    choice = doc["filter"]  # the gatherer's filter and its evidence, chosen from the data
    assert choice["source"] == "data" and type(choice["window_samples"]) is int
    assert all(type(v) in (int, float, str) for v in choice.values()), choice
    estimate = doc["estimate"]
    assert list(estimate) == ESTIMATE_KEYS
    assert type(estimate["frame"]) is str and estimate["frame"] == "ft_sensor"
    assert type(estimate["mass"]) is float
    for key, length in LIST_LENGTHS.items():
        assert type(estimate[key]) is list and len(estimate[key]) == length, key
        assert all(type(v) is float for v in estimate[key]), key
    assert type(estimate["physically_consistent"]) is bool
    assert estimate["pi"][0] == estimate["mass"]
    assert type(doc["samples_used"]) is int and doc["samples_used"] == result.samples_used
    assert type(doc["contacts"]) is list and len(doc["contacts"]) == 1
    for interval in doc["contacts"]:
        assert type(interval) is list and len(interval) == 2
        assert all(type(v) is float for v in interval)
    path = tmp_path / "out.yaml"
    write_yaml(result, path)
    assert yaml.safe_load(path.read_text()) == doc


def test_the_ledger_accounts_for_every_wrench(replayed: dict[str, ReplayResult]) -> None:
    """Each wrench of the bag is dropped at the gatherer (by reason), still held, or
    synchronised; each synchronised sample is used, held or dropped by the solver."""
    for storage, result in replayed.items():
        ledger = result.ledger
        assert ledger["wrenches"] == (DURATION if storage == "mcap" else 5.0) * 1000
        assert (sum(ledger["gatherer_dropped"].values()) + ledger["gatherer_held"]
                + ledger["synchronised"]) == ledger["wrenches"], ledger
        assert (ledger["used"] + ledger["solver_held"]
                + sum(ledger["solver_dropped"].values())) == ledger["synchronised"], ledger
        assert 0.8 < ledger["used_share"] <= 1.0
    assert replayed["mcap"].ledger["solver_dropped"]["gated"] >= 0.9 * CONTACT.duration * 1000


# --- parameter files and overrides --------------------------------------------------------


def _params_file(tmp_path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({node: {"ros__parameters": values}
                                    for node, values in sections.items()}))
    return path


def test_repository_config_replays(synthetic_bags: dict[str, Path]) -> None:
    """config/inertial_id.yaml, the robot's parameter file, is valid for replay too."""
    bag = synthetic_bags["db3"]
    result = replay(ReplayOptions(bag, params=CONFIG, progress=False))
    assert result.estimate is not None
    assert result.estimate.body.mass == pytest.approx(_truth(bag)["payload"]["mass"], rel=0.01)


def test_replay_ignores_the_node_only_values_of_the_shipped_config() -> None:
    """The table's scope, not a list in replay, says which keys of a section are the running
    node's only (queue depths, publish rates of the gatherer, the calibration file): each of
    them in config/inertial_id.yaml, given a value no parameter takes, leaves replay's
    pipeline buildable; the same value for a parameter replay reads is refused."""
    params = load_params(CONFIG)
    node_only = {(node, p.name) for node in PIPELINE_NODES for p in NODE_PARAMS[node]
                 if not p.offline and p.name in params[node]}
    assert {("gatherer", "queue_depth"), ("gatherer", "publish_rate"),
            ("solver", "contact_decimation"), ("solver", "calibration_file")} <= node_only
    for node, name in node_only:
        params[node][name] = [None]
    build_pipeline(params, bundled_urdf_path())
    params["gatherer"]["max_span"] = [None]
    with pytest.raises(InertialIdError, match="^gatherer: max_span must be a number"):
        build_pipeline(params, bundled_urdf_path())


def test_unknown_parameter_is_named(synthetic_bags: dict[str, Path], tmp_path: Path) -> None:
    params = _params_file(tmp_path, {"solver": {"publish_rate": 2.0, "bogus_gain": 3}})
    error = _replay_error("bogus_gain", bag=synthetic_bags["mcap"], params=params)
    assert "solver" in str(error)


@pytest.mark.parametrize("text", ["[1, 2]\n", "solver: 3\n"], ids=["list", "no-mapping"])
def test_malformed_params_file(text: str, synthetic_bags: dict[str, Path],
                               tmp_path: Path) -> None:
    """A parameter file that is not ``{node: {ros__parameters: {...}}}`` names the file."""
    path = tmp_path / "params.yaml"
    path.write_text(text)
    _replay_error("params.yaml", bag=synthetic_bags["mcap"], params=path)


@pytest.mark.parametrize(("values", "match"), [
    ({"min_samples": "lots"}, "lots"),
    ({"publish_rate": 0.0}, "publish_rate"),
], ids=["not-a-number", "zero-rate"])
def test_bad_parameter_value(values: dict[str, Any], match: str,
                             synthetic_bags: dict[str, Path], tmp_path: Path) -> None:
    """Values that do not convert or make no sense are InertialIdErrors naming them."""
    params = _params_file(tmp_path, {"solver": values})
    _replay_error(match, bag=synthetic_bags["db3"], params=params)


def test_missing_params_file(synthetic_bags: dict[str, Path], tmp_path: Path) -> None:
    _replay_error("nothing.yaml", bag=synthetic_bags["mcap"], params=tmp_path / "nothing.yaml")


def test_flipped_wrench_sign(synthetic_bags: dict[str, Path]) -> None:
    """The wrong sign convention cannot be fitted by a consistent payload (true mass < 0).

    The LMI estimate stays physically consistent (it is never published otherwise) but is
    pinned to the boundary ``J(pi) = epsilon I``: a tiny mass, far from the truth.
    """
    bag = synthetic_bags["db3"]
    result = replay(ReplayOptions(bag, wrench_sign="sensor_on_payload", progress=False))
    mass = _truth(bag)["payload"]["mass"]
    e = result.estimate
    if e is not None:  # a failed solve (estimate None) is sensible as well
        assert e.physically_consistent
        assert abs(e.body.mass - mass) > 0.5 * mass
        assert e.min_eigenvalue < 1e-6


def test_flipped_sign_least_squares(synthetic_bags: dict[str, Path], tmp_path: Path) -> None:
    """Unconstrained least squares recovers exactly the negated payload: the sign is real."""
    bag = synthetic_bags["db3"]
    params = _params_file(tmp_path, {"solver": {"method": "least_squares"}})
    result = replay(ReplayOptions(bag, params=params, wrench_sign="sensor_on_payload",
                                  progress=False))
    assert result.estimate is not None
    assert result.estimate.body.mass == pytest.approx(-_truth(bag)["payload"]["mass"], rel=0.01)
    assert not result.estimate.physically_consistent
    assert result.to_yaml()["estimate"]["physically_consistent"] is False


@pytest.mark.parametrize(("override", "match"), [
    ({"urdf": "missing/robot.urdf"}, "missing/robot.urdf"),
    ({"sensor_frame": "no_such_frame"}, "no_such_frame"),
    ({"wrench_sign": "upside_down"}, "upside_down"),
    ({"wrench_topic": "/ft/wrench"}, r"/ft/wrench.*topics: .*/wrench \("),
    ({"joint_states_topic": "/arm/joint_states"}, r"/arm/joint_states.*topics: .*/joint_states"),
])
def test_bad_override(override: dict[str, str], match: str,
                      synthetic_bags: dict[str, Path]) -> None:
    """Overrides that name something missing fail with a message naming it."""
    _replay_error(match, bag=synthetic_bags["mcap"], **override)


def test_topic_overrides_by_name(tmp_path: Path) -> None:
    """Naming the topics and the URDF explicitly works like finding them by type."""
    bag = _write(tmp_path / "short", _recording(0.6))
    result = replay(ReplayOptions(bag, urdf=bundled_urdf_path(), wrench_topic="/wrench",
                                  joint_states_topic="/joint_states", progress=False))
    assert result.samples_processed > 400


# --- bags that cannot be replayed -------------------------------------------------------


def test_no_such_bag(tmp_path: Path) -> None:
    _replay_error("no such bag", bag=tmp_path / "absent")


def test_directory_without_a_bag(tmp_path: Path) -> None:
    """A directory that holds no bag (no metadata.yaml) is a BagError naming it."""
    directory = tmp_path / "not_a_bag"
    directory.mkdir()
    with pytest.raises(BagError, match="not_a_bag"):
        replay(ReplayOptions(directory, progress=False))


def test_file_that_is_not_a_bag(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a bag\n")
    with pytest.raises(BagError, match="notes.txt"):
        replay(ReplayOptions(path, progress=False))


def test_bag_with_only_a_robot_description(tmp_path: Path) -> None:
    bag = _write(tmp_path / "empty", _recording(0.5, joints=False, wrenches=False))
    with pytest.raises(BagError, match="joint state"):
        replay(ReplayOptions(bag, progress=False))


def test_bag_with_topics_but_no_messages(tmp_path: Path) -> None:
    """Connections without messages (a recording stopped at once)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    bag = tmp_path / "silent"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        writer.add_connection("/joint_states", bags.JOINT_STATE, typestore=bags.TYPESTORE)
        writer.add_connection("/wrench", bags.WRENCH, typestore=bags.TYPESTORE)
    with pytest.raises(BagError, match="no joint state or wrench messages"):
        replay(ReplayOptions(bag, progress=False))


def test_bag_without_wrenches(tmp_path: Path) -> None:
    """The message lists the topics the bag does have."""
    bag = _write(tmp_path / "joints_only", _recording(0.5, wrenches=False))
    with pytest.raises(BagError, match=r"no wrench topic.*topics: .*/joint_states"):
        replay(ReplayOptions(bag, progress=False))


def test_bag_without_a_urdf(tmp_path: Path) -> None:
    messages = (m for m in _recording(0.5) if m[0] != "/robot_description")
    bag = _write(tmp_path / "no_urdf", messages)
    _replay_error("URDF", bag=bag)


def test_no_overlap_in_time(tmp_path: Path) -> None:
    """Joint states and wrenches an hour apart (two clocks): the wrenches jump away from the
    stream the joint states set, and the message says so."""
    recording = list(_recording(0.5, wrenches=False))
    shifted = [("/wrench", bags.WRENCH, t + 3600.0, bags.wrench_message(
        t + 3600.0, "ft_sensor", np.ones(6))) for _, _, t, _ in recording[1:]]
    bag = _write(tmp_path / "apart", iter(recording + shifted))
    with pytest.raises(BagError, match="different clocks"):
        replay(ReplayOptions(bag, progress=False))


@pytest.mark.parametrize("storage", STORAGES)
def test_truncated_bag(storage: str, synthetic_bags: dict[str, Path], tmp_path: Path) -> None:
    """A copy whose data file lost its second half (a recording cut by a crash)."""
    bag = shutil.copytree(synthetic_bags[storage], tmp_path / f"cut_{storage}")
    (data,) = (p for p in bag.iterdir() if p.suffix in (".mcap", ".db3"))
    with data.open("r+b") as stream:
        stream.truncate(data.stat().st_size // 2)
    with pytest.raises(BagError, match=f"cut_{storage}.*cannot"):
        replay(ReplayOptions(bag, progress=False))


def test_unknown_joints(tmp_path: Path) -> None:
    """Joint states whose names are not the URDF's: the missing joints are named."""
    names = tuple(name.replace("_joint", "_axis") for name in JOINTS)
    bag = _write(tmp_path / "renamed", _recording(1.0, names=names))
    with pytest.raises(BagError, match="shoulder_pan_joint"):
        replay(ReplayOptions(bag, progress=False))


@pytest.mark.parametrize("spread", [0.05, 5.0], ids=["local", "global"])
def test_non_monotonic_stamps(spread: float, tmp_path: Path) -> None:
    """Header stamps of every third message shuffled (log times stay ordered)."""
    rng = np.random.default_rng(3)

    def stamp(t: float, k: int) -> float:
        return t + rng.uniform(-spread, spread) if k % 3 == 0 else t

    bag = _write(tmp_path / "shuffled", _recording(2.0, stamp=stamp))
    with pytest.raises(BagError, match="stamp"):
        replay(ReplayOptions(bag, progress=False))


def test_a_few_late_stamps_are_tolerated(tmp_path: Path) -> None:
    """Under 1 % of messages out of order are dropped and counted, not fatal."""
    bag = _write(tmp_path / "late", _recording(
        2.0, stamp=lambda t, k: t - 0.01 if k % 500 == 250 else t))
    result = replay(ReplayOptions(bag, progress=False))
    late = result.dropped.get("joint_state_out_of_order", 0) + result.dropped.get(
        "wrench_out_of_order", 0)
    assert 0 < late <= 0.01 * 3000


# --- report -----------------------------------------------------------------------------


def _assert_png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 1000, path
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path


def test_report_writes_plots_and_summary(replayed: dict[str, ReplayResult],
                                         synthetic_bags: dict[str, Path],
                                         tmp_path: Path) -> None:
    result = replayed["mcap"]
    truth = _truth(synthetic_bags["mcap"])
    written = write_report(result, tmp_path / "report", truth, bag=synthetic_bags["mcap"])
    assert sorted(p.name for p in written) == sorted([*PLOTS, "summary.md"])
    for name in PLOTS:
        _assert_png(tmp_path / "report" / name)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert f"{result.estimate.body.mass:.5g}" in summary
    assert "bag_mcap" in summary
    for name in PLOTS:
        assert f"]({name})" in summary
    assert "Errors against the ground truth" in summary
    assert "8.000 s" in summary
    assert "## Residual of the final estimate" in summary
    # the detected contact's samples are left out of the residual's statistics: its force is
    # no noise, and with it the ratios to the configured noise read 5-10
    assert "inside the 1 detected contact(s) left out" in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("| RMS / configured")]
    ratios = [float(v) for v in row.strip("|").split("|")[1:]]
    assert len(ratios) == 6 and max(ratios) < 1.5, ratios


def test_the_final_fit_explains_the_measured_wrench(replayed: dict[str, ReplayResult]) -> None:
    """The figure's prediction: the final estimate reproduces the raw wrench to the noise
    (outside the contact), i.e. it is drawn from the right samples and convention."""
    from inertial_id.tools.report.series import final_fit

    t, measured, predicted = final_fit(replayed["db3"])
    assert t.size > 300 and np.all(np.diff(t) > 0)
    rms = np.sqrt(np.mean((measured - predicted) ** 2, axis=0))
    assert np.all(rms[:3] < 0.15) and np.all(rms[3:] < 0.008), rms
    assert np.std(measured[:, 2]) > 5 * rms[2]  # the wrench moves: the fit is not trivial


def test_report_without_an_estimate(replayed: dict[str, ReplayResult], tmp_path: Path) -> None:
    """No estimate and no history at all: a summary, no exception."""
    result = replayed["mcap"]
    empty = dataclasses.replace(
        result, estimate=None, contacts=[], payload_changes=[], samples_used=0,
        samples_processed=0,
        pipeline=build_pipeline({"gatherer": {}, "kinematics": {}, "solver": {}},
                                bundled_urdf_path()))
    written = write_report(empty, tmp_path / "empty")
    assert [p.name for p in written] == ["summary.md"]
    assert "No estimate" in written[0].read_text()


def test_report_of_a_bag_too_short_to_solve(tmp_path: Path) -> None:
    """0.4 s of data: batches but no solve (min_samples); the batch plots are still drawn."""
    bag = simulate_bag(tmp_path / "short", SimulateOptions(duration=0.4))
    result = replay(ReplayOptions(bag, progress=False))
    assert result.estimate is None
    assert result.to_yaml()["estimate"] is None
    written = write_report(result, tmp_path / "report", _truth(bag))
    assert {p.name for p in written} == {"residual.png", "t2.png", "summary.md"}
    for path in written[:-1]:
        _assert_png(path)
    assert "No estimate" in (tmp_path / "report" / "summary.md").read_text()


# --- bad stamps and bad arguments -------------------------------------------------------

GLITCH = (2.0, 2.5)  # s of the recording stamped ten years ahead


def _glitched(t: float, k: int) -> float:
    return t + 10 * 365.25 * 86400.0 if GLITCH[0] <= t < GLITCH[1] else t


def test_half_a_second_stamped_decades_ahead_costs_only_that_half_second(
        tmp_path: Path) -> None:
    """The glitched messages are dropped and counted; every sample after them is used (the
    estimator used to wait for time to catch up with the glitch and used none)."""
    bag = _write(tmp_path / "glitch", _recording(6.0, stamp=_glitched))
    # a set filter: a chosen one would hold the first 4 s of this 6 s bag and solve less
    params = _params_file(tmp_path, {"gatherer": {"filter_window": 0.08,
                                                  "filter_delay": 0.004}})
    result = replay(ReplayOptions(bag, params=params, progress=False, max_dropped=0.1))
    ledger = result.ledger
    assert ledger["gatherer_dropped"]["wrench_stamp_jump"] == 500
    assert result.dropped["joint_state_stamp_jump"] == 250
    # besides the glitch: the start-up (no history yet) and the filter windows over its gap
    assert sum(ledger["gatherer_dropped"].values()) - 500 < 200, ledger
    assert ledger["used_share"] > 0.87, ledger
    assert result.pipeline.gathering.synchronizer.counters["stamp_resets"] == 0
    # the pipeline kept running through the bag (the glitch used to hold every later message
    # in one block until the end): solves at the solver's rate, 2 Hz
    assert len(result.pipeline.history.solve_time) > 0.8 * 2.0 * 5.0


def test_a_bag_losing_more_than_the_threshold_to_bad_stamps_fails(tmp_path: Path) -> None:
    bag = _write(tmp_path / "glitch", _recording(6.0, stamp=_glitched))
    with pytest.raises(BagError, match=r"750 of 9000 messages unusable \(8\.3 % > 1 %\), "
                       "mostly: wrench stamps jumped"):
        replay(ReplayOptions(bag, progress=False))


def _cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``inertial-id replay`` exits 3 with one line on stderr, no traceback."""
    assert main(["replay", *argv, "--no-progress"]) == 3
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def small_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("small") / "bag", _recording(1.0))


def test_bad_files_and_values_are_one_line_errors(
        small_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latin = tmp_path / "latin.urdf"
    latin.write_bytes(b"<robot name='\xe9'/>")
    assert "not UTF-8" in _cli_error(capsys, str(small_bag), "--urdf", str(latin))
    params = tmp_path / "params.yaml"
    params.write_bytes(b"solver:\n  ros__parameters:\n    method: \xff\n")
    assert "cannot read parameter file" in _cli_error(capsys, str(small_bag),
                                                        "--params", str(params))
    params.write_text("solver:\n  ros__parameters:\n    epsilon: .nan\n")
    assert "epsilon must be a finite number >= 0, got nan" in _cli_error(
        capsys, str(small_bag), "--params", str(params))
    params.write_text("gatherer:\n  ros__parameters:\n    max_span: -1.0\n")
    assert "max_span must be a finite number > 0" in _cli_error(
        capsys, str(small_bag), "--params", str(params))
    assert "[0, 1]" in _cli_error(capsys, str(small_bag), "--max-dropped", "2")


def test_output_paths_are_checked_before_the_replay(
        small_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert "is a file" in _cli_error(capsys, str(small_bag), "--output",
                                     str(a_file / "out.yaml"))
    assert "not a file" in _cli_error(capsys, str(small_bag), "--output", str(tmp_path))
    assert "not a directory" in _cli_error(capsys, str(small_bag), "--report", str(a_file))


def test_the_wrong_wrench_sign_is_named_at_the_top_and_fails(
        synthetic_bags: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """It used to give mass 0.07 kg, a CoM 0.9 m away, 'physically consistent' and exit 0."""
    bag = synthetic_bags["mcap"]
    result = replay(ReplayOptions(bag, wrench_sign="sensor_on_payload", progress=False))
    assert len(result.setup_errors) == 1 and "wrench_sign: payload_on_sensor" in (
        result.setup_errors[0])
    assert summary_lines(result)[0].startswith("SET-UP ERROR: wrench sign")
    assert not result.pipeline.online.converged
    assert main(["replay", str(bag), "--wrench-sign", "sensor_on_payload",
                 "--no-progress"]) == 3
    assert "set-up error: wrench sign" in capsys.readouterr().err
