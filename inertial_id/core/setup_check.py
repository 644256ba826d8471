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
- ``time_offset``: the residual of the current estimate follows the wrench's rate of change:
  the wrench stamps lag (or lead) the joint states' by the estimated offset.

Each test needs clear evidence (thresholds below), so a correct set-up with a light payload or
poor excitation raises none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimators import N_PI, Estimate, least_squares
from inertial_id.core.regressor import measurement_matrix
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
"""... when it is this many times its (white-noise) standard error."""


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
        self._weights = np.repeat([force_noise_std**-2, torque_noise_std**-2], 3)
        self.reset()

    def set_noise(self, force_noise_std: float, torque_noise_std: float) -> None:
        """New noise std: its statistics are weighted by them, so they start again."""
        self._weights = np.repeat([force_noise_std**-2, torque_noise_std**-2], 3)
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new payload, a reset)."""
        self.force = SufficientStatistics(N_PI + 6)
        self.torque = SufficientStatistics(N_PI + 6)
        self._lag_num = self._lag_den = 0.0
        self._last: tuple[float, NDArray[np.float64]] | None = None
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
        """The samples the estimate uses: (N, 6) each, sensor frame."""
        n = wrench.shape[0]
        if n == 0:
            return
        rows = measurement_matrix(twist, proper_acceleration, self.sign).reshape(n, 6, -1)
        w = np.tile(self._weights, (n, 1))
        self.force.add(rows[:, :3].reshape(3 * n, -1), wrench[:, :3].ravel(),
                       w[:, :3].ravel(), n)
        self.torque.add(rows[:, 3:].reshape(3 * n, -1), wrench[:, 3:].ravel(),
                        w[:, 3:].ravel(), 0)
        force = wrench[:, :3]
        accel = self.sign * (proper_acceleration[:, :3]
                             + np.cross(twist[:, 3:], twist[:, :3]))  # f = s m a + ...
        self._count += n
        self._sum_f += force.sum(axis=0)
        self._sum_a += accel.sum(axis=0)
        self._ff += force.T @ force
        self._fa += force.T @ accel
        self._aa += accel.T @ accel

    def add_residual(self, times: NDArray[np.float64], residual: NDArray[np.float64],
                     wrench: NDArray[np.float64]) -> None:
        """Residuals of the current estimate ((N,) s, (N, 6)) and the measured (filtered)
        wrench, for the time offset: ``w(t) = w_true(t - tau)`` leaves ``r = -tau dw/dt``."""
        if times.size == 0:
            return
        t, w = times, wrench
        if self._last is not None and 0.0 < t[0] - self._last[0] < 0.05:
            t = np.concatenate(([self._last[0]], t))
            w = np.vstack((self._last[1], w))
            residual = np.vstack((np.zeros(6), residual))
        self._last = (float(times[-1]), wrench[-1].copy())
        dt = np.diff(t)
        if dt.size == 0 or np.any(dt <= 0.0):
            return
        rate = np.diff(w, axis=0) / dt[:, None]
        middle = 0.5 * (residual[1:] + residual[:-1])
        middle[0] = residual[1] if np.all(residual[0] == 0.0) else middle[0]
        self._lag_num += float(np.sum(self._weights * middle * rate))
        self._lag_den += float(np.sum(self._weights * rate * rate))

    def time_offset(self) -> tuple[float, float]:
        """The estimated offset (s; positive: the wrench stamps are late) and its SNR."""
        if self._lag_den <= 0.0:
            return 0.0, 0.0
        tau = -self._lag_num / self._lag_den
        return tau, abs(tau) * np.sqrt(self._lag_den)

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
        if (not problems and estimate is not None and abs(tau) > MAX_TIME_OFFSET
                and snr > TIME_OFFSET_SNR):
            late = "lag" if tau > 0 else "lead"
            problems.append(SetupProblem(
                "time_offset", f"time offset: the wrench stamps {late} the joint states' by "
                f"{1e3 * abs(tau):.0f} ms: stamp both with the same clock at measurement time"))
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
