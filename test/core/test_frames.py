"""An estimate re-expressed in a frame rigidly attached to the sensor, against pinocchio."""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import physical_bodies, rotations, vectors

from inertial_id.core.errors import ModelError
from inertial_id.core.estimate import Estimate
from inertial_id.core.frames import (
    express_in_frame,
    frame_placement,
    pi_transform,
    wrench_transform,
)
from inertial_id.core.kinematics import load_urdf_model
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.simulation import bundled_urdf_path

FAST = settings(max_examples=80, deadline=None)


@st.composite
def placements(draw):
    """``sensor_M_frame``: any rotation, an origin within 30 cm of the sensor's."""
    return pin.SE3(draw(rotations()), draw(vectors(3, -0.3, 0.3)))


@st.composite
def estimates(draw):
    """A consistent body, any offset and a random positive definite 16x16 covariance."""
    mass, com, inertia_com = draw(physical_bodies())
    factor = draw(vectors(16 * 16, -0.1, 0.1)).reshape(16, 16)
    return Estimate(body=BodyParameters.from_mass_com_inertia(mass, com, inertia_com),
                    offset=draw(vectors(6, -5.0, 5.0)),
                    covariance=factor @ factor.T + 1e-6 * np.eye(16),
                    samples=100.0, condition_number=3.0, method="test")


@FAST
@given(physical_bodies(), placements())
def test_pi_matches_pinocchios_se3_action(body, sensor_M_frame):
    sensor = BodyParameters.from_mass_com_inertia(*body)
    # pinocchio: aMb.act(I_b) is I_a, so the frame's inertia is frame_M_sensor acting on it.
    expected = BodyParameters.from_pinocchio(
        sensor.to_pinocchio().se3Action(sensor_M_frame.inverse()))
    np.testing.assert_allclose(pi_transform(sensor_M_frame) @ sensor.pi, expected.pi,
                               rtol=1e-9, atol=1e-12)


@FAST
@given(vectors(6, -10.0, 10.0), placements())
def test_offset_matches_pinocchios_force_transform(wrench, sensor_M_frame):
    expected = sensor_M_frame.actInv(pin.Force(wrench[:3], wrench[3:])).vector
    np.testing.assert_allclose(wrench_transform(sensor_M_frame) @ wrench, expected,
                               rtol=1e-9, atol=1e-12)


@FAST
@given(estimates(), placements())
def test_com_and_inertia_about_the_com_follow_the_frame(estimate, sensor_M_frame):
    rotation, origin = sensor_M_frame.rotation, sensor_M_frame.translation
    moved = express_in_frame(estimate, sensor_M_frame)
    assert moved.body.mass == pytest.approx(estimate.body.mass, rel=1e-12)
    np.testing.assert_allclose(moved.body.com, rotation.T @ (estimate.body.com - origin),
                               atol=1e-12)
    np.testing.assert_allclose(moved.body.inertia_com,
                               rotation.T @ estimate.body.inertia_com @ rotation, atol=1e-10)
    assert moved.physically_consistent
    # The CoM is affine in the sensor's CoM: its covariance (delta method) rotates.
    np.testing.assert_allclose(moved.com_covariance,
                               rotation.T @ estimate.com_covariance @ rotation,
                               rtol=1e-7, atol=1e-14)
    assert moved.std[0] == pytest.approx(estimate.std[0], rel=1e-12)
    assert (moved.method, moved.samples) == (estimate.method, estimate.samples)


@FAST
@given(estimates(), vectors(3, -0.3, 0.3))
def test_a_translation_keeps_the_std_of_com_and_inertia_about_the_com(estimate, origin):
    moved = express_in_frame(estimate, pin.SE3(np.eye(3), origin))
    np.testing.assert_allclose(moved.com_std, estimate.com_std, rtol=1e-7)
    np.testing.assert_allclose(moved.inertia_com_std, estimate.inertia_com_std, rtol=1e-6,
                               atol=1e-15)
    np.testing.assert_allclose(moved.offset_std[:3], estimate.offset_std[:3], rtol=1e-12)


