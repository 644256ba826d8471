"""Signal conditioning: Savitzky-Golay (local polynomial) smoothing and differentiation.

A Savitzky-Golay filter fits a polynomial of order ``p`` by least squares to a window of
samples and evaluates it, or its derivatives, at a point. Fitting on the real sample stamps
instead of assuming a fixed period keeps it exact under timing jitter; with uniform stamps it
is the classical filter. Evaluated at the window centre it has zero phase, so its output is
delayed by half a window: a fixed lag that is the same for every signal filtered alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import factorial

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import SampleError


@dataclass(frozen=True)
class PolynomialFits:
    """Least-squares polynomials of N windows of samples, ready to evaluate.

    ``coefficients`` (N, p+1, n) of n signals in the scaled time ``s = (t - centre) / scale``,
    ``centre`` and ``scale`` (N,) in s.
    """

    coefficients: NDArray[np.float64]
    centre: NDArray[np.float64]
    scale: NDArray[np.float64]

    def evaluate(self, at: NDArray[np.float64], derivatives: Sequence[int] = (0,),
                 windows: NDArray[np.intp] | None = None) -> list[NDArray[np.float64]]:
        """Values and time derivatives at ``at`` (M,) s: one (M, n) array per requested
        order (0: value, 1: d/dt, 2: d^2/dt^2), in units per second^k. ``windows`` (M,)
        picks the fit for each time (default: fit i for time i)."""
        c, centre, scale = self.coefficients, self.centre, self.scale
        if windows is not None:
            c, centre, scale = c[windows], centre[windows], scale[windows]
        order = c.shape[1] - 1
        s = (at - centre) / scale
        results = []
        for d in derivatives:
            basis = np.zeros((s.size, order + 1))
            for k in range(d, order + 1):
                basis[:, k] = factorial(k) / factorial(k - d) * s ** (k - d)
            basis /= scale[:, None] ** d
            results.append(np.einsum("nk,nkj->nj", basis, c))
        return results


def fit_polynomials(times: NDArray[np.float64], values: NDArray[np.float64],
                    order: int) -> PolynomialFits:
    """Batched least-squares polynomial fits of order ``order``.

    ``times`` (N, W) are the stamps of N windows of W samples (s), ``values`` (N, W, n) the
    samples of n signals. Each window's time is centred on its middle stamp and scaled by its
    half span, which keeps the normal equations well conditioned.
    """
    projections, centre, scale = fit_projections(times, order)
    return PolynomialFits(projections @ values, centre, scale)  # (N, p+1, n)


def local_polynomial(
    times: NDArray[np.float64],
    values: NDArray[np.float64],
    at: NDArray[np.float64],
    order: int,
    derivatives: Sequence[int] = (0,),
) -> list[NDArray[np.float64]]:
    """Batched least-squares polynomial fits, evaluated with their time derivatives.

    ``times`` (N, W) are the stamps of N windows of W samples, ``values`` (N, W, n) the
    samples of n signals, ``at`` (N,) the evaluation times (s). Returns one (N, n) array per
    requested derivative order (0: value, 1: d/dt, 2: d^2/dt^2), in SI units per second^k.
    """
    return fit_polynomials(times, values, order).evaluate(at, derivatives)


def savitzky_golay(
    times: NDArray[np.float64], values: NDArray[np.float64], window: int, order: int,
    derivative: int = 0,
) -> NDArray[np.float64]:
    """Offline (non-causal) Savitzky-Golay smoothing or differentiation of a whole record.

    ``times`` (N,) ascending, ``values`` (N, n). Each sample is evaluated from the ``window``
    samples centred on it (shifted inwards at the ends of the record). Returns (N, n).
    """
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    if window % 2 == 0 or window > t.size:
        raise SampleError(f"window must be odd and at most {t.size} samples, got {window}")
    half = window // 2
    first = np.clip(np.arange(t.size) - half, 0, t.size - window)
    windows = first[:, None] + np.arange(window)
    (result,) = local_polynomial(t[windows], y[windows], t, order, (derivative,))
    return result


# --- matched filtering ----------------------------------------------------------------------
#
# A Savitzky-Golay second derivative is a weighted sum ``sum_k d_k q_k`` of the window's
# samples whose weights annihilate constants and lines. Summing by parts twice writes it as a
# weighted sum of the samples' second divided differences,
#
#     sum_k d_k q_k = sum_k gamma_k D_k,   D_k = 2 q[t_{k-1}, t_k, t_{k+1}],
#
# (k over the window's interior), and ``D_k`` is the integral of ``q''`` against the unit-area
# hat on ``[t_{k-1}, t_{k+1}]`` (Peano). So the filter's acceleration is exactly
# ``int ghat(s) q''(s) ds`` with ``ghat = sum_k gamma_k hat_k`` piecewise linear and of unit
# area: the acceleration is the true one smoothed by ``ghat``. A wrench smoothed by the same
# ``ghat``, and kinematics computed sample by sample and smoothed by the same ``gamma``, obey
# the rigid-body equation exactly; a polynomial fit's value does not, which biased the inertia.


def fit_projections(times: NDArray[np.float64], order: int
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The least-squares projections of N windows: ``coefficients = P @ values``.

    ``times`` (N, W). Returns ``P`` (N, p+1, W) in the scaled time ``s = (t - centre) /
    scale`` of :func:`fit_polynomials`, ``centre`` and ``scale`` (N,).
    """
    n_windows, width = times.shape
    if width <= order:
        raise SampleError(f"{width} samples cannot fit a polynomial of order {order}")
    centre = times[:, width // 2]
    offsets = times - centre[:, None]
    scale = np.max(np.abs(offsets), axis=1)
    scale[scale == 0.0] = 1.0
    vander_t = np.empty((n_windows, order + 1, width))  # (N, p+1, W): s^0 .. s^p
    vander_t[:, 0] = 1.0
    vander_t[:, 1] = offsets / scale[:, None]
    for k in range(2, order + 1):
        vander_t[:, k] = vander_t[:, k - 1] * vander_t[:, 1]
    # The scaled normal matrices (s in [-1, 1]) are well conditioned: their inverses, a
    # fraction of the time of a batched solve with W right-hand sides.
    gram = vander_t @ vander_t.transpose(0, 2, 1)
    return np.linalg.inv(gram) @ vander_t, centre, scale


def second_difference_weights(times: NDArray[np.float64],
                              weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """``gamma`` with ``sum_k weights_k q_k = sum_k gamma_k D_k`` for any ``q`` (module notes).

    ``times`` (N, W) increasing; ``weights`` (N, ..., W) annihilating constants and lines
    (e.g. rows of a polynomial fit's projection of order >= 2). Returns (N, ..., W - 2), the
    weights of the second divided differences ``D_k`` at the interior samples 1 .. W - 2.
    """
    h = np.diff(times, axis=-1)  # (N, W-1)
    extra = weights.ndim - times.ndim
    h = h.reshape(h.shape[:1] + (1,) * extra + h.shape[1:])
    e = np.cumsum(weights, axis=-1)[..., :-1]  # sum_{i<=k} d_i, k = 0 .. W-2
    f = np.cumsum(e * h, axis=-1)[..., :-1]  # k = 0 .. W-3
    return f * 0.5 * (h[..., :-1] + h[..., 1:])


def second_differences(times: NDArray[np.float64], values: NDArray[np.float64]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Three-point first derivatives and ``D_k`` (twice the second divided difference) at the
    interior samples of a record: ``times`` (N,), ``values`` (N, n) -> two (N - 2, n).

    Both are exact for quadratics, on any increasing stamps.
    """
    ta, tb, tc = times[:-2, None], times[1:-1, None], times[2:, None]
    qa, qb, qc = values[:-2], values[1:-1], values[2:]
    h0, h1 = tb - ta, tc - tb
    slope0, slope1 = (qb - qa) / h0, (qc - qb) / h1
    first = (slope0 * h1 + slope1 * h0) / (h0 + h1)
    second = 2.0 * (slope1 - slope0) / (h0 + h1)
    return first, second


def hat_kernel_at(knots: NDArray[np.float64], gamma: NDArray[np.float64],
                  at: NDArray[np.float64],
                  interval: NDArray[np.intp] | None = None) -> NDArray[np.float64]:
    """``ghat(at) = sum_k gamma_k hat_k(at)`` with unit-area hats on the window's knots.

    ``knots`` (N, W) s, ``gamma`` (N, W - 2), ``at`` (N, M) s -> (N, M) 1/s; zero outside
    the window. ``interval`` (N, M), when the caller knows it (windows cut from one record
    of stamps: one ``searchsorted`` over the record), is for each time the index of the
    last knot at or before it (any value below 0 or above W - 2 is clipped into the
    window); without it that index is found here by comparing every time with every knot,
    O(N M W).
    """
    # ghat is linear between knots with ghat(t_k) = 2 gamma_k / (t_{k+1} - t_{k-1}), 0 at ends.
    peaks = np.zeros(knots.shape)
    peaks[:, 1:-1] = 2.0 * gamma / (knots[:, 2:] - knots[:, :-2])
    n, width = knots.shape
    if interval is None:
        interval = np.sum(knots[:, None, :] <= at[:, :, None], axis=-1) - 1
    # Flat indices into the rows (take is cheaper than fancy indexing). Outside the window
    # the clipped interval and fraction land on a zero end peak: ghat is 0 there.
    flat = np.clip(interval, 0, width - 2) + width * np.arange(n)[:, None]
    knots, peaks = knots.ravel(), peaks.ravel()
    t0 = knots.take(flat)
    frac = np.clip((at - t0) / (knots.take(flat + 1) - t0), 0.0, 1.0)
    return peaks.take(flat) * (1.0 - frac) + peaks.take(flat + 1) * frac


# --- the joints' position noise (errors in variables) -----------------------------------------
#
# The filter's second derivative multiplies the encoders' noise by its weights' norm (3310 per
# rad at 500 Hz with the default 41-sample cubic evaluated 2 samples from the newest), and that
# noise in the regressor's acceleration columns shrinks least squares' estimate (errors in
# variables). Its size is estimated from the data: fourth divided differences annihilate every
# cubic on any stamps, so on a smooth motion they are the noise alone.


def fourth_differences(times: NDArray[np.float64], values: NDArray[np.float64]
                       ) -> NDArray[np.float64]:
    """Normalised fourth divided differences of a record: ``times`` (N,), ``values`` (N, n)
    -> (N - 4, n).

    Each is ``sum_i c_i q_i / ||c||`` over five consecutive samples with ``c`` the divided
    difference's weights: zero for any cubic on any increasing stamps, and of std ``sigma``
    for white noise of std ``sigma``.
    """
    if times.size < 5:
        return np.empty((0,) + values.shape[1:])
    span = np.arange(5)
    windows = np.arange(times.size - 4)[:, None] + span  # (N-4, 5)
    t = times[windows]
    gaps = t[:, :, None] - t[:, None, :]  # (N-4, 5, 5)
    gaps[:, span, span] = 1.0
    weights = 1.0 / np.prod(gaps, axis=2)
    weights /= np.linalg.norm(weights, axis=1, keepdims=True)
    return np.einsum("ki,kij->kj", weights, values[windows])


class PositionNoise:
    """A running, robust estimate of each joint's position noise std (rad or m).

    Keeps the latest ``capacity`` normalised fourth differences (:func:`fourth_differences`)
    per joint; the std is their median absolute value over 0.6745 (the median of ``|x|`` for
    a standard normal), which a few large differences (a jerk, a stamp glitch) do not move.
    Zero until ``minimum`` differences have been seen: no noise assumed without evidence. The
    median is recomputed when the count of differences reaches ``minimum``, then each time it
    has doubled or grown by ``refresh`` (about once a second at 500 Hz): at fixed counts, so
    the std after a given difference does not depend on how the record was split into calls.
    """

    MAD_TO_STD = 0.6744897501960817

    def __init__(self, n_joints: int, capacity: int = 4096, minimum: int = 25,
                 refresh: int = 500) -> None:
        self._values = np.zeros((capacity, n_joints))
        self._count = 0
        self._minimum = minimum
        self._refresh = min(refresh, capacity)
        self._computed_at = 0
        self._std = np.zeros(n_joints)

    @property
    def std(self) -> NDArray[np.float64]:
        """(n,) std per joint; zeros before ``minimum`` differences."""
        return self._std

    def _due(self) -> int:
        """The count of differences at which the median is recomputed next."""
        if self._computed_at == 0:
            return self._minimum
        return min(2 * self._computed_at, self._computed_at + self._refresh)

    def add(self, times: NDArray[np.float64], values: NDArray[np.float64]
            ) -> NDArray[np.float64]:
        """Samples of a stretch of the record (``times`` (N,), ``values`` (N, n)); stretches
        are taken separately (no difference spans two). Returns the std in effect after each
        of its N - 4 differences, (N - 4, n)."""
        differences = fourth_differences(times, values)
        capacity = self._values.shape[0]
        out = np.empty(differences.shape)
        k = 0
        while k < differences.shape[0]:
            take = min(differences.shape[0] - k, self._due() - self._count)
            at = (self._count + np.arange(take)) % capacity
            self._values[at] = differences[k:k + take]
            out[k:k + take] = self._std
            self._count += take
            k += take
            if self._count == self._due():
                filled = min(self._count, capacity)
                self._std = np.median(np.abs(self._values[:filled]), axis=0) / self.MAD_TO_STD
                self._computed_at = self._count
                out[k - 1] = self._std
        return out
