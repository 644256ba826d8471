"""Tests of the real-robot TIAGo check: bench/tiago_bag.py, tiago_params.yaml, tiago_payload.py.

The recording lives outside the repository (``../shared/data/tiago``); tests that need it are
skipped when it is absent. The tests marked ``PACKAGE BUG`` at the end use synthetic data and
fail until the package is fixed (see their docstrings for the fix).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from rosbags.highlevel import AnyReader

from bench import tiago_bag, tiago_payload
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.kinematics import load_urdf_model
from inertial_id.core.regressor import predicted_wrench
from inertial_id.io.bags import (
    JOINT_STATE,
    TYPESTORE,
    BagReader,
    joint_state_message,
    write_bag,
)
from inertial_id.params.settings import gatherer_settings, kinematics_settings
from inertial_id.tools.replay import ReplayOptions, load_params, replay

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

PARAMS = BENCH_DIR / "tiago_params.yaml"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    data = tiago_bag.DEFAULT_DATA_DIR
    if not (data / tiago_bag.RUN / "tiago_wrist_ft.csv").is_file():
        pytest.skip("TIAGo data set not found next to the repository (../shared/data/tiago)")
    return data


@pytest.fixture(scope="module")
def urdf(data_dir: Path) -> str:
    return (data_dir / tiago_bag.URDF_NAME).read_text()


@pytest.fixture(scope="module")
def params() -> dict:
    return load_params(PARAMS)


def _kinematics(params: dict) -> dict:
    return {k: v for k, v in params["kinematics"].items()
            if k not in ("urdf_path", "robot_description")}


# --- bag converter --------------------------------------------------------------------------


@pytest.mark.parametrize("storage", ["mcap", "db3"])
def test_bag_has_the_topics_counts_and_values(data_dir: Path, tmp_path: Path,
                                              storage: str) -> None:
    bag = tmp_path / "tiago"
    assert tiago_bag.main(["--output", str(bag), "--storage", storage, "--seconds", "5",
                           "--data", str(data_dir)]) == 0
    recording = tiago_bag.load_recording(data_dir, seconds=5.0)
    n = len(recording)
    assert 490 <= n <= 510  # ~100 Hz
    with AnyReader([bag], default_typestore=TYPESTORE) as reader:
        counts = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        assert counts == {"/joint_states": ("sensor_msgs/msg/JointState", n),
                          "/wrist_ft": ("geometry_msgs/msg/WrenchStamped", n),
                          "/robot_description": ("std_msgs/msg/String", 1)}
        joints, wrenches = [], []
        for connection, log_time, raw in reader.messages():
            msg = reader.deserialize(raw, connection.msgtype)
            if connection.topic == "/robot_description":
                assert msg.data == recording.urdf
                continue
            stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            assert abs(log_time * 1e-9 - stamp) < 1e-6
            if connection.topic == "/joint_states":
                assert list(msg.name) == list(tiago_bag.JOINT_NAMES)
                assert len(msg.velocity) == 0 and len(msg.effort) == 0
                joints.append((stamp, np.array(msg.position)))
            else:
                assert msg.header.frame_id == "wrist_ft_link"
                f, t = msg.wrench.force, msg.wrench.torque
                wrenches.append((stamp, [f.x, f.y, f.z, t.x, t.y, t.z]))
    stamps = np.array([s for s, _ in joints])
    np.testing.assert_allclose(stamps - tiago_bag.EPOCH, recording.t, atol=1e-6)
    np.testing.assert_allclose([s for s, _ in wrenches], stamps, atol=1e-9)
    np.testing.assert_array_equal(np.array([q for _, q in joints]), recording.position)
    np.testing.assert_array_equal(np.array([w for _, w in wrenches]), recording.wrench)
    # The pipeline's own reader finds the topics by type and the URDF by name.
    with BagReader(bag) as reader:
        assert reader.topics.joint_states == "/joint_states"
        assert reader.topics.wrench == "/wrist_ft"
        assert reader.robot_description() == recording.urdf


def test_converter_refuses_an_existing_output(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "bag").mkdir()
    assert tiago_bag.main(["--output", str(tmp_path / "bag"), "--seconds", "1",
                           "--data", str(data_dir)]) == 1


# --- URDF and parameters --------------------------------------------------------------------


def test_urdf_loads_and_the_params_lock_everything_but_torso_and_arm(urdf: str,
                                                                     params: dict) -> None:
    full = load_urdf_model(urdf)
    assert full.nq == 68 and full.nv == 58
    wheel = full.joints[full.getJointId("wheel_left_joint")]
    assert (wheel.nq, wheel.nv) == (2, 1)  # continuous: cos/sin
    movable = list(full.names)[1:]
    expected = [n for n in movable if n not in tiago_bag.JOINT_NAMES]
    assert params["gatherer"]["locked_joint_names"] == expected
    assert params["kinematics"]["locked_joint_names"] == expected
    assert len(params["kinematics"]["locked_joint_positions"]) == len(expected) == 50
    assert all(isinstance(v, float) for v in params["kinematics"]["locked_joint_positions"])
    for name, value in zip(expected, params["kinematics"]["locked_joint_positions"],
                           strict=True):
        joint = full.joints[full.getJointId(name)]
        if joint.nq == 1:  # inside the limits
            assert full.lowerPositionLimit[joint.idx_q] <= value
            assert value <= full.upperPositionLimit[joint.idx_q]

    kin = kinematics_settings(_kinematics(params)).model(urdf)
    assert kin.sensor_frame == "wrist_ft_link"
    assert kin.joint_names == list(tiago_bag.JOINT_NAMES)
    assert kin.model.nq == kin.nv == 8
    gatherer = {k: v for k, v in params["gatherer"].items()
                if k not in ("queue_depth", "publish_rate")}
    assert Gathering(urdf, gatherer_settings(gatherer)).joint_names == kin.joint_names

    # The reduced model puts the sensor where the full model does: 53.85 mm past arm_7_joint
    # along its axis, same axes.
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, 8)
    q[0] = 0.2
    data = full.createData()
    q_full = pin.neutral(full)
    for name, value in zip(tiago_bag.JOINT_NAMES, q, strict=True):
        q_full[full.joints[full.getJointId(name)].idx_q] = value
    pin.framesForwardKinematics(full, data, q_full)
    expected_pose = data.oMf[full.getFrameId("wrist_ft_link")]
    pose = kin.sensor_pose(q)
    np.testing.assert_allclose(pose.homogeneous, expected_pose.homogeneous, atol=1e-12)
    wrist = data.oMi[full.getJointId("arm_7_joint")]
    local = wrist.actInv(expected_pose)
    np.testing.assert_allclose(local.translation, [0.0, 0.0, 0.05385], atol=1e-9)
    np.testing.assert_allclose(local.rotation, np.eye(3), atol=1e-9)


def test_urdf_mass_below_the_sensor(urdf: str) -> None:
    below = tiago_payload.urdf_below(urdf, "wrist_ft_link")
    assert below["links"] == 41
    assert below["mass"] == pytest.approx(1.0322, abs=1e-4)  # the README's 1.03 kg hand
    assert below["mass_with_sensor_link"] == pytest.approx(1.1322, abs=1e-4)
    assert 0.08 < below["com"][2] < 0.11  # the hand extends along +z of wrist_ft_link


# --- replay ---------------------------------------------------------------------------------


def test_replay_of_the_first_20_s_is_consistent(data_dir: Path, tmp_path: Path) -> None:
    bag = tmp_path / "tiago20"
    tiago_bag.convert(bag, data_dir, seconds=20.0)
    result = replay(ReplayOptions(bag, params=PARAMS, wrench_topic="/wrist_ft",
                                  progress=False))
    e = result.estimate
    assert e is not None and e.physically_consistent
    assert result.frame == "wrist_ft_link"
    assert 1.15 < e.body.mass < 1.40  # the full run gives 1.268 kg
    assert 0.08 < e.body.com[2] < 0.13
    assert result.contacts == []
    assert result.dropped == {}
    assert abs(e.offset[2] + 68.2) < 1.5  # the F/T is not bias compensated


# --- static cross-check ---------------------------------------------------------------------


def test_gravity_fit_recovers_mass_first_moment_and_bias() -> None:
    """Synthetic static wrenches in the package's convention (payload on sensor)."""
    rng = np.random.default_rng(3)
    m, c = 1.3, np.array([0.01, -0.02, 0.1])
    bias = np.array([4.0, 5.0, -68.0, 0.05, -0.01, 0.6])
    g = np.array([0.0, 0.0, -9.81])
    rotations = [pin.exp3(rng.normal(size=3)) for _ in range(6)]
    u = np.array([r.T @ -g for r in rotations])  # accelerometer reading at rest
    weight = np.array([m * r.T @ g for r in rotations])  # what the payload pulls with
    w = np.column_stack((weight, np.cross(c, weight))) + bias
    fit = tiago_payload.gravity_fit(u, w)
    assert fit["mass"] == pytest.approx(m, rel=1e-9)
    np.testing.assert_allclose(fit["com"], c, atol=1e-9)
    np.testing.assert_allclose(fit["wrench_offset"], bias, atol=1e-9)
    assert fit["torque_rank"] == 6
    # Two poses leave the first moment along u1 - u2 free.
    fit2 = tiago_payload.gravity_fit(u[:2], w[:2])
    assert fit2["torque_rank"] == 5 and fit2["mass"] == pytest.approx(m, rel=1e-9)
    free = np.asarray(fit2["unobservable_com_direction"])
    d = (u[0] - u[1]) / np.linalg.norm(u[0] - u[1])
    assert abs(abs(free @ d) - 1.0) < 1e-9
    # Same as the package's regressor at rest: w = -Y pi + offset with a_g = [u; 0].
    pi = np.concatenate(([m], m * c, np.zeros(6)))
    predicted = predicted_wrench(pi, np.zeros((6, 6)), np.column_stack((u, np.zeros((6, 3)))),
                                 bias)
    np.testing.assert_allclose(predicted, w, atol=1e-9)


