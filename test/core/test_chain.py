"""The vectorised fixed-axis chain against pinocchio's per-sample loop."""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inertial_id.core.kinematics as kinematics
from inertial_id.core.chain import FixedAxisChain, unit_phasors
from inertial_id.core.kinematics import CHAIN_JACOBIANS_FROM, CHAIN_MOTION_FROM, SensorKinematics
from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path

TOLERANCE = 1e-10
ROUNDING = 1e-13  # a few units in the last place of the values here (|x| < 100)
LIMIT = '<limit lower="-3" upper="3" effort="10" velocity="5"/>'


def _joint(name, kind, parent, child, xyz, rpy, axis):
    return f"""
  <joint name="{name}" type="{kind}">
    <parent link="{parent}"/><child link="{child}"/>
    <origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>
    {LIMIT if kind != "continuous" else ""}
  </joint>
  <link name="{child}"/>"""


# base -> a (revolute, unaligned) -> b (prismatic, unaligned) -> c (continuous, unaligned)
#   -> d (continuous, -z) -> e (prismatic, y) -> f (revolute, x) -> sensor (fixed, rotated);
# a side branch off b: side (revolute, z) -> side_tip (prismatic, z), which does not support
# the sensor.
MIXED_URDF = f"""<?xml version="1.0"?>
<robot name="mixed">
  <link name="base"/>
  {_joint("a", "revolute", "base", "l_a", "0.1 0.2 0.3", "0.3 -0.2 0.5", "1 2 3")}
  {_joint("b", "prismatic", "l_a", "l_b", "0 0.4 -0.1", "-0.4 0.1 0.2", "0.3 -1 0.2")}
  {_joint("side", "revolute", "l_b", "l_side", "0.3 0 0", "0 0 0", "0 0 1")}
  {_joint("side_tip", "prismatic", "l_side", "l_side_tip", "0.1 0 0", "0 0 0", "0 0 1")}
  {_joint("c", "continuous", "l_b", "l_c", "0.2 0 0.1", "0.1 0.7 -0.3", "0 -1 1")}
  {_joint("d", "continuous", "l_c", "l_d", "0.2 0 0.1", "0 0 0", "0 0 -1")}
  {_joint("e", "prismatic", "l_d", "l_e", "0.05 0.1 0", "0.2 0 0", "0 1 0")}
  {_joint("f", "revolute", "l_e", "l_f", "0 0 0.15", "0 0.3 0", "1 0 0")}
  <joint name="sensor_joint" type="fixed">
    <parent link="l_f"/><child link="sensor"/><origin xyz="0.02 -0.03 0.07" rpy="0.5 0.2 -1"/>
  </joint>
  <link name="sensor"/>
</robot>
"""
MIXED_JOINT_TYPES = {
    "JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned",
    "JointModelRevoluteUnboundedUnaligned", "JointModelPY", "JointModelRX", "JointModelRZ",
    "JointModelPZ",
}


def random_states(seed, n, nv, spread=2.0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-spread, spread, (n, nv))
    qd = rng.uniform(-2.0, 2.0, (n, nv))
    qdd = rng.uniform(-5.0, 5.0, (n, nv))
    return q, qd, qdd


