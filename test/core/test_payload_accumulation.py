"""PayloadIdentifier.add accumulates a batch's normal equations from its feature Gram matrix:
the same statistics (to rounding) and estimates as from the rows ``[s Y, I6]`` of
measurement_matrix, in every accumulation mode, and the same errors."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from test_regressor import assert_normal_equations_close

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.regressor import (
    angular_products,
    measurement_matrix,
    noise_information_basis,
    predicted_wrench,
)
from inertial_id.core.simulation import DEFAULT_OFFSET, default_payload

PAYLOAD = default_payload()
OFFSET = np.array(DEFAULT_OFFSET)


def simulated_batch(rng, n, sign=-1.0, products=False):
    """Twists, proper accelerations (gravity in random sensor directions plus motion), noisy
    wrenches of the default payload, acceleration-noise covariances and smoothed products."""
    rot = Rotation.random(n, random_state=rng).as_matrix()
    twist = rng.normal(size=(n, 6)) * np.repeat([0.5, 2.0], 3)
    proper = rng.normal(size=(n, 6)) * np.repeat([2.0, 8.0], 3)
    proper[:, :3] += np.einsum("nji,j->ni", rot, [0.0, 0.0, 9.81])
    smoothed = angular_products(twist[:, 3:]) * (1.0 + 0.01 * rng.normal(size=(n, 6)))
    wrench = predicted_wrench(PAYLOAD.pi, twist, proper, OFFSET, sign,
                              smoothed if products else None)
    wrench += rng.normal(size=wrench.shape) * np.repeat([0.1, 0.005], 3)
    root = rng.normal(size=(n, 6, 6)) * 1e-2
    covariance = root @ root.transpose(0, 2, 1)
    return twist, proper, wrench, covariance, (smoothed if products else None)


def add_by_rows(identifier, twist, proper, wrench, noise=None, products=None):
    """The accumulation from measurement_matrix's rows, as PayloadIdentifier.add did."""
    n = wrench.shape[0]
    rows = measurement_matrix(twist, proper, identifier.sign, products)
    weights = np.repeat([identifier.config.force_noise_std**-2,
                         identifier.config.torque_noise_std**-2], 3)
    window = identifier._window
    if window is None and identifier.config.forgetting_factor < 1.0:
        identifier._all.scale(identifier.config.forgetting_factor**n)
    information = None
    if noise is not None:
        information = np.tensordot(noise.sum(0), noise_information_basis(weights), axes=2)
    target = identifier._all if window is None else window
    target.add(rows, wrench.reshape(-1), np.tile(weights, n), n, information)


def assert_statistics_close(got, expected, rtol=1e-12):
    assert_normal_equations_close((got.information, got.moment, got.energy),
                                  (expected.information, expected.moment, expected.energy),
                                  rtol)
    np.testing.assert_allclose(got.noise_information, expected.noise_information, rtol=1e-14,
                               atol=1e-300)
    assert (got.rows, got.samples) == (expected.rows, expected.samples)
    s, e = got.scores, expected.scores
    assert (s is None) == (e is None)
    if s is not None:  # away from the solution, where the block scores do not cancel
        assert (s.weight, s.weight_squared) == (e.weight, e.weight_squared)
        for x in (np.zeros(16), np.full(16, 0.1)):
            np.testing.assert_allclose(s.meat(x), e.meat(x), rtol=rtol * 1e3,
                                       atol=rtol * 1e3 * np.abs(e.meat(x)).max())


def assert_estimates_close(got, expected, rtol=1e-10):
    """``pi`` and the offset to ``rtol`` of their largest entry; the std to ``100 rtol``: they
    come from the residual ``x^T H x - 2 x^T g + e`` and the block scores ``H_b x - g_b`` at
    the estimate, both differences of far larger terms (the residual is a small share of the
    energy), so their last digits move with the rounding of ``H``, ``g``, ``e``: summing the
    same rows in reverse order moves a replay's std by 1e-7 of itself."""
    np.testing.assert_allclose(got.pi, expected.pi, rtol=rtol,
                               atol=rtol * np.abs(expected.pi).max())
    np.testing.assert_allclose(got.offset, expected.offset, rtol=rtol,
                               atol=rtol * np.abs(expected.offset).max())
    np.testing.assert_allclose(got.std, expected.std, rtol=100 * rtol)
    assert np.all(np.abs(got.pi - expected.pi) <= 1e-9 * expected.std[:10])


