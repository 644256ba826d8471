"""Tests of the block-robust covariance (core/covariance.py) and its use by the estimators.

Conventions: 16 unknowns ``[pi (10); offset (6)]``; one row per synthetic sample here, so a
block of B samples is B rows.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from inertial_id.core.covariance import (
    MIN_BLOCKS_PER_UNKNOWN,
    BlockList,
    RecursiveBlockScores,
    com_jacobian,
    derived_covariance,
    inertia_com_jacobian,
    robust_covariance,
    sandwich,
)
from inertial_id.core.estimate import N_UNKNOWNS
from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric
from inertial_id.core.statistics import SlidingWindow, SufficientStatistics

N = N_UNKNOWNS


def smooth_regressor(n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """(n_samples, 16) slowly varying columns: sines of random low frequencies, and ones."""
    t = np.arange(n_samples) / n_samples
    freq = rng.uniform(1.0, 15.0, N)
    phase = rng.uniform(0, 2 * np.pi, N)
    a = np.sin(2 * np.pi * freq * t[:, None] + phase)
    a[:, -1] = 1.0
    return a


def ar1(n_samples: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance AR(1) noise."""
    e = rng.normal(size=n_samples) * np.sqrt(1 - rho**2)
    out = np.empty(n_samples)
    out[0] = rng.normal()
    for k in range(1, n_samples):
        out[k] = rho * out[k - 1] + e[k]
    return out


def accumulate(a: np.ndarray, b: np.ndarray, block: int, chunk: int = 10) -> SufficientStatistics:
    """Statistics of rows ``a``, ``b`` (unit weights) added ``chunk`` samples at a time."""
    stats = SufficientStatistics(N, score_block=block)
    for start in range(0, b.size, chunk):
        part = slice(start, start + chunk)
        stats.add(a[part], b[part], np.ones(b[part].size), b[part].size)
    return stats


def explicit_meat(a: np.ndarray, b: np.ndarray, x: np.ndarray, block: int,
                  weights: np.ndarray | None = None) -> np.ndarray:
    """``sum_j (w_j A_j^T (b_j - A_j x))(...)^T`` over consecutive blocks, by brute force."""
    w = np.ones(b.size) if weights is None else weights
    meat = np.zeros((N, N))
    for start in range(0, b.size, block):
        part = slice(start, start + block)
        g = a[part].T @ (w[part] * (b[part] - a[part] @ x))
        meat += np.outer(g, g)
    return meat


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), block=st.sampled_from([10, 20, 30]),
       n_blocks=st.integers(1, 6))
def test_recursive_scores_equal_the_batch_formula(seed: int, block: int, n_blocks: int) -> None:
    """The 4th-order sums give exactly sum_j g_j g_j^T at any x, the partial block included."""
    rng = np.random.default_rng(seed)
    n = block * n_blocks + int(rng.integers(0, block))
    a, b = rng.normal(size=(n, N)), rng.normal(size=n)
    stats = accumulate(a, b, block)
    x = rng.normal(size=N)
    np.testing.assert_allclose(stats.scores.meat(x), explicit_meat(a, b, x, block),
                               rtol=1e-9, atol=1e-9)
    expected_blocks = n_blocks + (n % block > 0)
    assert stats.scores.effective_blocks == pytest.approx(expected_blocks)
    copied = stats.copy()
    np.testing.assert_allclose(copied.scores.meat(x), stats.scores.meat(x), rtol=1e-12)