def assert_paths_agree(kin, q, qd, qdd):
    """The vectorised chain's results, and the public ones (either path, by the batch's
    size), equal pinocchio's per-sample loop."""
    assert kin.batched
    loop_twist, loop_proper = kin._compute_loop(q, qd, qdd)
    loop_jacobians = kin._jacobians_loop(q)
    for twist, proper in (kin._chain.motion(q, qd, qdd, kin.gravity), kin.compute(q, qd, qdd)):
        assert twist.shape == proper.shape == (len(q), 6)
        np.testing.assert_allclose(twist, loop_twist, rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(proper, loop_proper, rtol=0, atol=TOLERANCE)
    for jacobians in (kin._chain.jacobians(q), kin.jacobians(q)):
        assert jacobians.shape == (len(q), 6, kin.nv)
        np.testing.assert_allclose(jacobians, loop_jacobians, rtol=0, atol=TOLERANCE)


@pytest.fixture(scope="module")
def arm():
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


@pytest.fixture(scope="module")
def mixed():
    return SensorKinematics(MIXED_URDF, "sensor")


def test_the_mixed_urdf_has_the_joint_types_it_is_meant_to_test(mixed):
    assert {j.shortname() for j in mixed.model.joints[1:]} == MIXED_JOINT_TYPES
    assert sorted(mixed.joint_names) == ["a", "b", "c", "d", "e", "f", "side", "side_tip"]


@pytest.mark.parametrize("seed", range(3))
def test_bundled_arm_batched_equals_loop(arm, seed):
    assert_paths_agree(arm, *random_states(seed, 50, arm.nv))


@pytest.mark.parametrize("n", [1, 3, CHAIN_MOTION_FROM - 1, CHAIN_MOTION_FROM,
                               CHAIN_JACOBIANS_FROM - 1, CHAIN_JACOBIANS_FROM])
def test_both_paths_agree_at_every_batch_size(arm, n):
    # The public calls take pinocchio's loop for a few samples and the chain for many.
    assert_paths_agree(arm, *random_states(n, n, arm.nv))


@pytest.mark.parametrize("seed", range(3))
def test_mixed_chain_batched_equals_loop(mixed, seed):
    # Wide angles: continuous joints turn many times; prismatic joints travel metres.
    assert_paths_agree(mixed, *random_states(seed, 50, mixed.nv, spread=8.0))


@pytest.mark.parametrize("frame", ["l_a", "l_c", "l_e", "l_side_tip", "base"])
def test_other_frames_of_the_mixed_urdf(frame):
    kin = SensorKinematics(MIXED_URDF, frame)
    assert_paths_agree(kin, *random_states(4, 50, kin.nv))


def test_joints_off_the_sensor_branch_have_no_effect(mixed):
    q, qd, qdd = random_states(5, 50, mixed.nv)
    moved = [x.copy() for x in (q, qd, qdd)]
    off_branch = [mixed.joint_names.index("side"), mixed.joint_names.index("side_tip")]
    for x in moved:
        x[:, off_branch] += 1.5
    for a, b in zip(mixed.compute(q, qd, qdd), mixed.compute(*moved), strict=True):
        np.testing.assert_array_equal(a, b)
    jacobians = mixed.jacobians(q)
    np.testing.assert_array_equal(jacobians[:, :, off_branch], 0.0)
    np.testing.assert_array_equal(jacobians, mixed.jacobians(moved[0]))


def test_special_angles(mixed):
    # pi (tan of the half angle is ~1e16 there), multiples of pi/2, zero and many turns.
    angles = np.array([np.pi, -np.pi, np.pi / 2, -np.pi / 2, 0.0, 3 * np.pi, 100.0, -1e3])
    q = np.tile(angles[:, None], (1, mixed.nv))
    qd = np.full_like(q, 0.7)
    qdd = np.full_like(q, -1.1)
    assert_paths_agree(mixed, q, qd, qdd)
    phasors = unit_phasors(angles)
    np.testing.assert_allclose(phasors.real, np.cos(angles), rtol=0, atol=1e-15)
    np.testing.assert_allclose(phasors.imag, np.sin(angles), rtol=0, atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-20.0, 20.0), min_size=24, max_size=24),
    st.integers(0, 2**32 - 1),
)
def test_random_states_batched_equals_loop(values, seed):
    kin = SensorKinematics(MIXED_URDF, "sensor")
    q, qd, qdd = np.array(values).reshape(3, 1, 8)
    rest = random_states(seed, 4, kin.nv)
    assert_paths_agree(kin, *(np.vstack((x, y)) for x, y in zip((q, qd, qdd), rest,
                                                                 strict=True)))


def test_gravity_and_locked_joints():
    gravity = np.array([0.3, -1.2, -9.7])
    kin = SensorKinematics(MIXED_URDF, "sensor", gravity=gravity,
                           locked_joints={"c": 0.4, "e": -0.1, "side": 1.0})
    assert sorted(kin.joint_names) == ["a", "b", "d", "f", "side_tip"]
    assert_paths_agree(kin, *random_states(6, 50, kin.nv))
    # At rest the proper acceleration is -R^T g.
    q = random_states(7, 5, kin.nv)[0]
    twist, proper = kin.compute(q, np.zeros_like(q), np.zeros_like(q))
    np.testing.assert_array_equal(twist, 0.0)
    for k in range(5):
        rotation = kin.sensor_pose(q[k]).rotation
        np.testing.assert_allclose(proper[k], np.r_[-rotation.T @ gravity, 0, 0, 0],
                                   rtol=0, atol=1e-12)


def test_single_sample_shapes(arm, mixed):
    for kin in (arm, mixed):
        q, qd, qdd = random_states(8, 3, kin.nv)
        twists, propers = kin.compute(q, qd, qdd)
        twist, proper = kin.compute(q[1], qd[1], qdd[1])
        assert twist.shape == proper.shape == (6,)
        np.testing.assert_array_equal(twist, twists[1])
        np.testing.assert_array_equal(proper, propers[1])
        assert kin.jacobians(q[1]).shape == (1, 6, kin.nv)
        empty = np.zeros((0, kin.nv))
        assert [x.shape for x in kin.compute(empty, empty, empty)] == [(0, 6), (0, 6)]
        assert kin.jacobians(empty).shape == (0, 6, kin.nv)


