"""Exciting trajectories: feasibility by construction, optimisation against a random
trajectory, CSV/YAML files and the excite command (core/joint_torque/excitation.py,
excite_tool.py)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import yaml

from inertial_id.core.joint_torque.excitation import (
    FourierSpace,
    JointLimits,
    excite_links,
    excite_payload,
    load_trajectory_yaml,
    payload_criterion,
    scaled_condition,
    write_trajectory_csv,
    write_trajectory_yaml,
)
from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path
from inertial_id.io.joint_records import read_joint_csv
from inertial_id.tools.excite_tool import add_excite_parser, run_excite


@pytest.fixture(scope="module")
def kinematics() -> SensorKinematics:
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


@pytest.fixture(scope="module")
def payload_result(kinematics):
    return excite_payload(kinematics, period=8.0, harmonics=3, budget=250, samples=60)


def test_fourier_space_is_feasible_and_starts_at_rest(kinematics):
    limits = JointLimits.from_model(kinematics.model)
    space = FourierSpace(limits, period=6.0, harmonics=5)
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 6.0, 4001)
    for _ in range(20):
        x = space.random(rng) * rng.uniform(0.2, 3.0)
        x[:space.n] = rng.uniform(0, 1, space.n)
        traj = space.trajectory(np.clip(x, -1, 1))
        q, qd, qdd = traj(t)
        assert np.all(q >= limits.lower - 1e-9) and np.all(q <= limits.upper + 1e-9)
        assert np.all(np.abs(qd) <= limits.velocity * (1 + 1e-6))
        np.testing.assert_allclose(qd[0], 0.0, atol=1e-9)
        np.testing.assert_allclose(qdd[0], 0.0, atol=1e-9)
        np.testing.assert_allclose(q[0], q[-1], atol=1e-9)  # periodic: loops smoothly


def test_scaled_condition_number():
    assert scaled_condition(np.diag([1.0, 1e-6])) == pytest.approx(1.0)
    assert scaled_condition(np.array([[1.0, 1.0], [1.0, 1.0]])) > 1e12
    assert scaled_condition(np.array([[1.0, 0.0], [1.0, 0.0]])) == np.inf


def test_payload_trajectory_beats_a_random_one(kinematics, payload_result):
    r = payload_result
    assert r.value < r.random_value
    assert r.evaluations <= 250
    limits = JointLimits.from_model(kinematics.model)
    q, qd, _ = r.trajectory(np.linspace(0.0, 8.0, 2000))
    assert np.all(q >= limits.lower) and np.all(q <= limits.upper)
    assert r.max_velocity_ratio <= 1.0
    assert r.max_effort_ratio <= 1.0
    # The criterion is what it says: recomputed on the same samples.
    t = np.linspace(0.0, 8.0, 60, endpoint=False)
    assert payload_criterion(kinematics)(*r.trajectory(t)) == pytest.approx(r.value)


def test_links_trajectory_beats_a_random_one():
    model = LinkModel(bundled_urdf_path())
    r = excite_links(model, period=8.0, harmonics=3, budget=200, samples=40)
    assert r.value < r.random_value
    assert r.criterion == "bonnet_mass_weighted_condition"
    assert np.isfinite(r.extra["condition_number"])


def test_trajectory_files_round_trip(payload_result, tmp_path):
    r = payload_result
    csv_path = write_trajectory_csv(tmp_path / "traj.csv", r.trajectory, r.joint_names,
                                    rate=50.0)
    table = read_joint_csv(csv_path)
    n = len(r.joint_names)
    assert table.names[:n] == r.joint_names and len(table.names) == 3 * n
    q, qd, qdd = r.trajectory(table.t)
    np.testing.assert_allclose(table.values, np.column_stack((q, qd, qdd)), atol=1e-7)
    yaml_path = write_trajectory_yaml(tmp_path / "traj.yaml", r)
    traj, names = load_trajectory_yaml(yaml_path)
    assert names == r.joint_names
    np.testing.assert_allclose(traj(table.t)[0], q, atol=1e-12)
    doc = yaml.safe_load(yaml_path.read_text())
    assert doc["criterion"]["optimised"] < doc["criterion"]["random"]


def test_excite_command_writes_csv_and_yaml(tmp_path):
    parser = argparse.ArgumentParser()
    add_excite_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["excite", "--duration", "6", "--harmonics", "2", "--budget",
                              "60", "--output", str(tmp_path / "exc.yaml")])
    assert run_excite(args) == 0
    assert (tmp_path / "exc.csv").is_file() and (tmp_path / "exc.yaml").is_file()
    traj, names = load_trajectory_yaml(tmp_path / "exc.yaml")
    assert len(names) == 6 and traj.period == 6.0
