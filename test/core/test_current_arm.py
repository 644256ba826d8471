"""The simulated motor-current arm (inertial_id.core.joint_torque.current_arm): its efforts by hand,
its bags, and a loaded/unloaded pair through identify-payload."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from inertial_id.core.joint_torque.current_arm import (
    MotorCurrentArm,
    nothing_held,
    perturbed_urdf,
    random_pushes,
    trajectory,
)
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.link_selection import coulomb_candidates, refine_friction
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.simulation import FourierTrajectory, bundled_urdf_path
from inertial_id.io.joint_records import read_joint_bag
from inertial_id.tools.cli import main
from inertial_id.tools.synthetic import write_current_bag


@pytest.fixture(scope="module")
def arm() -> MotorCurrentArm:
    return MotorCurrentArm.random(bundled_urdf_path(), seed=4)


def test_static_efforts_by_hand(arm: MotorCurrentArm) -> None:
    """At rest after moving up, the published effort is gain x (RNEA gravity + the held share
    of Coulomb friction) + the current offset, to the current step."""
    quiet = replace(arm, current_noise=np.zeros(6))
    still = FourierTrajectory(np.asarray(arm.home), np.zeros((6, 1)), np.zeros((6, 1)), 8.0)
    rec = quiet.record(still, 0.2, nothing_held())
    kin = SensorKinematics(arm.truth_urdf, arm.sensor_frame)
    model = kin.model.copy()
    model.gravity.linear = kin.gravity
    gravity = pin.rnea(model, model.createData(), kin.configuration(np.array([arm.home]))[0],
                       np.zeros(6), np.zeros(6))
    expected = arm.gain_error * gravity + arm.drive_gain * arm.current_offset
    assert np.abs(rec["effort"][-1] - expected).max() <= 0.5e-3 * arm.drive_gain.max() + 1e-12
    # Moving up then holding: 95 % of the Coulomb torque stays, in the direction of motion.
    qd = np.vstack([np.full((200, 6), 0.3), np.zeros((50, 6))])
    friction = arm.friction(qd, 0.008)
    np.testing.assert_allclose(friction[-1], arm.hold * arm.coulomb, rtol=1e-6)
    np.testing.assert_allclose(friction[100], arm.coulomb * np.tanh(0.3 / arm.velocity_scale)
                               + arm.viscous * 0.3, rtol=1e-6)


def test_truth_differs_from_cad_and_gains_are_off(arm: MotorCurrentArm) -> None:
    cad, truth = LinkModel(bundled_urdf_path()), LinkModel(arm.truth_urdf)
    masses = truth.cad[:, 0] / cad.cad[:, 0]
    assert np.all(np.abs(masses - 1) < 0.11) and np.any(np.abs(masses - 1) > 0.02)
    assert np.all(np.abs(arm.gain_error - 1) <= 0.04) and np.any(arm.gain_error != 1)
    assert perturbed_urdf(bundled_urdf_path(), 4) == arm.truth_urdf  # seeded


def test_hold_starts_at_a_reversal_and_pushes_fill_a_third() -> None:
    traj = trajectory((0.0, -1.2, 1.5, -1.2, -1.4, 0.0), seed=3, holds=((4, 5.0, 9.0),))
    joint, start, stop = traj.holds[0]
    assert joint == 4 and start >= 5.0 and stop - start == pytest.approx(4.0)
    _, qd, _ = traj(np.array([start - 0.02, start + 1.0, stop + 0.02]))
    assert abs(qd[0, 4]) < 0.05 and qd[1, 4] == 0 and abs(qd[2, 4]) < 0.05
    assert np.count_nonzero(qd[1, [0, 1, 2, 3, 5]]) == 5  # the others move on
    pushes = random_pushes(60.0, seed=2)
    share = sum(p.duration for p in pushes) / 60.0
    assert 0.15 < share < 0.45
    assert all(0.5 <= p.duration <= 2.0 for p in pushes)


def test_bag_and_paired_payload(arm: MotorCurrentArm, tmp_path: Path) -> None:
    """A short loaded/unloaded pair at 125 Hz through identify-payload --unloaded with the
    CAD URDF alone: the mass within 3 % (the gains are up to 4 % off)."""
    payload = BodyParameters.from_mass_com_inertia(2.0, [0.02, -0.01, 0.08],
                                                   np.diag([0.01, 0.012, 0.008]))
    traj = trajectory(arm.home, seed=8)
    bags = {}
    for name, held in (("loaded", payload), ("unloaded", nothing_held())):
        rec = arm.record(traj, 12.0, held, seed=1 if name == "loaded" else 2)
        bags[name] = write_current_bag(tmp_path / name, arm, rec, held)
    truth = yaml.safe_load((bags["loaded"] / "ground_truth.yaml").read_text())
    assert truth["payload"]["mass"] == pytest.approx(2.0)
    position, effort = read_joint_bag(bags["loaded"])
    assert position.t.size == 1500 and effort.values.shape == (1500, 6)  # 12 s at 125 Hz
    assert np.median(np.diff(position.t)) == pytest.approx(0.008, abs=1e-6)
    out = tmp_path / "payload.yaml"
    assert main(["identify-payload", str(bags["loaded"]), "--unloaded", str(bags["unloaded"]),
                 "--urdf", bundled_urdf_path(), "--payload-frame", arm.sensor_frame,
                 "--output", str(out)]) == 0
    mass = yaml.safe_load(out.read_text())["estimate"]["mass"]
    assert mass == pytest.approx(2.0, rel=0.03)


def test_velocity_scale_chosen_and_narrowed(arm: MotorCurrentArm) -> None:
    """On the arm's own efforts, the cross-validation prefers tanh near the arm's v0 to the
    dead band, and narrowing it does not make the score worse."""
    from inertial_id.core.joint_torque.link_selection import choose_friction
    from inertial_id.core.joint_torque.links import LinkIdentification

    traj = trajectory(arm.home, seed=5, holds=((4, 4.0, 7.0),))
    rec = arm.record(traj, 14.0, nothing_held(), seed=3)
    model = LinkModel(bundled_urdf_path())
    q, qd, qdd = traj(rec["t"])
    base = FrictionModel("symmetric", velocity_threshold=2e-3, sample_period=0.008)
    problem = LinkIdentification(model, q, qd, qdd, rec["effort"], base)
    candidates = coulomb_candidates(base, scales=(0.005, 0.02, 0.08), presliding=None)
    best, table = choose_friction(problem, candidates, folds=3, guard=15)
    assert best.smooth
    narrowed, longer = refine_friction(problem, best, table, folds=3, guard=15)
    assert len(longer) > len(table)
    assert min(r["score"] for r in longer) <= min(r["score"] for r in table)
    assert narrowed.velocity_threshold == pytest.approx(
        [r for r in longer if r["score"] == min(x["score"] for x in longer)][0][
            "velocity_threshold"])


def test_held_out_recording_chooses_the_memory_x0(arm: MotorCurrentArm) -> None:
    """Time blocks of a periodic identification trajectory repeat each other, so the memory's
    x0 hardly changes their score; another recording of the arm tells it: with it as held
    out, x0 is narrowed to within a factor 10^(1/4) of the arm's own and the fit predicts a
    third trajectory better than with the in-record choice."""
    from inertial_id.core.joint_torque.link_selection import choose_friction
    from inertial_id.core.joint_torque.links import LinkIdentification

    truth = replace(arm, presliding=0.006, velocity_scale=0.02)
    model = LinkModel(bundled_urdf_path())
    period = 1.0 / 125.0
    base = FrictionModel("symmetric", smooth=True, velocity_threshold=0.02,
                         sample_period=period)

    def problem(seed: int, duration: float) -> LinkIdentification:
        traj = trajectory(truth.home, seed=seed, holds=((4, 3.0, 6.0),))
        rec = truth.record(traj, duration, nothing_held(), seed=seed)
        q, qd, qdd = traj(rec["t"])
        return LinkIdentification(model, q, qd, qdd, rec["effort"], base)

    ident, other, valid = problem(21, 24.0), problem(22, 12.0), problem(23, 12.0)
    candidates = (base.with_presliding(1e-3), base.with_presliding(1e-2))
    scores = {}
    for label, others in (("blocks", ()), ("held out", (other,))):
        best, table = choose_friction(ident, candidates, folds=3, guard=15, others=others)
        chosen, _ = refine_friction(ident, best, table, folds=3, guard=15, others=others,
                                    presliding=bool(others))
        fit = ident.with_friction(chosen).weighted_least_squares()
        scores[label] = (chosen.presliding,
                         float(np.mean(valid.with_friction(chosen).rms(fit) ** 2)))
    x0, error = scores["held out"]
    assert 0.006 / 10 ** 0.25 <= x0 <= 0.006 * 10 ** 0.25
    assert error < scores["blocks"][1]
