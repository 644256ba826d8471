"""The payload a robot driver subtracts from the wrench it publishes, and how to add it back.

A Universal Robots driver, once a payload is set (``SetPayload``), publishes its F/T reading
already compensated for that payload: ``w = s Y(v, a_g) (pi - pi_c) + offset + noise``
(DESIGN.md's measurement model, ``s`` the wrench sign, ``pi_c`` the payload the driver was
given, sensor frame, the papers' order and SI units). The wrench of a known rigid body is
linear in its 10 parameters, so the full wrench is restored from the same kinematics the
estimator uses: ``w + s Y(v, a_g) pi_c``. The estimator then sees the whole payload, keeps
it physically consistent, and a later tool change is a change of the whole payload (found
as B, not B - A). The covariance is not touched: ``pi_c`` is a known constant.

:class:`DriverCompensation` holds ``pi_c`` over wrench stamps (seconds, the stamps' clock):

- :meth:`~DriverCompensation.changing`: a request was sent at ``stamp``; the driver may switch
  at any moment from then on, so samples stamped from ``stamp - before`` are dropped until
- :meth:`~DriverCompensation.settled`: from ``stamp`` on the driver subtracts ``pi`` (the new
  payload once the driver accepted it and its transition ended, or the old one when it refused
  or did not answer); samples before ``stamp + after`` are still dropped (a filtered wrench
  averages over past samples).

A change that is never settled ends after :data:`PENDING_LIMIT` seconds of stamps, the
compensation unchanged (:attr:`~DriverCompensation.expired` counts it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.estimate import N_PI
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.regressor import predicted_wrench

PENDING, SETTLED = "driver_compensation_changing", "driver_compensation"
"""The ``method`` of the applier's ``~/compensation`` messages (inertial_id/
InertialParameters): a change was requested (its ``pi`` is what was compensated so far), or
the driver subtracts ``pi`` from the header's stamp on."""
PENDING_LIMIT = 30.0
"""s of stamps after which a change that was never settled is given up (nothing changed)."""
RESTORED = ("wrench", "wrench_raw")
"""The sample arrays (N, 6) the compensation is added back to; every (N, ...) array of a batch
is filtered with the kept samples."""


@dataclass(frozen=True)
class Announcement:
    """One ``~/compensation`` message of the applier: its header ``stamp`` (s) and
    ``frame``, its ``method`` (:data:`PENDING` or :data:`SETTLED`) and ``pi`` (10, in
    ``frame``, the papers' order, SI units)."""

    stamp: float
    method: str
    frame: str
    pi: NDArray[np.float64]


