"""Drive gains refined with the links (inertial_id.core.joint_torque.links.gains,
core/joint_torque/link_gains.py) and
identify-links' --gain-std: a simulated motor-current arm's relative gain error recovered,
the common scale held, the choice written to the model YAML and re-applied."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from inertial_id.core.joint_torque.current_arm import (
    MotorCurrentArm,
    nothing_held,
    trajectory,
)
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_gains import GAIN_STDS
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.links import LinkIdentification
from inertial_id.core.joint_torque.links.gains import refined_least_squares
from inertial_id.core.joint_torque.torque_payload import LinkTorqueModel
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.tools.cli import main
from inertial_id.tools.synthetic import write_current_bag


@pytest.fixture(scope="module")
def arm() -> MotorCurrentArm:
    """Seed 1: shoulder-lift gain 2.9 % low, elbow 0.4 % low (published / true)."""
    return replace(MotorCurrentArm.random(bundled_urdf_path(), seed=1), presliding=0.006,
                   velocity_scale=0.02)


def _problem(arm: MotorCurrentArm, seed: int, duration: float) -> LinkIdentification:
    traj = trajectory(arm.home, seed=seed, holds=((4, 3.0, 6.0),))
    rec = arm.record(traj, duration, nothing_held(), seed=seed)
    q, qd, qdd = traj(rec["t"])
    friction = FrictionModel("symmetric", smooth=True, velocity_threshold=0.02,
                             presliding=0.006, sample_period=1.0 / 125.0)
    return LinkIdentification(LinkModel(bundled_urdf_path()), q, qd, qdd, rec["effort"],
                              friction)


def test_relative_gain_recovered_and_common_scale_held(arm: MotorCurrentArm) -> None:
    """The shoulder-lift / elbow gain ratio (2.6 % off with the published gains) within
    1 % of the truth with every gain refined (measured 0.74 %), and the geometric mean of the
    scales at the nominal one; without a prior the last wrist joint's scale, which its light
    links hardly excite, drifts by more than 10 % (measured 18 %), with the 3 % prior it stays
    within 5 % (2.3 %); with the elbow's gain known, the shoulder-lift's within 1 % (0.5 %)."""
    problem = _problem(arm, 31, 30.0)
    truth = arm.gain_error  # effort per N m: the scales a perfect fit finds
    assert abs(truth[1] / truth[2] - 1.0) > 0.02
    every = np.ones(6, bool)
    scale = refined_least_squares(problem, every).effort_scale
    assert np.exp(np.mean(np.log(scale))) == pytest.approx(1.0, abs=1e-9)
    assert scale[1] / scale[2] == pytest.approx(truth[1] / truth[2], rel=0.01)
    assert abs(scale[5] / truth[5] - 1.0) > 0.1
    prior = refined_least_squares(problem, every, gain_std=0.03).effort_scale
    assert np.exp(np.mean(np.log(prior))) == pytest.approx(1.0, abs=1e-9)
    assert prior[1] / prior[2] == pytest.approx(truth[1] / truth[2], rel=0.01)
    assert prior[5] == pytest.approx(truth[5], rel=0.05)

    known = LinkIdentification(problem.model, *_states(arm, 31, 30.0),
                               problem.friction_model,
                               effort_scale=np.where(np.arange(6) == 2, truth[2], 1.0),
                               known_scale=np.arange(6) == 2)
    fitted = refined_least_squares(known, ~known.known_scale, gain_std=0.03,
                                   anchor=False).effort_scale
    assert fitted[2] == truth[2]
    assert fitted[1] == pytest.approx(truth[1], rel=0.01)


def _states(arm: MotorCurrentArm, seed: int, duration: float) -> tuple[np.ndarray, ...]:
    traj = trajectory(arm.home, seed=seed, holds=((4, 3.0, 6.0),))
    rec = arm.record(traj, duration, nothing_held(), seed=seed)
    return (*traj(rec["t"]), rec["effort"])


def test_identify_links_records_the_gain_choice_and_tools_apply_it(
        arm: MotorCurrentArm, tmp_path: Path) -> None:
    """--gain-std auto with a held-out recording: the candidates and their scores in the
    YAML's choices, the gains used in effort_scale / drive_gain, which check-links and
    identify-payload's link model load; --gain-std 0 keeps the nominal gains."""
    bags = {}
    for name, seed, duration in (("ident", 41, 24.0), ("other", 42, 12.0)):
        traj = trajectory(arm.home, seed=seed, holds=((4, 3.0, 6.0),))
        rec = arm.record(traj, duration, nothing_held(), seed=seed)
        bags[name] = write_current_bag(tmp_path / name, arm, rec, nothing_held())
    common = ["identify-links", str(bags["ident"]), "--urdf", bundled_urdf_path(),
              "--held-out", str(bags["other"]), "--smooth-coulomb",
              "--velocity-threshold", "0.02", "--direction-memory", "on", "--presliding", "0.006",
              "--prior-weight", "1e-6"]
    auto = tmp_path / "auto.yaml"
    assert main([*common, "--gain-std", "auto", "--output", str(auto)]) == 0
    doc = yaml.safe_load(auto.read_text())
    choice = doc["choices"]["drive_gains"]
    assert choice["source"] == "held-out recordings"
    assert [row["gain_std"] for row in choice["candidates"]] == [0.0, *GAIN_STDS]
    best = min(choice["candidates"], key=lambda row: row["score"])
    assert doc["gain_std"] == best["gain_std"] > 0  # the 2.9 % shoulder gain shows
    assert doc["gain_anchor"] == "geometric mean of the nominal gains"
    scale = np.array(list(doc["effort_scale"].values()))
    assert np.exp(np.mean(np.log(scale))) == pytest.approx(1.0, abs=1e-6)
    truth = arm.gain_error
    assert abs(scale[1] / scale[2] - truth[1] / truth[2]) < abs(1.0 - truth[1] / truth[2])
    loaded = LinkTorqueModel.from_file(auto)
    assert np.allclose(loaded.effort_scale, scale)

    nominal = tmp_path / "nominal.yaml"
    assert main([*common, "--gain-std", "0", "--output", str(nominal)]) == 0
    doc = yaml.safe_load(nominal.read_text())
    assert doc["gain_std"] == 0.0 and doc["choices"]["drive_gains"]["source"] == "option"
    assert doc["gain_anchor"] == "nominal gains, not refined"
    assert np.allclose(list(doc["effort_scale"].values()), 1.0)


