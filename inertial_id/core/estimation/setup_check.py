"""Self-diagnosis of set-up mistakes from the data the estimator uses.

A wrong set-up gives a confident wrong answer unless something asks whether the data look like
a rigid body on this robot at all. :class:`SetupCheck` keeps its own sufficient statistics of
the samples the estimate uses (force rows and torque rows apart, no forgetting) and, on request,
names what the data show, one line each, with the fix in words:

- ``wrench_sign``: the unconstrained fit is good but needs a clearly negative mass: the
  sensor reports the other sign (``wrench_sign``);
- ``torque_unit``: the first moment ``m c`` the torques imply is ten times (or more) off the
  one the forces imply: N mm for N m, or the like;
- ``sensor_rotation``: no rigid body explains the wrench, but the forces are the model's
  turned by a fixed rotation: the F/T's axes are not those of ``sensor_frame`` (the angle and
  axis are named);
- ``model``: no rigid body explains the wrench (the unconstrained fit leaves a residual far
  above the configured noise and a good share of the wrench's variance) and no rotation of the
  sensor frame does either: a wrong gravity vector, a wrong URDF or sensor frame;
- ``time_offset``: the wrench is a rigid body's plus a multiple of its own rate of change
  (both fitted together over the recent samples; the current estimate only decides which
  samples are outliers, so a badly wrong one, leaving more than a few, hides a lag until it
  converges): the wrench stamps lag (or lead) the joint states' by at least the estimated
  offset (the rate's noise biases the figure toward zero; the gatherer's matched filter
  measures the delay itself). Only a plausible lag is named: at most
  :data:`MAX_PLAUSIBLE_TIME_OFFSET`, from the recent samples alone (the last
  :data:`TIME_OFFSET_BLOCKS` blocks of :data:`TIME_OFFSET_BLOCK`: it clears itself
  once the data no longer show it), as the median of the blocks' estimates weighted by their
  information (a wild block cannot move it), most blocks agreeing on its sign, and each sample
  a lag could explain (a residual beyond :data:`MAX_PLAUSIBLE_TIME_OFFSET` times the wrench's
  rate plus :data:`TIME_OFFSET_OUTLIER_NOISE` noise std is no lag: a spike, a contact; it is
  left out and counted, and more than a few such say the residual has another cause).
  :meth:`SetupCheck.evidence` gives the figure and its evidence.

Each test needs clear evidence (thresholds below), so a correct set-up with a light payload or
poor excitation raises none.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import N_PI, Estimate
from inertial_id.core.estimation.estimators import least_squares
from inertial_id.core.lag_fit import LAG_GRAM_SIZE, RATE, LagFit, lag_columns
from inertial_id.core.regressor import (
    GRAM_ONES,
    GRAM_WRENCH,
    BatchNormalEquations,
    batch_gram,
    gram_samples,
)
from inertial_id.core.statistics import SufficientStatistics

MIN_SAMPLES = 1000
"""Samples before any verdict."""
NEGATIVE_MASS_Z = 10.0
"""A fitted mass this many std below zero is no noise."""
MISFIT_NOISE_RATIO = 5.0
"""RMS weighted residual of the unconstrained fit, in units of the configured noise, above
which the model does not explain the data ..."""
MISFIT_UNEXPLAINED = 0.05
"""... provided it also leaves this share of the wrench's variance (beyond its mean)
unexplained (a light payload in heavy noise leaves much, but near the noise)."""
FIRST_MOMENT_Z = 10.0
"""The force rows must determine ``m c`` to this many std before the units are compared."""
ROTATION_EXPLAINED = 0.99
"""Share of the forces' variance a fixed rotation of the model's must explain ..."""
MIN_ROTATION_DEG = 5.0
"""... for a rotation of at least this many degrees to be named."""
MAX_TIME_OFFSET = 0.005
"""s: a larger estimated offset between wrench and joint stamps is reported ..."""
TIME_OFFSET_SNR = 10.0
"""... when it is this many times its (white-noise) standard error ..."""
MAX_PLAUSIBLE_TIME_OFFSET = 0.2
"""... and at most this large (s): the residual is ``-tau dw/dt`` only for a lag well under the
motion's time scale; a larger fit is no lag but something else (a spike, a contact) ..."""
TIME_OFFSET_AGREEMENT = 0.75
"""... and this share of the blocks' information (:data:`TIME_OFFSET_BLOCK`) has its sign ..."""
TIME_OFFSET_MAX_OUTLIERS = 0.05
"""... and at most this share of the blocks' samples were outliers (no lag explains them:
:data:`TIME_OFFSET_OUTLIER_NOISE`; many say the residual has another cause)."""
TIME_OFFSET_BLOCK = 250
"""Samples per block of the time-offset statistics ..."""
TIME_OFFSET_BLOCKS = 20
"""... of which the latest this many make the estimate (5000 samples: 5 s at 1 kHz) ..."""
TIME_OFFSET_MIN_BLOCKS = 4
"""... and at least this many are needed."""
RESIDUAL_BATCH = 50
"""Samples :meth:`SetupCheck.add_residual` holds before it takes them (a fifth of a block)."""
TIME_OFFSET_OUTLIER_NOISE = 10.0
"""Noise std (per component) beyond what :data:`MAX_PLAUSIBLE_TIME_OFFSET` explains that make
a residual sample an outlier of the time-offset statistics."""


