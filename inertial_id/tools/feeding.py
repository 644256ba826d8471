"""How replay paces a bag's messages into the pipeline: the passes of :func:`feed` (every
:data:`PROCESS_PERIOD` s of bag time while the gatherer chooses its filter, every
:data:`SETTLED_PERIOD` s after) and what it saw (:class:`Fed`, :func:`data_ledger`). Used by
:mod:`inertial_id.tools.replay` and the benchmarks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.pipeline import PayloadPipeline
from inertial_id.core.samples import JointStateSample, MessageBlock, WrenchSample

PROCESS_PERIOD = 0.1
"""Bag seconds between two pipeline passes (the gatherer's batches) while it chooses its filter."""
SETTLED_PERIOD = 5.0
"""Seconds of bag time between two passes once the filter is settled
(:attr:`Gathering.settled`; :data:`MAX_BLOCK` messages still end a pass): the gatherer's
samples no longer depend on the passes, and the pipeline hands them to the estimator in parts
that end at its solves, so larger passes only save the per-pass costs."""
MAX_BLOCK = 5000
"""Messages at most between two passes of the pipeline, whatever the stamps say."""


@dataclass
class Fed:
    """What :func:`feed` saw: the first stamp (s), the wrench frame, drops by reason (of
    messages), the count of wrench messages."""

    first_stamp: float = 0.0
    frame: str = ""
    dropped: Counter[str] = field(default_factory=Counter)
    wrenches: int = 0
    stopped: bool = False
    messages: int = 0


def data_ledger(fed: Fed, pipeline: PayloadPipeline) -> dict[str, Any]:
    """Where every wrench of the bag went (each wrench is one sample): dropped at the gatherer
    (by reason, from its :class:`~inertial_id.core.gathering.ledger.DropLedger`), synchronised,
    then used by the estimate, held, or dropped by the solver (by reason); ``used_share`` =
    used / wrenches. The counts add up to ``wrenches``."""
    solver = pipeline.online.ledger()
    return {
        "wrenches": fed.wrenches,
        "gatherer_dropped": pipeline.gathering.ledger.wrench_samples(),
        "gatherer_held": int(pipeline.gathering.synchronizer.wrenches_held),
        "synchronised": int(pipeline.samples),
        "used": solver["used"],
        "solver_held": solver["held"],
        "solver_dropped": {k[len("dropped_"):]: v for k, v in solver.items()
                           if k.startswith("dropped_") and v},
        "used_share": round(solver["used"] / fed.wrenches, 4) if fed.wrenches else 0.0,
    }


class _Feeder:
    """:func:`feed`'s state: the messages not yet given to the pipeline (blocks and lists
    of messages, in order) and when its next pass is due."""

    def __init__(self, pipeline: PayloadPipeline, period: float,
                 progress: Callable[[int], object] | None,
                 settled_period: float | None = None) -> None:
        self.pipeline, self.progress, self.first_period = pipeline, progress, period
        self.settled_period = period if settled_period is None else settled_period
        self.fed = Fed()
        self.next_process = -np.inf
        self.pending: list[MessageBlock | list[JointStateSample | WrenchSample]] = []
        self.count = 0

    @property
    def period(self) -> float:
        """Bag seconds between passes now: longer once the gatherer's filter is settled."""
        return self.settled_period if self.pipeline.gathering.settled else self.first_period

    def due(self, stamps: NDArray[np.float64]) -> int:
        """Index of the first of the next messages (their stamps, arrival order) after which
        a pass runs: stamped at or after the next pass, more than a second before the last
        (the stamps went back), or the :data:`MAX_BLOCK`-th held; ``stamps.size`` when none."""
        limit = MAX_BLOCK - self.count
        head = stamps[:limit]
        hits = np.flatnonzero((head >= self.next_process)
                              | (head < self.next_process - self.period - 1.0))
        if hits.size:
            return int(hits[0])
        return limit - 1 if limit <= stamps.size else stamps.size

    def add(self) -> None:
        """Everything held into the pipeline."""
        for part in self.pending:
            if isinstance(part, MessageBlock):
                self.fed.dropped += self.pipeline.add_block(part)
            else:
                self.fed.dropped += self.pipeline.add_messages(part)
        if self.progress is not None and self.count:
            self.progress(self.count)
        self.pending, self.count = [], 0

    def run(self, stamp: float) -> None:
        """A pass after the message stamped ``stamp``."""
        if self.next_process == -np.inf:
            first = self.pending[0]
            self.fed.first_stamp = float(first.stamps[0] if isinstance(first, MessageBlock)
                                         else first[0].stamp)
        self.add()
        self.pipeline.process()
        self.next_process = stamp + self.period

    def block(self, block: MessageBlock, stop: Callable[[], bool] | None) -> None:
        """A block of messages, split where passes fall."""
        start, stamps = 0, block.stamps
        while start < stamps.size:
            if stop is not None and stop():
                self.fed.stopped = True
                return
            end = start + self.due(stamps[start:]) + 1
            part = block.part(start, min(end, stamps.size))
            self.fed.messages += part.stamps.size
            if part.wrench.shape[0]:
                self.fed.wrenches += part.wrench.shape[0]
                self.fed.frame = self.fed.frame or part.frame_id
            self.pending.append(part)
            self.count += part.stamps.size
            if end <= stamps.size:
                self.run(float(stamps[end - 1]))
            start = end

    def message(self, message: JointStateSample | WrenchSample) -> None:
        """One message (:meth:`due`'s rule for one stamp)."""
        self.fed.messages += 1
        last = self.pending[-1] if self.pending else None
        if not isinstance(last, list):
            last = []
            self.pending.append(last)
        last.append(message)
        self.count += 1
        if isinstance(message, WrenchSample):
            self.fed.wrenches += 1
            self.fed.frame = self.fed.frame or message.frame_id
        stamp = message.stamp
        if (stamp >= self.next_process or stamp < self.next_process - self.period - 1.0
                or self.count >= MAX_BLOCK):
            self.run(stamp)


def feed(messages: Iterable[MessageBlock | JointStateSample | WrenchSample],
         pipeline: PayloadPipeline, period: float,
         progress: Callable[[int], object] | None = None,
         stop: Callable[[], bool] | None = None,
         settled_period: float | None = None) -> Fed:
    """Messages (log-time order; one at a time or as :class:`MessageBlock`s, which give the
    same passes) into the pipeline, a pass of it every ``period`` seconds of stamps, as the
    gatherer node batches, or every ``settled_period`` once the gatherer's filter is settled
    (:data:`SETTLED_PERIOD`); ``progress(n)`` after every n messages; ends early
    (``Fed.stopped``) once ``stop()`` is true (asked before each message, or each part of a
    block up to a pass).

    Stamps that go back by more than a second (the end of a glitch ahead, a bag played
    again) start the pacing anew, and a pass runs at least every ``MAX_BLOCK`` messages, so
    no stamp can hold the rest of the bag in memory."""
    feeder = _Feeder(pipeline, period, progress, settled_period)
    for item in messages:
        if isinstance(item, MessageBlock):
            feeder.block(item, stop)
            if feeder.fed.stopped:
                break
            continue
        if stop is not None and stop():
            feeder.fed.stopped = True
            break
        feeder.message(item)
    feeder.add()
    return feeder.fed
