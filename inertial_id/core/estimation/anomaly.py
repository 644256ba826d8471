"""Contact detection with Hotelling's T^2 statistic of the residual wrench (Traversaro 2013).

The residual ``e = w - w_hat`` (measured minus predicted F/T wrench, sensor frame; or the
joint torques minus their prediction on an arm without an F/T sensor) of a contact-free sample
is zero-mean noise with covariance ``S``. With ``S`` estimated from ``n`` contact-free samples
of ``p`` components (6 for a wrench, one per joint for torques),
``T^2 = (e - mu)^T S^-1 (e - mu)`` of a new sample exceeds

    T^2_alpha = p (n - 1)(n + 1) / (n (n - p)) F_alpha(p, n - p)

with probability ``1 - alpha`` (the confidence). :class:`T2Monitor` learns ``mu`` and ``S``
robustly, evaluates ``T^2`` per sample and turns threshold crossings into contact intervals
with debounce (``on_samples`` consecutive samples above) and hysteresis (the contact ends
after ``off_samples`` consecutive samples below ``release * threshold``).

**Confirmation by the filtered residual.** The raw residual (the unfiltered wrench minus the
prediction from the gatherer's smoothed kinematics) reacts at once to a contact and ends with
it, but it also carries the smoothing filter's gain error on the motion (``(1 - K) w``: the
filter passes the wrench's variation with the pose with a gain a few per cent from 1), a
residual that follows the motion and is not stationary. The filtered residual (the wrench
smoothed by the same kernel as the kinematics, minus their prediction) has no such term, the
rigid-body equation holds between matched-filtered signals, but its samples are correlated
over the filter's span and it lags a contact's end by that span. So when :meth:`T2Monitor.
update` is given the filtered residual too, a run above the threshold starts a contact only on
samples where the filtered residual's ``T^2`` also exceeds its own threshold (learned on the
same samples, with the effective sample count ``training span / correlation time`` in its
Hotelling threshold); the raw residual alone still says when the contact ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from inertial_id.core.errors import InertialIdError, SampleError


def t2_threshold(p: int, n: float, confidence: float) -> float:
    """Hotelling ``T^2`` threshold for ``p`` variables, covariance from ``n`` samples."""
    if not 0.0 < confidence < 1.0:
        raise InertialIdError(f"confidence must be in (0, 1), got {confidence}")
    if not n > p:  # also rejects NaN
        raise InertialIdError(f"need more than {p} samples for the threshold, got {n}")
    f = stats.f.ppf(confidence, p, n - p)
    return float(p * (n - 1) * (n + 1) / (n * (n - p)) * f)


MAD_TO_STD = 1.4826
"""A normal variable's std over its median absolute deviation."""


