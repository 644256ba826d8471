"""The filters of one batch of wrench samples, on the data under their windows
(:class:`Windows`): the plain Savitzky-Golay filter (:func:`polynomial_samples`) and the
matched one (:func:`matched_samples`), both described in
:mod:`inertial_id.core.gathering.synchronizer`;
how many wrench samples a window takes so that both streams' windows span the same time
(:func:`wrench_span`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view
from numpy.typing import NDArray

from inertial_id.core.errors import SampleError
from inertial_id.core.gathering.features import decode_features
from inertial_id.core.gathering.synchronizer.kernel import compiled_kernel
from inertial_id.core.samples import SyncedSamples
from inertial_id.core.signals import (
    PolynomialFits,
    fit_polynomials,
    fit_projections,
    hat_kernel_at,
    local_polynomial,
    second_difference_weights,
)


def median(values: NDArray[np.float64]) -> float:
    """``numpy.median`` of a non-empty 1-D array, without its per-call overhead."""
    ordered = np.sort(values)
    middle = ordered.size // 2
    if ordered.size % 2:
        return float(ordered[middle])
    return float(ordered[middle - 1] + ordered[middle]) / 2.0


class Span(NamedTuple):
    """A filter window around a sample: how many samples before it and after it."""

    before: int
    after: int

    def offsets(self) -> NDArray[np.intp]:
        """Index offsets of the window's samples from the sample's."""
        return np.arange(-self.before, self.after + 1)


def wrench_span(joint_t: NDArray[np.float64], wrench_t: NDArray[np.float64], window: int,
                order: int, lag: int, matched: bool) -> Span:
    """Wrench samples before and after a stamp so both windows span the same time
    (``matched`` filtering: at least the joint window of any stamp between two joint
    samples, so that the kernel is whole); ``window``, ``order``, ``lag`` the joints'
    filter's."""
    joint_period = median(np.diff(joint_t))
    wrench_period = median(np.diff(wrench_t)) if wrench_t.size > 1 else 0.0
    if wrench_period <= 0.0:
        return Span(order, min(order, lag))
    ratio = joint_period / wrench_period
    after = int(round(lag * ratio))
    before = max(int(round((window - 1 - lag) * ratio)), order - after)
    if matched:
        before = int(np.ceil((window - lag) * ratio)) + 1
    return Span(before, after)


def row_windows(rows: NDArray[Any], starts: NDArray[np.intp], width: int) -> NDArray[Any]:
    """(S, ..., width): the ``width`` consecutive rows of ``rows`` (R, ...) from each of
    ``starts`` ((S,), increasing), the row index last; a read-only view, not a copy, when the
    starts follow each other (consecutive samples, the usual batch)."""
    if starts.size and starts[-1] - starts[0] == starts.size - 1:
        # numpy's sliding_window_view, built directly: at the gatherer's batch rate its
        # checks cost more than the filter's arithmetic on a 5-sample batch
        first, count = int(starts[0]), int(starts.size)
        if first < 0 or first + count - 1 + width > rows.shape[0]:
            raise IndexError(f"windows of {width} rows from {first} to {first + count - 1} "
                             f"leave {rows.shape[0]} rows")
        return as_strided(rows[first:], (count, *rows.shape[1:], width),
                          (rows.strides[0], *rows.strides[1:], rows.strides[0]),
                          writeable=False)
    return sliding_window_view(rows, width, axis=0)[starts]


class Windows(NamedTuple):
    """The data under the windows of N wrench samples whose joint windows are M distinct
    ones of W joint samples each (consecutive wrenches share them: each is fitted once)."""

    at: NDArray[np.float64]
    """(N,) the wrench samples' stamps, s."""
    which: NDArray[np.intp]
    """(N,) each sample's joint window, 0 .. M - 1."""
    joint_t: NDArray[np.float64]
    """(M, W) joint stamps, s."""
    position: NDArray[np.float64]
    """(M, W, n) joint positions."""
    velocity: NDArray[np.float64] | None
    """(M, W, n) measured joint velocities, or None when they are not used."""
    wrench_t: NDArray[np.float64]
    """(N, K) wrench stamps, s."""
    wrench: NDArray[np.float64]
    """(N, 6, K) wrenches, component by component (a view of the buffer where the windows
    follow each other: :func:`row_windows`)."""
    raw: NDArray[np.float64]
    """(N, 6) the samples' own wrenches."""
    knot: NDArray[np.intp]
    """(N, K) for each wrench stamp, the index of the last joint stamp at or before it, counted
    in the record the joint windows are cut from (a view where the windows follow each
    other) ..."""
    window_start: NDArray[np.intp]
    """... and (M,) the index in that record of each joint window's first stamp: ``knot -
    window_start[which]`` is the index in the sample's joint window (-1 before the window,
    W - 1 or more after it)."""


def polynomial_samples(w: Windows, order: int) -> SyncedSamples:
    """The plain filter: joints and wrench each by a polynomial of ``order`` over their
    windows, evaluated at the samples' stamps."""
    q_fit = fit_polynomials(w.joint_t, w.position, order)
    if w.velocity is not None:
        (position,) = q_fit.evaluate(w.at, (0,), w.which)
        v_fit = fit_polynomials(w.joint_t, w.velocity, order)
        velocity, acceleration = v_fit.evaluate(w.at, (0, 1), w.which)
    else:
        position, velocity, acceleration = q_fit.evaluate(w.at, (0, 1, 2), w.which)
    (wrench,) = local_polynomial(w.wrench_t, w.wrench.transpose(0, 2, 1), w.at, order)
    return SyncedSamples(w.at, position, velocity, acceleration, wrench, w.raw)


