"""The matched filter's per-sample evaluation, compiled with numba where it is installed.

:func:`~inertial_id.core.gathering.synchronizer.filters.matched_samples` fits each joint
window once (numpy, batched over the windows); what is left is per wrench sample: the kernel
``ghat`` of its acceleration at its stamp, the wrench smoothed by that kernel, the smoothed
kinematics and the acceleration noise. In numpy that is a dozen passes over (N, K) temporaries
(K = 133 wrench stamps per window at 1 kHz); :func:`evaluate_samples` is one pass per sample
with nothing allocated, about five times faster compiled. It is the same arithmetic as the
numpy path (:func:`~inertial_id.core.signals.hat_kernel_at` and the sums after it), which
stays the reference and the fallback without numba; a test holds the two together.

Notation as in :mod:`inertial_id.core.signals`: a window of W joint stamps ``t_k``, its
cubic fit's second-derivative weights ``gamma`` on the W - 2 second divided differences, the
hat kernel ``ghat`` piecewise linear with ``ghat(t_k) = 2 gamma_k / (t_{k+1} - t_{k-1})``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray


def evaluate_samples(at: NDArray[np.float64], which: NDArray[np.intp],
                     centre: NDArray[np.float64], scale: NDArray[np.float64],
                     gammas: NDArray[np.float64], smoothed: NDArray[np.float64],
                     knots: NDArray[np.float64], tau: NDArray[np.float64],
                     wrench: NDArray[np.float64], knot: NDArray[np.intp],
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
    (N, K) the index in the joint window of the last joint stamp at or before each ``tau``,
    and for the noise the sensor Jacobians ``jacobian`` (N, 6, n) and the position noise
    variances ``sigma2`` (N, n) (pass zero rows to skip it).
    """
    orders = gammas.shape[1]
    inner = gammas.shape[2]
    width = knots.shape[1]
    n_features = smoothed.shape[2]
    stamps = tau.shape[1]
    with_noise = jacobian.shape[0] == at.shape[0]
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
        for k in range(stamps):
            i = min(max(knot[n, k], 0), width - 2)
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
                variance[q] = norm2 * sigma2[n, q]
            for a in range(6):
                for b in range(a, 6):
                    value = 0.0
                    for q in range(variance.shape[0]):
                        value += jacobian[n, a, q] * variance[q] * jacobian[n, b, q]
                    noise[n, a, b] = value
                    noise[n, b, a] = value


def _signature(numba: Any) -> Any:
    """One signature of read-only inputs of any strides (numba's ``A`` layout), compiled
    once: the wrench windows are read-only strided views of the gatherer's buffer in one
    batch and copies in another, and numba takes a writable array where a read-only one is
    declared."""
    types = numba.types

    def given(dtype: Any, ndim: int) -> Any:
        return types.Array(dtype, ndim, "A", readonly=True)

    f8, ip = types.float64, types.intp
    inputs = (given(f8, 1), given(ip, 1), given(f8, 1), given(f8, 1), given(f8, 3),
              given(f8, 3), given(f8, 2), given(f8, 2), given(f8, 3), given(ip, 2),
              given(f8, 3), given(f8, 3), given(f8, 2))
    outputs = (types.Array(f8, 2, "A"), types.Array(f8, 2, "A"), types.Array(f8, 3, "A"))
    return types.void(*inputs, *outputs)


_COMPILED: list[Callable[..., None] | None] = []
_LOCK = threading.Lock()


def compiled_kernel() -> Callable[..., None] | None:
    """:func:`evaluate_samples` compiled (numba, cached on disk beside this file or in
    ``NUMBA_CACHE_DIR``: a second or two the first time, then loaded), or None without numba.
    The first call compiles or loads it; later calls return it."""
    with _LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
    return _COMPILED[0]


def _compile() -> Callable[..., None] | None:
    try:
        import numba
    except ImportError:
        return None
    jit: Any = numba.njit(_signature(numba), cache=True, nogil=True, error_model="numpy")
    return jit(evaluate_samples)  # type: ignore[no-any-return]