def median_and_spread(values: NDArray[np.float64]
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column of ``values`` (n, p): the median and :data:`MAD_TO_STD` times the median
    absolute deviation from it (a std robust to outliers), both (p,)."""
    centre = np.median(values, axis=0)
    return centre, MAD_TO_STD * np.median(np.abs(values - centre), axis=0)


def robust_mean_covariance(
    residuals: ArrayLike, confidence: float = 0.999, iterations: int = 5
) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    """Mean and covariance of residuals (n, p) with outliers trimmed iteratively.

    Starts from the median and a MAD-scaled diagonal, then re-estimates from the samples
    whose squared Mahalanobis distance is under the chi-square quantile at ``confidence``
    (inflated for the trimming). Returns ``(mean, covariance, inliers)``.
    """
    e = np.asarray(residuals, dtype=float)
    if e.ndim != 2 or not np.all(np.isfinite(e)):
        raise SampleError(f"residuals must be a finite (n, p) array, got shape {e.shape}")
    n, p = e.shape
    if n <= 2 * p:
        raise SampleError(f"need more than {2 * p} residuals to learn a covariance, got {n}")
    mean, mad = median_and_spread(e)
    cov = np.diag(np.maximum(mad, 1e-12) ** 2)
    cutoff = stats.chi2.ppf(confidence, p)
    keep = np.ones(n, dtype=bool)
    for _ in range(iterations):
        d = e - mean
        distance = np.einsum("ij,ij->i", d @ np.linalg.inv(cov), d)
        new_keep = distance <= cutoff
        if new_keep.sum() <= 2 * p:
            break
        mean = e[new_keep].mean(axis=0)
        # A chi-square trim at `confidence` shrinks the variance by this consistency factor.
        factor = confidence / stats.chi2.cdf(cutoff, p + 2)
        cov = factor * np.cov(e[new_keep].T)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    return mean, cov, int(keep.sum())


@dataclass(frozen=True)
class ContactInterval:
    """A detected contact: first and last flagged sample stamps (s), peak ``T^2``."""

    start: float
    end: float
    peak_t2: float


@dataclass(frozen=True)
class T2Result:
    """Per-sample output of :meth:`T2Monitor.update`: ``t2`` and ``contact`` flags (N,)."""

    t2: NDArray[np.float64]
    contact: NDArray[np.bool_]
    threshold: float


MIN_TIMED_TRAINING = 50
"""Residuals a training by time needs at the least (a 6-component covariance from fewer is
too rough for its F threshold to mean much)."""


@dataclass
class T2Monitor:
    """Learns the contact-free residual covariance, then flags contacts; see module doc.

    The first ``training_samples`` residuals, or (``training_time`` > 0) the first that span
    ``training_time`` seconds if there are at least :data:`MIN_TIMED_TRAINING` of them, train
    ``mu`` and ``S`` (robustly, trimming the
    samples beyond the chi-square quantile ``trim_confidence``; None: ``confidence``, the
    detection's own); until then :meth:`update` flags nothing and :attr:`ready` is False.
    Afterwards samples classified as contact-free keep refining ``S`` unless ``adapt`` is
    False. ``components``: 6 for a
    wrench residual, the number of joints for a joint-torque residual.
    """

    confidence: float = 0.999
    training_samples: int = 1000
    training_time: float = 0.0
    on_samples: int = 3
    off_samples: int = 10
    release: float = 0.7
    adapt: bool = False
    components: int = 6
    trim_confidence: float | None = None
    mean: NDArray[np.float64] | None = None
    covariance: NDArray[np.float64] | None = None
    intervals: list[ContactInterval] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.on_samples < 1 or self.off_samples < 1 or not 0.0 < self.release <= 1.0:
            raise InertialIdError("on_samples, off_samples >= 1 and release in (0, 1]")
        if not 0.0 < self.confidence < 1.0:
            raise InertialIdError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.trim_confidence is not None and not 0.0 < self.trim_confidence < 1.0:
            raise InertialIdError("trim_confidence must be in (0, 1), got "
                                  f"{self.trim_confidence}")
        if self.training_samples <= 12:
            raise InertialIdError(f"training_samples must exceed 12, got {self.training_samples}")
        if not self.training_time >= 0.0:
            raise InertialIdError(f"training_time must be >= 0 s, got {self.training_time}")
        self._training: list[NDArray[np.float64]] = []
        self._confirm_training: list[NDArray[np.float64]] = []
        self._confirm: _Learned | None = None
        self._training_start = float("nan")
        self._n = 0
        self._threshold = float("inf")
        self._inverse: NDArray[np.float64] | None = None
        self._above = 0
        self._below = 0
        self._settled = 0
        self._confirmed = False
        self._lookback = float("inf")
        self._in_contact = False
        self._start = 0.0
        self._last = 0.0
        self._peak = 0.0
        if self.mean is not None and self.covariance is not None:
            self._set_covariance(self.mean, self.covariance, self.training_samples)

    @property
    def ready(self) -> bool:
        """True once the covariance is learned."""
        return self._inverse is not None

    @property
    def threshold(self) -> float:
        """Current ``T^2`` threshold (inf before training)."""
        return self._threshold

    @property
    def in_contact(self) -> bool:
        """Whether the last sample was inside a contact."""
        return self._in_contact

    @property
    def candidate_start(self) -> float | None:
        """First stamp of the current run above the threshold (contact or being debounced)."""
        return self._start if (self._in_contact or self._above > 0) else None

    @property
    def contact_start(self) -> float | None:
        """Stamp of the first sample above the threshold of the current contact, if in one."""
        return self._start if self._in_contact else None

    def _set_covariance(self, mean: NDArray[np.float64], cov: NDArray[np.float64],
                        n: int) -> None:
        """Adopt a mean and covariance (all or nothing: bad input leaves the state as it was)."""
        threshold = t2_threshold(cov.shape[0], n, self.confidence)
        try:
            inverse = np.linalg.inv(cov)
        except np.linalg.LinAlgError as exc:
            raise SampleError("the residual covariance is singular") from exc
        self.mean, self.covariance, self._n = mean, cov, n
        self._inverse, self._threshold = inverse, threshold

    def reconfigure(self, confidence: float, training_samples: int, on_samples: int,
                    off_samples: int, release: float, training_time: float | None = None
                    ) -> None:
        """New settings, keeping what was learned (the threshold follows ``confidence``;
        ``training_time`` None keeps it); invalid ones raise :class:`InertialIdError` and
        change nothing."""
        if training_time is None:
            training_time = self.training_time
        T2Monitor(confidence=confidence, training_samples=training_samples,
                  training_time=training_time, on_samples=on_samples,
                  off_samples=off_samples, release=release)
        threshold = self._threshold
        if self.ready and self.mean is not None:
            threshold = t2_threshold(self.mean.size, self._n, confidence)
        self.confidence, self.training_samples = confidence, training_samples
        self.training_time = training_time
        self.on_samples, self.off_samples, self.release = on_samples, off_samples, release
        self._threshold = threshold
        if self._confirm is not None:
            self._confirm = self._confirm.at(confidence)

    @property
    def confirming(self) -> bool:
        """Whether contacts need the filtered residual's confirmation (see module doc)."""
        return self._confirm is not None

    def reset(self) -> None:
        """Forget the learned covariance and any contact state."""
        self.mean = self.covariance = self._inverse = None
        self._training, self._n, self._threshold = [], 0, float("inf")
        self._confirm_training, self._confirm = [], None
        self._training_start = float("nan")
        self._above = self._below = 0
        self._in_contact = False

    def clear_contact(self) -> None:
        """End any contact or pending run without logging an interval (e.g. after a tare)."""
        self._in_contact = False
        self._above = self._below = 0

    def t2(self, residuals: ArrayLike) -> NDArray[np.float64]:
        """``T^2`` of residuals (N, p) under the learned covariance."""
        if self._inverse is None or self.mean is None:
            raise InertialIdError("the T^2 monitor is not trained yet")
        e = np.atleast_2d(np.asarray(residuals, dtype=float))
        if e.ndim != 2 or e.shape[1] != self.mean.size:
            raise SampleError(f"residuals must be (N, {self.mean.size}), got {e.shape}")
        d = e - self.mean
        return np.einsum("ij,ij->i", d @ self._inverse, d)

    def update(self, times: ArrayLike, residuals: ArrayLike,
               filtered: ArrayLike | None = None, correlation_time: float = 0.0) -> T2Result:
        """Process N residuals (N, p) with stamps (N,); returns T^2 and contact flags.

        ``filtered`` (N, p): the same samples' filtered residual, whose samples stay
        correlated for ``correlation_time`` (s); given on every call from the first, it
        confirms contacts (see the module doc). Its ``T^2`` is not returned. The samples go
        through :meth:`advance` until all are taken, so the result does not depend on how
        a record is cut into calls."""
        t = np.asarray(times, dtype=float)
        e = np.atleast_2d(np.asarray(residuals, dtype=float))
        f = None if filtered is None else np.atleast_2d(np.asarray(filtered, dtype=float))
        parts: list[T2Result] = []
        start = 0
        while start < t.size or not parts:
            part = self.advance(t[start:], e[start:], None if f is None else f[start:],
                                correlation_time)
            parts.append(part)
            start += part.t2.size
        if len(parts) == 1:
            return parts[0]
        return T2Result(np.concatenate([r.t2 for r in parts]),
                        np.concatenate([r.contact for r in parts]), self._threshold)

    def advance(self, times: ArrayLike, residuals: ArrayLike,
                filtered: ArrayLike | None = None, correlation_time: float = 0.0) -> T2Result:
        """:meth:`update` up to and including the first sample that changes the monitor's
        state (its training completes, a contact starts or ends), or all N; the result
        covers the samples taken (its length), so a caller can act on the change before it
        gives the rest. Training takes exactly the samples it needs: ``training_samples``,
        or the first that span ``training_time``."""
        t = np.asarray(times, dtype=float)
        e = np.atleast_2d(np.asarray(residuals, dtype=float))
        f = None if filtered is None else np.atleast_2d(np.asarray(filtered, dtype=float))
        p = self.components
        if (e.shape != (t.size, p) or (f is not None and f.shape != e.shape)
                or not all(np.all(np.isfinite(x)) for x in (e, t, e if f is None else f))):
            raise SampleError(f"residuals must be ({t.size}, {p}) and finite, stamps finite")
        if not self.ready:
            m = self._train(t, e, f, correlation_time)
            return T2Result(np.zeros(m), np.zeros(m, dtype=bool), self._threshold)
        t2 = self.t2(e)
        confirmed, settled = np.ones(t.size, dtype=bool), np.zeros(t.size, dtype=bool)
        self._lookback = 2.0 * correlation_time if f is not None else np.inf
        if self._confirm is not None and f is not None:
            t2_filtered = self._confirm.t2(f)
            confirmed = t2_filtered > self._confirm.threshold
            settled = t2_filtered < self.release * self._confirm.threshold
        # Out of contact, a sample under the threshold only ends a run above it (flag
        # False): the samples up to the next one over it are skipped at once.
        over = np.flatnonzero(t2 > self._threshold)
        flags = np.zeros(t.size, dtype=bool)
        k = 0
        while k < t.size:
            if not self._in_contact and t2[k] <= self._threshold:
                self._above = 0
                j = int(np.searchsorted(over, k, side="right"))
                k = int(over[j]) if j < over.size else t.size
                continue
            was_in_contact = self._in_contact
            flags[k] = self._step(t[k], t2[k], confirmed[k], settled[k])
            k += 1
            if self._in_contact != was_in_contact:
                break
        t2, flags = t2[:k], flags[:k]
        if self.adapt and np.any(~flags):
            self._refine(e[:k][~flags])
        return T2Result(t2, flags, self._threshold)

    def _train(self, t: NDArray[np.float64], e: NDArray[np.float64],
               f: NDArray[np.float64] | None, correlation_time: float) -> int:
        """Collect residuals for training; learn once there are enough. Returns how many of
        the N it took: all, or up to the one that completes the training."""
        if not t.size:
            return 0
        if np.isnan(self._training_start):
            self._training_start = float(t[0])
        counts = sum(len(x) for x in self._training) + np.arange(1, t.size + 1)
        done = counts >= self.training_samples
        if self.training_time > 0.0:
            done |= (counts >= MIN_TIMED_TRAINING) & (t - self._training_start
                                                      >= self.training_time)
        hits = np.flatnonzero(done)
        m = int(hits[0]) + 1 if hits.size else t.size
        self._training.append(e[:m])
        if f is not None:
            self._confirm_training.append(f[:m])
        if not hits.size:
            return m
        data = np.concatenate(self._training)
        span = float(t[m - 1] - self._training_start)
        trim = self.confidence if self.trim_confidence is None else self.trim_confidence
        mean, cov, inliers = robust_mean_covariance(data, trim)
        self._set_covariance(mean, cov, inliers)
        if sum(len(x) for x in self._confirm_training) == len(data):
            self._confirm = _Learned.fit(np.concatenate(self._confirm_training), trim,
                                         self.confidence, span, correlation_time)
        self._training, self._confirm_training = [], []
        return m

    def _refine(self, e: NDArray[np.float64]) -> None:
        """Fold contact-free residuals into ``mu`` and ``S`` (running update)."""
        assert self.mean is not None and self.covariance is not None
        n_new = len(e)
        total = self._n + n_new
        delta = e.mean(axis=0) - self.mean
        mean = self.mean + delta * n_new / total
        scatter = (self.covariance * (self._n - 1) + np.cov(e.T, bias=True) * n_new
                   + np.outer(delta, delta) * self._n * n_new / total)
        self._set_covariance(mean, scatter / (total - 1), total)

    def _step(self, t: float, value: float, confirmed: bool = True,
              settled: bool = False) -> bool:
        """Debounce and hysteresis for one sample; returns its contact flag. With the filtered
        residual (module doc), ``confirmed``: its ``T^2`` is above its threshold, and a run
        above the threshold becomes a contact once one of its samples is (the contact starts
        at the run's first sample, or one filter span, twice the correlation time, before the
        first confirmed one if the run began earlier); ``settled``: it is under ``release``
        times its threshold, and a contact also ends after ``off_samples`` such samples."""
        if not self._in_contact:
            if value > self._threshold:
                if self._above == 0:
                    self._start, self._peak, self._confirmed = t, value, False
                self._above += 1
                self._peak = max(self._peak, value)
                if confirmed and not self._confirmed:  # what the raw run holds before is not
                    self._start = max(self._start, t - self._lookback)  # this contact's
                self._confirmed = self._confirmed or confirmed
            else:
                self._above = 0
            if self._above >= self.on_samples and self._confirmed:
                self._in_contact, self._below, self._settled, self._last = True, 0, 0, t
            return self._in_contact
        self._peak = max(self._peak, value)
        self._settled = self._settled + 1 if settled else 0
        if value < self.release * self._threshold:
            self._below += 1
        else:
            self._below = 0
            self._last = t
        if max(self._below, self._settled) >= self.off_samples:
            self._in_contact, self._above = False, 0
            self.intervals.append(ContactInterval(self._start, self._last, self._peak))
            return False
        return True


@dataclass(frozen=True)
class _Learned:
    """A residual's robust mean, inverse covariance and ``T^2`` threshold."""

    mean: NDArray[np.float64]
    inverse: NDArray[np.float64]
    n_eff: float
    threshold: float

    @classmethod
    def fit(cls, e: NDArray[np.float64], trim: float, confidence: float, span: float,
            correlation_time: float) -> _Learned | None:
        """From residuals (n, p) spanning ``span`` s whose samples stay correlated for
        ``correlation_time`` s: the Hotelling threshold counts ``span / correlation_time``
        independent samples (at most n, at least p + 2); None if the covariance is singular."""
        mean, cov, inliers = robust_mean_covariance(e, trim)
        p = e.shape[1]
        n_eff = float(inliers) if correlation_time <= 0.0 else span / correlation_time
        n_eff = min(max(n_eff, p + 2.0), float(inliers))
        try:
            inverse = np.linalg.inv(cov)
        except np.linalg.LinAlgError:
            return None
        return cls(mean, inverse, n_eff, t2_threshold(p, n_eff, confidence))

    def at(self, confidence: float) -> _Learned:
        """The same, thresholded at another confidence."""
        return replace(self, threshold=t2_threshold(self.mean.size, self.n_eff, confidence))

    def t2(self, e: NDArray[np.float64]) -> NDArray[np.float64]:
        """``T^2`` of residuals (N, p)."""
        d = e - self.mean
        return np.einsum("ij,ij->i", d @ self.inverse, d)


TRIM_CONFIDENCE = 0.99
"""Chi-square quantile at which the contact-free covariance of a joint-torque residual is
trimmed, below the detection's (0.9999): when pushes fill a third of a record, trimming at the
detection quantile keeps about half of their samples as "contact-free", the covariance grows
with them and weaker pushes fall under the threshold."""


def contact_intervals(times: ArrayLike, residuals: ArrayLike, confidence: float = 0.9999,
                      min_duration: float = 0.1, release_time: float = 0.1,
                      trim_confidence: float | None = TRIM_CONFIDENCE,
                      origin: float | None = None) -> list[list[float]]:
    """Offline contact intervals ``[start, end]`` (s since ``origin``, in the stamps' time;
    ``None``: the first stamp) of a whole record
    of residuals (N, p), e.g. joint torques minus a link model's prediction: a
    :class:`T2Monitor` trained robustly on the whole record (contact samples, a minority, are
    trimmed at the chi-square quantile ``trim_confidence``, so a record may start with a
    contact; None: at ``confidence``), then run over it; a contact starts after
    ``min_duration`` s above the threshold and ends after ``release_time`` s below; one still
    open at the end ends with the record.

    The durations matter on real arms: on the Franka Panda recording (no contact, identified
    model, raw 1 kHz torques) a 5-sample debounce reported 11 contacts in 21 s, each 30-230 ms
    of model error at a velocity reversal; 50 ms and longer reported none
    (``bench/panda_links.py`` counts them)."""
    t = np.asarray(times, dtype=float)
    e = np.atleast_2d(np.asarray(residuals, dtype=float))
    period = float(np.median(np.diff(t))) if t.size > 1 else 1.0
    monitor = T2Monitor(confidence=confidence, training_samples=len(t), components=e.shape[1],
                        trim_confidence=trim_confidence,
                        on_samples=max(1, int(round(min_duration / period))),
                        off_samples=max(1, int(round(release_time / period))))
    monitor.update(t, e)  # trains on everything
    monitor.update(t, e)
    found = [(c.start, c.end) for c in monitor.intervals]
    if monitor.contact_start is not None:
        found.append((monitor.contact_start, float(t[-1])))
    zero = float(t[0]) if origin is None else origin
    return [[round(float(a) - zero, 4), round(float(b) - zero, 4)] for a, b in found]