def matched_samples(
    w: Windows,
    features: NDArray[np.float64],
    order: int,
    noise_at: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    compiled: bool = True,
) -> SyncedSamples:
    """Matched filtering: joints as the plain filter, the wrench and the sensor-frame
    kinematics (``features`` (M, W-2, F), encoded, at the windows' inner joint samples)
    smoothed by the kernel of the joints' acceleration. With ``noise_at`` (the sensor
    Jacobians (N, 6, n) and the position noise variances (N, n) at each sample's joint window)
    also the noise that position noise leaves in the smoothed acceleration (both (M, ...):
    one per joint window). The per-sample
    part runs compiled (:mod:`~inertial_id.core.gathering.synchronizer.kernel`) when numba
    is installed and ``compiled``, else in numpy (the reference)."""
    at, which = w.at, w.which
    kernel = compiled_kernel() if compiled else None
    if kernel is None:
        projection, centre, scale = fit_projections(w.joint_t, order)  # (M, p+1, W)
        # The acceleration at scaled time s is sum_m m (m-1) s^(m-2) / scale^2 (P_m q),
        # m = 2 .. p; each P_m annihilates lines, so it has second-difference weights.
        gammas = second_difference_weights(w.joint_t, projection[:, 2:, :])  # (M, p-1, W-2)
        smoothed = gammas @ features  # (M, p-1, F)
    else:
        n_windows, width = w.joint_t.shape
        if width <= order:
            raise SampleError(f"{width} samples cannot fit a polynomial of order {order}")
        projection = np.empty((n_windows, order + 1, width))
        centre, scale = np.empty(n_windows), np.empty(n_windows)
        gammas = np.empty((n_windows, order - 1, width - 2))
        smoothed = np.empty((n_windows, order - 1, features.shape[-1]))
        kernel[0](w.joint_t, features, projection, centre, scale, gammas, smoothed)
    fits = PolynomialFits(projection @ w.position, centre, scale)
    position, velocity, acceleration = fits.evaluate(at, (0, 1, 2), which)
    if w.velocity is not None:
        v_fits = PolynomialFits(projection @ w.velocity, centre, scale)
        velocity, acceleration = v_fits.evaluate(at, (0, 1), which)
    if kernel is not None:
        filtered = np.empty((at.size, features.shape[-1]))
        wrench = np.empty((at.size, 6))
        jacobian, sigma2 = noise_at if noise_at is not None else (_NO_ROWS3, _NO_ROWS2)
        noise = np.empty((at.size, 6, 6)) if noise_at is not None else _NO_ROWS3
        kernel[1](at, which, centre, scale, gammas, smoothed, w.joint_t, w.wrench_t,
                  w.wrench, w.knot, w.window_start, projection, jacobian, sigma2, filtered,
                  wrench, noise)
        twist, proper, products = decode_features(filtered)
        return SyncedSamples(at, position, velocity, acceleration, wrench, w.raw, twist,
                             proper, noise if noise_at is not None else None, products)
    s = (at - centre[which]) / scale[which]
    powers = np.arange(2, order + 1)
    basis = (powers * (powers - 1) * s[:, None] ** (powers - 2)
             / scale[which, None] ** 2)  # (N, p-1)
    filtered = np.einsum("nm,nmf->nf", basis, smoothed[which])
    gamma = np.einsum("nm,nmk->nk", basis, gammas[which])  # (N, W-2)
    tau = w.wrench_t
    interval = w.knot - w.window_start[which, None]
    weights = hat_kernel_at(w.joint_t[which], gamma, tau, interval) * _spacing(tau)
    weights /= weights.sum(axis=1, keepdims=True)
    wrench = np.einsum("nk,njk->nj", weights, w.wrench)
    twist, proper, products = decode_features(filtered)
    noise = None
    if noise_at is not None:
        # The sensor-frame noise J diag(|h|^2 sigma_q^2) J^T at each sample: h = basis .
        # P[2:] the second derivative's weights on the positions.
        jacobian, sigma2 = noise_at[0][which], noise_at[1][which]  # (N, 6, n), (N, n)
        h = np.einsum("nm,nmw->nw", basis, projection[which, 2:, :])
        variance = np.einsum("nw,nw->n", h, h)[:, None] * sigma2
        noise = np.einsum("nik,nk,njk->nij", jacobian, variance, jacobian)
    return SyncedSamples(at, position, velocity, acceleration, wrench, w.raw, twist, proper,
                         noise, products)


_NO_ROWS2, _NO_ROWS3 = np.empty((0, 0)), np.empty((0, 6, 6))
"""The compiled kernel's "no noise" (zero rows)."""


def _spacing(tau: NDArray[np.float64]) -> NDArray[np.float64]:
    """(N, K) trapezoid weights of the stamps ``tau`` (N, K): half the span of each one's
    neighbours (of its one neighbour at the ends)."""
    spacing = np.empty(tau.shape)
    spacing[:, 1:-1] = 0.5 * (tau[:, 2:] - tau[:, :-2])
    spacing[:, 0] = 0.5 * (tau[:, 1] - tau[:, 0])
    spacing[:, -1] = 0.5 * (tau[:, -1] - tau[:, -2])
    return spacing
