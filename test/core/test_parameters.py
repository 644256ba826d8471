"""Inertial parameters: the parameter order, pinocchio conversions, physical consistency."""

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from strategies import physical_bodies, rotations, vectors

from inertial_id.core.errors import InertialIdError
from inertial_id.core.parameters import (
    PI_NAMES,
    BodyParameters,
    from_pinocchio_order,
    is_physically_consistent,
    is_semi_consistent,
    min_pseudo_inertia_eigenvalue,
    pi_from_pseudo_inertia,
    principal_moments,
    project_to_consistent,
    pseudo_inertia,
    satisfies_triangle_inequalities,
    skew,
    symmetric_from_vector,
    to_pinocchio_order,
    vector_from_symmetric,
)

FAST = settings(max_examples=80, deadline=None)


# ---------------------------------------------------------------------------------------------
# The parameter order


def test_order_is_the_papers_order():
    assert PI_NAMES == ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz")


def test_point_mass_on_x_axis_pins_the_order():
    # 2 kg at (0.1, 0, 0): h = (0.2, 0, 0), I = m (|p|^2 1 - p p^T) = diag(0, 0.02, 0.02).
    body = BodyParameters.from_mass_com_inertia(2.0, [0.1, 0.0, 0.0], np.zeros((3, 3)))
    expected = [2.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.02, 0.0, 0.02]
    np.testing.assert_allclose(body.pi, expected, rtol=0, atol=1e-15)


def test_point_mass_with_distinct_entries_pins_both_orders():
    # 1 kg at p = (0.1, 0.2, 0.3): |p|^2 = 0.14, I = 0.14 1 - p p^T, so
    # Ixx = 0.13, Ixy = -0.02, Ixz = -0.03, Iyy = 0.10, Iyz = -0.06, Izz = 0.05 (all distinct,
    # so a swapped pair of entries cannot go unnoticed).
    p = np.array([0.1, 0.2, 0.3])
    body = BodyParameters.from_mass_com_inertia(1.0, p, np.zeros(6))
    ours = [1.0, 0.1, 0.2, 0.3, 0.13, -0.02, -0.03, 0.10, -0.06, 0.05]
    np.testing.assert_allclose(body.pi, ours, rtol=0, atol=1e-15)
    # pinocchio: [m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
    pinocchio_order = [1.0, 0.1, 0.2, 0.3, 0.13, -0.02, 0.10, -0.03, -0.06, 0.05]
    np.testing.assert_allclose(to_pinocchio_order(body.pi), pinocchio_order, atol=1e-15)
    np.testing.assert_allclose(
        pin.Inertia(1.0, p, np.zeros((3, 3))).toDynamicParameters(), pinocchio_order, atol=1e-15
    )


@FAST
@given(physical_bodies())
def test_to_pinocchio_order_matches_pinocchio(body):
    mass, com, inertia_com = body
    ours = BodyParameters.from_mass_com_inertia(mass, com, inertia_com)
    theirs = pin.Inertia(mass, com, inertia_com)
    np.testing.assert_allclose(
        to_pinocchio_order(ours.pi), theirs.toDynamicParameters(), rtol=1e-12, atol=1e-14
    )


@FAST
@given(physical_bodies())
def test_from_pinocchio_matches_pinocchio_accessors(body):
    mass, com, inertia_com = body
    inertia = pin.Inertia(mass, com, inertia_com)
    ours = BodyParameters.from_pinocchio(inertia)
    assert ours.mass == pytest.approx(inertia.mass, rel=1e-14)
    np.testing.assert_allclose(ours.com, inertia.lever, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours.inertia_com, inertia.inertia, rtol=1e-10, atol=1e-13)
    # And back: to_pinocchio gives the same spatial inertia.
    np.testing.assert_allclose(ours.to_pinocchio().matrix(), inertia.matrix(), atol=1e-12)


@FAST
@given(vectors(10, -10.0, 10.0))
def test_pinocchio_order_round_trip(pi):
    np.testing.assert_array_equal(from_pinocchio_order(to_pinocchio_order(pi)), pi)
    np.testing.assert_array_equal(to_pinocchio_order(from_pinocchio_order(pi)), pi)


