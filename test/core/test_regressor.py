"""Newton-Euler regressor and the F/T measurement model.

Checked against pinocchio and, independently, against Newton's and Euler's laws applied to a
body moving along a known world-frame trajectory, with every derivative taken numerically.
"""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.parameters import BodyParameters, to_pinocchio_order
from inertial_id.core.regressor import (
    PAYLOAD_ON_SENSOR,
    SENSOR_ON_PAYLOAD,
    BatchNormalEquations,
    angular_products,
    batch_gram,
    cross,
    measurement_matrix,
    normal_equations,
    predicted_wrench,
    regressor,
    wrench_sign,
)

FAST = settings(max_examples=80, deadline=None)
GRAVITY = np.array([0.0, 0.0, -9.81])


def vectors(n, lo=-1.0, hi=1.0):
    element = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    return st.lists(element, min_size=n, max_size=n).map(np.array)


@st.composite
def bodies(draw):
    """A physically consistent body (see test_parameters.physical_bodies)."""
    mass = draw(st.floats(0.1, 10.0))
    com = draw(vectors(3, -0.3, 0.3))
    lx, ly, lz = mass * draw(vectors(3, 1e-3, 0.05))
    q = draw(vectors(4))
    assume(np.linalg.norm(q) > 0.1)
    rot = Rotation.from_quat(q).as_matrix()
    inertia_com = rot @ np.diag([ly + lz, lx + lz, lx + ly]) @ rot.T
    return BodyParameters.from_mass_com_inertia(mass, com, inertia_com)


def random_body(rng):
    mass = rng.uniform(0.5, 5.0)
    lx, ly, lz = mass * rng.uniform(1e-3, 0.03, 3)
    rot = Rotation.random(random_state=rng).as_matrix()
    inertia_com = rot @ np.diag([ly + lz, lx + lz, lx + ly]) @ rot.T
    return BodyParameters.from_mass_com_inertia(mass, rng.uniform(-0.2, 0.2, 3), inertia_com)


def vee(skew_matrix):
    return np.array([skew_matrix[2, 1], skew_matrix[0, 2], skew_matrix[1, 0]])


def derivative(f, t, h=1e-3):
    """Fourth-order central difference of f at t (f returns an array)."""
    return (-f(t + 2 * h) + 8 * f(t + h) - 8 * f(t - h) + f(t - 2 * h)) / (12 * h)


def spatial_inertia(pi):
    """6x6 spatial inertia for [linear; angular] vectors about the frame origin."""
    body = BodyParameters.from_pi(pi)
    h = body.first_moment
    hx = np.array([[0, -h[2], h[1]], [h[2], 0, -h[0]], [-h[1], h[0], 0]])
    return np.block([[body.mass * np.eye(3), -hx], [hx, body.inertia_origin]])


def force_cross(v, f):
    """``v x* f`` for v = [v_lin; w], f = [force; torque]."""
    return np.concatenate((np.cross(v[3:], f[:3]), np.cross(v[:3], f[:3]) + np.cross(v[3:], f[3:])))


# ---------------------------------------------------------------------------------------------
# Against pinocchio


@FAST
@given(vectors(6, -5.0, 5.0), vectors(6, -20.0, 20.0))
def test_regressor_equals_pinocchio_body_regressor(v, a):
    theirs = pin.bodyRegressor(pin.Motion(v), pin.Motion(a))
    # Column k of pinocchio's regressor multiplies pinocchio's parameter k, which is our
    # parameter to_pinocchio_order(range(10))[k].
    source = to_pinocchio_order(np.arange(10)).astype(int)
    expected = np.empty((6, 10))
    expected[:, source] = theirs
    np.testing.assert_allclose(regressor(v, a), expected, rtol=1e-12, atol=1e-12)


@FAST
@given(bodies(), vectors(6, -5.0, 5.0), vectors(6, -20.0, 20.0))
def test_regressor_times_pi_equals_pinocchio_newton_euler(body, v, a):
    inertia = pin.Inertia.FromDynamicParameters(to_pinocchio_order(body.pi))
    vm, am = pin.Motion(v), pin.Motion(a)
    expected = (inertia * am + vm.cross(inertia * vm)).vector
    np.testing.assert_allclose(regressor(v, a) @ body.pi, expected, rtol=1e-10, atol=1e-10)
    # The same with our own spatial inertia matrix and force cross product.
    m = spatial_inertia(body.pi)
    np.testing.assert_allclose(m, inertia.matrix(), atol=1e-14)
    np.testing.assert_allclose(
        regressor(v, a) @ body.pi, m @ a + force_cross(v, m @ v), rtol=1e-10, atol=1e-10
    )


