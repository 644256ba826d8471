"""Sensor-frame twist and proper acceleration from a URDF."""

import numpy as np
import pinocchio as pin
import pytest

from inertial_id.core.errors import ModelError, SampleError
from inertial_id.core.kinematics import (
    DEFAULT_GRAVITY,
    JointMapper,
    SensorKinematics,
    load_urdf_model,
    movable_joint_names,
)
from inertial_id.core.simulation import BUNDLED_SENSOR_FRAME, bundled_urdf_path

G = 9.81
BUNDLED_JOINTS = [
    "shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
    "wrist_1_joint", "wrist_2_joint", "wrist_3_joint",
]


def one_joint_urdf(axis="0 0 1", r=0.3, joint_type="revolute"):
    """Base -> joint j1 at the base origin -> link arm -> sensor frame at (r, 0, 0) of arm."""
    limit = '<limit lower="-3" upper="3" effort="10" velocity="5"/>'
    return f"""<?xml version="1.0"?>
<robot name="one_joint">
  <link name="base"/>
  <joint name="j1" type="{joint_type}">
    <parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0"/><axis xyz="{axis}"/>
    {limit if joint_type != "continuous" else ""}
  </joint>
  <link name="arm">
    <inertial><mass value="1.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
  </link>
  <joint name="sensor_joint" type="fixed">
    <parent link="arm"/><child link="sensor"/><origin xyz="{r} 0 0"/>
  </joint>
  <link name="sensor"/>
</robot>
"""


@pytest.fixture(scope="module")
def arm():
    return SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME)


def random_states(rng, n, nv):
    q = rng.uniform(-2.0, 2.0, (n, nv))
    qd = rng.uniform(-2.0, 2.0, (n, nv))
    qdd = rng.uniform(-5.0, 5.0, (n, nv))
    return q, qd, qdd


# ---------------------------------------------------------------------------------------------
# Hand-derived cases


@pytest.mark.parametrize("joint_type", ["revolute", "continuous"])
@pytest.mark.parametrize("q", [0.0, 0.8, -2.1])
def test_vertical_axis_by_hand(joint_type, q):
    # Joint about the world z axis; the sensor sits at distance r along the link's x axis with
    # the link's axes. In sensor axes, for any q (gravity is along the joint axis):
    #   w = (0, 0, wd), v = w x (r, 0, 0) = (0, wd r, 0),
    #   spatial acceleration = d/dt of those body components = (0, alpha r, 0; 0, 0, alpha)
    #   (the centripetal -wd^2 r along x is NOT part of it: it is w x v, which the regressor
    #   adds back), and minus R^T g = -(0, 0, -9.81) gives +9.81 along z.
    r, wd, alpha = 0.3, 1.7, -2.3
    kin = SensorKinematics(one_joint_urdf(r=r, joint_type=joint_type), "sensor")
    assert kin.joint_names == ["j1"]
    twist, proper = kin.compute([q], [wd], [alpha])
    np.testing.assert_allclose(twist, [0, wd * r, 0, 0, 0, wd], atol=1e-12)
    np.testing.assert_allclose(proper, [0, alpha * r, G, 0, 0, alpha], atol=1e-12)
    # The joint angle itself (a continuous joint's cos/sin configuration) places the sensor.
    pose = kin.sensor_pose([q])
    np.testing.assert_allclose(pose.translation, [r * np.cos(q), r * np.sin(q), 0], atol=1e-12)
    np.testing.assert_allclose(pose.rotation[:, 0], [np.cos(q), np.sin(q), 0], atol=1e-12)


def test_horizontal_axis_at_a_quarter_turn_by_hand():
    # Joint about the world y axis, q = pi/2. The link rotation is Ry(pi/2), which maps
    #   x_link -> (cos q, 0, -sin q) = (0, 0, -1)  (the link hangs straight down),
    #   y_link -> (0, 1, 0), z_link -> (sin q, 0, cos q) = (1, 0, 0).
    # Gravity g = (0, 0, -9.81) in sensor axes is R^T g = (x.g, y.g, z.g) = (9.81, 0, 0), so the
    # proper acceleration carries -R^T g = (-9.81, 0, 0): an accelerometer at rest reads "up",
    # which is -x of the sensor here.
    # Motion: w = (0, wd, 0) (the axis is y in every frame of the chain); the sensor origin is
    # at (r, 0, 0) in the link, so v = w x (r, 0, 0) = (0, 0, -wd r) and the spatial
    # acceleration is (0, 0, -alpha r; 0, alpha, 0).
    r, wd, alpha = 0.25, 1.3, 0.9
    kin = SensorKinematics(one_joint_urdf(axis="0 1 0", r=r), "sensor")
    twist, proper = kin.compute([np.pi / 2], [wd], [alpha])
    np.testing.assert_allclose(twist, [0, 0, -wd * r, 0, wd, 0], atol=1e-12)
    np.testing.assert_allclose(proper, [-G, 0, -alpha * r, 0, alpha, 0], atol=1e-12)
    np.testing.assert_allclose(kin.sensor_pose([np.pi / 2]).translation, [0, 0, -r], atol=1e-12)


