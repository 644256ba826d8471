"""The gatherer's filter sized in time and chosen from the data: window and lag.

The Savitzky-Golay filter's second derivative (``h``, weights on the window's positions)
trades bias for noise. On a record of joint positions with stamps at rate ``r`` it estimates

- the **noise** each joint's encoders leave in the acceleration, ``sigma_q^2 |h|^2``, with
  ``sigma_q`` from fourth differences (:func:`~inertial_id.core.signals.fourth_differences`,
  robust: a median), and
- the **bias** the filter gives the motion, ``int |G(f) - 1|^2 S(f) df``: ``G`` is the
  filter's complex gain on accelerations (its frequency response over the ideal
  ``-(2 pi f)^2``, phase included, so a lag evaluated off-centre counts), ``S`` the
  acceleration's power spectrum (Welch, from second differences corrected for their own
  response) minus the encoder noise's, from the lowest frequency up to where it first stops
  standing clear of that noise,

and picks the window and lag that minimise their sum over the joints (the acceleration's mean
squared error) among those whose gain stays within :data:`GAIN_TOLERANCE` of 1 over the motion
(the root of ``int |G - 1|^2 S df / int S df``: the filter's bias relative to the motion's
acceleration, rms), with the delay ``lag / r`` at most ``max_delay``. A window given in seconds
(``window_time`` > 0) is only converted to samples at the data's rate. Either way the
choice carries its evidence: rate, motion bandwidth, predicted bias and noise, and the gain's
departure from 1 over the motion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.signal import get_window, welch

from inertial_id.core.errors import InertialIdError
from inertial_id.core.signals import (
    PolynomialFits,
    PositionNoise,
    fit_projections,
    fourth_differences,
)

MAX_WINDOW_TIME = 0.4
"""s: the longest window considered: a contact's force stays this long in the filtered wrench
(:attr:`FilterChoice.past_span`), and slow motions gain little beyond it."""
SEGMENT_TIME = 4.0
"""s of joint states per Welch segment: the decision time's whole record as one segment
(0.25 Hz resolution; the motion stands far above the noise, so its power needs no averaging
of segments, and the noise's level is modelled from the encoders, not read). Shorter segments
read the band too wide: with 2 s (0.5 Hz) a 0.11-0.44 Hz motion leaked into the 1 Hz bin and
the gain tolerance held the window at 130 ms under 1e-4 rad of encoder noise (250 ms now)."""
GAIN_TOLERANCE = 0.05
"""Largest departure of the filter's gain from 1 over the motion, weighted by the motion's own
spectrum (its rms bias relative to the acceleration's rms): among the windows that keep it,
the one of least mean squared error. Weighted by the spectrum, not the largest departure up to
the band's edge: at the spectrum's 0.5 Hz resolution a motion of 0.11-0.44 Hz leaks into the
1 Hz bin, and a gain held within 5 % there kept the window at 130 ms where the encoders' noise
(1e-4 rad) wanted 250-320 ms (the gain error at 0.44 Hz is then 4-7 %, 1 % at 130 ms). With
matched filtering the estimate sees the same gain on both sides of the rigid-body equation and
the contact monitor tests the filtered wrench too, so the gain only scales the motion's
information; the tolerance keeps the smoothed kinematics a faithful picture of the motion."""
CLEAR_OF_NOISE = 10.0
"""A frequency carries motion where the spectrum is this many times the encoders' noise: a
bin of one segment's periodogram of noise alone is exponential, above 10 times its mean with
probability 5e-5 (above 4 times, the former bound for three averaged segments: 2 %)."""
BAND_SHARE = 0.99
"""The motion bandwidth holds this share of the acceleration's power."""
MIN_SAMPLES = 32
"""Joint states the choice needs at the least."""
NO_MOTION_WINDOW_TIME = 0.1
"""s: the window when the held joint states show no motion above their noise (a robot idle
at the start): the middle of what moving recordings get (64-132 ms on the rates bench)."""
COARSE_STEPS = 40
"""Windows of the coarse pass (then every odd window between its best one's neighbours):
the cost is smooth in the window, and 1 kHz joint states have 200 odd windows under 0.4 s."""


@dataclass(frozen=True)
class FilterChoice:
    """A filter for joint states at ``rate`` (Hz): ``window`` samples (odd), evaluated ``lag``
    samples before the newest, polynomial ``order``. ``source``: ``"data"`` (chosen) or
    ``"setting"`` (explicit window). Evidence (from the data either way): ``bandwidth`` (Hz,
    :data:`BAND_SHARE` of the acceleration's power), ``bias_rms`` and ``noise_rms`` (rad/s^2,
    root of the sum over the joints), ``gain_error`` (``|G - 1|`` over the motion, rms
    weighted by its spectrum: the bias relative to the acceleration; see
    :data:`GAIN_TOLERANCE`)."""

    window: int
    lag: int
    order: int
    rate: float
    source: str
    bandwidth: float
    bias_rms: float
    noise_rms: float
    gain_error: float

    @property
    def window_time(self) -> float:
        """s spanned by the window."""
        return (self.window - 1) / self.rate

    @property
    def delay(self) -> float:
        """s from a sample's stamp to the newest joint state its filter needs."""
        return self.lag / self.rate

    @property
    def past_span(self) -> float:
        """s before a sample's stamp that its filtered wrench may average over (the window's
        samples before it, and the joint period a wrench stamp may lie after its anchor): after
        a contact ends, samples this close to it still carry its force."""
        return (self.window - self.lag) / self.rate

    def summary(self) -> str:
        """One line: the choice and its evidence."""
        return (f"filter {self.window} samples ({1e3 * self.window_time:.0f} ms) at "
                f"{self.rate:.0f} Hz, lag {self.lag} ({1e3 * self.delay:.1f} ms), order "
                f"{self.order}, from the {self.source}: motion band {self.bandwidth:.2f} Hz, "
                f"gain error {100 * self.gain_error:.2f} %, acceleration bias "
                f"{self.bias_rms:.3g} and noise {self.noise_rms:.3g} rad/s^2")

    def as_dict(self) -> dict[str, float | int | str]:
        """The choice and its evidence for reports and diagnostics (SI units)."""
        return {"window_samples": int(self.window), "window_time": float(self.window_time),
                "lag_samples": int(self.lag), "delay_time": float(self.delay),
                "order": int(self.order),
                "rate": float(self.rate), "source": self.source,
                "bandwidth": float(self.bandwidth), "bias_rms": float(self.bias_rms),
                "noise_rms": float(self.noise_rms), "gain_error": float(self.gain_error)}


def derivative_weights(window: int, lag: int, order: int, rate: float) -> NDArray[np.float64]:
    """Second-derivative weights of a least-squares polynomial of ``order`` on ``window``
    uniform samples at ``rate`` Hz, evaluated ``lag`` samples before the newest: (window,)
    in 1/s^2, oldest first."""
    return lag_derivative_weights(window, [lag], order, rate)[0]


def lag_derivative_weights(window: int, lags: Sequence[int], order: int, rate: float
                           ) -> NDArray[np.float64]:
    """:func:`derivative_weights` at each of ``lags``, (len(lags), window): one fit of the
    window, evaluated at each lag."""
    tau = (np.arange(window) - (window - 1)) / rate  # s, 0 at the newest sample
    # The gatherer's own fit: its projection's rows are the weights of each coefficient, so
    # evaluating them as if they were the coefficients gives the derivative's weights.
    fits = PolynomialFits(*fit_projections(tau[None], order))
    at = -np.asarray(lags, dtype=float) / rate
    (weights,) = fits.evaluate(at, (2,), np.zeros(at.size, dtype=np.intp))
    return weights


def acceleration_gain(weights: NDArray[np.float64], lag: int, rate: float,
                      frequencies: NDArray[np.float64]) -> NDArray[np.complex128]:
    """The filter's complex gain on accelerations at ``frequencies`` (Hz, > 0): its response
    to ``exp(i 2 pi f t)`` over the true second derivative's."""
    window = weights.size
    tau = (np.arange(window) - (window - 1 - lag)) / rate
    omega = 2.0 * np.pi * frequencies
    response = np.exp(1j * omega[:, None] * tau[None, :]) @ weights
    return response / -(omega**2)


@dataclass(frozen=True)
class _Spectrum:
    """The frequencies that carry motion or lie in its band (Hz, > 0), the motion's power
    there ((rad/s^2)^2 per bin: density times the bin width), the encoders' noise variance
    (rad^2, per joint) and the motion bandwidth (Hz)."""

    frequencies: NDArray[np.float64]  # (F,)
    motion: NDArray[np.float64]  # (F, n)
    noise_var: NDArray[np.float64]  # (n,)
    bandwidth: float


def _noise_periodogram(frequencies: NDArray[np.float64], segment: int,
                       rate: float) -> NDArray[np.float64]:
    """The expected Welch density ((rad/s^2)^2/Hz per rad^2 of encoder variance) of the second
    differences of white position noise, Hann window of ``segment`` samples included: the
    noise's power rises as ``f^4``, and the window's sidelobes carry the high frequencies'
    into the lowest bins far above ``(2 pi f)^4 2 / r`` (with one 4 s segment an idle arm's
    noise read as motion). With ``R_m`` the window's autocorrelation at lag ``m`` it is
    ``2 r^3 (6 R_0 - 8 R_1 cos w + 2 R_2 cos 2w) / R_0``, ``w = 2 pi f / r``."""
    window = get_window("hann", segment)
    lags = [float(window[: segment - m] @ window[m:]) for m in range(3)]
    omega = 2.0 * np.pi * frequencies / rate
    bracket = 6.0 * lags[0] - 8.0 * lags[1] * np.cos(omega) + 2.0 * lags[2] * np.cos(2 * omega)
    return 2.0 * rate**3 * bracket / lags[0]


def _spectrum(times: NDArray[np.float64], positions: NDArray[np.float64],
              rate: float) -> _Spectrum:
    """The acceleration's spectrum above the encoders' noise, and that noise (module notes)."""
    noise_std = (np.median(np.abs(fourth_differences(times, positions)), axis=0)
                 / PositionNoise.MAD_TO_STD)
    h = 1.0 / rate
    # On a uniform grid at the rate: a gap (joint states dropped, spikes among them) would
    # otherwise read as a burst of acceleration across the whole spectrum.
    grid = times[0] + h * np.arange(int(np.floor((times[-1] - times[0]) * rate + 1e-6)) + 1)
    positions = np.column_stack([np.interp(grid, times, column) for column in positions.T])
    acceleration = (positions[2:] - 2.0 * positions[1:-1] + positions[:-2]) / h**2
    segment = min(acceleration.shape[0], max(16, int(round(SEGMENT_TIME * rate))))
    # No detrending: second differences carry no trend of their own, and the line or mean
    # fitted to noisy ones puts their noise into the lowest bins, where the motion is.
    f, psd = welch(acceleration, fs=rate, nperseg=segment, detrend=False, axis=0)
    width = f[1] - f[0]
    keep = f > 0.0
    f, psd = f[keep], psd[keep]
    x = np.pi * f / rate
    psd = psd / (np.sin(x) / x)[:, None] ** 4  # undo the second difference's own response
    noise_psd = _noise_periodogram(f, segment, rate)[:, None] * noise_std**2 / (np.sin(x) / x)[
        :, None] ** 4
    # Motion is the band from the lowest frequency up to where the spectrum first meets the
    # noise's (a noise-only frequency far above it can pass the test by chance).
    clear = np.logical_and.accumulate(psd > CLEAR_OF_NOISE * noise_psd, axis=0)
    motion = np.where(clear, psd - noise_psd, 0.0) * width
    total = motion.sum(axis=1)
    cumulative = np.cumsum(total)
    bandwidth = (float(f[np.searchsorted(cumulative, BAND_SHARE * cumulative[-1])])
                 if cumulative[-1] > 0 else float(f[0]))
    relevant = (total > 0.0) | (f <= bandwidth)
    return _Spectrum(f[relevant], motion[relevant], noise_std**2, bandwidth)


def _evaluate(spectrum: _Spectrum, window: int, lags: range, order: int, rate: float
              ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per lag: bias and noise variance (summed over joints) and the gain error over the
    motion (rms, weighted by its spectrum)."""
    bias, noise = [], []
    power = float(np.sum(spectrum.motion))
    for lag, weights in zip(lags, lag_derivative_weights(window, lags, order, rate),
                            strict=True):
        gain = acceleration_gain(weights, lag, rate, spectrum.frequencies)
        error = np.abs(gain - 1.0)
        bias.append(float(np.sum(error[:, None] ** 2 * spectrum.motion)))
        noise.append(float(np.sum(spectrum.noise_var) * np.sum(weights**2)))
    gain_error = np.sqrt(np.array(bias) / power) if power > 0.0 else np.zeros(len(bias))
    return np.array(bias), np.array(noise), gain_error


def joint_rate(times: NDArray[np.float64]) -> float:
    """Hz: the median rate of increasing stamps (s)."""
    steps = np.diff(times)
    steps = steps[steps > 0.0]
    if steps.size == 0:
        raise InertialIdError("no increasing joint-state stamps to measure their rate")
    return float(1.0 / np.median(steps))


def choose_filter(times: NDArray[np.float64], positions: NDArray[np.float64], order: int = 3,
                  max_delay: float = 0.01, window_time: float = 0.0) -> FilterChoice:
    """The filter for these joint states (see the module docstring).

    ``times`` (N,) s increasing, ``positions`` (N, n) rad or m; ``max_delay`` s (< 0: the
    centred, zero-phase evaluation); ``window_time`` s (> 0: that window, not a choice).
    """
    if times.size < MIN_SAMPLES:
        raise InertialIdError(f"{times.size} joint states cannot size the filter: need "
                              f"{MIN_SAMPLES}")
    rate = joint_rate(times)
    spectrum = _spectrum(times, positions, rate)

    def lags(window: int) -> range:
        if max_delay < 0:
            return range(window // 2, window // 2 + 1)
        # 1 % of a sample of slack: a measured 499.9 Hz still allows 4 ms as 2 samples
        return range(0, min(window // 2, int(np.floor(max_delay * rate + 0.01))) + 1)

    smallest = order + 2 + (order + 2 + 1) % 2
    largest = max(smallest, int(MAX_WINDOW_TIME * rate) | 1)

    def best_of(windows: list[int], tolerance: float
                ) -> tuple[float, int, int, float, float, float] | None:
        """The least cost among ``windows`` (and their lags) whose gain error is within
        ``tolerance``: (cost, window, lag, bias, noise, gain error)."""
        best = None
        for window in windows:
            options = lags(window)
            bias, noise, gain_error = _evaluate(spectrum, window, options, order, rate)
            cost = np.where(gain_error <= tolerance, bias + noise, np.inf)
            k = int(np.argmin(cost))
            if np.isfinite(cost[k]) and (best is None or cost[k] < best[0]):
                best = (float(cost[k]), window, options[k], bias[k], noise[k], gain_error[k])
        return best

    source = "setting" if window_time > 0.0 else "data"
    if window_time <= 0.0 and not spectrum.motion.any():
        window_time, source = NO_MOTION_WINDOW_TIME, "default (no motion seen)"
    if window_time > 0.0:  # a set window is used whatever its gain
        best = best_of([max(smallest, 2 * int(round(window_time * rate / 2.0)) + 1)], np.inf)
    else:  # a coarse pass over every COARSE_STEPS-th odd window, then the odd ones around it
        step = 2 * max(1, (largest - smallest) // (2 * COARSE_STEPS))
        coarse = best_of(list(range(smallest, largest + 1, step)), GAIN_TOLERANCE)
        if coarse is None:  # no window keeps the gain: the shortest must do
            best = best_of([smallest], np.inf)
        else:
            near = range(max(smallest, coarse[1] - step), min(largest, coarse[1] + step) + 1, 2)
            best = best_of(list(near), GAIN_TOLERANCE)
    assert best is not None
    _, window, lag, bias_k, noise_k, error_k = best
    return FilterChoice(window, lag, order, rate, source, spectrum.bandwidth,
                        float(np.sqrt(bias_k)), float(np.sqrt(noise_k)), error_k)