def test_rest_phases() -> None:
    t = np.arange(0.0, 5.0, 0.01)
    v = np.zeros((t.size, 8))
    v[(t > 1.0) & (t < 3.0), 2] = 0.3
    v[(t > 4.2), 1] = 0.3
    phases = tiago_payload.rest_phases(t, v, 0.01, 0.5)
    assert [(round(t[a], 2), round(t[b - 1], 2)) for a, b in phases] == [(0.0, 1.0),
                                                                         (3.0, 4.2)]


# --- PACKAGE BUG regressions (synthetic; fail until inertial_id/io/bags.py is fixed) -----------


def test_package_bug_joint_state_message_accepts_non_contiguous_arrays(tmp_path: Path) -> None:
    """PACKAGE BUG: ``bags.joint_state_message`` keeps a non-contiguous view
    (``np.asarray``), and rosbags' CDR serialiser then fails with "To change to a dtype of
    a different size, the last axis must be contiguous". A row of ``table[:, columns]`` (how
    CSV columns are usually picked) is such a view. Fix (inertial_id/io/bags.py,
    joint_state_message): ``np.ascontiguousarray(position, dtype=float)`` and the same for
    ``velocity``."""
    table = np.arange(40.0).reshape(5, 8)[:, [0, 2, 4]]  # Fortran-ordered columns
    row = table[1]
    assert not row.flags["C_CONTIGUOUS"]
    msg = joint_state_message(1.0, ["a", "b", "c"], row, np.zeros(0))
    write_bag(tmp_path / "bag", [("/joint_states", JOINT_STATE, 1.0, msg)])
    with AnyReader([tmp_path / "bag"], default_typestore=TYPESTORE) as reader:
        (connection, _, raw), = list(reader.messages())
        np.testing.assert_array_equal(reader.deserialize(raw, connection.msgtype).position,
                                      row)


def test_package_bug_header_nanoseconds_stay_below_one_second() -> None:
    """PACKAGE BUG: ``bags._header`` rounds the fraction of a second to nanoseconds without
    carrying: a stamp within 0.5 ns below a whole second gets ``nanosec == 1_000_000_000``,
    an invalid ``builtin_interfaces/Time``. Fix (inertial_id/io/bags.py, _header): after
    rounding, ``if nanosec == 1_000_000_000: sec, nanosec = sec + 1, 0``."""
    msg = joint_state_message(1.9999999999, ["a"], np.zeros(1), np.zeros(0))
    assert msg.header.stamp.nanosec < 1_000_000_000
    assert msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec == pytest.approx(2.0)
