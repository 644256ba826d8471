"""The matched filter's fits and per-sample evaluation, compiled with numba where it is
installed.

:func:`~inertial_id.core.gathering.synchronizer.filters.matched_samples` fits each joint
window once, then evaluates each wrench sample: the kernel ``ghat`` of its acceleration at its
stamp, the wrench smoothed by that kernel, the smoothed kinematics and the acceleration noise.
In numpy that is a dozen passes over (N, K) temporaries (K = 133 wrench stamps per window at
1 kHz) and batched products of small matrices; compiled, :func:`fit_windows` is one pass per
joint window and :func:`evaluate_samples` one pass per sample, with nothing allocated. They
are the same arithmetic as the numpy path (:func:`~inertial_id.core.signals.fit_projections`,
:func:`~inertial_id.core.signals.second_difference_weights`,
:func:`~inertial_id.core.signals.hat_kernel_at` and the sums after it), which stays the
reference and the fallback without numba; a test holds the two together.

Notation as in :mod:`inertial_id.core.signals`: a window of W joint stamps ``t_k``, its
cubic fit's second-derivative weights ``gamma`` on the W - 2 second divided differences, the
hat kernel ``ghat`` piecewise linear with ``ghat(t_k) = 2 gamma_k / (t_{k+1} - t_{k-1})``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray


def fit_windows(times: NDArray[np.float64], features: NDArray[np.float64],
                projection: NDArray[np.float64], centre: NDArray[np.float64],
                scale: NDArray[np.float64], gammas: NDArray[np.float64],
                smoothed: NDArray[np.float64]) -> None:
    """Fill, for M joint windows of W stamps ``times`` (M, W) s, the least-squares
    ``projection`` (M, p + 1, W) of a polynomial of order p in the scaled time
    ``s = (t - centre) / scale`` (``centre`` the middle stamp, ``scale`` the largest distance
    from it; :func:`~inertial_id.core.signals.fit_projections`), the second-derivative
    weights ``gammas`` (M, p - 1, W - 2) of its terms of order 2 .. p
    (:func:`~inertial_id.core.signals.second_difference_weights`) and the ``features``
    (M, W - 2, F) smoothed by them, ``smoothed`` (M, p - 1, F)."""
    width = times.shape[1]
    terms = projection.shape[1]
    inner = width - 2
    vander = np.empty((terms, width))
    gram = np.empty((terms, terms))
    pivot = np.empty(terms)
    lower = np.zeros((terms, terms))
    inverse = np.empty((terms, terms))
    step = np.empty(width - 1)
    for m in range(times.shape[0]):
        middle = times[m, width // 2]
        unit = 0.0
        for k in range(width):
            unit = max(unit, abs(times[m, k] - middle))
        if unit == 0.0:
            unit = 1.0
        centre[m], scale[m] = middle, unit
        per_unit = 1.0 / unit
        for k in range(width):
            vander[0, k] = 1.0
            vander[1, k] = (times[m, k] - middle) * per_unit
            for j in range(2, terms):
                vander[j, k] = vander[j - 1, k] * vander[1, k]
        # The normal matrix (s in [-1, 1]: well conditioned) by its Cholesky factor L, in
        # place (lower triangle; ``pivot`` the inverse of its diagonal).
        for a in range(terms):
            for b in range(a + 1):
                value = 0.0
                for k in range(width):
                    value += vander[a, k] * vander[b, k]
                for c in range(b):
                    value -= gram[a, c] * gram[b, c]
                if a == b:
                    gram[a, a] = np.sqrt(value)
                    pivot[a] = 1.0 / gram[a, a]
                else:
                    gram[a, b] = value * pivot[b]
        # gram^-1 = L^-T L^-1 from the factor's inverse (lower), then P = gram^-1 V.
        for a in range(terms):
            lower[a, a] = pivot[a]
            for b in range(a):
                value = 0.0
                for c in range(b, a):
                    value -= gram[a, c] * lower[c, b]
                lower[a, b] = value * pivot[a]
        for a in range(terms):
            for b in range(terms):
                value = 0.0
                for c in range(max(a, b), terms):
                    value += lower[c, a] * lower[c, b]
                inverse[a, b] = value
        for a in range(terms):
            for k in range(width):
                value = 0.0
                for b in range(terms):
                    value += inverse[a, b] * vander[b, k]
                projection[m, a, k] = value
        for k in range(width - 1):
            step[k] = times[m, k + 1] - times[m, k]
        for j in range(terms - 2):
            running, weighted = 0.0, 0.0
            for k in range(inner):
                running += projection[m, j + 2, k]
                weighted += running * step[k]
                gammas[m, j, k] = weighted * 0.5 * (step[k] + step[k + 1])
            smoothed[m, j, :] = 0.0
            for k in range(inner):
                weight = gammas[m, j, k]
                for f in range(features.shape[2]):
                    smoothed[m, j, f] += weight * features[m, k, f]


def evaluate_samples(at: NDArray[np.float64], which: NDArray[np.intp],
                     centre: NDArray[np.float64], scale: NDArray[np.float64],
                     gammas: NDArray[np.float64], smoothed: NDArray[np.float64],
                     knots: NDArray[np.float64], tau: NDArray[np.float64],
                     wrench: NDArray[np.float64], knot: NDArray[np.intp],
                     window_start: NDArray[np.intp],
                     projection: NDArray[np.float64], jacobian: NDArray[np.float64],
                     sigma2: NDArray[np.float64], filtered: NDArray[np.float64],
                     wrench_out: NDArray[np.float64], noise: NDArray[np.float64]) -> None:
    """Fill ``filtered`` (N, F), ``wrench_out`` (N, 6) and, when ``jacobian`` has N rows,
    ``noise`` (N, 6, 6) for N wrench samples.

    Per joint window m (M of them, W stamps ``knots`` (M, W), s): the scaled time's
    ``centre`` and ``scale`` (M,), the second-derivative weights ``gammas`` (M, p - 1, W - 2)
    of the polynomial terms of order 2 .. p, the features smoothed by them ``smoothed``
    (M, p - 1, F) and the fit's ``projection`` (M, p + 1, W). Per sample n: its stamp ``at``,
    its window ``which``, the K wrench stamps ``tau`` (N, K) and wrenches ``wrench``
    (N, 6, K) of its wrench window (N, 6 components, K stamps; any strides), ``knot``
    (N, K) the index of the last joint stamp at or before each ``tau`` in the record whose
    index ``window_start`` (M,) each joint window starts at; for the noise, per joint window,
    the sensor Jacobians ``jacobian`` (M, 6, n) and the position noise variances ``sigma2``
    (M, n) (pass zero rows to skip it).
    """
    orders = gammas.shape[1]
    inner = gammas.shape[2]
    width = knots.shape[1]
    n_features = smoothed.shape[2]
    stamps = tau.shape[1]
    with_noise = jacobian.shape[0] > 0
    basis = np.empty(orders)
    peaks = np.zeros(width)
    total6 = np.empty(6)
    variance = np.empty(sigma2.shape[1])
    for n in range(at.shape[0]):
        m = which[n]
        unit = scale[m]
        s = (at[n] - centre[m]) / unit
        for j in range(orders):
            power = j + 2
            basis[j] = power * (power - 1) * s ** (power - 2) / unit**2
        for f in range(n_features):
            value = 0.0
            for j in range(orders):
                value += basis[j] * smoothed[m, j, f]
            filtered[n, f] = value
        for k in range(inner):
            g = 0.0
            for j in range(orders):
                g += basis[j] * gammas[m, j, k]
            peaks[k + 1] = 2.0 * g / (knots[m, k + 2] - knots[m, k])
        total = 0.0
        total6[:] = 0.0
        first = window_start[m]
        for k in range(stamps):
            i = min(max(knot[n, k] - first, 0), width - 2)
            t0 = knots[m, i]
            fraction = min(max((tau[n, k] - t0) / (knots[m, i + 1] - t0), 0.0), 1.0)
            kernel = peaks[i] * (1.0 - fraction) + peaks[i + 1] * fraction
            if k == 0:
                spacing = 0.5 * (tau[n, 1] - tau[n, 0])
            elif k == stamps - 1:
                spacing = 0.5 * (tau[n, k] - tau[n, k - 1])
            else:
                spacing = 0.5 * (tau[n, k + 1] - tau[n, k - 1])
            weight = kernel * spacing
            total += weight
            for c in range(6):
                total6[c] += weight * wrench[n, c, k]
        for c in range(6):
            wrench_out[n, c] = total6[c] / total
        if with_noise:
            norm2 = 0.0
            for w in range(width):
                h = 0.0
                for j in range(orders):
                    h += basis[j] * projection[m, j + 2, w]
                norm2 += h * h
            for q in range(variance.shape[0]):
                variance[q] = norm2 * sigma2[m, q]
            for a in range(6):
                for b in range(a, 6):
                    value = 0.0
                    for q in range(variance.shape[0]):
                        value += jacobian[m, a, q] * variance[q] * jacobian[m, b, q]
                    noise[n, a, b] = value
                    noise[n, b, a] = value


def _array(numba: Any, ndim: int, readonly: bool, integer: bool = False) -> Any:
    """numba's type of an input array: read-only and of any strides (``A`` layout), so that
    one compiled version takes strided views and copies alike, and a writable array where a
    read-only one is declared (the gatherer's windows are read-only views of its buffers);
    or of an output: writable and C-contiguous (allocated by the caller)."""
    types = numba.types
    dtype = types.intp if integer else types.float64
    return types.Array(dtype, ndim, "A" if readonly else "C", readonly=readonly)


_COMPILED: list[tuple[Callable[..., None], Callable[..., None]] | None] = []
_LOCK = threading.Lock()


def compiled_kernel() -> tuple[Callable[..., None], Callable[..., None]] | None:
    """:func:`fit_windows` and :func:`evaluate_samples` compiled (numba, cached on disk
    beside this file or in ``NUMBA_CACHE_DIR``: a few seconds the first time, then loaded),
    or None without numba. The first call compiles or loads them; later calls return them."""
    with _LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
    return _COMPILED[0]


def _compile() -> tuple[Callable[..., None], Callable[..., None]] | None:
    try:
        import numba
    except ImportError:
        return None

    def given(ndim: int, integer: bool = False) -> Any:
        return _array(numba, ndim, True, integer)

    def filled(ndim: int) -> Any:
        return _array(numba, ndim, False)

    jit: Any = functools.partial(numba.njit, cache=True, nogil=True, error_model="numpy")
    windows = jit(numba.types.void(given(2), given(3), filled(3), filled(1), filled(1),
                                   filled(3), filled(3)))(fit_windows)
    samples = jit(numba.types.void(
        given(1), given(1, True), given(1), given(1), given(3), given(3), given(2), given(2),
        given(3), given(2, True), given(1, True), given(3), given(3), given(2), filled(2),
        filled(2), filled(3)))(evaluate_samples)
    return windows, samples
