"""``inertial-id batch --mode joint-torque``: simulated motor-current bags (bench/_trends_data.py)
identified per 10 s phase with a link model from identify-links; the same table with 1 and 2
workers, the friction near the simulated arm's, a bag without efforts an error row."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench import _trends_data as td
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.io.bags import JOINT_STATE, joint_state_message, write_bag
from inertial_id.tools.batch import BatchOptions, read_table, run_batch
from inertial_id.tools.batch_torque import TorqueSettings
from inertial_id.tools.cli import main

SERIES = td.Series(recordings=2, warmup=0.0, load=0.0)  # 10 s and 20 s, no warm-up


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, td.Identifier]:
    """fleet/arm/rec00 (10 s, 2.5 kg), rec01 (20 s, 0.5 kg), fleet/arm/no_effort (joint
    states without efforts), and model.yaml: identify-links (sdp) on an unloaded 10 s
    recording, friction shape, direction memory and prior weight given (no cross-validation:
    the values it chooses on this recording)."""
    root = tmp_path_factory.mktemp("torque")
    identifier = td.Identifier()
    td.write_bags(SERIES, "arm", identifier, root / "fleet")
    empty = {"phases": 1, "mass": 1e-6, "months": 0.0, "seed": 77}
    rec = td.record(identifier.arm, SERIES, empty)
    from inertial_id.tools.synthetic import write_current_bag

    write_current_bag(root / "unloaded", identifier.arm, rec, td.tool(1e-6))
    names = identifier.arm.joint_names
    write_bag(root / "fleet" / "arm" / "no_effort",
              [("/joint_states", JOINT_STATE, 1e9 + k / 125,
                joint_state_message(1e9 + k / 125, names, rec["position"][k],
                                    rec["velocity"][k])) for k in range(200)])
    model = root / "model.yaml"
    assert main(["identify-links", str(root / "unloaded"), "--urdf", bundled_urdf_path(),
                 "--method", "sdp", "--prior-weight", "1e-7", "--smooth-coulomb",
                 "--velocity-threshold", "0.02", "--direction-memory", "on",
                 "--presliding", "0.001", "--output", str(model)]) == 0
    return root, model, identifier


def test_same_rows_with_one_and_two_workers(fleet: tuple[Path, Path, td.Identifier],
                                            tmp_path: Path) -> None:
    root, model, identifier = fleet
    settings = TorqueSettings(str(model), phase=td.PHASE, method="wls")
    tables = []
    for workers, name in ((1, "one.parquet"), (2, "two.csv")):
        options = BatchOptions(inputs=(str(root / "fleet"),), output=tmp_path / name,
                               workers=workers, progress=False, torque=settings)
        summary = run_batch(options)
        assert (summary.found, summary.failed, summary.rows) == (3, 1, 4)
        tables.append(read_table(tmp_path / name))
    assert tables[0] == tables[1]
    rows = tables[0]
    failed = [r for r in rows if r["error"] is not None]
    assert [Path(r["bag"]).name for r in failed] == ["no_effort"]
    assert "no joint states with one effort per joint" in failed[0]["error"]
    assert "\n" not in failed[0]["error"]
    good = [r for r in rows if r["error"] is None]
    assert [(Path(r["bag"]).name, r["segment"], r["start_s"], round(r["end_s"])) for r in good] \
        == [("rec00", 0, 0.0, 10), ("rec01", 0, 0.0, 10), ("rec01", 1, 10.0, 20)]
    assert all(r["robot"] == "arm" for r in rows)
    # The simulated arm's friction in effort units (its drive gain error scales all of it):
    # Coulomb within 1.2 %, viscous within 6.2 % when this was written.
    arm = identifier.arm
    truth = {"fc": arm.gain_error * arm.coulomb, "fv": arm.gain_error * arm.viscous}
    entries = td.schedule(SERIES)
    for row in good:
        entry = entries[int(Path(row["bag"]).name[3:])]
        assert row["start_stamp"] - row["start_s"] == pytest.approx(entry["stamp"], abs=1e-3)
        assert row["mass"] == pytest.approx(entry["mass"], rel=0.05)
        assert row["contacts"] == 0 and row["samples_used"] > 1000  # no push was simulated
        names = row["friction_names"]
        assert row["joints"] == arm.joint_names and len(row["residual_rms"]) == 6
        assert len(row["friction"]) == len(row["friction_std"]) == len(names)
        for term, value in truth.items():
            found = np.array([row["friction"][names.index(f"{j}.{term}")]
                              for j in arm.joint_names])
            assert found == pytest.approx(value, rel=0.03 if term == "fc" else 0.1), term
    # Resumable: a second run skips the bags in the table, --retry-failed runs the failed one.
    again = run_batch(BatchOptions(inputs=(str(root / "fleet"),), output=tmp_path / "two.csv",
                                   workers=1, progress=False, torque=settings))
    assert (again.skipped, again.replayed) == (3, 0)
    bad = replace(settings, links=str(root / "no_model.yaml"))
    with pytest.raises(Exception, match="no_model.yaml"):
        run_batch(BatchOptions(inputs=(str(root / "fleet"),), output=tmp_path / "x.csv",
                               workers=1, progress=False, torque=bad))


def test_command_line_needs_a_model_for_the_mode(fleet: tuple[Path, Path, td.Identifier],
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root, model, _ = fleet
    assert main(["batch", str(root / "fleet"), "--output", str(tmp_path / "t.csv"),
                 "--mode", "joint-torque"]) == 3
    assert "--links" in capsys.readouterr().err
    doc = yaml.safe_load(model.read_text())
    assert doc["method"] == "sdp" and "links" in doc


def test_pushes_in_cold_recordings_are_found_and_kept_out_of_the_payload(
        fleet: tuple[Path, Path, td.Identifier], tmp_path: Path) -> None:
    """Four cold recordings (+15 % friction fading with 3 s) with pushes of 20-40 N over a
    tenth of each: every push is found, nothing else is flagged, and each phase's payload is
    fitted without its pushes (a second of a 40 N push in a 10 s phase had moved a 0.5 kg
    tool's mass to 0.87 kg and raised contacts that were no push)."""
    from bench.trends import contact_score
    from inertial_id.tools.batch_torque import phase_rows, setup

    _, model, identifier = fleet
    series = td.Series(recordings=4, warmup=0.15, warmup_time=3.0, push_force=40.0)
    td.write_bags(series, "arm", identifier, tmp_path)
    settings = TorqueSettings(str(model), phase=td.PHASE, method="wls")
    ready = setup(settings)
    rows = [dict(row, bag=str(bag)) for bag in sorted((tmp_path / "arm").iterdir())
            for row in phase_rows(str(bag), settings, ready)]
    entries = td.schedule(series)
    assert len(rows) == sum(e["phases"] for e in entries)
    for row in rows:
        truth = entries[int(Path(row["bag"]).name[3:])]["mass"]
        assert row["mass"] == pytest.approx(truth, rel=0.05), row["bag"]
    score = contact_score(rows, series)
    assert score["found"] == score["pushes"] > 4 and score["false_alarms"] == 0, score
