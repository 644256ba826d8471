"""Link identification's choices from the data (inertial_id.core.joint_torque.link_selection): the
friction
model with direction memory for a joint held at rest while the others move, the prior weight
by cross-validation on time blocks, and the choices kept in the model YAML."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import yaml

from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_selection import (
    PRIOR_WEIGHTS,
    choose_friction,
    choose_prior_weight,
    memory_candidates,
)
from inertial_id.core.joint_torque.links import LinkIdentification
from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import (
    BUNDLED_HOME,
    BUNDLED_SENSOR_FRAME,
    FourierTrajectory,
    PayloadSimulation,
    bundled_urdf_path,
)
from inertial_id.tools.links_tool import add_identify_links_parser, run_identify_links

URDF = bundled_urdf_path()
STEP = 0.005  # s, 200 Hz
HELD = 4      # the wrist joint that stands still
HOLD = (9.0, 15.0)  # s
COULOMB = 1.0  # N m


@pytest.fixture(scope="module")
def held_record() -> tuple[LinkModel, np.ndarray, tuple[np.ndarray, ...]]:
    """20 s of the bundled arm (no payload) whose joint HELD stands still during HOLD while
    the others move; its Coulomb torque is kept in the direction of its last motion."""
    trajectory = FourierTrajectory.random(BUNDLED_HOME, amplitude=0.7, period=10.0,
                                          max_velocity=1.0, seed=3)
    trajectory = FourierTrajectory(trajectory.home, trajectory.amplitudes, trajectory.phases,
                                   trajectory.period, holds=((HELD, *HOLD),))
    sim = PayloadSimulation(SensorKinematics(URDF, BUNDLED_SENSOR_FRAME), trajectory,
                            payload=BodyParameters.from_mass_com_inertia(
                                1e-9, np.zeros(3), 1e-12 * np.eye(3)),
                            coulomb_friction=COULOMB, presliding=1e-3, effort_noise_std=0.03)
    t = np.arange(0.0, 20.0, STEP)
    # Two calls: the friction state carries over from one to the next.
    effort = np.concatenate((sim.joint_efforts(t[:1000]), sim.joint_efforts(t[1000:])))
    return LinkModel(URDF), t, (*trajectory(t), effort)


def _dead_band() -> FrictionModel:
    return FrictionModel("symmetric", velocity_threshold=0.03, sample_period=STEP)


def test_the_simulated_friction_holds_the_last_direction_at_rest(held_record) -> None:
    _, t, (q, qd, _, effort) = held_record
    hold = (t > HOLD[0]) & (t < HOLD[1])
    assert np.all(qd[hold, HELD] == 0.0) and np.ptp(q[hold, HELD]) == 0.0
    assert np.all(np.abs(qd[hold, :HELD]).max(axis=0) > 0.1)  # the others move
    # Computed in two calls, the memory is the one of the whole record.
    last = np.sign(qd[t < HOLD[0], HELD][np.abs(qd[t < HOLD[0], HELD]) > 0.03][-1])
    memory = FrictionModel("symmetric", velocity_threshold=0.03, presliding=1e-3,
                           sample_period=STEP).direction(qd[:, HELD:HELD + 1])[hold, 0]
    np.testing.assert_allclose(memory, last, atol=1e-9)


def test_direction_memory_recovers_friction_held_at_rest_and_is_chosen(held_record) -> None:
    model, t, rows = held_record
    problem = LinkIdentification(model, *rows, _dead_band())
    chosen, table = choose_friction(problem, memory_candidates(_dead_band()), guard=20)
    assert chosen.memory, table
    assert [row["presliding"] for row in table] == [0.0, 1e-3, 1e-2, 0.0]
    assert [row["rest_time"] for row in table] == [0.0, 0.0, 0.0, 0.5]
    assert table[1]["score"] < table[0]["score"], table
    # The memory at rest only holds the last direction too (the record rests 0.5 s and more).
    assert table[3]["rms"][HELD] < table[0]["rms"][HELD], table
    # The held joint's held-out error is mostly the Coulomb torque the dead band misses.
    assert table[1]["rms"][HELD] < 0.5 * table[0]["rms"][HELD], table
    hold = (t > HOLD[0] + 0.5) & (t < HOLD[1])
    residual = {}
    for name, friction in (("dead band", _dead_band()), ("memory", chosen)):
        fitted = problem.with_friction(friction)
        estimate = fitted.weighted_least_squares()
        residual[name] = np.sqrt(np.mean(
            (fitted.effort - fitted.predict(estimate))[hold, HELD] ** 2))
    # The memory predicts the held Coulomb torque to the noise; the dead band predicts none.
    assert residual["memory"] < 0.1, residual
    assert residual["dead band"] > 0.4 * COULOMB, residual


def test_the_prior_weight_is_chosen_by_held_out_blocks(held_record) -> None:
    model, _, rows = held_record
    decimated = tuple(a[::4] for a in rows)
    friction = FrictionModel("symmetric", velocity_threshold=0.03, presliding=1e-3,
                             sample_period=4 * STEP)
    problem = LinkIdentification(model, *decimated, friction)
    weight, table = choose_prior_weight(problem, "sdp", (1e-1, 1e-4), folds=3, guard=5)
    # The URDF is the truth here, so a strong prior does no harm; both are scored.
    assert [row["prior_weight"] for row in table] == [1e-1, 1e-4]
    assert weight == min(table, key=lambda row: row["score"])["prior_weight"]
    assert all(np.isfinite(row["score"]) and len(row["rms"]) == model.n for row in table)


def test_friction_settings_round_trip() -> None:
    friction = FrictionModel("asymmetric", True, False, 0.02, True, True, 1e-2, 0.008)
    assert FrictionModel.from_settings(friction.settings()) == friction
    old = {k: v for k, v in friction.settings().items()
           if k not in ("presliding", "sample_period")}
    assert not FrictionModel.from_settings(old).memory  # an older model file: no memory


def _write_csv(path: Path, t: np.ndarray, names: list[str], values: np.ndarray,
               kind: str) -> None:
    header = ",".join(["t", *(f"{n}_{kind}" for n in names)])
    np.savetxt(path, np.column_stack((t, values)), delimiter=",", header=header, comments="")


def test_identify_links_chooses_the_memory_and_the_yaml_keeps_it(held_record,
                                                                  tmp_path: Path) -> None:
    model, t, (q, _, _, effort) = held_record
    _write_csv(tmp_path / "pos.csv", t, model.joint_names, q, "position")
    _write_csv(tmp_path / "eff.csv", t, model.joint_names, effort, "effort")
    parser = argparse.ArgumentParser()
    add_identify_links_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "model.yaml"
    args = parser.parse_args([
        "identify-links", "--urdf", URDF, "--position", str(tmp_path / "pos.csv"),
        "--effort", str(tmp_path / "eff.csv"), "--velocity-threshold", "0.03", "--smooth-coulomb",
        "--prior-weight", "1e-3", "--output", str(out)])
    assert run_identify_links(args) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["friction_model"]["presliding"] > 0
    assert doc["friction_model"]["sample_period"] == pytest.approx(STEP)
    assert doc["choices"]["friction"]["source"] == "cross-validation"
    assert doc["choices"]["prior_weight"] == {"source": "option"}
    assert doc["prior_weight"] == pytest.approx(1e-3)
    # The link model that check-links and identify-payload load applies the memory.
    links = LinkTorqueModel.from_file(out)
    assert links.friction == FrictionModel.from_settings(doc["friction_model"])
    _, qd, qdd = (a[15:-15] for a in (q, *held_record[2][1:3]))
    hold = (t[15:-15] > HOLD[0] + 0.5) & (t[15:-15] < HOLD[1] - 0.2)
    predicted = links.at_sample_period(STEP).efforts(q[15:-15], qd, qdd)
    error = effort[15:-15][hold, HELD] - predicted[hold, HELD]
    assert np.sqrt(np.mean(error ** 2)) < 0.15


def test_without_a_prior_weight_identify_links_chooses_it_and_reports_the_scores(
        held_record, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, t, (q, _, _, effort) = held_record
    _write_csv(tmp_path / "pos.csv", t[::2], model.joint_names, q[::2], "position")
    _write_csv(tmp_path / "eff.csv", t[::2], model.joint_names, effort[::2], "effort")
    parser = argparse.ArgumentParser()
    add_identify_links_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "model.yaml"
    args = parser.parse_args([
        "identify-links", "--urdf", URDF, "--position", str(tmp_path / "pos.csv"),
        "--effort", str(tmp_path / "eff.csv"), "--window", "15", "--folds", "3",
        "--direction-memory", "on", "--smooth-coulomb", "--velocity-threshold", "0.03",
        "--output", str(out)])
    assert run_identify_links(args) == 0
    doc = yaml.safe_load(out.read_text())
    choice = doc["choices"]["prior_weight"]
    assert choice["source"] == "cross-validation" and choice["folds"] == 3
    scores = {row["prior_weight"]: row["score"] for row in choice["candidates"]}
    assert len(scores) == len(PRIOR_WEIGHTS) and doc["prior_weight"] == min(scores, key=scores.get)
    assert doc["choices"]["friction"] == {"source": "option"}
    assert doc["friction_model"]["presliding"] == pytest.approx(1e-3)
    printed = capsys.readouterr().out
    assert f"prior weight {doc['prior_weight']:g} (cross-validation)" in printed
    assert printed.count("held-out score") == len(PRIOR_WEIGHTS)