def test_forgetting_weights_the_scores_by_the_square_of_the_data_weights() -> None:
    """Scaling by f per sample: block j's score carries the weights f^(age) of its samples."""
    rng = np.random.default_rng(3)
    block, f = 10, 0.97
    a, b = rng.normal(size=(60, N)), rng.normal(size=60)
    stats = SufficientStatistics(N, score_block=block)
    for k in range(b.size):
        stats.scale(f)
        stats.add(a[k:k + 1], b[k:k + 1], np.ones(1), 1)
    weights = f ** np.arange(b.size - 1, -1, -1)
    x = rng.normal(size=N)
    np.testing.assert_allclose(stats.scores.meat(x), explicit_meat(a, b, x, block, weights),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(stats.information, (a.T * weights) @ a, rtol=1e-10)
    assert stats.scores.effective_blocks < 6  # the old blocks count for less
    assert stats.scores.effective_blocks > 1


def test_offset_elimination_maps_the_scores_like_the_statistics() -> None:
    """After eliminating the offset, the block scores are those of the reduced problem: each
    block's (c, H) mapped by P, v; their sums equal the reduced statistics."""
    rng = np.random.default_rng(5)
    block = 20
    a, b = rng.normal(size=(90, N)), rng.normal(size=90)
    stats = accumulate(a, b, block)
    h, g = stats.information.copy(), stats.moment.copy()
    solve = np.linalg.pinv(h[10:, 10:])
    p = np.zeros((N, N))
    p[:10, :10] = np.eye(10)
    p[:10, 10:] = -h[:10, 10:] @ solve
    v = np.concatenate((np.zeros(10), solve @ g[10:]))
    stats.eliminate_offset(10)
    blocks_h, blocks_c = [], []
    for start in range(0, b.size, block):
        part = slice(start, start + block)
        hj, cj = a[part].T @ a[part], a[part].T @ b[part]
        blocks_h.append(p @ hj @ p.T)
        blocks_c.append(p @ (cj - hj @ v))
    explicit = BlockList(np.array(blocks_h), np.array(blocks_c))
    np.testing.assert_allclose(np.sum(blocks_h, axis=0), stats.information, atol=1e-8)
    np.testing.assert_allclose(np.sum(blocks_c, axis=0), stats.moment, atol=1e-8)
    x = np.concatenate((rng.normal(size=10), np.zeros(6)))
    np.testing.assert_allclose(stats.scores.meat(x), explicit.meat(x), rtol=1e-8, atol=1e-8)


def test_sliding_window_scores_are_its_blocks() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(75, N)), rng.normal(size=75)
    window = SlidingWindow(N, block_samples=10, max_blocks=3)
    for k in range(0, 75, 5):
        window.add(a[k:k + 5], b[k:k + 5], np.ones(5), 5)
    stats = window.statistics
    x = rng.normal(size=N)
    # Blocks kept: samples 40-69 (three full blocks) and the current 70-74.
    expected = explicit_meat(a[40:], b[40:], x, 10)
    np.testing.assert_allclose(stats.scores.meat(x), expected, rtol=1e-9, atol=1e-9)
    assert stats.scores.effective_blocks == 4


def test_sandwich_reduces_to_the_classical_covariance_for_white_noise() -> None:
    """White homoscedastic noise: the sandwich and sigma^2 (A^T A)^-1 agree (within the
    sampling error of a 400-block meat and its G / (G - p) factor, 4 %)."""
    rng = np.random.default_rng(11)
    a = rng.normal(size=(8000, N))
    b = a @ rng.normal(size=N) + 0.3 * rng.normal(size=8000)
    robust = least_squares(accumulate(a, b, 20, chunk=20))
    plain = least_squares(accumulate(a, b, 0, chunk=20))
    assert robust.covariance_type.startswith("block sandwich")
    assert plain.covariance_type == "classical"
    ratio = np.concatenate((robust.std, robust.offset_std)) / np.concatenate(
        (plain.std, plain.offset_std))
    assert np.all(np.abs(ratio - 1.0) < 0.12), ratio


