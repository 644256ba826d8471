"""What a :class:`~inertial_id.core.gathering.gatherer.Gathering` dropped, by reason, ROS-free.

One :class:`DropLedger` per gathering counts the messages it refused (their values, their
frame, their bytes, or no URDF yet: :meth:`DropLedger.refuse`) beside the synchronizer's own
counters (stamps, spikes, gaps, resets: :meth:`DropLedger.track`). The gatherer node's
diagnostics and replay's data ledger both read it, so they name the same reasons with the
same keys: ``<kind>_<reason>`` with kind ``joint_state`` or ``wrench``.
"""

from __future__ import annotations

from collections import Counter

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.timepolicy import JUMP, OUT_OF_RANGE, RESETS

STAMP_DROPS = tuple(f"{kind}_{reason}" for kind in ("joint_state", "wrench")
                    for reason in (JUMP, OUT_OF_RANGE, "out_of_order"))
"""The synchronizer's counters of messages dropped for their stamps (the time policy's, and
duplicates or late ones within a stream)."""
MESSAGE_DROPS = (*STAMP_DROPS, "joint_state_spike")
"""The synchronizer's counters of messages it dropped: :data:`STAMP_DROPS` and joint states
farther from the last than the joints can move (spikes)."""
WRENCH_PREFIX = "wrench_"
"""The keys of dropped wrenches (messages or samples) start with it."""
WRENCH_SAMPLE_DROPS = ("joint_state_gap",)
"""Keys of dropped wrench samples that do not start with :data:`WRENCH_PREFIX` (a wrench
dropped because the joint states around it have a gap)."""


class OtherFrameError(SampleError):
    """A wrench whose header frame_id is not the wrench stream's
    (:class:`~inertial_id.core.gathering.gatherer.FrameFollower`)."""

    drop_reason = "other_frame"


OTHER_FRAME = WRENCH_PREFIX + OtherFrameError.drop_reason
"""The counter key of a wrench dropped for its frame (:class:`OtherFrameError`)."""


def drop_key(kind: str, exc: InertialIdError) -> str:
    """The counter key of a ``kind`` message (``joint_state`` or ``wrench``) refused with
    ``exc``: ``<kind>_<exc.drop_reason>`` (``invalid``, ``duplicate_joints``, ``other_frame``,
    ``undecodable``)."""
    return f"{kind}_{exc.drop_reason}"


def is_wrench_sample(key: str) -> bool:
    """Whether a drop counted under ``key`` is a wrench's (each wrench is one sample)."""
    return key.startswith(WRENCH_PREFIX) or key in WRENCH_SAMPLE_DROPS


class DropLedger:
    """Messages and samples a gathering dropped, by reason (see the module docstring).

    ``refused`` counts the messages refused before the synchronizer, ``last_error`` keeps the
    latest error text of each of their reasons; the synchronizer's counters are read where
    they are kept (:meth:`track`)."""

    def __init__(self) -> None:
        self.refused: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}
        self._synchronizer: Counter[str] = Counter()

    def track(self, counters: Counter[str]) -> None:
        """Read the synchronizer's ``counters`` (drops by reason and :data:`RESETS`) too."""
        self._synchronizer = counters

    def refuse(self, key: str, error: str) -> str:
        """Count one message refused under ``key`` (:func:`drop_key`), ``error`` saying why;
        returns ``key``."""
        self.refused[key] += 1
        self.last_error[key] = error
        return key

    @property
    def resets(self) -> int:
        """Stamp jumps the streams followed (:data:`RESETS`): no drop, a restart."""
        return int(self._synchronizer[RESETS])

    def dropped(self) -> Counter[str]:
        """Every drop by reason: the refused messages and the synchronizer's counters (the
        ones it keeps at zero included), without :data:`RESETS`."""
        out = Counter(self._synchronizer)
        out.update(self.refused)
        out.pop(RESETS, None)
        return out

    def by_kind_prefix(self) -> Counter[str]:
        """:meth:`dropped` without :data:`WRENCH_SAMPLE_DROPS`: each key then names the kind
        of what was dropped by its prefix (a ``joint_state_gap`` is a wrench's drop)."""
        return Counter({key: count for key, count in self.dropped().items()
                        if key not in WRENCH_SAMPLE_DROPS})

    def wrench_samples(self) -> dict[str, int]:
        """The wrenches dropped (each is one sample), by reason, the reasons seen only."""
        return {key: int(count) for key, count in self.dropped().items()
                if count and is_wrench_sample(key)}
