"""When an identified payload may be sent to the robot: the gates of a live apply.

The applier node (:mod:`inertial_id.nodes.applier`) feeds every published estimate to an
:class:`ApplyGate` as the quantities its target takes (:data:`GROUPS`: mass, CoM, inertia
about the CoM, F/T offset, each with its std and the solver's verdict, in the estimate's own
frame and SI units) and the contact flag. An automatic apply needs all of:

- every group the target takes converged;
- no contact, and none for ``stable_s`` seconds;
- stable: no entry moved by more than ``change_std`` of its std for ``stable_s`` seconds;
- changed: some entry differs from what was last applied by more than ``change_std`` of its
  std (the first apply always differs);
- at least ``min_interval`` seconds since the last apply or attempt.

A manual apply (the node's ``~/apply``) needs only the first two: the user asked for it now.
Times are seconds on one monotonic clock; an unknown std (published as -1) counts as infinite,
so such an entry never looks changed, and it is never converged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

GROUPS = ("mass", "com", "inertia", "offset")
"""The quantities a target can take: kg; m (3); kg m^2 about the CoM (6); N and N m (6)."""


@dataclass(frozen=True)
class GateSettings:
    """``stable_s`` (s), ``change_std`` (how many std make a change) and ``min_interval``
    (s between two automatic applies)."""

    stable_s: float = 5.0
    change_std: float = 3.0
    min_interval: float = 30.0


@dataclass(frozen=True)
class Observation:
    """One estimate as the gate sees it: the values of the target's groups concatenated, their
    std (same order and units), and whether every one of those groups has converged."""

    values: NDArray[np.float64]
    std: NDArray[np.float64]
    converged: bool

    def moved(self, reference: NDArray[np.float64], change_std: float) -> bool:
        """Some entry differs from ``reference`` by more than ``change_std`` of its std."""
        std = np.where(self.std >= 0.0, self.std, np.inf)
        return bool(np.any(np.abs(self.values - reference) > change_std * std))


class ApplyGate:
    """The gates of the module docstring over a stream of observations and contact flags."""

    def __init__(self, settings: GateSettings) -> None:
        self.settings = settings
        self.latest: Observation | None = None
        self.in_contact = False
        self.last_contact = -math.inf
        self.applied: NDArray[np.float64] | None = None
        self.applied_at = -math.inf
        self._reference: NDArray[np.float64] | None = None
        self._stable_since = math.inf

    def observe(self, now: float, observation: Observation) -> None:
        """A new estimate at ``now``: the stable period restarts when it is not converged or
        has moved from where the period started."""
        self.latest = observation
        if not observation.converged:
            self._reference, self._stable_since = None, math.inf
        elif (self._reference is None
              or observation.moved(self._reference, self.settings.change_std)):
            self._reference, self._stable_since = observation.values, now

    def contact(self, now: float, in_contact: bool) -> None:
        """The solver's contact flag at ``now``; a contact also restarts the stable period."""
        self.in_contact = in_contact
        if in_contact:
            self.last_contact = now
            self._stable_since = math.inf
            self._reference = None

    def stable_for(self, now: float) -> float:
        """s the estimate has been converged, contact-free and unmoved (0 if it is not)."""
        since = max(self._stable_since, self.last_contact)
        return max(0.0, now - since) if math.isfinite(since) else 0.0

    def refusal(self, now: float, manual: bool = False) -> str:
        """Why an apply at ``now`` may not happen (one line), or "" when it may."""
        latest = self.latest
        if latest is None:
            return "no estimate yet"
        if not latest.converged:
            return "not converged"
        if self.in_contact:
            return "in contact"
        if manual:
            return ""
        settings = self.settings
        stable = self.stable_for(now)
        if stable < settings.stable_s:
            return f"stable for {stable:.1f} of {settings.stable_s:g} s"
        if self.applied is not None and not latest.moved(self.applied, settings.change_std):
            return f"within {settings.change_std:g} std of what was applied"
        wait = self.applied_at + settings.min_interval - now
        if wait > 0.0:
            return f"rate limit: {wait:.1f} s to wait"
        return ""

    def attempted(self, now: float) -> None:
        """An apply was tried at ``now`` and did not take (refused, unanswered, nowhere to
        send it): the rate limit counts it."""
        self.applied_at = now

    def mark_applied(self, now: float, values: NDArray[np.float64]) -> None:
        """``values`` (the observation's layout) were applied at ``now``."""
        self.applied = np.array(values, dtype=float)
        self.attempted(now)
