"""Signal conditioning: Savitzky-Golay (local polynomial) smoothing and differentiation.

A Savitzky-Golay filter fits a polynomial of order ``p`` by least squares to a window of
samples and evaluates it (or its derivatives) at a point. Fitting on the real sample stamps
instead of assuming a fixed period keeps it exact under timing jitter; with uniform stamps it
is the classical filter. Evaluated at the window centre it has zero phase lag, so the output
is delayed by half a window: a fixed lag, applied identically to every signal that must stay
in phase.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import SampleError


def polynomial_fit(
    times: ArrayLike, values: ArrayLike, centre: float, order: int
) -> tuple[NDArray[np.float64], float]:
    """Least-squares polynomial in ``s = (t - centre) / scale`` through (times, values).

    ``values`` is (W,) or (W, n) for n signals sharing the stamps. Returns the coefficients
    ``c`` ((order+1,) or (order+1, n), lowest power first) and ``scale`` (s), so that
    ``value(t) = sum_k c_k ((t - centre) / scale)^k``.
    """
    t = np.asarray(times, dtype=float) - centre
    if t.size <= order:
        raise SampleError(f"{t.size} samples cannot fit a polynomial of order {order}")
    scale = float(np.max(np.abs(t))) or 1.0
    vander = np.vander(t / scale, order + 1, increasing=True)
    coefficients, *_ = np.linalg.lstsq(vander, np.asarray(values, dtype=float), rcond=None)
    return coefficients, scale


def evaluate_polynomial(
    coefficients: NDArray[np.float64], scale: float, offsets: ArrayLike, derivative: int = 0
) -> NDArray[np.float64]:
    """The ``derivative``-th time derivative of a :func:`polynomial_fit` at ``centre + offsets``.

    Returns (len(offsets),) or (len(offsets), n).
    """
    order = coefficients.shape[0] - 1
    s = np.atleast_1d(np.asarray(offsets, dtype=float)) / scale
    result = np.zeros((s.size,) + coefficients.shape[1:])
    for k in range(derivative, order + 1):
        factor = np.prod(np.arange(k - derivative + 1, k + 1)) / scale**derivative
        term = factor * s ** (k - derivative)
        result += term.reshape((-1,) + (1,) * (coefficients.ndim - 1)) * coefficients[k]
    return result