def test_identify_payload_fits_the_gain_ratios_on_the_pair(arm: MotorCurrentArm,
                                                           tmp_path: Path) -> None:
    """A loaded/unloaded pair (2 kg) with the published gains (up to 3.9 % off): the fitted
    gains are chosen on held-out blocks of the pair, the scale / true of the first five joints
    within 1.5 % of each other (published: 7.2 % apart; measured 1.3 %), the last wrist
    joint's, which the payload's small offset from its axis hardly loads, within 6 % (4 %),
    the geometric mean held at the model's, the mass within 2 % (-1.46 %; the published
    gains gave +0.95 % here, their errors offsetting); with the elbow's true gain given, that
    scale is kept and the first five within 1.5 % of the truth."""
    from inertial_id.core.parameters import BodyParameters

    payload = BodyParameters.from_mass_com_inertia(2.0, [0.02, -0.01, 0.08],
                                                   np.diag([0.01, 0.012, 0.008]))
    traj = trajectory(arm.home, seed=8)
    bags = {}
    for name, held in (("loaded", payload), ("unloaded", nothing_held())):
        rec = arm.record(traj, 16.0, held, seed=1 if name == "loaded" else 2)
        bags[name] = write_current_bag(tmp_path / name, arm, rec, held)
    truth = arm.gain_error
    assert truth.max() / truth.min() > 1.07

    def run(*extra: str) -> dict:
        out = tmp_path / "payload.yaml"
        assert main(["identify-payload", str(bags["loaded"]), "--unloaded",
                     str(bags["unloaded"]), "--urdf", bundled_urdf_path(),
                     "--payload-frame", arm.sensor_frame, "--output", str(out),
                     *extra]) == 0
        return yaml.safe_load(out.read_text())

    doc = run()
    gains = doc["unloaded"]["gains"]
    assert gains["mode"] == "auto"
    best = min(gains["candidates"], key=lambda row: row["score"])
    assert best["gains"] == "fitted"
    ratio = np.array(list(gains["effort_scale"].values())) / truth
    assert ratio[:5].max() / ratio[:5].min() < 1.015
    assert ratio[5] == pytest.approx(np.mean(ratio[:5]), rel=0.06)
    assert np.exp(np.mean(np.log(list(gains["effort_scale"].values())))) == pytest.approx(
        1.0, abs=1e-6)
    model = run("--pair-gains", "model")
    assert np.allclose(list(model["unloaded"]["gains"]["effort_scale"].values()), 1.0)
    # The common scale stays the published gains' (geometric mean 0.8 % off the truth's).
    assert doc["estimate"]["mass"] == pytest.approx(2.0, rel=0.02)

    known = run("--drive-gain", f"elbow_joint={float(1.0 / truth[2])!r}")
    scale = np.array(list(known["unloaded"]["gains"]["effort_scale"].values()))
    assert scale[2] == pytest.approx(truth[2], rel=1e-12)
    assert scale[:5] == pytest.approx(truth[:5], rel=0.015)


def test_efforts_in_driver_units_get_their_scales_fitted(arm: MotorCurrentArm) -> None:
    """Efforts in another unit on some joints (x0.05, a reversed sign, x40) cannot be
    explained by the nominal scale 1: the CAD fit then fits every joint's scale by default
    (the efforts are not N m), and identify_links gives what it gives with fit_gains; in N m
    it fits none."""
    from inertial_id.core.joint_torque.link_gains import scales_to_fit
    from inertial_id.core.joint_torque.link_selection import LinkOptions, identify_links

    q, qd, qdd, effort = _states(arm, 31, 20.0)
    units = np.array([1.0, 0.05, -1.0, 40.0, 1.0, 1.0])  # 3 of 6 joints
    problem = _problem(arm, 31, 20.0)
    fit, table = scales_to_fit(problem, fit_gains=False)
    assert not fit.any() and [row["joint"] for row in table] == problem.model.joint_names
    driver = LinkIdentification(problem.model, q, qd, qdd, effort * units,
                                problem.friction_model)
    fit, table = scales_to_fit(driver, fit_gains=False)
    assert fit.all()
    np.testing.assert_array_equal([row["unexplained"] for row in table], units != 1.0)
    for row, unit, gain in zip(table, units, arm.gain_error, strict=True):
        if unit != 1.0:
            assert row["scale_fitted"] == pytest.approx(unit * gain, rel=0.05)
    options = LinkOptions(method="wls", friction=problem.friction_model, units_from_data=True)
    _, _, chosen = identify_links(problem.model, (q, qd, qdd, effort * units), options)
    _, _, given = identify_links(problem.model, (q, qd, qdd, effort * units),
                                 replace(options, fit_gains=True))
    np.testing.assert_allclose(chosen.effort_scale, given.effort_scale, rtol=1e-9)
    assert chosen.info["selection"]["effort_unit"] == table
