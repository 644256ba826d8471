"""Sufficient statistics, least squares, the LMI-constrained estimator and PayloadIdentifier."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from inertial_id.core.errors import InertialIdError, SampleError, SolverError
from inertial_id.core.estimate import N_PI, N_UNKNOWNS, identifiability, scaled_condition_number
from inertial_id.core.estimation import sdp
from inertial_id.core.estimation.estimators import (
    ConsistentEstimator,
    least_squares,
    prior_scale,
    pseudo_inertia_expression,
)
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import BodyParameters, pseudo_inertia
from inertial_id.core.regressor import measurement_matrix, predicted_wrench, wrench_sign
from inertial_id.core.simulation import DEFAULT_OFFSET, default_payload
from inertial_id.core.statistics import SlidingWindow, SufficientStatistics

PAYLOAD = default_payload()
OFFSET = np.array(DEFAULT_OFFSET)
TRUTH = np.concatenate((PAYLOAD.pi, OFFSET))


def exciting_samples(rng, n):
    """Random twists and proper accelerations: gravity in random sensor directions plus motion."""
    rot = Rotation.random(n, random_state=rng).as_matrix()
    twist = rng.normal(size=(n, 6)) * np.repeat([0.5, 2.0], 3)
    proper = rng.normal(size=(n, 6)) * np.repeat([2.0, 8.0], 3)
    proper[:, :3] += np.einsum("nji,j->ni", rot, [0.0, 0.0, 9.81])
    return twist, proper


def clean_identifier(method, n=100, seed=0, sign="payload_on_sensor"):
    rng = np.random.default_rng(seed)
    twist, proper = exciting_samples(rng, n)
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET, wrench_sign(sign))
    identifier = PayloadIdentifier(PayloadConfig(method=method, wrench_sign=sign))
    identifier.add(twist, proper, wrench)
    return identifier


def relative_error(estimate, truth):
    return np.linalg.norm(estimate - truth) / np.linalg.norm(truth)


def direct_residual(a, b, w, x):
    r = a @ x - b
    return float(r @ (w * r))


# ---------------------------------------------------------------------------------------------
# Exact recovery from clean data


@pytest.mark.parametrize("sign", ["payload_on_sensor", "sensor_on_payload"])
def test_least_squares_recovers_clean_data_exactly(sign):
    identifier = clean_identifier("least_squares", sign=sign)
    estimate = identifier.estimate()
    np.testing.assert_array_equal(least_squares(identifier.statistics).pi, estimate.pi)
    assert estimate.method == "least_squares"
    assert relative_error(estimate.pi, PAYLOAD.pi) < 1e-9
    assert relative_error(estimate.offset, OFFSET) < 1e-9
    assert estimate.samples == 100
    # Zero residual, up to the rounding of the residual computed from the statistics.
    assert np.all(estimate.std < 1e-7 * np.abs(PAYLOAD.pi).max())


def test_sdp_recovers_clean_data_exactly_without_prior():
    identifier = clean_identifier("lmi_sdp")
    estimate = ConsistentEstimator(prior_weight=0.0).solve(identifier.statistics)
    assert estimate.method == "lmi_sdp"
    assert relative_error(estimate.pi, PAYLOAD.pi) < 1e-6
    assert relative_error(estimate.offset, OFFSET) < 1e-6
    assert estimate.physically_consistent


@pytest.mark.parametrize("seed", [0, 1])
def test_identifier_sdp_recovers_clean_data_to_1e_6(seed):
    # The default prior is documented as a negligible pull toward zero; on clean, well
    # conditioned data the estimate must match the truth to 1e-6 relative.
    estimate = clean_identifier("lmi_sdp", seed=seed).estimate()
    assert estimate.method == "lmi_sdp"
    assert estimate.physically_consistent
    assert relative_error(estimate.pi, PAYLOAD.pi) < 1e-6
    assert relative_error(estimate.offset, OFFSET) < 1e-6


def test_sdp_estimator_is_reusable_across_data_sets():
    estimator = ConsistentEstimator(prior_weight=0.0)
    other = BodyParameters.from_mass_com_inertia(0.4, [-0.02, 0.01, 0.03],
                                                 np.diag([4e-4, 5e-4, 3e-4]))
    rng = np.random.default_rng(9)
    results = []
    for body in (PAYLOAD, other, PAYLOAD):
        twist, proper = exciting_samples(rng, 60)
        wrench = predicted_wrench(body.pi, twist, proper, OFFSET)
        identifier = PayloadIdentifier()
        identifier.add(twist, proper, wrench)
        results.append(estimator.solve(identifier.statistics))
    for estimate, body in zip(results, (PAYLOAD, other, PAYLOAD), strict=True):
        assert relative_error(estimate.pi, body.pi) < 1e-6


# ---------------------------------------------------------------------------------------------
# Noisy data


@pytest.mark.parametrize("method", ["least_squares", "lmi_sdp"])
def test_noisy_estimate_is_within_a_few_sigma(method):
    rng = np.random.default_rng(21)
    n = 1500
    force_std, torque_std = 0.08, 0.004
    twist, proper = exciting_samples(rng, n)
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET)
    wrench += rng.normal(size=wrench.shape) * np.repeat([force_std, torque_std], 3)
    config = PayloadConfig(method=method, force_noise_std=force_std, torque_noise_std=torque_std)
    identifier = PayloadIdentifier(config)
    identifier.add(twist, proper, wrench)
    estimate = identifier.estimate()
    assert estimate.physically_consistent
    # The weights are the true inverse variances, so the residual variance is about 1 and the
    # covariance about (A^T W A)^-1.
    stats = identifier.statistics
    sigma2 = stats.residual(np.concatenate((estimate.pi, estimate.offset))) / (stats.rows - 16)
    assert 0.9 < sigma2 < 1.1
    theory = np.sqrt(np.diag(np.linalg.inv(stats.information)))
    np.testing.assert_allclose(estimate.std, theory[:N_PI], rtol=0.06)
    np.testing.assert_allclose(estimate.offset_std, theory[N_PI:], rtol=0.06)
    # Within 4 sigma of the truth, and the sigmas are small (the data identify everything).
    assert np.all(np.abs(estimate.pi - PAYLOAD.pi) < 4 * estimate.std)
    assert np.all(np.abs(estimate.offset - OFFSET) < 4 * estimate.offset_std)
    assert estimate.std[0] < 0.01 * PAYLOAD.mass
    errors = parameter_errors(estimate.pi, PAYLOAD.pi)
    assert errors.mass_pct < 1.0 and errors.com_mm < 2.0
    assert np.all(np.isfinite(estimate.relative_std))
    assert np.isfinite(estimate.condition_number) and estimate.condition_number >= 1.0


def test_poor_excitation_makes_least_squares_inconsistent_but_not_the_sdp():
    # A light, small payload; the sensor barely rotates; noisy F/T.
    mass, (a, b, c) = 0.05, (0.03, 0.02, 0.04)
    body = BodyParameters.from_mass_com_inertia(
        mass, [0.005, -0.003, 0.02], mass / 12 * np.diag([b * b + c * c, a * a + c * c,
                                                          a * a + b * b])
    )
    rng = np.random.default_rng(0)
    n = 400
    rot = Rotation.random(n, random_state=rng).as_matrix()
    twist = np.zeros((n, 6))
    twist[:, 3:] = rng.normal(size=(n, 3)) * 0.02
    proper = np.zeros((n, 6))
    proper[:, :3] = np.einsum("nji,j->ni", rot, [0, 0, 9.81]) + rng.normal(size=(n, 3)) * 0.05
    proper[:, 3:] = rng.normal(size=(n, 3)) * 0.05
    offset = np.array([0.3, 0.1, -0.2, 0.01, 0.0, 0.02])
    wrench = predicted_wrench(body.pi, twist, proper, offset)
    wrench += rng.normal(size=wrench.shape) * np.repeat([0.1, 0.005], 3)

    estimates = {}
    for method in ("least_squares", "lmi_sdp"):
        identifier = PayloadIdentifier(PayloadConfig(method=method))
        identifier.add(twist, proper, wrench)
        estimates[method] = identifier.estimate()
    ls, sdp = estimates["least_squares"], estimates["lmi_sdp"]
    assert not ls.physically_consistent
    assert ls.min_eigenvalue < 0
    assert sdp.physically_consistent
    assert sdp.min_eigenvalue >= 0.99 * PayloadConfig().epsilon
    # Optimality: the SDP fits no better than the unconstrained optimum, and no worse than
    # the (feasible) truth.
    stats = identifier.statistics
    r_ls = stats.residual(np.concatenate((ls.pi, ls.offset)))
    r_sdp = stats.residual(np.concatenate((sdp.pi, sdp.offset)))
    r_truth = stats.residual(np.concatenate((body.pi, offset)))
    assert r_ls <= r_sdp <= r_truth * (1 + 1e-6)


def static_samples(n, seed):
    """Gravity-only samples (random orientations at rest): twists and proper accelerations."""
    rot = Rotation.random(n, random_state=np.random.default_rng(seed)).as_matrix()
    twist = np.zeros((n, 6))
    proper = np.zeros((n, 6))
    proper[:, :3] = np.einsum("nji,j->ni", rot, [0, 0, 9.81])
    return twist, proper


def test_prior_fills_unexcited_directions():
    # Static data: gravity only, so the rotational inertia is not identifiable from the data.
    twist, proper = static_samples(50, seed=3)
    identifier = PayloadIdentifier()
    identifier.add(twist, proper, predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET))
    estimate = ConsistentEstimator(prior=PAYLOAD.pi, prior_weight=1e-4).solve(
        identifier.statistics
    )
    np.testing.assert_allclose(estimate.pi, PAYLOAD.pi, rtol=1e-4, atol=1e-6)
    assert estimate.condition_number == float("inf")


# ---------------------------------------------------------------------------------------------
# Sufficient statistics


def random_rows(rng, r=30):
    return rng.normal(size=(r, 7)), rng.normal(size=r), rng.uniform(0.5, 2.0, r)


def test_statistics_merge_of_halves_equals_all_at_once():
    rng = np.random.default_rng(0)
    a, b, w = random_rows(rng)
    whole = SufficientStatistics(7)
    whole.add(a, b, w, samples=5)
    first, second = SufficientStatistics(7), SufficientStatistics(7)
    first.add(a[:12], b[:12], w[:12], samples=2)
    second.add(a[12:], b[12:], w[12:], samples=3)
    first.merge(second)
    np.testing.assert_allclose(first.information, whole.information, rtol=1e-13)
    np.testing.assert_allclose(first.moment, whole.moment, rtol=1e-13)
    assert first.energy == pytest.approx(whole.energy, rel=1e-13)
    assert (first.rows, first.samples) == (whole.rows, whole.samples) == (30, 5)
    np.testing.assert_allclose(whole.information, a.T @ np.diag(w) @ a, rtol=1e-13)


def test_statistics_residual_equals_direct_weighted_residual():
    rng = np.random.default_rng(1)
    a, b, w = random_rows(rng)
    stats = SufficientStatistics(7)
    stats.add(a, b, w, samples=1)
    for _ in range(5):
        x = rng.normal(size=7)
        assert stats.residual(x) == pytest.approx(direct_residual(a, b, w, x), rel=1e-10)
    x_ls = np.linalg.solve(stats.information, stats.moment)
    assert stats.residual(x_ls) == pytest.approx(direct_residual(a, b, w, x_ls), rel=1e-8)


def test_statistics_scale_and_copy():
    rng = np.random.default_rng(2)
    a, b, w = random_rows(rng)
    stats = SufficientStatistics(7)
    stats.add(a, b, w, samples=4)
    copy = stats.copy()
    stats.scale(0.25)
    np.testing.assert_allclose(stats.information, 0.25 * copy.information)
    np.testing.assert_allclose(stats.moment, 0.25 * copy.moment)
    assert stats.energy == pytest.approx(0.25 * copy.energy)
    assert (stats.rows, stats.samples) == (7.5, 1.0)
    x = rng.normal(size=7)
    assert stats.residual(x) == pytest.approx(0.25 * copy.residual(x))
    # The copy is independent.
    assert copy.rows == 30


def test_statistics_reject_bad_rows():
    stats = SufficientStatistics(7)
    with pytest.raises(SampleError):
        stats.add(np.ones((3, 6)), np.ones(3), np.ones(3), 1)
    with pytest.raises(SampleError):
        stats.add(np.ones((3, 7)), np.ones(3), np.ones(2), 1)
    with pytest.raises(SampleError):
        stats.add(np.ones((3, 7)), np.array([1.0, np.nan, 0.0]), np.ones(3), 1)
    with pytest.raises(SampleError):
        stats.merge(SufficientStatistics(6))
    assert stats.rows == 0


def test_forgetting_factor_discounts_old_samples():
    rng = np.random.default_rng(4)
    twist, proper = exciting_samples(rng, 5)
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET)
    forgetting = PayloadIdentifier(PayloadConfig(forgetting_factor=0.9))
    forgetting.add(twist[:3], proper[:3], wrench[:3])
    forgetting.add(twist[3:], proper[3:], wrench[3:])
    old, new = PayloadIdentifier(), PayloadIdentifier()
    old.add(twist[:3], proper[:3], wrench[:3])
    new.add(twist[3:], proper[3:], wrench[3:])
    expected = old.statistics.copy()
    expected.scale(0.9**2)
    expected.merge(new.statistics)
    np.testing.assert_allclose(forgetting.statistics.information, expected.information)
    np.testing.assert_allclose(forgetting.statistics.moment, expected.moment)
    assert forgetting.statistics.samples == pytest.approx(0.9**2 * 3 + 2)


def test_sliding_window_keeps_the_latest_blocks():
    rng = np.random.default_rng(8)
    rows = [random_rows(rng, 6) for _ in range(7)]
    window = SlidingWindow(7, block_samples=2, max_blocks=2)
    for a, b, w in rows:
        window.add(a, b, w, samples=1)
    # Blocks (1, 2), (3, 4), (5, 6) were completed, the first one left; 7 is the current one.
    expected = SufficientStatistics(7)
    for a, b, w in rows[2:]:
        expected.add(a, b, w, samples=1)
    got = window.statistics
    np.testing.assert_allclose(got.information, expected.information, rtol=1e-12)
    np.testing.assert_allclose(got.moment, expected.moment, rtol=1e-12)
    assert got.energy == pytest.approx(expected.energy, rel=1e-12)
    assert got.samples == 5
    # The returned statistics are a copy.
    got.scale(0.0)
    assert window.statistics.samples == 5
    with pytest.raises(SampleError):
        SlidingWindow(7, block_samples=0, max_blocks=2)


def test_windowed_identifier_follows_a_payload_change():
    other = BodyParameters.from_mass_com_inertia(0.6, [0.03, 0.0, 0.04],
                                                 np.diag([8e-4, 6e-4, 5e-4]))
    rng = np.random.default_rng(10)
    config = PayloadConfig(method="least_squares", window_samples=40, block_samples=10)
    identifier = PayloadIdentifier(config)
    for body in (PAYLOAD, other):
        for _ in range(10):
            twist, proper = exciting_samples(rng, 10)
            identifier.add(twist, proper, predicted_wrench(body.pi, twist, proper, OFFSET))
    assert identifier.statistics.samples <= 50
    estimate = identifier.estimate()
    assert relative_error(estimate.pi, other.pi) < 1e-8
    # Without the window the two payloads are mixed.
    everything = PayloadIdentifier(PayloadConfig(method="least_squares"))
    rng = np.random.default_rng(10)
    for body in (PAYLOAD, other):
        for _ in range(10):
            twist, proper = exciting_samples(rng, 10)
            everything.add(twist, proper, predicted_wrench(body.pi, twist, proper, OFFSET))
    assert relative_error(everything.estimate().pi, other.pi) > 1e-2


def test_identifier_statistics_use_the_measurement_model_and_weights():
    rng = np.random.default_rng(5)
    twist, proper = exciting_samples(rng, 4)
    wrench = rng.normal(size=(4, 6))
    config = PayloadConfig(force_noise_std=0.2, torque_noise_std=0.01)
    identifier = PayloadIdentifier(config)
    identifier.add(twist, proper, wrench)
    a = measurement_matrix(twist, proper, -1.0)
    w = np.tile(np.repeat([0.2**-2, 0.01**-2], 3), 4)
    np.testing.assert_allclose(identifier.statistics.information, a.T @ (w[:, None] * a))
    np.testing.assert_allclose(identifier.statistics.moment, a.T @ (w * wrench.reshape(-1)))
    identifier.reset()
    assert identifier.statistics.rows == 0


# ---------------------------------------------------------------------------------------------
# Degenerate inputs


@pytest.mark.parametrize("method", ["least_squares", "lmi_sdp"])
def test_no_samples_is_a_solver_error(method):
    identifier = PayloadIdentifier(PayloadConfig(method=method))
    identifier.add(np.empty((0, 6)), np.empty((0, 6)), np.empty((0, 6)))
    with pytest.raises(SolverError):
        identifier.estimate()


@pytest.mark.parametrize("method", ["least_squares", "lmi_sdp"])
def test_fewer_rows_than_unknowns_is_a_solver_error(method):
    identifier = clean_identifier(method, n=2)  # 12 equations, 16 unknowns
    assert identifier.statistics.rows < N_UNKNOWNS
    with pytest.raises(SolverError):
        identifier.estimate()


def test_sdp_on_empty_statistics_is_a_solver_error():
    with pytest.raises(SolverError, match="cannot determine"):
        ConsistentEstimator().solve(SufficientStatistics(N_UNKNOWNS))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": "x"},
        {"wrench_sign": "bogus"},
        {"force_noise_std": 0.0},
        {"torque_noise_std": -1.0},
        {"forgetting_factor": 0.0},
        {"forgetting_factor": 1.5},
        {"window_samples": -1},
        {"block_samples": 0},
        {"prior": (1.0, 0.0, 0.0)},
    ],
)
def test_bad_config_is_rejected(kwargs):
    with pytest.raises(InertialIdError):
        PayloadConfig(**kwargs)


@pytest.mark.parametrize("which", ["twist", "proper", "wrench"])
def test_samples_with_nan_are_a_sample_error(which):
    rng = np.random.default_rng(6)
    twist, proper = exciting_samples(rng, 3)
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET)
    {"twist": twist, "proper": proper, "wrench": wrench}[which][1, 2] = np.nan
    identifier = PayloadIdentifier()
    with pytest.raises(SampleError):
        identifier.add(twist, proper, wrench)
    assert identifier.statistics.rows == 0


def test_wrench_of_wrong_size_is_a_sample_error():
    identifier = PayloadIdentifier()
    with pytest.raises(SampleError):
        identifier.add(np.zeros((2, 6)), np.zeros((2, 6)), np.zeros((2, 5)))
    with pytest.raises(SampleError):
        identifier.add(np.zeros((2, 6)), np.zeros((2, 6)), np.zeros((3, 6)))


# ---------------------------------------------------------------------------------------------
# Condition number, the cvxpy pseudo-inertia, metrics


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-3.0, 3.0), min_size=5, max_size=5), st.integers(0, 2**31))
def test_scaled_condition_number_is_invariant_to_column_scaling(log_scales, seed):
    a = np.random.default_rng(seed).normal(size=(40, 5))
    d = 10.0 ** np.array(log_scales)
    reference = scaled_condition_number(a.T @ a)
    scaled = scaled_condition_number((a * d).T @ (a * d))
    assert scaled == pytest.approx(reference, rel=1e-8)
    unit = a / np.linalg.norm(a, axis=0)
    assert reference == pytest.approx(np.linalg.cond(unit), rel=1e-8)


def test_scaled_condition_number_of_singular_information():
    a = np.random.default_rng(0).normal(size=(20, 3))
    a = np.hstack((a, a[:, :1] + a[:, 1:2]))
    assert scaled_condition_number(a.T @ a) > 1e6
    zero_column = np.hstack((a[:, :3], np.zeros((20, 1))))
    assert scaled_condition_number(zero_column.T @ zero_column) == float("inf")


def test_cvxpy_pseudo_inertia_expression_matches_numpy():
    import cvxpy as cp

    pi = cp.Parameter(10)
    expression = pseudo_inertia_expression(pi)
    for seed in range(3):
        pi.value = np.random.default_rng(seed).normal(size=10)
        np.testing.assert_allclose(expression.value, pseudo_inertia(pi.value), atol=1e-14)


def test_parameter_errors_hand_case():
    inertia = np.diag([0.02, 0.02, 0.01])  # Frobenius norm 0.03
    truth = BodyParameters.from_mass_com_inertia(2.0, [0.1, 0.0, 0.0], inertia)
    estimate = BodyParameters.from_mass_com_inertia(
        2.2, [0.1, 0.003, 0.004], inertia + np.diag([0.0006, 0.0, 0.0])
    )
    errors = parameter_errors(estimate.pi, truth.pi)
    assert errors.mass_pct == pytest.approx(10.0)
    assert errors.com_mm == pytest.approx(5.0)
    # About the CoM (the CoMs differ, so comparing about the origin would give another number).
    assert errors.inertia_pct == pytest.approx(2.0)
    assert parameter_errors(truth.pi, truth.pi) == type(errors)(0.0, 0.0, 0.0)


def test_identifiability_reports_what_static_data_cannot_determine():
    # Gravity-only data determine the mass and the first moments but not the inertia.
    twist, proper = static_samples(400, seed=5)
    identifier = PayloadIdentifier(PayloadConfig(method="least_squares"))
    noise = np.random.default_rng(5).normal(size=(400, 6)) * np.repeat([0.1, 0.005], 3)
    identifier.add(twist, proper, predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET) + noise)
    estimate = identifier.estimate()
    assert np.all(np.isinf(estimate.std[4:])) and np.all(np.isfinite(estimate.std[:4]))
    report = identifiability(estimate)
    assert report["m"] and report["mcx"] and report["mcy"] and report["mcz"]
    assert not any(report[name] for name in ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz"))


@pytest.mark.parametrize("method", ["lmi_sdp", "manifold", "least_squares", "pls"])
def test_every_method_of_the_identifier_recovers_a_well_excited_payload(method):
    rng = np.random.default_rng(11)
    twist = rng.normal(size=(3000, 6)) * 0.5
    proper = rng.normal(size=(3000, 6)) * 2.0 + [0, 0, 9.81, 0, 0, 0]
    noise = rng.normal(size=(3000, 6)) * np.repeat([0.1, 0.005], 3)
    identifier = PayloadIdentifier(PayloadConfig(method=method))
    identifier.add(twist, proper, predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET) + noise)
    estimate = identifier.estimate()
    assert estimate.body.mass == pytest.approx(PAYLOAD.mass, rel=1e-3)
    np.testing.assert_allclose(estimate.body.com, PAYLOAD.com, atol=1e-3)
    if method in ("lmi_sdp", "manifold"):
        assert estimate.physically_consistent


# ---------------------------------------------------------------------------------------------
# The interior shortcut of the SDP


def _noisy_statistics(rng, n, noise, body=PAYLOAD):
    twist, proper = exciting_samples(rng, n)
    wrench = predicted_wrench(body.pi, twist, proper, OFFSET)
    wrench += rng.normal(size=wrench.shape) * noise * np.repeat([0.1, 0.005], 3)
    stats = SufficientStatistics(N_UNKNOWNS)
    stats.add(measurement_matrix(twist, proper), wrench.ravel(),
              np.tile(1.0 / np.repeat([0.1, 0.005], 3) ** 2, n), n)
    return stats


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([0.0, 1.0, 30.0, 3000.0]),
       st.sampled_from([0.0, 1e-6, 1e-2]), st.booleans())
@example(seed=54, noise=3000.0, prior_weight=0.01, known_offset=True)  # numba divided by 0
def test_interior_shortcut_equals_the_conic_solve(seed, noise, prior_weight, known_offset):
    """Same optimum with and without the shortcut and the dedicated solver (cvxpy alone: the
    reference); the shortcut runs only when feasible, the dedicated solver otherwise."""
    rng = np.random.default_rng(seed)
    stats = _noisy_statistics(rng, 60, noise)
    options = {"prior": PAYLOAD.pi * rng.uniform(0.5, 1.5, N_PI), "prior_weight": prior_weight,
               "known_offset": OFFSET if known_offset else None}
    fast = ConsistentEstimator(dedicated=sdp.compiled(), **options)
    conic = ConsistentEstimator(interior_shortcut=False, dedicated=False, **options)
    try:
        reference = conic.solve(stats)
    except SolverError:
        return  # nothing to compare (the conic solver gave up on a hopeless draw)
    estimate = fast.solve(stats)
    assert conic.last_solve == "sdp"
    assert estimate.physically_consistent
    x_fast = np.concatenate((estimate.pi, estimate.offset))
    x_ref = np.concatenate((reference.pi, reference.offset))
    if fast.last_solve == "sdp":  # the dedicated solver gave up (said so): cvxpy's answer
        assert fast.last_dedicated is not None and not fast.last_dedicated.ok
        assert noise > 100.0  # only on hopeless data
    if fast.last_solve in ("interior", "dedicated"):
        # The conic solver stops at its tolerance: the exact minimiser's objective (data
        # residual + Euclidean prior term) is no larger, to rounding of the data's energy.
        weights = prior_weight * prior_scale(stats.information)

        def objective(x):
            return stats.residual(x) + float(weights @ (x[:N_PI] - options["prior"]) ** 2)

        # The shortcut is exact; the dedicated solver stops at a relative gap of 1e-12 of
        # its own (scaled) objective, within 1e-9 of the reference's value.
        slack = 1e-12 * stats.energy if fast.last_solve == "interior" else 1e-9 * abs(
            objective(x_ref))
        assert objective(x_fast) <= objective(x_ref) + slack
        if noise <= 30.0:  # beyond, the optimum is flat: equal objectives, not equal x
            np.testing.assert_allclose(x_fast, x_ref, rtol=1e-4,
                                       atol=1e-6 * np.abs(x_ref).max())
    else:
        np.testing.assert_allclose(x_fast, x_ref)


@pytest.mark.parametrize("dedicated", [False, True])
def test_interior_shortcut_is_taken_on_good_data_and_not_on_infeasible_data(dedicated):
    rng = np.random.default_rng(5)
    estimator = ConsistentEstimator(dedicated=dedicated)
    estimator.solve(_noisy_statistics(rng, 200, 1.0))
    assert estimator.last_solve == "interior"
    # A body whose least-squares fit violates J >= 0: a 'mass' with negative inertia.
    body = BodyParameters.from_pi(PAYLOAD.pi * np.r_[np.ones(4), -np.ones(6)])
    estimate = estimator.solve(_noisy_statistics(rng, 200, 1.0, body))
    assert estimator.last_solve == ("dedicated" if dedicated and sdp.compiled() else "sdp")
    assert estimate.physically_consistent
