"""Small dense linear algebra at the solver's batch rate.

numpy's and scipy's wrappers check, sort and broadcast before LAPACK runs; on the 6x6 to
17x17 matrices the solver factors after every batch (up to 200 times a second) that costs
more than the factorisation. These are the same computations with less around them, each
tested against the library call it replaces (``test/core/test_linalg.py``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from numpy.typing import NDArray


def hermitian_pinv(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``numpy.linalg.pinv(a, hermitian=True)`` of a symmetric ``a`` (n, n): the eigenvalues
    whose magnitude is at most ``n * eps`` times the largest are dropped, as numpy's default
    ``rtol`` does."""
    w, u = np.linalg.eigh(a)
    magnitude = np.abs(w)
    cutoff = a.shape[-1] * np.finfo(float).eps * (magnitude.max() if w.size else 0.0)
    with np.errstate(divide="ignore"):
        inverse = np.where(magnitude > cutoff, 1.0 / w, 0.0)
    return (u * inverse) @ u.T


def generalized_eigh(a: NDArray[np.float64], b: NDArray[np.float64]
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``scipy.linalg.eigh(a, b)`` for symmetric ``a`` and positive definite ``b``: the
    eigenvalues ``w`` (ascending) and vectors ``v`` of ``a v = w b v`` with ``v^T b v = I``,
    by the reduction LAPACK's ``sygvd`` makes (``b = L L^T``, the eigenproblem of
    ``L^-1 a L^-T``); scipy's when ``b`` is not numerically positive definite."""
    try:
        lower = np.linalg.cholesky(b)
    except np.linalg.LinAlgError:
        return scipy.linalg.eigh(a, b)
    inverse = np.linalg.inv(lower)
    w, u = np.linalg.eigh(inverse @ a @ inverse.T)
    return w, inverse.T @ u


def inverse_trace_product(a: NDArray[np.float64], b: NDArray[np.float64]) -> float | None:
    """``trace(b^-1 a)`` for symmetric ``a`` and positive definite ``b`` (n, n): the sum of
    the generalised eigenvalues of ``a v = w b v`` (:func:`generalized_eigh`), from a
    Cholesky factor and its inverse (``b^-1 = L^-T L^-1``); None when ``b`` is not
    numerically positive definite."""
    try:
        lower = np.linalg.cholesky(b)
    except np.linalg.LinAlgError:
        return None
    inverse = np.linalg.inv(lower)
    return float(np.einsum("ij,ij->", inverse.T @ inverse, a))
