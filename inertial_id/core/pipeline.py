"""The whole payload pipeline in one object, for offline replay and benchmarks.

:class:`PayloadPipeline` chains the same stage objects the three nodes run:
:class:`~inertial_id.core.gathering.gatherer.Gathering` (gatherer),
:class:`~inertial_id.core.stages.KinematicsStage` (kinematics) and
:class:`~inertial_id.core.estimation.stage.EstimationStage` (solver). The stage solves every
``solve_period`` seconds of *sample time* here, where the node times the same stage on its
steady clock. It keeps a compact history (one row per 0.1 s of samples and per solve) for
reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.compensation import Announcement
from inertial_id.core.estimation.online import OnlineEstimator
from inertial_id.core.estimation.online_types import StepResult
from inertial_id.core.estimation.stage import SOLVE_SHARE, EstimationStage
from inertial_id.core.gathering.gatherer import Gathering
from inertial_id.core.kinematics import SensorKinematics
from inertial_id.core.samples import JointStateSample, MessageBlock, WrenchSample
from inertial_id.core.stages import KinematicsStage

SAMPLE_EVERY = 10
"""One sample in this many is kept for the report's wrench-fit figure (100 Hz at 1 kHz)."""
HISTORY_PERIOD = 0.1
"""Seconds of sample time per row of the per-batch history, whatever the batches' size."""


@dataclass
class History:
    """What happened, for plots: per batch and per solve (times in s, sample stamps).

    Per :data:`HISTORY_PERIOD` of samples (a "batch"; a batch the estimator took whole is
    cut where the stamps cross a multiple of it): ``batch_time`` (last stamp),
    ``batch_t2_max``, ``batch_threshold``, ``batch_contact`` (any sample flagged),
    ``batch_residual_rms`` (6 per batch).
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
    _last_bin: float = field(default=float("nan"), repr=False)
    _last_count: int = field(default=0, repr=False)

    def record_samples(self, times: NDArray[np.float64], columns: Sequence[NDArray[np.float64]],
                       first: int) -> None:
        """Keep every ``SAMPLE_EVERY``-th of a batch whose first sample is the ``first``-th
        of the run: ``times`` (N,) and the row built from ``columns`` (N, k) each (18 in
        all)."""
        pick = np.flatnonzero((first + np.arange(times.size)) % SAMPLE_EVERY == 0)
        if pick.size:
            self.sample_time.append(times[pick])
            self.sample_rows.append(np.hstack([c[pick] for c in columns]))

    def record_step(self, step: StepResult) -> None:
        """The rows of one step of the estimator (samples it used or tested, in order), one
        per :data:`HISTORY_PERIOD` of their stamps: a step that begins in the period of the
        last row adds to that row."""
        t = step.times
        if not t.size:
            return
        bins = np.floor(t / HISTORY_PERIOD)
        starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
        counts = np.diff(np.r_[starts, t.size])
        t2 = np.maximum.reduceat(step.t2, starts)
        contact = np.logical_or.reduceat(step.contact, starts)
        square = np.add.reduceat(step.residual**2, starts, axis=0)
        if self._last_bin == bins[0] and self.batch_time:  # continues the last row
            count = self._last_count
            t2[0] = max(t2[0], self.batch_t2_max.pop())
            contact[0] |= self.batch_contact.pop()
            square[0] += self.batch_residual_rms.pop() ** 2 * count
            counts[0] += count
            self.batch_time.pop()
            self.batch_threshold.pop()
        self.batch_time.extend(t[np.r_[starts[1:], t.size] - 1].tolist())
        self.batch_t2_max.extend(t2.tolist())
        self.batch_threshold.extend([float(step.threshold)] * starts.size)
        self.batch_contact.extend(contact.tolist())
        self.batch_residual_rms.extend(np.sqrt(square / counts[:, None]))
        self._last_bin, self._last_count = float(bins[-1]), int(counts[-1])

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
                 online: OnlineEstimator, solve_period: float = 0.5,
                 solve_share: float = SOLVE_SHARE) -> None:
        if gathering.joint_names != kinematics.joint_names:
            raise InertialIdError(
                f"gatherer joints {gathering.joint_names} differ from the model's "
                f"{kinematics.joint_names}: lock the same joints in both")
        gathering.match(kinematics)
        self.gathering = gathering
        self.kinematics = kinematics
        self.stage = KinematicsStage(kinematics)
        self.estimation = EstimationStage(online, solve_period, solve_share=solve_share)
        self.history = History()
        self.samples = 0
        self.announcements: list[Announcement] = []
        """The driver's compensation announcements not yet applied (sensor frame), in
        order: each is applied before the first batch that reaches its stamp less the
        hold-off before a change (:meth:`announce`)."""
        self._last_time = float("nan")

    @property
    def online(self) -> OnlineEstimator:
        """The estimation stage's online estimator."""
        return self.estimation.online

    @property
    def solve_failures(self) -> list[str]:
        """Every failed solve's message, in order."""
        return self.estimation.failures

    def announce(self, announcements: Sequence[Announcement]) -> None:
        """What a driver subtracted from the recorded wrench (the applier's
        ``~/compensation``, ``pi`` in the sensor frame): added back to the samples, as the
        solver node does live."""
        self.announcements.extend(sorted(announcements, key=lambda a: a.stamp))

    def _apply_announcements(self, last: float) -> None:
        """The announcements due before samples up to ``last`` (s) enter the estimator:
        with the node's hold-offs (the estimator's gate margin before a change, and it plus
        the filter's span after)."""
        online = self.estimation.online
        before = online.config.gate_margin
        after = before + online.filter_span
        while self.announcements and self.announcements[0].stamp - before <= last:
            self.estimation.compensation.announce(self.announcements.pop(0), before, after)

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
        """Run every sample that is ready through kinematics and the estimation stage; count.

        The stage solves on sample time: it hands the samples to the estimator in steps that
        end where a solve falls due (the first sample at or after it); the estimator decides
        at samples, not at the ends of its steps, so what it decides does not depend on how
        many samples the gatherer handed over at once."""
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
        self.history.record_samples(batch.times, (twist, proper, batch.wrench_raw),
                                    self.samples)
        self.samples += n
        self._apply_announcements(float(batch.times[-1]))
        result = self.estimation.add({
            "times": batch.times, "twist": twist, "proper_acceleration": proper,
            "wrench": batch.wrench, "wrench_raw": batch.wrench_raw,
            "acceleration_noise": batch.acceleration_noise,
            "filter_span": self.gathering.choice.past_span,
            "angular_products": batch.angular_products})
        for step in result.steps:
            self.history.record_step(step)
            if step.times.size:
                self._last_time = float(step.times[-1])
        self._record_solves(result.solves)
        return n

    def _record_solves(self, solves: Sequence[tuple[float, Estimate]]) -> None:
        for t, estimate in solves:
            self.history.record_solve(t, estimate)

    def solve(self, t: float | None = None) -> Estimate | None:
        """Solve now (``t``: the sample time it stands for); a failure keeps the last one."""
        t = self._last_time if t is None else t
        estimate = self.estimation.solve(t)
        if estimate is not None and not self.estimation.failure:
            self.history.record_solve(t, estimate)
        return estimate

    def finish(self) -> Estimate | None:
        """Process what is left (the filter is chosen from what there is if the record was
        shorter than its decision time) and solve once more; the final estimate."""
        self.gathering.decide(final=True)
        self.process()
        return self.solve()
