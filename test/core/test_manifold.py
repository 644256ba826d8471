"""The (m, c, Q, L) manifold of Traversaro et al. (2016) and the estimator that searches it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from strategies import rotations, vectors

from inertial_id.core.errors import InertialIdError, SolverError
from inertial_id.core.estimate import N_PI
from inertial_id.core.estimation.estimators import ConsistentEstimator, least_squares
from inertial_id.core.estimation.manifold import (
    ManifoldEstimator,
    ManifoldPoint,
    manifold_curvature,
    manifold_from_pi,
    manifold_jacobian,
    pi_from_manifold,
    retract,
    rotation_exp,
)
from inertial_id.core.estimation.payload import PayloadIdentifier
from inertial_id.core.parameters import (
    BodyParameters,
    min_pseudo_inertia_eigenvalue,
    symmetric_from_vector,
)
from inertial_id.core.regressor import predicted_wrench
from inertial_id.core.simulation import DEFAULT_OFFSET, default_payload
from inertial_id.core.statistics import SufficientStatistics

PAYLOAD = default_payload()
OFFSET = np.array(DEFAULT_OFFSET)
NOISE = np.repeat([0.1, 0.005], 3)  # N, N m: the identifier's default row weights
FAST = settings(max_examples=60, deadline=None)


@st.composite
def manifold_points(draw):
    """(m, c, Q, L): 1 g to 50 kg, CoM within 1 m, second moments of bodies 1 mm to 1 m."""
    mass = draw(st.floats(1e-3, 50.0))
    com = draw(vectors(3))
    moments = mass * draw(vectors(3, 1e-6, 0.3))
    return mass, com, draw(rotations()), moments


def samples(rng, n, level=1.0):
    """Twists and proper accelerations: gravity in random sensor directions plus motion."""
    rot = Rotation.random(n, random_state=rng).as_matrix()
    twist = rng.normal(size=(n, 6)) * np.repeat([0.5, 2.0], 3) * level
    proper = rng.normal(size=(n, 6)) * np.repeat([2.0, 8.0], 3) * level
    proper[:, :3] += np.einsum("nji,j->ni", rot, [0.0, 0.0, 9.81])
    return twist, proper


def identifier(rng, n, body=PAYLOAD, level=1.0, noise=1.0):
    """A PayloadIdentifier fed n samples of ``body`` with the F/T offset and scaled noise."""
    twist, proper = samples(rng, n, level)
    wrench = predicted_wrench(body.pi, twist, proper, OFFSET)
    wrench += noise * rng.normal(size=wrench.shape) * NOISE
    ident = PayloadIdentifier()
    ident.add(twist, proper, wrench)
    return ident


def small_body():
    """50 g, 3 x 2 x 4 cm: its inertia is lost in the noise when the sensor barely moves."""
    mass, (a, b, c) = 0.05, (0.03, 0.02, 0.04)
    inertia = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyParameters.from_mass_com_inertia(mass, [0.005, -0.003, 0.02], inertia)


def poorly_excited(seed, n=400):
    """Statistics on which least squares is physically inconsistent."""
    ident = identifier(np.random.default_rng(seed), n, small_body(), level=0.003)
    assert not least_squares(ident.statistics).physically_consistent
    return ident


def x_of(estimate):
    return np.concatenate((estimate.pi, estimate.offset))


def relative_error(estimate, truth):
    return np.linalg.norm(estimate - truth) / np.linalg.norm(truth)


# ---------------------------------------------------------------------------------------------
# The parametrization


@FAST
@given(manifold_points())
def test_pi_from_manifold_is_fully_physically_consistent(point):
    pi = pi_from_manifold(*point)
    assert min_pseudo_inertia_eigenvalue(pi) > 0.0
    # Triangle inequalities of the inertia about the CoM (Traversaro 2016, eq. 16).
    body = BodyParameters.from_pi(pi)
    principal = np.linalg.eigvalsh(body.inertia_com)
    assert principal[2] <= principal[0] + principal[1] + 1e-12 * principal[2]
    np.testing.assert_allclose(body.com, point[1], atol=1e-12)


@FAST
@given(manifold_points())
def test_manifold_from_pi_inverts_pi_from_manifold(point):
    pi = pi_from_manifold(*point)
    m, c, q, moments = manifold_from_pi(pi)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    assert np.linalg.det(q) == pytest.approx(1.0)
    assert m == pi[0]
    np.testing.assert_allclose(np.sort(moments), np.sort(point[3]), rtol=1e-9,
                               atol=1e-12 * pi[0] * (1 + point[1] @ point[1]))
    scale = np.abs(pi).max()
    np.testing.assert_allclose(pi_from_manifold(m, c, q, moments), pi, rtol=0, atol=1e-13 * scale)


def test_manifold_from_pi_clips_inconsistent_parameters():
    # Inertia about the CoM violating the triangle inequality: Sigma_C has a negative eigenvalue.
    bad = BodyParameters.from_mass_com_inertia(2.0, [0.1, 0.0, -0.05], np.diag([0.01, 0.01, 0.05]))
    assert not bad.is_physically_consistent()
    m, c, q, moments = manifold_from_pi(bad.pi, min_moment=1e-6)
    assert m == 2.0 and np.allclose(c, [0.1, 0.0, -0.05])
    assert moments.min() == 1e-6 and np.linalg.det(q) == pytest.approx(1.0)
    assert min_pseudo_inertia_eigenvalue(pi_from_manifold(m, c, q, moments)) > 0
    # Non-positive mass: no centre of mass; the mass is raised to the floor.
    negative = bad.pi * np.array([-1.0] + [1.0] * 9)
    m, c, q, moments = manifold_from_pi(negative, min_mass=1e-3, min_moment=1e-6)
    assert m == 1e-3 and np.all(c == 0.0) and moments.min() >= 1e-6
    with pytest.raises(InertialIdError):
        manifold_from_pi(np.full(N_PI, np.nan))


@FAST
@given(vectors(3, -4.0, 4.0))
def test_rotation_exp_is_the_rotation_vector_map(delta):
    np.testing.assert_allclose(rotation_exp(delta), Rotation.from_rotvec(delta).as_matrix(),
                               atol=1e-12)


def test_retract_projects_m_and_l_onto_the_floor_and_keeps_q_a_rotation():
    point = manifold_from_pi(PAYLOAD.pi)
    moved = retract(point, np.r_[-0.5, 0.01, 0.0, 0.0, 2.0, -1.0, 3.0, -80.0, 0.5, 0.0], 1e-12)
    assert moved.mass == pytest.approx(0.5 * point.mass) and moved.moments[0] == 1e-12
    assert moved.moments[1] == pytest.approx(1.5 * point.moments[1])
    # The first moment moved by m0 s_c, whatever the mass did.
    np.testing.assert_allclose(moved.mass * moved.com, point.mass * (point.com + [0.01, 0, 0]))
    assert retract(point, np.r_[-5.0, np.zeros(9)], 1e-9).mass == 1e-9
    np.testing.assert_allclose(moved.rotation.T @ moved.rotation, np.eye(3), atol=1e-14)
    assert min_pseudo_inertia_eigenvalue(pi_from_manifold(*moved)) > 0


def chart(point, s):
    """pi at chart coordinates s: m0 (1 + s_m), h = m0 (c0 + s_c), Q0 expm([s_Q]x), L0 (1 + s_L)."""
    m = point.mass * (1 + s[0])
    h = point.mass * (point.com + s[1:4])
    q = point.rotation @ rotation_exp(s[4:7])
    return pi_from_manifold(m, h / m, q, point.moments * (1 + s[7:]))


def test_jacobian_and_curvature_match_finite_differences():
    rng = np.random.default_rng(1)
    rotation = Rotation.random(random_state=2).as_matrix()
    point = ManifoldPoint(1.3, rng.normal(size=3) * 0.1, rotation, np.array([1e-3, 2e-3, 5e-4]))
    h = 1e-6
    eye = np.eye(10)
    numeric = np.array([chart(point, h * e) - chart(point, -h * e) for e in eye]).T / (2 * h)
    np.testing.assert_allclose(manifold_jacobian(point), numeric, atol=1e-8)
    weights = rng.normal(size=N_PI)
    h = 1e-4

    def phi(s):
        return weights @ chart(point, s)

    numeric = np.array([[phi(h * (a + b)) - phi(h * (a - b)) - phi(h * (b - a)) + phi(-h * (a + b))
                         for b in eye] for a in eye]) / (4 * h * h)
    np.testing.assert_allclose(manifold_curvature(point, weights), numeric, atol=1e-7)
    # retract follows the same chart (away from the floor).
    step = rng.normal(size=10) * 0.1
    np.testing.assert_allclose(pi_from_manifold(*retract(point, step)), chart(point, step),
                               rtol=0, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# The estimator


def test_clean_data_recovered_from_least_squares_start():
    ident = identifier(np.random.default_rng(0), 100, noise=0.0)
    estimator = ManifoldEstimator()
    estimate = estimator.solve(ident.statistics)
    assert estimate.method == "manifold" and estimate.physically_consistent
    assert relative_error(estimate.pi, PAYLOAD.pi) < 1e-6
    assert relative_error(estimate.offset, OFFSET) < 1e-6
    assert estimator.converged and estimator.iterations >= 1


def test_clean_data_recovered_from_a_far_start():
    ident = identifier(np.random.default_rng(1), 100, noise=0.0)
    far = BodyParameters.from_mass_com_inertia(
        0.3, [-0.1, 0.05, -0.02], Rotation.from_rotvec([1.0, 2.0, -0.5]).as_matrix()
        @ np.diag([0.01, 0.004, 0.012]) @ Rotation.from_rotvec([1.0, 2.0, -0.5]).as_matrix().T
    )
    estimator = ManifoldEstimator()
    estimate = estimator.solve(ident.statistics, warm_start=far.pi)
    assert estimator.converged and estimator.iterations > 3
    assert relative_error(estimate.pi, PAYLOAD.pi) < 1e-6
    assert relative_error(estimate.offset, OFFSET) < 1e-6


@pytest.mark.parametrize("seed", [2, 3])
def test_noisy_interior_optimum_equals_the_sdp(seed):
    stats = identifier(np.random.default_rng(seed), 1500).statistics
    sdp = ConsistentEstimator(prior_weight=0.0).solve(stats)
    estimator = ManifoldEstimator()
    # From least squares (consistent here, so optimal) and from a poor consistent guess.
    for warm_start in (None, 0.5 * PAYLOAD.pi):
        estimate = estimator.solve(stats, warm_start=warm_start)
        assert estimator.converged
        np.testing.assert_allclose(estimate.pi, sdp.pi, rtol=0, atol=1e-7 * np.abs(sdp.pi).max())
        np.testing.assert_allclose(estimate.offset, sdp.offset, rtol=0, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_poorly_excited_matches_the_sdp_cost(seed):
    stats = poorly_excited(seed).statistics
    estimator = ManifoldEstimator()
    estimate = estimator.solve(stats)
    assert estimator.converged and estimate.physically_consistent
    sdp = ConsistentEstimator(prior_weight=0.0, epsilon=1e-10).solve(stats)
    ls = least_squares(stats)
    cost, cost_sdp = stats.residual(x_of(estimate)), stats.residual(x_of(sdp))
    assert abs(cost - cost_sdp) <= 1e-6 * cost_sdp
    # Sharper: the price of consistency, ||A (x - x_LS)||^2_W, agrees too (the manifold
    # reaches J >= 0, the SDP J >= 1e-10 I, so the manifold may be marginally lower).
    def excess(x):
        d = x - x_of(ls)
        return d @ stats.information @ d

    assert excess(x_of(estimate)) <= excess(x_of(sdp)) * (1 + 1e-5)
    assert excess(x_of(estimate)) >= excess(x_of(sdp)) * (1 - 1e-3)


def random_body(rng):
    """A box-like body of 10 g to 10 kg, 5 mm to 30 cm sides, CoM a few cm off the origin."""
    mass = 10 ** rng.uniform(-2, 1)
    a, b, c = 10 ** rng.uniform(-2.3, -0.5, 3)
    inertia = mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    return BodyParameters.from_mass_com_inertia(mass, rng.normal(size=3) * 0.05, inertia)


@pytest.mark.parametrize("seed", range(6))
def test_random_problems_match_the_sdp(seed):
    # Random bodies, excitation levels and sample counts; many end on the boundary.
    rng = np.random.default_rng(100 + seed)
    body = random_body(rng)
    ident = identifier(rng, int(rng.integers(30, 400)), body, level=10 ** rng.uniform(-2.5, 0.5))
    stats = ident.statistics
    estimator = ManifoldEstimator()
    estimate = estimator.solve(stats)
    sdp = ConsistentEstimator(prior_weight=0.0, epsilon=1e-10).solve(stats)
    assert estimate.physically_consistent and estimator.converged
    assert estimator.iterations <= 10
    cost, cost_sdp = stats.residual(x_of(estimate)), stats.residual(x_of(sdp))
    assert cost <= cost_sdp * (1 + 1e-9)
    x_ls = np.linalg.lstsq(stats.information, stats.moment, rcond=None)[0]
    excess = [(x - x_ls) @ stats.information @ (x - x_ls) for x in (x_of(estimate), x_of(sdp))]
    assert excess[0] <= excess[1] * (1 + 1e-4) + 1e-12 * cost


def test_time_budget_returns_a_consistent_estimate():
    stats = poorly_excited(0).statistics
    optimum = ManifoldEstimator()
    optimum.solve(stats)
    start = ManifoldEstimator(max_iterations=0)
    start.solve(stats)
    assert start.cost > optimum.cost * (1 + 1e-9)
    for budget in (1e-3, 1e-9):
        estimator = ManifoldEstimator(time_budget=budget)
        estimate = estimator.solve(stats)
        assert estimate.physically_consistent and estimate.min_eigenvalue > 0
        # The best iterate so far: between the start and the optimum.
        assert optimum.cost * (1 - 1e-12) <= estimator.cost <= start.cost
    assert estimator.iterations == 0 and not estimator.converged
    # The next solve continues from the time-limited result.
    estimator.time_budget = None
    estimator.solve(stats)
    assert estimator.converged
    assert estimator.cost == pytest.approx(optimum.cost, rel=1e-12)


def test_warm_start_from_previous_solution_needs_fewer_iterations():
    # Recursive use on an empty sensor (tare): least squares puts a negative mass, so a cold
    # start begins from a guessed mass, far from the optimum (a point mass, L on the floor).
    rng = np.random.default_rng(2)
    nothing = BodyParameters.from_pi(np.zeros(N_PI))
    ident = identifier(rng, 300, nothing, level=0.1)
    recursive = ManifoldEstimator()
    recursive.solve(ident.statistics)
    # Unchanged data: the remembered optimum is confirmed at once.
    recursive.solve(ident.statistics)
    assert recursive.converged and recursive.iterations == 1
    ident.statistics.merge(identifier(rng, 6, nothing, level=0.1).statistics)
    assert least_squares(ident.statistics).pi[0] < 0.0
    warm = recursive.solve(ident.statistics)
    cold_estimator = ManifoldEstimator()
    cold = cold_estimator.solve(ident.statistics)
    assert recursive.converged and cold_estimator.converged
    assert recursive.iterations < cold_estimator.iterations
    stats = ident.statistics
    assert stats.residual(x_of(warm)) == pytest.approx(stats.residual(x_of(cold)), rel=1e-9)
    assert warm.physically_consistent and 0.0 < warm.pi[0] < 1e-3
    recursive.reset()
    assert recursive.point is None


def test_recursive_solves_follow_the_optimum_off_and_onto_the_boundary():
    # Barely moving, then well excited: the remembered solution (a point mass, all L on the
    # floor) must grow into a body; equal moments hide that descent unless the axes turn.
    rng = np.random.default_rng(0)
    body = small_body()
    ident = identifier(rng, 200, body, level=0.003)
    estimator = ManifoldEstimator()
    sdp = ConsistentEstimator(prior_weight=0.0, epsilon=1e-10)
    for k in range(36):
        level = 0.003 if k < 30 else 0.3
        ident.statistics.merge(identifier(rng, 50, body, level=level).statistics)
        estimate = estimator.solve(ident.statistics)
        assert estimator.converged and estimate.physically_consistent
        assert estimator.iterations <= 20
        if k in (29, 30, 35):
            stats = ident.statistics
            cost_sdp = stats.residual(x_of(sdp.solve(stats)))
            assert stats.residual(x_of(estimate)) <= cost_sdp * (1 + 1e-9)


def test_prior_matches_the_sdp_with_the_same_prior():
    # Static data: the rotational inertia is not identifiable, the prior decides it.
    rng = np.random.default_rng(3)
    n = 200
    rot = Rotation.random(n, random_state=rng).as_matrix()
    twist, proper = np.zeros((n, 6)), np.zeros((n, 6))
    proper[:, :3] = np.einsum("nji,j->ni", rot, [0.0, 0.0, 9.81])
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET) + rng.normal(size=(n, 6)) * NOISE
    ident = PayloadIdentifier()
    ident.add(twist, proper, wrench)
    prior = 1.1 * PAYLOAD.pi
    estimate = ManifoldEstimator(prior=prior, prior_weight=1e-3).solve(ident.statistics)
    sdp = ConsistentEstimator(prior=prior, prior_weight=1e-3, epsilon=1e-10).solve(ident.statistics)
    np.testing.assert_allclose(estimate.pi, sdp.pi, rtol=0, atol=1e-5 * np.abs(sdp.pi).max())


def test_too_few_rows_is_a_solver_error():
    with pytest.raises(SolverError):
        ManifoldEstimator().solve(SufficientStatistics(16))
    ident = identifier(np.random.default_rng(0), 2)
    with pytest.raises(SolverError):
        ManifoldEstimator().solve(ident.statistics)


@pytest.mark.parametrize("kwargs", [{"max_iterations": -1}, {"tolerance": 0.0},
                                    {"time_budget": 0.0}, {"prior": np.zeros(3)},
                                    {"prior_weight": -1.0}])
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(InertialIdError):
        ManifoldEstimator(**kwargs)


def test_warm_start_of_wrong_size_is_rejected():
    stats = identifier(np.random.default_rng(0), 20).statistics
    with pytest.raises(InertialIdError):
        ManifoldEstimator().solve(stats, warm_start=np.ones(7))
    # An Estimate and a full x are accepted.
    estimate = least_squares(stats)
    assert ManifoldEstimator().solve(stats, warm_start=estimate).physically_consistent
    assert ManifoldEstimator().solve(stats, warm_start=x_of(estimate)).physically_consistent


def test_inertia_entries_follow_the_package_order():
    # The vech order of the inertia entries is the package's [xx, xy, xz, yy, yz, zz].
    point = manifold_from_pi(PAYLOAD.pi)
    inertia = symmetric_from_vector(pi_from_manifold(*point)[4:])
    np.testing.assert_allclose(inertia, PAYLOAD.inertia_origin, atol=1e-15)