def test_batch_regressor_equals_single_samples():
    rng = np.random.default_rng(1)
    v, a = rng.normal(size=(2, 7, 6))
    batch = regressor(v, a)
    assert batch.shape == (7, 6, 10)
    for k in range(7):
        np.testing.assert_array_equal(batch[k], regressor(v[k], a[k]))


def test_regressor_rejects_bad_shapes():
    with pytest.raises(InertialIdError):
        regressor(np.zeros(6), np.zeros(5))
    with pytest.raises(InertialIdError):
        regressor(np.zeros((3, 6)), np.zeros((4, 6)))
    with pytest.raises(InertialIdError):
        regressor(np.zeros(3), np.zeros(3))


# ---------------------------------------------------------------------------------------------
# Against finite differences


@pytest.mark.parametrize("seed", range(4))
def test_regressor_is_rate_of_body_momentum(seed):
    """Without gravity, Y(v, dv/dt) pi = d/dt (M v) + v x* (M v) in body coordinates."""
    rng = np.random.default_rng(seed)
    pi = random_body(rng).pi
    m = spatial_inertia(pi)
    c0, c1, c2 = rng.normal(size=(3, 6))
    freq = rng.uniform(0.5, 3.0, 6)

    def twist(t):
        return c0 + c1 * t + c2 * np.sin(freq * t)

    for t in (0.0, 0.37, 1.3):
        v = twist(t)
        a = derivative(twist, t)
        momentum_rate = derivative(lambda s: m @ twist(s), t)
        expected = momentum_rate + force_cross(v, m @ v)
        np.testing.assert_allclose(regressor(v, a) @ pi, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_regressor_against_newton_euler_in_the_world_frame(seed):
    """The wrench the sensor applies, from the world-frame momenta of a moving body.

    The body frame (the sensor frame) has origin p(t) and orientation R(t) in the world. The
    body's CoM is p + R c, its linear momentum P = m d/dt(p + R c) and its angular momentum
    about the (fixed) world origin L = (p + R c) x P + R I_C R^T w_world. The external forces
    are gravity m g at the CoM and the sensor wrench (F, tau about p), so

        F = dP/dt - m g,   tau = dL/dt - (p + R c) x m g - p x F   (world axes).

    The regressor gets the body twist v = [R^T dp/dt; vee(R^T dR/dt)] and the proper
    acceleration a_g = [d/dt(R^T dp/dt) - R^T g; d/dt vee(R^T dR/dt)], all by finite
    differences, and must give [R^T F; R^T tau].
    """
    rng = np.random.default_rng(100 + seed)
    body = random_body(rng)
    m, c, inertia_com = body.mass, body.com, body.inertia_com
    p0, p1, p2 = rng.normal(size=(3, 3))
    r0, r1, r2 = rng.normal(size=(3, 3))
    wp, wr = rng.uniform(0.5, 2.5, 2)
    rot0 = Rotation.random(random_state=rng).as_matrix()

    def position(t):
        return p0 + p1 * t + p2 * np.sin(wp * t)

    def rotation(t):
        return Rotation.from_rotvec(r0 + r1 * t + r2 * np.cos(wr * t)).as_matrix() @ rot0

    def body_twist(t):
        rot = rotation(t)
        v_lin = rot.T @ derivative(position, t)
        w = vee(rot.T @ derivative(rotation, t))
        return np.concatenate((v_lin, w))

    def com_world(t):
        return position(t) + rotation(t) @ c

    def linear_momentum(t):
        return m * derivative(com_world, t)

    def angular_momentum(t):
        rot = rotation(t)
        w_world = rot @ body_twist(t)[3:]
        return np.cross(com_world(t), linear_momentum(t)) + rot @ inertia_com @ rot.T @ w_world

    for t in (0.0, 0.4, 1.7):
        rot = rotation(t)
        # Sanity of the finite differences: R^T dR/dt is skew.
        rtr = rot.T @ derivative(rotation, t)
        np.testing.assert_allclose(rtr, -rtr.T, atol=1e-8)

        v = body_twist(t)
        a = derivative(body_twist, t)
        a_g = a - np.concatenate((rot.T @ GRAVITY, np.zeros(3)))

        force_world = derivative(linear_momentum, t) - m * GRAVITY
        torque_world = (
            derivative(angular_momentum, t)
            - np.cross(com_world(t), m * GRAVITY)
            - np.cross(position(t), force_world)
        )
        expected = np.concatenate((rot.T @ force_world, rot.T @ torque_world))
        got = regressor(v, a_g) @ body.pi
        scale = np.linalg.norm(expected)
        assert scale > 1.0  # the motion is not trivial
        np.testing.assert_allclose(got[:3], expected[:3], rtol=0, atol=1e-8 * scale)
        np.testing.assert_allclose(got[3:], expected[3:], rtol=0, atol=1e-8 * scale)


# ---------------------------------------------------------------------------------------------
# Measurement model


def test_payload_at_rest_pulls_the_sensor_down():
    # Sensor z up, at rest: proper acceleration = -R^T g = (0, 0, 9.81).
    a_g = np.array([0.0, 0.0, 9.81, 0.0, 0.0, 0.0])
    offset = np.array([0.1, -0.2, 0.3, 0.01, -0.02, 0.03])
    body = BodyParameters.from_mass_com_inertia(2.0, [0.1, 0.0, 0.0], np.eye(3) * 1e-3)
    w = predicted_wrench(body.pi, np.zeros(6), a_g, offset, PAYLOAD_ON_SENSOR)
    # Gravity 2 kg * 9.81 down at the CoM (0.1, 0, 0): force (0, 0, -19.62), torque
    # r x F = (0.1, 0, 0) x (0, 0, -19.62) = (0, 1.962, 0).
    np.testing.assert_allclose(
        w, [0.1, -0.2, -2 * 9.81 + 0.3, 0.01, 0.1 * 2 * 9.81 - 0.02, 0.03], atol=1e-12
    )
    # The sensor holds the payload up: the wrench it applies is the opposite.
    w_sensor = predicted_wrench(body.pi, np.zeros(6), a_g, np.zeros(6), SENSOR_ON_PAYLOAD)
    np.testing.assert_allclose(w_sensor, [0, 0, 2 * 9.81, 0, -0.1 * 2 * 9.81, 0], atol=1e-12)


def test_wrench_sign_names():
    assert wrench_sign("sensor_on_payload") == +1.0
    assert wrench_sign("payload_on_sensor") == -1.0
    assert PAYLOAD_ON_SENSOR == -1.0 and SENSOR_ON_PAYLOAD == 1.0
    with pytest.raises(InertialIdError, match="bogus"):
        wrench_sign("bogus")


@pytest.mark.parametrize("sign", [PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD])
def test_measurement_matrix_blocks(sign):
    rng = np.random.default_rng(3)
    n = 5
    v, a = rng.normal(size=(2, n, 6))
    a_mat = measurement_matrix(v, a, sign)
    assert a_mat.shape == (6 * n, 16)
    y = regressor(v, a)
    for k in range(n):
        rows = slice(6 * k, 6 * k + 6)
        np.testing.assert_array_equal(a_mat[rows, :10], sign * y[k])
        np.testing.assert_array_equal(a_mat[rows, 10:], np.eye(6))
    # A @ [pi; offset] stacks the predicted wrenches.
    pi = random_body(rng).pi
    offset = rng.normal(size=6)
    np.testing.assert_allclose(
        a_mat @ np.concatenate((pi, offset)),
        predicted_wrench(pi, v, a, offset, sign).reshape(-1),
        atol=1e-12,
    )


def test_measurement_matrix_of_one_sample():
    rng = np.random.default_rng(4)
    v, a = rng.normal(size=(2, 6))
    a_mat = measurement_matrix(v, a)
    assert a_mat.shape == (6, 16)
    np.testing.assert_array_equal(a_mat[:, :10], -regressor(v, a))
    np.testing.assert_array_equal(a_mat[:, 10:], np.eye(6))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([(), (1,), (7,)]),
       st.sampled_from([PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD]))