def test_a_sample_does_not_depend_on_its_batch(arm):
    # Streamed (online) and whole-recording (offline) runs cut the samples differently, and
    # the batch's size picks the path (loop or chain): the values agree to rounding.
    q, qd, qdd = random_states(9, 40, arm.nv)
    twist, proper = arm.compute(q, qd, qdd)
    jacobians = arm.jacobians(q)
    for size in (1, 3, 7, 16):
        for start in range(0, 40, size):
            part = slice(start, start + size)
            got_twist, got_proper = arm.compute(q[part], qd[part], qdd[part])
            np.testing.assert_allclose(got_twist, twist[part], rtol=0, atol=ROUNDING)
            np.testing.assert_allclose(got_proper, proper[part], rtol=0, atol=ROUNDING)
            np.testing.assert_allclose(arm.jacobians(q[part]), jacobians[part], rtol=0,
                                       atol=ROUNDING)


# ---------------------------------------------------------------------------------------------
# Joints without a fixed axis: pinocchio's loop


def test_free_flyer_and_spherical_joints_have_no_chain():
    model = pin.buildModelFromXML(MIXED_URDF, pin.JointModelFreeFlyer())
    assert FixedAxisChain.from_model(model, model.getFrameId("sensor")) is None
    assert FixedAxisChain.from_model(model, model.getFrameId("base")) is None

    # base -> ball (spherical) -> tip; base -> hinge (revolute z) -> arm.
    ball = pin.Model()
    ball_id = ball.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "ball")
    hinge_id = ball.addJoint(0, pin.JointModelRZ(), pin.SE3(np.eye(3), np.array([0.1, 0, 0])),
                             "hinge")
    for joint_id, name in ((ball_id, "tip"), (hinge_id, "arm")):
        ball.addFrame(pin.Frame(name, joint_id, pin.SE3(np.eye(3), np.array([0, 0, 0.2])),
                                pin.FrameType.OP_FRAME))
    assert FixedAxisChain.from_model(ball, ball.getFrameId("tip")) is None
    # The hinge's frame is not moved by the ball: it has a chain.
    chain = FixedAxisChain.from_model(ball, ball.getFrameId("arm"))
    assert chain is not None
    assert chain.columns.tolist() == [ball.joints[hinge_id].idx_v]


def _helical_model(on_the_sensor_branch):
    """base -> hinge (RZ) -> screw (helical); the sensor frame on the screw or on the hinge."""
    model = pin.Model()
    hinge = model.addJoint(0, pin.JointModelRZ(), pin.SE3.Identity(), "hinge")
    placement = pin.SE3(pin.rpy.rpyToMatrix(0.2, -0.3, 0.1), np.array([0.1, 0.2, 0.0]))
    screw = model.addJoint(hinge, pin.JointModelHelicalUnaligned(np.array([0.0, 0.6, 0.8]), 0.05),
                           placement, "screw")
    sensor_parent = screw if on_the_sensor_branch else hinge
    offset = pin.SE3(pin.rpy.rpyToMatrix(0.4, 0.0, -0.2), np.array([0.0, 0.05, 0.3]))
    model.addFrame(pin.Frame("sensor", sensor_parent, offset, pin.FrameType.OP_FRAME))
    return model


@pytest.mark.parametrize("on_the_sensor_branch", [True, False])
def test_helical_joint_uses_the_loop_only_on_the_sensor_branch(monkeypatch, on_the_sensor_branch):
    model = _helical_model(on_the_sensor_branch)
    monkeypatch.setattr(kinematics, "load_urdf_model", lambda urdf: model)
    kin = SensorKinematics("<robot/>", "sensor")
    assert kin.batched is not on_the_sensor_branch
    q, qd, qdd = random_states(10, 20, kin.nv)
    twist, proper = kin.compute(q, qd, qdd)
    jacobians = kin.jacobians(q)
    data = model.createData()
    fid = model.getFrameId("sensor")
    for k in range(20):
        pin.forwardKinematics(model, data, q[k], qd[k], qdd[k])
        rotation = pin.updateFramePlacement(model, data, fid).rotation
        np.testing.assert_allclose(twist[k], pin.getFrameVelocity(model, data, fid, pin.LOCAL)
                                   .vector, rtol=0, atol=TOLERANCE)
        expected = pin.getFrameAcceleration(model, data, fid, pin.LOCAL).vector
        expected[:3] -= rotation.T @ kin.gravity
        np.testing.assert_allclose(proper[k], expected, rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(
            jacobians[k], pin.computeFrameJacobian(model, data, q[k], fid, pin.LOCAL),
            rtol=0, atol=TOLERANCE,
        )