def test_prismatic_joint_by_hand():
    kin = SensorKinematics(one_joint_urdf(axis="0 0 1", joint_type="prismatic"), "sensor")
    twist, proper = kin.compute([0.2], [0.5], [-1.5])
    np.testing.assert_allclose(twist, [0, 0, 0.5, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(proper, [0, 0, -1.5 + G, 0, 0, 0], atol=1e-12)


def test_urdf_from_a_file(tmp_path):
    path = tmp_path / "one_joint.urdf"
    path.write_text(one_joint_urdf())
    from_file = SensorKinematics(str(path), "sensor")
    from_text = SensorKinematics(one_joint_urdf(), "sensor")
    args = ([0.3], [1.0], [2.0])
    for a, b in zip(from_file.compute(*args), from_text.compute(*args), strict=True):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# The bundled arm


def test_bundled_arm_joint_order(arm):
    assert arm.joint_names == BUNDLED_JOINTS
    assert arm.nv == 6
    assert movable_joint_names(load_urdf_model(bundled_urdf_path())) == BUNDLED_JOINTS
    np.testing.assert_array_equal(arm.gravity, DEFAULT_GRAVITY)


def test_spatial_versus_classical_acceleration(arm):
    model = pin.buildModelFromUrdf(bundled_urdf_path())
    data = model.createData()
    fid = model.getFrameId(BUNDLED_SENSOR_FRAME)
    rng = np.random.default_rng(0)
    q, qd, qdd = random_states(rng, 20, 6)
    twist, proper = arm.compute(q, qd, qdd)
    for k in range(20):
        pin.forwardKinematics(model, data, q[k], qd[k], qdd[k])
        pin.updateFramePlacements(model, data)
        classical = pin.getFrameClassicalAcceleration(model, data, fid, pin.LOCAL).linear
        rot = data.oMf[fid].rotation
        v_lin, w = twist[k, :3], twist[k, 3:]
        expected = proper[k, :3] + rot.T @ np.array(DEFAULT_GRAVITY) + np.cross(w, v_lin)
        np.testing.assert_allclose(classical, expected, atol=1e-10)
        # The pose used for gravity is the sensor's.
        np.testing.assert_allclose(arm.sensor_pose(q[k]).rotation, rot, atol=1e-12)


def _vee(skew_matrix):
    return np.array([skew_matrix[2, 1], skew_matrix[0, 2], skew_matrix[1, 0]])


def _derivative(f, t, h=1e-3):
    return (-f(t + 2 * h) + 8 * f(t + h) - 8 * f(t - h) + f(t - 2 * h)) / (12 * h)


@pytest.mark.parametrize("seed", range(3))
def test_twist_and_proper_acceleration_against_pose_differences(arm, seed):
    """Differentiate the sensor pose along q(t) = q0 + qd t + qdd t^2 / 2 numerically."""
    rng = np.random.default_rng(seed)
    q0, qd, qdd = (x[0] for x in random_states(rng, 1, 6))
    gravity = np.array(DEFAULT_GRAVITY)

    def pose(t):
        return arm.sensor_pose(q0 + qd * t + 0.5 * qdd * t * t)

    def body_twist(t):
        rot = pose(t).rotation
        v_lin = rot.T @ _derivative(lambda s: pose(s).translation, t)
        w = _vee(rot.T @ _derivative(lambda s: pose(s).rotation, t))
        return np.concatenate((v_lin, w))

    expected_twist = body_twist(0.0)
    expected_proper = _derivative(body_twist, 0.0)
    expected_proper[:3] -= pose(0.0).rotation.T @ gravity
    twist, proper = arm.compute(q0, qd, qdd)
    np.testing.assert_allclose(twist, expected_twist, atol=1e-8)
    np.testing.assert_allclose(proper, expected_proper, atol=1e-6)


def test_at_rest_proper_acceleration_is_minus_gravity_in_sensor_axes():
    gravity = np.array([1.0, -2.0, -9.0])
    kin = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME, gravity=gravity)
    rng = np.random.default_rng(5)
    q = rng.uniform(-2, 2, (5, 6))
    twist, proper = kin.compute(q, np.zeros_like(q), np.zeros_like(q))
    np.testing.assert_allclose(twist, 0.0, atol=1e-14)
    for k in range(5):
        rot = kin.sensor_pose(q[k]).rotation
        np.testing.assert_allclose(proper[k, :3], -rot.T @ gravity, atol=1e-12)
        np.testing.assert_allclose(proper[k, 3:], 0.0, atol=1e-14)


def test_batch_equals_single(arm):
    rng = np.random.default_rng(7)
    q, qd, qdd = random_states(rng, 6, 6)
    twists, propers = arm.compute(q, qd, qdd)
    assert twists.shape == propers.shape == (6, 6)
    for k in range(6):
        twist, proper = arm.compute(q[k], qd[k], qdd[k])
        assert twist.shape == proper.shape == (6,)
        np.testing.assert_array_equal(twist, twists[k])
        np.testing.assert_array_equal(proper, propers[k])


def test_compute_rejects_wrong_shapes(arm):
    with pytest.raises(SampleError):
        arm.compute(np.zeros(5), np.zeros(5), np.zeros(5))
    with pytest.raises(SampleError):
        arm.compute(np.zeros((2, 6)), np.zeros((3, 6)), np.zeros((2, 6)))


# ---------------------------------------------------------------------------------------------
# Locked joints


def test_locked_joints_equal_the_full_model_at_the_locked_positions(arm):
    locked = {"elbow_joint": 0.7, "wrist_3_joint": -0.4}
    reduced = SensorKinematics(bundled_urdf_path(), BUNDLED_SENSOR_FRAME, locked_joints=locked)
    free = [name for name in BUNDLED_JOINTS if name not in locked]
    assert reduced.joint_names == free
    assert reduced.nv == 4
    rng = np.random.default_rng(11)
    q, qd, qdd = random_states(rng, 4, 4)
    full = [np.zeros((4, 6)) for _ in range(3)]
    columns = [BUNDLED_JOINTS.index(name) for name in free]
    for full_array, small in zip(full, (q, qd, qdd), strict=True):
        full_array[:, columns] = small
    full[0][:, BUNDLED_JOINTS.index("elbow_joint")] = 0.7
    full[0][:, BUNDLED_JOINTS.index("wrist_3_joint")] = -0.4
    for got, expected in zip(reduced.compute(q, qd, qdd), arm.compute(*full), strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-12)


def test_unknown_locked_joint_is_a_model_error():
    with pytest.raises(ModelError, match="no_such_joint"):
        SensorKinematics(
            bundled_urdf_path(), BUNDLED_SENSOR_FRAME, locked_joints={"no_such_joint": 0.0}
        )


# ---------------------------------------------------------------------------------------------
# Errors


def test_missing_sensor_frame_lists_the_frames():
    with pytest.raises(ModelError) as info:
        SensorKinematics(bundled_urdf_path(), "no_such_frame")
    message = str(info.value)
    assert "no_such_frame" in message
    for frame in ("base_link", "tool0", "ft_sensor", "wrist_3_link"):
        assert frame in message


@pytest.mark.parametrize(
    "text",
    [
        "<robot><link",
        '<robot name="empty"></robot>',
        "<not_a_robot/>",
    ],
)
def test_urdf_that_does_not_parse_is_a_model_error(text):
    with pytest.raises(ModelError, match="does not parse"):
        SensorKinematics(text, "sensor")


def test_missing_urdf_file_is_a_model_error(tmp_path):
    missing = tmp_path / "missing.urdf"
    with pytest.raises(ModelError, match="missing.urdf"):
        SensorKinematics(str(missing), "sensor")


def test_multi_dof_joint_is_a_model_error():
    text = one_joint_urdf().replace('type="revolute"', 'type="floating"')
    with pytest.raises(ModelError, match="not supported"):
        SensorKinematics(text, "sensor")


def test_joint_mapper_reorders_and_ignores_extra_joints():
    mapper = JointMapper(["a", "b", "c"])
    names = ["gripper", "c", "a", "b"]
    np.testing.assert_array_equal(mapper.indices(names), [2, 3, 1])
    np.testing.assert_array_equal(mapper.select(names, [9.0, 3.0, 1.0, 2.0]), [1.0, 2.0, 3.0])
    # The cached mapping gives the same answer; a new order gets its own mapping.
    np.testing.assert_array_equal(mapper.select(names, [0.0, 6.0, 4.0, 5.0]), [4.0, 5.0, 6.0])
    np.testing.assert_array_equal(mapper.select(["b", "c", "a"], [2.0, 3.0, 1.0]), [1, 2, 3])


def test_joint_mapper_missing_joint_is_named():
    mapper = JointMapper(["a", "b", "c"])
    with pytest.raises(SampleError, match="b"):
        mapper.select(["a", "c"], [1.0, 2.0])
    with pytest.raises(SampleError):
        mapper.select(["a", "b", "c"], [1.0, 2.0])


def test_joint_mapper_on_the_bundled_arm(arm):
    mapper = JointMapper(arm.joint_names)
    names = list(reversed(arm.joint_names))
    values = np.arange(6.0)
    np.testing.assert_array_equal(mapper.select(names, values), values[::-1])