def test_reported_std_matches_the_monte_carlo_spread_under_ar1_noise() -> None:
    """Correlated noise (AR(1), rho 0.9: 19 samples of integrated correlation) on smooth
    regressors, blocks of 150 samples: the block sandwich's std matches the spread of the
    estimates over 120 data sets; the classical one is far too small (so this test fails for
    a covariance that assumes white noise)."""
    rng = np.random.default_rng(13)
    a = smooth_regressor(6000, rng)
    truth = rng.normal(size=N)
    estimates, robust_std, classical_std = [], [], []
    for _ in range(120):
        b = a @ truth + 0.5 * ar1(6000, 0.9, rng)
        robust = least_squares(accumulate(a, b, 150, chunk=150))
        estimates.append(np.concatenate((robust.pi, robust.offset)))
        robust_std.append(np.sqrt(np.diag(robust.covariance)))
        classical_std.append(np.sqrt(np.diag(least_squares(accumulate(a, b, 0, 100)).covariance)))
    spread = np.std(estimates, axis=0, ddof=1)
    ratio = np.mean(robust_std, axis=0) / spread
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio
    assert 0.92 < np.mean(ratio) < 1.08, ratio
    assert np.all(np.mean(classical_std, axis=0) / spread < 0.5)
    z = (np.array(estimates) - truth) / np.array(robust_std)
    assert 0.9 < np.mean(np.abs(z) <= 2.0) < 0.99


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_blocks=st.integers(1, 5))
def test_recursive_leverage_equals_the_blocks(seed: int, n_blocks: int) -> None:
    """``sum_j H_j B H_j`` from the 4th-order sums equals the explicit blocks' (partial one
    included)."""
    rng = np.random.default_rng(seed)
    n = 10 * n_blocks + int(rng.integers(1, 10))
    a, b = rng.normal(size=(n, N)), rng.normal(size=n)
    stats = accumulate(a, b, 10, chunk=5)
    bread = rng.normal(size=(N, N))
    bread = bread + bread.T
    blocks = [a[k:k + 10].T @ a[k:k + 10] for k in range(0, n, 10)]
    explicit = BlockList(np.array(blocks), np.zeros((len(blocks), N)))
    expected = sum(h @ bread @ h for h in blocks)
    np.testing.assert_allclose(explicit.leverage(bread), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(stats.scores.leverage(bread), expected, rtol=1e-9, atol=1e-9)


def test_the_shrinkage_correction_is_cr1_for_alike_blocks_and_exact_in_expectation() -> None:
    """G identical blocks: each variance is scaled by G / (G - 1). Blocks that differ (white
    noise, two blocks carrying most of the information): the corrected sandwich's mean over
    2000 data sets equals the classical variance sigma^2 H^-1 within 5 %, where the plain
    sandwich is visibly short."""
    h = np.diag(np.arange(1.0, N + 1))
    g = 8
    blocks = BlockList(np.repeat(h[None], g, axis=0), np.zeros((g, N)))
    bread = np.linalg.inv(g * h)
    cov = sandwich(bread, np.eye(N), blocks.leverage(bread), g)
    np.testing.assert_allclose(np.diag(cov), np.diag(bread @ bread) * g / (g - 1))
    rng = np.random.default_rng(21)
    a = rng.normal(size=(400, N)) * np.where(np.arange(400)[:, None] < 40, 3.0, 0.5)
    bread = np.linalg.inv(a.T @ a)
    plain, corrected = [], []
    for _ in range(2000):
        stats = accumulate(a, 0.3 * rng.normal(size=400), 20, chunk=20)
        x = np.linalg.solve(stats.information, stats.moment)
        meat = stats.scores.meat(x)
        plain.append(np.diag(bread @ meat @ bread))
        corrected.append(np.diag(sandwich(bread, meat, stats.scores.leverage(bread), 20)))
    truth = 0.09 * np.diag(bread)
    np.testing.assert_allclose(np.mean(corrected, axis=0) / truth, 1.0, atol=0.05)
    assert np.max(np.mean(plain, axis=0) / truth) < 0.9


def test_few_blocks_inflate_each_classical_variance_by_its_own_design_effect() -> None:
    """Under MIN_BLOCKS_PER_UNKNOWN blocks per unknown: the classical correlations, and each
    variance times its own design effect >= 1 (the sandwich's variance where larger)."""
    rng = np.random.default_rng(17)
    a = smooth_regressor(1000, rng)
    b = a @ rng.normal(size=N) + ar1(1000, 0.95, rng)
    blocks = int(MIN_BLOCKS_PER_UNKNOWN * N) - 5
    stats = accumulate(a, b, 1000 // blocks, chunk=1000 // blocks)
    robust = least_squares(stats)
    plain = least_squares(accumulate(a, b, 0))
    assert robust.covariance_type.startswith("classical x design effect per unknown")
    std, plain_std = np.sqrt(np.diag(robust.covariance)), np.sqrt(np.diag(plain.covariance))
    np.testing.assert_allclose(robust.covariance / np.outer(std, std),
                               plain.covariance / np.outer(plain_std, plain_std), atol=1e-9)
    effect = (std / plain_std) ** 2
    assert np.all(effect >= 1.0 - 1e-12) and effect.max() > 1.5  # correlated noise is caught
    assert effect.max() / effect.min() > 1.5  # and not alike in every direction
    x = np.concatenate((robust.pi, robust.offset))
    scores = stats.scores
    bread = np.linalg.inv(stats.information)
    sandwich_var = np.diag(sandwich(bread, scores.meat(x), scores.leverage(bread),
                                    scores.effective_blocks))
    larger = sandwich_var > np.diag(plain.covariance)
    np.testing.assert_allclose(np.diag(robust.covariance)[larger], sandwich_var[larger],
                               rtol=1e-6)


def test_few_blocks_never_report_a_zero_variance_the_sandwich_does_not_have() -> None:
    """A classical variance of zero (a residual of zero) cannot be scaled by a design effect:
    the sandwich is reported instead of a std of 0."""
    rng = np.random.default_rng(23)
    blocks = 10
    informations = np.array([np.diag(rng.uniform(1.0, 2.0, N)) for _ in range(blocks)])
    scores = BlockList(informations, rng.normal(size=(blocks, N)))
    bread = np.linalg.inv(informations.sum(axis=0))
    x = np.zeros(N)
    covariance, kind = robust_covariance(bread, scores.meat(x), scores.leverage(bread), scores,
                                         np.zeros((N, N)))
    assert kind.startswith("block sandwich (classical variance zero)")
    assert np.all(np.diag(covariance) > 0.0)
    np.testing.assert_allclose(covariance, sandwich(bread, scores.meat(x),
                                                    scores.leverage(bread), blocks))


def test_an_undetermined_unknown_keeps_the_others_design_effects() -> None:
    """Two identical columns: those unknowns get infinite variance, and the others keep the
    classical correlations with their design effects (not the few-block sandwich)."""
    rng = np.random.default_rng(29)
    a = smooth_regressor(1000, rng)
    a[:, 11] = a[:, 10]
    b = a @ rng.normal(size=N) + ar1(1000, 0.95, rng)
    estimate = least_squares(accumulate(a, b, 100, chunk=100))
    assert estimate.covariance_type.startswith("classical x design effect per unknown")
    std = np.sqrt(np.diag(estimate.covariance))
    assert np.all(np.isinf(std[10:12]))
    determined = np.r_[0:10, 12:N]
    assert np.all(np.isfinite(std[determined]) & (std[determined] > 0.0))


@st.composite
def bodies(draw: st.DrawFn) -> BodyParameters:
    """Physically consistent bodies: mass, CoM within 20 cm, a rotated box inertia."""
    mass = draw(st.floats(0.05, 10.0))
    com = np.array(draw(st.lists(st.floats(-0.2, 0.2), min_size=3, max_size=3)))
    sides = np.array(draw(st.lists(st.floats(0.01, 0.5), min_size=3, max_size=3)))
    a, b, c = sides
    box = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    r = Rotation.from_rotvec(draw(st.lists(st.floats(-3, 3), min_size=3, max_size=3)))
    rot = r.as_matrix()
    return BodyParameters.from_mass_com_inertia(mass, com, rot @ box @ rot.T)


def _central_difference(fn, pi: np.ndarray, steps: np.ndarray) -> np.ndarray:
    columns = []
    for k in range(10):
        d = np.zeros(10)
        d[k] = steps[k]
        columns.append((fn(pi + d) - fn(pi - d)) / (2 * steps[k]))
    return np.array(columns).T


@settings(max_examples=60, deadline=None)
@given(body=bodies())
def test_delta_method_jacobians_match_finite_differences(body: BodyParameters) -> None:
    """d c / d pi and d I_C / d pi (order xx xy xz yy yz zz) against central differences."""
    pi = body.pi.copy()
    steps = 1e-6 * np.maximum(np.abs(pi), 1e-3)
    com = _central_difference(lambda p: BodyParameters(p).com, pi, steps)
    inertia = _central_difference(
        lambda p: vector_from_symmetric(BodyParameters(p).inertia_com), pi, steps)
    np.testing.assert_allclose(com_jacobian(pi), com, rtol=1e-5, atol=1e-6)
    scale = np.abs(inertia).max()
    np.testing.assert_allclose(inertia_com_jacobian(pi), inertia, rtol=1e-5,
                               atol=1e-6 * scale)


def test_derived_std_matches_the_monte_carlo_spread_of_com_and_inertia() -> None:
    """Small Gaussian errors on pi: the delta-method std of the CoM and of the inertia about
    the CoM match the spread of the transformed samples."""
    rng = np.random.default_rng(19)
    body = BodyParameters.from_mass_com_inertia(1.2, [0.02, -0.03, 0.05], [4e-3, 2e-4, -1e-4,
                                                                            6e-3, 3e-4, 5e-3])
    root = rng.normal(size=(10, 10)) * np.concatenate(([1e-3], np.full(3, 1e-4),
                                                        np.full(6, 2e-5)))[:, None]
    cov = root @ root.T
    draws = rng.multivariate_normal(body.pi, cov, size=20000)
    coms = draws[:, 1:4] / draws[:, :1]
    inertias = np.array([vector_from_symmetric(BodyParameters(p).inertia_com) for p in draws])
    com_std = np.sqrt(np.diag(derived_covariance(com_jacobian(body.pi), cov)))
    inertia_std = np.sqrt(np.diag(derived_covariance(inertia_com_jacobian(body.pi), cov)))
    np.testing.assert_allclose(com_std, coms.std(axis=0), rtol=0.05)
    np.testing.assert_allclose(inertia_std, inertias.std(axis=0), rtol=0.05)


def test_undetermined_entries_give_infinite_derived_std() -> None:
    cov = np.eye(10) * 1e-6
    cov[0, 0] = np.inf
    pi = BodyParameters.from_mass_com_inertia(1.0, [0.02, -0.01, 0.1], np.eye(3) * 1e-3).pi
    out = derived_covariance(com_jacobian(pi), cov)
    assert np.all(np.isinf(np.diag(out)))
    cov = np.eye(10) * 1e-6
    cov[9, 9] = np.inf
    inertia = np.diag(derived_covariance(inertia_com_jacobian(pi), cov))
    assert np.isinf(inertia[5]) and np.all(np.isfinite(inertia[:5]))


def test_recursive_scores_scale_and_merge() -> None:
    rng = np.random.default_rng(23)
    h = [(lambda m: m @ m.T)(rng.normal(size=(N, N))) for _ in range(3)]
    c = [rng.normal(size=N) for _ in range(3)]
    one, two = RecursiveBlockScores(N), RecursiveBlockScores(N)
    one.add_block(h[0], c[0])
    two.add_block(h[1], c[1])
    two.add_block(h[2], c[2])
    one.scale(0.5)
    one.merge(two)
    x = rng.normal(size=N)
    weights = [0.5, 1.0, 1.0]
    expected = sum(w * w * np.outer(cj - hj @ x, cj - hj @ x)
                   for w, hj, cj in zip(weights, h, c, strict=True))
    np.testing.assert_allclose(one.meat(x), expected, rtol=1e-10)
    assert one.effective_blocks == pytest.approx(2.5**2 / 2.25)
