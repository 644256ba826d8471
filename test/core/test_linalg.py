"""The solver's small linear algebra (inertial_id.core.linalg) against the library calls it
replaces: numpy's hermitian pseudo-inverse and scipy's generalised symmetric eigenproblem
(its eigenvalues' sum too)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from inertial_id.core.linalg import generalized_eigh, hermitian_pinv, inverse_trace_product


def _symmetric(seed: int, n: int, rank: int, scale: float, indefinite: bool
               ) -> np.ndarray:
    rng = np.random.default_rng(seed)
    factor = rng.normal(size=(n, rank)) * scale
    a = factor @ factor.T
    if indefinite:
        a -= 0.5 * scale**2 * np.eye(n)
    return 0.5 * (a + a.T)


@given(seed=st.integers(0, 2**16), n=st.integers(1, 17), rank=st.integers(0, 17),
       scale=st.sampled_from([1e-9, 1e-3, 1.0, 1e4]), indefinite=st.booleans())
def test_hermitian_pinv_is_numpys(seed: int, n: int, rank: int, scale: float,
                                  indefinite: bool) -> None:
    a = _symmetric(seed, n, min(rank, n), scale, indefinite)
    expected = np.linalg.pinv(a, hermitian=True)
    got = hermitian_pinv(a)
    np.testing.assert_allclose(got, expected, rtol=1e-7,
                               atol=1e-9 * max(np.abs(expected).max(), 1e-300))


@given(seed=st.integers(0, 2**16), n=st.integers(1, 17), rank=st.integers(0, 17),
       conditioning=st.sampled_from([1.0, 1e3, 1e8]))
def test_generalized_eigh_is_scipys(seed: int, n: int, rank: int,
                                    conditioning: float) -> None:
    rng = np.random.default_rng(seed)
    a = _symmetric(seed, n, min(rank, n), 1.0, False)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    b = (q * np.geomspace(1.0, 1.0 / conditioning, n)) @ q.T
    b = 0.5 * (b + b.T)
    w, v = generalized_eigh(a, b)
    w_ref, _ = scipy.linalg.eigh(a, b)
    np.testing.assert_allclose(w, w_ref, rtol=1e-6, atol=1e-9 * max(abs(w_ref).max(), 1.0))
    np.testing.assert_allclose(v.T @ b @ v, np.eye(n), atol=1e-7)  # b-orthonormal
    np.testing.assert_allclose(a @ v, (b @ v) * w, atol=1e-6 * max(abs(w_ref).max(), 1.0))


def test_generalized_eigh_falls_back_when_b_is_not_definite() -> None:
    a = np.diag([1.0, 2.0])
    b = np.diag([1.0, -1.0])  # scipy then raises, as it always did
    with pytest.raises(np.linalg.LinAlgError):
        generalized_eigh(a, b)


@given(seed=st.integers(0, 2**16), n=st.integers(1, 22), rank=st.integers(0, 22),
       conditioning=st.sampled_from([1.0, 1e3, 1e8]), indefinite=st.booleans())
def test_inverse_trace_product_is_the_generalised_eigenvalues_sum(
        seed: int, n: int, rank: int, conditioning: float, indefinite: bool) -> None:
    rng = np.random.default_rng(seed)
    a = _symmetric(seed, n, min(rank, n), 1.0, indefinite)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    b = (q * np.geomspace(1.0, 1.0 / conditioning, n)) @ q.T
    b = 0.5 * (b + b.T)
    w_ref = scipy.linalg.eigh(a, b, eigvals_only=True)
    got = inverse_trace_product(a, b)
    assert got is not None
    assert got == pytest.approx(w_ref.sum(), rel=1e-6, abs=1e-9 * max(abs(w_ref).max(), 1.0))


def test_inverse_trace_product_is_none_when_b_is_not_definite() -> None:
    assert inverse_trace_product(np.eye(2), np.diag([1.0, -1.0])) is None
    assert inverse_trace_product(np.eye(2), np.zeros((2, 2))) is None