@FAST
@given(estimates(), placements())
def test_there_and_back_is_the_identity(estimate, sensor_M_frame):
    back = express_in_frame(express_in_frame(estimate, sensor_M_frame),
                            sensor_M_frame.inverse())
    np.testing.assert_allclose(back.pi, estimate.pi, atol=1e-12)
    np.testing.assert_allclose(back.offset, estimate.offset, atol=1e-11)
    np.testing.assert_allclose(back.covariance, estimate.covariance, atol=1e-12)


def _pinocchio_map(x, sensor_M_frame):
    """``[pi; offset]`` in the frame, computed by pinocchio (no matrix of ours)."""
    inertia = BodyParameters.from_pi(x[:10]).to_pinocchio()
    pi = BodyParameters.from_pinocchio(inertia.se3Action(sensor_M_frame.inverse())).pi
    offset = sensor_M_frame.actInv(pin.Force(x[10:13], x[13:])).vector
    return np.concatenate((pi, offset))


@FAST
@given(estimates(), placements())
def test_covariance_goes_through_the_jacobian_of_pinocchios_transform(estimate, sensor_M_frame):
    x = np.concatenate((estimate.pi, estimate.offset))
    step = 1e-4
    jacobian = np.column_stack([
        (_pinocchio_map(x + step * e, sensor_M_frame)
         - _pinocchio_map(x - step * e, sensor_M_frame)) / (2 * step)
        for e in np.eye(16)
    ])
    moved = express_in_frame(estimate, sensor_M_frame)
    np.testing.assert_allclose(moved.covariance, jacobian @ estimate.covariance @ jacobian.T,
                               rtol=1e-6, atol=1e-10)


def test_an_undetermined_parameter_stays_undetermined():
    body = BodyParameters.from_mass_com_inertia(1.0, [0.0, 0.0, 0.05], 1e-3 * np.eye(3))
    covariance = 1e-6 * np.eye(16)
    covariance[4, 4] = np.inf  # Ixx about the sensor origin
    estimate = Estimate(body=body, offset=np.zeros(6), covariance=covariance, samples=1.0,
                        condition_number=np.inf, method="test")
    moved = express_in_frame(estimate, pin.SE3(np.eye(3), np.array([0.0, 0.0, -0.025])))
    assert np.isinf(moved.std[4]) and np.isfinite(moved.std[0])


def test_tool0_of_the_bundled_arm():
    model = load_urdf_model(bundled_urdf_path())
    sensor_M_tool0 = frame_placement(model, "ft_sensor", "tool0")
    np.testing.assert_allclose(sensor_M_tool0.rotation, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(sensor_M_tool0.translation, [0.0, 0.0, -0.025], atol=1e-12)
    body = BodyParameters.from_mass_com_inertia(1.5, [0.012, -0.018, 0.065], 0.01 * np.eye(3))
    moved = BodyParameters.from_pi(pi_transform(sensor_M_tool0) @ body.pi)
    np.testing.assert_allclose(moved.com, [0.012, -0.018, 0.09], atol=1e-12)
    np.testing.assert_allclose(vector_from_symmetric(moved.inertia_com),
                               vector_from_symmetric(0.01 * np.eye(3)), atol=1e-12)
    # Forward kinematics agree at any configuration (the two frames move together).
    data = model.createData()
    q = pin.randomConfiguration(model)
    pin.framesForwardKinematics(model, data, q)
    world_M_sensor = data.oMf[model.getFrameId("ft_sensor")]
    world_M_tool0 = data.oMf[model.getFrameId("tool0")]
    assert (world_M_sensor.inverse() * world_M_tool0).isApprox(sensor_M_tool0, 1e-9)


def test_frames_a_joint_moves_are_refused():
    model = load_urdf_model(bundled_urdf_path())
    with pytest.raises(ModelError, match="not rigidly attached"):
        frame_placement(model, "ft_sensor", "forearm_link")
    with pytest.raises(ModelError, match="'flange' is not in the URDF"):
        frame_placement(model, "ft_sensor", "flange")