@FAST
@given(physical_bodies())
def test_mass_com_inertia_accessors_round_trip(body):
    mass, com, inertia_com = body
    params = BodyParameters.from_mass_com_inertia(mass, com, vector_from_symmetric(inertia_com))
    assert params.mass == mass
    np.testing.assert_allclose(params.first_moment, mass * com, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(params.com, com, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(params.inertia_com, inertia_com, rtol=1e-10, atol=1e-13)
    # Parallel axis theorem about the origin: I_O = I_C + m (|c|^2 1 - c c^T).
    expected_origin = inertia_com + mass * (com @ com * np.eye(3) - np.outer(com, com))
    np.testing.assert_allclose(params.inertia_origin, expected_origin, rtol=1e-12, atol=1e-14)


def test_body_parameters_validate_and_freeze():
    with pytest.raises(InertialIdError):
        BodyParameters.from_pi(np.ones(9))
    body = BodyParameters.from_pi(np.arange(10.0))
    with pytest.raises(ValueError):
        body.pi[0] = 5.0
    assert np.all(np.isnan(BodyParameters.from_pi(np.zeros(10)).com))


# ---------------------------------------------------------------------------------------------
# Physical consistency


@FAST
@given(physical_bodies())
def test_physical_bodies_are_consistent(body):
    mass, com, inertia_com = body
    params = BodyParameters.from_mass_com_inertia(mass, com, inertia_com)
    assert params.is_physically_consistent()
    assert is_physically_consistent(params.pi)
    assert params.min_pseudo_inertia_eigenvalue > 0.0
    assert min_pseudo_inertia_eigenvalue(params.pi) == params.min_pseudo_inertia_eigenvalue


def _classical_conditions(pi):
    """m > 0, I_C positive definite and strict triangle inequalities, computed from pi alone."""
    m = pi[0]
    if m <= 0:
        return False
    c = pi[1:4] / m
    inertia_com = symmetric_from_vector(pi[4:]) + m * skew(c) @ skew(c)
    lam = np.linalg.eigvalsh(inertia_com)
    triangle = lam[0] + lam[1] > lam[2] and lam[0] + lam[2] > lam[1] and lam[1] + lam[2] > lam[0]
    return bool(lam[0] > 0 and triangle)


@settings(max_examples=100, deadline=None)
@given(
    st.floats(0.1, 10.0),
    vectors(3, -0.5, 0.5),
    vectors(3, 0.02, 1.0),
    rotations(),
    st.sampled_from(["none", "m", "Lx", "Ly", "Lz", "Lx,Ly"]),
)
def test_pseudo_inertia_positive_definite_iff_classical_conditions(mass, com, l_raw, rot, flip):
    # Second moments L about the CoM (principal axes rot) and the mass; negating some of them
    # gives a parameter vector that is inconsistent, so both outcomes occur in every run.
    second = mass * l_raw * 0.05
    signs = {"m": 1.0, "Lx": 1.0, "Ly": 1.0, "Lz": 1.0}
    for name in flip.split(","):
        if name in signs:
            signs[name] = -1.0
    m = signs["m"] * mass
    second = second * np.array([signs["Lx"], signs["Ly"], signs["Lz"]])
    lx, ly, lz = second
    inertia_com = rot @ np.diag([ly + lz, lx + lz, lx + ly]) @ rot.T
    c = np.asarray(com)
    inertia_origin = inertia_com - m * skew(c) @ skew(c)
    pi = np.concatenate(([m], m * c, vector_from_symmetric(inertia_origin)))

    expected = flip == "none"
    assert is_physically_consistent(pi) is expected
    assert _classical_conditions(pi) is expected
    assert (min_pseudo_inertia_eigenvalue(pi) > 0) is expected
    # The package's own classical predicates agree.
    assert (is_semi_consistent(pi) and satisfies_triangle_inequalities(pi)) is expected
    if m > 0:
        np.testing.assert_allclose(
            principal_moments(pi), np.linalg.eigvalsh(inertia_com), rtol=1e-9, atol=1e-12
        )
    else:
        assert np.all(np.isnan(principal_moments(pi)))


def test_consistency_rejects_non_finite_and_respects_margin():
    body = BodyParameters.from_mass_com_inertia(1.0, [0, 0, 0.1], np.diag([0.01, 0.01, 0.005]))
    margin = body.min_pseudo_inertia_eigenvalue
    assert body.is_physically_consistent(0.5 * margin)
    assert not body.is_physically_consistent(2.0 * margin)
    bad = body.pi.copy()
    bad[4] = np.nan
    assert not is_physically_consistent(bad)


@FAST
@given(vectors(10, -10.0, 10.0))
def test_pseudo_inertia_round_trip(pi):
    j = pseudo_inertia(pi)
    np.testing.assert_array_equal(j, j.T)
    np.testing.assert_allclose(pi_from_pseudo_inertia(j), pi, rtol=1e-12, atol=1e-12)


@FAST
@given(vectors(6, -5.0, 5.0))
def test_symmetric_vector_round_trip(s):
    matrix = symmetric_from_vector(s)
    np.testing.assert_array_equal(matrix, matrix.T)
    np.testing.assert_array_equal(vector_from_symmetric(matrix), s)
    # Order [xx, xy, xz, yy, yz, zz]
    assert (matrix[0, 0], matrix[0, 1], matrix[0, 2]) == (s[0], s[1], s[2])
    assert (matrix[1, 1], matrix[1, 2], matrix[2, 2]) == (s[3], s[4], s[5])


def test_vector_from_symmetric_takes_the_symmetric_part():
    matrix = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    np.testing.assert_array_equal(vector_from_symmetric(matrix), [1.0, 3.0, 5.0, 5.0, 7.0, 9.0])


@FAST
@given(
    st.lists(
        st.tuples(st.floats(0.01, 5.0), vectors(3, -0.5, 0.5)), min_size=1, max_size=8
    )
)
def test_pseudo_inertia_is_second_moment_of_point_masses(points):
    masses = np.array([m for m, _ in points])
    positions = np.array([p for _, p in points])
    m = masses.sum()
    h = (masses[:, None] * positions).sum(axis=0)
    inertia = sum(
        mk * (pk @ pk * np.eye(3) - np.outer(pk, pk))
        for mk, pk in zip(masses, positions, strict=True)
    )
    pi = np.concatenate(([m], h, vector_from_symmetric(inertia)))
    homogeneous = np.hstack((positions, np.ones((len(points), 1))))
    expected = sum(
        mk * np.outer(xk, xk) for mk, xk in zip(masses, homogeneous, strict=True)
    )
    np.testing.assert_allclose(pseudo_inertia(pi), expected, rtol=1e-12, atol=1e-12)
    # A sum of positive point masses is positive semidefinite.
    assert min_pseudo_inertia_eigenvalue(pi) > -1e-12


def test_skew_is_the_cross_product():
    rng = np.random.default_rng(0)
    for _ in range(10):
        a, b = rng.normal(size=(2, 3))
        np.testing.assert_allclose(skew(a) @ b, np.cross(a, b), atol=1e-15)


def test_semi_consistent_but_not_consistent():
    # Principal moments (1, 1, 3) about the CoM: positive definite, but 1 + 1 < 3, so no real
    # density has them (a rod cannot be "fatter" than its two other axes together).
    pi = BodyParameters.from_mass_com_inertia(1.0, [0.0, 0.0, 0.1], np.diag([1.0, 1.0, 3.0])).pi
    assert is_semi_consistent(pi)
    assert not satisfies_triangle_inequalities(pi)
    assert not is_physically_consistent(pi)
    assert satisfies_triangle_inequalities(pi, tolerance=1.0 + 1e-9)


@FAST
@given(vectors(10, -1.0, 1.0), st.sampled_from([0.0, 1e-6, 1e-3]))
def test_projection_to_consistent(pi, epsilon):
    projected = project_to_consistent(pi, epsilon)
    j, j_projected = pseudo_inertia(pi), pseudo_inertia(projected)
    assert np.linalg.eigvalsh(j_projected)[0] >= epsilon - 1e-12
    # Idempotent, and the identity on consistent parameters.
    np.testing.assert_allclose(project_to_consistent(projected, epsilon), projected, atol=1e-12)
    if np.linalg.eigvalsh(j)[0] >= epsilon:
        np.testing.assert_array_equal(projected, pi)
    # Nearest in the Frobenius norm of J: no consistent body is closer.
    distance = np.linalg.norm(j_projected - j)
    rng = np.random.default_rng(0)
    for _ in range(20):
        rot = Rotation.random(random_state=rng).as_matrix()
        lx, ly, lz = rng.uniform(0.0, 0.3, 3) + epsilon
        other = BodyParameters.from_mass_com_inertia(
            rng.uniform(epsilon, 1.0), rng.uniform(-1, 1, 3),
            rot @ np.diag([ly + lz, lx + lz, lx + ly]) @ rot.T,
        )
        if np.linalg.eigvalsh(other.pseudo_inertia)[0] >= epsilon:
            assert distance <= np.linalg.norm(other.pseudo_inertia - j) + 1e-12