def test_predicted_wrench_is_the_regressor_times_pi(seed, batch, sign):
    """The direct Newton-Euler evaluation equals ``s Y(v, a) pi + offset``, any batch shape."""
    rng = np.random.default_rng(seed)
    scales = rng.uniform(0.1, 10.0, 2)
    v = rng.normal(size=(*batch, 6)) * scales[0]
    a = rng.normal(size=(*batch, 6)) * scales[1]
    pi, offset = random_body(rng).pi, rng.normal(size=6)
    expected = sign * regressor(v, a) @ pi + offset
    np.testing.assert_allclose(predicted_wrench(pi, v, a, offset, sign), expected,
                               rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@given(st.integers(0, 6), st.data())
@settings(max_examples=100, deadline=None)
def test_cross_is_numpy_cross_bit_for_bit(batch: int, data: st.DataObject) -> None:
    finite = st.floats(-1e6, 1e6, allow_nan=False)
    a = np.array(data.draw(st.lists(finite, min_size=3 * batch, max_size=3 * batch)))
    b = np.array(data.draw(st.lists(finite, min_size=3, max_size=3)))
    a = a.reshape(batch, 3)
    np.testing.assert_array_equal(cross(a, b), np.cross(a, b))
    np.testing.assert_array_equal(cross(b, a), np.cross(b, a))
    np.testing.assert_array_equal(cross(a, a[::-1]), np.cross(a, a[::-1]))


# ---------------------------------------------------------------------------------------------
# Normal equations of a batch from its feature Gram matrix


def row_normal_equations(v, a, wrench, weights, sign, products=None):
    """``A^T W A``, ``A^T W b``, ``b^T W b`` formed from :func:`measurement_matrix`'s rows."""
    rows = measurement_matrix(v, a, sign, products)
    w = np.tile(weights, wrench.shape[0])
    b = wrench.reshape(-1)
    return (rows.T * w) @ rows, (rows.T * w) @ b, float(b @ (w * b))


def assert_normal_equations_close(got, expected, rtol=1e-12):
    """Relative to the Cauchy-Schwarz bounds of each entry: ``|H_ab| <= sqrt(H_aa H_bb)``,
    ``|g_a| <= sqrt(H_aa e)``."""
    (h, g, e), (h0, g0, e0) = got, expected
    diagonal = np.diag(h0)
    tiny = 1e-300
    assert np.all(np.abs(h - h0) <= rtol * np.sqrt(np.outer(diagonal, diagonal)) + tiny)
    assert np.all(np.abs(g - g0) <= rtol * np.sqrt(diagonal * e0) + tiny)
    assert abs(e - e0) <= rtol * e0 + tiny


@st.composite
def batches(draw):
    """A batch of twists, proper accelerations, products (or None), wrenches, row weights (some
    rows left out with zero weights) and a sign, at random scales."""
    seed = draw(st.integers(0, 2**31))
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(seed)
    scales = 10.0 ** rng.uniform(-1.0, 1.5, 4)
    v = rng.normal(size=(n, 6)) * scales[0]
    a = rng.normal(size=(n, 6)) * scales[1]
    a[:, :3] += Rotation.random(random_state=rng).apply([0.0, 0.0, 9.81])
    products = None
    if draw(st.booleans()):  # smoothed products: the twists' own plus a disturbance
        products = angular_products(v[:, 3:]) + rng.normal(size=(n, 6)) * scales[2]
    wrench = rng.normal(size=(n, 6)) * scales[3] + rng.normal(size=6) * 10.0
    weights = 10.0 ** rng.uniform(-2.0, 6.0, 6)
    keep = draw(st.sampled_from(["all", "force", "torque", "random"]))
    if keep == "force":
        weights[3:] = 0.0
    elif keep == "torque":
        weights[:3] = 0.0
    elif keep == "random":
        weights[rng.random(6) < 0.3] = 0.0
    sign = draw(st.sampled_from([PAYLOAD_ON_SENSOR, SENSOR_ON_PAYLOAD]))
    return v, a, products, wrench, weights, sign


@settings(max_examples=300, deadline=None)
@given(batches())
def test_batch_normal_equations_equal_the_rows(batch):
    """The Gram-matrix path equals ``A^T W A``, ``A^T W b``, ``b^T W b`` of the rows."""
    v, a, products, wrench, weights, sign = batch
    expected = row_normal_equations(v, a, wrench, weights, sign, products)
    got = normal_equations(v, a, wrench, weights, sign, products)
    assert_normal_equations_close(got, expected)
    np.testing.assert_array_equal(got[0], got[0].T)
    kernel = BatchNormalEquations(sign, weights)
    assert_normal_equations_close(kernel(batch_gram(v, a, wrench, products)), expected)


def test_batch_normal_equations_of_one_sample_and_row_subsets():
    rng = np.random.default_rng(8)
    v, a, wrench = rng.normal(size=(3, 6))
    weights = np.repeat([100.0, 4e4], 3)
    expected = row_normal_equations(v[None], a[None], wrench[None], weights, PAYLOAD_ON_SENSOR)
    assert_normal_equations_close(normal_equations(v, a, wrench, weights), expected)
    # Force rows and torque rows apart sum to all rows.
    force = normal_equations(v, a, wrench, weights * [1, 1, 1, 0, 0, 0])
    torque = normal_equations(v, a, wrench, weights * [0, 0, 0, 1, 1, 1])
    assert_normal_equations_close(
        (force[0] + torque[0], force[1] + torque[1], force[2] + torque[2]), expected)


def test_batch_gram_checks_its_inputs():
    rng = np.random.default_rng(9)
    v, a, wrench = rng.normal(size=(3, 4, 6))
    with pytest.raises(SampleError):
        batch_gram(v, a, wrench[:3])
    with pytest.raises(SampleError):
        batch_gram(v, a, wrench[:, :5])
    with pytest.raises(InertialIdError):
        batch_gram(v, a[:3], wrench)
    with pytest.raises(InertialIdError):
        batch_gram(v, a, wrench, np.zeros((4, 5)))
    with pytest.raises(InertialIdError):
        BatchNormalEquations(-1.0, np.ones(5))
    for which in range(3):
        for value in (np.nan, np.inf, -np.inf):
            bad = [v.copy(), a.copy(), wrench.copy()]
            bad[which][2, 4] = value
            assert not np.isfinite(np.diagonal(batch_gram(*bad))).all()