MODES = {
    "cumulative": {},
    "forgetting": {"forgetting_factor": 0.999},
    "window": {"window_samples": 600, "block_samples": 200},
    "classical": {"score_block_samples": 0},
    "sensor_on_payload": {"wrench_sign": "sensor_on_payload"},
}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(sorted(MODES)),
       st.lists(st.integers(1, 500), min_size=1, max_size=5), st.booleans(), st.booleans())
def test_statistics_and_estimates_equal_the_rows(seed, mode, sizes, noisy, products):
    rng = np.random.default_rng(seed)
    config = PayloadConfig(method="least_squares", **MODES[mode])
    new, old = PayloadIdentifier(config), PayloadIdentifier(config)
    for n in sizes:
        twist, proper, wrench, noise, smoothed = simulated_batch(rng, n, new.sign, products)
        noise = noise if noisy else None
        new.add(twist, proper, wrench, noise, smoothed)
        add_by_rows(old, twist, proper, wrench, noise, smoothed)
        assert_statistics_close(new.statistics, old.statistics)
    if new.statistics.samples >= 10:
        assert_estimates_close(new.estimate(), old.estimate())


@pytest.mark.parametrize("method", ["lmi_sdp", "least_squares"])
def test_estimate_of_a_simulated_run_equals_the_rows(method):
    """Batches of 100-500 samples (a few seconds at 1 kHz), with errors in variables."""
    rng = np.random.default_rng(11)
    config = PayloadConfig(method=method)
    new, old = PayloadIdentifier(config), PayloadIdentifier(config)
    for n in (100, 250, 500, 333, 417, 120):
        twist, proper, wrench, noise, smoothed = simulated_batch(rng, n, products=True)
        new.add(twist, proper, wrench, noise, smoothed)
        add_by_rows(old, twist, proper, wrench, noise, smoothed)
    assert_statistics_close(new.statistics, old.statistics)
    assert_estimates_close(new.estimate(), old.estimate())


def test_reconfigured_noise_weights_later_batches():
    rng = np.random.default_rng(12)
    config = PayloadConfig(method="least_squares")
    new, old = PayloadIdentifier(config), PayloadIdentifier(config)
    for std in (0.1, 0.3):
        changed = PayloadConfig(method="least_squares", force_noise_std=std,
                                torque_noise_std=std / 20)
        new.reconfigure(changed)
        old.reconfigure(changed)
        twist, proper, wrench, _, _ = simulated_batch(rng, 200)
        new.add(twist, proper, wrench)
        add_by_rows(old, twist, proper, wrench)
    assert_statistics_close(new.statistics, old.statistics)


@pytest.mark.parametrize("which", ["twist", "proper", "wrench", "products"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_nan_or_inf_is_a_sample_error_that_changes_nothing(which, value, mode):
    rng = np.random.default_rng(13)
    identifier = PayloadIdentifier(PayloadConfig(method="least_squares", **MODES[mode]))
    twist, proper, wrench, _, smoothed = simulated_batch(rng, 50, products=True)
    identifier.add(twist, proper, wrench, None, smoothed)
    before = copy.deepcopy(identifier.statistics)
    inputs = {"twist": twist, "proper": proper, "wrench": wrench, "products": smoothed}
    inputs[which][7, 4] = value
    with pytest.raises(SampleError, match="NaN or inf"):
        identifier.add(twist, proper, wrench, None, smoothed)
    assert_statistics_close(identifier.statistics, before, rtol=0.0)


def test_wrong_sizes_are_errors():
    rng = np.random.default_rng(14)
    identifier = PayloadIdentifier()
    twist, proper, wrench, noise, smoothed = simulated_batch(rng, 5, products=True)
    with pytest.raises(SampleError):
        identifier.add(twist, proper, wrench[:4])
    with pytest.raises(SampleError):
        identifier.add(twist, proper, wrench[:, :5])
    with pytest.raises(SampleError):
        identifier.add(twist, proper, wrench, noise[:4])
    with pytest.raises(InertialIdError):
        identifier.add(twist, proper[:4], wrench)
    with pytest.raises(InertialIdError):
        identifier.add(twist, proper, wrench, None, smoothed[:, :5])
    assert identifier.statistics.rows == 0
    identifier.add(np.empty((0, 6)), np.empty((0, 6)), np.empty((0, 6)))
    identifier.add(twist[0], proper[0], wrench[0])  # one sample as 6-vectors
    assert identifier.statistics.samples == 1 and identifier.statistics.rows == 6
