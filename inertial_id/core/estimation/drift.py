"""A bias that drifts: the F/T offset as a line in time, ``offset(t) = b + d (t - t_now)``.

With a drifting bias (temperature) a constant offset is the run's mean, wrong at its end by
half the drift. The identifier then keeps the sufficient statistics of ``x = [pi; b0; d]``
(22 unknowns): ``b0`` the bias at a reference time (the first sample's), ``d`` its drift
rate ``[fx, fy, fz, tx, ty, tz]`` per second (N/s, N m/s; sensor frame). Each sample's rows
are ``[s Y, I6, tau I6]`` with ``tau`` its time from the reference; their normal equations
come from the batch's Gram matrix with ``tau`` as an extra column
(:func:`~inertial_id.core.regressor.batch_gram`), as the constant offset's do.

Before a solve, :func:`profile_drift` re-expresses the statistics with ``b`` the bias now
(``b0 = b - tau_now d``) and profiles ``d`` out (Schur complement, exact: ``d`` is not
constrained), so every estimator solves its usual ``[pi; offset]`` problem and the offset it
returns is the current bias. :func:`drift_of` recovers ``d`` and its covariance from the
solution. With no drift, the ten parameters lose six of the data's many degrees of freedom.

The drift rate has a zero-mean Gaussian prior (:func:`drift_prior_precision`): thermal
drifts are slow (about 1 N/min on the sensors users report), and in the first seconds of
motion a free rate would take up what a slow change of posture puts into the wrench, the
CoM's torque above all, and hold the CoM's std up for a few tenths of a second more. Its
precision, in the rows' inverse-variance units, is added to the drift block before the
profiling; over a run of minutes the data outweigh it by orders of magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.covariance import MappedScores, std_from_covariance
from inertial_id.core.estimate import N_PI, N_UNKNOWNS, BiasDrift, Estimate
from inertial_id.core.linalg import hermitian_pinv
from inertial_id.core.regressor import GRAM_SIZE, GRAM_WRENCH, BatchNormalEquations
from inertial_id.core.statistics import SufficientStatistics

N_DRIFT = 6
N_WITH_DRIFT = N_UNKNOWNS + N_DRIFT
"""Unknowns ``[pi (10); b0 (6); d (6)]``."""
DRIFT = slice(N_UNKNOWNS, N_WITH_DRIFT)
TORQUE_DRIFT_SCALE = 0.1
"""m: a torque drift (N m/s) is taken as this times a force drift (N/s), as in the warning."""


def per_axis_rate(force: float) -> NDArray[np.float64]:
    """A drift rate bound per axis ``[fx, fy, fz, tx, ty, tz]`` (6,): ``force`` N/s on the
    forces and :data:`TORQUE_DRIFT_SCALE` times it (N m/s) on the torques."""
    return np.repeat([force, TORQUE_DRIFT_SCALE * force], 3)


def drift_prior_precision(force_std: float) -> NDArray[np.float64] | None:
    """The prior's precision (6,) of the drift rate: ``1 / std^2`` with the std
    :func:`per_axis_rate` of ``force_std`` N/s; None (no prior) when ``force_std`` is 0 or
    infinite."""
    if force_std <= 0.0 or not np.isfinite(force_std):
        return None
    return per_axis_rate(force_std) ** -2.0


class DriftNormalEquations:
    """The normal equations of a batch's rows ``[s Y, I6, tau I6] [pi; b0; d]`` from its
    :func:`~inertial_id.core.regressor.batch_gram` with ``tau`` (20, 20): those of ``[pi;
    b0]`` (``base``) and the drift's, ``sum tau z`` and ``sum tau^2`` times the row
    weights."""

    def __init__(self, base: BatchNormalEquations) -> None:
        self.base = base

    def __call__(self, gram: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """``(A^T W A (22, 22), A^T W b (22,), b^T W b)``."""
        information16, moment16, energy = self.base(gram)
        tau = gram[GRAM_SIZE]
        weights = self.base.row_weights
        information = np.zeros((N_WITH_DRIFT, N_WITH_DRIFT))
        information[:N_UNKNOWNS, :N_UNKNOWNS] = information16
        cross = np.einsum("f,fra->ra", tau[:13], self.base.weighted_rows)
        information[DRIFT, :N_UNKNOWNS] = cross
        information[:N_UNKNOWNS, DRIFT] = cross.T
        information[DRIFT, DRIFT] = np.diag(weights * tau[GRAM_SIZE])
        moment = np.concatenate((moment16, weights * tau[GRAM_WRENCH]))
        return information, moment, energy


@dataclass(frozen=True)
class Profile:
    """What :func:`profile_drift` kept to recover the drift: the shifted information's
    drift blocks and moment, and the time ``tau_now`` (s from the reference)."""

    h_dd_inverse: NDArray[np.float64]
    h_dx: NDArray[np.float64]
    g_d: NDArray[np.float64]
    tau_now: float


def profile_drift(stats: SufficientStatistics, tau_now: float,
                  prior_precision: NDArray[np.float64] | None = None
                  ) -> tuple[SufficientStatistics, Profile]:
    """Statistics of ``[pi; b]`` (16), ``b`` the bias at ``tau_now``, with the drift
    profiled out (see the module docstring), under the drift rate's zero-mean prior of
    ``prior_precision`` (6,) (:func:`drift_prior_precision`; None: none); the drift's block
    scores follow lazily (:class:`~inertial_id.core.covariance.MappedScores`)."""
    shift = np.eye(N_WITH_DRIFT)  # x_reference = shift @ [pi; b; d]
    shift[N_PI:N_UNKNOWNS, DRIFT] = -tau_now * np.eye(N_DRIFT)
    h = shift.T @ stats.information @ shift
    if prior_precision is not None:
        h[DRIFT, DRIFT] += np.diag(prior_precision)
    g = shift.T @ stats.moment
    h_dd_inverse = hermitian_pinv(h[DRIFT, DRIFT])
    h_xd = h[:N_UNKNOWNS, DRIFT]
    gain = h_xd @ h_dd_inverse
    out = SufficientStatistics(N_UNKNOWNS)
    out.information = h[:N_UNKNOWNS, :N_UNKNOWNS] - gain @ h_xd.T
    out.information = 0.5 * (out.information + out.information.T)
    out.moment = g[:N_UNKNOWNS] - gain @ g[DRIFT]
    out.energy = stats.energy - float(g[DRIFT] @ h_dd_inverse @ g[DRIFT])
    out.rows, out.samples = stats.rows, stats.samples
    out.removed_noise = stats.removed_noise[:N_UNKNOWNS, :N_UNKNOWNS].copy()
    scores = stats.scores
    if scores is not None:
        p = np.hstack((np.eye(N_UNKNOWNS), -gain)) @ shift.T
        v = shift @ np.concatenate((np.zeros(N_UNKNOWNS), h_dd_inverse @ g[DRIFT]))
        out.set_scores(MappedScores(scores, p, v))
    return out, Profile(h_dd_inverse, h_xd.T, g[DRIFT], tau_now)


def drift_rate(x: NDArray[np.float64], profile: Profile) -> NDArray[np.float64]:
    """The drift rate (6,) N/s and N m/s that best fits ``x = [pi; b]`` (16) of the profiled
    statistics: ``H_dd^-1 (g_d - H_dx x)``."""
    return profile.h_dd_inverse @ (profile.g_d - profile.h_dx @ x)


def drift_of(estimate: Estimate, profile: Profile, stats: SufficientStatistics,
             time: float) -> BiasDrift:
    """The drift rate at ``estimate`` of the profiled ``stats`` (:func:`profile_drift`) and
    its covariance ``s^2 H_dd^-1 + K C K^T`` (``K = H_dd^-1 H_dx``, ``C`` the estimate's
    covariance of ``[pi; b]``, ``s^2`` the residual variance scaled as the offset's
    covariance is over its classical one; ``H_dd`` holds the prior's precision, which
    ``s^2`` scales too); ``time``: the stamp of ``tau_now`` (s)."""
    x = np.concatenate((estimate.pi, estimate.offset))
    gain = profile.h_dd_inverse @ profile.h_dx
    rate = drift_rate(x, profile)
    covariance = np.asarray(estimate.covariance)
    sigma2 = stats.residual(x) / max(stats.rows - N_WITH_DRIFT, 1.0)
    classical = sigma2 * np.diag(hermitian_pinv(stats.information))[N_PI:]
    reported = np.diag(covariance)[N_PI:]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = reported / classical
    scale = float(np.mean(ratio)) if np.isfinite(ratio).all() and classical.all() else 1.0
    if not np.isfinite(covariance).all():  # the data do not determine [pi; b] yet
        return BiasDrift(rate, np.full(N_DRIFT, np.inf), time)
    drift_covariance = (sigma2 * max(scale, 1.0) * profile.h_dd_inverse
                        + gain @ covariance @ gain.T)
    return BiasDrift(rate, std_from_covariance(drift_covariance), time)
