"""F/T sensors as they are in real installations, for the simulator.

:class:`SensorConditions` turns the ideal readings of a
:class:`~inertial_id.core.simulation.PayloadSimulation` into what a driver publishes:

- a bias that drifts linearly (``drift``, per axis, N/s and N m/s, as with temperature);
- re-zero steps (``rezero`` times, s): a driver's tare sets the reading to zero there, so from
  then on it is lower by the noise-free reading at that time (the payload's wrench plus the
  bias then);
- irregular sampling: the measurement times at ``rate`` Hz, each period scaled by a uniform
  ``1 +- period_jitter``;
- stamps taken on reception: each stamp is the measurement time plus a lag uniform in
  ``lag`` (s), kept non-decreasing (a driver stamps in arrival order);
- quantisation of the values to ``quantum`` (N, N m; zero: none);
- delivery in bursts of ``burst`` messages (they arrive together, after the last one was
  measured), with a share ``burst_loss`` of the bursts lost;
- joint states with stamp jitter (``joint_jitter``, s, uniform +-) and a share
  ``joint_loss`` of them lost.

Times are seconds from the start of the recording; wrenches ``[fx, fy, fz, tx, ty, tz]`` in
the sensor frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError

if TYPE_CHECKING:
    from inertial_id.core.simulation import PayloadSimulation


@dataclass(frozen=True)
class WrenchStream:
    """What a wrench driver delivers: per message its true measurement ``time``, its
    ``stamp``, its ``arrival`` (the log time of a recording) (N,) s, and its ``wrench`` (N, 6)."""

    time: NDArray[np.float64]
    stamp: NDArray[np.float64]
    arrival: NDArray[np.float64]
    wrench: NDArray[np.float64]


@dataclass(frozen=True)
class SensorConditions:
    """The conditions of a sensor and its transport (see the module docstring); the defaults
    are an ideal sensor: no drift, no re-zero, regular, stamped at measurement, not quantised,
    one message at a time, nothing lost."""

    drift: tuple[float, ...] = (0.0,) * 6
    rezero: tuple[float, ...] = ()
    period_jitter: float = 0.0
    lag: tuple[float, float] = (0.0, 0.0)
    quantum: tuple[float, float] = (0.0, 0.0)
    burst: int = 1
    burst_loss: float = 0.0
    joint_jitter: float = 0.0
    joint_loss: float = 0.0

    def __post_init__(self) -> None:
        if len(self.drift) != 6:
            raise InertialIdError(f"drift needs 6 rates, got {len(self.drift)}")
        if not (0.0 <= self.period_jitter < 1.0 and 0.0 <= self.lag[0] <= self.lag[1]
                and min(self.quantum) >= 0.0 and self.burst >= 1
                and 0.0 <= self.burst_loss < 1.0 and 0.0 <= self.joint_loss < 1.0
                and self.joint_jitter >= 0.0):
            raise InertialIdError("sensor conditions out of range: period_jitter in [0, 1), "
                                  "0 <= lag low <= high, quantum >= 0, burst >= 1, losses "
                                  "in [0, 1), joint_jitter >= 0")

    def measurement_times(self, duration: float, rate: float,
                          rng: np.random.Generator) -> NDArray[np.float64]:
        """Measurement times over ``[0, duration)`` s at ``rate`` Hz, each period scaled by a
        uniform ``1 +- period_jitter``."""
        if self.period_jitter == 0.0:
            return np.arange(0.0, duration, 1.0 / rate)
        count = int(np.ceil(duration * rate * (1.0 + self.period_jitter))) + 1
        periods = (1.0 + rng.uniform(-self.period_jitter, self.period_jitter, count)) / rate
        times = np.concatenate(([0.0], np.cumsum(periods)))
        return times[times < duration]

    def bias_change(self, times: ArrayLike, clean_at_rezero: ArrayLike
                    ) -> NDArray[np.float64]:
        """The bias added to the ideal reading at ``times`` (N, 6): the drift ``drift t``
        less, after each re-zero, the noise-free reading at it (``clean_at_rezero``, (R, 6),
        the reading with the drift and earlier re-zeros)."""
        t = np.atleast_1d(np.asarray(times, dtype=float))
        out = t[:, None] * np.asarray(self.drift, dtype=float)[None, :]
        steps = np.atleast_2d(np.asarray(clean_at_rezero, dtype=float))
        for when, step in zip(self.rezero, steps, strict=False):
            out[t >= when] -= step
        return out

    def quantise(self, wrench: ArrayLike) -> NDArray[np.float64]:
        """``wrench`` (N, 6) rounded to the force and torque quanta (none where zero)."""
        w = np.array(wrench, dtype=float)
        for axes, quantum in ((slice(0, 3), self.quantum[0]), (slice(3, 6), self.quantum[1])):
            if quantum > 0.0:
                w[:, axes] = np.round(w[:, axes] / quantum) * quantum
        return w

    def deliver(self, times: NDArray[np.float64], wrench: NDArray[np.float64],
                rng: np.random.Generator) -> WrenchStream:
        """Stamps on reception (lag and jitter), quantisation, bursts and their loss."""
        lag = rng.uniform(self.lag[0], self.lag[1], times.size)
        stamps = np.maximum.accumulate(times + lag)
        group = np.arange(times.size) // self.burst
        last = np.minimum((group + 1) * self.burst, times.size) - 1
        arrival = np.maximum(stamps[last], times[last] + lag[last])
        kept = rng.uniform(size=group.max(initial=0) + 1) >= self.burst_loss
        keep = kept[group]
        return WrenchStream(times[keep], stamps[keep], arrival[keep],
                            self.quantise(wrench[keep]))

    def joint_stamps(self, times: NDArray[np.float64], rng: np.random.Generator
                     ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Indices of the joint states kept (a share ``joint_loss`` lost) and their stamps
        (``times`` with a uniform +- ``joint_jitter``, kept increasing)."""
        keep = np.flatnonzero(rng.uniform(size=times.size) >= self.joint_loss)
        stamps = times[keep] + rng.uniform(-self.joint_jitter, self.joint_jitter, keep.size)
        return keep, np.maximum.accumulate(stamps)


def rezero_steps(sim: PayloadSimulation, conditions: SensorConditions) -> NDArray[np.float64]:
    """What each re-zero of ``conditions`` takes off the reading from then on (R, 6): the
    noise-free reading of ``sim`` at it, the drift and the earlier re-zeros included."""
    steps = np.zeros((len(conditions.rezero), 6))
    for k, when in enumerate(conditions.rezero):
        steps[k] = (sim.wrench([when], noise=False)[0]
                    + conditions.bias_change([when], steps[:k])[0])
    return steps


def wrench_stream(sim: PayloadSimulation, conditions: SensorConditions, duration: float,
                  rate: float, rng: np.random.Generator) -> WrenchStream:
    """The F/T messages of ``sim`` over ``duration`` s at about ``rate`` Hz under
    ``conditions``: its readings (noise included) with the drift and re-zero steps, then
    delivered (:meth:`SensorConditions.deliver`)."""
    times = conditions.measurement_times(duration, rate, rng)
    reading = sim.wrench(times) + conditions.bias_change(times, rezero_steps(sim, conditions))
    return conditions.deliver(times, reading, rng)


def true_bias(sim: PayloadSimulation, conditions: SensorConditions,
              times: ArrayLike) -> NDArray[np.float64]:
    """The sensor's bias at ``times`` (N, 6): ``sim``'s offset plus the drift and the re-zero
    steps (what an estimate of the current bias should find)."""
    return sim.offset[None, :] + conditions.bias_change(times, rezero_steps(sim, conditions))