@dataclass(frozen=True)
class SetupProblem:
    """One set-up mistake the data show: ``code`` (see the module docstring) and one line."""

    code: str
    message: str


class SetupCheck:
    """See the module docstring. ``sign`` is the configured wrench sign (+1 or -1),
    ``other_sign_name`` the parameter value of the other one; the noise std (N, N m) weight
    the rows as the estimator does."""

    def __init__(self, sign: float, other_sign_name: str, force_noise_std: float,
                 torque_noise_std: float) -> None:
        self.sign = sign
        self.other_sign_name = other_sign_name
        self._set_weights(force_noise_std, torque_noise_std)
        self.reset()

    def _set_weights(self, force_noise_std: float, torque_noise_std: float) -> None:
        """Row weights (inverse variances) and the normal equations of the force rows and of
        the torque rows."""
        self._weights = np.repeat([force_noise_std**-2, torque_noise_std**-2], 3)
        force_only = np.concatenate((self._weights[:3], np.zeros(3)))
        self._force_equations = BatchNormalEquations(self.sign, force_only)
        self._lag_fit = LagFit(self.sign, self._weights)
        self._torque_equations = BatchNormalEquations(self.sign, self._weights - force_only)

    def set_noise(self, force_noise_std: float, torque_noise_std: float) -> None:
        """New noise std: its statistics are weighted by them, so they start again."""
        self._set_weights(force_noise_std, torque_noise_std)
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new payload, a reset)."""
        self.force = SufficientStatistics(N_PI + 6)
        self.torque = SufficientStatistics(N_PI + 6)
        # Time offset: closed blocks' lag Gram matrices (add_residual) and outliers left out
        # (of TIME_OFFSET_BLOCK samples); the open block's, with its samples.
        self._lag_blocks: deque[tuple[NDArray[np.float64], int]] = deque(
            maxlen=TIME_OFFSET_BLOCKS)
        self._lag_cache: tuple[NDArray[np.float64], NDArray[np.float64], float] | None = None
        self._pending: list[tuple[NDArray[np.float64], ...]] = []  # add_residual's, held
        self._pending_samples = 0
        self._open_lag_block()
        self.lag_outliers = 0
        # The last sample given to add_residual: stamp, wrench, residual, features.
        self._last: tuple[float, NDArray[np.float64], NDArray[np.float64],
                          NDArray[np.float64]] | None = None
        # Sums over samples of f, a, f f^T, f a^T, a a^T (force, and the linear acceleration
        # the mass sees, sensor frame): the fixed rotation between them (Wahba's problem).
        self._count = 0
        self._sum_f, self._sum_a = np.zeros(3), np.zeros(3)
        self._ff, self._fa, self._aa = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 3))

    @property
    def samples(self) -> float:
        """Samples accumulated."""
        return self.force.samples

    def add(self, twist: NDArray[np.float64], proper_acceleration: NDArray[np.float64],
            wrench: NDArray[np.float64]) -> None:
        """The samples the estimate uses: (N, 6) each, sensor frame (twists ``[v_lin; w]`` in
        m/s, rad/s; proper accelerations in m/s^2, rad/s^2; wrenches ``[f; tau]`` in N, N m).

        One Gram matrix of the batch (:func:`~inertial_id.core.regressor.batch_gram`, with the
        twists' own angular-velocity products) gives the force rows' and the torque rows'
        normal equations and the sums of the rotation test (``a = a_lin + w x v_lin``, the
        features' first three). A NaN or inf raises :class:`SampleError` before anything
        changes."""
        if wrench.shape[0] == 0:
            return
        self.add_gram(batch_gram(twist, proper_acceleration, wrench))

    def add_gram(self, gram: NDArray[np.float64]) -> None:
        """:meth:`add` for a batch given by its :func:`~inertial_id.core.regressor.batch_gram`
        (19, 19; with the twists' own or the smoothed angular-velocity products)."""
        n = gram_samples(gram)
        if n == 0:
            return
        self.force.add_normal_equations(*self._force_equations(gram), 3 * n, n)
        self.torque.add_normal_equations(*self._torque_equations(gram), 3 * n, 0)
        # f = s m a + ...: a (the features' first three) times s against the forces.
        force = slice(GRAM_WRENCH.start, GRAM_WRENCH.start + 3)
        self._count += n
        self._sum_f += gram[GRAM_ONES, force]
        self._sum_a += self.sign * gram[GRAM_ONES, :3]
        self._ff += gram[force, force]
        self._fa += self.sign * gram[force, :3]
        self._aa += self.sign**2 * gram[:3, :3]

    def add_residual(self, times: NDArray[np.float64], residual: NDArray[np.float64],
                     wrench: NDArray[np.float64], features: NDArray[np.float64]) -> None:
        """Stamps (N,) s, residuals of the current estimate (N, 6) sensor frame, N and N m,
        the measured (filtered) wrench and the samples' :func:`~inertial_id.core.regressor.
        regressor_features` (N, 12), for the time offset: ``w(t) = w_true(t - tau)`` reads
        ``w = A x - tau dw/dt`` (``x`` the payload's parameters and offset).

        Each block keeps the lag Gram matrix (:mod:`inertial_id.core.lag_fit`) of the wrench
        at the samples a lag could explain, so that ``x`` and ``tau`` are fitted together
        over the window (:meth:`_fit_lag`). The residuals only decide which samples a lag
        could explain: fitting them (``r = A delta - tau dw/dt``, one ``delta``) named a
        false lag while the estimate changed within the window (the seconds after a reset,
        while each solve moves it). Batches are held
        until :data:`RESIDUAL_BATCH` samples came and then taken together (the cost is per
        call, and a live solver gets a few samples at a time)."""
        if times.size == 0:
            return
        self._pending.append((times, residual, wrench, features))
        self._pending_samples += times.size
        if self._pending_samples < RESIDUAL_BATCH:
            return
        pending, self._pending, self._pending_samples = self._pending, [], 0
        self._take_residual(*(np.concatenate(parts) for parts in zip(*pending, strict=True)))

    def _take_residual(self, times: NDArray[np.float64], residual: NDArray[np.float64],
                       wrench: NDArray[np.float64], features: NDArray[np.float64]) -> None:
        """:meth:`add_residual` of the samples held."""
        t, w, r, z = times, wrench, residual, features
        if self._last is not None and 0.0 < t[0] - self._last[0] < 0.05:
            t = np.concatenate(([self._last[0]], t))
            w, r, z = (np.vstack((last, now)) for last, now in
                       zip(self._last[1:], (wrench, residual, features), strict=True))
        self._last = (float(times[-1]), wrench[-1].copy(), residual[-1].copy(),
                      features[-1].copy())
        if t.size < 2 or np.any(np.diff(t) <= 0.0):
            return
        columns = lag_columns(t, z, w, w)
        middle, rate = 0.5 * (r[1:] + r[:-1]), columns[:, RATE]
        # A sample no plausible lag explains (a spike of any size, a contact) says nothing of
        # the lag: left out, whatever its size.
        bound = (MAX_PLAUSIBLE_TIME_OFFSET * np.abs(rate)
                 + TIME_OFFSET_OUTLIER_NOISE / np.sqrt(self._weights))
        lag_like = np.all(np.abs(middle) <= bound, axis=1)
        self.lag_outliers += int(lag_like.size - np.count_nonzero(lag_like))
        columns[~lag_like] = 0.0
        start = 0
        while start < lag_like.size:
            stop = start + min(TIME_OFFSET_BLOCK - self._lag_open_samples,
                               lag_like.size - start)
            chunk = columns[start:stop]
            self._lag_open_gram += chunk.T @ chunk
            self._lag_open_samples += stop - start
            self._lag_open_outliers += int(np.count_nonzero(~lag_like[start:stop]))
            start = stop
            if self._lag_open_samples == TIME_OFFSET_BLOCK:
                self._lag_blocks.append((self._lag_open_gram, self._lag_open_outliers))
                self._lag_cache = None
                self._open_lag_block()

    def _open_lag_block(self) -> None:
        self._lag_open_gram = np.zeros((LAG_GRAM_SIZE, LAG_GRAM_SIZE))
        self._lag_open_samples = 0
        self._lag_open_outliers = 0

    def _lag_estimates(self) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """The latest blocks' offsets (s), each from its wrench less the window's fitted
        ``A x``, their information (1/s^2, weighted) and the window's information of
        ``tau`` with ``x`` fitted too (computed once per closed block)."""
        if self._lag_cache is None:
            self._lag_cache = self._fit_lag()
        return self._lag_cache

    def _fit_lag(self) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """:meth:`_lag_estimates` from the joint fit ``w = A x - tau dw/dt`` over the
        latest blocks (:class:`~inertial_id.core.lag_fit.LagFit`); ``x`` (16: parameters and
        offset) is the window's own."""
        none = np.zeros(0), np.zeros(0), 0.0
        if not self._lag_blocks:
            return none
        grams = np.array([gram for gram, _ in self._lag_blocks])
        solution = self._lag_fit.solve(grams.sum(axis=0))
        if solution is None:
            return none
        rate_moment, rate_energy, cross = self._lag_fit.rate_terms(grams)
        used = rate_energy > 0.0
        taus = -(cross[used] - rate_moment[used] @ solution.x) / rate_energy[used]
        finite = np.isfinite(taus)
        return taus[finite], rate_energy[used][finite], solution.slope_information

    def time_offset(self) -> tuple[float, float]:
        """The estimated offset (s; positive: the wrench stamps are late) and its SNR, from
        the latest blocks (0, 0 while fewer than :data:`TIME_OFFSET_MIN_BLOCKS`): the
        information-weighted median of the blocks' offsets, and its size over its
        white-noise standard error with all their information, the window's rigid body
        fitted with it."""
        taus, information, tau_information = self._lag_estimates()
        if taus.size < TIME_OFFSET_MIN_BLOCKS:
            return 0.0, 0.0
        order = np.argsort(taus)
        cumulative = np.cumsum(information[order])
        tau = float(taus[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])
        return tau, abs(tau) * float(np.sqrt(tau_information))

    def _time_offset_agreement(self, tau: float) -> float:
        """Share of the latest blocks' information whose offset has the sign of ``tau``."""
        taus, information, _ = self._lag_estimates()
        total = float(information.sum())
        return float(information[taus * tau > 0.0].sum()) / total if total > 0.0 else 0.0

    def _time_offset_outlier_share(self) -> float:
        """Share of the latest blocks' samples left out as outliers."""
        outliers = sum(block[1] for block in self._lag_blocks)
        return outliers / max(len(self._lag_blocks) * TIME_OFFSET_BLOCK, 1)

    def evidence(self) -> dict[str, float]:
        """The time-offset figure and its evidence, for the diagnostics: ``time_offset_ms``
        (positive: the wrench stamps are late), ``time_offset_snr``, ``time_offset_agreement``
        (share of the blocks' information with its sign), ``time_offset_blocks`` and
        ``time_offset_outliers`` (samples no plausible lag explains, left out; in all) and
        ``time_offset_outlier_share`` (of the latest blocks')."""
        tau, snr = self.time_offset()
        return {"time_offset_ms": 1e3 * tau, "time_offset_snr": snr,
                "time_offset_agreement": self._time_offset_agreement(tau),
                "time_offset_blocks": len(self._lag_blocks),
                "time_offset_outliers": self.lag_outliers,
                "time_offset_outlier_share": self._time_offset_outlier_share()}

    def check(self, estimate: Estimate | None = None) -> list[SetupProblem]:
        """What the data show so far (empty: nothing wrong, or too little data)."""
        if self.samples < MIN_SAMPLES:
            return []
        total = self.force.copy()
        total.merge(self.torque)
        try:
            fit = least_squares(total)
        except InertialIdError:
            return []
        x = np.concatenate((fit.pi, fit.offset))
        ratio = np.sqrt(total.residual(x) / max(total.rows, 1.0))
        unexplained = total.residual(x) / max(_offset_only_residual(total), 1e-300)
        problems = []
        mass, mass_std = float(fit.pi[0]), float(fit.std[0])
        misfit = ratio > MISFIT_NOISE_RATIO and unexplained > MISFIT_UNEXPLAINED
        if not misfit and mass < -NEGATIVE_MASS_Z * mass_std:
            problems.append(SetupProblem(
                "wrench_sign", f"wrench sign: the data fit a mass of {mass:.3g} kg: the sensor "
                f"reports the other sign; set wrench_sign: {self.other_sign_name}"))
        unit = self._torque_unit() if ratio > MISFIT_NOISE_RATIO else None
        rotation = self._sensor_rotation() if misfit and unit is None else None
        if unit is not None:
            problems.append(unit)
        elif rotation is not None:
            problems.append(rotation)
        elif misfit:
            problems.append(SetupProblem(
                "model", f"no rigid body explains the wrench ({100 * unexplained:.0f} % of its "
                f"variance left, residual {ratio:.0f}x the configured noise), nor a rotation "
                "of the sensor frame: check the gravity vector (URDF base frame), the URDF and "
                "sensor_frame"))
        tau, snr = self.time_offset()
        # The residual of an estimate that is wrong for another reason follows anything.
        if (not problems and estimate is not None
                and MAX_TIME_OFFSET < abs(tau) <= MAX_PLAUSIBLE_TIME_OFFSET
                and snr > TIME_OFFSET_SNR
                and self._time_offset_agreement(tau) >= TIME_OFFSET_AGREEMENT
                and self._time_offset_outlier_share() <= TIME_OFFSET_MAX_OUTLIERS):
            late = "lag" if tau > 0 else "lead"
            problems.append(SetupProblem(
                "time_offset", f"time offset: the wrench stamps {late} the joint states' by "
                f"at least {1e3 * abs(tau):.0f} ms (SNR {snr:.0f}, over the last "
                f"{len(self._lag_blocks) * TIME_OFFSET_BLOCK} samples): stamp both with the "
                "same clock at measurement time"))
        return problems

    def _sensor_rotation(self) -> SetupProblem | None:
        """The forces as the model's turned by a fixed rotation ``R`` (sensor frame):
        ``f - mean = m R (a - mean)`` solved as Wahba's problem on the centred sums (SVD),
        named when ``R`` explains :data:`ROTATION_EXPLAINED` of the forces' variance and
        turns by at least :data:`MIN_ROTATION_DEG`. The CoM's small force terms are left out
        (they are a few percent of the gravity term)."""
        n = self._count
        if n < 2:
            return None
        ff = self._ff - np.outer(self._sum_f, self._sum_f) / n
        fa = self._fa - np.outer(self._sum_f, self._sum_a) / n
        aa = self._aa - np.outer(self._sum_a, self._sum_a) / n
        u, _, vt = np.linalg.svd(fa)
        rotation = u @ np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt)) or 1.0]) @ vt
        fit = float(np.trace(rotation.T @ fa))
        if not (np.trace(aa) > 0.0 and np.trace(ff) > 0.0 and fit > 0.0):
            return None
        mass = fit / float(np.trace(aa))
        explained = mass * fit / float(np.trace(ff))  # 1 - residual / variance
        angle, axis = _angle_axis(rotation)
        if explained < ROTATION_EXPLAINED or angle < MIN_ROTATION_DEG:
            return None
        turned = ", ".join(f"{v:.2f}" for v in axis)
        return SetupProblem(
            "sensor_rotation", f"sensor frame rotated: the forces are the model's turned by "
            f"{angle:.0f} deg about [{turned}] (sensor_frame axes; {100 * explained:.1f} % of "
            "their variance explained): the F/T's axes are not sensor_frame's; fix the URDF "
            "joint of sensor_frame or name the frame the sensor really measures in")

    def _torque_unit(self) -> SetupProblem | None:
        """Torques in another unit than the forces: the first moment ``m c`` seen by the force
        rows (through the payload's accelerations) against the one seen by the torque rows
        (mostly through gravity); a ratio far from 1 is a unit, not noise."""
        try:
            force, torque = least_squares(self.force), least_squares(self.torque)
        except InertialIdError:
            return None
        first_f, first_t = force.pi[1:4], torque.pi[1:4]
        std_f = force.std[1:4]
        force_x = np.concatenate((force.pi, force.offset))
        force_ratio = np.sqrt(self.force.residual(force_x) / max(self.force.rows, 1.0))
        if not (force_ratio < MISFIT_NOISE_RATIO and np.isfinite(std_f).all()
                and np.linalg.norm(first_f) > FIRST_MOMENT_Z * np.linalg.norm(std_f)):
            return None  # the forces alone are no rigid body, or do not determine m c
        scale = float(first_t @ first_f / (first_f @ first_f))
        if scale <= 0.0 or abs(np.log10(scale)) < 1.0:
            return None
        hint = " (N mm for N m?)" if 300.0 < scale < 3000.0 else ""
        return SetupProblem(
            "torque_unit", f"torque unit: the torques are {scale:.3g} times what the forces "
            f"imply{hint}; the wrench must be in N and N m")


def _angle_axis(rotation: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """Angle (degrees) and unit axis of a rotation matrix."""
    cos = float(np.clip((np.trace(rotation) - 1.0) / 2.0, -1.0, 1.0))
    angle = float(np.degrees(np.arccos(cos)))
    skew = np.array([rotation[2, 1] - rotation[1, 2], rotation[0, 2] - rotation[2, 0],
                     rotation[1, 0] - rotation[0, 1]])
    if np.linalg.norm(skew) > 1e-6:
        return angle, skew / np.linalg.norm(skew)
    values, vectors = np.linalg.eigh(0.5 * (rotation + rotation.T))  # ~180 deg or ~0
    return angle, vectors[:, -1]


def _offset_only_residual(stats: SufficientStatistics) -> float:
    """Residual of the best constant (the offset alone): the wrench's variance, weighted."""
    h_oo = stats.information[N_PI:, N_PI:]
    g_o = stats.moment[N_PI:]
    return float(stats.energy - g_o @ np.linalg.solve(h_oo, g_o))
