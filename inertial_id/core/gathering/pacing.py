"""When the gatherer's batches leave (:class:`BatchPacer`): soon after new data, at most
about ``publish_rate`` a second.

A batch leaves :data:`COALESCE` after the message that armed it (so that what a driver sends
in one cycle travels in one batch), unless a token bucket holds it back: tokens accrue at
``rate x (1 + RATE_SLACK)`` a second, at most :data:`BURST` of them, and each batch takes
one.

Why the slack. A driver that publishes in bursts at exactly ``rate`` (a 200 Hz cycle, with
``publish_rate`` 200) brings one burst per token: a bucket that refills at exactly that rate
then gains back only the token each burst takes: once it has run dry (the start-up, a late
burst, a burst that came in two parts), every later batch waits for its token, at whatever
phase between :data:`COALESCE` and a whole period it reached, for good. Measured on the
benchmark's simulated arm (200 bursts a second): the batches waited 3.0 ms median instead of
0.5 ms. With tokens accruing :data:`RATE_SLACK` faster, each burst brings back that share
of a token, the bucket refills, and the batches leave :data:`COALESCE` after their bursts
again. A continuous stream (messages one by one) gets at most ``rate x (1 + RATE_SLACK)``
batches a second.
"""

from __future__ import annotations

from inertial_id.core.errors import InertialIdError

COALESCE = 0.0005
"""s a batch waits after the message that armed it, so that messages sent together (a robot
driver publishing its joint states and wrench in the same cycle) leave in one batch."""
BURST = 2.0
"""Batches that may leave in quick succession (the token bucket's depth), so that a driver's
jitter does not hold a batch back."""
RATE_SLACK = 0.1
"""Share by which the tokens accrue faster than the rate set (module docstring)."""


class BatchPacer:
    """The batch timer's token bucket (module docstring); times are seconds of a monotonic
    clock the caller passes. ``rate``: batches a second (> 0)."""

    def __init__(self, rate: float, now: float) -> None:
        self._rate = self._checked(rate)
        self.tokens = BURST
        self._at = now

    @staticmethod
    def _checked(rate: float) -> float:
        if not rate > 0.0:
            raise InertialIdError(f"batch rate must be > 0 Hz, got {rate}")
        return float(rate)

    @property
    def rate(self) -> float:
        """Batches a second the bucket allows on average (before :data:`RATE_SLACK`)."""
        return self._rate

    def set_rate(self, rate: float, now: float) -> None:
        """A new rate from ``now`` on (the tokens accrued so far at the old one are kept)."""
        self._refill(now)
        self._rate = self._checked(rate)

    def _refill(self, now: float) -> None:
        accrued = max(0.0, now - self._at) * self._rate * (1.0 + RATE_SLACK)
        self.tokens = min(BURST, self.tokens + accrued)
        self._at = max(self._at, now)

    def wait(self, now: float) -> float:
        """s from ``now`` (new data arrived, no batch is armed) until the batch may leave:
        :data:`COALESCE`, or longer while the bucket holds no whole token."""
        self._refill(now)
        return max(COALESCE, (1.0 - self.tokens) / (self._rate * (1.0 + RATE_SLACK)))

    def left(self, now: float) -> None:
        """A batch left at ``now``: it takes a token."""
        self._refill(now)
        self.tokens -= 1.0
