"""Joint-state spikes: a joint state farther from the last one than any joint can move in the
time between is dropped before the filter sees it (:class:`SpikeGuard`), unless enough agree
with each other that the stream itself moved.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

SPIKE_SPEED_MARGIN = 10.0
"""A joint state is a spike when a joint moved more than this many times its speed limit times
the time since the last joint state ..."""
SPIKE_SLACK = 0.1
"""... plus this much (rad or m: encoder noise, stamp jitter) ..."""
DEFAULT_MAX_JOINT_SPEED = 10.0
"""... the speed limit (rad/s or m/s) of a joint whose URDF gives none ..."""
SPIKE_FOLLOW = 25
"""... unless this many joint states in a row are spikes that agree with each other: then the
stream itself moved (or the state before them was the spike) and the buffers restart."""


class SpikeGuard:
    """Judges each joint state against the last one kept, with the joints' speed limits
    ``max_speed`` (rad/s or m/s per joint, e.g. the URDF's velocity limits;
    :data:`DEFAULT_MAX_JOINT_SPEED` where absent or not positive; None: no joint state is a
    spike)."""

    def __init__(self, max_speed: ArrayLike | None = None) -> None:
        self.max_speed = None
        if max_speed is not None:
            speed = np.asarray(max_speed, dtype=float)
            self.max_speed = np.where(np.isfinite(speed) & (speed > 0.0), speed,
                                      DEFAULT_MAX_JOINT_SPEED)
        self._spikes: tuple[float, NDArray[np.float64], int] | None = None  # the last one,
        # and how many agreeing ones in a row

    def too_far(self, dt: NDArray[np.float64] | float,
                step: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Whether a change of the joints' positions ``step`` ((..., n) rad or m) in ``dt``
        (s) is farther than any joint moves (:data:`SPIKE_SPEED_MARGIN`); per row."""
        if self.max_speed is None:
            return np.zeros(np.shape(step)[:-1], dtype=bool)
        allowed = SPIKE_SPEED_MARGIN * self.max_speed * np.asarray(dt)[..., None] + SPIKE_SLACK
        return np.any(np.abs(step) > allowed, axis=-1)

    def judge(self, t: float, q: NDArray[np.float64],
              last: tuple[float, NDArray[np.float64]] | None
              ) -> Literal["keep", "spike", "restart"]:
        """The joint state ``q`` at ``t`` after the last one kept (``last``: its stamp and
        positions; None when there is none): ``keep`` it, drop it as a ``spike``, or, the
        :data:`SPIKE_FOLLOW`-th agreeing spike in a row, ``restart`` the buffers from it."""
        if last is None or not self.too_far(t - last[0], q - last[1]):
            self._spikes = None
            return "keep"
        run = 1
        if self._spikes is not None:
            last_t, last_q, count = self._spikes
            if t > last_t and not self.too_far(t - last_t, q - last_q):
                run = count + 1
        if run >= SPIKE_FOLLOW:
            self._spikes = None
            return "restart"
        self._spikes = (t, q, run)
        return "spike"
