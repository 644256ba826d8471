"""Warm-up friction recognised in a joint residual (:func:`fit_warmup`), so a cold start is not
taken for a contact.

A drive that starts cold has more friction for its first minutes: ``(1 + a_j exp(-t / T)) f_j``
with ``f_j`` the joint's friction effort (Coulomb and viscous, effort units), ``t`` s since
the record's start and ``a_j`` a share of up to a few tens of %. A link model identified warm
(or on a whole record) leaves ``a_j exp(-t / T) f_j - b_j f_j`` in the residual: slow, on every
moving joint at once and following each joint's velocity, unlike a push, which acts through
the Jacobian for a second or two whatever the velocity. :func:`fit_warmup` fits that
shape per joint (``0 <= a_j <=`` :data:`WARMUP_MAX`, ``|b_j| <=`` :data:`WARMUP_MAX`, one
``T`` of :data:`WARMUP_TIMES` for all joints) by least squares on the rows that do not stand
out (a push's are trimmed, :data:`TRIM_SIGMAS`), and :meth:`WarmUp.efforts` gives what to
subtract before the contact test. The bound keeps a push from being explained away: at most
:data:`WARMUP_MAX` of the joint's friction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.estimation.anomaly import contact_intervals, median_and_spread

WARMUP_MAX = 0.3
"""Largest warm-up share ``a_j`` (and level change ``|b_j|``) of a joint's friction that
:func:`fit_warmup` accepts (fraction)."""
WARMUP_TIMES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
"""s: the warm-up time constants ``T`` :func:`fit_warmup` tries."""
TRIM_SIGMAS = 4.0
"""Rows where some joint's residual (after a first fit) lies beyond this many robust std
(1.4826 MAD) stay out of the second fit: a push is there, not friction."""


@dataclass(frozen=True)
class WarmUp:
    """A fitted warm-up: per joint the share ``a`` (fraction of the friction effort at the
    record's start) and level change ``b``, and the time constant ``T`` (s)."""

    share: NDArray[np.float64]
    level: NDArray[np.float64]
    time_constant: float

    def efforts(self, since: ArrayLike, friction: ArrayLike) -> NDArray[np.float64]:
        """The warm-up's efforts (N, nv; effort units) at ``since`` (N,) s after the record's
        start, from the friction efforts ``friction`` (N, nv) of the link model there."""
        decay = np.exp(-np.asarray(since, dtype=float) / self.time_constant)[:, None]
        return (self.share * decay + self.level) * np.asarray(friction, dtype=float)


def _bounded_fit(moments: NDArray[np.float64], bound: float) -> tuple[float, float, float]:
    """One joint's ``r ~ a g + b f`` with ``0 <= a <= bound``, ``|b| <= bound`` from its
    moments ``[gg, gf, ff, gr, fr, rr]``; ``(a, b, squared error)``."""
    gg, gf, ff, gr, fr, rr = moments
    gram = np.array([[gg, gf], [gf, ff]])
    a = b = 0.0
    if ff > 0 and np.linalg.cond(gram) < 1e12:
        a, b = np.linalg.solve(gram, [gr, fr])
    if not 0.0 <= a <= bound:
        a = float(np.clip(a, 0.0, bound))
        b = (fr - a * gf) / ff if ff > 0 else 0.0
    b = float(np.clip(b, -bound, bound))
    error = rr - 2 * a * gr - 2 * b * fr + a * a * gg + 2 * a * b * gf + b * b * ff
    return float(a), b, float(max(error, 0.0))


class WarmUpStatistics:
    """Sufficient statistics of the warm-up fit (module docstring), per time constant of
    ``times`` (s) and joint: the moments of ``g = exp(-t / T) f``, ``f`` and the residual
    ``r``. Rows are added in any chunks (live: as they come, a contact's left out)."""

    def __init__(self, joints: int, times: Sequence[float] = WARMUP_TIMES,
                 bound: float = WARMUP_MAX) -> None:
        self.times = np.asarray(times, dtype=float)
        self.bound = float(bound)
        self.moments = np.zeros((self.times.size, joints, 6))

    def add(self, since: ArrayLike, residual: ArrayLike, friction: ArrayLike) -> None:
        """Rows ``since`` (N,) s after the record's start, joint ``residual`` and the link
        model's friction efforts ``friction`` (N, nv; effort units)."""
        since = np.asarray(since, dtype=float)
        r = np.atleast_2d(np.asarray(residual, dtype=float))
        f = np.atleast_2d(np.asarray(friction, dtype=float))
        for k, time_constant in enumerate(self.times):
            g = np.exp(-since / time_constant)[:, None] * f
            self.moments[k] += np.stack([np.sum(g * g, 0), np.sum(g * f, 0), np.sum(f * f, 0),
                                         np.sum(g * r, 0), np.sum(f * r, 0), np.sum(r * r, 0)],
                                        axis=1)

    def fit(self) -> WarmUp:
        """The bounded least-squares warm-up, its ``T`` the one of least sum over joints of
        squared error relative to the joint's residual energy (no warm-up before any row)."""
        joints = self.moments.shape[1]
        best: tuple[float, WarmUp] = (np.inf, WarmUp(np.zeros(joints), np.zeros(joints),
                                                     float(self.times[0])))
        for k, time_constant in enumerate(self.times):
            fits = [_bounded_fit(m, self.bound) for m in self.moments[k]]
            energy = np.maximum(self.moments[k, :, 5], 1e-300)
            cost = float(sum(e / energy[j] for j, (_, _, e) in enumerate(fits)))
            if cost < best[0]:
                best = (cost, WarmUp(np.array([a for a, _, _ in fits]),
                                     np.array([b for _, b, _ in fits]), float(time_constant)))
        return best[1]


def _fit(since: NDArray[np.float64], residual: NDArray[np.float64],
         friction: NDArray[np.float64], times: Sequence[float], bound: float) -> WarmUp:
    """:meth:`WarmUpStatistics.fit` on these rows."""
    statistics = WarmUpStatistics(residual.shape[1], times, bound)
    statistics.add(since, residual, friction)
    return statistics.fit()


def fit_warmup(since: ArrayLike, residual: ArrayLike, friction: ArrayLike,
               times: Sequence[float] = WARMUP_TIMES, bound: float = WARMUP_MAX) -> WarmUp:
    """The warm-up in a record's joint ``residual`` (N, nv; measured minus predicted, effort
    units) given the link model's friction efforts ``friction`` (N, nv) on the same rows,
    ``since`` (N,) s after the record's start: fitted on every row, then again without the
    rows that stand out (:data:`TRIM_SIGMAS`)."""
    since = np.asarray(since, dtype=float)
    residual = np.atleast_2d(np.asarray(residual, dtype=float))
    friction = np.atleast_2d(np.asarray(friction, dtype=float))
    first = _fit(since, residual, friction, times, bound)
    left = residual - first.efforts(since, friction)
    centre, spread = median_and_spread(left)
    quiet = np.all(np.abs(left - centre) <= TRIM_SIGMAS * np.maximum(spread, 1e-12), axis=1)
    if np.count_nonzero(quiet) < max(10, since.size // 2):
        return first
    return _fit(since[quiet], residual[quiet], friction[quiet], times, bound)


def warm_contact_intervals(since: ArrayLike, residual: ArrayLike, friction: ArrayLike,
                           confidence: float = 0.9999) -> tuple[list[list[float]], WarmUp]:
    """Offline contact intervals ``[start, end]`` (s, in ``since``'s time: s after the
    record's start) of :func:`~inertial_id.core.estimation.anomaly.contact_intervals` on the
    joint ``residual`` with the warm-up fitted by :func:`fit_warmup` taken out, and that
    warm-up."""
    since = np.asarray(since, dtype=float)
    warm = fit_warmup(since, residual, friction)
    left = np.atleast_2d(np.asarray(residual, dtype=float)) - warm.efforts(since, friction)
    return contact_intervals(since, left, confidence, origin=0.0), warm