class DriverCompensation:
    """``pi_c`` over stamps and the samples held off around a change (module docstring).

    ``sign``: ``s`` of the measurement model (``-1`` payload-on-sensor, ``+1``).
    """

    def __init__(self, sign: float) -> None:
        self.sign = float(sign)
        self._starts = [-np.inf]  # s: segment k holds from _starts[k]
        self._values = [np.zeros(N_PI)]  # its pi_c, sensor frame
        self._hold: tuple[float, float] | None = None  # [start, end) of dropped stamps
        self.dropped = 0
        """Samples dropped because the driver's compensation was changing."""
        self.expired = 0
        """Changes never settled within :data:`PENDING_LIMIT`."""

    @property
    def current(self) -> NDArray[np.float64]:
        """``pi_c`` the driver subtracts now (the latest settled), sensor frame."""
        return self._values[-1]

    @property
    def since(self) -> float:
        """s: the stamp from which :attr:`current` holds (-inf: never changed)."""
        return self._starts[-1]

    @property
    def changing(self) -> bool:
        """A change was requested and not settled yet."""
        return self._hold is not None and np.isinf(self._hold[1])

    def request(self, stamp: float, before: float = 0.0) -> None:
        """A change was requested at ``stamp`` (s): samples from ``stamp - before`` are
        dropped until :meth:`settled`."""
        start = stamp - before
        if self.changing:  # a second request before the first settled
            start = min(start, self._hold[0])
        self._hold = (start, np.inf)

    def settled(self, stamp: float, pi: NDArray[np.float64], after: float = 0.0) -> None:
        """From ``stamp`` (s) on the driver subtracts ``pi`` (10, sensor frame); samples
        before ``stamp + after`` since the request are dropped."""
        pi = np.asarray(pi, dtype=float)
        if pi.shape != (N_PI,) or not np.isfinite(pi).all():
            raise ValueError(f"a compensation needs 10 finite parameters, got {pi}")
        start = self._hold[0] if self.changing else stamp
        self._hold = (min(start, stamp), stamp + after)
        if not np.array_equal(pi, self.current):
            keep = int(np.searchsorted(self._starts, stamp, side="right"))
            del self._starts[max(keep, 1):], self._values[max(keep, 1):]
            self._starts.append(float(stamp))
            self._values.append(pi)

    def announce(self, announcement: Announcement, before: float, after: float) -> None:
        """An announcement whose ``pi`` is in the samples' (sensor) frame: a request
        (:meth:`request`, ``before``) or a settle (:meth:`settled`, ``after``); any other
        method is ignored."""
        if announcement.method == PENDING:
            self.request(announcement.stamp, before)
        elif announcement.method == SETTLED:
            self.settled(announcement.stamp, announcement.pi, after)

    def restore(self, samples: dict[str, object]) -> dict[str, object]:
        """A batch (the keyword arguments of :meth:`OnlineEstimator.add`: ``times`` (N,),
        ``twist``, ``proper_acceleration``, ``wrench``, ``wrench_raw`` (N, 6) and any other
        per-sample array) with the held-off samples left out (counted in :attr:`dropped`) and
        ``s Y(v, a_g) pi_c`` added to the wrenches of the others."""
        times = np.asarray(samples["times"], dtype=float)
        if times.ndim != 1 or any(
                not (isinstance(samples.get(k), np.ndarray) and samples[k].shape == (times.size, 6))
                for k in ("twist", "proper_acceleration", "wrench")):
            return samples  # malformed: the estimator refuses it and says why
        keep = np.ones(times.size, dtype=bool)
        if self._hold is not None:
            start, end = self._hold
            if np.isinf(end) and times.size and times[-1] - start > PENDING_LIMIT:
                self.expired += 1
                end = start + PENDING_LIMIT
                self._hold = (start, end)
            keep = (times < start) | (times >= end)
        kept = int(np.count_nonzero(keep))
        self.dropped += int(times.size - kept)
        if len(self._starts) == 1 and kept == times.size:
            return samples  # nothing held, nothing to restore: the batch as it came
        out = {k: (v[keep] if isinstance(v, np.ndarray) and v.shape[:1] == times.shape else v)
               for k, v in samples.items()}
        if len(self._starts) == 1 or not kept:
            return out
        index = np.searchsorted(self._starts, out["times"], side="right") - 1
        added = np.zeros((index.size, 6))
        for k in np.unique(index):  # one or two segments per batch
            rows = index == k
            if self._values[k].any():
                products = out.get("angular_products")
                added[rows] = predicted_wrench(self._values[k], out["twist"][rows],
                                               out["proper_acceleration"][rows],
                                               sign=self.sign, products=None if products is None
                                               else products[rows])
        for name in RESTORED:
            if out.get(name) is not None:
                out[name] = out[name] + added
        return out


def compensated_body(body: BodyParameters, with_inertia: bool) -> BodyParameters:
    """What a driver given ``body`` (any frame) subtracts: ``body`` itself when it was sent
    the inertia, else a point mass at its CoM (it was sent only the mass and the CoM)."""
    if with_inertia:
        return body
    return BodyParameters.from_mass_com_inertia(body.mass, body.com, np.zeros((3, 3)))
