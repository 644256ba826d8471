"""The whole payload pipeline in one object, for offline replay and benchmarks.

:class:`PayloadPipeline` chains the same core objects the three nodes run —
:class:`~inertial_id.core.gathering.gatherer.Gathering` (gatherer), :class:`SensorKinematics`
(kinematics) and :class:`~inertial_id.core.estimation.online.OnlineEstimator` (solver) — and solves
every
``solve_period`` seconds of *sample time*, as the solver node does under simulated time.
It keeps a compact history (one row per processed batch and per solve) for reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimation.estimators import Estimate
from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.gathering.gatherer import (
    Gathering,
    JointStateSample,
    MessageBlock,
    WrenchSample,
)
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.stages import KinematicsStage

SAMPLE_EVERY = 10
"""One sample in this many is kept for the report's wrench-fit figure (100 Hz at 1 kHz)."""


@dataclass
class History:
    """What happened, for plots: per batch and per solve (times in s, sample stamps).

    Per batch: ``batch_time`` (last stamp), ``batch_t2_max``, ``batch_threshold``,
    ``batch_contact`` (any sample flagged), ``batch_residual_rms`` (6 per batch).
    Per solve: ``solve_time``, ``pi``, ``std``, ``offset``, ``offset_std``,
    ``condition_number``, ``consistent``. Every ``SAMPLE_EVERY``-th sample the estimator
    used or tested: ``sample_time`` and ``sample_rows`` (18 = twist, proper acceleration,
    raw wrench), to draw the final estimate's fit.
    """

    batch_time: list[float] = field(default_factory=list)
    batch_t2_max: list[float] = field(default_factory=list)
    batch_threshold: list[float] = field(default_factory=list)
    batch_contact: list[bool] = field(default_factory=list)
    batch_residual_rms: list[NDArray[np.float64]] = field(default_factory=list)
    solve_time: list[float] = field(default_factory=list)
    pi: list[NDArray[np.float64]] = field(default_factory=list)
    std: list[NDArray[np.float64]] = field(default_factory=list)
    offset: list[NDArray[np.float64]] = field(default_factory=list)
    offset_std: list[NDArray[np.float64]] = field(default_factory=list)
    condition_number: list[float] = field(default_factory=list)
    consistent: list[bool] = field(default_factory=list)
    sample_time: list[NDArray[np.float64]] = field(default_factory=list)
    sample_rows: list[NDArray[np.float64]] = field(default_factory=list)

    def record_samples(self, times: NDArray[np.float64], rows: NDArray[np.float64],
                       first: int) -> None:
        """Keep every ``SAMPLE_EVERY``-th of a batch whose first sample is the ``first``-th
        of the run (times (N,), rows (N, 18))."""
        pick = np.flatnonzero((first + np.arange(times.size)) % SAMPLE_EVERY == 0)
        if pick.size:
            self.sample_time.append(times[pick])
            self.sample_rows.append(rows[pick])

    def record_solve(self, t: float, estimate: Estimate) -> None:
        """Append one solve."""
        self.solve_time.append(t)
        self.pi.append(estimate.pi.copy())
        self.std.append(estimate.std)
        self.offset.append(estimate.offset.copy())
        self.offset_std.append(estimate.offset_std)
        self.condition_number.append(estimate.condition_number)
        self.consistent.append(estimate.physically_consistent)


class PayloadPipeline:
    """gatherer -> kinematics -> solver without ROS; see the module docstring."""

    def __init__(self, gathering: Gathering, kinematics: SensorKinematics,
                 online: OnlineEstimator, solve_period: float = 0.5) -> None:
        if gathering.joint_names != kinematics.joint_names:
            raise InertialIdError(
                f"gatherer joints {gathering.joint_names} differ from the model's "
                f"{kinematics.joint_names}: lock the same joints in both")
        gathering.match(kinematics)
        self.gathering = gathering
        self.kinematics = kinematics
        self.stage = KinematicsStage(kinematics)
        self.online = online
        self.solve_period = solve_period
        self.history = History()
        self.samples = 0
        self.solve_failures: list[str] = []
        self._next_solve: float | None = None
        self._last_time = float("nan")

    def add_joint_state(self, t: float, names: Sequence[str], positions: Sequence[float],
                        velocities: Sequence[float] = ()) -> bool:
        """One joint state; see :meth:`Gathering.add_joint_state`."""
        return self.gathering.add_joint_state(t, names, positions, velocities)

    def add_wrench(self, t: float, wrench: ArrayLike) -> bool:
        """One wrench; see :meth:`Gathering.add_wrench`."""
        return self.gathering.add_wrench(t, wrench)

    def add_messages(self, messages: Sequence[JointStateSample | WrenchSample]) -> Counter[str]:
        """Messages in arrival order; see :meth:`Gathering.add_messages`."""
        return self.gathering.add_messages(messages)

    def add_block(self, block: MessageBlock) -> Counter[str]:
        """Messages decoded as one block; see :meth:`Gathering.add_block`."""
        return self.gathering.add_block(block)

    def process(self) -> int:
        """Run every sample that is ready through kinematics and the estimator; count."""
        batch = self.gathering.pop_ready()
        n = len(batch)
        if n == 0:
            return 0
        assert self.gathering.choice is not None  # samples come once the filter is chosen
        motion = self.stage.run(batch)
        if motion.samples is None:
            return n
        batch, twist, proper = motion.samples, motion.twist, motion.proper_acceleration
        assert twist is not None and proper is not None
        step = self.online.add(batch.times, twist, proper, batch.wrench, batch.wrench_raw,
                               batch.acceleration_noise, self.gathering.choice.past_span,
                               batch.angular_products)
        self.history.record_samples(batch.times, np.hstack((twist, proper, batch.wrench_raw)),
                                    self.samples)
        self.samples += n
        if "stamp_jump" in step.events:
            self._next_solve = None  # solve periods restart on the new time base
        if not step.times.size:
            return n
        h = self.history
        h.batch_time.append(float(step.times[-1]))
        h.batch_t2_max.append(float(step.t2.max()))
        h.batch_threshold.append(float(step.threshold))
        h.batch_contact.append(bool(step.contact.any()))
        h.batch_residual_rms.append(np.sqrt(np.mean(step.residual**2, axis=0)))
        self._last_time = float(step.times[-1])
        if self._next_solve is None:
            self._next_solve = float(step.times[0]) + self.solve_period
        if self._last_time >= self._next_solve:
            # One solve per due period; a long batch does not re-solve the same statistics.
            self.solve(self._last_time)
            periods = np.floor((self._last_time - self._next_solve) / self.solve_period) + 1
            self._next_solve += periods * self.solve_period
        return n

    def solve(self, t: float | None = None) -> Estimate | None:
        """Solve now (``t``: the sample time it stands for); a failure keeps the last one."""
        try:
            estimate = self.online.solve()
        except InertialIdError as exc:
            self.solve_failures.append(str(exc))
            return self.online.estimate
        if estimate is not None:
            self.history.record_solve(self._last_time if t is None else t, estimate)
        return estimate

    def finish(self) -> Estimate | None:
        """Process what is left (the filter is chosen from what there is if the record was
        shorter than its decision time) and solve once more; the final estimate."""
        self.gathering.decide(final=True)
        self.process()
        return self.solve()
