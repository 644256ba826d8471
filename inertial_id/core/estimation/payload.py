"""Payload identification: sensor-frame samples in, a physically consistent estimate out.

:class:`PayloadIdentifier` is the object both the solver node and offline replay run. It turns
each sample (twist, proper acceleration, measured wrench; sensor frame) into weighted rows of
``w = [s Y(v, a_g), I6] [pi; offset]``, keeps only sufficient statistics (optionally with
exponential forgetting), and solves with the configured estimator. Samples may come with the
covariance of their acceleration's noise (the gatherer's errors in variables): its expected
information is kept apart and removed before each solve
(:meth:`~inertial_id.core.statistics.SufficientStatistics.corrected`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.estimate import N_PI, N_UNKNOWNS, BiasDrift, Estimate
from inertial_id.core.estimation.drift import (
    N_WITH_DRIFT,
    DriftNormalEquations,
    Profile,
    drift_of,
    drift_prior_precision,
    drift_rate,
    profile_drift,
)
from inertial_id.core.estimation.estimators import ConsistentEstimator, Constraints, least_squares
from inertial_id.core.estimation.estimators.consistent import require_consistent
from inertial_id.core.estimation.manifold import ManifoldEstimator
from inertial_id.core.estimation.pls import pls
from inertial_id.core.regressor import (
    BatchNormalEquations,
    batch_gram,
    gram_samples,
    noise_information_basis,
    wrench_sign,
)
from inertial_id.core.statistics import SlidingWindow, SufficientStatistics

METHODS = ("lmi_sdp", "manifold", "least_squares", "pls")


NOISE_STD_RANGE = (1e-9, 1e6)
"""Noise std (N, N m) accepted: their inverse squares weight the rows, and beyond this range
the sufficient statistics of real wrenches overflow or underflow float64."""


@dataclass(frozen=True)
class PayloadConfig:
    """Settings of :class:`PayloadIdentifier`.

    ``wrench_sign``: ``payload_on_sensor`` (what F/T sensors report) or ``sensor_on_payload``.
    ``force_noise_std`` (N) and ``torque_noise_std`` (N m) weight the force and torque rows by
    their inverse variances. Recursive mode: ``forgetting_factor`` in (0, 1] scales old data
    per sample (1 keeps everything). Windowed mode (``window_samples > 0``): only the last
    ``window_samples`` samples count, kept as blocks of ``block_samples``. ``method``:
    ``lmi_sdp`` (consistent, convex SDP), ``manifold`` (consistent, Traversaro 2016, warm
    started, within ``time_budget`` seconds if set), ``least_squares`` or ``pls`` (baselines;
    PLS with ``pls_components``, all if 0). ``prior``, ``prior_weight``,
    ``regularization`` and ``constraints`` go to :class:`ConsistentEstimator`.
    ``known_offset``: a fixed F/T offset (e.g. zeros for a tared sensor); None estimates it.
    ``solve_timeout`` (s): a slower cvxpy SDP solve fails (and the last estimate stays); the
    dedicated solver has none (its iterations are bounded).
    ``score_block_samples``: consecutive samples per block of the block-robust covariance
    (:mod:`inertial_id.core.covariance`; 0: the classical covariance) in the cumulative and
    forgetting modes; it should span several filter windows (250: 0.25 s at 1 kHz against the
    default 80 ms window). The sliding window uses its own blocks of ``block_samples``.
    ``dedicated_solver``: ``lmi_sdp`` solves with :mod:`inertial_id.core.estimation.sdp` where it
    covers the problem (cvxpy otherwise, and as long as it is not compiled and loaded).
    ``bias_drift``: the offset drifts linearly (:mod:`inertial_id.core.estimation.drift`);
    samples then need their stamps, and the estimate's offset is the bias at the latest.
    ``bias_drift_prior`` (N/s; torques a tenth, N m/s): the std of the drift rate's zero-mean
    prior (:func:`~inertial_id.core.estimation.drift.drift_prior_precision`; 0: none).
    """

    wrench_sign: str = "payload_on_sensor"
    force_noise_std: float = 0.1
    torque_noise_std: float = 0.005
    forgetting_factor: float = 1.0
    window_samples: int = 0
    block_samples: int = 500
    method: str = "lmi_sdp"
    epsilon: float = 1e-8
    prior: tuple[float, ...] | None = None
    prior_weight: float = 1e-9
    regularization: str = "euclidean"
    constraints: Constraints = field(default_factory=Constraints)
    known_offset: tuple[float, ...] | None = None
    solve_timeout: float | None = None
    time_budget: float | None = None
    pls_components: int = 0
    score_block_samples: int = 250
    dedicated_solver: bool = True
    bias_drift: bool = False
    bias_drift_prior: float = 0.01

    def __post_init__(self) -> None:
        wrench_sign(self.wrench_sign)
        low, high = NOISE_STD_RANGE
        if not (low <= self.force_noise_std <= high and low <= self.torque_noise_std <= high):
            raise InertialIdError(f"force_noise_std and torque_noise_std must be in "
                                  f"[{low:g}, {high:g}], got {self.force_noise_std!r}, "
                                  f"{self.torque_noise_std!r}")
        if self.method not in METHODS:
            raise InertialIdError(f"unknown method {self.method!r}; use one of {METHODS}")
        if self.force_noise_std <= 0 or self.torque_noise_std <= 0:
            raise InertialIdError("noise standard deviations must be positive")
        if not 0.0 < self.forgetting_factor <= 1.0:
            raise InertialIdError("forgetting_factor must be in (0, 1]")
        if self.window_samples < 0 or self.block_samples < 1 or self.score_block_samples < 0:
            raise InertialIdError("window_samples and score_block_samples must be >= 0, "
                                  "block_samples >= 1")
        if not self.bias_drift_prior >= 0.0:
            raise InertialIdError(f"bias_drift_prior must be >= 0, got {self.bias_drift_prior!r}")
        if self.bias_drift and self.known_offset is not None:
            raise InertialIdError("bias_drift needs the offset estimated, not known_offset")
        if self.known_offset is not None and self.method in ("manifold", "pls"):
            raise InertialIdError(f"known_offset is not supported by method {self.method}")
        if self.prior is not None and len(self.prior) != 10:
            raise InertialIdError(f"prior needs the 10 entries of pi, got {len(self.prior)}")


class PayloadIdentifier:
    """Accumulates payload samples and estimates ``[pi; offset]``; see the module docstring."""

    def __init__(self, config: PayloadConfig | None = None) -> None:
        self.config = config or PayloadConfig()
        self.sign = wrench_sign(self.config.wrench_sign)
        self._set_weights(self.config)
        c = self.config
        self._sdp = ConsistentEstimator(
            epsilon=c.epsilon, prior=c.prior, prior_weight=c.prior_weight,
            regularization=c.regularization, constraints=c.constraints,
            known_offset=c.known_offset, time_limit=c.solve_timeout,
            dedicated=c.dedicated_solver,
        )
        self._manifold = ManifoldEstimator(
            prior=c.prior, prior_weight=c.prior_weight if c.prior is not None else 0.0,
            time_budget=c.time_budget,
        )
        self.reset()

    RESTART_FIELDS = ("wrench_sign", "window_samples", "block_samples", "method",
                      "regularization", "constraints", "known_offset", "pls_components",
                      "score_block_samples", "bias_drift")
    """Settings the accumulated statistics depend on: they cannot change while running."""

    def reconfigure(self, config: PayloadConfig) -> None:
        """Apply new settings to later samples and solves (noise std, forgetting factor,
        epsilon, solve timeout, time budget, prior, drift prior, dedicated solver); the
        :attr:`RESTART_FIELDS` must stay."""
        fixed = [n for n in self.RESTART_FIELDS
                 if getattr(config, n) != getattr(self.config, n)]
        if fixed:
            raise InertialIdError(f"{', '.join(fixed)} cannot change while running: restart")
        self._set_weights(config)
        self._sdp.epsilon = config.epsilon
        self._sdp.time_limit = config.solve_timeout
        self._sdp.dedicated = config.dedicated_solver
        self._manifold.time_budget = config.time_budget
        if config.prior != self.config.prior or config.prior_weight != self.config.prior_weight:
            self._sdp.set_prior(np.zeros(N_PI) if config.prior is None else config.prior,
                                config.prior_weight)
        self.config = config
        self._with_uncertainty = None

    def _set_weights(self, config: PayloadConfig) -> None:
        """Row weights (inverse noise variances) of later samples, their noise basis, and the
        drift prior's precision."""
        self._axis_weights = np.repeat(
            [config.force_noise_std**-2, config.torque_noise_std**-2], 3)
        self._noise_basis = noise_information_basis(self._axis_weights)
        self._normal_equations = BatchNormalEquations(self.sign, self._axis_weights)
        self._drift_prior = drift_prior_precision(config.bias_drift_prior)
        if config.bias_drift:
            self._normal_equations = DriftNormalEquations(self._normal_equations)

    def reset(self) -> None:
        """Forget all data."""
        n = self.n_unknowns
        self._all = SufficientStatistics(n, self.config.score_block_samples)
        self._window = None
        if self.config.window_samples > 0:
            blocks = max(1, self.config.window_samples // self.config.block_samples)
            self._window = SlidingWindow(n, self.config.block_samples, blocks)
        self._origin: float | None = None  # s: the drift's reference time
        self._tau_latest = 0.0
        self._with_uncertainty: Estimate | None = None  # the last whole estimate

    @property
    def n_unknowns(self) -> int:
        """Unknowns of the statistics: ``[pi; offset]``, and the drift rate with
        ``bias_drift``."""
        return N_WITH_DRIFT if self.config.bias_drift else N_UNKNOWNS

    def drift_tau(self, times: ArrayLike) -> NDArray[np.float64]:
        """Each stamp's time (s) from the drift's reference (the first stamp given since the
        last :meth:`reset`), for :func:`~inertial_id.core.regressor.batch_gram`; the latest
        is the time of the current bias."""
        t = np.asarray(times, dtype=float)
        if t.size == 0:
            return t
        if self._origin is None:
            self._origin = float(t[0])
        tau = t - self._origin
        self._tau_latest = max(self._tau_latest, float(tau.max()))
        return tau

    @property
    def statistics(self) -> SufficientStatistics:
        """Statistics of the data that count now (all, forgotten, or the window)."""
        return self._all if self._window is None else self._window.statistics

    def set_known_offset(self, offset: ArrayLike) -> None:
        """Change the fixed F/T offset (only with ``known_offset`` configured)."""
        if self.config.known_offset is None:
            raise InertialIdError("the offset is estimated, not known")
        self._sdp.known_offset = np.asarray(offset, dtype=float).copy()
        self._with_uncertainty = None

    def forget_offset(self) -> None:
        """Keep the data's information on ``pi`` but none on the offset (after a bias change).

        The old offset is eliminated from the statistics (Schur complement); the offset block
        starts empty and new samples determine it.
        """
        target = self._all if self._window is None else self._window
        target.eliminate_offset(N_PI)
        self._with_uncertainty = None

    def add(self, twist: ArrayLike, proper_acceleration: ArrayLike, wrench: ArrayLike,
            acceleration_noise: ArrayLike | None = None,
            products: ArrayLike | None = None, times: ArrayLike | None = None) -> None:
        """Accumulate N samples: (N, 6) twists, proper accelerations and measured wrenches,
        and optionally (N, 6, 6) covariances of the noise in ``[a_lin + w x v_lin; alpha]``
        and (N, 6) smoothed angular-velocity products
        (:class:`~inertial_id.core.gathering.synchronizer.SyncedSamples`; None: the twists' own).

        Units: m/s, rad/s, m/s^2, rad/s^2, N, N m, all in the sensor frame. The batch's rows
        ``[s Y, I6]`` (:func:`~inertial_id.core.regressor.measurement_matrix`) are not built:
        their normal equations come from the batch's feature Gram matrix
        (:class:`~inertial_id.core.regressor.BatchNormalEquations`). A wrong size or a NaN or
        inf raises :class:`SampleError` before anything changes (forgetting included).
        ``times`` (N,) s: the samples' stamps, needed with ``bias_drift``.
        """
        wrench = np.atleast_2d(np.asarray(wrench, dtype=float))
        if wrench.shape[-1] != 6:
            raise SampleError(f"wrenches must be (N, 6), got {wrench.shape}")
        if wrench.shape[0] == 0:
            return
        tau = None
        if self.config.bias_drift:
            if times is None or np.shape(times) != (wrench.shape[0],):
                raise SampleError("a drifting bias needs each sample's stamp")
            tau = self.drift_tau(times)
        self.add_gram(batch_gram(twist, proper_acceleration, wrench, products, tau),
                      acceleration_noise)

    def add_gram(self, gram: NDArray[np.float64],
                 acceleration_noise: ArrayLike | None = None) -> None:
        """:meth:`add` for a batch given by its :func:`~inertial_id.core.regressor.batch_gram`
        (19, 19; N its ones' sum; with ``bias_drift`` (20, 20), with the times from
        :meth:`drift_tau`) and optionally its (N, 6, 6) acceleration noise covariances."""
        size = 20 if self.config.bias_drift else 19
        if gram.shape != (size, size):
            raise SampleError(f"a batch's Gram matrix must be ({size}, {size}), got "
                              f"{gram.shape}")
        n = gram_samples(gram)
        if n == 0:
            return
        information, moment, energy = self._normal_equations(gram)
        noise = None
        if acceleration_noise is not None:
            covariances = np.asarray(acceleration_noise, dtype=float)
            if covariances.shape != (n, 6, 6):
                raise SampleError(f"acceleration noise must be ({n}, 6, 6), got "
                                  f"{covariances.shape}")
            covariance = covariances.sum(0)
            noise = np.zeros((self.n_unknowns, self.n_unknowns))
            noise[:N_UNKNOWNS, :N_UNKNOWNS] = np.tensordot(covariance, self._noise_basis,
                                                           axes=2)
        if self._window is not None:
            self._window.add_normal_equations(information, moment, energy, 6 * n, n, noise)
            return
        if self.config.forgetting_factor < 1.0:
            self._all.scale(self.config.forgetting_factor**n)
        self._all.add_normal_equations(information, moment, energy, 6 * n, n, noise)

    @property
    def changed_in_kind(self) -> bool:
        """No whole estimate since the statistics last changed in kind (a reset, a forgotten
        or new known offset, new settings) or since the start."""
        return self._with_uncertainty is None

    @property
    def fast(self) -> bool:
        """Whether :meth:`estimate` costs microseconds (least squares, PLS, or the SDP by the
        dedicated solver once it is ready) rather than milliseconds (cvxpy, manifold)."""
        method = self.config.method
        return method in ("least_squares", "pls") or (method == "lmi_sdp" and self._sdp.fast)

    def estimate(self, uncertainty: bool = True) -> Estimate:
        """Solve with the configured method (raises ``SolverError`` when it cannot).

        ``uncertainty`` False: the parameters only, re-solved, with the uncertainty of the
        last estimate made with it (:meth:`Estimate.carried_to`: its covariance and the std
        derived from it; the drift's std too), which costs a fraction of a whole estimate;
        a whole one when there is none since the statistics last changed in kind (a reset,
        a forgotten or new known offset, new settings) or the method is not ``lmi_sdp``."""
        statistics, profile = self._solver_input()
        time = (self._origin or 0.0) + self._tau_latest
        last = self._with_uncertainty
        if not uncertainty and last is not None and self.config.method == "lmi_sdp":
            x = self._sdp.solve_parameters(statistics)
            drift = None if profile is None else BiasDrift(
                drift_rate(x, profile), last.drift.std, time)
            estimate = last.carried_to(x, statistics.samples, drift)
            require_consistent(estimate)
            return estimate
        estimate = self._solve(statistics)
        if profile is not None:
            estimate = replace(estimate, drift=drift_of(estimate, profile, statistics, time))
        self._with_uncertainty = estimate
        return estimate

    def solved_statistics(self) -> SufficientStatistics:
        """The statistics of ``[pi; offset]`` the solvers see: corrected for the rows'
        noise and, with ``bias_drift``, the drift profiled out (the offset the bias at the
        latest sample)."""
        return self._solver_input()[0]

    def _solver_input(self) -> tuple[SufficientStatistics, Profile | None]:
        """:meth:`solved_statistics` and, with ``bias_drift``, what recovers the drift."""
        statistics = self.statistics.corrected()
        if not self.config.bias_drift:
            return statistics, None
        return profile_drift(statistics, self._tau_latest, self._drift_prior)

    def _solve(self, statistics: SufficientStatistics) -> Estimate:
        """The configured method on statistics of ``[pi; offset]``."""
        method = self.config.method
        if method == "least_squares":
            return least_squares(statistics, self.config.known_offset)
        if method == "pls":
            return pls(statistics, self.config.pls_components or None)
        if method == "manifold":
            return self._manifold.solve(statistics)
        return self._sdp.solve(statistics)
