"""The health of a node's input streams: mostly dropped (:class:`DropWatch`), lost upstream
(:class:`UpstreamLoss`), silent (:class:`Silence`).
"""

from __future__ import annotations

import time
from collections import Counter


class DropWatch:
    """Notices a stream that arrives but is mostly dropped (a stall that would otherwise say
    OK): between two checks, more than ``share`` of a kind's messages dropped.

    ``check`` takes the received count per kind and the drop counters (keys
    ``<kind>_<reason>``, cumulative) and returns a one-line warning, or "" when all is well.
    """

    def __init__(self, share: float = 0.5) -> None:
        self.share = share
        self._received: dict[str, int] = {}
        self._dropped: Counter[str] = Counter()

    def check(self, received: dict[str, int], dropped: Counter[str]) -> str:
        """Compare with the previous call; see the class docstring."""
        warnings = []
        for kind, count in received.items():
            new = count - self._received.get(kind, 0)
            reasons = Counter({k: v - self._dropped[k] for k, v in dropped.items()
                               if k.startswith(f"{kind}_") and v > self._dropped[k]})
            lost = sum(reasons.values())
            if new > 0 and lost > self.share * new:
                reason, _ = reasons.most_common(1)[0]
                warnings.append(f"{100.0 * min(lost, new) / new:.0f} % of the {kind} messages "
                                f"dropped since the last status, mostly {reason}")
        self._received = dict(received)
        self._dropped = Counter(dropped)
        return "; ".join(warnings)


class UpstreamLoss:
    """Samples lost on the way from the previous node (``lost``), from the running count its
    batches carry (``samples_before``); a count that goes back (the publisher restarted)
    resyncs. ``missed``: what the publisher had sent before the first batch received from it
    (this node started, or its subscription matched, later): never in transit to this node,
    so not a loss, but counted so that the two nodes' ledgers add up."""

    def __init__(self) -> None:
        self.lost = 0
        self.missed = 0
        self._expected: int | None = None

    def update(self, samples_before: int, count: int) -> None:
        """One batch of ``count`` samples, after ``samples_before`` sent earlier."""
        if self._expected is None or samples_before < self._expected:
            self.missed += samples_before
        elif samples_before > self._expected:
            self.lost += samples_before - self._expected
        self._expected = samples_before + count


class Silence:
    """Tracks when a topic last delivered, in wall time (a silent input is a WARN)."""

    def __init__(self, timeout: float = 1.0) -> None:
        self.timeout = timeout
        self._last: float | None = None
        self.count = 0

    def tick(self) -> None:
        """A message arrived."""
        self._last = time.monotonic()
        self.count += 1

    @property
    def silent(self) -> bool:
        """No message for ``timeout`` seconds (or never)."""
        return self._last is None or time.monotonic() - self._last > self.timeout
